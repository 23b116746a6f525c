"""Metrics, gold intermediates and diagnostics of kgr.evaluate on hand-computed cases."""

from __future__ import annotations

import pytest

from kgr.errors import KgrError
from kgr.evaluate.diagnose import CUT_BY_BUDGET, FILTERED, NEVER_REACHED, NOT_RETRIEVED, diagnose, stage_counts
from kgr.evaluate.gold import gold_for_questions, gold_intermediates
from kgr.evaluate.metrics import (
    answers_in_context,
    entity_key,
    entity_scores,
    normalize,
    passage_recall_at_k,
    score_run,
    summarize_by_hops,
)
from kgr.evaluate.questions import Question


def q(qid, answers, anchors=("Anchor",), hops=2, passages=()):
    """Build a question with defaults that do not matter to a test."""
    return Question(
        id=qid, question="?", anchors=list(anchors), answers=list(answers), hops=hops, passages=list(passages)
    )


# --- entity metrics -------------------------------------------------------------------------------------


def test_basic_case():
    # R = {a1, x, i1}, A = {a1, a2}, I = {i1}: R' = {a1, x}; recall 1/2, precision 1/2, F1 1/2, GP 1.
    assert entity_scores(["a1", "x", "i1"], ["a1", "a2"], ["i1"]) == (0.5, 0.5, 0.5, 1.0)


def test_empty_intermediates_gp_none():
    recall, precision, f1, gp = entity_scores(["a"], ["a"], [])
    assert (recall, precision, f1, gp) == (1.0, 1.0, 1.0, None)


def test_anchor_inside_retrieved_counts_in_r_prime():
    # The anchor is not an intermediate, so it stays in R' = {Anchor, a}: precision 1/2.
    assert entity_scores(["Anchor", "a"], ["a"], ["m"]) == (1.0, 0.5, pytest.approx(2 / 3), 0.0)


def test_duplicates_count_once_and_whitespace_is_collapsed():
    # "a  b" and " a b " are one entity; R' = {a b, z}: recall 1, precision 1/2, F1 2/3.
    assert entity_scores(["a  b", "z", "a b"], [" a b "], []) == (1.0, 0.5, pytest.approx(2 / 3), None)
    assert entity_key("  The\tMatrix  Reloaded ") == "The Matrix Reloaded"
    assert normalize("  The\tMatrix  Reloaded ") == "the matrix reloaded"  # titles and context text


def test_names_differing_by_case_are_distinct_entities():
    # MetaQA's tag "chris pine" is not the actor "Chris Pine": retrieving the actor misses the tag answer.
    assert entity_scores(["Chris Pine"], ["chris pine"], []) == (0.0, 0.0, 0.0, None)
    assert entity_scores(["chris pine", "Chris Pine"], ["chris pine"], []) == (1.0, 0.5, pytest.approx(2 / 3), None)
    # The context is text: an answer found in it in any case counts.
    assert answers_in_context("Star Trek starred Chris Pine.", ["chris pine"]) == 1.0


def test_answer_that_is_also_intermediate_stays():
    # I = {a, m}; I \ A = {m}; R' = {a}: recall 1, precision 1, GP = |{a, m}|/2 = 1.
    assert entity_scores(["a", "m"], ["a"], ["a", "m"]) == (1.0, 1.0, 1.0, 1.0)


def test_only_intermediates_retrieved_gives_zero_precision():
    # R' is empty once intermediates leave: precision 0 by definition, F1 0; GP 1/2.
    assert entity_scores(["m"], ["a"], ["m", "n"]) == (0.0, 0.0, 0.0, 0.5)


def test_empty_retrieved():
    assert entity_scores([], ["a", "b"], ["m"]) == (0.0, 0.0, 0.0, 0.0)


def test_no_answers_is_an_error():
    with pytest.raises(ValueError):
        entity_scores(["a"], [], [])


def test_passage_recall_and_answers_in_context():
    assert passage_recall_at_k(["T1", "t1", "X", "T2"], ["t1", "T2"], 2) == 0.5  # duplicates count once
    assert passage_recall_at_k(["T1", "X", "T2"], ["t1", "T2"], 3) == 1.0
    context = "Forrest Gump (1994) was directed by Robert  Zemeckis. Upside Down."
    assert answers_in_context(context, ["robert zemeckis", "Up", "Tom Hanks"]) == pytest.approx(1 / 3)


# --- runs and summaries ---------------------------------------------------------------------------------


def record(qid, entities, **extra):
    """Build a retrieval record with cost fields."""
    base = {"id": qid, "question": "?", "method": "m", "entities": entities, "paths": [], "context": ""}
    base.update(llm_calls=2, prompt_tokens=100, completion_tokens=10, cost_usd=0.01, latency_ms=10.0)
    base.update(extra)
    return base


