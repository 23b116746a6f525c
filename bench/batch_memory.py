"""A method's batch in one process (issue #15 item 4): peak memory, p50 / p95 latency and encoder calls per question,
each method in a process of its own, VSS in one of its own as the baseline.

    python bench/batch_memory.py                                   # DotRAG, CS-RAG, VSS on MuSiQue, 100 retrievals
    python bench/batch_memory.py --sets twowiki --methods dotrag --retrievals 300

A set with fewer questions than `--retrievals` is answered again from the start until the count is reached (the
second pass meets warm memos: its own p50 is given apart). Peak RSS is the process's high-water mark
(`ru_maxrss`), so each method runs in a fresh child process: "open" is the mark after opening the project and
building the method (graph, vectors, model), "peak" the mark after the batch. Encoder calls are counted at
`Encoder.encode`, over the first pass; a question's calls depend on each other when a text needs what the previous
one found (a constraint whose text names the entities bound before it). Output: bench/out/memory/memory.md and
memory.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402

OUT = ROOT / "bench" / "out" / "memory"


def peak_rss_gb() -> float:
    """This process's peak resident set so far, in GB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def measure(set_name: str, method: str, retrievals: int) -> dict:
    """One method's batch on one set, in this process."""
    from kgr.embed import Encoder
    from kgr.evaluate.run import queries_for
    from kgr.methods.runner import method_class, open_run
    from kgr.project import Project

    dev_set = next(s for s in suite.SETS if s.name == set_name)
    calls = [0]
    encode = Encoder.encode

    def counted(self, texts, progress=None):
        calls[0] += 1
        return encode(self, texts, progress)

    questions = list(queries_for(dev_set.questions()))
    with Project.open(suite.PROJECTS / dev_set.project, write=False) as project:
        began = time.perf_counter()
        retriever = method_class(method)(open_run(project, method))
        built_s, open_gb = time.perf_counter() - began, peak_rss_gb()
        Encoder.encode = counted
        latencies, per_question_calls = [], []
        try:
            for i in range(retrievals):
                before = calls[0]
                latencies.append(retriever.retrieve(questions[i % len(questions)]).latency_ms)
                per_question_calls.append(calls[0] - before)
        finally:
            Encoder.encode = encode
    first = latencies[:len(questions)]
    return {"set": set_name, "method": method, "retrievals": retrievals, "questions": len(questions),
            "p50_ms": round(statistics.median(latencies), 1),
            "p95_ms": round(statistics.quantiles(latencies, n=20)[-1], 1) if len(latencies) > 1 else latencies[0],
            "first_pass_p50_ms": round(statistics.median(first), 1),
            "encoder_calls_per_question": round(statistics.mean(per_question_calls[:len(questions)]), 2),
            "open_s": round(built_s, 1), "open_rss_gb": round(open_gb, 2), "peak_rss_gb": round(peak_rss_gb(), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="musique", help="comma-separated suite sets (default: musique)")
    parser.add_argument("--methods", default="dotrag,csrag", help="comma-separated (VSS always runs as the baseline)")
    parser.add_argument("--retrievals", type=int, default=100, help="retrievals per method and set (default 100)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--child", nargs=2, metavar=("SET", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child, args.retrievals)))
        return 0

    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = sorted(set(sets) - set(suite.SET_NAMES))
    if unknown:
        parser.error(f"unknown set(s) {', '.join(unknown)} (choose from {', '.join(suite.SET_NAMES)})")
    methods = [*dict.fromkeys([*(m.strip() for m in args.methods.split(",") if m.strip()), "vss"])]
    rows = []
    for set_name in sets:
        for method in methods:
            done = subprocess.run([sys.executable, __file__, "--child", set_name, method,
                                   "--retrievals", str(args.retrievals)], capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{set_name} {method}: the child process failed:\n{done.stderr.strip()}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{set_name} {suite.LABELS[method]}: p50 {row['p50_ms']} ms, peak RSS {row['peak_rss_gb']} GB, "
                  f"{row['encoder_calls_per_question']} encoder calls per question", flush=True)
    command = "python bench/batch_memory.py " + " ".join(argv if argv is not None else sys.argv[1:])
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# A method's batch in one process: memory, latency, encoder calls", "",
             f"`{command.strip()}` ({stamp}; each method in its own process; RSS in GB)", "",
             "| set | method | retrievals | p50 ms | p95 ms | first pass p50 | encoder calls / question | "
             "open s | RSS after open | peak RSS |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['set']} | {suite.LABELS[r['method']]} | {r['retrievals']} | {r['p50_ms']} | {r['p95_ms']} | "
              f"{r['first_pass_p50_ms']} | {r['encoder_calls_per_question']} | {r['open_s']} | {r['open_rss_gb']} | "
              f"{r['peak_rss_gb']} |" for r in rows]
    suite.write_report(args.out, "memory", lines, command.strip(), stamp, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
