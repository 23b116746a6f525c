"""The ANN index against the exact scan on a project's indexed vector tables (issue #37 item 5).

    python bench/index_check.py bench/out/scale/projects/s1-names-seed0 --questions QUESTIONS.jsonl

For every vector table with an index (`embedding.index_min_rows`), the questions' vectors are searched both ways:
recall@k of the index (the share of the exact top k it returns), and per-search latency p50 / p95 of each way (the
exact way a float32 matrix-vector product and top-k over the whole table, as retrieval scans today). The exact top k
is computed for all questions at once, `--chunk-rows` rows of the table cast to float32 at a time (a float16 table of
millions of rows would need a float32 copy of itself per question otherwise), and the exact scan is timed per
question on the first `--exact-timed` questions (the same chunked cast, one question at a time).
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


def exact_top_k(matrix, questions: np.ndarray, k: int, chunk_rows: int) -> list[np.ndarray]:
    """Each question's exact top k rows of `matrix` (float32, or float16 `HalfVectors`), `chunk_rows` rows at a time
    (each chunk's top k kept, then the best k of those)."""
    if isinstance(matrix, np.ndarray) and len(questions) == 1:
        return [top_k(matrix @ questions[0], k)]  # a float32 table: the scan retrieval runs
    kept_ids, kept_scores = [], []
    for start in range(0, len(matrix), chunk_rows):
        scores = questions @ np.asarray(matrix[start:start + chunk_rows], dtype=np.float32).T
        best = np.stack([top_k(row, k) for row in scores])
        kept_ids.append(best + start)
        kept_scores.append(np.take_along_axis(scores, best, axis=1))
    ids, scores = np.concatenate(kept_ids, axis=1), np.concatenate(kept_scores, axis=1)
    return [row_ids[top_k(row_scores, k)] for row_ids, row_scores in zip(ids, scores)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--questions", type=Path, required=True, help="JSONL with a 'question' field")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--chunk-rows", type=int, default=65_536, help="table rows cast to float32 at a time")
    parser.add_argument("--exact-timed", type=int, default=200, help="questions whose exact scan is timed alone")
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
            truths = exact_top_k(exact_matrix, vectors, args.k, args.chunk_rows)
            exact_ms = []
            for vector in vectors[:args.exact_timed]:
                began = time.perf_counter()
                exact_top_k(exact_matrix, vector[None, :], args.k, args.chunk_rows)
                exact_ms.append((time.perf_counter() - began) * 1000)
            recalls, index_ms = [], []
            store.nearest(table, vectors[0], args.k)  # opens the index outside the timings
            for vector, truth in zip(vectors, truths):
                began = time.perf_counter()
                found, _ = store.nearest(table, vector, args.k)
                index_ms.append((time.perf_counter() - began) * 1000)
                recalls.append(len(set(truth.tolist()) & set(found.tolist())) / args.k)
            rows[table] = {"rows": len(exact_matrix), "questions": len(vectors),
                           f"recall@{args.k}": round(statistics.mean(recalls), 4), "min recall": min(recalls),
                           "exact timed": len(exact_ms),
                           "exact p50 / p95 ms": [round(percentile(exact_ms, q), 2) for q in (50, 95)],
                           "index p50 / p95 ms": [round(percentile(index_ms, q), 2) for q in (50, 95)]}
            print(table, json.dumps(rows[table]))
        if not rows:
            print(f"{args.project}: no vector table has an index")


if __name__ == "__main__":
    main()
