"""Evaluate stored runs: score their records against question sets, write reports and diagnostics.

`evaluate(project, [(label, questions), ...], [run, ...])` scores every run (its records in the
project's `records` table) on every question set (a hop split such as "1-hop"), with gold
intermediates computed on the project's graph, and writes into `out_dir`:

    summary.json, summary.csv, report.md, recall_f1.png, latency.png   (kgr.evaluate.report)
    scores.jsonl        one line per (run, question): the QuestionScore fields, `run` and `split`
    diagnostics.jsonl   one line per (run, question): the stage each missed answer / intermediate was lost at
    diagnostics.json    missed answers per stage, per run and split (also appended to report.md)

Gold intermediates walk the graph undirected (`gold.py`). A question names entities by name, and names
need not be unique, so a name stands for every entity with exactly that name (whitespace collapsed): its
neighbours are the union of theirs. Names differing only by case are distinct entities (MetaQA's tag
"chris pine" and actor "Chris Pine"); a question's anchor or answer spelled in another case than every graph
name is read as the graph's name when exactly one graph name matches it casefolded. Hub cap: a name with more than `max_degree` distinct neighbour names (default
`DEFAULT_MAX_DEGREE` = 150) may be a walk's endpoint but not an interior node. On MetaQA every
actor, director and writer has at most 114 neighbours, while genres, languages, big tags and most years
have hundreds to thousands; MetaQA's interior positions are always movies and people, so the cap only
removes spurious walks such as movie -> 1997 -> any 1997 movie -> its language. Pass None for exact walks.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgr.errors import KgrError
from kgr.evaluate.diagnose import STAGES, diagnose, stage_counts
from kgr.evaluate.gold import gold_for_questions
from kgr.evaluate.metrics import QuestionScore, Summary, entity_key, records_by_id, score_run, summarize
from kgr.evaluate.questions import Question, sample

DEFAULT_MAX_DEGREE = 150
ALL_SPLIT = "all"

QuestionSet = tuple[str, list[Question]]


@dataclass
class EvalResult:
    """What `evaluate` computed: summaries per run and split, missed-answer stages, files written."""

    title: str
    runs: list[str]
    splits: list[str]  # question-set labels in order, then "all" when there are several
    n_questions: dict[str, int]  # per split, after sampling
    summaries: dict[str, dict[str, Summary]]  # run -> split -> summary
    stages: dict[str, dict[str, dict[str, int]]]  # run -> split -> stage -> missed answers
    labels: dict[str, str] = field(default_factory=dict)  # run -> label shown in tables (default: the run)
    scores: dict[str, dict[str, list[QuestionScore]]] = field(repr=False, default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # one line per run and split with records of other questions

    @property
    def rows(self) -> list[tuple[str, str, Summary]]:
        """Report rows (run, split, summary), split-major so tables list the runs side by side."""
        return [(self.label(run), split, self.summaries[run][split]) for split in self.splits for run in self.runs]

    def label(self, run: str) -> str:
        return self.labels.get(run, run)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for `--json`)."""
        return {
            "title": self.title,
            "runs": self.runs,
            "labels": {run: self.label(run) for run in self.runs},
            "splits": self.splits,
            "n_questions": self.n_questions,
            "summaries": {run: {s: v.to_dict() for s, v in by.items()} for run, by in self.summaries.items()},
            "missed_answer_stages": self.stages,
            "files": {name: str(path) for name, path in self.files.items()},
            "timings_s": self.timings_s,
            "warnings": self.warnings,
        }


def queries_for(questions: Sequence[Question]):
    """The retrieval queries for questions (id and text, mention brackets kept)."""
    from kgr.methods.base import Query

    return [Query(q.id, q.question) for q in questions]


