"""The decisions a retrieval policy makes and the options it chooses among: DotRAG asks them of its policy (offline,
LLM or random) hop by hop, and CS-RAG's planner asks the offline policy the same about the graph around a mention."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Union


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
    # the words of the relation labels the reached entities are objects of, anywhere in the graph (what the graph
    # calls them: `adjacent station`); None: not looked up
    called: list[str] | None = None


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

    def named_kind(self, question: str, anchor: AnchorOption, type_names: list[str]) -> int | None:
        """The one type of `type_names` the question's words naming the answer's kind name (None: none, or no reading
        of them)."""
        return None

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