def test_score_run_macro_averages_and_missing():
    questions = [q("q1", ["a"]), q("q2", ["b", "c"]), q("q3", ["d"], hops=3)]
    gold = {"q1": {"m"}, "q2": set(), "q3": {"x", "y"}}
    records = [
        record("q1", ["a", "m", "z"], latency_ms=10.0, context="a and z"),  # R'={a,z}: R 1, P 1/2, F1 2/3, GP 1
        record("q2", ["b"], latency_ms=30.0, llm_calls=4),  # R 1/2, P 1, F1 2/3, GP None
        record("other", ["a"]),  # not in the question set: ignored
    ]
    scores, summary = score_run(records, questions, gold)
    assert [s.missing for s in scores] == [False, False, True]
    assert summary.n_questions == 3 and summary.n_missing == 1 and summary.missing_ids == ["q3"]
    assert summary.recall == pytest.approx((1 + 0.5 + 0) / 3)
    assert summary.precision == pytest.approx((0.5 + 1 + 0) / 3)
    assert summary.f1 == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    # GP is defined for q1 (1.0) and q3 (missing, 0.0), not for q2.
    assert summary.gp == pytest.approx(0.5) and summary.n_gp == 2
    assert scores[0].answers_in_context == 1.0 and scores[1].answers_in_context == 0.0
    # Cost comes from the two records present.
    assert summary.llm_calls_total == 6 and summary.llm_calls == 3.0
    assert summary.prompt_tokens_total == 200 and summary.cost_usd_total == pytest.approx(0.02)
    assert (summary.latency_ms_mean, summary.latency_ms_median) == (20.0, 20.0)
    assert summary.latency_ms_p95 == pytest.approx(29.0)


def test_score_run_passages_and_tolerant_records():
    questions = [q("q1", ["a"], passages=["P1", "P2"]), q("q2", ["b"], passages=["P3"])]
    records = [
        {"id": "q1", "question": "?", "entities": ["a"], "passages": ["P1", "X", "P2"], "latency_ms": None},
        {"id": "q2", "question": "?", "entities": ["b"]},  # no passages, no context, no cost fields
    ]
    scores, summary = score_run(records, questions, ks=(1, 3))
    assert scores[0].passage_recall == {1: 0.5, 3: 1.0}
    assert scores[1].passage_recall is None and scores[1].answers_in_context is None
    assert summary.passage_recall == {1: 0.5, 3: 1.0} and summary.n_passages == 1
    assert summary.latency_ms_median is None and summary.llm_calls_total == 0


def test_records_of_another_question_text_are_not_scored():
    # The run's record under q1's id was made for another question (ids reused): q1 counts as missing.
    questions = [q("q1", ["a"]), q("q2", ["b"])]
    records = [record("q1", ["a"], question="who else?"), record("q2", ["b"], question="  ? ")]
    scores, summary = score_run(records, questions)
    assert [(s.missing, s.mismatched, s.recall) for s in scores] == [(True, True, 0.0), (False, False, 1.0)]
    assert (summary.n_missing, summary.n_mismatched, summary.missing_ids) == (1, 1, ["q1"])
    assert summary.llm_calls_total == 2  # only the matched record's cost counts


def test_records_with_unmatched_mentions_are_counted():
    questions = [q("q1", ["a"]), q("q2", ["b"]), q("q3", ["c"])]
    records = [record("q1", [], unmatched_mentions=["Zebra Motors"]), record("q2", ["b"], unmatched_mentions=[])]
    scores, summary = score_run(records, questions)
    assert [s.unmatched for s in scores] == [True, False, False]
    assert summary.n_unmatched == 1 and summary.n_missing == 1


def test_duplicate_records_are_rejected():
    with pytest.raises(KgrError):
        score_run([record("q1", []), record("q1", [])], [q("q1", ["a"])])


def test_summarize_by_hops():
    questions = [q("q1", ["a"], hops=1), q("q2", ["b"], hops=2), q("q3", ["c"], hops=2)]
    scores, _ = score_run([record("q1", ["a"]), record("q2", ["b"])], questions)
    by_hops = summarize_by_hops(scores)
    assert list(by_hops) == ["1-hop", "2-hop", "all"]
    assert by_hops["1-hop"].recall == 1.0 and by_hops["2-hop"].recall == 0.5
    assert by_hops["all"].recall == pytest.approx(2 / 3)


# --- gold intermediates ---------------------------------------------------------------------------------

