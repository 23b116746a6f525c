"""Probes (issue #16): readers beside a writer, through the real `kgr` commands.

A real `kgr ingest --force` runs in a helper process that pauses at two points it cannot race past: after taking
the project (before changing anything) and after its commit (before exiting). While it waits, `kgr status`,
`kgr eval` and `kgr reach --show` must succeed on the last committed state, and a second writer must be refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from kgr.errors import ExitStatus
from test_cli import ok
from kgr.project import Project
from kgr.store import GraphStore

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "fixtures" / "metaqa" / "kb.txt"
SCHEMA = ROOT / "fixtures" / "metaqa" / "schema.toml"
QA_1HOP = ROOT / "fixtures" / "metaqa" / "qa_1hop.txt"

# Runs `kgr ARGS...` with run_ingest wrapped so that it waits for a file before it starts and after it returns.
PAUSED_KGR = """
import pathlib, sys, time
import kgr.ingest.stage as stage

before, after, args = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:]
real_ingest = stage.run_ingest

def wait_for(go, said):
    print(said, flush=True)
    deadline = time.monotonic() + 300
    while not go.exists():
        if time.monotonic() > deadline:
            sys.exit(f"no {go} within 300 s")
        time.sleep(0.02)

def paused_ingest(*positional, **named):
    wait_for(before, "holding the project")
    report = real_ingest(*positional, **named)
    wait_for(after, "committed")
    return report

stage.run_ingest = paused_ingest
from kgr.cli import app
app(args, prog_name="kgr")
"""

HOLD_LOCK = """
import sys
from kgr.project import Project
with Project.open(sys.argv[1], write=True):
    print("locked", flush=True)
    sys.stdin.read()
