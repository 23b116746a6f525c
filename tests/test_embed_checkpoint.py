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
