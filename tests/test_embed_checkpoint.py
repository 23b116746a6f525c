"""Embedding checkpoints: an ingest interrupted while encoding keeps what it encoded, a rerun encodes only the rest,
and the checkpoint is removed once the stage commits. Uses a deterministic stand-in encoder (no model load)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from kgr.embed import CHECKPOINT_BATCHES, CHECKPOINT_DIR, EmbeddingCheckpoint, load_vectors
from kgr.ingest import fill_descriptions, link_passages, read_graph
from kgr.ingest.stage import graph_tables, store_graph
from kgr.project import Project

KB = Path(__file__).resolve().parent.parent / "fixtures" / "metaqa" / "kb.txt"
TRIPLES = 60
BATCH = 8


class CountingEncoder:
    """Vectors derived from each text's hash; counts texts encoded and can raise KeyboardInterrupt on call N."""

    def __init__(self, model_name: str = "stand-in", interrupt_on_call: int | None = None):
        self.model_name = model_name
        self.batch_size = BATCH
        self.dimension = 16
        self.encode_seconds = 0.0
        self.interrupt_on_call = interrupt_on_call
        self.calls = 0
        self.texts = 0
    vectors_kind = "torch"

    def truncated(self, texts):
        return 0

    def encode(self, texts, progress=None):
        self.calls += 1
        if self.calls == self.interrupt_on_call:
            raise KeyboardInterrupt
        self.texts += len(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8) for t in texts]
        vectors = np.asarray(rows, dtype=np.float32) - 127.5
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def token_counts(self, texts):
        return np.array([len(text.split()) for text in texts])


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("kb") / "kb.txt"
    path.write_text("".join(KB.read_text(encoding="utf-8").splitlines(keepends=True)[:TRIPLES]), encoding="utf-8")
    graph = read_graph([path])
    fill_descriptions(graph)
    return graph_tables(graph, link_passages(graph))


def total_texts(tables: dict) -> int:
    return len(tables["entities"]["text"]) + len(tables["relationships"]["description"])


def store(root: Path, tables: dict, encoder: CountingEncoder):
    with Project.open(root, write=True, create=True) as project:
        return store_graph(project, tables, started=0.0, input_fingerprint="fp", encoder=encoder)


def vectors(root: Path) -> dict[str, np.ndarray]:
    with Project.open(root) as project:
        folder = project.artifact("ingest", "vectors")
        return {name: load_vectors(folder, name) for name in ("entities", "relationships")}


def test_interrupted_encoding_resumes_from_the_checkpoint(tmp_path, tables):
    Project.init(tmp_path / "p")  # an interrupt in a directory the command created would remove it, checkpoint and all
    interrupted = CountingEncoder(interrupt_on_call=4)
    with pytest.raises(KeyboardInterrupt):
        store(tmp_path / "p", tables, interrupted)
    done = interrupted.texts  # three parts of at most BATCH * CHECKPOINT_BATCHES texts each
    assert 2 * BATCH * CHECKPOINT_BATCHES < done <= 3 * BATCH * CHECKPOINT_BATCHES < total_texts(tables)
    with Project.open(tmp_path / "p") as project:
        assert project.last_run("ingest") is None  # nothing committed: the checkpoint is not the graph's vectors
    assert len(EmbeddingCheckpoint(tmp_path / "p", "stand-in").load()) == done

    resumed = CountingEncoder()
    report = store(tmp_path / "p", tables, resumed)
    assert resumed.texts == report.encoded == total_texts(tables) - done
    assert not (tmp_path / "p" / CHECKPOINT_DIR).exists()  # cleared once the stage committed

    clean = CountingEncoder()
    store(tmp_path / "clean", tables, clean)
    assert clean.texts == total_texts(tables)
    resumed_vectors, clean_vectors = vectors(tmp_path / "p"), vectors(tmp_path / "clean")
    for name in resumed_vectors:
        assert np.array_equal(resumed_vectors[name], clean_vectors[name])


