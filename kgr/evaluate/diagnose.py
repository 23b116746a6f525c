"""Diagnostics: the retrieval stage at which each missed answer (and gold intermediate) was lost.

Methods may add a `trace` to their records with three name lists:
`reached` (entities that ever entered a search frontier or candidate pool), `filtered` (dropped by the
similarity threshold or top-k) and `cut_by_budget` (dropped by token packing). An entity can be filtered
at one step and reached again later, so the latest stage wins: the budget cut (last in the pipeline)
before the similarity filter, before never having been reached.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from kgr.evaluate.metrics import entity_key
from kgr.evaluate.questions import Question

NEVER_REACHED = "never reached the frontier"
FILTERED = "filtered by similarity"
CUT_BY_BUDGET = "cut by the budget"
NOT_RETRIEVED = "not retrieved"
STAGES = (NEVER_REACHED, FILTERED, CUT_BY_BUDGET, NOT_RETRIEVED)


@dataclass
class Diagnosis:
    """Missed answers and missed gold intermediates of one question, each mapped to its stage."""

    id: str
    answers: dict[str, str] = field(default_factory=dict)
    intermediates: dict[str, str] = field(default_factory=dict)


def diagnose(record: dict | None, question: Question, gold_I: Iterable[str] = ()) -> Diagnosis:
    """Explain why each answer and gold intermediate missing from the record's entities was lost."""
    record = record or {}
    retrieved = {entity_key(e) for e in record.get("entities") or [] if isinstance(e, str)}
    trace = record.get("trace") if isinstance(record.get("trace"), dict) else {}
    stage_sets = {key: _names(trace.get(key)) for key in ("reached", "filtered", "cut_by_budget")}

    def stage(name: str) -> str:
        """Return the stage at which a missed name was lost."""
        key = entity_key(name)
        if key in (stage_sets["cut_by_budget"] or ()):
            return CUT_BY_BUDGET
        if key in (stage_sets["filtered"] or ()):
            return FILTERED
        # Only a trace that lists what it reached can say an entity was never reached.
        if stage_sets["reached"] is not None and key not in stage_sets["reached"]:
            return NEVER_REACHED
        return NOT_RETRIEVED

    return Diagnosis(
        id=question.id,
        answers={a: stage(a) for a in question.answers if entity_key(a) not in retrieved},
        intermediates={x: stage(x) for x in sorted(gold_I) if entity_key(x) not in retrieved},
    )


def stage_counts(diagnoses: Iterable[Diagnosis]) -> dict[str, int]:
    """Count missed answers per stage over many questions, every stage listed (zeros included)."""
    counts = Counter(stage for d in diagnoses for stage in d.answers.values())
    return {stage: counts.get(stage, 0) for stage in STAGES}


def _names(value) -> set[str] | None:
    """Normalize a trace list into a name set; None when the trace does not carry it."""
    if not isinstance(value, (list, tuple, set)):
        return None
    return {entity_key(v) for v in value if isinstance(v, str)}
