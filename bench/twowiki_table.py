"""CS-RAG's 2WikiMultihopQA set-up with kgr's methods: answer recall in context, passage Recall@5, tokens, latency.

    python bench/twowiki_table.py                       # all 1,000 questions, methods dotrag,csrag,vss,bm25
    python bench/twowiki_table.py --limit 500 --seed 0  # a seeded sample

Inputs (`bench/twowiki_data.py`): the KG is the union of the gold evidence triples of HippoRAG's 1,000 2Wiki
questions, the passages are the full corpus (6,119 passages, linked to entities by title at ingest), and the
questions are converted to kgr's generic JSONL (written to `--out`/data/). The project (`--project`, default
bench/out/projects/twowiki) is ingested and its reachability map built when missing or stale.

Each method runs through `kgr.methods.runner.run_method` (backbone `--backbone`, default the offline policy);
records go to the project's `records` table under run `twowiki-<method>-<backbone>` and are reused by a rerun
(`--fresh` discards them). `kgr.evaluate.run.evaluate` scores them per 2Wiki question type (plus `all`) into
`--out`/report/ (report.md, summary.json/csv, scores.jsonl, diagnostics). `--out`/table.md and table.json hold
the table below.

Columns: answer recall in the packed context (kgr's `answers_in_context`: the gold answer occurs in the context
as whole words), overall, per question type, and over the questions whose answer is not one of their anchors
(369 of the 1,000, mostly comparisons, answer with an anchor, which any context quoting the anchor contains); passage Recall@5 as kgr scores it (`passage_recall[5]`: the record's `passages` field, which
every record has, so methods that return no passages score 0 there: kgr has no entity-title fallback);
"R@5 (ent. titles)", this script's fallback: the record's passages when it has any, else the titles of the
entities in its context (anchors, then retrieved entities in rank order) that are corpus titles; mean context
tokens; retrieval latency per question (median / p95, model loading excluded).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from twowiki_data import (  # noqa: E402
    DATA, DEFAULT_PROJECT, add_threads_option, apply_threads, convert, ensure_project,
)

from kgr.errors import KgrError  # noqa: E402

LABELS = {"bm25": "BM25", "vss": "VSS", "dotrag": "DotRAG", "csrag": "CS-RAG"}
QTYPES = ("bridge_comparison", "comparison", "compositional", "inference")


def question_sets(questions_path: Path, limit: int | None, seed: int):
    """The (seeded) sample of questions, split by 2Wiki question type."""
    from kgr.evaluate.questions import load_questions, sample

    questions = sample(load_questions(questions_path, fmt="jsonl"), limit, seed)
    sets = []
    for qtype in sorted({q.qtype or "?" for q in questions}):
        sets.append((qtype, [q for q in questions if (q.qtype or "?") == qtype]))
    return questions, sets


def answer_is_anchor(question) -> bool:
    """Whether the question's answer is one of its anchors (e.g. "Which film came out first, A or B?")."""
    from kgr.evaluate.metrics import normalize

    return any(normalize(a) in {normalize(x) for x in question.anchors} for a in question.answers)


