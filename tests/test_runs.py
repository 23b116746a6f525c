"""Run storage (`kgr.methods.runs`): the records and plans tables and every query on them."""

from __future__ import annotations

import json

import pytest

from kgr.methods import runs
from kgr.project import Project


@pytest.fixture
def project(tmp_path):
    with Project.open(tmp_path / "project", write=True, create=True) as opened:
        yield opened


def line(qid: str, question: str) -> str:
    return json.dumps({"id": qid, "question": question})


def test_a_project_without_runs_reads_as_empty(project):
    assert not runs.has_records(project) and runs.load_records(project, "r") == [] and runs.run_names(project) == []
    assert runs.load_plans(project, "dotrag", "key") == {}
    assert not project.has_table("records") and not project.has_table("plans")  # reading created nothing


def test_records_are_stored_by_run_and_id_and_read_in_id_order(project):
    runs.create_records_table(project)
    for run, qid in [("suite-a-1", "q2"), ("suite-a-1", "q1"), ("suite-a-2", "q1"), ("other", "q1")]:
        runs.save_record(project, run, qid, "bm25", line(qid, f"question {qid} of {run}"))
    runs.save_record(project, "other", "q1", "bm25", line("q1", "asked again"))  # replaces
    assert [r["id"] for r in runs.load_records(project, "suite-a-1")] == ["q1", "q2"]
    assert runs.record_questions(project, "other") == {"q1": "asked again"}
    assert runs.record_line(project, "suite-a-2", "q1") == line("q1", "question q1 of suite-a-2")
    assert runs.record_lines(project, "suite-a-1", ["q2", "q9"]) == {"q2": line("q2", "question q2 of suite-a-1")}
    assert runs.record_lines(project, "suite-a-1", []) == {}
    assert runs.run_names(project) == ["other", "suite-a-1", "suite-a-2"]
    assert runs.drop_runs(project, "suite-a-", keep="suite-a-2") == 2
    assert runs.run_names(project) == ["other", "suite-a-2"]
    runs.clear_run(project, "other")
    assert runs.run_names(project) == ["suite-a-2"]


def test_plans_are_stored_by_method_key_and_id(project):
    assert runs.plan_questions(project, "dotrag", "k1") == {}
    runs.save_plan(project, "dotrag", "k1", "q1", "who?", {"pairs": [], "usage": {"llm_calls": 0}})
    runs.save_plan(project, "dotrag", "k2", "q1", "who else?", {"pairs": [1]})
    runs.save_plan(project, "csrag", "k1", "q1", "what?", {"constraints": []})
    assert runs.plan_questions(project, "dotrag", "k1") == {"q1": "who?"}
    assert runs.load_plans(project, "dotrag", "k2") == {"q1": ("who else?", {"pairs": [1]})}
    runs.clear_plans(project, "dotrag", "k1")
    assert runs.load_plans(project, "dotrag", "k1") == {}
    assert runs.load_plans(project, "csrag", "k1") == {"q1": ("what?", {"constraints": []})}
