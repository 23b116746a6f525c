"""kgr.api, the Python API the command line is a layer over: docs/python-api.md's example run as written, one
question against a batch, question files, and refusals raised as KgrError subclasses (never typer exits)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kgr import api
from kgr.errors import InputError, KgrError, StaleStageError, UsageError
from kgr.methods.runner import RunConflictError

ROOT = Path(__file__).resolve().parent.parent
METAQA = ROOT / "fixtures" / "metaqa"
DOC = ROOT / "docs" / "python-api.md"
EXAMPLE = re.compile(r"^<!-- python-api-example -->\n```python\n(?P<code>.*?)^```$", re.S | re.M)
QUESTION = "what movies did [Temuera Morrison] act in"
OTHER = "who starred in [Cemetery Man]"
ANSWERS = {"Once Were Warriors", "Tracker", "River Queen"}


def comparable(record) -> dict:
    """A record as JSON data without what differs between two retrievals of the same question: its id, and how
    long it took (`latency_ms`, `timings_ms`, the trace's `*_ms`)."""
    def untimed(value):
        if isinstance(value, dict):
            return {k: untimed(v) for k, v in value.items() if not k.endswith("_ms")}
        return [untimed(v) for v in value] if isinstance(value, list) else value

    data = untimed(json.loads(record.to_json()))
    del data["id"]
    return data


@pytest.fixture()
def project(metaqa_project, copy_project) -> Path:
    """A private copy of the ingested MetaQA slice (map built): retrieval writes records into it."""
    return copy_project(metaqa_project, "api")


@pytest.fixture(scope="module")
def refused_project(metaqa_project, copy_project) -> Path:
    """One copy of the MetaQA slice for the refusals (opening it to write publishes a snapshot)."""
    return copy_project(metaqa_project, "refusals")


# -- the documented example -------------------------------------------------------------------------------------
def test_the_documented_example_runs(tmp_path):
    match = EXAMPLE.search(DOC.read_text(encoding="utf-8"))
    assert match, "docs/python-api.md has no <!-- python-api-example --> python block"
    script = tmp_path / "example.py"
    script.write_text(match["code"], encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Once Were Warriors" in done.stdout and "dotrag-offline retrieved 5 questions" in done.stdout
    assert re.search(r"recall \d\.\d{3}, precision \d\.\d{3}, F1 \d\.\d{3}", done.stdout), done.stdout


def test_importing_the_api_imports_neither_typer_nor_heavy_modules():
    code = ("import sys, kgr.api; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('typer', 'click', 'rich', 'torch', 'duckdb', 'numpy')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- retrieve -----------------------------------------------------------------------------------------------------
def test_one_question_and_a_batch_give_the_same_record(project):
    single = api.retrieve(project, QUESTION)
    assert (len(single), single.run, single.retrieved, single.already_done) == (1, None, 1, 0)
    assert single[0].id == "query" and ANSWERS <= set(single[0].entities)
    assert api.records(project, "dotrag-offline") == []  # one question is not stored

    batch = api.retrieve(project, [OTHER, QUESTION])
    assert (batch.run, batch.retrieved, batch.already_done) == ("dotrag-offline", 2, 0)
    assert [r.question for r in batch] == [OTHER, QUESTION]
    assert batch[1].id == api.question_text_id(QUESTION)
    assert comparable(batch[1]) == comparable(single[0])

    stored = {r.id: r for r in api.records(project, "dotrag-offline")}
    assert set(stored) == {r.id for r in batch}
    assert comparable(stored[batch[1].id]) == comparable(single[0])


def test_a_batch_resumes_and_returns_the_stored_records(project, tmp_path):
    first = api.retrieve(project, [QUESTION, OTHER], method="bm25")
    seen = []
    again = api.retrieve(project, [OTHER, QUESTION, "who directed [Cube Zero]"], method="bm25", on_record=seen.append,
                         out=tmp_path / "records.jsonl")
    assert (again.run, again.retrieved, again.already_done) == ("bm25-offline", 1, 2)
    assert [r.question for r in seen] == ["who directed [Cube Zero]"]  # on_record sees the new records only
    by_id = {r.id: r.to_json() for r in first}
    assert [r.to_json() for r in again[:2]] == [by_id[again[0].id], by_id[again[1].id]]
    lines = (tmp_path / "records.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["question"] for line in lines] == [r.question for r in again]

    counts = api.retrieve(project, [QUESTION], method="bm25", keep_records=False)
    assert (list(counts), counts.retrieved, counts.already_done) == ([], 0, 1)
    redone = api.retrieve(project, [QUESTION], method="bm25", resume=False)
    assert redone.retrieved == 1 and len(api.records(project, "bm25-offline")) == 1  # the run was emptied


def test_a_question_file_path_works(project):
    result = api.retrieve(project, METAQA / "qa_1hop.txt", method="bm25", run="file", limit=3, seed=1)
    assert (len(result), result.run, result.retrieved) == (3, "file", 3)
    assert all(r.id.startswith("metaqa-") for r in result)
    assert [r.id for r in result] == sorted(r.id for r in result)  # sampled questions come in id order
    assert {r.id for r in api.records(project, "file")} == {r.id for r in result}
    # the same file, sampled the same way, from a string path is a question, not a file
    [record] = api.retrieve(project, str(METAQA / "qa_1hop.txt"), method="bm25")
    assert record.question == str(METAQA / "qa_1hop.txt")


def test_query_objects_keep_their_ids_and_plans_are_reused(project):
    from kgr.methods.base import Query

    planned = api.plan(project, [Query("mine", QUESTION)])
    assert (planned.planned, planned.already_planned, len(planned.plans)) == (1, 0, 1)
    assert api.plan(project, [Query("mine", QUESTION)]).already_planned == 1
    [record] = api.retrieve(project, [Query("mine", QUESTION)], run="planned")
    assert record.id == "mine" and ANSWERS <= set(record.entities)


def test_an_open_project_runs_several_steps_under_one_lock(project):
    with api.open_project(project, write=True) as opened:
        assert api.reach(opened) is None  # the map is current
        assert [stage["stage"] for stage in api.status(opened)["stages"]][:2] == ["ingest", "reach"]
        assert api.show_reach(opened, "Temuera Morrison", hop=1)["entity"] == "Temuera Morrison"
        with pytest.raises(UsageError, match="settings apply when a project is opened"):
            api.status(opened, settings={"dotrag.search_top": 5})
    with api.open_project(project) as read_only, pytest.raises(UsageError, match="opened to read"):
        api.reach(read_only)


# -- refusals -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda p, t: api.retrieve(p, 42), UsageError, "expected a question"),
    (lambda p, t: api.retrieve(p, []), UsageError, "the list is empty"),
    (lambda p, t: api.retrieve(p, [QUESTION, 7]), UsageError, "not int"),
    (lambda p, t: api.retrieve(p, QUESTION, method="nope"), UsageError, "unknown method 'nope'"),
    (lambda p, t: api.retrieve(p, QUESTION, run="mine"), UsageError, "not stored in a run"),
    (lambda p, t: api.retrieve(p, QUESTION, limit=-1), UsageError, "limit -1"),
    (lambda p, t: api.retrieve(p, QUESTION, settings={"dotrag.search_top": -5}), UsageError, "out of range"),
    (lambda p, t: api.retrieve(p, t / "missing.txt"), InputError, "missing.txt"),
    (lambda p, t: api.retrieve(t, QUESTION), KgrError, "not a kgr project"),
    (lambda p, t: api.plan(p, QUESTION, method="bm25"), KgrError, "has no planning stage"),
    (lambda p, t: api.ingest(t / "new", t / "missing.txt"), InputError, "missing.txt"),
    (lambda p, t: api.ingest(t / "new", METAQA / "kb.txt", fmt="nope"), UsageError, "--format 'nope'"),
    (lambda p, t: api.ingest(t / "new", METAQA / "kb.txt", mode="merge"), UsageError, "mode 'merge'"),
    (lambda p, t: api.ingest(t / "new", []), UsageError, "at least one graph file"),
    (lambda p, t: api.read_overview(p), StaleStageError, "stage overview has not run"),
    (lambda p, t: api.show_reach(p, "Nobody At All"), KgrError, "no entity named 'Nobody At All'"),
    (lambda p, t: api.show_reach(p, "Temuera Morrison", type_name="movie"), UsageError, "needs --hop"),
    (lambda p, t: api.evaluate(p, METAQA / "qa_1hop.txt", "no-such-run"), KgrError, "no retrieval runs stored"),
    (lambda p, t: api.status(t / "nowhere"), KgrError, "not a kgr project"),
])
def test_bad_input_raises_a_kgr_error(refused_project, tmp_path, call, error, message):
    with pytest.raises(KgrError) as raised:
        call(refused_project, tmp_path)
    assert isinstance(raised.value, error) and message in raised.value.message, repr(raised.value)
    assert not (tmp_path / "new").exists()  # a refused first ingest leaves no project behind


def test_a_run_holding_another_question_under_an_id_is_refused(project):
    from kgr.methods.base import Query

    api.retrieve(project, [Query("q1", QUESTION)], method="bm25")
    with pytest.raises(RunConflictError):
        api.retrieve(project, [Query("q1", OTHER)], method="bm25")
