"""CS-RAG planning index: name finding (against its quadratic definition) and the labels' content words."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kgr.graph import normalize_name
from kgr.methods.csrag_plan import _CHUNK, _WORD, PlanIndex, _bounded, content_tokens

NAMES = ["Paris", "Paris Hilton", "Hilton", "New York", "New York City", "York", "C.S. Lewis", "Ǆemal Bijedić",
         "Straße", "the", "U.S.", "Jean-Paul Sartre", "Sartre", "a   b"]


def index_over(names: list[str], labels: tuple[str, ...] = ()) -> PlanIndex:
    """A PlanIndex over a store with these entity names and relation labels, and no edges."""
    name_index: dict[str, list[int]] = {}
    for eid, name in enumerate(names):
        name_index.setdefault(normalize_name(name), []).append(eid)
    empty = np.zeros(0, dtype=np.int64)
    store = SimpleNamespace(num_entities=len(names), src=empty, dst=empty, relation_labels=list(labels), names=names,
                            name_index=name_index)
    return PlanIndex(store)


def find_names_by_definition(index: PlanIndex, text: str) -> list[tuple[int, int, str]]:
    """Every word or chunk start against every word or chunk end, then the longest non-overlapping matches."""
    starts = sorted({m.start() for m in _WORD.finditer(text)} | {m.start() for m in _CHUNK.finditer(text)})
    ends = sorted({m.end() for m in _WORD.finditer(text)} | {m.end() for m in _CHUNK.finditer(text)})
    names, found = index.store.name_index, []
    for s in starts:
        for e in ends:
            if e <= s or e - s > index.max_name_chars:
                continue
            key = normalize_name(text[s:e])
            if key in names and content_tokens(key) and _bounded(text, s, e):
                found.append((s, e, index.store.names[names[key][0]]))
    chosen: list[tuple[int, int, str]] = []
    for s, e, name in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
        if all(e <= cs or s >= ce for cs, ce, _ in chosen):
            chosen.append((s, e, name))
    return sorted(chosen)


@pytest.mark.parametrize("text", [
    "Paris Hilton met C.S. Lewis in New   York City, not in Paris.",
    "PARIS HILTON; new york city (York) and Jean-Paul Sartre's U.S. tour",
    "Parisian Hiltons in Yorkshire: no whole words here",
    "ǅemal Bijedić, STRASSE and Straße; a b and a   b; the the",
    "", "   ", "Sartre", "(Paris)", "New\nYork\tCity"])
def test_find_names_equals_its_definition(text):
    index = index_over(NAMES)
    assert index.find_names(text) == find_names_by_definition(index, text)


def test_find_names_takes_the_longest_match():
    index = index_over(NAMES)
    assert [name for _, _, name in index.find_names("Paris Hilton visited New York City.")] == \
        ["Paris Hilton", "New York City"]
    assert index.begins_a_name("new york c") and not index.begins_a_name("new yorkshire")


def test_label_tokens_are_the_labels_content_words():
    index = index_over(["x"], ("date_of_birth", "placeOfDeath", "the"))
    assert index.label_tokens == [{"date", "birth"}, {"place", "death"}, set()]
