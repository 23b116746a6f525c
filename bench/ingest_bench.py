"""Time `kgr ingest` of a graph and split it into encoder forward passes vs. everything else.

    python bench/ingest_bench.py [--kb ../shared/data/metaqa/kb.txt] [--schema fixtures/metaqa/schema.toml]
                                 [--project /tmp/kgr-bench-metaqa] [--out bench/out/ingest.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from kgr.ingest.stage import IngestOptions, run_ingest
from kgr.project import Project

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path, default=ROOT.parent / "shared/data/metaqa/kb.txt")
    parser.add_argument("--schema", type=Path, default=ROOT / "fixtures/metaqa/schema.toml")
    parser.add_argument("--project", type=Path, default=Path("/tmp/kgr-bench-metaqa"))
    parser.add_argument("--keep", action="store_true", help="Reuse an existing project (measures a no-change rerun).")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/ingest.json")
    args = parser.parse_args()
    if args.project.exists() and not args.keep:
        shutil.rmtree(args.project)
    started = time.perf_counter()
    with Project.open(args.project, write=True, create=True) as project:
        report = run_ingest(project, IngestOptions(paths=[args.kb], schema=args.schema), force=args.keep)
        sizes = project.disk_usage()
    wall = time.perf_counter() - started
    encoder = report.seconds.get("encoder", 0.0)
    result = {
        "kb": str(args.kb),
        "counts": report.counts,
        "texts_encoded": report.encoded,
        "wall_s": round(wall, 2),
        "stage_seconds": report.seconds,
        "encoder_forward_s": encoder,
        "other_s": round(wall - encoder, 2),
        "other_share": round((wall - encoder) / wall, 4),
        "disk_mib": {k: round(v / 2**20, 1) for k, v in sizes.items()},
        "disk_total_mib": round(sum(sizes.values()) / 2**20, 1),
        "paper_database_gib": 5.63,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
