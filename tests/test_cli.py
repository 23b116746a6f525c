"""`kgr.cli`: the user-facing commands on the MetaQA fixture project (offline backbone, no network).

`kgr reach --show`, `kgr retrieve` (one query, --explain, --json, batch with resume), `kgr overview`, `kgr plan`
with stored plans reused by `kgr retrieve`, and a light `import kgr.cli`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kgr.errors import ExitStatus
from kgr.project import Project
from kgr.reach_stage import open_reach, resolve_entity
from kgr.store import GraphStore

ROOT = Path(__file__).resolve().parent.parent
QA_1HOP = ROOT / "fixtures" / "metaqa" / "qa_1hop.txt"
QUESTION = "what movies did [Temuera Morrison] act in"
ANSWERS = ("Once Were Warriors", "Tracker", "River Queen")
RECORD_FIELDS = {"id", "question", "method", "entities", "paths", "context", "llm_calls", "prompt_tokens",
                 "completion_tokens", "latency_ms"}
BATCH = 3  # questions sampled from qa_1hop.txt for the batch runs (keeps the test set fast)


@pytest.fixture(scope="module")
def work(metaqa_project, copy_project) -> Path:
    """A private copy for the commands that write (retrieve records, overview, plans)."""
    return copy_project(metaqa_project, "cli")


def ok(result):
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def error_line(result, status: ExitStatus) -> str:
    assert result.exit_code == status, (result.exit_code, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kgr: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# -- kgr --help ---------------------------------------------------------------------------------------------------
def test_importing_the_cli_loads_no_heavy_library():
    heavy = ["torch", "sentence_transformers", "litellm", "lancedb"]
    code = f"import sys, kgr.cli; print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_help_lists_the_commands(run_kgr):
    text = ok(run_kgr("--help")).stdout
    for name in ("init", "ingest", "status", "reach", "overview", "plan", "retrieve", "perturb"):
        assert name in text


# -- kgr reach --show ---------------------------------------------------------------------------------------------
def test_reach_show_matches_the_map(metaqa_project, run_kgr):
    with Project.open(metaqa_project) as project:
        store = GraphStore(project)
        reach = open_reach(project)
        eid = resolve_entity(store, "Temuera Morrison")
        by_hop = reach.show(eid)["hops"]
        hop2 = reach.show(eid, 2)["types"]
        actor = reach.type_id("actor")
        members = [store.names[m] for m in reach.members(eid, 2, actor)]

    shown = json.loads(ok(run_kgr("reach", metaqa_project, "--show", "Temuera Morrison", "--json")).stdout)
    assert shown["entity"] == "Temuera Morrison" and shown["types"] == ["actor"]
    assert shown["hops"] == by_hop and by_hop["1"] == {"movie": 3}

    shown = json.loads(ok(run_kgr("reach", metaqa_project, "--show", f"#{eid}", "--hop", "2", "--json")).stdout)
    assert shown["entity"] == "Temuera Morrison" and shown["hop"] == 2 and shown["types"] == hop2

    shown = json.loads(ok(run_kgr("reach", metaqa_project, "--show", "temuera morrison", "--hop", "2",
                                  "--type", "actor", "--json")).stdout)
    assert shown["count"] == len(members) and shown["members"] == members
    assert "Temuera Morrison" not in members  # the anchor is never reached again

    movies = ok(run_kgr("reach", metaqa_project, "--show", "Temuera Morrison", "--hop", "1", "--type", "movie"))
    assert all(answer in movies.stdout for answer in ANSWERS)  # the text tree lists the members


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["--show", "Nobody At All"], ExitStatus.ERROR, "no entity named 'Nobody At All'"),
        (["--show", "Temuera Morrison", "--hop", "9"], ExitStatus.ERROR, "hop 9 is outside 1..3"),
        (["--show", "Temuera Morrison", "--hop", "1", "--type", "spaceship"], ExitStatus.USAGE,
         "--type 'spaceship': no such entity type"),
        (["--show", "Temuera Morrison", "--type", "actor"], ExitStatus.USAGE, "--type needs --hop"),
    ],
)
def test_reach_show_refuses_unknown_entities_cleanly(metaqa_project, run_kgr, args, status, message):
    line = error_line(run_kgr("reach", metaqa_project, *args, "--json"), status)
    assert message in line


# -- kgr retrieve: one query ---------------------------------------------------------------------------------------
def test_retrieve_prints_a_context_with_the_answers(work, run_kgr):
    result = ok(run_kgr("retrieve", work, "--query", QUESTION))
    assert all(answer in result.stdout for answer in ANSWERS)
    assert "starred_actors" in result.stdout
    assert "0 backbone calls" in result.stderr  # the summary goes to stderr, the context alone to stdout


def test_retrieve_explain_prints_a_tree(work, run_kgr):
    text = ok(run_kgr("retrieve", work, "--query", QUESTION, "--explain")).stdout
    assert text.splitlines()[0].startswith(QUESTION) and "(dotrag, offline)" in text.splitlines()[0]
    assert "Temuera Morrison" in text.splitlines()[1]
    for answer in ANSWERS:
        assert f"<- starred_actors - {answer}" in text  # (movie, starred_actors, actor) walked from the actor
    assert "└──" in text
    # each trajectory's first-hop type, with the labels naming its members: a movie is the object of none
    assert "first hop toward movie" in text and "first hop toward movie (named by" not in text


def test_retrieve_json_is_a_record(work, run_kgr, tmp_path):
    out = tmp_path / "one.jsonl"
    result = ok(run_kgr("retrieve", work, "--query", QUESTION, "--json", "--out", out))
    record = json.loads(result.stdout)
    assert RECORD_FIELDS <= set(record)
    assert record["question"] == QUESTION and record["method"] == "dotrag" and record["backbone"] == "offline"
    assert set(ANSWERS) <= set(record["entities"])
    walked = record["paths"][:len(record["paths"]) - (record["trace"].get("fill") or 0)]  # the fill's start nearby
    assert walked and all(path["entities"][0] == "Temuera Morrison" for path in walked)
    assert (record["llm_calls"], record["prompt_tokens"], record["completion_tokens"]) == (0, 0, 0)
    assert record["latency_ms"] > 0 and all(answer in record["context"] for answer in ANSWERS)
    assert json.loads(out.read_text(encoding="utf-8"))["id"] == record["id"]


def test_retrieve_needs_exactly_one_source_of_questions(work, run_kgr):
    assert "either --query or --questions" in error_line(run_kgr("retrieve", work), ExitStatus.USAGE)
    line = error_line(run_kgr("retrieve", work, "--query", QUESTION, "--method", "nope"), ExitStatus.USAGE)
    assert "unknown method 'nope'" in line


# -- overview, plan, and batch retrieval reusing the plans ---------------------------------------------------------
@pytest.fixture(scope="module")
def planned(work, run_kgr):
    """Overview, then plans for BATCH sampled questions, each stored plan marked so its reuse is visible."""
    overview = ok(run_kgr("overview", work))
    plan = ok(run_kgr("plan", work, "--questions", QA_1HOP, "--limit", BATCH, "--json"))
    with Project.open(work, write=True) as project:
        # a planning step no planner times: a record made from a stored plan lists it among its timings
        project.db.execute("UPDATE plans SET plan = json_merge_patch(plan, '{\"timings_ms\": {\"stored\": 0}}')")
        ids = sorted(row[0] for row in project.db.execute("SELECT id FROM plans").fetchall())
    return overview, plan, ids


def test_overview_is_extractive_offline_and_shown(work, planned, run_kgr):
    overview, _, _ = planned
    assert "overview of 10 types stored (0 backbone calls)" in overview.stderr
    with Project.open(work) as project:
        run = project.last_run("overview")
        assert run.counts == {"types": 10, "llm_calls": 0, "backbone": "offline"}
    shown = ok(run_kgr("overview", work, "--show")).stdout
    assert "1,889 entities of 10 types, 3,277 relationships with 9 relation labels." in shown
    for type_name in ("movie", "actor", "director", "genre"):
        assert f"- {type_name}: " in shown
    assert "up to date" in ok(run_kgr("overview", work)).stderr


def test_plan_stores_plans_and_skips_planned_questions(work, planned, run_kgr):
    _, plan, ids = planned
    plans = json.loads(plan.stdout)
    assert len(plans) == len(ids) == BATCH
    assert all(p["pairs"] and p["anchors"] for p in plans)
    assert f"planned {BATCH} question(s) with dotrag; 0 already had a plan" in plan.stderr
    again = ok(run_kgr("plan", work, "--questions", QA_1HOP, "--limit", BATCH))
    assert f"planned 0 question(s) with dotrag; {BATCH} already had a plan" in again.stderr


def test_batch_retrieve_reuses_plans_writes_jsonl_and_resumes(work, planned, run_kgr, tmp_path):
    _, _, ids = planned
    out = tmp_path / "records.jsonl"
    first = ok(run_kgr("retrieve", work, "--questions", QA_1HOP, "--limit", BATCH, "--out", out))
    assert f"{BATCH} question(s) retrieved, 0 already done" in first.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ids
    assert all(RECORD_FIELDS <= set(r) for r in records)
    assert all("plan.stored" in r["timings_ms"] for r in records)  # the stored plans were used
    answers = {q.split("\t")[0]: set(q.split("\t")[1].split("|"))
               for q in QA_1HOP.read_text(encoding="utf-8").splitlines()}
    assert any(answers[r["question"]] & set(r["entities"]) for r in records)

    out.unlink()
    again = ok(run_kgr("retrieve", work, "--questions", QA_1HOP, "--limit", BATCH, "--out", out))
    assert f"0 question(s) retrieved, {BATCH} already done" in again.stderr
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == ids
