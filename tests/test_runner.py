"""`kgr.methods.runner`: resumable runs keyed by question text, --out written as records complete, plans per text.

Runs BM25 (no reach, no backbone) and DotRAG planning on a private copy of the tiny movie graph.
"""

from __future__ import annotations

import json
import shutil

import pytest

from kgr.errors import ExitStatus, KgrError
from kgr.methods.base import Query, RunContext
from kgr.methods.runner import RunConflictError, run_method, run_plans, stored_plans
from kgr.methods.runs import load_records
from kgr.project import Project
from kgr.store import GraphStore
from test_dotrag import build_tiny_movies

QUERIES = [Query("q1", "who directed [Dark Harbor]"), Query("q2", "who starred in [Dark Harbor]"),
           Query("q3", "what genre is [Dark Harbor]")]


@pytest.fixture
def context(tmp_path_factory, tmp_path):
    """A run context on a private copy of the tiny movie project."""
    target = tmp_path / "project"
    shutil.copytree(build_tiny_movies(tmp_path_factory), target, ignore=shutil.ignore_patterns(".kgr.lock"))
    with Project.open(target, write=True) as project:
        yield RunContext(project, project.config, GraphStore(project), "retrieve")


def test_out_grows_as_records_complete_and_holds_reused_ones(context, tmp_path):
    out = tmp_path / "records.jsonl"
    seen_lines = []

    def on_record(record):
        seen_lines.append(len(out.read_text(encoding="utf-8").splitlines()))

    run_method(context, "bm25", QUERIES[:1], run="r")
    advanced = []
    assert run_method(context, "bm25", QUERIES, run="r", out=out, on_record=on_record,
                      progress=advanced.append) == ("r", 2, 1)
    # The reused q1 line is written first, then each new record as soon as it is stored.
    assert seen_lines == [2, 3]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["question"]) for r in rows] == [(q.id, q.text) for q in QUERIES]
    assert advanced == [1, 1, 1] and sum(advanced) == len(QUERIES)  # a resumed run's progress ends at its total


