"""`kgr.ingest.stage`: bad input leaves the project as it was; a killed ingest keeps the previous state and a rerun
completes reusing vectors. Driven through `kgr ingest` (in-process, or a subprocess for the kill)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgr.embed import CHECKPOINT_DIR, EmbeddingCheckpoint
from kgr.errors import ExitStatus
from kgr.project import PHRASES_DIR, Project
from kgr.store import GraphStore

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "fixtures" / "metaqa" / "kb.txt"
SCHEMA = ROOT / "fixtures" / "metaqa" / "schema.toml"


def snapshot(root: Path) -> dict[str, object]:
    """Content hashes of every DuckDB table (the manifest included), the vector generations and the config."""
    sums: dict[str, object] = {}
    with Project.open(root) as project:
        db = project.db
        for (name,) in db.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall():
            rows = db.execute(f"SELECT * FROM {name}").fetchall()
            sums[name] = hashlib.sha256(repr(sorted(map(repr, rows))).encode()).hexdigest()
    sums["vectors"] = sorted(p.name for p in (root / "vectors").iterdir())
    sums["kgr.toml"] = (root / "kgr.toml").read_text(encoding="utf-8")
    return sums


@pytest.fixture(scope="module")
def project(metaqa_project, copy_project):
    root = copy_project(metaqa_project, "badinput")
    return root, snapshot(root)


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """name -> (file, the location the error must name)."""
    folder = tmp_path_factory.mktemp("bad")
    files = {
        "malformed": (b"A|directed_by|B\nC|directed_by\nD|directed_by|E\n", ":2: expected subject|relation|object"),
        "empty": (b"", ":1: empty file (0 bytes)"),
        "blank": (b"\n \n", ":1: empty file (only blank lines)"),
        "encoding": (b"A|directed_by|B\nCaf\xe9|directed_by|E\n", ":2: not UTF-8 text"),
    }
    found = {}
    for name, (content, where) in files.items():
        path = folder / f"{name}.txt"
        path.write_bytes(content)
        found[name] = (path, f"{path}{where}")
    found["missing"] = (folder / "missing.txt", f"{folder / 'missing.txt'}: no such file")
    return found


@pytest.mark.parametrize("kind", ["malformed", "empty", "blank", "encoding", "missing"])
@pytest.mark.parametrize("force", [False, True])
def test_bad_input_is_one_line_and_leaves_the_project_intact(project, bad_files, run_kgr, kind, force):
    root, before = project
    path, message = bad_files[kind]
    # --replace: other inputs than the graph's are refused before they are read (test_probes_ingest.py).
    result = run_kgr("ingest", root, path, "--schema", SCHEMA, "--replace", *(["--force"] if force else []))
    assert result.exit_code == ExitStatus.BAD_INPUT, (result.stdout, result.stderr)
    # (An empty progress display may add a blank line; the message itself is one line.)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"kgr: error: {message}"), result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(root) == before


def test_bad_input_into_a_new_directory_stores_nothing(tmp_path, bad_files, run_kgr):
    root = tmp_path / "new"
    path, message = bad_files["malformed"]
    result = run_kgr("ingest", root, path)
    assert result.exit_code == ExitStatus.BAD_INPUT and message in result.stderr
    assert not root.exists()  # nothing stored: not even the directory the refused ingest made


# -- a killed ingest ---------------------------------------------------------------------------------------------
NEW_TRIPLES = 80  # each adds a new movie, a new actor and a new relationship: 3 texts to encode


def test_killed_ingest_keeps_the_previous_state_and_a_rerun_reuses_vectors(metaqa_project, copy_project,
                                                                           run_kgr, tmp_path):
    root = copy_project(metaqa_project, "killed")
    before = snapshot(root)
    with Project.open(root) as project:
        previous = project.last_run("ingest")
        old_generations = set(project.generations("vectors"))
    bigger = tmp_path / "kb_plus.txt"
    extra = "".join(f"Killed Movie {i}|starred_actors|Killed Actor {i}\n" for i in range(NEW_TRIPLES))
    bigger.write_text(KB.read_text(encoding="utf-8") + extra, encoding="utf-8")

    child = subprocess.Popen(
        [sys.executable, "-m", "kgr", "ingest", str(root), str(bigger), "--schema", str(SCHEMA), "--replace", "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.time() + 120
        new: list[Path] = []
        # The generation's meta.json is written once the model is loaded: embedding is under way.
        while not any((g / "meta.json").exists() for g in new):
            assert child.poll() is None, f"ingest ended before it could be killed: {child.stderr.read()}"
            assert time.time() < deadline, "no new vectors generation appeared"
            time.sleep(0.02)
            new = [g for g in (root / "vectors").iterdir() if g not in old_generations]
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL

    # The previous state is intact and current; the killed generation is left behind, unreferenced.
    assert {p.name for p in new} <= set(snapshot(root)["vectors"])
    after = snapshot(root)
    after["vectors"] = [name for name in after["vectors"] if name not in {p.name for p in new}]
    assert after == before
    with Project.open(root) as project:
        assert project.last_run("ingest").run_id == previous.run_id
        project.require("reach")
        store = GraphStore(project)
        assert store.num_entities == previous.counts["entities"]
        assert store.entity_vectors.shape == (previous.counts["entities"], previous.counts["dimension"])
    assert run_kgr("reach", root, "--show", "Temuera Morrison").exit_code == 0

    # A rerun completes, encoding only the new texts not checkpointed before the kill, and removes the killed and
    # the old generations and the checkpoint.
    checkpointed = len(EmbeddingCheckpoint(root, previous.counts["embedding_model"]).load())
    result = run_kgr("ingest", root, bigger, "--schema", SCHEMA, "--replace", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["skipped"] is False
    assert report["counts"]["entities"] == previous.counts["entities"] + 2 * NEW_TRIPLES
    assert report["counts"]["relationships"] == previous.counts["relationships"] + NEW_TRIPLES
    assert report["encoded"] == 3 * NEW_TRIPLES - checkpointed
    assert not (root / CHECKPOINT_DIR).exists()
    with Project.open(root) as project:
        current = project.artifact("ingest", "vectors")
        assert project.generations("vectors") == [current]
        assert current not in old_generations and current not in new
        assert GraphStore(project).num_entities == report["counts"]["entities"]


def test_a_new_graph_empties_the_phrase_cache_and_bad_input_keeps_it(tmp_path, bad_files, run_kgr):
    # the phrase cache holds vectors of the graph's labels and steps: a new graph makes them another graph's
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("Ana|born_in|Lyon\n", encoding="utf-8")
    second.write_text("Ana|born_in|Lyon\nLyon|located_in|France\n", encoding="utf-8")
    root = tmp_path / "project"
    assert run_kgr("ingest", str(root), str(first)).exit_code == 0
    cached = root / PHRASES_DIR / "labels.npy"
    cached.parent.mkdir()
    cached.write_bytes(b"")
    assert run_kgr("ingest", str(root), str(bad_files["malformed"][0]), "--replace").exit_code != 0
    assert cached.exists()
    assert run_kgr("ingest", str(root), str(second), "--replace").exit_code == 0
    assert not (root / PHRASES_DIR).exists()
