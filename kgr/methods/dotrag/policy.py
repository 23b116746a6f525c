"""Two of the three policies that make DotRAG's decisions: an LLM's and the random one (the offline one, shared with
CS-RAG's planner, is `kgr.methods.offline.policy`)."""

from __future__ import annotations

from kgr.backbone.decide import DecisionSpec, decide
from kgr.backbone.llm import LLMClient
from kgr.methods.dotrag.random_policy import RandomChooser
from kgr.methods.offline.decisions import Continue, Policy, Step, Stop

STAGE = "retrieve"


def _lines(items: list[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items))


def _order_spec(name: str, n: int) -> DecisionSpec[list[int]]:
    """A ranking of all n options by index (missing ones are appended in offered order)."""
    index = {"type": "integer", "enum": list(range(n))}
    schema = {
        "type": "object",
        "properties": {"ranking": {"type": "array", "items": index, "uniqueItems": True, "minItems": 1},
                       "query": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["ranking"],
    }

    def validate(data: dict) -> list[int]:
        ranking = list(data["ranking"])
        return ranking + [i for i in range(n) if i not in ranking]

    return DecisionSpec(name, schema, validate)


class LLMPolicy(Policy):
    """Decisions by a LiteLLM backbone; invalid replies are repaired once, then the offline policy decides."""

    reads_previews = True

    def __init__(self, client: LLMClient, offline: Policy, overview: str = ""):
        self.name = client.model
        self.client = client
        self.offline = offline
        self.overview = overview or "(no overview)"

    def confident(self, qid, question, anchor, options):
        return True  # the model commits to its ranking; hedging is for the embedding-only policy

    def begin_question(self, question):
        return self.offline.begin_question(question)  # the fallback's

    def reads_similarity(self, anchors):
        return True  # a failed decision falls back to the offline ranking, which may read it

    def rank_anchors(self, qid, question, anchors):
        if len(anchors) <= 1:
            return list(range(len(anchors)))
        text = _lines([f"{a.name} (types: {', '.join(a.types) or 'none'})" for a in anchors])
        return decide(self.client, _order_spec("dotrag_rank_anchors", len(anchors)),
                      {"question": question, "anchors": text, "overview": self.overview},
                      lambda: self.offline.rank_anchors(qid, question, anchors),
                      stage=STAGE, question_id=qid).value

    def rank_trajectories(self, qid, question, anchor, options):
        text = _lines([
            f"{o.type} ({o.count} entities; via {', '.join(o.relations)})"
            + "".join(f"\n   e.g. {p}" for p in o.previews)
            for o in options
        ])
        order = _order_spec("dotrag_rank_trajectories", len(options))
        spec = DecisionSpec(order.name, {**order.schema, "required": ["ranking", "query"]},
                            lambda data: (order.validate(data), str(data["query"]).strip() or question))
        return decide(self.client, spec,
                      {"question": question, "anchor": anchor.name, "options": text, "overview": self.overview},
                      lambda: self.offline.rank_trajectories(qid, question, anchor, options),
                      stage=STAGE, question_id=qid).value

    def review(self, qid, question, anchor, walk, options, max_hops):
        evidence = "\n".join(
            f"depth {h.depth} ({h.type}, query {h.query!r}, {h.kept} kept): " + "; ".join(h.examples) for h in walk
        )
        text = _lines([f"{o.type} ({o.count} entities; via {', '.join(o.relations)})" for o in options]) or "(none)"
        depths = list(range(1, len(walk) + 1))
        schema = {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["continue", "stop"] if options else ["stop"]},
                "option": {"type": "integer", "enum": list(range(len(options)))} if options else {"type": "integer"},
                "query": {"type": "string"},
                "depths": {"type": "array", "items": {"type": "integer", "enum": depths}, "uniqueItems": True},
                "reason": {"type": "string"},
            },
            "required": ["action"],
        }

        def validate(data: dict) -> Step:
            if data["action"] == "continue":
                if "option" not in data or not str(data.get("query", "")).strip():
                    raise ValueError("continue needs `option` and a non-empty `query`")
                return Continue(data["option"], str(data["query"]).strip())
            if not data.get("depths"):
                raise ValueError("stop needs `depths`, the preferred depths")
            return Stop(list(data["depths"]))

        return decide(self.client, DecisionSpec("dotrag_review", schema, validate),
                      {"question": question, "anchor": anchor.name, "evidence": evidence, "options": text,
                       "depth": len(walk), "max_hops": max_hops},
                      lambda: self.offline.review(qid, question, anchor, walk, options, max_hops),
                      stage=STAGE, question_id=qid).value


class RandomPolicy(Policy):
    """The paper's "random choices" ablation: every decision uniformly at random, seeded per question."""

    name = "random"
    reads_previews = False

    def __init__(self, seed: int = 0):
        self.chooser = RandomChooser(seed)

    def rank_anchors(self, qid, question, anchors):
        return self.chooser.order(len(anchors), question_id=qid, purpose="anchors")

    def rank_trajectories(self, qid, question, anchor, options):
        return self.chooser.order(len(options), question_id=qid, purpose=f"trajectories:{anchor.name}"), question

    def review(self, qid, question, anchor, walk, options, max_hops):
        rng = self.chooser.rng(question_id=qid, purpose=f"review:{anchor.name}:{len(walk)}")
        if options and rng.random() < 0.5:
            return Continue(rng.randrange(len(options)), question)
        return Stop([rng.randint(1, len(walk))])

    def confident(self, qid, question, anchor, options):
        return True  # random choices are the ablation: no hedging

    def begin_question(self, question):
        return []

    def reads_similarity(self, anchors):
        return False