def test_checkpoint_of_another_model_is_not_reused(tmp_path, tables):
    Project.init(tmp_path / "p")
    with pytest.raises(KeyboardInterrupt):
        store(tmp_path / "p", tables, CountingEncoder("model-a", interrupt_on_call=2))
    other = CountingEncoder("model-b")
    store(tmp_path / "p", tables, other)
    assert other.texts == total_texts(tables)
    assert not (tmp_path / "p" / CHECKPOINT_DIR).exists()


def test_a_killed_part_write_leaves_no_part(tmp_path, monkeypatch):
    checkpoint = EmbeddingCheckpoint(tmp_path, "stand-in")
    checkpoint.save(["a", "b"], np.ones((2, 4), dtype=np.float32))

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", killed)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(["c"], np.ones((1, 4), dtype=np.float32))
    assert sorted(checkpoint.load()) == ["a", "b"]


GRAPH_TABLES = ("entities", "entity_types", "relationships", "passages", "entity_passages")


def stored(root: Path) -> tuple[dict[str, list], dict[str, np.ndarray]]:
    """The graph tables' rows and the vector tables of a committed project."""
    with Project.open(root) as project:
        rows = {name: project.db.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in GRAPH_TABLES}
    return rows, vectors(root)


def store_in_chunks(root: Path, tables: dict, encoder: CountingEncoder, chunk_rows: int, compose: bool = False):
    if not root.exists():
        Project.init(root, {"embedding.chunk_rows": chunk_rows, "embedding.compose_relationships": compose})
    return store(root, tables, encoder)


@pytest.mark.parametrize("compose", [False, True])
def test_chunks_of_a_few_rows_store_what_one_chunk_stores(tmp_path, tables, compose):
    # 7 rows a chunk: parts end at chunk ends, so the encoder sees other groups of texts; the vectors are per text
    many = store_in_chunks(tmp_path / "many", tables, CountingEncoder(), chunk_rows=7, compose=compose)
    one = store_in_chunks(tmp_path / "one", tables, CountingEncoder(), chunk_rows=100_000, compose=compose)
    assert many.counts == one.counts and many.encoded == one.encoded
    many_rows, many_vectors = stored(tmp_path / "many")
    one_rows, one_vectors = stored(tmp_path / "one")
    assert many_rows == one_rows and len(many_rows["relationships"]) == TRIPLES
    for name in one_vectors:
        assert np.array_equal(many_vectors[name], one_vectors[name])


def test_an_interrupt_inside_a_chunk_resumes_to_what_an_uninterrupted_run_stores(tmp_path, tables):
    # 50 rows a chunk, parts of 4 x 8 = 32 texts: the second encoder call is the rest of the first chunk, so the
    # third call stops the run inside the second chunk, with that chunk's first part not yet encoded
    Project.init(tmp_path / "p", {"embedding.chunk_rows": 50})
    interrupted = CountingEncoder(interrupt_on_call=3)
    with pytest.raises(KeyboardInterrupt):
        store(tmp_path / "p", tables, interrupted)
    assert interrupted.texts == 50
    assert not (tmp_path / "p" / "kgr.duckdb").exists()  # nothing committed: no table a later stage could read
    resumed = CountingEncoder()
    report = store(tmp_path / "p", tables, resumed)
    assert resumed.texts == report.encoded == total_texts(tables) - 50
    store_in_chunks(tmp_path / "clean", tables, CountingEncoder(), chunk_rows=50)
    resumed_rows, resumed_vectors = stored(tmp_path / "p")
    clean_rows, clean_vectors = stored(tmp_path / "clean")
    assert resumed_rows == clean_rows
    for name in clean_vectors:
        assert np.array_equal(resumed_vectors[name], clean_vectors[name])


def test_a_generation_killed_while_its_meta_was_written_is_skipped_not_an_error(tmp_path):
    from kgr.embed import META_FILE, reusable_vectors, write_meta

    killed, whole = tmp_path / "killed", tmp_path / "whole"
    killed.mkdir()
    whole.mkdir()
    (killed / META_FILE).write_text("")  # created, not yet written: what a kill inside a plain write_text leaves
    write_meta(whole, "stand-in", 16)
    assert sorted(p.name for p in whole.iterdir()) == [META_FILE]  # renamed into place: no temporary file left
    assert reusable_vectors([killed, whole], "stand-in") == {}
