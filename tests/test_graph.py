"""`kgr.graph`: relation labels as words, and name normalization."""

from __future__ import annotations

import pytest

from kgr.graph import default_description, normalize_name, relation_words, subject_kind, typed_labels


@pytest.mark.parametrize("label, words", [
    ("directed_by", "directed by"),
    ("hasGenre", "has genre"),
    ("plays_in_club_inverse", "plays in club inverse"),
    ("was born in", "was born in"),  # an open-vocabulary phrase stays as it is
    # a path is named by its last segment, whatever namespace comes before it
    ("/football/player/plays_in_club", "plays in club"),
    ("people.person.place_of_birth", "place of birth"),
    ("http://dbpedia.org/ontology/birthPlace", "birth place"),
    ("dbo:birthPlace", "birth place"),
    ("people__person__place_of_birth", "place of birth"),  # a path flattened with double underscores
    ("__film__film__directed_by", "directed by"),
    ("film__film__directed_by__inverse", "directed by inverse"),  # an inverse twin keeps its property
    ("/film/film/directed_by/inverse", "directed by inverse"),
    ("plays__inverse", "plays inverse"),
    ("born_in.", "born in"),  # one segment: not a path
    ("v2.0", "v2 0"),  # a last segment without letters names nothing: the whole label is kept
])
def test_relation_words(label, words):
    assert relation_words(label) == words


@pytest.mark.parametrize("label, kind", [
    ("__aviation__pilot__airline", "pilot"),  # Freebase's domain, type, property: the type names the subjects
    ("/film/film/directed_by", "film"),
    ("people.person.place_of_birth", "person"),
    ("__film__film__directed_by__inverse", "film"),  # an inverse twin is read as its base label
    ("aircraft_model__manufacturer", None),  # two segments: no type segment to read
    ("directed_by", None),
    ("http://dbpedia.org/ontology/birthPlace", None),  # a URI's segments are a namespace
    ("dbo:birthPlace", None),
    ("has part", None),  # words, not a path
])
def test_subject_kind_reads_a_freebase_style_labels_type_segment(label, kind):
    assert subject_kind(label) == kind


def test_typed_labels_are_the_freebase_style_labels_of_a_graph_with_several_type_segments():
    labels = ["__aviation__pilot__airline", "__aviation__airline__hub", "directed_by", "dbo:birthPlace"]
    assert typed_labels(labels) == {"__aviation__pilot__airline", "__aviation__airline__hub"}
    # one segment on every label is a namespace (`bench/relabel.py`'s path style)
    assert typed_labels(["/football/player/plays_in_club", "/football/player/is_in_country"]) == frozenset()
    assert typed_labels(["directed_by", "written_by"]) == frozenset()


def test_a_path_label_is_described_by_its_own_words():
    assert default_description("Ada", "/people/person/place_of_birth", "Lyon") == "Ada place of birth Lyon"


def test_normalize_name_casefolds_and_collapses_whitespace():
    assert normalize_name("  Ada   LOVELACE ") == "ada lovelace"
