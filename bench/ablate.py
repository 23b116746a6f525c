"""A method (DotRAG unless `--method`) under several settings variants on the dev suite's samples, in one process per
project (nothing is stored).

    python bench/ablate.py --limit 200 --variant base= --variant no-typicality=offline.typicality=0 \\
        --variant no-tie=offline.tie_margin=0,offline.order_cost=0
    python bench/ablate.py --method csrag --sets musique,twowiki --variant base= --variant no-walk=csrag.walk_evidence=0

Each variant is `name=key=value,key=value` (settings as `kgr --set` takes them; empty: the project's settings).
Prints recall / F1 per set and the suite mean recall per variant (with `--passages`: answers in context and passage
R@5 per set instead), and writes them to `--out` (JSON), with each question's recall, F1, answers in context and R@5
per variant, so that changed questions can be read side by side. The sets and samples are the suite's
(`bench/suite.py`, same `--limit` and `--seed`); scores as `kgr eval` (kgr.evaluate.metrics).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402
from twowiki_data import add_threads_option, apply_threads  # noqa: E402

DEFAULT_SETS = "metaqa-1hop,metaqa-2hop,metaqa-3hop,wc2014-1hop,wc2014-2hop,wc2014-conj,twowiki"


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, settings = text.partition("=")
    pairs = [p for p in settings.split(",") if p.strip()]
    return name, dict(p.split("=", 1) for p in pairs)


def run_project(project_name: str, sets: list, variants: list[tuple[str, dict]], method_name: str, log) -> dict:
    """Per variant and set: recall, F1, answers in context, passage R@5, and each question's four."""
    from kgr.config import load_config
    from kgr.evaluate.gold import gold_for_questions
    from kgr.evaluate.metrics import score_question, summarize
    from kgr.evaluate.run import DEFAULT_MAX_DEGREE, graph_neighbors, queries_for
    from kgr.methods.base import RunContext
    from kgr.methods.runner import method_class
    from kgr.project import Project
    from kgr.store import GraphStore

    root = suite.PROJECTS / project_name
    out: dict = {}
    with Project.open(root) as project:
        store = GraphStore(project)
        store.warm()
        neighbors, canonical = graph_neighbors(store)
        scored = []
        for dev_set, questions in sets:
            questions = [dataclasses.replace(q, anchors=[canonical(a) for a in q.anchors],
                                             answers=list(dict.fromkeys(canonical(a) for a in q.answers)))
                         for q in questions]
            scored.append((dev_set, questions, gold_for_questions(questions, neighbors, max_degree=DEFAULT_MAX_DEGREE)))
        for name, overrides in variants:
            config = load_config(root, {"backbone.model": "offline", **overrides})
            context = RunContext(project, config, store, "retrieve")
            method = method_class(method_name)(context)
            began = time.perf_counter()
            for dev_set, questions, gold in scored:
                scores = []
                for query, question in zip(queries_for(questions), questions):
                    record = json.loads(method.retrieve(query).to_json())
                    scores.append(score_question(record, question, gold.get(question.id, ())))
                summary = summarize(scores)
                out.setdefault(name, {})[dev_set.name] = {
                    "recall": summary.recall, "f1": summary.f1, "answers_in_context": summary.answers_in_context,
                    "r5": summary.passage_recall.get(5),
                    "questions": {s.id: [round(s.recall, 4), round(s.f1, 4), s.answers_in_context,
                                         (s.passage_recall or {}).get(5)] for s in scores}}
            log(f"{project_name} {name}: " + ", ".join(
                f"{s.name} {_cell(out[name][s.name]['recall'])}/{_cell(out[name][s.name]['f1'])}"
                f" answers {_cell(out[name][s.name]['answers_in_context'])} R@5 {_cell(out[name][s.name]['r5'])}"
                for s, _, _ in scored)
                + f" ({time.perf_counter() - began:.0f}s)")
    return out


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=DEFAULT_SETS)
    parser.add_argument("--limit", type=int, default=None, help="questions per set (default: each set's size)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", action="append", default=[], help="name=key=value,... (repeatable)")
    parser.add_argument("--method", default="dotrag", help="dotrag (default), csrag, vss, bm25, dpr")
    parser.add_argument("--passages", action="store_true",
                        help="table answers in context / passage R@5 per set instead of recall / F1")
    parser.add_argument("--out", type=Path, default=suite.OUT.parent / "ablate.json")
    add_threads_option(parser)
    args = parser.parse_args(argv)
    apply_threads(args.threads)
    from kgr.evaluate.questions import sample

    variants = [parse_variant(v) for v in args.variant] or [("base", {})]
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    chosen = [s for s in suite.SETS if s.name in names]
    results: dict = {}
    for project_name in dict.fromkeys(s.project for s in chosen):
        sets = [(s, sample(s.questions(), args.limit or s.size, args.seed)) for s in chosen if s.project == project_name]
        for name, per_set in run_project(project_name, sets, variants, args.method,
                                                lambda m: print(m, flush=True)).items():
            results.setdefault(name, {}).update(per_set)
    header = "| variant | " + " | ".join(s.name for s in chosen) + " | mean recall | mean F1 |"
    lines = [header, "|---|" + "---:|" * (len(chosen) + 2)]
    for name, _ in variants:
        per_set = results[name]
        first, second = ("answers_in_context", "r5") if args.passages else ("recall", "f1")
        cells = [f"{_cell(per_set[s.name][first])} / {_cell(per_set[s.name][second])}" for s in chosen]
        lines.append(f"| {name} | " + " | ".join(cells) +
                     f" | {statistics.fmean(per_set[s.name]['recall'] for s in chosen):.4f}"
                     f" | {statistics.fmean(per_set[s.name]['f1'] for s in chosen):.4f} |")
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
