"""DotRAG's retrieval decisions, and the three policies that make them: LLM, offline and random."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Union

from kgr.backbone.decide import DecisionSpec, decide
from kgr.backbone.llm import LLMClient
from kgr.methods.dotrag.random_policy import RandomChooser

STAGE = "retrieve"


@dataclass
class AnchorOption:
    """A candidate anchor entity."""

    name: str
    types: list[str]
    named: bool  # its name appears in the question
    similarity: float | None = None  # cosine to the question, given when the policy reads it (reads_similarity)


@dataclass
class TrajectoryOption:
    """A first-hop entity type reachable from an anchor, with relationship previews."""

    type: str
    count: int
    relations: list[str]  # labels of the relationships that lead there
    previews: list[str] = field(default_factory=list)


@dataclass
class HopSummary:
    """What one hop of path search found."""

    depth: int
    type: str
    query: str
    relation: str  # the relation of the kept relationship most similar to the hop's query
    kept: int
    examples: list[str] = field(default_factory=list)


@dataclass
class Continue:
    option: int  # index into the offered continuation options
    query: str
    # near-tied options, or near-tied relations to the chosen option, searched too: (index, query)
    also: list[tuple[int, str]] = field(default_factory=list)
    keep: list[int] = field(default_factory=list)  # depths walked so far that stay answers (a near-tied Stop)
    # the continuation is a hedge the policy ranks below stopping: the kept depths rank before the deeper ones
    speculative: bool = False


@dataclass
class Stop:
    depths: list[int]  # preferred depths, best first


Step = Union[Continue, Stop]


class Policy:
    """Makes DotRAG's decisions for one question at a time.

    A policy makes three decisions (`rank_anchors`, `rank_trajectories`, `review`). DotRAG calls its hooks on every
    policy, so that one may prepare its own work: `warm` and `hop_queries` once per run, before any question is
    timed; `begin_question` and `prepare` per question. Their defaults do nothing.
    """

    name: str = "policy"
    reads_previews: bool = False  # whether rank_trajectories reads TrajectoryOption.previews (each costs a product)

    def warm(self) -> None:
        """Build and encode what the policy reads of the graph (DotRAG keeps the texts it encodes meanwhile for the
        whole run)."""

    def hop_queries(self, steps: Iterable[tuple[str, str]]) -> list[str]:
        """The hop queries the policy may write for the graph's (relation, type) steps, to encode before any question
        is timed."""
        return []

    def begin_question(self, question: str) -> list[str]:
        """Forget what the last question left behind; return the texts this one's decisions will encode first."""
        return []

    def prepare(self, question: str, anchor_names: list[str]) -> None:
        """Get ready to decide for the anchors named (those DotRAG will rank trajectories for), e.g. encode in one batch
        the words their decisions will read."""

    def reads_similarity(self, anchors: list[AnchorOption]) -> bool:
        """Whether rank_anchors would read these anchors' similarity to the question (it costs an encoder pass)."""
        return False

    def rank_anchors(self, qid: str, question: str, anchors: list[AnchorOption]) -> list[int]:
        raise NotImplementedError

    def rank_trajectories(self, qid: str, question: str, anchor: AnchorOption,
                          options: list[TrajectoryOption]) -> tuple[list[int], str]:
        raise NotImplementedError

    def review(self, qid: str, question: str, anchor: AnchorOption, walk: list[HopSummary],
               options: list[TrajectoryOption], max_hops: int) -> Step:
        raise NotImplementedError

    def confident(self, qid: str, question: str, anchor: AnchorOption, options: list[TrajectoryOption]) -> bool:
        """Whether the trajectory ranking is more than a guess (else DotRAG follows several trajectories)."""
        return True

    def near_ties(self, qid: str, question: str, anchor: AnchorOption, options: list[TrajectoryOption]) -> int:
        """How many of the ranking's leading trajectories it cannot tell apart (DotRAG follows them all; 1: a clear
        first)."""
        return 1

    def tied_first_queries(self, qid: str, question: str, anchor: AnchorOption,
                           options: list[TrajectoryOption]) -> list[str]:
        """Hop queries for other first relations to the leading trajectory's type that the ranking cannot tell from
        its own ("[X]'s grandparents": `father` and `mother`); DotRAG walks them too."""
        return []


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
