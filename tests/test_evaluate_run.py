"""`kgr.evaluate.run`: evaluate stored runs on the MetaQA fixture project."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kgr.errors import KgrError
from kgr.evaluate.diagnose import STAGES
from kgr.evaluate.questions import load_questions, question_id
from kgr.evaluate.run import evaluate, graph_neighbors, queries_for
from kgr.methods.base import RunContext
from kgr.methods.runner import run_method
from kgr.project import Project
from kgr.store import GraphStore

METAQA = Path(__file__).resolve().parent.parent / "fixtures" / "metaqa"
FILES = ("summary.json", "summary.csv", "report.md", "recall_f1.png", "latency.png", "scores.jsonl",
         "diagnostics.jsonl", "diagnostics.json")


@pytest.fixture(scope="module")
def question_sets():
    return [(f"{h}-hop", load_questions(METAQA / f"qa_{h}hop.txt", hops=h)) for h in (1, 2, 3)]


@pytest.fixture(scope="module")
def project(metaqa_project, tmp_path_factory, question_sets):
    """A copy of the fixture project with a bm25 run over all questions and a partial one."""
    root = tmp_path_factory.mktemp("evaluate") / "project"
    shutil.copytree(metaqa_project, root)
    with Project.open(root, write=True) as project:
        context = RunContext(project, project.config, GraphStore(project), "retrieve")
        queries = queries_for([q for _, qs in question_sets for q in qs])
        assert run_method(context, "bm25", queries) == ("bm25-offline", 60, 0)
        run_method(context, "bm25", queries[::2], run="bm25-half")
        yield project


def test_queries_for(question_sets):
    q = question_sets[0][1][0]
    (query,) = queries_for([q])
    assert query.id == q.id == question_id(q.question)
    assert query.text == q.question and query.plain == "what movies did Temuera Morrison act in"


def test_evaluate_writes_reports(project, question_sets, tmp_path):
    out = tmp_path / "report"
    result = evaluate(project, question_sets, ["bm25-offline", "bm25-half"], out_dir=out)
    for name in FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert result.splits == ["1-hop", "2-hop", "3-hop", "all"]
    assert result.n_questions == {"1-hop": 20, "2-hop": 20, "3-hop": 20, "all": 60}
    full, half = result.summaries["bm25-offline"], result.summaries["bm25-half"]
    assert full["1-hop"].recall == pytest.approx(1.0)  # 1-hop fixture answers are named next to the topic
    assert full["1-hop"].gp is None and full["2-hop"].n_gp == 20
    for split in result.splits:
        s = full[split]
        assert 0 <= s.recall <= 1 and 0 <= s.precision <= 1 and 0 <= s.f1 <= 1
        assert s.n_missing == 0 and s.llm_calls == 0 and s.latency_ms_median is not None
    assert half["all"].n_missing == 30 and half["all"].recall < full["all"].recall
    assert set(result.stages["bm25-offline"]["all"]) == set(STAGES)
    assert sum(result.stages["bm25-offline"]["1-hop"].values()) == 0
    lines = (out / "diagnostics.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 60
    row = json.loads(lines[-1])
    assert {"run", "split", "id", "missed_answers", "missed_intermediates", "missing_record"} <= set(row)
    assert len((out / "scores.jsonl").read_text().splitlines()) == 2 * 60
    report = (out / "report.md").read_text()
    assert "## 3-hop" in report and "Where missed answers were lost" in report and "bm25-half" in report
    dumped = json.loads(json.dumps(result.to_dict()))
    assert dumped["summaries"]["bm25-offline"]["all"]["n_questions"] == 60
    assert len(result.rows) == 2 * 4


def test_gold_intermediates_on_the_graph(project, question_sets):
    result = evaluate(project, question_sets[1:2], ["bm25-offline"], out_dir=None)
    scores = result.scores["bm25-offline"]["2-hop"]
    # Every 2-hop fixture question passes through at least one movie of its topic entity.
    assert all(s.n_intermediates > 0 for s in scores)
    assert result.splits == ["2-hop"] and not result.files


def test_limit_and_seed(project, question_sets):
    first = evaluate(project, question_sets, ["bm25-offline"], limit=5, seed=3)
    again = evaluate(project, question_sets, ["bm25-offline"], limit=5, seed=3)
    assert first.n_questions["2-hop"] == 5 and first.n_questions["all"] == 15
    ids = [s.id for s in first.scores["bm25-offline"]["all"]]
    assert ids == [s.id for s in again.scores["bm25-offline"]["all"]]


def test_refusals(project, question_sets):
    with pytest.raises(KgrError, match="no records for run 'nope'.*bm25-offline"):
        evaluate(project, question_sets, ["nope"])
    with pytest.raises(KgrError, match="distinct labels"):
        evaluate(project, [question_sets[0], question_sets[0]], ["bm25-offline"])


class _Store:
    """A tiny graph with entities `Up` (twice: a-Up(1)-b, Up(5)-c) and a tag `up` (up(3)-c)."""

    names = ["a", "Up", "b", "up", "c", "Up"]

    def adjacency(self):
        return {0: [(1, 0)], 1: [(0, 0), (2, 1)], 2: [(1, 1)], 3: [(4, 2)], 4: [(3, 2), (5, 3)], 5: [(4, 3)]}


def test_graph_neighbors_merges_equal_names_but_not_other_cases():
    neighbors, canonical = graph_neighbors(_Store())
    assert neighbors("Up") == ["a", "b", "c"]  # both entities named Up
    assert neighbors("up") == ["c"]  # the tag is another entity
    assert neighbors("c") == ["Up", "up"]
    assert canonical("A") == "a"  # one graph name matches casefolded: read as that name
    assert canonical("UP") == "UP" and neighbors("UP") == []  # two do: ambiguous, left as given
    assert canonical("Up") == "Up" and canonical("nowhere") == "nowhere"