#   S - m1 - a          (S: anchor; a, b: answers)
#   |    |
#   m2 - m3 - b
#   plus S - h, h - a, h - b, h - m3   (h and m3 have degree 4, the others at most 3)
EDGES = [
    ("S", "m1"), ("m1", "a"), ("S", "m2"), ("m2", "m3"), ("m1", "m3"), ("m3", "b"),
    ("S", "h"), ("h", "a"), ("h", "b"), ("h", "m3"),
]  # fmt: skip
ADJ: dict[str, set[str]] = {}
for _x, _y in EDGES:
    ADJ.setdefault(_x, set()).add(_y)
    ADJ.setdefault(_y, set()).add(_x)


def neighbors(name):
    """Undirected neighbors in the hand-drawn graph (unknown names have none)."""
    return ADJ.get(name, ())


def test_gold_one_hop_is_empty():
    assert gold_intermediates(neighbors, ["S"], ["a"], 1) == set()
    assert gold_intermediates(neighbors, ["S"], ["a"], None) == set()


def test_gold_two_hops():
    # S-m1-a, S-h-a, S-h-b: the middle entities.
    assert gold_intermediates(neighbors, ["S"], ["a", "b"], 2) == {"m1", "h"}


def test_gold_three_hops():
    # Walks S-x-y-t with t an answer: S-m1-m3-b, S-m2-m3-b, S-h-m3-b (every other 3-step walk ends
    # elsewhere), so position 1 holds {m1, m2, h} and position 2 holds {m3}.
    assert gold_intermediates(neighbors, ["S"], ["a", "b"], 3) == {"m1", "m2", "m3", "h"}
    # a is two steps from S and no 3-step walk ends there: no intermediates.
    assert gold_intermediates(neighbors, ["S"], ["a"], 3) == set()


def test_gold_walks_may_revisit_but_anchor_is_excluded():
    # 4 hops S -> a: S-m1-S-m1-a and S-h-S-h-a revisit the anchor, which still never counts.
    # Position 1: {m1, m2, h}; 2: {S, a, m3, b}; 3: {m1, h}.
    assert gold_intermediates(neighbors, ["S"], ["a"], 4) == {"m1", "m2", "h", "a", "m3", "b"}


def test_gold_answer_inside_a_walk_is_an_intermediate():
    # S-h-a-h? ends at h (not an answer). S-h-b-h-a: b sits inside a 4-step walk to a.
    assert "b" in gold_intermediates(neighbors, ["S"], ["a"], 4)


def test_gold_hub_cap():
    # With degree > 3 capped (h and m3), walks cannot pass through h: 2 hops S -> a, b keeps only m1.
    assert gold_intermediates(neighbors, ["S"], ["a", "b"], 2, max_degree=3) == {"m1"}
    # A hub may still be an endpoint: S-m1-m3, S-m2-m3, S-h-m3 lose only the walk through h.
    assert gold_intermediates(neighbors, ["S"], ["m3"], 2) == {"m1", "m2", "h"}
    assert gold_intermediates(neighbors, ["S"], ["m3"], 2, max_degree=3) == {"m1", "m2"}


def test_gold_unknown_entities_and_batch():
    assert gold_intermediates(neighbors, ["nowhere"], ["a"], 2) == set()
    questions = [q("x", ["a", "b"], anchors=["S"], hops=2), q("y", ["a"], anchors=["S"], hops=1)]
    assert gold_for_questions(questions, neighbors) == {"x": {"m1", "h"}, "y": set()}


# --- diagnostics ----------------------------------------------------------------------------------------


def test_diagnose_stages():
    question = q("q1", ["a", "b", "c", "d", "e"])
    rec = {
        "id": "q1",
        "entities": ["A", "a"],
        "trace": {"reached": ["a", "b", "c", "d"], "filtered": ["b", "c"], "cut_by_budget": ["c"]},
    }
    diagnosis = diagnose(rec, question, {"m", "a"})
    assert diagnosis.answers == {"b": FILTERED, "c": CUT_BY_BUDGET, "d": NOT_RETRIEVED, "e": NEVER_REACHED}
    assert diagnosis.intermediates == {"m": NEVER_REACHED}
    assert stage_counts([diagnosis]) == {NEVER_REACHED: 1, FILTERED: 1, CUT_BY_BUDGET: 1, NOT_RETRIEVED: 1}


def test_diagnose_without_trace():
    question = q("q1", ["a", "b"])
    assert diagnose({"id": "q1", "entities": ["a"]}, question).answers == {"b": NOT_RETRIEVED}
    assert diagnose(None, question).answers == {"a": NOT_RETRIEVED, "b": NOT_RETRIEVED}
    # A trace with only a filter list cannot say what was never reached.
    partial = {"entities": [], "trace": {"filtered": ["a"]}}
    assert diagnose(partial, question).answers == {"a": FILTERED, "b": NOT_RETRIEVED}