def graph_neighbors(store) -> tuple[Callable[[str], list[str]], Callable[[str], str]]:
    """Undirected name-level neighbours over a GraphStore, and a name canonicalizer.

    Entities with the same exact name (whitespace collapsed) are one node: `neighbors(name)` is the union of
    their neighbours, by name. `canonical(name)` keeps a graph name, reads another spelling as the one graph
    name equal to it casefolded, and passes other names through (unknown or ambiguous).
    """
    from kgr.graph import normalize_name

    keys = [entity_key(name) for name in store.names]
    index: dict[str, list[int]] = {}
    for eid, key in enumerate(keys):
        index.setdefault(key, []).append(eid)
    by_casefold: dict[str, set[str]] = {}
    for key in index:
        by_casefold.setdefault(normalize_name(key), set()).add(key)
    adjacency = store.adjacency()
    cache: dict[str, list[str]] = {}

    def canonical(name: str) -> str:
        key = entity_key(name)
        if key in index:
            return key
        spellings = by_casefold.get(normalize_name(key), set())
        return next(iter(spellings)) if len(spellings) == 1 else name

    def neighbors(name: str) -> list[str]:
        key = entity_key(name)
        found = cache.get(key)
        if found is None:
            out = {keys[n] for eid in index.get(key, ()) for n, _ in adjacency.get(eid, ())}
            found = cache[key] = sorted(out)
        return found

    return neighbors, canonical


