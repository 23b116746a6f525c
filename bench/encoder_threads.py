"""Encoder latency and throughput per `embedding.threads`, idle and beside busy processes (the default's evidence).

    python bench/encoder_threads.py                      # threads 0,1,2 with 0 and 1 busy-looping processes
    python bench/encoder_threads.py --threads 0,1 --load 0,1,2

Each (threads, load) cell runs in a fresh process: load the packaged MiniLM, one warm-up encode (as
`GraphStore.warm` does), then time one question at a time over the MetaQA fixture questions (the first one, the
mean of the first ten, p50 and p95, in ms) and a bulk encode of the fixture's relationship texts (texts per
second, batches of 256 as ingest does). `--load N` starts N processes that spin on a core for the cell's
duration. On a machine other processes share, compare cells of one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIXTURE = ROOT / "fixtures" / "metaqa"

CELL = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from kgr.embed import Encoder

threads, questions, texts = int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
encoder = Encoder(threads=threads)
began = time.perf_counter()
encoder.encode_query("warm up")
load_s = time.perf_counter() - began
import torch
latencies = []
for question in questions:
    began = time.perf_counter()
    encoder.encode_query(question)
    latencies.append((time.perf_counter() - began) * 1000)
began = time.perf_counter()
encoder.encode(texts)
bulk_s = time.perf_counter() - began
print(json.dumps({"torch_threads": torch.get_num_threads(), "load_s": load_s, "latencies_ms": latencies,
                  "texts_per_s": len(texts) / bulk_s}))
"""


def fixture_texts(questions: int, texts: int) -> tuple[list[str], list[str]]:
    """Question texts (mention brackets kept, as retrieval sees them) and `subject relation object` texts."""
    lines = []
    for hops in (1, 2, 3):
        lines += [line.split("\t")[0] for line in (FIXTURE / f"qa_{hops}hop.txt").read_text().splitlines() if line]
    triples = [" ".join(line.split("|")) for line in (FIXTURE / "kb.txt").read_text().splitlines() if line]
    return lines[:questions], triples[:texts]


def run_cell(threads: int, load: int, questions: list[str], texts: list[str]) -> dict:
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    try:
        done = subprocess.run([sys.executable, "-c", CELL, str(ROOT), str(threads), json.dumps(questions),
                               json.dumps(texts)], capture_output=True, text=True, check=True)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    result = json.loads(done.stdout.strip().splitlines()[-1])
    latencies = result.pop("latencies_ms")
    ordered = sorted(latencies)
    return {"threads": threads, "load": load, **result, "first_ms": latencies[0],
            "first10_mean_ms": statistics.fmean(latencies[:10]), "p50_ms": statistics.median(latencies),
            "p95_ms": ordered[int(0.95 * (len(ordered) - 1))]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="0,1,2", help="embedding.threads values (0 = torch's default)")
    parser.add_argument("--load", default="0,1", help="numbers of busy-looping processes beside the encoder")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "encoder_threads.json")
    args = parser.parse_args()
    questions, texts = fixture_texts(args.questions, args.texts)
    cells = []
    print(f"cores {os.cpu_count()}, load average before {os.getloadavg()[0]:.1f}")
    print("threads load torch first_ms first10_ms p50_ms p95_ms texts/s")
    for load in (int(x) for x in args.load.split(",")):
        for threads in (int(x) for x in args.threads.split(",")):
            cell = run_cell(threads, load, questions, texts)
            cells.append(cell)
            print(f"{threads:7d} {load:4d} {cell['torch_threads']:5d} {cell['first_ms']:8.1f} "
                  f"{cell['first10_mean_ms']:10.1f} {cell['p50_ms']:6.1f} {cell['p95_ms']:6.1f} "
                  f"{cell['texts_per_s']:7.0f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"load_average": os.getloadavg(), "cells": cells}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
