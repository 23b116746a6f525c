"""Gold intermediate sets: the entities a k-hop question's reasoning passes through.

Definition (walks). For a question with anchors S, answers T and hop count k, an entity x is a gold
intermediate at position i (1 <= i <= k-1) when some walk of exactly k steps from an anchor to an
answer visits x after i steps; equivalently x is reachable from S in exactly i steps and reaches T in
exactly k-i steps. I is the union over positions, minus the anchors. The graph is undirected because
MetaQA templates follow relations in both directions (actor -> movie is a reversed `starred_actors`).

Why walks and not simple paths: the DotRAG appendix takes I to be the entities on the k-hop
anchor-to-answer paths that produce the answers. MetaQA built its k-hop answers by chaining k relation
lookups from the topic entity without forbidding revisits (only the topic entity itself is removed
from the answers), so the chains it followed are walks; restricting to simple paths would drop
intermediates of walks that legitimately revisit a node. Positions are what matter, so an answer that
also sits inside some walk is an intermediate too (the metrics keep such answers, see `metrics.py`),
while anchors never count: they are given to every method and would inflate golden proximity.

Efficiency: layers are grown from both ends (anchors forward, answers backward), always expanding the
smaller frontier, until together they span k steps; the entities where they meet are then propagated
outwards, intersecting with the stored layers. A k-hop question thus costs about k frontier expansions,
and a hub at one end (a language or genre answer) is expanded only when the other side is larger.

Hub cap: with `max_degree` set, an entity with more neighbors than that may be an endpoint but never
an interior node of a walk (it is not expanded and not counted in I). This is the exact result on the
graph whose interior hubs are removed, so it does not depend on the search order; such hubs (a genre
linking thousands of films) carry no question-specific evidence. The default (None) is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kgr.evaluate.questions import Question

Neighbors = Callable[[str], Iterable[str]]


def gold_intermediates(
    neighbors: Neighbors,
    anchors: Iterable[str],
    answers: Iterable[str],
    hops: int | None,
    max_degree: int | None = None,
) -> set[str]:
    """Return the entities on k-step anchor-to-answer walks, excluding anchors (empty for hops < 2)."""
    anchors, answers = set(anchors), set(answers)
    if hops is None or hops < 2 or not anchors or not answers:
        return set()
    adjacency = _CachedNeighbors(neighbors, max_degree)

    # forward[i] holds entities at walk position i; backward[j] those at position hops - j.
    forward, backward = [anchors], [answers]
    while len(forward) + len(backward) - 2 < hops:
        if len(forward[-1]) <= len(backward[-1]):
            forward.append(adjacency.expand(forward[-1], interior=len(forward) > 1))
        else:
            backward.append(adjacency.expand(backward[-1], interior=len(backward) > 1))
        if not forward[-1] or not backward[-1]:
            return set()

    # Propagate outwards from the meeting layer; the layers are already hub-free inside the walk,
    # so propagation expands every member (an endpoint hub included).
    meet = len(forward) - 1
    layer = {meet: adjacency.interior_only(forward[meet] & backward[hops - meet], meet, hops)}
    for pos in range(meet - 1, 0, -1):
        reached = adjacency.expand(layer[pos + 1], interior=False) & forward[pos]
        layer[pos] = adjacency.interior_only(reached, pos, hops)
    for pos in range(meet + 1, hops):
        reached = adjacency.expand(layer[pos - 1], interior=False) & backward[hops - pos]
        layer[pos] = adjacency.interior_only(reached, pos, hops)
    return set().union(*(layer[pos] for pos in range(1, hops))) - anchors


def gold_for_questions(
    questions: Iterable[Question], neighbors: Neighbors, max_degree: int | None = None
) -> dict[str, set[str]]:
    """Compute the gold intermediate set of every question, keyed by question id."""
    return {
        q.id: gold_intermediates(neighbors, q.anchors, q.answers, q.hops, max_degree=max_degree)
        for q in questions
    }


class _CachedNeighbors:
    """Neighbor lists read once per call, with the hub rule applied to interior positions."""

    def __init__(self, neighbors: Neighbors, max_degree: int | None):
        self._neighbors = neighbors
        self._max_degree = max_degree
        self._cache: dict[str, frozenset[str]] = {}

    def of(self, entity: str) -> frozenset[str]:
        """Return the (cached) neighbor set of an entity."""
        found = self._cache.get(entity)
        if found is None:
            found = self._cache[entity] = frozenset(self._neighbors(entity))
        return found

    def is_hub(self, entity: str) -> bool:
        """Tell whether the entity exceeds the degree cap."""
        return self._max_degree is not None and len(self.of(entity)) > self._max_degree

    def expand(self, layer: set[str], interior: bool) -> set[str]:
        """Return all neighbors of a layer; interior hubs are dead ends and are not expanded."""
        out: set[str] = set()
        for entity in layer:
            if not (interior and self.is_hub(entity)):
                out |= self.of(entity)
        return out

    def interior_only(self, layer: set[str], pos: int, hops: int) -> set[str]:
        """Drop hubs from a layer at an interior walk position; endpoints may be hubs."""
        if self._max_degree is None or pos in (0, hops):
            return layer
        return {e for e in layer if not self.is_hub(e)}