def test_an_interrupted_run_keeps_complete_lines(context, tmp_path, monkeypatch):
    from kgr.methods.baselines import BM25

    out = tmp_path / "records.jsonl"
    real = BM25.retrieve
    calls = []

    def interrupted(self, query, *args, **kwargs):
        calls.append(query.id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(BM25, "retrieve", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_method(context, "bm25", QUERIES, run="r", out=out)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["q1", "q2"]
    assert [r["id"] for r in load_records(context.project, "r")] == ["q1", "q2"]


def test_a_record_of_another_question_is_never_reused(context, tmp_path):
    run_method(context, "bm25", QUERIES[:2], run="r")
    before = load_records(context.project, "r")
    other = [Query("q1", "who wrote [Dark Harbor]"), QUERIES[2]]
    out = tmp_path / "kept.jsonl"
    out.write_text("old\n", encoding="utf-8")
    with pytest.raises(RunConflictError, match=r"run 'r' holds a record 'q1' for another question.*--run NAME.*--fresh") as err:
        run_method(context, "bm25", other, run="r", out=out)
    assert err.value.status == ExitStatus.USAGE
    assert load_records(context.project, "r") == before and out.read_text(encoding="utf-8") == "old\n"  # nothing touched
    # Whitespace differences are the same question; --fresh redoes the run for the new file.
    assert run_method(context, "bm25", [Query("q1", " who directed  [Dark Harbor]")], run="r")[1:] == (0, 1)
    assert run_method(context, "bm25", other, run="r", resume=False)[1:] == (2, 0)
    assert [r["question"] for r in load_records(context.project, "r")] == [q.text for q in other]


def test_repeated_queries_run_once_and_one_id_for_two_texts_is_refused(context):
    assert run_method(context, "bm25", [QUERIES[0], QUERIES[0]], run="r")[1:] == (1, 0)
    with pytest.raises(KgrError, match="two questions share the id 'q1'"):
        run_method(context, "bm25", [QUERIES[0], Query("q1", "who wrote [Dark Harbor]")], run="s")


def test_a_plan_of_another_question_is_replaced_not_used(context):
    query = Query("q1", "who directed the movies written by [Wendy Scribe]")
    assert run_plans(context, "dotrag", [query]) == (1, 0)
    assert run_plans(context, "dotrag", [query]) == (0, 1)
    other = Query("q1", "what genre is [Dark Harbor]")
    assert stored_plans(context, "dotrag", [query]).keys() == {"q1"}
    assert stored_plans(context, "dotrag", [other]) == {}  # the stored plan is for another text
    assert run_plans(context, "dotrag", [other]) == (1, 0)
    plan = stored_plans(context, "dotrag", [other])["q1"]
    assert "Dark Harbor" in json.dumps(plan) and "Wendy Scribe" not in json.dumps(plan)


# -- a question's record does not depend on its batch ---------------------------------------------------------------
def pass_dependent(encoder) -> None:
    """Make `encoder`'s vectors depend on what shares their pass, as matrix kernels do by their rounding (float32
    ~1e-7, bfloat16 ~2e-3), but on every CPU and visibly: a nudge seeded by the pass's texts (a text alone: none)."""
    import zlib

    import numpy as np

    real = encoder.encode

    def encode(texts, progress=None):
        vectors = real(texts, progress)
        if len(texts) < 2:
            return vectors
        nudge = np.random.default_rng(zlib.crc32("\x1f".join(texts).encode())).normal(0, 3e-3, vectors.shape)
        nudged = vectors + nudge
        return (nudged / np.linalg.norm(nudged, axis=1, keepdims=True)).astype(np.float32)

    encoder.encode = encode


def comparable(record: dict, dropped: tuple[str, ...] = ("usage",)) -> dict:
    """A record without its clock readings (nor the `dropped` keys, at any depth)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.endswith("_ms") and k not in dropped}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return strip({k: v for k, v in record.items() if k not in ("latency_ms", "timings_ms")})


@pytest.fixture(scope="module")
def twowiki_project(tmp_path_factory):
    from pathlib import Path

    from kgr.ingest.stage import IngestOptions, run_ingest

    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "2wiki"
    root = tmp_path_factory.mktemp("wiki") / "project"
    with Project.open(root, write=True, create=True) as project:
        run_ingest(project, IngestOptions([fixtures / "triples.jsonl"], passages=[fixtures / "corpus.json"]))
    return root


@pytest.mark.parametrize("method", ["dotrag", "csrag"])
def test_a_questions_record_is_the_same_alone_in_a_batch_in_threads_and_after_a_resume(
        method, metaqa_project, twowiki_project, copy_project):
    """Whatever shares a question's encoder passes, and whichever questions came before it, its record is the same."""
    from pathlib import Path

    from kgr.evaluate.questions import load_questions
    from kgr.methods.runner import open_run

    if method == "dotrag":
        fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "metaqa"
        files, source = [fixtures / f"qa_{h}hop.txt" for h in (1, 2, 3)], metaqa_project
    else:
        files, source = [Path(__file__).resolve().parent.parent / "fixtures" / "2wiki" / "questions.jsonl"], \
            twowiki_project
    queries = [Query(q.id, q.question) for f in files for q in load_questions(f)[:8]]
    queries += [Query(f"{q.id}-plain", q.plain) for q in queries[::2]]  # some without brackets: seeds search
    with Project.open(copy_project(source, method), write=True) as project:
        context = open_run(project, method)
        pass_dependent(context.store.encoder)

        def records(run: str, dropped: tuple[str, ...] = ("usage",)) -> dict[str, dict]:
            return {r["id"]: comparable(r, dropped) for r in load_records(context.project, run)}

        run_method(context, method, queries, run="batch")
        run_method(context, method, queries[::-1], run="reversed")
        run_method(context, method, queries, run="threads", workers=2)
        for query in queries:
            run_method(context, method, [query], run="alone")
        run_method(context, method, queries[len(queries) // 2:], run="resumed")
        run_method(context, method, queries, run="resumed")
        run_plans(context, method, queries[::-1])  # `kgr plan`, then `kgr retrieve` reads the stored plans
        run_method(context, method, queries, run="planned")
        batch = records("batch")
        assert len(batch) == len(queries)
        for run in ("reversed", "threads", "alone", "resumed"):
            assert records(run) == batch, run
        provenance = ("usage", "source", "plan_source")  # a plan read back says so
        assert records("planned", provenance) == records("batch", provenance)


# -- which settings a stored plan depends on ------------------------------------------------------------------------
def test_the_planning_settings_are_derived_from_the_config_field_metadata():
    from kgr.methods.runner import PLANNING_SECTIONS, PLANNING_SETTINGS

    # the list kept by hand before it was derived, plus the CS-RAG planner's former module constants
    kept_by_hand = {
        "dotrag": {"seeds", "anchors", "lexical_anchors", "previews", "trajectories_per_anchor", "trajectories",
                   "use_overview", "use_previews", "max_hops", "hedge_trajectories"},
        "csrag": {"variants", "anchor_matches"},
    }
    moved = {"max_hops", "hop_margin", "hop_floor", "global_margin", "synonym_similarity", "follow_min_edges",
             "follow_min_share", "min_coverage", "likely_labels", "prompt_relations"}
    added = {"nearest_similarity", "answer_type", "hedge_walks", "read_direction"}  # CS-RAG's offline planner, since
    assert {method: set(names) for method, names in PLANNING_SETTINGS.items()} == {
        "dotrag": kept_by_hand["dotrag"], "csrag": kept_by_hand["csrag"] | moved | added}
    # CS-RAG's offline planner matches mentions by anchors.min_similarity too (not in the hand-kept list), and walks
    # the offline policy's chains (since plan version 12)
    assert {method: set(sections) for method, sections in PLANNING_SECTIONS.items()} == {
        "dotrag": {"offline", "anchors"}, "csrag": {"offline", "anchors"}}
    # the passage walk runs at retrieval, after the plan: its settings do not replan
    assert not {"walk_iterations", "walk_floor", "walk_damping", "gamma"} & set(PLANNING_SETTINGS["csrag"])


def test_a_changed_planning_setting_plans_again_and_another_does_not(context):
    import copy
    import dataclasses

    def changed(section: str = "csrag", **settings) -> RunContext:
        config = copy.deepcopy(context.config)
        for name, value in settings.items():
            setattr(getattr(config, section), name, value)
        return dataclasses.replace(context, config=config)

    queries = QUERIES[:2]
    assert run_plans(context, "csrag", queries) == (2, 0)
    assert run_plans(changed(gamma=3.0, walk_floor=0.01), "csrag", queries) == (0, 2)  # retrieval settings
    assert run_plans(changed(hop_margin=0.25), "csrag", queries) == (2, 0)  # a moved planner tunable
    assert run_plans(changed(max_hops=1), "csrag", queries) == (2, 0)
    assert stored_plans(changed(max_hops=1), "csrag", queries).keys() == {"q1", "q2"}
    assert run_plans(changed("anchors", min_similarity=0.9), "csrag", queries) == (2, 0)  # the planner's anchors
    assert run_plans(context, "csrag", queries) == (0, 2)  # the plans of the first key are still there


def test_a_run_holds_the_vector_matrices_its_method_reads(metaqa_project):
    from kgr.methods.runner import open_run

    matrices = {"entity_vectors", "relationship_vectors"}
    with Project.open(metaqa_project) as project:
        assert not matrices & set(vars(open_run(project, "bm25").store))  # texts only
        assert matrices <= set(vars(open_run(project, "vss").store))  # no ANN index here: it scans both tables
