"""Composed relationship vectors (`embedding.compose_relationships`): a relationship without a description of its own
gets its parts' vectors weighted by token count, summed and normalized; described ones are still encoded; a composed
vector is never reused as an encoded one. Uses a deterministic stand-in encoder (no model load)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from kgr.embed import COMPOSED_HASH_PREFIX, ComposedVectors, load_vectors, text_hash
from kgr.graph import default_description, relation_words
from kgr.ingest import fill_descriptions, link_passages, read_graph
from kgr.ingest.stage import graph_tables, store_graph
from kgr.project import Project


class WordEncoder:
    """Vectors from each text's hash; a text's token count is its number of words. Records the texts it encodes."""

    model_name = "stand-in"
    batch_size = 8
    dimension = 16
    encode_seconds = 0.0
    vectors_kind = "torch"

    def truncated(self, texts):
        return 0

    def __init__(self):
        self.encoded: list[str] = []

    def encode(self, texts, progress=None):
        self.encoded += list(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8) for t in texts]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), 16) - 127.5
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def token_counts(self, texts):
        return np.array([len(t.split()) for t in texts], dtype=np.int64)


def test_a_chunk_composes_the_weighted_sum_of_its_rows_parts_normalized():
    part_vectors = np.array([[3, 0], [0, 4], [1, 1]], dtype=np.float16)
    composed = ComposedVectors(rows=np.array([2, 5, 9]), parts=np.array([[0, 1, 0], [1, 2, 1], [2, 2, 0]]),
                               part_vectors=part_vectors, part_weights=np.array([1, 2, 3]))
    offsets, vectors = composed.chunk(4, 10)
    assert offsets.tolist() == [1, 5]  # rows 5 and 9; row 2 is before the chunk
    expected = np.array([[0 + 3 + 0, 8 + 3 + 8], [3 + 3 + 3, 3 + 3 + 0]], dtype=np.float64)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)
    assert composed.chunk(0, 2)[0].tolist() == []


@pytest.fixture()
def tables(tmp_path) -> dict:
    path = tmp_path / "kb.jsonl"
    path.write_text(
        '{"subject": "Ada Lovelace", "relation": "worked_with", "object": "Charles Babbage"}\n'
        '{"subject": "Charles Babbage", "relation": "designed", "object": "Analytical Engine"}\n'
        '{"subject": "Ada Lovelace", "relation": "wrote_about", "object": "Analytical Engine", '
        '"description": "Ada Lovelace wrote the first published program for the engine"}\n', encoding="utf-8")
    graph = read_graph([path])
    fill_descriptions(graph)
    return graph_tables(graph, link_passages(graph))


def ingest(root: Path, tables: dict, encoder: WordEncoder, compose: bool):
    Project.init(root, {"embedding.compose_relationships": compose})
    with Project.open(root, write=True) as project:
        report = store_graph(project, tables, started=0.0, input_fingerprint="fp", encoder=encoder)
        folder = project.artifact("ingest", "vectors")
        return report, load_vectors(folder, "relationships"), load_vectors(folder, "entities")


def test_description_less_relationships_are_composed_and_described_ones_encoded(tmp_path, tables):
    encoder = WordEncoder()
    report, relationships, entities = ingest(tmp_path / "p", tables, encoder, compose=True)
    rels = tables["relationships"]
    names = tables["entities"]["name"]
    plain = [rid for rid, (s, r, d, text) in enumerate(zip(rels["src"], rels["relation"], rels["dst"],
                                                            rels["description"]))
             if text == default_description(names[s], r, names[d])]
    assert len(plain) == 2 and report.counts["composed_relationships"] == 2
    described = [text for rid, text in enumerate(rels["description"]) if rid not in plain]
    assert described == ["Ada Lovelace wrote the first published program for the engine"]
    assert set(described) <= set(encoder.encoded)
    assert not {rels["description"][rid] for rid in plain} & set(encoder.encoded)  # composed, not encoded
    for rid in plain:
        s, d, words = rels["src"][rid], rels["dst"][rid], relation_words(rels["relation"][rid])
        label = encoder.encode([words])[0]
        total = len(names[s].split()) * entities[s] + len(words.split()) * label + len(names[d].split()) * entities[d]
        # stored as float16: within its rounding of a unit vector
        np.testing.assert_allclose(relationships[rid], total / np.linalg.norm(total), atol=2e-3)


def test_a_composed_vector_is_never_reused_as_the_encoded_one(tmp_path, tables):
    ingest(tmp_path / "p", tables, WordEncoder(), compose=True)
    with Project.open(tmp_path / "p") as project:
        import lancedb

        table = lancedb.connect(str(project.artifact("ingest", "vectors"))).open_table("relationships").to_arrow()
    hashes = table.column("hash").to_pylist()
    texts = tables["relationships"]["description"]
    assert sum(h == text_hash(COMPOSED_HASH_PREFIX + t) for h, t in zip(hashes, texts)) == 2
    # the same project ingested again without composition encodes those texts (older generations are reusable)
    (tmp_path / "p" / "kgr.toml").write_text("[embedding]\ncompose_relationships = false\n")
    encoder = WordEncoder()
    with Project.open(tmp_path / "p", write=True) as project:
        store_graph(project, tables, started=0.0, input_fingerprint="fp", encoder=encoder)
    assert sorted(encoder.encoded) == sorted(t for t, h in zip(texts, hashes) if h != text_hash(t))


def test_the_setting_at_its_default_leaves_the_ingest_fingerprint_as_before(tmp_path):
    from kgr.project import fingerprint

    fingerprints = {}
    for compose in (False, True):
        Project.init(tmp_path / str(compose), {"embedding.compose_relationships": compose})
        with Project.open(tmp_path / str(compose)) as project:
            fingerprints[compose] = project.config_fingerprint("ingest")
            before = {name: {k: v for k, v in project.config.section(name).items()
                             if k not in ("threads", "precision", "engine", "chunk_rows", "compose_relationships",
                                          "index_min_rows", "backend", "quantize")}
                      for name in ("embedding", "types")}
    assert fingerprints[False] == fingerprint(before)  # a graph ingested before the setting existed stays current
    assert fingerprints[True] != fingerprints[False]
