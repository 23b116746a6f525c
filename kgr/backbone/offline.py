"""The offline policy: DotRAG's decisions made deterministically from embeddings, with no LLM.

It knows nothing about any dataset. Everything comes from the question and the graph: the relation labels and
entity types offered at each step, and the graph's type-level schema (which relation joins which types) for
looking ahead. A candidate *chain* is a sequence of steps (relation, type) leaving the anchor. Its score is how
well its steps explain the question's content words:

    score = sum over words w of max over steps i of sim(w, step i)  -  step_cost * len(chain)
            - unsupported * [a step explains no word best]  -  order_cost * [order inversions]

sim(w, step) is the larger cosine between the word and the step's relation words or type words. Words that only
describe the anchor itself (next to its mention and similar to one of its types, as in "the film [X]") are left out.
English nests relations outward from the mention ("the directors of the films written by [X]"), so a step nearer
the anchor should explain words nearer the mention; each inversion of that order costs `order_cost`.
The best chain decides the trajectory ranking, each continuation and where to stop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from kgr.backbone.policy import AnchorOption, Continue, HopSummary, Step, Stop, TrajectoryOption
from kgr.graph import relation_words

_WORD = re.compile(r"[a-z0-9']+")
_MENTION = re.compile(r"\[([^\[\]]+)\]")
# Generic English function words: they carry no relation or type meaning in any graph.
STOP_WORDS = frozenset(
    "a an the of in on at is are was were be been being did do does done what which whom whose how that this these "
    "those with by for to and or also as from their its his her they them there it he she i you we me my our your "
    "any some can could would should will shall may might has have had about into than then so such".split()
)

Chain = tuple[tuple[str, str], ...]  # ((relation, type), ...) from the anchor outward


@dataclass
class OfflineSettings:
    """Weights of the chain score (tuned on MetaQA dev questions only)."""

    step_cost: float = 0.1
    unsupported: float = 1.0
    order_cost: float = 0.1
    appositive_distance: int = 2
    appositive_similarity: float = 0.6
    relation_share: float = 0.5  # a relation counts for a type if it has this share of the most frequent one


def question_words(question: str, anchor_name: str) -> list[tuple[str, int]]:
    """Content words outside the anchor's mention, each with its distance (in words) from the mention."""
    mention = _MENTION.search(question)
    if mention:
        left, right = question[:mention.start()], question[mention.end():]
    else:
        lowered, name = question.lower(), anchor_name.lower()
        at = lowered.find(name)
        left, right = (question[:at], question[at + len(name):]) if at >= 0 and name else ("", question)
    words = []
    left_words = _WORD.findall(left.lower())
    for k, word in enumerate(left_words):
        if word not in STOP_WORDS:
            words.append((word, len(left_words) - k))
    for k, word in enumerate(_WORD.findall(right.lower())):
        if word not in STOP_WORDS:
            words.append((word, k + 1))
    return words


