"""`kgr.project`: the stage manifest, up-to-date and stale stages, `kgr status`, and the write lock.

Everything goes through the real commands on the shared MetaQA project (read-only) or a private copy of it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from kgr import __version__
from kgr.errors import ExitStatus
from kgr.ingest.stage import IngestOptions
from kgr.project import Project
from kgr.store import GraphStore

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "fixtures" / "metaqa" / "kb.txt"
SCHEMA = ROOT / "fixtures" / "metaqa" / "schema.toml"
QUESTION = "what movies did [Temuera Morrison] act in"


def one_line_error(result, status: ExitStatus, *needles: str) -> None:
    assert result.exit_code == status, (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.startswith("kgr: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


# -- the manifest -------------------------------------------------------------------------------------------------
def test_each_stage_records_when_config_inputs_counts_duration_version(metaqa_project):
    with Project.open(metaqa_project) as project:
        ingest, reach = project.last_run("ingest"), project.last_run("reach")
        assert [run.stage for run in project.runs()] == ["ingest", "reach"]
        for run in (ingest, reach):
            assert run.kgr_version == __version__
            assert timedelta(0) < datetime.now(timezone.utc) - run.started_at < timedelta(hours=6)
            assert run.duration_s >= 0
            assert run.config_fingerprint == project.config_fingerprint(run.stage)
            assert project.stale_reason(run.stage, run) is None
        assert ingest.input_fingerprint == IngestOptions(paths=[KB], schema=SCHEMA).fingerprint()
        assert ingest.upstream == {}
        assert ingest.counts["entities"] == 1889 and ingest.counts["relationships"] == 3277
        assert ingest.counts["types"] == 10 and ingest.counts["embedding_model"] == project.config.embedding.model
        assert (metaqa_project / ingest.artifacts["vectors"]).is_dir()
        assert reach.upstream == {"ingest": ingest.run_id} and reach.input_fingerprint == ingest.run_id
        assert reach.counts["num_entities"] == 1889 and reach.counts["max_hops"] == 3
        assert project.artifact("reach", "map") == metaqa_project / reach.artifacts["map"]
        # Stages that depend on config sections fingerprint them; changing one changes the fingerprint.
        assert project.config_fingerprint("reach") != project.config_fingerprint("ingest")
    with Project.open(metaqa_project, overrides={"reach.max_hops": 2}) as project:
        assert project.config_fingerprint("reach") != reach.config_fingerprint
        assert not project.is_current("reach", ingest.run_id)


@pytest.fixture(scope="module")
def reingested(metaqa_project, copy_project, run_kgr, tmp_path_factory):
    """A copy of the project put through: same ingest (skipped), --force, then a different input; reach not rerun."""
    root = copy_project(metaqa_project, "reingest")
    with Project.open(root) as project:
        original = project.last_run("ingest")
    steps = {}
    steps["same"] = run_kgr("ingest", root, KB, "--schema", SCHEMA)
    with Project.open(root) as project:
        steps["same_run"] = project.last_run("ingest")
    steps["forced"] = run_kgr("ingest", root, KB, "--schema", SCHEMA, "--force", "--json")
    with Project.open(root) as project:
        steps["forced_run"] = project.last_run("ingest")
    bigger = tmp_path_factory.mktemp("kb") / "kb.txt"
    bigger.write_text(KB.read_text(encoding="utf-8") + "Stale Test Movie|starred_actors|Stale Test Actor\n",
                      encoding="utf-8")
    steps["different"] = run_kgr("ingest", root, bigger, "--schema", SCHEMA, "--replace", "--json")
    return root, original, steps


def test_same_inputs_are_up_to_date_and_force_redoes(reingested):
    root, original, steps = reingested
    assert steps["same"].exit_code == 0, steps["same"].stderr
    assert "up to date" in steps["same"].stderr
    assert steps["same_run"].run_id == original.run_id
    forced = json.loads(steps["forced"].stdout)
    assert steps["forced"].exit_code == 0 and forced["skipped"] is False
    assert forced["encoded"] == 0  # every vector reused from the previous generation
    assert steps["forced_run"].run_id != original.run_id
    assert steps["forced_run"].input_fingerprint == original.input_fingerprint


def test_different_input_is_ingested_without_force(reingested):
    root, original, steps = reingested
    different = json.loads(steps["different"].stdout)
    assert steps["different"].exit_code == 0 and different["skipped"] is False
    assert different["counts"]["entities"] == 1891 and different["counts"]["relationships"] == 3278
    assert different["encoded"] == 3  # two entities and one relationship are new
    with Project.open(root) as project:
        assert project.last_run("ingest").input_fingerprint != original.input_fingerprint
        assert len(project.generations("vectors")) == 1


def test_stale_reach_is_refused_until_rerun(reingested, run_kgr):
    root, _, _ = reingested
    one_line_error(run_kgr("retrieve", root, "--query", QUESTION), ExitStatus.STALE,
                   "stage reach is stale", f"`kgr reach {root}`")
    one_line_error(run_kgr("reach", root, "--show", "Temuera Morrison", "--json"), ExitStatus.STALE,
                   "stage reach is stale", "`kgr reach")
    status = json.loads(run_kgr("status", root, "--json").stdout)
    assert {s["stage"]: s["state"] for s in status["stages"]} == {"ingest": "current",
                                                                  "reach": "ingest ran again since"}
    assert run_kgr("reach", root).exit_code == 0
    result = run_kgr("reach", root, "--show", "Stale Test Actor", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["hops"]["1"] == {"movie": 1}


def test_missing_stage_names_the_stage_to_run(tmp_path, metaqa_project, copy_project, run_kgr):
    empty = tmp_path / "empty"
    assert run_kgr("init", empty).exit_code == 0
    one_line_error(run_kgr("reach", empty), ExitStatus.STALE, "stage ingest has not run", "`kgr ingest")
    one_line_error(run_kgr("retrieve", empty, "--query", QUESTION), ExitStatus.STALE, "`kgr ingest")
    one_line_error(run_kgr("status", tmp_path / "nowhere"), ExitStatus.ERROR, "not a kgr project", "`kgr init")
    one_line_error(run_kgr("overview", metaqa_project, "--show"), ExitStatus.STALE,
                   "stage overview has not run", f"`kgr overview {metaqa_project}`")

    no_reach = copy_project(metaqa_project, "noreach")
    with Project.open(no_reach, write=True) as project:
        project.db.execute("DELETE FROM manifest WHERE stage = 'reach'")
    one_line_error(run_kgr("retrieve", no_reach, "--query", QUESTION), ExitStatus.STALE,
                   "stage reach has not run", "`kgr reach")
    one_line_error(run_kgr("reach", no_reach, "--show", "Temuera Morrison"), ExitStatus.STALE, "`kgr reach")


# -- kgr status ---------------------------------------------------------------------------------------------------
def test_status_json_lists_stages_counts_and_sizes(metaqa_project, run_kgr):
    result = run_kgr("status", metaqa_project, "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["project"] == str(metaqa_project)
    assert [(s["stage"], s["state"], s["kgr_version"]) for s in report["stages"]] == [
        ("ingest", "current", __version__), ("reach", "current", __version__)]
    ingest = report["stages"][0]
    assert ingest["counts"]["entities"] == 1889 and ingest["duration_s"] > 0
    datetime.fromisoformat(ingest["ran_at"])
    with Project.open(metaqa_project) as project:
        store = GraphStore(project)
        types = {name: int((store.type_ids == t).sum()) for t, name in enumerate(store.type_names)}
        relations = dict(project.db.execute("SELECT relation, count(*) FROM relationships GROUP BY 1").fetchall())
    assert report["types"] == types and sum(types.values()) == 2038
    assert report["types"]["movie"] == 542 and list(report["types"])[0] == "movie"  # largest first
    assert report["relations"] == relations and sum(relations.values()) == 3277
    assert set(report["disk_bytes"]) == {"database", "vectors", "reach", "phrases"}
    # the phrase cache fills when DotRAG or CS-RAG first runs on the project
    assert all(report["disk_bytes"][k] > 0 for k in ("database", "vectors", "reach"))
    assert report["disk_bytes"]["phrases"] >= 0


def test_status_text(metaqa_project, run_kgr, tmp_path):
    result = run_kgr("status", metaqa_project, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    for needle in ("ingest", "reach", "current", "entities per type", "movie", "542",
                   "relationships per relation", "starred_actors", "on disk: database"):
        assert needle in text, needle
    assert re.search(r"│ entities +1,889 │", text)  # each count's name, then its value
    empty = tmp_path / "empty"
    run_kgr("init", empty)
    result = run_kgr("status", empty)
    assert result.exit_code == 0 and "run `kgr ingest`" in result.stdout


# -- the write lock -----------------------------------------------------------------------------------------------
HOLD_LOCK = """
import sys
from kgr.project import Project
with Project.open(sys.argv[1], write=True):
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_busy_project_is_refused_cleanly(metaqa_project, copy_project, run_kgr):
    root = copy_project(metaqa_project, "busy")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = run_kgr("ingest", root, KB, "--schema", SCHEMA)
        one_line_error(result, ExitStatus.BUSY, "project is busy", f"kgr pid {holder.pid}")
        one_line_error(run_kgr("reach", root, "--force"), ExitStatus.BUSY, "project is busy")
        # Readers are not: they read the snapshot the writer published of the state it started from.
        result = run_kgr("status", root, "--json")
        assert result.exit_code == 0, result.stderr
        assert [s["stage"] for s in json.loads(result.stdout)["stages"]] == ["ingest", "reach"]
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    result = run_kgr("ingest", root, KB, "--schema", SCHEMA)
    assert result.exit_code == 0 and "up to date" in result.stderr


