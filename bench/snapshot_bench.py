"""What a writer's snapshot for readers costs: time to open a project for writing vs. the database's size.

    python bench/snapshot_bench.py                   # databases of about 8, 64 and 512 MiB
    python bench/snapshot_bench.py --sizes 8,64 --repeat 5

For each size, a scratch project gets a DuckDB file of that size (a table of random doubles, which do not
compress); then `Project.open(..., write=True)` is timed when the database changed since the last snapshot (a row
inserted first, so the writer checkpoints and copies it) and when it did not (the snapshot is reused). The
difference from a plain DuckDB connect is the snapshot's cost. Medians over `--repeat` opens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgr.project import Project  # noqa: E402


def build(root: Path, mib: int) -> None:
    import duckdb

    Project.init(root)
    with Project.open(root, write=True) as project:
        rows = mib * 2**20 // 8
        project.db.execute(f"CREATE TABLE filler AS SELECT random() AS x FROM range({rows})")
        project.db.execute("CREATE TABLE marks (i INTEGER)")
    duckdb.connect(str(root / "kgr.duckdb")).close()


def timed_open(root: Path, change: bool) -> float:
    if change:
        with Project.open(root, write=True) as project:
            project.db.execute("INSERT INTO marks VALUES (1)")
    began = time.perf_counter()
    with Project.open(root, write=True) as project:
        elapsed = time.perf_counter() - began
        assert project.db is not None
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8,64,512", help="database sizes in MiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "snapshot.json")
    args = parser.parse_args()
    rows = []
    print("db MiB  open+copy ms  open (unchanged) ms  copy MiB/s")
    for mib in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=ROOT / "bench" / "out") as scratch:
            root = Path(scratch) / "project"
            build(root, mib)
            size = (root / "kgr.duckdb").stat().st_size / 2**20
            copied = statistics.median(timed_open(root, change=True) for _ in range(args.repeat))
            reused = statistics.median(timed_open(root, change=False) for _ in range(args.repeat))
        rows.append({"db_mib": round(size, 1), "open_with_copy_ms": round(copied * 1000, 1),
                     "open_unchanged_ms": round(reused * 1000, 1),
                     "copy_mib_per_s": round(size / max(copied - reused, 1e-6), 0)})
        row = rows[-1]
        print(f"{row['db_mib']:6.1f}  {row['open_with_copy_ms']:12.1f}  {row['open_unchanged_ms']:19.1f}  "
              f"{row['copy_mib_per_s']:10.0f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
