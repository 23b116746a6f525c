"""Encoder backends by throughput: texts/s and tokens/s per backend, precision and threads, at three text lengths,
beside each backend's bare loop; and kgr's ingest encoding rate against the bare loop over the same texts.

    python bench/encoders.py                        # every backend x 1 and 2 threads x short / ~120 / ~250 tokens
    python bench/encoders.py --rounds 3 --quick     # fewer texts per cell
    python bench/encoders.py --ingest --backend onnx --quantize int8 --threads 2   # an ingest against the bare loop
    python bench/encoders.py --processes            # 1 thread, 2 threads, 2 processes of 1 thread (torch)

Backends: torch float32, torch bfloat16 (only where the CPU has bfloat16 units: emulated it is slower than float32),
ONNX Runtime float32 and int8 (kgr.embed_onnx: exported locally from the packaged weights). "bare" is the backend's
own loop (SentenceTransformer.encode; an ONNX session over length-sorted padded batches); "kgr" is what an ingest
calls (`LocalEngine.encode_parts` over its parts). Texts: "short" are MetaQA `subject relation object` texts (~10
tokens); "long120" / "long250" are the 2Wiki fixture's passage words in windows of ~120 / ~250 tokens. Cells run
interleaved, round by round (A, B, A, B...), so a shared machine's load falls on all of them alike; the table gives
each cell's median over rounds and its median ratio to torch float32 (same threads, same round). Also: each
backend's cosine to torch float32's vectors. Output: bench/out/encoders.json and .md (--ingest: encoders_ingest.*).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from encoder_threads import fixture_texts  # noqa: E402

OUT = ROOT / "bench" / "out"
BATCH = 256
LENGTHS = {"short": None, "long120": 120, "long250": 250}
COUNTS = {"short": 4096, "long120": 384, "long250": 192}


def long_texts(tokenizer, tokens: int, count: int) -> list[str]:
    """`count` texts of about `tokens` tokens: consecutive windows of the 2Wiki fixture's passage words."""
    corpus = json.loads((ROOT / "fixtures/2wiki/corpus.json").read_text())
    words = " ".join(p["text"] for p in corpus).split()
    per_word = len(tokenizer(" ".join(words[:2000]), add_special_tokens=False, verbose=False)["input_ids"]) / 2000
    size = max(int(tokens / per_word), 1)
    return [" ".join(words[(i * size + j) % len(words)] for j in range(size)) for i in range(count)]


def token_total(tokenizer, texts: list[str]) -> int:
    """The tokens the encoder sees: with the special ones, cut to the 256-token window."""
    return sum(min(len(ids), 256) for ids in tokenizer(texts, verbose=False)["input_ids"])


class Cell:
    """One backend x threads: its kgr Encoder and the backend's bare loop."""

    def __init__(self, backend: str, precision: str, quantize: str, threads: int):
        from kgr.embed import Encoder

        self.name = f"{backend} {'int8' if quantize != 'none' else precision}"
        self.threads = threads
        self.encoder = Encoder(batch_size=BATCH, threads=threads, precision=precision, backend=backend,
                               quantize=quantize)
        _ = self.encoder.model

    def select(self) -> None:
        import torch

        torch.set_num_threads(self.threads)  # process-wide: set before each torch cell

    def bare(self, texts: list[str]) -> None:
        onnx = self.encoder._onnx
        if onnx is None:
            self.encoder.model.encode(texts, batch_size=BATCH, convert_to_numpy=True, show_progress_bar=False)
            return
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            batch = [texts[i] for i in order[start:start + BATCH]]
            features = onnx.tokenizer(batch, padding=True, truncation=True, max_length=onnx.max_length,
                                      return_tensors="np")
            onnx.session.run(None, {"input_ids": features["input_ids"].astype(np.int64),
                                    "attention_mask": features["attention_mask"].astype(np.int64)})

    def kgr(self, texts: list[str]) -> np.ndarray:
        from kgr.embed import LocalEngine

        engine = LocalEngine(self.encoder)
        parts = [texts[i:i + engine.part_size] for i in range(0, len(texts), engine.part_size)]
        return np.concatenate(list(engine.encode_parts(parts)))


def cells_of(threads: list[int]) -> list[Cell]:
    from kgr.embed import native_bfloat16

    kinds = [("torch", "float32", "none")] + ([("torch", "bfloat16", "none")] if native_bfloat16() else []) + \
        [("onnx", "float32", "none"), ("onnx", "float32", "int8")]
    return [Cell(b, p, q, t) for t in threads for b, p, q in kinds]


