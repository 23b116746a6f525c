"""`kgr ingest` with the local engine vs the Ray engine (issue #38) on a slice of the MetaQA KB.

    python bench/ray_engine.py                      # 50,000 triples: local, then ray with 1 and 2 workers
    python bench/ray_engine.py --triples 5000 --workers 2

Each ingest runs as a child process (`python -m kgr ingest DIR SLICE --schema ... --json`) into a fresh project, the
Ray ones starting their own private Ray (`ray.address = ""`), so their wall time includes Ray's start and every
actor's model load. Reported per run: wall time, texts encoded per wall second, the encoder's seconds (summed over the
actors for Ray) and texts per encoder second (a worker's throughput: what one more machine adds), the 1-minute load
average before and after (the machine is shared: above 2 on 2 cores the timings are under contention). Each Ray
project is compared with the local one: graph tables equal, vectors equal bit for bit or their least cosine.
Output: bench/out/ray_engine.json, and a markdown table on stdout (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
GRAPH_TABLES = ("entities", "entity_types", "relationships")


def ingest(project: Path, kb: Path, schema: Path, settings: dict[str, str]) -> dict:
    """One `kgr ingest` child process into a fresh `project`: its JSON report, wall time and load."""
    shutil.rmtree(project, ignore_errors=True)
    args = [sys.executable, "-m", "kgr", "ingest", str(project), str(kb), "--schema", str(schema), "--json"]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"kgr ingest failed ({done.returncode}):\n{done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    encoder = report["seconds"]["encoder"]
    return {"settings": settings, "wall_s": round(wall, 1), "encoded": report["encoded"],
            "texts_per_s": round(report["encoded"] / wall, 1), "embed_s": report["seconds"]["embed"],
            "encoder_s": encoder, "texts_per_encoder_s": round(report["encoded"] / encoder, 1) if encoder else None,
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}


def compare(ours: Path, theirs: Path) -> dict:
    """Whether two projects hold the same graph tables, and how alike their vectors are."""
    from kgr.embed import load_vectors
    from kgr.project import Project

    found = {}
    with Project.open(ours) as a, Project.open(theirs) as b:
        found["tables_equal"] = all(
            a.db.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() ==
            b.db.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in GRAPH_TABLES)
        for name in ("entities", "relationships"):
            x = load_vectors(a.artifact("ingest", "vectors"), name)
            y = load_vectors(b.artifact("ingest", "vectors"), name)
            found[f"{name}_vectors_equal"] = bool(x.shape == y.shape and np.array_equal(x, y))
            found[f"{name}_min_cosine"] = round(float(np.min(np.sum(x * y, axis=1))), 6) if x.shape == y.shape else None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path, default=ROOT.parent / "shared/data/metaqa/kb.txt")
    parser.add_argument("--schema", type=Path, default=ROOT / "fixtures/metaqa/schema.toml")
    parser.add_argument("--triples", type=int, default=50_000, help="the KB's first N lines")
    parser.add_argument("--workers", default="1,2", help="Ray encoder actors per run (comma-separated)")
    parser.add_argument("--work", type=Path, default=ROOT / "bench/out/ray_engine")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/ray_engine.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    kb = args.work / f"kb-{args.triples}.txt"
    with open(args.kb, encoding="utf-8") as source:
        kb.write_text("".join(line for _, line in zip(range(args.triples), source)), encoding="utf-8")

    runs = {"local": ingest(args.work / "local", kb, args.schema, {})}
    print(json.dumps(runs["local"]), flush=True)
    for workers in [int(w) for w in args.workers.split(",")]:
        name = f"ray-{workers}"
        runs[name] = ingest(args.work / name, kb, args.schema, {"embedding.engine": "ray", "ray.workers": str(workers)})
        runs[name].update(compare(args.work / name, args.work / "local"))
        runs[name]["vs_local"] = round(runs[name]["texts_per_s"] / runs["local"]["texts_per_s"], 3)
        print(json.dumps(runs[name]), flush=True)
    result = {"kb": str(args.kb), "triples": args.triples, "cpus": os.cpu_count(), "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))

    print("\n| engine | wall s | texts encoded | texts/s (wall) | vs local | encoder s (all workers) | texts/s per worker "
          "(encoder) | graph tables | vectors | load before / after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, run in runs.items():
        same = "" if name == "local" else ("equal" if run["tables_equal"] else "DIFFER")
        vectors = "" if name == "local" else ("bit-identical" if run["entities_vectors_equal"] and
                                              run["relationships_vectors_equal"] else
                                              f"min cos {min(run['entities_min_cosine'], run['relationships_min_cosine'])}")
        print(f"| {name} | {run['wall_s']} | {run['encoded']:,} | {run['texts_per_s']} | {run.get('vs_local', 1.0)} | "
              f"{run['encoder_s']} | {run['texts_per_encoder_s']} | {same} | {vectors} | "
              f"{run['load_before']} / {run['load_after']} |")


if __name__ == "__main__":
    main()
