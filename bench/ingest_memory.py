"""What an ingest holds besides the encoder (issue #37 item 2): `kgr ingest` of a bench/scale.py graph with a
stand-in encoder (seeded unit vectors, no model) and no ANN index, peak RSS of the ingest's own process.

    python bench/ingest_memory.py --scale 0.1,1            # the graphs bench/scale.py generates (cached)
    python bench/ingest_memory.py --scale 1 --set embedding.chunk_rows=1024

Each scale runs in a child process of its own, so each peak (`ru_maxrss`) is that ingest's alone; the growth per
1,000 entities + relationships between the smallest and largest scale is what kgr holds per row (the model's and
LanceDB's fixed memory cancel out). The read's peak is the process's VmHWM when `store_graph` starts (Linux only):
reading, merging and typing the graph and making its columns. Output: bench/out/ingest_memory/ingest_memory.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

OUT = ROOT / "bench" / "out" / "ingest_memory"


class StandInEncoder:
    """Unit vectors from a generator seeded by the batch size: the ingest's work without a model."""

    model_name = "stand-in"
    vectors_kind = "stand-in"
    dimension = 384
    batch_size = 256
    encode_seconds = 0.0

    def encode(self, texts, progress=None):
        vectors = np.random.default_rng(len(texts)).standard_normal((len(texts), self.dimension)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def truncated(self, texts) -> int:
        """No text is cut: the stand-in has no window."""
        return 0


def child(scale: float, settings: list[str]) -> dict:
    """Ingest the scale's graph into a fresh project with the stand-in encoder; return counts, seconds, peak RSS."""
    import shutil

    import kgr.ingest.stage as stage
    from kgr.api import ingest
    from scale import generate

    folder, _ = generate(scale, "names", 0, ROOT / "bench" / "out" / "scale", 200, log=lambda message: None)
    project = OUT / "projects" / f"s{scale:g}"
    shutil.rmtree(project, ignore_errors=True)
    stage.project_encoder = lambda config: StandInEncoder()
    read_peak = {}
    store_graph = stage.store_graph

    def measured_store_graph(*args, **kwargs):
        """store_graph, after noting the peak so far: the read's (parse, merge, type, make the columns)."""
        read_peak["mib"] = high_water_mib()
        return store_graph(*args, **kwargs)

    stage.store_graph = measured_store_graph
    overrides = {"embedding.index_min_rows": 0, **dict(s.split("=", 1) for s in settings)}
    started = time.perf_counter()
    report = ingest(project, [folder / "entities.tsv", folder / "relationships.tsv"], schema=folder / "schema.toml",
                    settings=overrides)
    wall = time.perf_counter() - started
    shutil.rmtree(project, ignore_errors=True)
    rows = report.counts["entities"] + report.counts["relationships"]
    return {"scale": scale, "rows": rows, "wall_s": round(wall, 1), "seconds": report.seconds,
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "read_peak_rss_mib": read_peak.get("mib"), "settings": overrides}


def high_water_mib() -> float:
    """This process's peak RSS so far (VmHWM), in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return round(kib / 1024, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="0.1,1", help="bench/scale.py sizes, comma-separated")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="an ingest setting (repeatable)")
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child, args.set)))
        return 0
    results = []
    for scale in [float(s) for s in args.scale.split(",") if s.strip()]:
        command = [sys.executable, __file__, "--child", str(scale), *[x for s in args.set for x in ("--set", s)]]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = results[-1]
        print(f"scale {r['scale']:g}: {r['rows']:,} rows, peak RSS {r['peak_rss_mib']:,.0f} MiB (read "
              f"{r['read_peak_rss_mib']:,.0f} MiB), {r['wall_s']} s")
    if len(results) > 1:
        first, last = results[0], results[-1]
        for key, what in (("peak_rss_mib", "growth"), ("read_peak_rss_mib", "read's growth")):
            growth = (last[key] - first[key]) / (last["rows"] - first["rows"]) * 1000
            print(f"{what}: {growth:.2f} MiB per 1,000 rows")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "ingest_memory.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