def bench_backends(args) -> dict:
    cells = cells_of(args.threads)
    tokenizer = cells[0].encoder.model.tokenizer
    scale = 4 if args.quick else 1
    _, short = fixture_texts(0, COUNTS["short"] // scale)
    texts = {"short": short, **{name: long_texts(tokenizer, n, COUNTS[name] // scale)
                                for name, n in LENGTHS.items() if n}}
    tokens = {name: token_total(tokenizer, t) for name, t in texts.items()}
    reference = {t: cells[0].kgr(texts[t]) for t in texts}  # torch float32's vectors (threads do not change them)
    cosine = {}
    samples: dict[tuple, list[float]] = {}
    for cell in cells:
        cell.select()
        for name in texts:
            vectors = cell.kgr(texts[name][:64])  # warm-up, and the agreement check below
            cos = (vectors * reference[name][:64]).sum(axis=1)
            cosine.setdefault(cell.name, {})[name] = (round(float(cos.mean()), 4), round(float(cos.min()), 4))
    for round_index in range(args.rounds):
        for name, batch in texts.items():
            for cell in cells:
                cell.select()
                for path in ("bare", "kgr"):
                    began = time.perf_counter()
                    getattr(cell, path)(batch)
                    samples.setdefault((cell.name, cell.threads, name, path), []).append(
                        len(batch) / (time.perf_counter() - began))
        print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)
    rows = []
    for (backend, threads, name, path), rates in samples.items():
        base = samples[("torch float32", threads, name, path)]
        rows.append({"backend": backend, "threads": threads, "texts": name, "path": path,
                     "texts_per_s": round(statistics.median(rates), 1),
                     "tokens_per_s": round(statistics.median(rates) * tokens[name] / len(texts[name])),
                     "vs_torch_float32": round(statistics.median(r / b for r, b in zip(rates, base)), 3),
                     "kgr_vs_bare": None})
    for row in rows:
        if row["path"] == "kgr":
            bare = samples[(row["backend"], row["threads"], row["texts"], "bare")]
            mine = samples[(row["backend"], row["threads"], row["texts"], "kgr")]
            row["kgr_vs_bare"] = round(statistics.median(k / b for k, b in zip(mine, bare)), 3)
    return {"rounds": args.rounds, "batch_size": BATCH, "load_before": os.getloadavg(),
            "texts": {name: {"count": len(t), "mean_tokens": round(tokens[name] / len(t), 1)}
                      for name, t in texts.items()},
            "cosine_to_torch_float32": cosine, "rows": rows}


def backends_table(result: dict) -> str:
    lines = [f"{result['rounds']} interleaved rounds, batch {result['batch_size']}; load average before "
             f"{', '.join(f'{x:.1f}' for x in result['load_before'])}. Texts: "
             + ", ".join(f"{n} {t['count']} x ~{t['mean_tokens']} tokens" for n, t in result["texts"].items()), "",
             "| backend | threads | texts | bare texts/s | bare tokens/s | bare vs torch f32 | kgr texts/s "
             "| kgr vs bare |",
             "|---|---|---|---|---|---|---|---|"]
    by = {(r["backend"], r["threads"], r["texts"], r["path"]): r for r in result["rows"]}
    for (backend, threads, texts, path), row in by.items():
        if path != "bare":
            continue
        mine = by[(backend, threads, texts, "kgr")]
        lines.append(f"| {backend} | {threads} | {texts} | {row['texts_per_s']} | {row['tokens_per_s']:,} | "
                     f"{row['vs_torch_float32']} | {mine['texts_per_s']} | {mine['kgr_vs_bare']} |")
    lines += ["", "| backend | " + " | ".join(f"cosine to torch f32, {n} (mean / min)" for n in result["texts"]) + " |",
              "|---|" + "---|" * len(result["texts"])]
    for backend, by_texts in result["cosine_to_torch_float32"].items():
        lines.append(f"| {backend} | " + " | ".join(f"{m} / {lo}" for m, lo in by_texts.values()) + " |")
    return "\n".join(lines) + "\n"


def bench_ingest(args) -> dict:
    """A JSONL graph whose relationships carry ~`args.tokens`-token descriptions, ingested with the chosen backend,
    interleaved with bare loops over the same texts: the ingest's encoded texts / embed seconds against the bare
    loop's texts/s."""
    from kgr import api

    cell = Cell(args.backend, "auto" if args.backend == "torch" else "float32", args.quantize, args.threads[0])
    cell.select()
    tokenizer = cell.encoder.model.tokenizer
    descriptions = long_texts(tokenizer, args.tokens, args.edges) if args.tokens else None
    with tempfile.TemporaryDirectory() as scratch:
        graph = Path(scratch) / "graph.jsonl"
        with open(graph, "w") as handle:
            for i in range(args.edges):
                cited = (i * 7919 + 1) % args.edges
                record = {"subject": f"paper {i}", "relation": "cites", "object": f"paper {cited}"}
                if descriptions:
                    record["description"] = descriptions[i]
                handle.write(json.dumps(record) + "\n")
        settings = {"embedding.backend": args.backend, "embedding.quantize": args.quantize,
                    "embedding.threads": args.threads[0], "embedding.batch_size": BATCH}
        ingests, bares = [], []
        for round_index in range(args.rounds):
            project = Path(scratch) / f"project{round_index}"
            report = api.ingest(project, graph, settings=settings)
            ingests.append(report.encoded / report.seconds["embed"])
            with api_texts(project) as texts:
                began = time.perf_counter()
                cell.bare(texts)
                bares.append(len(texts) / (time.perf_counter() - began))
            print(f"round {round_index + 1}: ingest {ingests[-1]:.1f} texts/s, bare {bares[-1]:.1f}", file=sys.stderr)
    return {"backend": cell.name, "threads": args.threads[0], "edges": args.edges, "description_tokens": args.tokens,
            "encoded": report.encoded, "seconds": report.seconds, "load_before": os.getloadavg(),
            "ingest_texts_per_s": [round(r, 1) for r in ingests], "bare_texts_per_s": [round(r, 1) for r in bares],
            "ingest_vs_bare": round(statistics.median(i / b for i, b in zip(ingests, bares)), 3)}


def _worker_start(root: str, precision: str) -> None:
    """A pool process: one torch thread, its own encoder (the model loads once per process)."""
    global WORKER_ENCODER
    sys.path.insert(0, root)
    from kgr.embed import Encoder

    WORKER_ENCODER = Encoder(batch_size=BATCH, threads=1, precision=precision)
    _ = WORKER_ENCODER.model


def _worker_encode(texts: list[str]) -> int:
    return len(WORKER_ENCODER.encode(texts))


def bench_processes(args) -> dict:
    """Both cores busy by threads or by processes: one process of 1 thread, one of 2 threads, and 2 processes of 1
    thread each encoding half the texts (what `embedding.engine = "ray"` with 2 workers does), interleaved."""
    import multiprocessing

    from kgr.embed import Encoder, resolve_precision

    precision = resolve_precision("auto")
    one, two = (Encoder(batch_size=BATCH, threads=n, precision=precision) for n in (1, 2))
    tokenizer = one.model.tokenizer
    _, short = fixture_texts(0, COUNTS["short"] // 4)
    texts = {"short": short, "long120": long_texts(tokenizer, 120, COUNTS["long120"] // 4)}
    pool = multiprocessing.get_context("spawn").Pool(2, initializer=_worker_start, initargs=(str(ROOT), precision))
    pool.map(_worker_encode, [["warm up"], ["warm up"]])
    import torch

    def threads(encoder, n):
        def run(batch):
            torch.set_num_threads(n)
            encoder.encode(batch)
        return run

    ways = {"1 process x 1 thread": threads(one, 1), "1 process x 2 threads": threads(two, 2),
            "2 processes x 1 thread": lambda batch: pool.map(_worker_encode, [batch[0::2], batch[1::2]])}
    samples: dict[tuple, list[float]] = {}
    try:
        for round_index in range(args.rounds):
            for name, batch in texts.items():
                for way, run in ways.items():
                    began = time.perf_counter()
                    run(batch)
                    samples.setdefault((name, way), []).append(len(batch) / (time.perf_counter() - began))
            print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        pool.terminate()
    rows = []
    for (name, way), rates in samples.items():
        base = samples[(name, "1 process x 1 thread")]
        rows.append({"texts": name, "way": way, "texts_per_s": round(statistics.median(rates), 1),
                     "vs_one_thread": round(statistics.median(r / b for r, b in zip(rates, base)), 3)})
    return {"precision": precision, "rounds": args.rounds, "load_before": os.getloadavg(), "rows": rows}


class api_texts:
    """The texts an ingested project embedded (entities' then relationships'), read back from its tables."""

    def __init__(self, project: Path):
        self.project = project

    def __enter__(self) -> list[str]:
        from kgr.project import Project

        with Project.open(self.project) as opened:
            db = opened.db
            entities = [r[0] for r in db.execute("SELECT text FROM entities ORDER BY eid").fetchall()]
            relationships = [r[0] for r in db.execute("SELECT description FROM relationships ORDER BY rid").fetchall()]
        return entities + relationships

    def __exit__(self, *exc) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--quick", action="store_true", help="a quarter of the texts per cell")
    parser.add_argument("--ingest", action="store_true", help="an ingest's encoding rate against the bare loop")
    parser.add_argument("--processes", action="store_true", help="threads against processes (torch, default precision)")
    parser.add_argument("--backend", default="torch", choices=("torch", "onnx"))
    parser.add_argument("--quantize", default="none", choices=("none", "int8"))
    parser.add_argument("--edges", type=int, default=2000, help="--ingest: relationships in the graph")
    parser.add_argument("--tokens", type=int, default=120, help="--ingest: description tokens (0: names only)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.processes:
        result = bench_processes(args)
        (OUT / "encoders_processes.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    if args.ingest:
        result = bench_ingest(args)
        (OUT / "encoders_ingest.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    result = bench_backends(args)
    (OUT / "encoders.json").write_text(json.dumps(result, indent=2) + "\n")
    table = backends_table(result)
    (OUT / "encoders.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
