"""Reproduce the layout of the DotRAG paper's MetaQA table (Table 3) on MetaQA dev with kgr's methods.

For each method (BM25, VSS, DotRAG) and hop split (1/2/3-hop): entity recall, F1, backbone calls per
question and golden proximity (GP; undefined for 1-hop questions, which have no intermediates).

    python bench/metaqa_table.py --limit 500 --seed 0 --methods bm25,vss,dotrag

The project must have MetaQA ingested and its reachability map built (`kgr ingest` + `kgr reach`).
Questions are sampled reproducibly (`--limit` per hop split, `--seed`) from
DATA/{1,2,3}-hop/vanilla/qa_dev.txt with their qtype files. Each method runs through
`kgr.methods.runner.run_method` with the given backbone (default: the offline policy, no API calls);
records are stored in the project's `records` table under run `metaqa-<method>-<backbone>` and reused by
a rerun (`--fresh` discards them first). Outputs go to `--out` (default bench/out/metaqa/):
report.md, summary.json/csv, charts, scores.jsonl, diagnostics.jsonl (kgr.evaluate.run) plus
table3.md and table3.json (the table below, with run times and settings).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgr.errors import KgrError  # noqa: E402
from kgr.evaluate.questions import load_questions, sample  # noqa: E402
from kgr.evaluate.run import EvalResult, evaluate, queries_for  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "metaqa"  # the data folder beside the clone
DEFAULT_PROJECT = ROOT / "bench" / "out" / "projects" / "metaqa"
LABELS = {"bm25": "BM25", "vss": "VSS", "dotrag": "DotRAG", "dotrag-paper": "DotRAG (paper search)",
          "dotrag-hop": "DotRAG (ks per hop)", "dotrag-exact": "DotRAG (exactly hop h)", "csrag": "CS-RAG"}
# Named variants: a method run with settings other than its defaults. `dotrag-paper` turns kgr's extensions of the
# search off (text-only similarity, no label filter, ks per hop, targets at exactly hop h, one trajectory per anchor,
# no step typicality, every word places its step); `dotrag-hop` keeps ks relationships per hop instead of per
# frontier entity; `dotrag-exact` searches toward entities at exactly hop h, not 1..h. All chosen on MetaQA dev only.
VARIANTS = {
    "dotrag-paper": ("dotrag", {"dotrag.label_weight": 0, "dotrag.label_margin": 0, "dotrag.hedge_trajectories": 0,
                                "dotrag.search_per_entity": False, "dotrag.search_within": False,
                                "offline.typicality": 0, "offline.order_margin": 0}),
    "dotrag-hop": ("dotrag", {"dotrag.search_per_entity": False}),
    "dotrag-exact": ("dotrag", {"dotrag.search_within": False}),
}
# The DotRAG paper's Table 3 (GPT-4.1 backbone), for comparison: recall, F1 per hop split.
PAPER_DOTRAG = {"1-hop": (0.9800, 0.6303), "2-hop": (0.9812, 0.5259), "3-hop": (0.7389, 0.2522)}
HOPS = (1, 2, 3)
METRICS = (("Recall", "recall", "{:.3f}"), ("F1", "f1", "{:.3f}"), ("Calls", "llm_calls", "{:.1f}"),
           ("GP", "gp", "{:.3f}"))


def question_sets(data: Path, limit: int | None, seed: int):
    """The sampled dev questions of each hop split, labelled `1-hop`..`3-hop`."""
    sets = []
    for hops in HOPS:
        folder = data / f"{hops}-hop"
        questions = load_questions(folder / "vanilla" / "qa_dev.txt", fmt="metaqa", hops=hops,
                                   qtype_path=folder / "qa_dev_qtype.txt")
        sets.append((f"{hops}-hop", sample(questions, limit, seed)))
    return sets


def table_rows(result: EvalResult, runs: dict[str, str]) -> list[list[str]]:
    """One row per method: label, then Recall, F1, Calls, GP for each hop split."""
    rows = []
    for method, run in runs.items():
        row = [LABELS.get(method, method)]
        for hops in HOPS:
            summary = result.summaries[run][f"{hops}-hop"]
            for _, attribute, fmt in METRICS:
                value = getattr(summary, attribute)
                row.append("–" if value is None else fmt.format(value))
        rows.append(row)
    return rows


def headers() -> list[str]:
    return ["Method"] + [f"{h}h {name}" for h in HOPS for name, _, _ in METRICS]


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| | " + " | ".join(f"{h}-hop" + " |" * (len(METRICS) - 1) for h in HOPS) + " |",
             "| Method | " + " | ".join(name for _ in HOPS for name, _, _ in METRICS) + " |",
             "|---|" + "---:|" * (len(HOPS) * len(METRICS))]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, default=DEFAULT_PROJECT,
                        help=f"project with MetaQA ingested and reach built (default {DEFAULT_PROJECT})")
    parser.add_argument("--limit", type=int, default=500, help="questions per hop split (default 500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default="bm25,vss,dotrag", help="comma-separated (default bm25,vss,dotrag)")
    parser.add_argument("--data", type=Path, default=DATA, help=f"MetaQA folder (default {DATA})")
    parser.add_argument("--backbone", default="offline", help="offline (default), random, or a LiteLLM model")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--fresh", action="store_true", help="discard stored records of these runs first")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/metaqa")
    args = parser.parse_args(argv)

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from kgr.config import load_config
    from kgr.methods.base import RunContext
    from kgr.methods.runner import method_class, run_method
    from kgr.project import Project
    from kgr.store import GraphStore

    console = Console(width=None if sys.stdout.isatty() else 160)  # the table is 13 columns wide
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    try:
        for method in methods:
            method_class(VARIANTS.get(method, (method, {}))[0])  # unknown names fail before any work
        sets = question_sets(args.data, args.limit, args.seed)
        queries = queries_for([q for _, qs in sets for q in qs])
        console.print(f"MetaQA dev: {', '.join(f'{label} {len(qs)}' for label, qs in sets)} questions "
                      f"(limit {args.limit}, seed {args.seed}); backbone {args.backbone}")
        runs: dict[str, str] = {}
        run_seconds: dict[str, float] = {}
        with Project.open(args.project, write=True, overrides={"backbone.model": args.backbone}) as project:
            started = time.perf_counter()
            store = GraphStore(project)
            console.print(f"loaded {store.num_entities:,} entities, {len(store.src):,} relationships "
                          f"in {time.perf_counter() - started:.1f}s")
            for method in methods:
                base, overrides = VARIANTS.get(method, (method, {}))
                config = load_config(args.project, {"backbone.model": args.backbone, **overrides})
                context = RunContext(project, config, store, "retrieve")
                run = f"metaqa-{method}-{context.backbone.replace('/', '_')}"
                runs[method] = run
                began = time.perf_counter()
                with Progress(TextColumn(f"{LABELS.get(method, method):>7}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=console, transient=True) as progress:
                    task = progress.add_task(method, total=len(queries))
                    _, done, skipped = run_method(
                        context, base, queries, run=run, resume=not args.fresh, workers=args.workers,
                        progress=lambda n: progress.advance(task, n),
                    )
                run_seconds[method] = round(time.perf_counter() - began, 2)
                console.print(f"{LABELS.get(method, method)}: {done} retrieved, {skipped} reused "
                              f"in {run_seconds[method]:.1f}s (run {run})")
            result = evaluate(
                project, sets, list(runs.values()), out_dir=args.out, seed=args.seed,
                title=f"MetaQA dev (limit {args.limit}/split, seed {args.seed}, backbone {args.backbone})",
                store=store, labels={run: LABELS.get(m, m) for m, run in runs.items()},
            )
    except KgrError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 1

    rows = table_rows(result, runs)
    table = Table(title=f"MetaQA dev, Table 3 layout (backbone {args.backbone}, n per split "
                        f"{', '.join(str(result.n_questions[f'{h}-hop']) for h in HOPS)})")
    for i, header in enumerate(headers()):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    latency = {LABELS.get(m, m): {split: {"median_ms": result.summaries[run][split].latency_ms_median,
                                          "p95_ms": result.summaries[run][split].latency_ms_p95}
                                  for split in result.splits}
               for m, run in runs.items()}
    timing = Table(title="Retrieval latency per question (ms, median / p95; model loading excluded)")
    timing.add_column("Method")
    for split in result.splits:
        timing.add_column(split, justify="right")
    for label, splits in latency.items():
        timing.add_row(label, *(f"{v['median_ms']:.1f} / {v['p95_ms']:.1f}" for v in splits.values()))
    console.print(timing)
    console.print("DotRAG paper (GPT-4.1), recall / F1: " +
                  ", ".join(f"{k} {r:.4f} / {f:.4f}" for k, (r, f) in PAPER_DOTRAG.items()))

    args.out.mkdir(parents=True, exist_ok=True)
    settings = {
        "project": str(args.project), "limit": args.limit, "seed": args.seed, "backbone": args.backbone,
        "methods": methods, "runs": runs, "run_seconds": run_seconds, "python": platform.python_version(),
        "machine": platform.machine(), "n_questions": result.n_questions, "eval_seconds": result.timings_s,
        "variants": {m: VARIANTS[m][1] for m in methods if m in VARIANTS}, "latency": latency,
        "paper_dotrag_gpt41": PAPER_DOTRAG,
    }
    (args.out / "table3.md").write_text(
        f"# MetaQA dev — Table 3 layout\n\nBackbone `{args.backbone}`, limit {args.limit} per split, seed "
        f"{args.seed}. Recall and F1 over retrieved entities, Calls = backbone calls per question, GP = golden "
        f"proximity (– for 1-hop: no intermediates).\n\n{markdown_table(rows)}\n"
        f"Full report: [report.md](report.md).\n\n```json\n{json.dumps(settings, indent=2)}\n```\n",
        encoding="utf-8",
    )
    (args.out / "table3.json").write_text(json.dumps({
        "settings": settings,
        "table": {"headers": headers(), "rows": rows},
        "result": result.to_dict(),
    }, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    console.print(f"wrote {args.out}/ (table3.md, report.md, summary.json, diagnostics.jsonl, ...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
