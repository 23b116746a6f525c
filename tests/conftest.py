"""Shared fixtures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
METAQA = ROOT / "fixtures" / "metaqa"


class RecordingEncoder:
    """Vectors from a text's length; every encode call's texts are recorded."""

    dimension = 2

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


class SettledEncoder(RecordingEncoder):
    """A RecordingEncoder with the settings a phrase cache names its files by."""

    model = None
    model_name, precision, threads, vectors_kind = "fake", "float32", 1, "torch"


def untimed(value):
    """`value` without the timings (`latency_ms`, `timings_ms`) at any depth: they vary from run to run."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in ("latency_ms", "timings_ms")}
    return [untimed(v) for v in value] if isinstance(value, list) else value


def vectors(root: Path) -> dict[str, np.ndarray]:
    """The entity and relationship vectors of an ingested project (wherever its vectors live)."""
    from kgr.embed import load_vectors
    from kgr.project import Project

    with Project.open(root) as project:
        folder = project.artifact("ingest", "vectors")
        return {name: load_vectors(folder, name) for name in ("entities", "relationships")}


@pytest.fixture(scope="module")
def ray_instance():
    """A Ray instance in this process for a module's tests (the engine joins it rather than starting its own); its
    workers see the environment as it is when the fixture starts."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"Ray Data is not installed (pip install 'kgr[ray]'): {exc}")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="error")
    except Exception as exc:  # any failure to start means no Ray here, not a kgr bug
        pytest.skip(f"a local Ray instance cannot start here: {str(exc).splitlines()[0]}")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def metaqa_project(tmp_path_factory) -> Path:
    """The MetaQA fixture slice ingested (real embedding model) with its reachability map, built once per session.

    Treat it as read-only: a test that writes to a project (e.g. retrieval records) should copy it first.
    """
    root = tmp_path_factory.mktemp("metaqa") / "project"
    for args in (
        ["ingest", str(root), str(METAQA / "kb.txt"), "--schema", str(METAQA / "schema.toml")],
        ["reach", str(root)],
    ):
        done = subprocess.run([sys.executable, "-m", "kgr", *args], capture_output=True, text=True)
        assert done.returncode == 0, f"kgr {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return root


@pytest.fixture(scope="session")
def run_kgr():
    """Run the real `kgr` command in-process: `run_kgr("status", DIR, "--json", env={...})` -> click Result.

    The result has `exit_code`, `stdout` and `stderr` (kgr prints results on stdout, messages on stderr).
    """
    from typer.testing import CliRunner

    from kgr.cli import app

    runner = CliRunner()

    def run(*args, env: dict[str, str] | None = None):
        return runner.invoke(app, [str(arg) for arg in args], env=env)

    return run


@pytest.fixture(scope="session")
def copy_project(tmp_path_factory):
    """A factory making a private, writable copy of a project directory (e.g. of `metaqa_project`)."""
    import shutil

    def copy(source: Path, name: str = "copy") -> Path:
        target = tmp_path_factory.mktemp(name) / "project"
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".kgr.lock"))
        return target

    return copy


SOURCED_TRIPLES = [("Quiet Harbour", "performer", "Lena Voss", "Quiet Harbour"),
                   ("Lena Voss", "place of birth", "Ostrava", "Lena Voss"),
                   ("Marek Dal", "place of birth", "Brno", "Marek Dal")]


def build_sourced(root: Path, passages: dict[str, str], reach: bool = False) -> Path:
    """A two-hop project under `root` whose triples name the passages (title -> text) they were extracted from."""
    import json

    from kgr.ingest.stage import IngestOptions, run_ingest
    from kgr.project import Project
    from kgr.reach_stage import run_reach

    (root / "triples.jsonl").write_text("".join(
        json.dumps({"subject": h, "relation": r, "object": t, "source": s}) + "\n" for h, r, t, s in SOURCED_TRIPLES),
        encoding="utf-8")
    (root / "corpus.json").write_text(json.dumps([{"title": t, "text": x} for t, x in passages.items()]),
                                      encoding="utf-8")
    with Project.open(root / "project", write=True, create=True) as project:
        run_ingest(project, IngestOptions([root / "triples.jsonl"], passages=[root / "corpus.json"]))
        if reach:
            run_reach(project)
    return root / "project"


def dotrag_over(root: Path, triples: list[tuple[str, str, str]]):
    """A factory DotRAG(**dotrag settings) over a project ingested from `triples` (no schema) with its reachability
    map, under `root` (yields; closes the project)."""
    import json

    from kgr.config import load_config
    from kgr.ingest.stage import IngestOptions, run_ingest
    from kgr.methods.base import RunContext
    from kgr.methods.dotrag.method import DotRAG
    from kgr.project import Project
    from kgr.reach_stage import run_reach
    from kgr.store import GraphStore

    path = root / "triples.jsonl"
    path.write_text("".join(json.dumps({"subject": h, "relation": r, "object": t}) + "\n" for h, r, t in triples),
                    encoding="utf-8")
    with Project.open(root / "project", write=True, create=True) as project:
        run_ingest(project, IngestOptions([path]))
        run_reach(project)
    with Project.open(root / "project") as project:
        store = GraphStore(project)

        def make(**settings) -> DotRAG:
            config = load_config(project.root, {f"dotrag.{k}": v for k, v in settings.items()})
            return DotRAG(RunContext(project, config, store, "retrieve"))

        yield make