def title_recall_at_k(record: dict, gold: list[str], titles: set[str], k: int = 5) -> float:
    """Gold-title recall of the record's passages, else of its in-context entity names that are corpus titles."""
    from kgr.evaluate.metrics import normalize, passage_recall_at_k

    ranked = record.get("passages") or [n for n in [*record.get("anchors", []), *record.get("entities", [])]
                                        if normalize(n) in titles]
    return passage_recall_at_k(ranked, gold, k)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, default=DEFAULT_PROJECT)
    parser.add_argument("--data", type=Path, default=DATA, help=f"HippoRAG 2Wiki folder (default {DATA})")
    parser.add_argument("--limit", type=int, default=None, help="seeded sample size (default: all 1,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default="dotrag,csrag,vss,bm25")
    parser.add_argument("--backbone", default="offline")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--fresh", action="store_true", help="discard stored records of these runs first")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/twowiki")
    add_threads_option(parser)
    args = parser.parse_args(argv)
    apply_threads(args.threads)

    from kgr.config import load_config
    from kgr.evaluate.metrics import normalize
    from kgr.evaluate.run import evaluate
    from kgr.methods.base import Query, RunContext
    from kgr.methods.runner import method_class, run_method
    from kgr.methods.runs import load_records
    from kgr.project import Project
    from kgr.store import GraphStore

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    started_all = time.perf_counter()
    try:
        for method in methods:
            method_class(method)
        files = args.out / "data"
        counts = convert(args.data, files)
        print(f"2Wiki inputs: {json.dumps(counts)}")
        stage_s = ensure_project(args.project, files)
        questions, sets = question_sets(files / "questions.jsonl", args.limit, args.seed)
        queries = [Query(q.id, q.question) for q in questions]
        print(f"questions: {len(questions)} ({', '.join(f'{label} {len(qs)}' for label, qs in sets)}); "
              f"limit {args.limit}, seed {args.seed}, backbone {args.backbone}")
        runs: dict[str, str] = {}
        run_seconds: dict[str, float] = {}
        with Project.open(args.project, write=True, overrides={"backbone.model": args.backbone}) as project:
            began = time.perf_counter()
            store = GraphStore(project)
            store.warm()
            print(f"loaded {store.num_entities:,} entities, {len(store.src):,} relationships, "
                  f"{len(store.passages):,} passages in {time.perf_counter() - began:.1f}s")
            titles = {normalize(t) for t, _ in store.passages}
            for method in methods:
                config = load_config(args.project, {"backbone.model": args.backbone})
                context = RunContext(project, config, store, "retrieve")
                run = runs[method] = f"twowiki-{method}-{context.backbone.replace('/', '_')}"
                began = time.perf_counter()
                last = [began]

                def progress(n, method=method, began=began, last=last, done=[0]):
                    done[0] += n
                    if time.perf_counter() - last[0] > 30:
                        last[0] = time.perf_counter()
                        print(f"  {method}: {done[0]}/{len(queries)} in {last[0] - began:.0f}s", flush=True)

                _, done, skipped = run_method(context, method, queries, run=run, resume=not args.fresh,
                                              workers=args.workers, progress=progress)
                run_seconds[method] = round(time.perf_counter() - began, 2)
                if skipped and not done and (args.out / "table.json").exists():  # all reused: keep the real time
                    previous = json.loads((args.out / "table.json").read_text(encoding="utf-8"))["settings"]
                    if previous.get("runs", {}).get(method) == run:
                        run_seconds[method] = previous["run_seconds"].get(method, run_seconds[method])
                print(f"{LABELS.get(method, method)}: {done} retrieved, {skipped} reused in "
                      f"{run_seconds[method]:.1f}s (run {run})", flush=True)
            labels = {run: LABELS.get(m, m) for m, run in runs.items()}
            result = evaluate(project, sets, list(runs.values()), out_dir=args.out / "report", seed=args.seed,
                              title=f"2WikiMultihopQA (HippoRAG 1,000; n={len(questions)}, seed {args.seed}, "
                                    f"backbone {args.backbone})", store=store, labels=labels)
            wanted = {q.id: q for q in questions}
            extra = {}
            for method, run in runs.items():
                records = [r for r in load_records(project, run) if r["id"] in wanted]
                extra[method] = {
                    "context_tokens_mean": statistics.fmean(r["context_tokens"] for r in records),
                    "context_tokens_median": statistics.median(r["context_tokens"] for r in records),
                    "title_recall_at_5": statistics.fmean(
                        title_recall_at_k(r, wanted[r["id"]].passages, titles) for r in records),
                    "records_with_passages": sum(bool(r.get("passages")) for r in records),
                    # 369 of the 1,000 questions (mostly comparisons) have an anchor as their answer, which any
                    # context quoting the anchor "finds": the answer recall over the other questions.
                    "answers_in_context_non_anchor": statistics.fmean(
                        s.answers_in_context for s in result.scores[run]["all" if len(sets) > 1 else sets[0][0]]
                        if not answer_is_anchor(wanted[s.id])),
                    "n_non_anchor": sum(not answer_is_anchor(q) for q in questions),
                    "n_records": len(records),
                }
    except KgrError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    headers = ["Method", "Ans. in context", *[f"AiC {t}" for t in QTYPES if t in result.splits], "AiC answer≠anchor",
               "R@5 (kgr)", "R@5 (ent. titles)", "Tokens", "Latency ms p50 / p95", "Run s"]
    rows = []
    for method, run in runs.items():
        s = result.summaries[run]["all" if len(sets) > 1 else sets[0][0]]
        rows.append([
            LABELS.get(method, method), f"{s.answers_in_context:.3f}",
            *[f"{result.summaries[run][t].answers_in_context:.3f}" for t in QTYPES if t in result.splits],
            f"{extra[method]['answers_in_context_non_anchor']:.3f}",
            f"{s.passage_recall.get(5, 0.0):.3f}", f"{extra[method]['title_recall_at_5']:.3f}",
            f"{extra[method]['context_tokens_mean']:.0f}",
            f"{s.latency_ms_median:.1f} / {s.latency_ms_p95:.1f}", f"{run_seconds[method]:.0f}",
        ])
    table = "\n".join(["| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1),
                       *("| " + " | ".join(r) + " |" for r in rows)]) + "\n"
    print(table)
    settings = {
        "project": str(args.project), "data": str(args.data), "limit": args.limit, "seed": args.seed,
        "n_questions": len(questions), "n_per_type": result.n_questions, "backbone": args.backbone,
        "methods": methods, "runs": runs, "run_seconds": run_seconds, "stage_seconds": stage_s,
        "inputs": counts, "python": platform.python_version(), "machine": platform.machine(),
        "eval_seconds": result.timings_s, "total_seconds": round(time.perf_counter() - started_all, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(
        f"# 2WikiMultihopQA (CS-RAG set-up)\n\nn = {len(questions)} questions (limit {args.limit}, seed "
        f"{args.seed}), backbone `{args.backbone}`. AiC = answer found in the packed context; R@5 (kgr) = "
        f"`passage_recall[5]` from the record's `passages`; AiC answer≠anchor = answer recall over the questions whose answer is not one of their anchors; R@5 (ent. titles) = the record's passages, else "
        f"the corpus titles among the entities in its context. Tokens = mean context tokens.\n\n{table}\n"
        f"Full report: [report/report.md](report/report.md).\n\n```json\n{json.dumps(settings, indent=2)}\n```\n",
        encoding="utf-8")
    (args.out / "table.json").write_text(json.dumps({
        "settings": settings, "table": {"headers": headers, "rows": rows}, "extra": extra,
        "result": result.to_dict(),
    }, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}/ (table.md, table.json, report/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
