"""DotRAG's plan: the anchors a question names and the (anchor, first-hop type) trajectories to walk, in priority order.

`TrajectoryPlan` is what `DotRAG.make_plan` returns and `DotRAG.retrieve` walks; `to_dict` is its JSON form, the one
`kgr plan` stores, `kgr plan --json` prints and a record's `trace["plan"]` holds, and `from_dict` reads it back. The
JSON form is the plans table's since plan version 4 (the keys below, in this order, no version key): the version is a
part of the plan key (`kgr.methods.runner.plan_key`), so a plan stored by another planner version is never read, it
is planned again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from kgr.errors import KgrError

# 2: plans carry unmatched mentions and warnings; an unmatched mention no longer seeds
# 3: plans carry the question as the policy read it (names found in an unbracketed question marked as mentions)
# 4: plans carry the anchors the question offers as alternatives
# 5: the offline policy follows near-tied first-hop trajectories, reads an inferred type as its own relation only and
#    "the film [X]" as naming a wordless anchor
# 6: the offline policy's answer_type term (the words naming the answer's kind against the last type's members)
# 7: the offline policy hedges when its best chain leaves the word nearest the mention unexplained (nearest_explained)
# 8: the offline policy reads a generational noun as its kin noun once per generation ("grandparents")
# 9: a word supports a step it fits nearly as well as its best (support_margin); a bridge costs bridge_cost
# 10: before a mention only the word right by it (or the verb of "... by [X]") describes the anchor
# 11: a relative wh-word (after the first) is no content word
# 12: a kin word reads as its generic kin noun too, a compound kin term as the links it names
# 13: near-tied first relations to the leading type are pairs of their own
# 14: a name the question writes as a proper name anchors however many texts hold it; 15: "else" a sharing cue
# 16: two words for one relation name two steps along it when the chain goes on ("films directed by the [X] director")
# 17: a step leaving a type that holds under 5 % of the relation's edges into its target is atypical (step_priors)
# 18: a near tie is a gap strictly under tie_margin, whatever the rounding (offline.within_margin)
# 19: "what does [X] do" asks for an occupation (lexicon.ACTIVITY_QUESTION)
# 20: a noun naming the answer's kind names the type the graph's labels call it (offline.TypeLooks)
# 21: such a noun tells no first relation into that type from another (`ChainScorer.affinity`): near-tied, both walked
# 22: a wh-word names no step arriving at the subject end of a label naming its object, and places only the last step;
# a plan whose best chain is the one relation into the kind the question names is sure (not hedged)
# 23: a plan whose best chain misses the kind a noun of the question clearly names, where another chain reaches it,
# is unsure (hedged); 24: a hedged plan walks every first relation into the leading type (up to hedge_trajectories)
# 25: the chain score has no role bonus, agent cost or right offset (the dev suite read alike without them); 26: a
# noun naming the answer's kind explains no step of a chain ending elsewhere unless it fits that step itself, and
# "was born in" reads as a verb (a wh-word may name its subject end); 27: a last step no word names but arriving at
# the kind a noun of the question names costs as a bridge; 28: a Freebase-style label is read with its type segment
# ("pilot airline": `kgr.graph.subject_kind`); 29: a question naming such a label by its property alone ("genre") is
# confident, unless the property names a kind of the graph
# 30: a plan is sure of a relation a question word names, not of a type's name alone (`OfflinePolicy.confident`);
# 31: the classes a relation stating kinds gives a type's members name it (`GraphStore.type_naming_classes`); 32:
# "when" names the types whose members spell dates as a noun names its type (`GraphStore.date_types`); 33: a walk
# standing among entities stated of the class a kind noun names has reached that kind (`PlanIndex.called`); 34: "under"
# leads a verb's doer as "by" does (`direction.AGENT_PREPOSITIONS`); 35: one step into the named kind is unsure
# where the anchor's role word names another way out
PLAN_VERSION = 35


@dataclass(frozen=True)
class Pair:
    """A planned (anchor, first-hop type) trajectory, its ranks, and the query its first hop searches with."""

    anchor: int  # entity id
    anchor_rank: int  # the policy's rank of the anchor
    type: str  # the first hop's entity type
    type_rank: int  # the policy's rank of the type among the anchor's trajectories
    query: str
    previews: tuple[str, ...] = ()  # relationship texts the policy was shown for this type


@dataclass(frozen=True)
class PlannedAnchor:
    """A candidate anchor as the policy ranked it."""

    eid: int
    name: str
    types: tuple[str, ...]
    named: bool  # its name appears in the question (bracketed or found), not a seed most like the question
    similarity: float | None  # cosine to the question, when the policy read it
    rank: int  # the policy's rank among the question's anchors


@dataclass(frozen=True)
class TrajectoryPlan:
    """Trajectory discovery and ranking for one question: what `kgr plan` stores and retrieval walks."""

    question: str  # the question as the policy read it (names found in an unbracketed question marked as mentions)
    anchors: tuple[PlannedAnchor, ...]
    pairs: tuple[Pair, ...]  # the trajectories to walk, in priority order
    alternatives: tuple[int, ...] = ()  # the anchors the question offers as its answer's alternatives
    hedged: bool = False  # the policy was unsure of its ranking and kept more trajectories
    unmatched_mentions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    latency_ms: float = 0.0
    usage: Mapping[str, float] | None = None  # the backbone usage of planning, added when the runner stores the plan

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what the plans table and a record's trace hold)."""
        data: dict[str, Any] = {
            "question": self.question,
            "anchors": [{**asdict(a), "types": list(a.types)} for a in self.anchors],
            "pairs": [{**asdict(p), "previews": list(p.previews)} for p in self.pairs],
            "alternatives": list(self.alternatives),
            "hedged": self.hedged,
            "unmatched_mentions": list(self.unmatched_mentions),
            "warnings": list(self.warnings),
            "timings_ms": dict(self.timings_ms),
            "latency_ms": self.latency_ms,
        }
        if self.usage is not None:
            data["usage"] = dict(self.usage)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrajectoryPlan":
        """A plan from its JSON form; raises KgrError naming the keys a plan needs that `data` lacks."""
        missing = [key for key in ("question", "anchors", "pairs", "latency_ms") if key not in data]
        if missing:
            raise KgrError(f"not a DotRAG plan (version {PLAN_VERSION}): it lacks {', '.join(missing)}")
        return cls(
            question=data["question"],
            anchors=tuple(PlannedAnchor(a["eid"], a["name"], tuple(a["types"]), a["named"], a["similarity"], a["rank"])
                          for a in data["anchors"]),
            pairs=tuple(Pair(p["anchor"], p["anchor_rank"], p["type"], p["type_rank"], p["query"],
                             tuple(p.get("previews", ()))) for p in data["pairs"]),
            alternatives=tuple(data.get("alternatives", ())),
            hedged=bool(data.get("hedged", False)),
            unmatched_mentions=tuple(data.get("unmatched_mentions", ())),
            warnings=tuple(data.get("warnings", ())),
            timings_ms=dict(data.get("timings_ms", {})),
            latency_ms=data["latency_ms"],
            usage=data.get("usage"),
        )
