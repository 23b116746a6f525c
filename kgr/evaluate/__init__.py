"""Evaluation: question sets, gold intermediates, DotRAG metrics, diagnostics and reports.

`report` (rich, matplotlib) is not imported here so that loading questions or scoring stays light.
"""

from kgr.evaluate.diagnose import Diagnosis, diagnose, stage_counts
from kgr.evaluate.gold import gold_for_questions, gold_intermediates
from kgr.evaluate.metrics import QuestionScore, Summary, score_run, summarize, summarize_by_hops
from kgr.evaluate.questions import Question, load_questions, sample

__all__ = [
    "Diagnosis",
    "Question",
    "QuestionScore",
    "Summary",
    "diagnose",
    "gold_for_questions",
    "gold_intermediates",
    "load_questions",
    "sample",
    "score_run",
    "stage_counts",
    "summarize",
    "summarize_by_hops",
]
