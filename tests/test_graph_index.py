"""The graph index DotRAG and CS-RAG share (`kgr.methods.graph_index`): name finding (against its quadratic
definition), the labels a set of words names, and the question words it remembers across questions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import RecordingEncoder, SettledEncoder

from kgr.embed import PhraseCache, TextVectors
from kgr.graph import normalize_name
from kgr.lexicon import CHUNK, WORD, bounded, content_tokens
from kgr.methods.graph_index import PlanIndex

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
    starts = sorted({m.start() for m in WORD.finditer(text)} | {m.start() for m in CHUNK.finditer(text)})
    ends = sorted({m.end() for m in WORD.finditer(text)} | {m.end() for m in CHUNK.finditer(text)})
    names, found = index.store.name_index, []
    for s in starts:
        for e in ends:
            if e <= s or e - s > index.max_name_chars:
                continue
            key = normalize_name(text[s:e])
            if key in names and content_tokens(key) and bounded(text, s, e):
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
    assert {"new", "new york"} <= index.name_prefixes and not {"new york c", "new yorkshire"} & index.name_prefixes


def test_a_label_is_named_by_words_that_hold_all_of_its_content_words():
    index = index_over(["x"], ("date_of_birth", "placeOfDeath", "the", "birth"))
    assert index.labels_named_by({"birth", "date", "when"}).tolist() == [True, False, False, True]
    assert index.labels_named_by({"death"}).tolist() == [False, False, False, False]
    assert index.labels_named_by({"the", "place", "death"}).tolist() == [False, True, False, False]  # no stopwords


def test_question_words_are_encoded_with_the_question_and_not_remembered_across_questions():
    # a word remembered from another question would carry bits of that question's pass into this one's record
    encoder = RecordingEncoder()
    index = index_over(["x"], ("born in",))
    first = index.word_vectors(["born", "city"], "where was he born", TextVectors(encoder))
    second = index.word_vectors(["born", "river"], "which river", TextVectors(encoder))
    assert encoder.calls == [["where was he born", "born", "city"], ["which river", "born", "river"]]
    assert first["born"].tolist() == second["born"].tolist() == [4.0, 1.0] and second["river"].tolist() == [5.0, 1.0]


def test_label_vectors_are_read_from_the_phrase_cache_by_a_later_run(tmp_path):
    labels = ("born in", "spouse", "plays in club")

    def index(encoder) -> PlanIndex:
        built = index_over(["x"], labels)
        built.store.encoder, built.store.phrases = encoder, PhraseCache(tmp_path, encoder)
        return built

    first, second = SettledEncoder(), SettledEncoder()
    vectors = index(first).label_vectors
    assert first.calls == [list(labels)]
    assert np.array_equal(index(second).label_vectors, vectors) and second.calls == []


def star_index(leaves: int) -> PlanIndex:
    """A PlanIndex over a path 0 - 1 and a hub 1 with `leaves` more neighbours (relationship i joins its ends)."""
    src = np.array([0] + [1] * leaves, dtype=np.int64)
    dst = np.array([1] + list(range(2, leaves + 2)), dtype=np.int64)
    names = [f"e{i}" for i in range(leaves + 2)]
    store = SimpleNamespace(num_entities=len(names), src=src, dst=dst, relation_labels=[], names=names,
                            name_index={normalize_name(n): [i] for i, n in enumerate(names)})
    return PlanIndex(store)


def test_edges_within_a_limit_keep_the_nearest_and_every_edge_of_an_entity_they_reach():
    index = star_index(50)
    (rids, near, far), short = index.edges_within([0], 2)
    assert rids.tolist() == list(range(51)) and near[0] == 0 and (near[1:] == 1).all() and not short
    # the limit is met after the first hop: the hub's 50 further edges are not walked, and the walk says so
    (rids, _, _), short = index.edges_within([0], 2, limit=1)
    assert rids.tolist() == [0] and short
    # a frontier entity's edges come whole: the hub's edges are all taken once any is
    (rids, _, _), short = index.edges_within([0], 2, limit=5)
    assert rids.tolist() == list(range(51)) and not short


def test_most_like_scores_the_first_limit_relationships_outside_those_taken_and_says_so():
    from kgr.methods.graph_index import most_like

    vectors = np.eye(8, dtype=np.float32)[[0, 1, 2, 3, 4, 5, 6, 7]]
    edges = (np.arange(8), np.zeros(8, dtype=np.int64), np.arange(8))
    question = vectors[6]  # most like relationship 6, which lies past the limit
    best, cut = most_like(vectors, question, edges, taken=[1], k=2, limit=4)
    assert [rid for rid, *_ in best] == [0, 2] and cut  # 0, 2, 3, 4 scored; 5, 6, 7 not
    best, cut = most_like(vectors, question, edges, taken=[1], k=1, limit=100)
    assert best[0][0] == 6 and not cut


def test_what_the_graph_calls_an_entity_is_the_labels_it_is_an_object_of():
    names = ["S1", "S2", "D1", "Basel", "CH"]
    labels = ("adjacent station", "located in", "located_in_inverse")
    src = np.array([0, 0, 1, 2, 4])  # S1 - S2 adjacent; S1, S2 in D1; D1 in Basel; CH "contains" Basel (an inverse twin)
    dst = np.array([1, 2, 2, 3, 3])
    store = SimpleNamespace(num_entities=len(names), src=src, dst=dst, relation_ids=np.array([0, 1, 1, 1, 2]),
                            relation_labels=list(labels), names=names, name_index={}, kind_relations=[])
    index = PlanIndex(store)
    assert index.called([1]) == ["adjacent station"]  # S2
    assert index.called([2]) == ["located in"]  # D1: a district is no station, though both are "located in" something
    assert index.called([3]) == ["located in"]  # an inverse twin calls its base relation's subjects nothing
    assert index.called([0]) == [] and index.called([1, 2]) == ["adjacent station", "located in"]


def test_what_the_graph_calls_an_entity_is_also_the_class_a_relation_stating_kinds_gives_it():
    names = ["Ferrante", "Osteria Ferrante", "Marco", "Restaurant", "Chef", "Golden Ladle"]
    labels = ("instance of", "head chef", "award")
    src = np.array([0, 1, 2, 0, 1, 0])
    dst = np.array([3, 3, 4, 2, 2, 5])
    store = SimpleNamespace(num_entities=len(names), src=src, dst=dst, relation_ids=np.array([0, 0, 0, 1, 1, 2]),
                            relation_labels=list(labels), names=names, name_index={}, kind_relations=["instance of"])
    index = PlanIndex(store)
    # a restaurant is the object of no label: its class names it, as `TypeLooks` reads the type it belongs to
    assert index.called([0]) == ["Restaurant"] and index.called([0, 1]) == ["Restaurant"]
    assert index.called([2]) == ["Chef", "head chef"]
    assert index.called([5]) == ["award"] and index.called([3]) == ["instance of"]


@pytest.fixture(scope="module")
def movies(tmp_path_factory):
    """(store, offline policy) of the tiny movie graph (with its schema: actor, director, genre, movie, ...)."""
    from test_dotrag import tiny_movies_store

    from kgr.config import OfflineConfig
    from kgr.methods.offline.policy import OfflinePolicy

    for _, graph in tiny_movies_store(tmp_path_factory):
        yield graph, OfflinePolicy.for_graph(graph, OfflineConfig(), 3, TextVectors(graph.encoder))


def test_a_fill_keeps_to_the_type_the_answer_kind_words_name(movies):
    """`to_named_kind` (`dotrag.fill_named_kind`): "what genre is [X]" keeps the edges
    reaching a genre; a question whose words name no kind, or several ("who": actors, directors and writers alike),
    keeps them all."""
    from kgr.methods.graph_index import plan_index, to_named_kind

    graph, policy = movies
    anchor = graph.names.index("Dark Harbor")
    edges, _ = plan_index(graph).edges_within([anchor], 2, 10_000)
    (rids, near, far), kind = to_named_kind(policy, graph, "what genre is [Dark Harbor]", anchor, edges)
    assert kind == "genre"
    assert 0 < len(rids) < len(edges[0]) and all(graph.types_of(int(e)) == ["genre"] for e in far)
    for question in ("tell me about [Dark Harbor]", "who worked on [Dark Harbor]"):
        kept, none = to_named_kind(policy, graph, question, anchor, edges)
        assert none is None and all(np.array_equal(a, b) for a, b in zip(kept, edges))
