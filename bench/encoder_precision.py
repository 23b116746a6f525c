"""The encoder per `embedding.precision`: agreement with float32's vectors, question-batch latency and bulk throughput.

    python bench/encoder_precision.py                    # float32 and bfloat16, one torch thread
    python bench/encoder_precision.py --threads 2

Texts are the MetaQA fixture's questions and `subject relation object` texts. Per precision: the cosine of each
vector to float32's (min and mean); the p50 forward time (ms) of batches of R texts cut to L words, as kgr's
question-sized batches run them (`Encoder._forward`), and the fixed cost and cost per padded token slot fitted to
them by least squares (the `CALL_SLOTS` ratio in kgr/embed.py); bulk texts per second in batches of 256 (ingest).
Both precisions run in one process, interleaved shape by shape. Output: bench/out/encoder_precision.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from encoder_threads import fixture_texts  # noqa: E402

OUT = ROOT / "bench" / "out"
SHAPES = [(1, 3), (1, 12), (1, 24), (4, 12), (8, 6), (8, 12), (8, 24), (16, 24), (32, 24), (8, 48)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)

    from kgr.embed import Encoder, native_bfloat16

    questions, triples = fixture_texts(200, 3000)
    encoders = {name: Encoder(threads=args.threads, precision=name) for name in ("float32", "bfloat16")}
    vectors = {name: encoder.encode(questions + triples) for name, encoder in encoders.items()}
    cosines = (vectors["float32"] * vectors["bfloat16"]).sum(axis=1)
    words = " ".join(questions).split()
    timings: dict[str, list[tuple[int, int, float]]] = {name: [] for name in encoders}
    for rows, length in SHAPES:
        texts = [" ".join(words[i * length:(i + 1) * length]) for i in range(rows)]
        for name, encoder in encoders.items():
            model = encoder.model
            slots = rows * int(model.preprocess(texts)["attention_mask"].sum(dim=1).max())
            samples = []
            for _ in range(args.repeats):
                began = time.perf_counter()
                encoder._forward(texts)
                samples.append((time.perf_counter() - began) * 1000)
            timings[name].append((rows, slots, statistics.median(samples)))
    bulk = {}
    for name, encoder in encoders.items():
        began = time.perf_counter()
        encoder.encode(triples)
        bulk[name] = len(triples) / (time.perf_counter() - began)

    result = {"threads": args.threads, "native_bfloat16": native_bfloat16(),
              "cosine_to_float32": {"min": float(cosines.min()), "mean": float(cosines.mean()), "texts": len(cosines)},
              "texts_per_s": {k: round(v, 1) for k, v in bulk.items()}, "precisions": {}}
    for name, rows in timings.items():
        slots = np.array([s for _, s, _ in rows], dtype=float)
        ms = np.array([m for _, _, m in rows])
        per_slot, fixed = np.polyfit(slots, ms, 1)
        result["precisions"][name] = {
            "fixed_ms": round(float(fixed), 2), "ms_per_slot": round(float(per_slot), 4),
            "call_slots": round(float(fixed / per_slot), 1),
            "batches": [{"rows": r, "slots": int(s), "p50_ms": round(m, 2)} for r, s, m in rows]}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "encoder_precision.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"threads {args.threads}, native bfloat16: {result['native_bfloat16']}; cosine of bfloat16 to float32 "
             f"vectors over {len(cosines)} texts: min {cosines.min():.4f}, mean {cosines.mean():.5f}", "",
             "| batch (rows x padded slots) | " + " | ".join(f"{n} p50 ms" for n in timings) + " |",
             "|---|" + "---|" * len(timings)]
    for i, (rows, length) in enumerate(SHAPES):
        lines.append(f"| {rows} x {timings['float32'][i][1]} | "
                     + " | ".join(f"{timings[n][i][2]:.1f}" for n in timings) + " |")
    lines += ["", "| precision | fixed ms | ms per slot | fixed cost in slots | bulk texts/s |", "|---|---|---|---|---|"]
    for name, fit in result["precisions"].items():
        lines.append(f"| {name} | {fit['fixed_ms']} | {fit['ms_per_slot']} | {fit['call_slots']} | "
                     f"{result['texts_per_s'][name]} |")
    (OUT / "encoder_precision.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
