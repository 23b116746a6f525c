"""bench/scale.py's graph generator: the shape of what it writes (issue #37 item 1). No kgr ingest: a few seconds."""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kgr.ingest import read_graph

ROOT = Path(__file__).resolve().parents[1]
SCALE = 0.01  # 888 entities, 4,866 relationships


def _load_scale():
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "bench" / "scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


scale = _load_scale()


@pytest.fixture(scope="module")
def structure():
    return scale.build_structure(SCALE, seed=0)


@pytest.fixture(scope="module")
def written(tmp_path_factory, structure):
    """The names and described files of one structure, with its questions."""
    questions = scale.make_questions(structure)
    folders = {}
    for texts in ("names", "described"):
        folder = tmp_path_factory.mktemp(texts)
        manifest = scale.write_graph(structure, texts, folder, questions)
        folders[texts] = (folder, manifest)
    return folders


def _tsv(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def test_counts_and_types_are_the_papers_proportions(structure):
    types = scale.type_counts(SCALE)
    relations = scale.relation_counts(SCALE, types)
    assert structure.num_entities == round(scale.PAPER["entities"] * SCALE) == sum(types.values())
    assert structure.num_relationships == round(scale.PAPER["relationships"] * SCALE) == sum(relations.values())
    assert Counter(structure.types) == types
    for index, name in enumerate(scale.RELATION_NAMES):
        spec = scale.RELATIONS[name]
        mask = structure.rel == index
        assert mask.sum() == relations[name]
        assert {structure.types[e] for e in structure.src[mask]} == {spec.subject}
        assert {structure.types[e] for e in structure.dst[mask]} == {spec.object}
    pairs = set(zip(structure.src.tolist(), structure.rel.tolist(), structure.dst.tolist()))
    assert len(pairs) == structure.num_relationships  # no repeated relationship
    assert not np.any(structure.src == structure.dst)  # no paper cites itself
    assert len(set(structure.names)) == structure.num_entities  # names are unique across types


def test_degrees_have_hubs_and_no_isolated_entity(structure):
    degree = scale.degree_stats(structure)
    assert degree["isolated"] == 0
    assert degree["max"] >= 10 * degree["median"]
    assert degree["per_type"]["paper"]["max"] >= 5 * degree["per_type"]["paper"]["median"]


def test_files_are_read_by_kgr_with_the_types_and_token_lengths(written, structure):
    for texts, (folder, manifest) in written.items():
        graph = read_graph([folder / "entities.tsv", folder / "relationships.tsv"], schema=folder / "schema.toml")
        assert len(graph.entities) == manifest["entities"] == structure.num_entities
        assert len(graph.relationships) == manifest["relationships"] == structure.num_relationships
        assert Counter(t for e in graph.entities.values() for t in e.types) == scale.type_counts(SCALE)
        assert all(bool(e.description) == (texts == "described") for e in graph.entities.values())
    folder, manifest = written["described"]
    # Mean token lengths near the paper's (22.9M / 88,815 and 56.9M / 486,616), counted from the texts written.
    descriptions = [row[3] for row in _tsv(folder / "entities.tsv")[1:]]
    texts = [row[3] for row in _tsv(folder / "relationships.tsv")[1:]]
    assert statistics.fmean(map(scale.tokens, descriptions)) == pytest.approx(scale.ENTITY_TOKENS_MEAN, rel=0.03)
    assert statistics.fmean(map(scale.tokens, texts)) == pytest.approx(scale.RELATIONSHIP_TOKENS_MEAN, rel=0.03)
    assert manifest["entity_description_tokens"] == sum(map(scale.tokens, descriptions))
    measured = manifest["measured_wordpiece"]
    if measured is not None:  # the encoder's tokenizer agrees with the counts made from the word lists
        for counts in measured.values():
            assert counts["wordpiece_mean"] == counts["computed_mean"]


def test_questions_answers_are_what_their_path_reaches_in_the_triples(written):
    folder, manifest = written["names"]
    names = {row[0]: row[1] for row in _tsv(folder / "entities.tsv")[1:]}
    step: dict[tuple[str, str], set[str]] = {}
    for source, relation, target in _tsv(folder / "relationships.tsv")[1:]:
        step.setdefault((names[source], relation), set()).add(names[target])
        step.setdefault((names[target], "~" + relation), set()).add(names[source])
    questions = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines()]
    assert len(questions) == manifest["questions"] == 200
    assert Counter(q["hops"] for q in questions) == {1: 67, 2: 67, 3: 66}
    assert len({q["question"] for q in questions}) == len(questions)
    for q in questions:
        anchor, *relations = q["path"][0].split(" > ")
        assert q["anchors"] == [anchor] and f"[{anchor}]" in q["question"] and len(relations) == q["hops"]
        frontier = {anchor}
        for relation in relations:
            frontier = {n for e in frontier for n in step.get((e, relation), ())}
        frontier.discard(anchor)
        assert sorted(frontier) == q["answers"] and 1 <= len(q["answers"]) <= scale.MAX_ANSWERS
        assert set(q) >= {"id", "question", "anchors", "answers", "hops"}


def test_the_same_seed_writes_the_same_files_and_text_modes_share_the_graph(tmp_path, written):
    again = scale.build_structure(SCALE, seed=0)
    scale.write_graph(again, "described", tmp_path / "again", scale.make_questions(again))
    first = written["described"][0]
    for name in ("entities.tsv", "relationships.tsv", "questions.jsonl", "schema.toml"):
        assert (tmp_path / "again" / name).read_bytes() == (first / name).read_bytes(), name
    names = written["names"][0]
    assert [r[:3] for r in _tsv(first / "relationships.tsv")[1:]] == _tsv(names / "relationships.tsv")[1:]
    assert (first / "questions.jsonl").read_bytes() == (names / "questions.jsonl").read_bytes()
    other = scale.build_structure(SCALE, seed=1)
    assert other.names != again.names and not np.array_equal(other.src, again.src)


def test_a_slice_keeps_a_fraction_of_the_relationships_with_their_entities(tmp_path, structure):
    rows = np.arange(0, structure.num_relationships, 10)
    manifest = scale.write_graph(structure, "names", tmp_path, None, relationship_rows=rows)
    relationships = _tsv(tmp_path / "relationships.tsv")[1:]
    ids = {row[0] for row in _tsv(tmp_path / "entities.tsv")[1:]}
    assert len(relationships) == manifest["relationships"] == len(rows)
    assert ids == {x for row in relationships for x in (row[0], row[2])} and len(ids) == manifest["entities"]
    full = scale.full_counts(structure, "names")
    assert full["entities"] == structure.num_entities and full["encoder_tokens"] > manifest["encoder_tokens"]
