"""Probes (issue #16): the real `kgr retrieve` / `plan` / `eval` commands on a fresh small project.

Question identity (two files of one hop count never share records, JSONL ids reused by another file are refused),
--out written as records complete, empty question files, and what `kgr eval` scores and shows. BM25 keeps them fast.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kgr.errors import ExitStatus
from test_cli import ok, error_line
from kgr.project import Project
from test_dotrag import build_tiny_movies

# Two question files of the same hop count, with different questions (and one shared, on another line).
FIRST = ("who directed [Dark Harbor]\tClint Ranger\n"
         "who wrote [Silent River]\tOtto Penn\n"
         "who starred in [Golden Hour]\tClint Ranger|Nora Quill\n")
SECOND = ("what genre is [Paper Moon Rising]\tComedy\n"
          "who directed [Dark Harbor]\tClint Ranger\n"
          "who wrote [The Last Orchard]\tOtto Penn\n"
          "who directed [Blue Canyon]\tBoris Vane\n")


@pytest.fixture
def project(tmp_path_factory, tmp_path) -> Path:
    """A private copy of the tiny movie project (ingested, with its reachability map)."""
    target = tmp_path / "project"
    shutil.copytree(build_tiny_movies(tmp_path_factory), target, ignore=shutil.ignore_patterns(".kgr.lock"))
    return target


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_two_files_of_one_hop_count_never_share_records(project, run_kgr, tmp_path):
    first = write(tmp_path / "a" / "qa_1hop.txt", FIRST)
    second = write(tmp_path / "b" / "qa_1hop.txt", SECOND)
    ok(run_kgr("retrieve", project, "--questions", first, "--method", "bm25"))
    out = tmp_path / "second.jsonl"
    result = ok(run_kgr("retrieve", project, "--questions", second, "--method", "bm25", "--out", out))
    # Only the question both files ask (on different lines) was already done.
    assert "run bm25-offline: 3 question(s) retrieved, 1 already done" in result.stderr
    asked = [line.split("\t")[0] for line in SECOND.splitlines()]
    assert [r["question"] for r in jsonl(out)] == asked
    report = json.loads(ok(run_kgr("eval", project, "--questions", second, "--run", "bm25-offline", "--json")).stdout)
    summary = report["summaries"]["bm25-offline"]["1-hop"]
    assert summary["n_missing"] == 0 and summary["n_mismatched"] == 0 and summary["recall"] == 1.0


def test_jsonl_ids_reused_by_another_file_are_refused(project, run_kgr, tmp_path):
    row = {"id": "q1", "question": "who directed [Dark Harbor]", "answers": ["Clint Ranger"], "hops": 1}
    first = write(tmp_path / "first.jsonl", json.dumps(row) + "\n")
    second = write(tmp_path / "second.jsonl", json.dumps({**row, "question": "who wrote [Silent River]",
                                                          "answers": ["Otto Penn"]}) + "\n")
    ok(run_kgr("retrieve", project, "--questions", first, "--method", "bm25", "--run", "mine"))
    out = write(tmp_path / "out.jsonl", "kept\n")
    line = error_line(run_kgr("retrieve", project, "--questions", second, "--method", "bm25", "--run", "mine",
                              "--out", out), ExitStatus.USAGE)
    assert "run 'mine' holds a record 'q1' for another question" in line and "--run NAME" in line and "--fresh" in line
    assert out.read_text(encoding="utf-8") == "kept\n"
    # eval scores a record only against its own question text, and says which it could not match.
    result = ok(run_kgr("eval", project, "--questions", second, "--run", "mine", "--json"))
    summary = json.loads(result.stdout)["summaries"]["mine"]["second"]
    assert (summary["n_missing"], summary["n_mismatched"], summary["recall"]) == (1, 1, 0.0)
    assert "1 record(s) carry a question's id but another question's text" in result.stderr
    ok(run_kgr("retrieve", project, "--questions", second, "--method", "bm25", "--run", "mine", "--fresh"))
    with Project.open(project) as opened:
        stored = opened.db.execute("SELECT record->>'question' FROM records WHERE run = 'mine'").fetchall()
    assert stored == [("who wrote [Silent River]",)]


@pytest.mark.parametrize("text", ["", "\n   \n"])
def test_an_empty_question_file_is_bad_input(project, run_kgr, tmp_path, text):
    empty = write(tmp_path / "qa_1hop.txt", text)
    for args in (["retrieve", project, "--questions", empty, "--method", "bm25"],
                 ["plan", project, "--questions", empty],
                 ["eval", project, "--questions", empty, "--run", "bm25-offline"]):
        line = error_line(run_kgr(*args), ExitStatus.BAD_INPUT)
        assert f"{empty}: has no questions" in line, args
    with Project.open(project) as opened:
        assert not opened.has_table("records")  # nothing was written


def test_out_holds_the_finished_records_of_an_interrupted_run(project, run_kgr, tmp_path, monkeypatch):
    from kgr.methods.baselines import BM25

    questions = write(tmp_path / "qa_1hop.txt", SECOND)
    out = tmp_path / "records.jsonl"
    real, calls = BM25.retrieve, []

    def interrupted_after_two(self, query, *args, **kwargs):
        calls.append(query.id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(BM25, "retrieve", interrupted_after_two)
    result = run_kgr("retrieve", project, "--questions", questions, "--method", "bm25", "--out", out)
    assert result.exit_code == ExitStatus.INTERRUPTED
    assert len(jsonl(out)) == 2  # each line a complete record
    monkeypatch.setattr(BM25, "retrieve", real)
    result = ok(run_kgr("retrieve", project, "--questions", questions, "--method", "bm25", "--out", out))
    assert "2 question(s) retrieved, 2 already done" in result.stderr
    assert "4/4" in result.stderr and "2/4" not in result.stderr  # the resumed run's bar ends at its total
    assert [r["question"] for r in jsonl(out)] == [line.split("\t")[0] for line in SECOND.splitlines()]


def test_eval_hops_flag_wins_over_the_path_and_the_table_shows_missing(project, run_kgr, tmp_path):
    two_hop = "who directed the movies written by [Wendy Scribe]\tClint Ranger|Ada Helm\n"
    path = write(tmp_path / "qa_1hop.txt", two_hop + FIRST)
    ok(run_kgr("retrieve", project, "--questions", write(tmp_path / "part.txt", two_hop), "--method", "bm25"))
    report = json.loads(ok(run_kgr("eval", project, "--questions", path, "--hops", "2", "--run", "bm25-offline",
                                   "--json")).stdout)
    summary = report["summaries"]["bm25-offline"]["2-hop"]
    assert report["splits"] == ["2-hop"] and summary["n_gp"] >= 1  # gold intermediates walked 2 hops
    assert summary["n_missing"] == 3
    table = ok(run_kgr("eval", project, "--questions", path, "--run", "bm25-offline")).stdout
    header = next(line for line in table.splitlines() if "missing" in line)
    assert "unmatched" in header and "calls" in header  # zero columns stay
    row = next(line for line in table.splitlines() if line.startswith("│ bm25"))
    assert [cell.strip() for cell in row.strip("│").split("│")][1:3] == ["3", "0"]
    line = error_line(run_kgr("eval", project, "--questions", path, "--questions", path, "--hops", "1", "--hops", "2",
                              "--hops", "3", "--run", "bm25-offline"), ExitStatus.USAGE)
    assert "--hops" in line


def test_eval_keeps_entities_differing_by_case_apart(run_kgr, tmp_path):
    # MetaQA tags a movie "chris pine" and credits the actor "Chris Pine": two entities.
    kb = write(tmp_path / "kb.txt", "Star Trek|starred_actors|Chris Pine\nStar Trek|has_tags|chris pine\n"
                                    "Star Trek|directed_by|J. J. Abrams\n")
    project = tmp_path / "project"
    ok(run_kgr("ingest", project, kb))
    questions = write(tmp_path / "qa_1hop.txt", "what words describe [Star Trek]\tchris pine\n")
    ok(run_kgr("retrieve", project, "--questions", questions, "--method", "bm25"))
    with Project.open(project, write=True) as opened:  # a run that retrieved the actor, not the tag
        opened.db.execute("UPDATE records SET record = json_merge_patch(record, '{\"entities\": [\"Chris Pine\"]}')")
    report = json.loads(ok(run_kgr("eval", project, "--questions", questions, "--run", "bm25-offline",
                                   "--json")).stdout)
    assert report["summaries"]["bm25-offline"]["1-hop"]["recall"] == 0.0
