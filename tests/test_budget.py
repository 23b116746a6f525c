"""`kgr.methods.budget.pack_paths`: token packing on a hand-made store with a word-count tokenizer (no model).

Each line costs its words + 1 (the newline), so every expected budget below is computed from the lines by hand.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kgr.methods.budget import entity_line, pack_paths, token_counter, triple_line


def words(text: str) -> int:
    return len(text.split())


def make_store():
    names = ["Wendy", "Dark Harbor", "Clint", "Golden Hour", "Ada", "English", "Nora"]
    descriptions = ["", "", "", "", "", "", ""]
    # rid: (src, relation, dst)
    triples = [
        (1, "written_by", 0),   # 0  Dark Harbor written_by Wendy
        (1, "directed_by", 2),  # 1  Dark Harbor directed_by Clint
        (3, "written_by", 0),   # 2  Golden Hour written_by Wendy
        (3, "directed_by", 4),  # 3  Golden Hour directed_by Ada
        (3, "starred_actors", 2),  # 4 Golden Hour starred_actors Clint
        (1, "in_language", 5),  # 5  Dark Harbor in_language English
    ]
    store = SimpleNamespace(
        names=names,
        descriptions=descriptions,
        src=[s for s, _, _ in triples],
        dst=[d for _, _, d in triples],
        passages=[("Dark Harbor (film)", "Dark Harbor is a thriller written by Wendy."),
                  ("Golden Hour (film)", "Golden Hour is a drama directed by Ada and written by Wendy, a long one.")],
    )
    store.triple = lambda rid: (names[triples[rid][0]], triples[rid][1], names[triples[rid][2]])
    return store


def cost(*lines: str) -> int:
    return sum(words(line) + 1 for line in lines)


@pytest.fixture
def store():
    return make_store()


def test_lines_format(store):
    assert triple_line(store, 1) == "(Dark Harbor; directed_by; Clint)"
    assert entity_line(store, 4) == "Ada"
    store.descriptions[4] = "a director"
    assert entity_line(store, 4) == "Ada: a director"


def test_shared_triples_are_counted_once(store):
    # Wendy -> Golden Hour -> Ada and Wendy -> Golden Hour -> Clint share their first triple.
    paths = [(2, 3), (2, 4), (0, 1)]
    packed = pack_paths(store, paths, 1000, words)
    lines = packed.context.splitlines()
    assert lines == [triple_line(store, r) for r in (2, 3, 4, 0, 1)]  # each triple once, in rank order
    assert packed.rids == [2, 3, 4, 0, 1] and packed.kept_paths == [0, 1, 2] and packed.cut_paths == []
    assert packed.tokens == cost(*lines)
    # A path repeating a triple within itself pays once as well.
    assert pack_paths(store, [(2, 2)], 1000, words).tokens == cost(triple_line(store, 2))


def test_budget_is_respected_exactly(store):
    paths = [(2, 3), (2, 4)]
    full = cost(triple_line(store, 2), triple_line(store, 3), triple_line(store, 4))
    exact = pack_paths(store, paths, full, words)
    assert exact.kept_paths == [0, 1] and exact.tokens == full  # a path fitting exactly is kept
    short = pack_paths(store, paths, full - 1, words)
    assert short.kept_paths == [0] and short.cut_paths == [1] and short.tokens == full - cost(triple_line(store, 4))
    assert short.tokens <= full - 1
    nothing = pack_paths(store, paths, 0, words)
    assert (nothing.kept_paths, nothing.cut_paths, nothing.context, nothing.tokens) == ([], [0, 1], "", 0)


def test_a_path_that_does_not_fit_is_skipped_and_a_later_smaller_one_still_fits(store):
    first = cost(triple_line(store, 2), triple_line(store, 3))
    paths = [(2, 3), (0, 1), (2, 4)]  # the second path needs two new triples, the third only one
    packed = pack_paths(store, paths, first + cost(triple_line(store, 4)), words)
    assert packed.kept_paths == [0, 2] and packed.cut_paths == [1]
    assert packed.rids == [2, 3, 4]
    assert "Dark Harbor" not in packed.context


def test_entities_are_listed_in_rank_order_once(store):
    paths = [(2, 3), (2, 4), (0, 1)]
    endpoints = [(0, 3, 4), (0, 3, 2), (0, 1, 2)]
    packed = pack_paths(store, paths, 1000, words, endpoints=endpoints)
    assert packed.eids == [0, 3, 4, 2, 1]
    # Without endpoints the entities come from the triples themselves.
    assert set(pack_paths(store, paths, 1000, words).eids) == {0, 1, 2, 3, 4}


def test_descriptions_are_packed_once_with_their_first_path(store):
    store.descriptions[3] = "a 1998 drama"
    paths = [(2, 3), (2, 4)]
    packed = pack_paths(store, paths, 1000, words, endpoints=[(0, 3, 4), (0, 3, 2)])
    lines = packed.context.splitlines()
    assert lines.count("Golden Hour: a 1998 drama") == 1
    assert packed.tokens == cost(*lines)


def test_paths_without_relationships_are_entity_lines(store):
    store.descriptions[6] = "an actress"
    packed = pack_paths(store, [(), (), (5,)], 1000, words, endpoints=[(6,), (4,), (1, 5)])
    assert packed.context.splitlines() == ["Nora: an actress", "Ada", triple_line(store, 5)]
    assert packed.kept_paths == [0, 1, 2] and packed.eids == [6, 4, 1, 5]
    assert packed.tokens == cost("Nora: an actress", "Ada", triple_line(store, 5))
    # The same entity twice costs once.
    again = pack_paths(store, [(), ()], 1000, words, endpoints=[(4,), (4,)])
    assert again.context == "Ada" and again.tokens == cost("Ada") and again.kept_paths == [0, 1]


def test_passages_are_packed_after_paths_within_what_is_left(store):
    first, second = (f"[{t}] {x}" for t, x in store.passages)
    path_cost = cost(triple_line(store, 0))
    packed = pack_paths(store, [(0,)], path_cost + cost(first), words, passages=[1, 0])
    # The longer passage does not fit; the shorter one still does; paths always come first.
    assert packed.pids == [0]
    assert packed.context.splitlines() == [triple_line(store, 0), first]
    assert packed.tokens == path_cost + cost(first)
    roomy = pack_paths(store, [(0,)], 1000, words, passages=[1, 0])
    assert roomy.pids == [1, 0] and roomy.context.splitlines()[1:] == [second, first]


def test_token_counter_counts_o200k_tokens():
    count = token_counter("o200k_base")
    assert count("(Dark Harbor; directed_by; Clint Ranger)") > 0
    assert count("a") == 1 and count("") == 0
    assert token_counter("o200k_base") is count  # cached per encoding
