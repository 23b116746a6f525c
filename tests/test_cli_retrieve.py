"""`kgr retrieve` says so when a record found nothing: a warning in the record, on stderr, and in a batch's summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgr.methods.records import EMPTY_RESULT

ROOT = Path(__file__).resolve().parent.parent
QA_1HOP = ROOT / "fixtures" / "metaqa" / "qa_1hop.txt"
UNKNOWN = "which movies did [Zyxqv Wvutq] act in"  # no entity, and no word BM25 finds in the graph


@pytest.fixture(scope="module")
def work(metaqa_project, copy_project) -> Path:
    return copy_project(metaqa_project, "empty-results")


def empty_warnings(record: dict) -> list[str]:
    return [w for w in record["warnings"] if w.startswith(EMPTY_RESULT)]


@pytest.mark.parametrize("method", ["dotrag", "csrag", "bm25"])
def test_an_empty_record_carries_a_warning_printed_on_stderr(work, run_kgr, method):
    result = run_kgr("retrieve", work, "--method", method, "--query", UNKNOWN, "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert not record["paths"] and not record["passages"]
    warning = empty_warnings(record)
    assert len(warning) == 1 and warning[0].startswith("empty result: no path or passage matched the question")
    if method != "bm25":  # graph methods know why: the mention matched no entity
        assert "(no entity matched 'Zyxqv Wvutq')" in warning[0]
    assert f"warning: {warning[0]}" in result.stderr


def test_csrag_batch_without_passages_counts_its_empty_results(work, run_kgr, tmp_path):
    out = tmp_path / "records.jsonl"
    # without the neighbourhood fill (`csrag.graph_fill`), which answers every unresolved plan from the graph, nor an
    # unsettled pool's best (`csrag.graph_recovery`), and with only a pool of one dominant candidate sufficient
    result = run_kgr("retrieve", work, "--method", "csrag", "--questions", QA_1HOP, "--out", out,
                     *[part for setting in ("graph_fill=0", "graph_recovery=0", "set_answers=0", "gamma=1")
                       for part in ("--set", f"csrag.{setting}")])
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    empty = [r for r in records if not r["paths"] and not r["passages"]]
    assert empty, "the fixture's CS-RAG run is expected to leave some questions empty"
    assert f"warning: {len(empty)} of {len(records)} questions had empty results (no path or passage)" in \
        " ".join(result.stderr.split())
    for record in records:
        assert len(empty_warnings(record)) == (1 if record in empty else 0)  # non-empty records are unchanged
    reasons = " ".join(empty_warnings(r)[0] for r in empty)
    assert "constraint(s) unresolved" in reasons and "the graph has no passages to recover them from" in reasons