def evaluate(
    project,
    question_sets: list[QuestionSet],
    runs: list[str],
    *,
    out_dir: Path | None = None,
    limit: int | None = None,
    seed: int = 0,
    console=None,
    title: str = "kgr evaluation",
    max_degree: int | None = DEFAULT_MAX_DEGREE,
    store=None,
    labels: dict[str, str] | None = None,
) -> EvalResult:
    """Score each stored run on each question set (sampled to `limit` per set), write reports into `out_dir`.

    `project` is an open `Project` (read access suffices); `store` may pass an already loaded GraphStore;
    `labels` renames runs in tables and charts (e.g. {"bm25-offline": "BM25"}).
    Raises KgrError for a run without records, an empty or duplicate question-set label.
    """
    if not runs:
        raise KgrError("no runs to evaluate")
    set_labels = [label for label, _ in question_sets]
    if not question_sets or len(set(set_labels)) != len(set_labels) or ALL_SPLIT in set_labels:
        raise KgrError(f"question sets need distinct labels other than {ALL_SPLIT!r} (got {set_labels})")
    started = time.perf_counter()
    records = {run: _records(project, run) for run in dict.fromkeys(runs)}
    runs = list(records)
    sets = [(label, sample(questions, limit, seed)) for label, questions in question_sets]
    for label, questions in sets:
        if not questions:
            raise KgrError(f"question set {label!r} has no questions")

    if store is None:
        from kgr.store import GraphStore

        store = GraphStore(project)
    neighbors, canonical = graph_neighbors(store)
    # Questions spelled as the graph names them; gold per set, since two files may hold one text with other answers.
    sets = [(label, [dataclasses.replace(q, anchors=[canonical(a) for a in q.anchors],
                                         answers=list(dict.fromkeys(canonical(a) for a in q.answers)))
                     for q in questions]) for label, questions in sets]
    gold = {label: gold_for_questions(questions, neighbors, max_degree=max_degree) for label, questions in sets}
    gold_s = time.perf_counter() - started

    splits = set_labels + ([ALL_SPLIT] if len(sets) > 1 else [])
    result = EvalResult(
        title=title, runs=runs, splits=splits, labels=dict(labels or {}),
        n_questions={label: len(qs) for label, qs in sets}, summaries={}, stages={},
    )
    if len(sets) > 1:
        result.n_questions[ALL_SPLIT] = sum(len(qs) for _, qs in sets)
    diagnostics_lines: list[str] = []
    score_lines: list[str] = []
    for run in runs:
        by_id = records_by_id(records[run])
        result.summaries[run], result.stages[run], result.scores[run] = {}, {}, {}
        every_score: list[QuestionScore] = []
        every_diagnosis = []
        for label, questions in sets:
            scores, summary = score_run(records[run], questions, gold[label])
            diagnoses = [diagnose(None if s.missing else by_id.get(q.id), q, gold[label].get(q.id, ()))
                         for q, s in zip(questions, scores)]
            if summary.n_mismatched:
                result.warnings.append(
                    f"run {run!r}, {label}: {summary.n_mismatched} record(s) carry a question's id but another "
                    f"question's text (an older kgr's ids, or another file's); scored as missing")
            result.summaries[run][label] = summary
            result.stages[run][label] = stage_counts(diagnoses)
            result.scores[run][label] = scores
            every_score += scores
            every_diagnosis += diagnoses
            for question, score, diagnosis in zip(questions, scores, diagnoses):
                score_lines.append(json.dumps({"run": run, "split": label, **dataclasses.asdict(score)},
                                              ensure_ascii=False))
                diagnostics_lines.append(json.dumps({
                    "run": run, "split": label, "id": question.id, "question": question.question,
                    "missing_record": score.missing, "recall": score.recall, "gp": score.gp,
                    "n_intermediates": score.n_intermediates,
                    "missed_answers": diagnosis.answers, "missed_intermediates": diagnosis.intermediates,
                }, ensure_ascii=False))
        if len(sets) > 1:
            result.summaries[run][ALL_SPLIT] = summarize(every_score)
            result.stages[run][ALL_SPLIT] = stage_counts(every_diagnosis)
            result.scores[run][ALL_SPLIT] = every_score
    result.timings_s = {"gold": round(gold_s, 3), "score": round(time.perf_counter() - started - gold_s, 3)}

    if out_dir is not None:
        from kgr.evaluate.report import write_report

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        result.files = dict(write_report(result.rows, out, title, console=console))
        result.files["scores"] = _write_lines(out / "scores.jsonl", score_lines)
        result.files["diagnostics"] = _write_lines(out / "diagnostics.jsonl", diagnostics_lines)
        path = out / "diagnostics.json"
        path.write_text(json.dumps({"missed_answer_stages": result.stages, "stages": list(STAGES)},
                                   indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        result.files["diagnostics_summary"] = path
        with open(result.files["markdown"], "a", encoding="utf-8") as handle:
            handle.write(stage_markdown(result))
        result.timings_s["report"] = round(time.perf_counter() - started - sum(result.timings_s.values()), 3)
    elif console is not None:
        from kgr.evaluate.report import print_tables

        print_tables(result.rows, console, title)
    return result


def stage_markdown(result: EvalResult) -> str:
    """A Markdown table of missed answers per retrieval stage, per run and split."""
    lines = ["", "## Where missed answers were lost", "",
             "Counts of missed answers (summed over questions) by the stage at which each was lost "
             "(see `diagnostics.jsonl` for every question).", "",
             "| split | run | " + " | ".join(STAGES) + " |", "|---|---|" + "---:|" * len(STAGES)]
    for split in result.splits:
        for run in result.runs:
            counts = result.stages[run][split]
            lines.append(f"| {split} | {result.label(run).replace('|', chr(92) + '|')} | "
                         + " | ".join(f"{counts[s]:,}" for s in STAGES) + " |")
    return "\n".join(lines) + "\n"


def _records(project, run: str) -> list[dict]:
    from kgr.methods.runs import has_records, load_records, run_names

    if not has_records(project):
        raise KgrError(f"{project.root}: no retrieval runs stored yet; run `kgr retrieve` first")
    found = load_records(project, run)
    if not found:
        stored = run_names(project)
        raise KgrError(f"{project.root}: no records for run {run!r} (stored runs: {', '.join(stored) or 'none'})")
    return found


def _write_lines(path: Path, lines: list[str]) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(path)
    return path


__all__ = ["DEFAULT_MAX_DEGREE", "EvalResult", "evaluate", "graph_neighbors", "queries_for",
           "stage_markdown"]
