"""A method's retrieval latency (DotRAG by default) beside VSS's, interleaved question by question on the dev suite's
sets.

    python bench/latency.py                                  # DotRAG, every set, 200 seeded questions each
    python bench/latency.py --sets metaqa-1hop,twowiki --limit 500
    python bench/latency.py --method csrag --sets musique,twowiki

The suite (bench/suite.py) runs one method over a whole set, then the next: on a shared machine the load can change
between the two runs, and their p50 ratio with it. Here both methods answer each question in turn in one process (one
graph in memory, the encoder warm), so a load change hits both alike. Per set: p50 of each method, their ratio,
DotRAG's p50 per stage (its record's `timings_ms`: plan.seeds = anchors and the question's vector when needed,
plan.rank_trajectories = the policy's ranking with the words it encodes, search = the hop-by-hop walk, pack), its
first question's latency, and the seconds to open the project (graph and model) and to build the method (its
warm-up: phrase lists read from the project's phrase cache, or encoded the first time). Records are not stored.
Output: bench/out/latency/latency.md and latency.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402

OUT = ROOT / "bench" / "out" / "latency"


def measure(dev_set, questions, dotrag, vss) -> dict:
    """Both methods on every question, alternating; p50s, ratio and the method's stage p50s (keys say dotrag for
    whichever method is measured)."""
    from kgr.evaluate.run import queries_for

    times: dict[str, list[float]] = defaultdict(list)
    for query in queries_for(questions):
        record = dotrag.retrieve(query)
        times["dotrag"].append(record.latency_ms)
        for stage, ms in record.timings_ms.items():
            times[f"dotrag.{stage}"].append(ms)
        times["vss"].append(vss.retrieve(query).latency_ms)
    p50 = {name: round(statistics.median(values), 1) for name, values in times.items()}
    return {"set": dev_set.name, "n": len(times["vss"]), "dotrag_p50": p50.pop("dotrag"), "vss_p50": p50.pop("vss"),
            "ratio": round(statistics.median(times["dotrag"]) / statistics.median(times["vss"]), 3),
            "dotrag_first_ms": round(times["dotrag"][0], 1), "dotrag_stages_p50": p50}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(suite.SET_NAMES), help="comma-separated (default: all)")
    parser.add_argument("--limit", type=int, default=200, help="seeded questions per set (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method", default="dotrag", choices=["dotrag", "csrag", "bm25", "dpr"])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    from kgr.evaluate.questions import sample
    from kgr.methods.runner import method_class, open_run
    from kgr.project import Project

    label = suite.LABELS[args.method]
    names = [name.strip() for name in args.sets.split(",") if name.strip()]
    unknown = sorted(set(names) - set(suite.SET_NAMES))
    if unknown:
        parser.error(f"unknown set(s) {', '.join(unknown)} (choose from {', '.join(suite.SET_NAMES)})")
    rows = []
    for project_name in dict.fromkeys(s.project for s in suite.SETS if s.name in names):
        with Project.open(suite.PROJECTS / project_name, write=False) as project:
            began = time.perf_counter()
            context = open_run(project, args.method)
            opened = time.perf_counter()
            dotrag = method_class(args.method)(context)
            built = time.perf_counter()
            vss = method_class("vss")(context)
            for dev_set in (s for s in suite.SETS if s.project == project_name and s.name in names):
                row = measure(dev_set, sample(dev_set.questions(), args.limit, args.seed), dotrag, vss)
                row["open_s"], row["build_s"] = round(opened - began, 1), round(built - opened, 1)
                rows.append(row)
                print(f"{row['set']}: {label} {row['dotrag_p50']} ms, VSS {row['vss_p50']} ms, "
                      f"{row['ratio']:.2f}x (n {row['n']})", flush=True)
    command = "python bench/latency.py " + " ".join(argv if argv is not None else sys.argv[1:])
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    stages = sorted({stage for row in rows for stage in row["dotrag_stages_p50"]})
    lines = [f"# {label} latency beside VSS, interleaved per question", "",
             f"`{command.strip()}` ({stamp}; p50 ms per question, model loading excluded)", "",
             f"| set | n | {label} p50 | VSS p50 | {label} / VSS | {label} first | open s | build s | "
             + " | ".join(s.removeprefix("dotrag.") for s in stages) + " |",
             "|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(stages)]
    lines += [f"| {r['set']} | {r['n']} | {r['dotrag_p50']} | {r['vss_p50']} | {r['ratio']:.2f}x | "
              f"{r['dotrag_first_ms']} | {r['open_s']} | {r['build_s']} | "
              + " | ".join(str(r['dotrag_stages_p50'].get(s, '–')) for s in stages) + " |"
              for r in rows]
    suite.write_report(args.out, "latency", lines, command.strip(), stamp, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
