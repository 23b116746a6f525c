"""Benchmark kgr.reach: build time, size and lookup latency on MetaQA and on a generated power-law graph.

Rerun with `python bench/reach_bench.py [--metaqa PATH] [--out bench/out/reach.json]`.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgr.reach import ReachMap, build_reach, reference_adjacency, reference_bfs  # noqa: E402

MIB = 2**20
# Published DotRAG numbers for full materialization (build seconds, MiB on disk).
PAPER = {"metaqa": (29.91, 388.67), "powerlaw": (267.0, 1.85 * 1024)}
GOALS = {  # build seconds, MiB, lookup p50 ms, lookup p99 ms
    "metaqa": (3.0, 40.0, 1.0, 10.0),
    "powerlaw": (30.0, 200.0, 5.0, 50.0),
}
OBJECT_TYPES = {
    "directed_by": "director",
    "written_by": "writer",
    "starred_actors": "actor",
    "release_year": "year",
    "in_language": "language",
    "has_genre": "genre",
    "has_tags": "tag",
    "has_imdb_rating": "rating",
    "has_imdb_votes": "votes",
}


def load_metaqa(path: Path) -> dict:
    """Parse MetaQA kb.txt into dense ids; subjects are movies, objects typed by relation."""
    ids: dict[str, int] = {}
    type_names = ["movie", *dict.fromkeys(OBJECT_TYPES.values())]
    type_of = {name: i for i, name in enumerate(type_names)}
    src, dst, pairs = [], [], set()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").split("|")
            if len(parts) != 3:
                continue
            subject, relation, obj = parts
            s = ids.setdefault(subject, len(ids))
            o = ids.setdefault(obj, len(ids))
            src.append(s)
            dst.append(o)
            pairs.add((s, type_of["movie"]))
            pairs.add((o, type_of[OBJECT_TYPES[relation]]))
    return graph_arrays(len(ids), np.array(src), np.array(dst), pairs, type_names)


def graph_arrays(n: int, src: np.ndarray, dst: np.ndarray, pairs, type_names: list[str]) -> dict:
    """Bundle a graph with its entity->types CSR built from (entity, type) pairs."""
    pair = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair[:, 0], minlength=n), out=indptr[1:])
    return {"n": n, "src": src, "dst": dst, "type_indptr": indptr, "type_ids": pair[:, 1], "type_names": type_names}


def powerlaw_graph(n: int = 89_000, m: int = 487_000, exponent: float = 2.2, seed: int = 7) -> dict:
    """Chung-Lu graph with degree exponent `exponent` and six skewed entity types, 10% of entities doubly typed."""
    rng = np.random.default_rng(seed)
    weight = (np.arange(n) + 10.0) ** (-1.0 / (exponent - 1.0))
    weight /= weight.sum()
    src = rng.choice(n, m, p=weight)
    dst = rng.choice(n, m, p=weight)
    type_names = [f"t{i}" for i in range(6)]
    share = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
    first = rng.choice(6, n, p=share)
    second = rng.choice(6, n, p=share)
    pairs = set(zip(range(n), first.tolist()))
    doubled = np.flatnonzero(rng.random(n) < 0.1)
    pairs |= set(zip(doubled.tolist(), second[doubled].tolist()))
    return graph_arrays(n, src, dst, pairs, type_names)


def percentiles(samples: list[float]) -> dict:
    """p50/p99/max in milliseconds."""
    arr = np.array(samples) * 1e3
    p50, p99 = np.percentile(arr, [50, 99])
    return {"p50_ms": float(p50), "p99_ms": float(p99), "max_ms": float(arr.max())}


def run_lookups(rm: ReachMap, anchors: np.ndarray, seed: int) -> dict:
    """Time type_counts, members and extending_edges at hops 1..H along one random typed path per anchor."""
    rng = np.random.default_rng(seed)
    times = {(op, h): [] for op in ("type_counts", "members", "extending_edges") for h in range(1, rm.max_hops + 1)}
    rows = {h: [] for h in range(1, rm.max_hops + 1)}
    clock = time.perf_counter
    for e in anchors.tolist():
        frontier = np.array([e], dtype=np.int32)
        for h in range(1, rm.max_hops + 1):
            t0 = clock()
            counts = rm.type_counts(e, h)
            t1 = clock()
            times["type_counts", h].append(t1 - t0)
            if not counts:
                break
            t = int(rng.choice(sorted(counts)))
            t0 = clock()
            found = rm.members(e, h, t)
            t1 = clock()
            rids, _, _ = rm.extending_edges(e, h, t, frontier)
            t2 = clock()
            times["members", h].append(t1 - t0)
            times["extending_edges", h].append(t2 - t1)
            rows[h].append(rids.size)
            frontier = found
    table = {f"{op}@{h}": {"n": len(v), **percentiles(v)} for (op, h), v in times.items() if v}
    for h, r in rows.items():
        if r:
            table[f"extending_edges@{h}"]["mean_rows"] = float(np.mean(r))
    return table


def run_reference(rm: ReachMap, g: dict, anchors: np.ndarray) -> dict:
    """Check all hop layers against the Python BFS and time both (our BFS from a cold cache)."""
    adjacency = reference_adjacency(g["n"], g["src"], g["dst"])
    ours, ref, reached = [], [], []
    for e in anchors.tolist():
        rm.clear_cache()
        t0 = time.perf_counter()
        ids, hops = rm.distances_within(e)
        t1 = time.perf_counter()
        dist = reference_bfs(g["n"], g["src"], g["dst"], e, rm.max_hops, adjacency)
        t2 = time.perf_counter()
        del dist[e]
        if dict(zip(ids.tolist(), hops.tolist())) != dist:
            raise AssertionError(f"reach map disagrees with reference BFS at anchor {e}")
        ours.append(t1 - t0)
        ref.append(t2 - t1)
        reached.append(ids.size)
    return {
        "anchors": int(anchors.size),
        "exact": True,
        "ours_bfs": percentiles(ours),
        "reference_bfs": percentiles(ref),
        "speedup_p50": float(np.median(ref) / np.median(ours)),
        "mean_reached_within_H": float(np.mean(reached)),
    }


def bench_graph(name: str, g: dict, args, workdir: Path) -> dict:
    """Build, open, time lookups and check against the reference for one graph."""
    out = workdir / name
    out.mkdir()
    stats = build_reach(out, g["n"], g["src"], g["dst"], g["type_indptr"], g["type_ids"], g["type_names"], 3)
    t0 = time.perf_counter()
    rm = ReachMap.open(out)
    open_ms = (time.perf_counter() - t0) * 1e3
    rng = np.random.default_rng(args.seed)
    anchors = rng.integers(0, g["n"], args.anchors)
    lookups = run_lookups(rm, anchors, args.seed)
    reference = run_reference(rm, g, anchors[: args.ref_anchors])
    goal_s, goal_mib, goal_p50, goal_p99 = GOALS[name]
    paper_s, paper_mib = PAPER[name]
    mib = stats.bytes_on_disk / MIB
    worst_p50 = max(v["p50_ms"] for v in lookups.values())
    worst_p99 = max(v["p99_ms"] for v in lookups.values())
    return {
        "stats": stats.to_dict(),
        "open_ms": open_ms,
        "size_mib": mib,
        "paper": {"build_seconds": paper_s, "size_mib": paper_mib,
                  "build_speedup": paper_s / stats.build_seconds, "size_ratio": paper_mib / mib},
        "goals": {"build_seconds": goal_s, "size_mib": goal_mib, "p50_ms": goal_p50, "p99_ms": goal_p99,
                  "met": stats.build_seconds < goal_s and mib < goal_mib and worst_p50 < goal_p50
                  and worst_p99 < goal_p99},
        "lookups": lookups,
        "reference": reference,
    }


def print_report(name: str, r: dict) -> None:
    """Readable summary of one graph's results."""
    s = r["stats"]
    print(f"\n== {name}: {s['num_entities']:,} entities, {s['num_edges']:,} edges, {s['num_types']} types, "
          f"max degree {s['max_degree']:,}, p99 degree {s['degree_p99']:.0f}, hubs(>= {s['hub_threshold']}) "
          f"{s['hub_count']}")
    print(f"build {s['build_seconds']:.2f} s, {r['size_mib']:.2f} MiB on disk, open {r['open_ms']:.2f} ms   "
          f"(paper {r['paper']['build_seconds']} s / {r['paper']['size_mib']:.0f} MiB: "
          f"{r['paper']['build_speedup']:.0f}x faster, {r['paper']['size_ratio']:.0f}x smaller)")
    print(f"{'lookup@hop':<20}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}{'rows':>10}")
    for key, v in r["lookups"].items():
        rows = f"{v['mean_rows']:.0f}" if "mean_rows" in v else ""
        print(f"{key:<20}{v['n']:>6}{v['p50_ms']:>10.3f}{v['p99_ms']:>10.3f}{v['max_ms']:>10.3f}{rows:>10}")
    ref = r["reference"]
    print(f"H-hop BFS vs Python reference on {ref['anchors']} anchors: exact; ours p50 "
          f"{ref['ours_bfs']['p50_ms']:.3f} ms p99 {ref['ours_bfs']['p99_ms']:.3f} ms, reference p50 "
          f"{ref['reference_bfs']['p50_ms']:.2f} ms p99 {ref['reference_bfs']['p99_ms']:.2f} ms "
          f"({ref['speedup_p50']:.0f}x); mean entities within H: {ref['mean_reached_within_H']:.0f}")
    print(f"goals met: {r['goals']['met']}")


def main() -> None:
    """Run the benchmark and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metaqa", type=Path, default=ROOT.parent / "shared" / "data" / "metaqa" / "kb.txt")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "reach.json")
    parser.add_argument("--anchors", type=int, default=1000)
    parser.add_argument("--ref-anchors", type=int, default=200, help="anchors also checked by the Python BFS")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    results = {"machine": {"python": platform.python_version(), "numpy": np.__version__,
                           "processor": platform.processor() or platform.machine()}}
    with tempfile.TemporaryDirectory() as tmp:
        if args.metaqa.is_file():
            t0 = time.perf_counter()
            g = load_metaqa(args.metaqa)
            results["metaqa"] = {"parse_seconds": time.perf_counter() - t0, **bench_graph("metaqa", g, args, Path(tmp))}
            print_report("MetaQA", results["metaqa"])
        else:
            print(f"MetaQA not found at {args.metaqa}; skipped")
        t0 = time.perf_counter()
        g = powerlaw_graph()
        generate_seconds = time.perf_counter() - t0
        results["powerlaw"] = {"generate_seconds": generate_seconds, **bench_graph("powerlaw", g, args, Path(tmp))}
        print_report("power-law 89k/487k", results["powerlaw"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
