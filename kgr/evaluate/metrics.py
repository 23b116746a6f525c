"""Retrieval metrics of the DotRAG appendix (D.1), per question and macro-averaged over a run.

With R the retrieved entities, A the answers and I the gold intermediates (entities by exact name, whitespace
collapsed: MetaQA's tag "chris pine" and actor "Chris Pine" are two entities):
    R' = R \\ (I \\ A)                      retrieved intermediates are evidence, not wrong answers
    recall    = |R' ∩ A| / |A|
    precision = |R' ∩ A| / |R'|            (0 when R' is empty)
    F1        = 2PR / (P + R)              (0 when both are 0)
    GP        = |R ∩ I| / |I|              (undefined when I is empty; left out of the GP mean)
Only intermediates leave R': anchors and other retrieved entities stay and lower precision, and an
answer that is also an intermediate stays because it is an answer.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from kgr.errors import KgrError
from kgr.evaluate.questions import Question
from kgr.methods.records import same_question
from kgr.graph import normalize_name
from kgr.lexicon import whole_word

DEFAULT_KS = (2, 5, 10)


@dataclass
class QuestionScore:
    """Metrics and retrieval cost of one question; `missing` when the run has no record for it.

    `mismatched`: the run's record under this id is for another question text (scored as missing too).
    `unmatched`: the record lists question mentions that matched no graph entity (`unmatched_mentions`).
    """

    id: str
    hops: int | None
    qtype: str | None
    recall: float
    precision: float
    f1: float
    gp: float | None
    n_retrieved: int
    n_answers: int
    n_intermediates: int
    answers_in_context: float | None = None
    passage_recall: dict[int, float] | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float | None = None
    missing: bool = False
    mismatched: bool = False
    unmatched: bool = False


@dataclass
class Summary:
    """Macro averages over questions, with how many questions each average covers, and run cost."""

    n_questions: int
    recall: float
    precision: float
    f1: float
    gp: float | None
    n_gp: int
    answers_in_context: float | None = None
    n_context: int = 0
    passage_recall: dict[int, float] = field(default_factory=dict)
    n_passages: int = 0
    n_missing: int = 0
    missing_ids: list[str] = field(default_factory=list)
    n_mismatched: int = 0  # of the missing: the run's record under the id was for another question text
    n_unmatched: int = 0  # questions whose record lists mentions that matched no entity
    llm_calls: float = 0.0
    llm_calls_total: int = 0
    prompt_tokens: float = 0.0
    prompt_tokens_total: int = 0
    completion_tokens: float = 0.0
    completion_tokens_total: int = 0
    cost_usd: float = 0.0
    cost_usd_total: float = 0.0
    latency_ms_mean: float | None = None
    latency_ms_median: float | None = None
    latency_ms_p95: float | None = None

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (passage-recall keys become strings)."""
        data = asdict(self)
        data["passage_recall"] = {str(k): v for k, v in self.passage_recall.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Summary:
        """Rebuild a Summary written by `to_dict`, ignoring unknown keys."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["passage_recall"] = {int(k): v for k, v in known.get("passage_recall", {}).items()}
        return cls(**known)


normalize = normalize_name  # passage titles and answers in context text are matched casefolded


def entity_key(name: str) -> str:
    """How retrieved names, answers and intermediates are compared: exact names, whitespace collapsed."""
    return " ".join(str(name).split())


def entity_scores(
    retrieved: Iterable[str], answers: Iterable[str], intermediates: Iterable[str]
) -> tuple[float, float, float, float | None]:
    """Return (recall, precision, F1, GP) for one question; duplicates in `retrieved` count once."""
    r = {entity_key(x) for x in retrieved}
    a = {entity_key(x) for x in answers}
    i = {entity_key(x) for x in intermediates}
    if not a:
        raise ValueError("a question needs at least one answer to be scored")
    r_prime = r - (i - a)
    hits = len(r_prime & a)
    recall = hits / len(a)
    precision = hits / len(r_prime) if r_prime else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    gp = len(r & i) / len(i) if i else None
    return recall, precision, f1, gp


def passage_recall_at_k(retrieved_titles: Iterable[str], gold_titles: Iterable[str], k: int) -> float:
    """Return the fraction of gold passage titles among the first k distinct retrieved titles."""
    gold = {normalize(t) for t in gold_titles}
    if not gold:
        raise ValueError("passage recall needs at least one gold title")
    top = list(dict.fromkeys(normalize(t) for t in retrieved_titles))[:k]
    return len(gold.intersection(top)) / len(gold)


def answers_in_context(context: str, answers: Iterable[str]) -> float:
    """Return the fraction of answers whose normalized name occurs in the packed context as whole words."""
    text = normalize(context)
    names = {normalize(a) for a in answers}
    # Whole-word matching, so a short answer ("Up") is not found inside another word ("Upside").
    found = sum(1 for n in names if re.search(whole_word(n), text))
    return found / len(names) if names else 0.0


def score_question(
    record: dict | None,
    question: Question,
    intermediates: Iterable[str] = (),
    ks: Iterable[int] = DEFAULT_KS,
    mismatched: bool = False,
) -> QuestionScore:
    """Score one retrieval record against its question; a None record scores zero and is marked missing."""
    intermediates = set(intermediates)
    n_intermediates = len({entity_key(x) for x in intermediates})
    rec = record or {}
    retrieved = [e for e in rec.get("entities") or [] if isinstance(e, str)]
    recall, precision, f1, gp = entity_scores(retrieved, question.answers, intermediates)
    passage_recall = None
    if question.passages and (record is None or isinstance(rec.get("passages"), list)):
        titles = rec.get("passages") or []
        passage_recall = {k: passage_recall_at_k(titles, question.passages, k) for k in ks}
    context = rec.get("context")
    # A record without a context string did not pack one (not measured); a missing record found nothing.
    measured = record is None or isinstance(context, str)
    in_context = answers_in_context(context or "", question.answers) if measured else None
    return QuestionScore(
        id=question.id,
        hops=question.hops,
        qtype=question.qtype,
        recall=recall,
        precision=precision,
        f1=f1,
        gp=gp,
        n_retrieved=len({entity_key(e) for e in retrieved}),
        n_answers=len({entity_key(a) for a in question.answers}),
        n_intermediates=n_intermediates,
        answers_in_context=in_context,
        passage_recall=passage_recall,
        llm_calls=int(_number(rec.get("llm_calls"))),
        prompt_tokens=int(_number(rec.get("prompt_tokens"))),
        completion_tokens=int(_number(rec.get("completion_tokens"))),
        cost_usd=float(_number(rec.get("cost_usd"))),
        latency_ms=float(rec["latency_ms"]) if _is_number(rec.get("latency_ms")) else None,
        missing=record is None,
        mismatched=mismatched,
        unmatched=bool(rec.get("unmatched_mentions")),
    )


def summarize(scores: list[QuestionScore]) -> Summary:
    """Macro-average question scores; cost and latency are aggregated over questions that have a record."""
    n = len(scores)
    present = [s for s in scores if not s.missing]
    gps = [s.gp for s in scores if s.gp is not None]
    contexts = [s.answers_in_context for s in scores if s.answers_in_context is not None]
    passages = [s.passage_recall for s in scores if s.passage_recall is not None]
    ks = sorted({k for p in passages for k in p})
    latencies = [s.latency_ms for s in present if s.latency_ms is not None]
    return Summary(
        n_questions=n,
        recall=_mean([s.recall for s in scores]) or 0.0,
        precision=_mean([s.precision for s in scores]) or 0.0,
        f1=_mean([s.f1 for s in scores]) or 0.0,
        gp=_mean(gps),
        n_gp=len(gps),
        answers_in_context=_mean(contexts),
        n_context=len(contexts),
        passage_recall={k: _mean([p[k] for p in passages if k in p]) for k in ks},
        n_passages=len(passages),
        n_missing=n - len(present),
        missing_ids=[s.id for s in scores if s.missing],
        n_mismatched=sum(s.mismatched for s in scores),
        n_unmatched=sum(s.unmatched for s in scores),
        llm_calls=_mean([s.llm_calls for s in present]) or 0.0,
        llm_calls_total=sum(s.llm_calls for s in present),
        prompt_tokens=_mean([s.prompt_tokens for s in present]) or 0.0,
        prompt_tokens_total=sum(s.prompt_tokens for s in present),
        completion_tokens=_mean([s.completion_tokens for s in present]) or 0.0,
        completion_tokens_total=sum(s.completion_tokens for s in present),
        cost_usd=_mean([s.cost_usd for s in present]) or 0.0,
        cost_usd_total=sum(s.cost_usd for s in present),
        latency_ms_mean=_mean(latencies),
        latency_ms_median=statistics.median(latencies) if latencies else None,
        latency_ms_p95=_percentile(latencies, 95) if latencies else None,
    )


def score_run(
    records: list[dict],
    questions: list[Question],
    gold: dict[str, set[str]] | None = None,
    ks: Iterable[int] = DEFAULT_KS,
) -> tuple[list[QuestionScore], Summary]:
    """Join records to questions by id and question text and score them; records of questions not listed are ignored.

    A record under a question's id whose `question` text differs belongs to another question: the question is
    scored as missing and counted as mismatched.
    """
    by_id = records_by_id(records)
    gold = gold or {}
    ks = tuple(ks)
    scores = []
    for q in questions:
        record = by_id.get(q.id)
        mismatched = record is not None and not same_question(record.get("question"), q.question)
        scores.append(score_question(None if mismatched else record, q, gold.get(q.id, ()), ks, mismatched))
    return scores, summarize(scores)


def records_by_id(records: Iterable[dict]) -> dict[str, dict]:
    """Index records by question id, refusing two records for one id."""
    by_id: dict[str, dict] = {}
    for record in records:
        qid = str(record.get("id"))
        if qid in by_id:
            raise KgrError(f"two retrieval records for question {qid!r}; score one run at a time")
        by_id[qid] = record
    return by_id


def summarize_by_hops(scores: list[QuestionScore]) -> dict[str, Summary]:
    """Summarize each hop split (`1-hop`, ...; `?-hop` when unknown) and all questions (`all`)."""
    splits: dict[str, list[QuestionScore]] = {}
    for s in sorted(scores, key=lambda s: (s.hops is None, s.hops or 0)):
        splits.setdefault(f"{s.hops if s.hops is not None else '?'}-hop", []).append(s)
    out = {split: summarize(group) for split, group in splits.items()}
    out["all"] = summarize(scores)
    return out


def _is_number(value) -> bool:
    """Tell whether a record field holds a real number (bools are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value) -> float:
    """Read a count or cost field, treating an absent or null value as 0."""
    return value if _is_number(value) else 0


def _mean(values: list[float]) -> float | None:
    """Return the arithmetic mean, or None for no values."""
    return sum(values) / len(values) if values else None


def _percentile(values: list[float], q: float) -> float:
    """Return the q-th percentile with linear interpolation between order statistics (numpy's default)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
