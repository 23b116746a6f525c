"""The graph's type-level schema: which relation joins which entity types, how often, and how typical each such step
is. The offline policy reads it to score chains (`kgr.methods.offline`), the overview stage to describe the graph."""

from __future__ import annotations

import math
import threading
import weakref
from collections import Counter
from typing import Callable, TypeVar

import numpy as np

from kgr.graph import inverse_base, relation_words
from kgr.reach import csr_entries
from kgr.store import GraphStore

T = TypeVar("T")


# What is derived once per store and shared (both methods and each thread's method instance read it): by function.
_PER_STORE: "dict[Callable, weakref.WeakKeyDictionary]" = {}
_PER_STORE_LOCK = threading.Lock()


def _once_per_store(build: Callable[[GraphStore], T], store: GraphStore) -> T:
    """`build(store)`, computed once per store and shared: read it, do not change it."""
    with _PER_STORE_LOCK:
        found = _PER_STORE.setdefault(build, weakref.WeakKeyDictionary()).get(store)
    if found is None:
        found = build(store)
        with _PER_STORE_LOCK:
            found = _PER_STORE[build].setdefault(store, found)
    return found


def step_counts(store: GraphStore) -> Counter:
    """How many relationships make each type-level step (from type, relation, to type), in both directions; counted
    once per store (0.18 s on MetaQA's 134k edges), so the tally is shared: read it, do not change it."""
    return _once_per_store(_count_steps, store)


def _count_steps(store: GraphStore) -> Counter:
    indptr, type_ids = store.type_indptr, store.type_ids
    counts = np.diff(indptr)
    # every (edge, source type, target type) combination
    src_rep = np.repeat(np.arange(len(store.src)), counts[store.src])
    src_types = type_ids[csr_entries(indptr, store.src)[0]]
    dst_counts = counts[store.dst[src_rep]]
    edge = np.repeat(src_rep, dst_counts)
    ta = np.repeat(src_types, dst_counts)
    tb = type_ids[csr_entries(indptr, store.dst[src_rep])[0]]
    relation = store.relation_ids[edge]
    tally: Counter = Counter()
    for a, r, b, n in _unique_counts(ta, relation, tb):
        types, label = store.type_names, store.relation_labels[r]
        tally[(types[a], label, types[b])] += n
        tally[(types[b], label, types[a])] += n
    return tally


def subject_arrivals(store: GraphStore) -> frozenset[tuple[str, str]]:
    """The steps (relation, type) that arrive at the subject end of the relation its label's words name: more of the
    relation's edges have a subject of the type than an object of it (a book reached along `author` from its author;
    for an `_inverse` twin, whose words are its base's, more have an object of it). A relation between things of one
    kind arrives at both ends alike, so at neither. Once per store (0.2 s on MetaQA's 134k edges)."""
    return _once_per_store(_subject_arrivals, store)


def _subject_arrivals(store: GraphStore) -> frozenset[tuple[str, str]]:
    indptr, type_ids = store.type_indptr, store.type_ids
    counts = np.diff(indptr)

    def typed_ends(ends: np.ndarray) -> Counter:
        edge = np.repeat(np.arange(len(ends)), counts[ends])
        types = type_ids[csr_entries(indptr, ends)[0]]
        return Counter({(r, t): n for r, t, n in _unique_counts(store.relation_ids[edge], types)})

    subjects, objects = typed_ends(store.src), typed_ends(store.dst)
    labels, types = store.relation_labels, store.type_names
    # a twin's words name its base relation, whose subjects are the twin's objects
    twins = {r for r, label in enumerate(labels) if inverse_base(relation_words(label))}

    def at_subject(key: tuple[int, int]) -> bool:
        as_subject, as_object = subjects[key], objects[key]
        return as_object > as_subject if key[0] in twins else as_subject > as_object

    return frozenset((labels[r], types[t]) for r, t in {*subjects, *objects} if at_subject((r, t)))