def test_a_writer_snapshots_only_what_changed_and_retires_unread_snapshots(metaqa_project, copy_project):
    root = copy_project(metaqa_project, "snapshots")
    with Project.open(root, write=True) as project:
        first = project.publish_snapshot()
        entities = project.db.execute("SELECT count(*) FROM entities").fetchone()
    (root / "snapshots" / "killed-copy.duckdb.tmp").write_bytes(b"half a database")
    with Project.open(root, write=True) as project:  # nothing committed since: the same snapshot, no copy
        assert project.publish_snapshot() == first
        project.db.execute("CREATE TABLE scratch AS SELECT 1 AS x")
    assert not (root / "snapshots" / "killed-copy.duckdb.tmp").exists()
    with Project.open(root, write=True) as project:
        second = project.publish_snapshot()
    assert second != first
    assert sorted(p.name for p in (root / "snapshots").iterdir()) == sorted(
        ["CURRENT", f"{second}.duckdb", f"{second}.json"])  # the first one, unread, was retired
    import duckdb

    copy = duckdb.connect(str(root / "snapshots" / f"{second}.duckdb"), read_only=True)
    try:
        assert copy.execute("SELECT count(*) FROM entities").fetchone() == entities
        assert copy.execute("SELECT x FROM scratch").fetchall() == [(1,)]
    finally:
        copy.close()
