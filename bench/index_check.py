"""The ANN index against the exact scan on a project's indexed vector tables (issue #37 item 5).

    python bench/index_check.py bench/out/scale/projects/s1-names-seed0 --questions QUESTIONS.jsonl

For every vector table with an index (`embedding.index_min_rows`), the questions' vectors are searched both ways:
recall@k of the index (the share of the exact top k it returns), and per-search latency p50 / p95 of each way (the
exact way a float32 matrix-vector product and top-k over the whole table, as retrieval scans today).
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

from kgr.project import Project  # noqa: E402
from kgr.ranking import top_k  # noqa: E402
from kgr.store import VECTOR_MATRICES, GraphStore  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--questions", type=Path, required=True, help="JSONL with a 'question' field")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--limit", type=int, default=200)
    args = parser.parse_args()
    questions = [json.loads(line)["question"] for line in args.questions.open() if line.strip()][:args.limit]
    with Project.open(args.project) as project:
        store = GraphStore(project)
        vectors = store.encoder.encode(questions)
        rows = {}
        for table, matrix in VECTOR_MATRICES.items():
            if not store.has_index(table):
                continue
            exact_matrix = getattr(store, matrix)
            recalls, exact_ms, index_ms = [], [], []
            store.nearest(table, vectors[0], args.k)  # opens the index outside the timings
            for vector in vectors:
                began = time.perf_counter()
                truth = top_k(exact_matrix @ vector, args.k)
                exact_ms.append((time.perf_counter() - began) * 1000)
                began = time.perf_counter()
                found, _ = store.nearest(table, vector, args.k)
                index_ms.append((time.perf_counter() - began) * 1000)
                recalls.append(len(set(truth.tolist()) & set(found.tolist())) / args.k)
            rows[table] = {"rows": len(exact_matrix), "questions": len(vectors),
                           f"recall@{args.k}": round(statistics.mean(recalls), 4), "min recall": min(recalls),
                           "exact p50 / p95 ms": [round(percentile(exact_ms, q), 2) for q in (50, 95)],
                           "index p50 / p95 ms": [round(percentile(index_ms, q), 2) for q in (50, 95)]}
            print(table, json.dumps(rows[table]))
        if not rows:
            print(f"{args.project}: no vector table has an index")


if __name__ == "__main__":
    main()