# A graph whose labels are phrasings (an LLM's OpenIE triples) rather than a vocabulary: hundreds of labels, and at
# least this share of its relationships carry a label used at most twice. MuSiQue's OpenIE graph: 5,043 labels, 0.28;
# MetaQA, WC2014, 2Wiki's evidence graph and every dev graph: <= 27 labels, <= 0.01 (a toy graph of a few triples has
# rare labels only because it is small). A walk there follows phrasings, and the same fact may be phrased otherwise.
OPEN_VOCABULARY_SHARE = 0.2
OPEN_VOCABULARY_LABELS = 100


def rare_label_share(store: GraphStore) -> float:
    """The share of the graph's relationships whose label at most one other relationship carries."""
    if not len(store.relation_ids):
        return 0.0
    uses = np.bincount(store.relation_ids)
    return float((uses[store.relation_ids] <= 2).mean())


def open_vocabulary(store: GraphStore) -> bool:
    """Whether the graph's labels are phrasings rather than a vocabulary (`OPEN_VOCABULARY_SHARE`)."""
    return len(store.relation_labels) >= OPEN_VOCABULARY_LABELS and rare_label_share(store) >= OPEN_VOCABULARY_SHARE


def type_schema(store: GraphStore, share: float = 0.5,
                tally: Counter | None = None) -> dict[str, list[tuple[str, str]]]:
    """Type-level steps (relation, next type) seen in the graph, in both directions, most frequent first.

    An entity may carry several types, so a relation also links minor types (a director who also acts is an
    actor); a step is kept when it has at least `share` of the count of that relation's most frequent target type.
    """
    tally = step_counts(store) if tally is None else tally
    best: Counter = Counter()
    for (a, r, _), n in tally.items():
        best[(a, r)] = max(best[(a, r)], n)
    schema: dict[str, list[tuple[str, str]]] = {t: [] for t in store.type_names}
    for (a, r, b), n in sorted(tally.items(), key=lambda item: -item[1]):
        if n >= share * best[(a, r)]:
            schema[a].append((r, b))
    return {t: steps for t, steps in schema.items() if steps}


# A type holding less than this share of a relation's edges into a target type (against the type holding most) reads
# them only because some of its members carry another type too: on a graph typed by role (no schema) actors who share
# a movie's name have its `release_year`. 5 %: MetaQA without its schema 2-hop 0.891 -> 0.956; every share counted
# (no floor) cost MetaQA 3-hop 0.982 -> 0.967, where directors who write hold a fair share of `written_by` (decisions.md)
RARE_SOURCE_SHARE = 0.05


def step_priors(tally: Counter) -> dict[tuple[str, str, str], float]:
    """log of how typical each step is: its count against the relation's top target type, the type's top relation,
    and (below `RARE_SOURCE_SHARE` only) the type that leaves by the relation to that target most.

    0 for the dominant reading of a relation (`directed_by` from a movie reaches a director), negative for the
    readings that only exist because entities carry several types (`directed_by` reaching a writer who directs;
    `release_year` leaving an actor who shares a movie's name).
    """
    by_relation: Counter = Counter()
    by_target: Counter = Counter()
    by_source: Counter = Counter()
    for (a, r, b), n in tally.items():
        by_relation[(a, r)] = max(by_relation[(a, r)], n)
        by_target[(a, b)] = max(by_target[(a, b)], n)
        by_source[(r, b)] = max(by_source[(r, b)], n)
    return {(a, r, b): math.log(n / by_relation[(a, r)]) + math.log(n / by_target[(a, b)])
            + min(0.0, math.log(n / (RARE_SOURCE_SHARE * by_source[(r, b)]))) for (a, r, b), n in tally.items()}


def _unique_counts(*columns: np.ndarray):
    if not len(columns[0]):
        return []
    stacked = np.stack([c.astype(np.int64) for c in columns], axis=1)
    unique, counts = np.unique(stacked, axis=0, return_counts=True)
    return [(*map(int, row), int(n)) for row, n in zip(unique, counts)]