"""


def refused(result, status: ExitStatus, *needles: str) -> str:
    assert result.exit_code == status, (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.startswith("kgr: error: ") and result.stderr.count("\n") == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    return result.stderr


def next_line(process: subprocess.Popen, log: Path) -> str:
    line = process.stdout.readline().strip()
    assert line, f"the paused kgr exited early ({process.poll()}):\n{log.read_text()}"
    return line


def stages(run_kgr, root: Path) -> dict[str, tuple[str, str]]:
    """`kgr status --json` as stage -> (ran_at, state)."""
    report = json.loads(ok(run_kgr("status", root, "--json")).stdout)
    return {s["stage"]: (s["ran_at"], s["state"]) for s in report["stages"]}


def eval_scores(run_kgr, root: Path, questions: Path) -> dict:
    """`kgr eval --json` of the stored BM25 run, without its timings."""
    report = json.loads(ok(run_kgr("eval", root, "--questions", questions, "--run", "bm25-offline", "--json")).stdout)
    report.pop("timings_s")
    return report


@pytest.fixture
def project_with_a_run(metaqa_project, copy_project, run_kgr, tmp_path):
    """A private copy of the MetaQA project with a stored BM25 run over two questions (something to `eval`)."""
    root = copy_project(metaqa_project, "beside")
    questions = tmp_path / "qa_1hop.txt"
    questions.write_text("".join(QA_1HOP.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    ok(run_kgr("retrieve", root, "--questions", questions, "--method", "bm25", "--quiet"))
    return root, questions


def test_readers_run_beside_a_real_ingest_and_a_second_writer_is_refused(project_with_a_run, run_kgr, tmp_path):
    root, questions = project_with_a_run
    before = stages(run_kgr, root)
    assert before["reach"][1] == "current"
    scores = eval_scores(run_kgr, root, questions)
    with Project.open(root) as project:
        old_vectors = project.artifact("ingest", "vectors")
        old_ingest = project.last_run("ingest").run_id

    go_before, go_after, log = tmp_path / "go-before", tmp_path / "go-after", tmp_path / "ingest.log"
    with open(log, "w") as stderr:
        writer = subprocess.Popen(
            [sys.executable, "-c", PAUSED_KGR, str(go_before), str(go_after),
             "ingest", str(root), str(KB), "--schema", str(SCHEMA), "--force", "--quiet"],
            stdout=subprocess.PIPE, stderr=stderr, text=True)
    with ExitStack() as cleanup:
        cleanup.callback(lambda: (go_before.touch(), go_after.touch(), writer.wait(timeout=300)))
        assert next_line(writer, log) == "holding the project"

        # The writer holds the project: readers see the state it started from.
        assert stages(run_kgr, root) == before
        shown = json.loads(ok(run_kgr("reach", root, "--show", "Temuera Morrison", "--json")).stdout)
        assert shown["entity"] == "Temuera Morrison" and shown["hops"]["1"] == {"movie": 3}
        assert eval_scores(run_kgr, root, questions) == scores
        refused(run_kgr("reach", root, "--force"), ExitStatus.BUSY, "project is busy", f"kgr pid {writer.pid}")
        refused(run_kgr("ingest", root, KB, "--schema", SCHEMA), ExitStatus.BUSY, "project is busy")
        held = cleanup.enter_context(Project.open(root))  # a slow reader that stays open across the commit
        assert held.snapshot is not None and held.writer == f"kgr pid {writer.pid} is writing it"

        go_before.touch()
        assert next_line(writer, log) == "committed"
        # Committed but still writing: readers now see the new ingest, which made the map stale.
        after = stages(run_kgr, root)
        assert after["ingest"][0] > before["ingest"][0] and after["reach"][1] == "ingest ran again since"
        refused(run_kgr("reach", root, "--show", "Temuera Morrison"), ExitStatus.STALE, "stage reach is stale")
        # The reader still open reads the state it opened, and its vectors were not pruned from under it.
        assert held.last_run("ingest").run_id == old_ingest and old_vectors.is_dir()
        store = GraphStore(held)
        assert store.entity_vectors.shape == (1889, 384)

        go_after.touch()
        assert writer.wait(timeout=300) == 0, log.read_text()
    # The held snapshot was released: the next writer removes it and the vectors only it referred to.
    ok(run_kgr("reach", root, "--quiet"))
    with Project.open(root) as project:
        assert project.snapshot is None
        assert project.generations("vectors") == [project.artifact("ingest", "vectors")] != [old_vectors]
    assert len(list((root / "snapshots").glob("*.duckdb"))) == 1


def test_readers_beside_the_first_ingest_are_told_nothing_is_committed_yet(run_kgr, tmp_path):
    root = tmp_path / "empty"
    ok(run_kgr("init", root))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        refused(run_kgr("status", root), ExitStatus.BUSY, f"kgr pid {holder.pid} is writing it",
                "nothing was committed")
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert "run `kgr ingest`" in ok(run_kgr("status", root)).stdout


# -- paths that work on any clone (issue #16 item 10) -------------------------------------------------------------
def test_nothing_defaults_to_the_development_machines_folders():
    """Scripts, tests and docs name data and projects relative to the clone, never by this machine's paths."""
    machine = "/" + "work" + "/"  # spelled apart so this file does not match itself
    checked = [ROOT / "README.md", *(ROOT / "bench").glob("*.py"), ROOT / "bench" / "README.md",
               *(ROOT / "tests").glob("*.py"), *(ROOT / "kgr").rglob("*.py"), *(ROOT / "docs").rglob("*.md")]
    found = [f"{path.relative_to(ROOT)}:{number}" for path in checked
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if machine in line]
    assert found == []


# -- defaults chosen by measurement (issue #16 item 7) -------------------------------------------------------------
def test_the_encoder_defaults_to_one_thread():
    """bench/encoder_threads.py: beside other busy processes a 2-thread encoder's queries took 7x longer."""
    from kgr.config import load_config
    from kgr.embed import project_encoder

    config = load_config(None, None, environ={})
    assert config.embedding.threads == 1 and project_encoder(config).threads == 1


def test_a_retrieval_context_loads_the_encoder_and_token_counter_before_the_first_question(metaqa_project):
    from kgr.backbone import runtime
    from kgr.methods.base import RunContext

    runtime._encoding.cache_clear()  # as in a fresh process: no tiktoken encoding read yet
    with Project.open(metaqa_project) as project:
        store = GraphStore(project)
        RunContext(project, project.config, store, "overview")  # not a timed stage: nothing is loaded for it
        assert store.encoder._model is None and runtime._encoding.cache_info().currsize == 0
        RunContext(project, project.config, store, "retrieve")
        assert store.encoder._model is not None and runtime._encoding.cache_info().currsize == 1
