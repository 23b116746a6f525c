"""The CS-RAG paper's robustness protocol on the 2Wiki project: answer recall in context under a damaged graph.

    python bench/robustness.py --limit 200 --seeds 0,1,2                 # default grid, 200 questions, 3 seeds
    python bench/robustness.py --modes noise --scopes query --ratios 0.3 --seeds 0 --limit 50   # one cell

For every cell (mode in --modes, scope in --scopes, ratio in --ratios, seed in --seeds) a damaged copy of the clean
2Wiki project (`--project`, built by bench/twowiki_table.py / twowiki_data.py) is written with
`kgr.perturb.perturb_project` (query scope: the anchors of the evaluated questions), its reachability map is built
with `kgr.reach_stage.run_reach` (DotRAG needs it), each method in --methods runs on the same seeded sample of
questions (`--limit`, `--sample-seed`) through `kgr.methods.runner.run_method`, and the damaged copy is deleted.
The score is kgr's `answers_in_context` (the gold answer occurs in the packed context as whole words), averaged
over the questions; the tables give the mean over seeds and the (population) std; rho = 0 is the clean project,
run once on the same questions.

One process does everything and shares one loaded encoder (`GraphStore(..., encoder=)`,
`perturb_project(..., encoder=)`) between the clean store, every damaged store and the re-embedding of changed
relationship descriptions. Finished cells are appended to
`--out`/cells.jsonl, and a rerun skips them (`--fresh` starts over), so an interrupted grid can be resumed.
Cells run seed-major (every mode/scope/ratio for seed 0, then seed 1, ...), so a grid cut short still covers
every ratio.

Outputs in `--out` (default bench/out/robustness/): cells.jsonl, robustness.json (every cell, the clean values,
the summary tables and the CS-RAG check), robustness.md (a table per mode and scope: rows rho, columns methods),
curve_<mode>_<scope>.png (kgr.evaluate.report.plot_curve).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
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

LABELS = {"bm25": "BM25", "vss": "VSS", "dotrag": "DotRAG", "csrag": "CS-RAG"}
TOLERANCE = 0.05  # the goal: CS-RAG within 5 points of its clean value up to rho = MAX_RATIO_CHECKED
MAX_RATIO_CHECKED = 0.3


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


class Runner:
    """Runs the methods on one project with the shared encoder; returns answer recall in context per method."""

    def __init__(self, methods: list[str], questions, backbone: str, encoder):
        from kgr.methods.base import Query

        self.methods = methods
        self.questions = questions
        self.queries = [Query(q.id, q.question) for q in questions]
        self.backbone = backbone
        self.encoder = encoder

    def store(self, project):
        from kgr.store import GraphStore

        store = GraphStore(project, encoder=self.encoder)
        store.warm()
        if self.encoder is None:
            self.encoder = store.encoder
        return store

    def run(self, project, store, run_prefix: str) -> tuple[dict[str, float], dict[str, float], dict[str, dict]]:
        from kgr.config import load_config
        from kgr.evaluate.metrics import score_run
        from kgr.methods.base import RunContext
        from kgr.methods.runner import run_method

        scores, seconds, extra = {}, {}, {}
        for method in self.methods:
            config = load_config(project.root, {"backbone.model": self.backbone})
            context = RunContext(project, config, store, "retrieve")
            records: list[dict] = []
            began = time.perf_counter()
            run_method(context, method, self.queries, run=f"{run_prefix}-{method}", resume=False,
                       on_record=lambda r: records.append({"id": r.id, "question": r.question, "context": r.context,
                                                           "entities": r.entities, "passages": r.passages,
                                                           "context_tokens": r.context_tokens,
                                                           "latency_ms": r.latency_ms}))
            seconds[method] = round(time.perf_counter() - began, 2)
            _, summary = score_run(records, self.questions)
            scores[method] = summary.answers_in_context
            extra[method] = {"latency_ms_median": summary.latency_ms_median,
                             "context_tokens_mean": statistics.fmean(r["context_tokens"] for r in records)}
        return scores, seconds, extra


def cell_key(mode: str, scope: str, ratio: float, seed: int) -> str:
    return f"{mode}/{scope}/{ratio:g}/{seed}"


def summarize(cells: list[dict], clean: dict[str, float], methods, modes, scopes, ratios):
    """Per mode and scope: rho -> method -> (mean, std, n seeds); plus the CS-RAG check."""
    tables: dict[str, dict] = {}
    for mode in modes:
        for scope in scopes:
            rows = {"0": {m: {"mean": clean[m], "std": 0.0, "n": 1} for m in methods}}
            for ratio in ratios:
                found = [c for c in cells if c["mode"] == mode and c["scope"] == scope and
                         abs(c["ratio"] - ratio) < 1e-9]
                if not found:
                    continue
                rows[f"{ratio:g}"] = {
                    m: {"mean": statistics.fmean(c["scores"][m] for c in found),
                        "std": statistics.pstdev([c["scores"][m] for c in found]), "n": len(found),
                        "seeds": sorted(c["seed"] for c in found)}
                    for m in methods if all(m in c["scores"] for c in found)
                }
            tables[f"{mode}/{scope}"] = rows
    check = {}
    if "csrag" in methods:
        for key, rows in tables.items():
            drops = {rho: clean["csrag"] - row["csrag"]["mean"] for rho, row in rows.items()
                     if rho != "0" and float(rho) <= MAX_RATIO_CHECKED + 1e-9 and "csrag" in row}
            check[key] = {"clean": clean["csrag"], "drop_by_ratio": drops,
                          "max_drop": max(drops.values()) if drops else None,
                          "within_5_points": bool(drops) and max(drops.values()) <= TOLERANCE,
                          "ratios_checked": sorted(float(r) for r in drops)}
    return tables, check


def markdown(tables, methods, check, settings) -> str:
    out = ["# Robustness (CS-RAG protocol) on 2WikiMultihopQA", "",
           f"Answer recall in the packed context (mean ± std over seeds) on {settings['n_questions']} questions "
           f"(sample seed {settings['sample_seed']}); rho = 0 is the clean graph. Seeds run: "
           f"{settings['seeds_done']}; backbone `{settings['backbone']}`.", ""]
    for key, rows in tables.items():
        out += [f"## {key.replace('/', ', scope ')}", "",
                "| rho | " + " | ".join(LABELS.get(m, m) for m in methods) + " | seeds |",
                "|---:|" + "---:|" * (len(methods) + 1)]
        for rho, row in rows.items():
            cells = [f"{row[m]['mean']:.3f} ± {row[m]['std']:.3f}" if m in row and rho != "0"
                     else (f"{row[m]['mean']:.3f}" if m in row else "–") for m in methods]
            n = max((row[m]["n"] for m in row), default=0)
            out.append(f"| {rho} | " + " | ".join(cells) + f" | {'clean' if rho == '0' else n} |")
        if key in check:
            c = check[key]
            verdict = "n/a" if c["max_drop"] is None else (
                f"max drop {100 * c['max_drop']:.1f} points over rho {c['ratios_checked']} -> "
                f"{'within' if c['within_5_points'] else 'NOT within'} 5 points")
            out += ["", f"CS-RAG clean {c['clean']:.3f}; {verdict}."]
        out += ["", f"![curve](curve_{key.replace('/', '_')}.png)", ""]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, default=DEFAULT_PROJECT, help="the clean 2Wiki project")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--modes", default="noise,incomplete")
    parser.add_argument("--scopes", default="query,whole")
    parser.add_argument("--ratios", default="0.1,0.2,0.3,0.4,0.5")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--methods", default="csrag,dotrag,vss,bm25")
    parser.add_argument("--limit", type=int, default=200, help="questions in the fixed sample (default 200)")
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--backbone", default="offline")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "projects" / "robustness-tmp",
                        help="where damaged copies are written (each deleted after use)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="start no new cell after this many minutes (the finished cells are reported)")
    parser.add_argument("--fresh", action="store_true", help="discard cells.jsonl and rerun everything")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/robustness")
    add_threads_option(parser)
    args = parser.parse_args(argv)
    apply_threads(args.threads)

    import kgr.perturb as perturb
    from kgr.evaluate.questions import load_questions, sample
    from kgr.evaluate.report import plot_curve
    from kgr.methods.runner import method_class
    from kgr.project import Project
    from kgr.reach_stage import run_reach

    started = time.perf_counter()
    modes, scopes, methods = names(args.modes), names(args.scopes), names(args.methods)
    ratios, seeds = floats(args.ratios), ints(args.seeds)
    for method in methods:
        method_class(method)
    args.out.mkdir(parents=True, exist_ok=True)
    files = ROOT / "bench/out/twowiki/data"
    if not (files / "questions.jsonl").exists():
        convert(args.data, files)
    ensure_project(args.project, files)
    # Work on a private copy of the clean project: its records of the clean run stay out of the shared project,
    # and other scripts may write the shared one meanwhile (kgr allows one writer per project).
    clean_copy = args.work / "clean"
    shutil.rmtree(clean_copy, ignore_errors=True)
    shutil.copytree(args.project, clean_copy, ignore=shutil.ignore_patterns(".kgr.lock"))
    questions = sample(load_questions(files / "questions.jsonl", fmt="jsonl"), args.limit, args.sample_seed)
    anchors = sorted({a for q in questions for a in q.anchors})
    print(f"{len(questions)} questions (sample seed {args.sample_seed}), {len(anchors)} anchor names; "
          f"grid {modes} x {scopes} x {ratios} x seeds {seeds}; methods {methods}", flush=True)

    cells_path = args.out / "cells.jsonl"
    clean_path = args.out / "clean.json"
    if args.fresh:  # the clean scores too: they are the baseline every cell is compared with
        cells_path.unlink(missing_ok=True)
        clean_path.unlink(missing_ok=True)
    cells = [json.loads(line) for line in cells_path.read_text().splitlines()] if cells_path.exists() else []
    ids = [q.id for q in questions]
    cells = [c for c in cells if c.get("question_ids") == ids and c.get("methods") == methods]
    done = {cell_key(c["mode"], c["scope"], c["ratio"], c["seed"]) for c in cells}

    runner = Runner(methods, questions, args.backbone, encoder=None)
    clean = None
    if clean_path.exists():
        saved = json.loads(clean_path.read_text())
        if saved.get("question_ids") == ids and set(saved["scores"]) >= set(methods):
            clean = saved["scores"]
    with Project.open(clean_copy, write=True) as source:
        began = time.perf_counter()
        store = runner.store(source)
        if clean is None:
            clean, seconds, extra = runner.run(source, store, "robust-clean")
            clean_path.write_text(json.dumps({"question_ids": ids, "scores": clean, "seconds": seconds,
                                              "extra": extra}, indent=2) + "\n")
            print(f"clean: {json.dumps(clean)} ({time.perf_counter() - began:.1f}s: {seconds})", flush=True)
        else:
            print(f"clean (stored): {json.dumps(clean)}", flush=True)
        del store


    grid = [(mode, scope, ratio, seed) for seed in seeds for mode in modes for scope in scopes for ratio in ratios]
    stopped_early = False
    for mode, scope, ratio, seed in grid:
        key = cell_key(mode, scope, ratio, seed)
        if key in done:
            continue
        if args.max_minutes is not None and time.perf_counter() - started > args.max_minutes * 60:
            stopped_early = True
            print(f"time budget of {args.max_minutes} min reached; stopping before {key}", flush=True)
            break
        target = args.work / key.replace("/", "_")
        shutil.rmtree(target, ignore_errors=True)
        t0 = time.perf_counter()
        try:
            with Project.open(clean_copy) as source:
                report = perturb.perturb_project(source, target, mode=mode, ratio=ratio, scope=scope, seed=seed,
                                                 anchors=anchors if scope == "query" else None,
                                                 encoder=runner.encoder)
            t1 = time.perf_counter()
            with Project.open(target, write=True) as damaged:
                run_reach(damaged)
                t2 = time.perf_counter()
                store = runner.store(damaged)
                scores, seconds, extra = runner.run(damaged, store, "robust")
                del store
        finally:
            shutil.rmtree(target, ignore_errors=True)
        t3 = time.perf_counter()
        cell = {"mode": mode, "scope": scope, "ratio": ratio, "seed": seed, "scores": scores,
                "in_scope": report.in_scope, "affected": report.affected, "by_operation": report.by_operation,
                "bridges": report.bridges, "anchors_matched": report.anchors_matched, "encoded": report.encoded,
                "seconds": {"perturb": round(t1 - t0, 2), "reach": round(t2 - t1, 2),
                            "retrieve": seconds, "total": round(t3 - t0, 2)},
                "extra": extra, "methods": methods, "question_ids": ids}
        with cells_path.open("a") as handle:
            handle.write(json.dumps(cell) + "\n")
        cells.append(cell)
        print(f"{key}: {json.dumps({m: round(v, 3) for m, v in scores.items()})} affected {report.affected}/"
              f"{report.in_scope} ({t3 - t0:.1f}s: perturb {t1 - t0:.1f}, reach {t2 - t1:.2f}, {seconds}) "
              f"[{(time.perf_counter() - started) / 60:.1f} min]", flush=True)
    shutil.rmtree(clean_copy, ignore_errors=True)

    tables, check = summarize(cells, clean, methods, modes, scopes, ratios)
    settings = {
        "project": str(args.project), "modes": modes, "scopes": scopes, "ratios": ratios, "seeds": seeds,
        "seeds_done": sorted({c["seed"] for c in cells}), "methods": methods, "limit": args.limit,
        "n_questions": len(questions), "sample_seed": args.sample_seed, "n_anchor_names": len(anchors),
        "backbone": args.backbone, "cells_done": len(cells), "cells_planned": len(grid),
        "stopped_early": stopped_early, "wall_seconds": round(time.perf_counter() - started, 1),
        "python": platform.python_version(),
    }
    for key, rows in tables.items():
        series = {LABELS.get(m, m): [(float(rho), row[m]["mean"]) for rho, row in rows.items() if m in row]
                  for m in methods}
        mode, scope = key.split("/")
        plot_curve(series, "perturbation ratio ρ", "answer recall in context",
                   f"2Wiki, {mode} ({scope} scope), n={len(questions)}, seeds {settings['seeds_done']}",
                   args.out / f"curve_{mode}_{scope}.png")
    (args.out / "robustness.md").write_text(markdown(tables, methods, check, settings), encoding="utf-8")
    (args.out / "robustness.json").write_text(json.dumps({
        "settings": settings, "clean": clean, "tables": tables, "csrag_check": check, "cells": cells,
    }, indent=2) + "\n", encoding="utf-8")
    print(markdown(tables, methods, check, settings))
    print(f"wrote {args.out}/ ({len(cells)} cells, {settings['wall_seconds']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