class OfflinePolicy:
    """Deterministic decisions from embeddings of the question, relation labels and type names."""

    name = "offline"

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray], schema: dict[str, list[tuple[str, str]]],
                 max_hops: int = 3, settings: OfflineSettings | None = None):
        self._embed = embed
        self.schema = schema
        self.max_hops = max_hops
        self.settings = settings or OfflineSettings()
        self._vectors: dict[str, np.ndarray] = {}

    # -- decisions ---------------------------------------------------------------------------------------------
    def rank_anchors(self, qid: str, question: str, anchors: list[AnchorOption]) -> list[int]:
        """Named anchors first, longer (more specific) names first, then by similarity to the question."""
        return sorted(range(len(anchors)),
                      key=lambda i: (not anchors[i].named, -len(anchors[i].name), -anchors[i].similarity, i))

    def rank_trajectories(self, qid: str, question: str, anchor: AnchorOption,
                          options: list[TrajectoryOption]) -> tuple[list[int], str]:
        scorer = self._scorer(question, anchor)
        best: list[tuple[float, Chain]] = []
        for option in options:
            chains = [((r, option.type),) + tail for r in self._relations(option)
                      for tail in self._lookahead(option.type, self.max_hops - 1)]
            best.append(max((scorer(c), c) for c in chains))
        order = sorted(range(len(options)), key=lambda i: (-best[i][0], i))
        relation, type_name = best[order[0]][1][0] if options else ("", "")
        return order, f"{anchor.name} {relation_words(relation)} {relation_words(type_name)}".strip()

    def review(self, qid: str, question: str, anchor: AnchorOption, walk: list[HopSummary],
               options: list[TrajectoryOption], max_hops: int) -> Step:
        scorer = self._scorer(question, anchor)
        done: Chain = tuple((h.relation, h.type) for h in walk)
        stop_scores = [(scorer(done[:d]), d) for d in range(1, len(done) + 1)]
        best_stop = max(stop_scores, key=lambda s: (s[0], -s[1]))
        best_go: tuple[float, int, str] | None = None
        if len(done) < max_hops:
            for index, option in enumerate(options):
                for relation in self._relations(option):
                    for tail in self._lookahead(option.type, max_hops - len(done) - 1):
                        score = scorer(done + ((relation, option.type),) + tail)
                        if best_go is None or score > best_go[0]:
                            best_go = (score, index, relation)
        if best_go is not None and best_go[0] > best_stop[0]:
            _, index, relation = best_go
            return Continue(index, f"{relation_words(relation)} {relation_words(options[index].type)}")
        return Stop([best_stop[1]])

    # -- scoring -----------------------------------------------------------------------------------------------
    def _relations(self, option: TrajectoryOption) -> list[str]:
        return option.relations or [""]

    def _lookahead(self, type_name: str, depth: int) -> list[Chain]:
        """All continuations of up to `depth` steps from a type along the schema, the empty one included."""
        chains: list[Chain] = [()]
        if depth <= 0:
            return chains
        for relation, next_type in self.schema.get(type_name, []):
            for tail in self._lookahead(next_type, depth - 1):
                chains.append(((relation, next_type),) + tail)
        return chains

    def _vector(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            for text, vector in zip(missing, self._embed(missing)):
                self._vectors[text] = vector
        return np.stack([self._vectors[t] for t in texts])

    def _scorer(self, question: str, anchor: AnchorOption) -> Callable[[Chain], float]:
        """A chain-scoring function for this question (step similarities cached per question)."""
        settings = self.settings
        words = question_words(question, anchor.name)
        if words and anchor.types:
            kinds = self._vector([relation_words(t) for t in anchor.types])
            sims = self._vector([w for w, _ in words]) @ kinds.T
            words = [(w, d) for (w, d), s in zip(words, sims.max(axis=1))
                     if not (d <= settings.appositive_distance and s > settings.appositive_similarity)]
        if not words:
            return lambda chain: -settings.step_cost * len(chain)
        word_vectors = self._vector([w for w, _ in words])
        distance = np.array([d for _, d in words], dtype=float)
        step_cache: dict[tuple[str, str], np.ndarray] = {}

        def step_similarity(step: tuple[str, str]) -> np.ndarray:
            if step not in step_cache:
                relation, type_name = step
                texts = [relation_words(relation) or type_name, relation_words(type_name)]
                step_cache[step] = (word_vectors @ self._vector(texts).T).max(axis=1)
            return step_cache[step]

        def score(chain: Chain) -> float:
            if not chain:
                return float("-inf")
            sims = np.stack([step_similarity(step) for step in chain], axis=1)  # words x steps
            best_step = sims.argmax(axis=1)
            total = float(sims.max(axis=1).sum()) - settings.step_cost * len(chain)
            if len(set(best_step.tolist())) < len(chain):
                total -= settings.unsupported
            if len(chain) > 1:
                means = [distance[best_step == i].mean() if (best_step == i).any() else 0.0
                         for i in range(len(chain))]
                total -= settings.order_cost * sum(1 for a, b in zip(means, means[1:]) if a > b)
            return total

        return score
