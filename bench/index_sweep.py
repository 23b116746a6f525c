"""Build ANN index configurations on WORK/db table `rel` (655,360 rows of the 10x relationships, made by
bench/index_sweep_prep.py; WORK is $KGR_INDEX_SWEEP_DIR or /tmp/idx) and measure
build wall-clock (+ process CPU = cores used), recall@10 / recall@40 against the exact top-k (prep.py), and per-search
latency with kgr's VectorIndex.search settings (nprobes = all partitions; k10: ef 100, refine 10; k40: ef 120, refine 3).

    python bench/index_sweep.py CONFIG [CONFIG ...]      # results appended to WORK/results.jsonl
"""
import json, os, sys, threading, time
import numpy as np, lancedb
from pathlib import Path
from lancedb.index import IvfHnswSq, IvfPq, IvfSq

WORK = Path(os.environ.get("KGR_INDEX_SWEEP_DIR", "/tmp/idx"))
ROWS = 655_360
CONFIGS = {  # name -> (index class, kwargs); distance_type cosine for all
    "base":       (IvfHnswSq, dict(num_partitions=10, m=16, ef_construction=100, max_iterations=10)),
    "efc50":      (IvfHnswSq, dict(num_partitions=10, m=16, ef_construction=50, max_iterations=10)),
    "efc30":      (IvfHnswSq, dict(num_partitions=10, m=16, ef_construction=30, max_iterations=10)),
    "m12_efc50":  (IvfHnswSq, dict(num_partitions=10, m=12, ef_construction=50, max_iterations=10)),
    "m8_efc50":   (IvfHnswSq, dict(num_partitions=10, m=8, ef_construction=50, max_iterations=10)),
    "iters3":     (IvfHnswSq, dict(num_partitions=10, m=16, ef_construction=100, max_iterations=3)),
    "p131k_efc50": (IvfHnswSq, dict(num_partitions=5, m=16, ef_construction=50, max_iterations=10)),
    "p131k_m12_efc50": (IvfHnswSq, dict(num_partitions=5, m=12, ef_construction=50, max_iterations=10)),
    "p131k_efc30": (IvfHnswSq, dict(num_partitions=5, m=16, ef_construction=30, max_iterations=10)),
    "efc40":      (IvfHnswSq, dict(num_partitions=10, m=16, ef_construction=40, max_iterations=10)),
    "p131k_efc40": (IvfHnswSq, dict(num_partitions=5, m=16, ef_construction=40, max_iterations=10)),
    "p20_efc50":  (IvfHnswSq, dict(num_partitions=20, m=16, ef_construction=50, max_iterations=10)),
    "p20_efc100": (IvfHnswSq, dict(num_partitions=20, m=16, ef_construction=100, max_iterations=10)),
    "p20_efc40":  (IvfHnswSq, dict(num_partitions=20, m=16, ef_construction=40, max_iterations=10)),
    "ivfsq_p10":  (IvfSq, dict(num_partitions=10, max_iterations=10)),
    "ivfpq_p10":  (IvfPq, dict(num_partitions=10, num_sub_vectors=48, max_iterations=10)),
}
SETTINGS = {"k10": dict(k=10, ef=100, refine=10), "k40": dict(k=40, ef=120, refine=3),
            "k10_ef200": dict(k=10, ef=200, refine=10)}  # k10_ef200: a search-side variant, added after the first runs


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


def cpu_seconds():
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, all threads


def search(table, q, nprobes, k, ef, refine):
    found = (table.search(np.asarray(q, dtype=np.float32), vector_column_name="vector").distance_type("cosine")
             .nprobes(nprobes).ef(max(ef, k * refine)).refine_factor(refine).limit(k)
             .select(["id", "_distance"]).to_arrow())
    return found.column("id").to_numpy().astype(np.int64)


def run(name, queries, exact_ids, exact_scores, row_of, vecs):
    cls, kw = CONFIGS[name]
    db = lancedb.connect(str(WORK / "db"))
    table = db.open_table("rel")
    for index in table.list_indices():
        table.drop_index(index.name)
    samples, stop = [], threading.Event()

    def sampler():  # process CPU per 1 s interval (cores busy), to see whether the build uses both cores
        last_c, last_t = cpu_seconds(), time.perf_counter()
        while not stop.wait(1.0):
            c, t = cpu_seconds(), time.perf_counter()
            samples.append((c - last_c) / (t - last_t)); last_c, last_t = c, t

    thread = threading.Thread(target=sampler, daemon=True)
    load_before, cpu0 = loadavg(), cpu_seconds()
    thread.start()
    began = time.perf_counter()
    table.create_index("vector", config=cls(distance_type="cosine", **kw), replace=True)
    build = time.perf_counter() - began
    stop.set(); thread.join()
    cpu = cpu_seconds() - cpu0
    load_after = loadavg()
    info = [i for i in table.list_indices() if i.columns == ["vector"]][0]
    size = getattr(info, "size_bytes", None)
    nprobes = kw["num_partitions"]
    table = lancedb.connect(str(WORK / "db")).open_table("rel")  # fresh handle: no index cached from the build
    out = {"config": name, "type": cls.__name__, **kw, "build_s": round(build, 1), "cpu_s": round(cpu, 1),
           "cores_avg": round(cpu / build, 2), "cores_p90_sample": round(float(np.percentile(samples, 90)), 2) if samples else None,
           "load_before": load_before, "load_after": load_after, "index_mb": round(size / 2**20) if size else None}
    for sname, s in SETTINGS.items():
        k = s["k"]
        search(table, queries[0], nprobes, **s)  # opens the index outside the timings
        recalls, tie_recalls, ms = [], [], []
        for qi, q in enumerate(queries):  # pass 1: results (and warms the page cache), pass 2: timings
            found = search(table, q, nprobes, **s)
            truth = exact_ids[qi, :k]
            recalls.append(len(set(truth.tolist()) & set(found.tolist())) / k)
            # tie-aware: a returned row counts when its exact cosine reaches the k-th exact cosine (duplicate texts)
            got = vecs[row_of(found)] @ q if len(found) else np.empty(0)
            tie_recalls.append(min(k, int(np.sum(got >= exact_scores[qi, k - 1] - 1e-5))) / k)
        load_q = loadavg()
        for q in queries:
            t = time.perf_counter(); search(table, q, nprobes, **s); ms.append((time.perf_counter() - t) * 1000)
        r = np.array(recalls)
        out[sname] = {"recall": round(float(r.mean()), 4), "recall_min": float(r.min()),
                      "recall_rows": round(float(r[:200].mean()), 4), "recall_questions": round(float(r[200:].mean()), 4),
                      "recall_tie": round(float(np.mean(tie_recalls)), 4),
                      "p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2),
                      "load": load_q}
    return out


def main():
    queries = np.load(WORK / "queries.npy")
    exact_ids = np.load(WORK / "exact_ids.npy"); exact_scores = np.load(WORK / "exact_scores.npy")
    data = lancedb.connect(str(WORK / "db")).open_table("rel").to_arrow()
    ids = data.column("id").to_numpy(); order = np.argsort(ids); sorted_ids = ids[order]
    row_of = lambda found: order[np.searchsorted(sorted_ids, found)]
    vec = data.column("vector").combine_chunks()
    vecs = vec.values.to_numpy(zero_copy_only=False).reshape(-1, 384).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    assert len(vecs) == ROWS
    for name in sys.argv[1:]:
        out = run(name, queries, exact_ids, exact_scores, row_of, vecs)
        print(json.dumps(out), flush=True)
        with open(WORK / "results.jsonl", "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
