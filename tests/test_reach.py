"""Exactness of the reachability map against a plain Python BFS on small awkward graphs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgr.errors import KgrError
from kgr.reach import ReachMap, ReachStats, build_reach, reference_adjacency, reference_bfs


def make_graph(seed: int, n: int = 80, m: int = 220, num_types: int = 4):
    """Random graph with a hub, self-loops, parallel edges, a separate component, isolated and untyped entities."""
    rng = np.random.default_rng(seed)
    main = n - 12  # entities main..n-3 form a separate component; the last two are isolated
    src = rng.integers(0, main, m)
    dst = rng.integers(0, main, m)
    hub = rng.integers(0, main)
    spokes = rng.choice(main, main // 2, replace=False)
    loops = rng.integers(0, n, 6)
    repeat = rng.integers(0, m, 15)
    side_src = rng.integers(main, n - 2, 12)
    side_dst = rng.integers(main, n - 2, 12)
    src = np.concatenate([src, np.full(spokes.size, hub), loops, src[repeat], side_src])
    dst = np.concatenate([dst, spokes, loops, dst[repeat], side_dst])
    # Parallel edges in reverse direction too, and a shuffled relationship order.
    flip = rng.random(src.size) < 0.3
    src, dst = np.where(flip, dst, src), np.where(flip, src, dst)
    order = rng.permutation(src.size)
    src, dst = src[order], dst[order]
    types = [sorted(set(rng.integers(0, num_types, rng.integers(0, 4)).tolist())) for _ in range(n)]
    indptr = np.cumsum([0] + [len(ts) for ts in types])
    ids = np.array([t for ts in types for t in ts], dtype=np.int64)
    return n, src, dst, indptr, ids, [f"type{i}" for i in range(num_types)], types


def built(tmp_path: Path, seed: int, max_hops: int = 3, **kwargs):
    """Build a map for make_graph(seed) and open it."""
    n, src, dst, indptr, ids, names, types = make_graph(seed, **kwargs)
    out = tmp_path / f"reach{seed}"
    out.mkdir()
    stats = build_reach(out, n, src, dst, indptr, ids, names, max_hops=max_hops)
    return ReachMap.open(out, cache_size=3), stats, (n, src, dst, types)


def expected_members(dist: dict[int, int], types: list[list[int]], hop: int, t: int) -> list[int]:
    """Brute-force N_{hop,t}."""
    return sorted(v for v, d in dist.items() if d == hop and t in types[v])


def brute_extending(src, dst, frontier, targets) -> list[tuple[int, int, int]]:
    """Every (rid, near, far) with near in frontier and far in targets, either edge direction, a self-loop once."""
    front, tset = set(frontier), set(targets)
    rows = []
    for rid, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
        if a in front and b in tset:
            rows.append((rid, a, b))
        if a != b and b in front and a in tset:
            rows.append((rid, b, a))
    return sorted(rows)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_lookups_match_reference_bfs(tmp_path, seed):
    rm, _, (n, src, dst, types) = built(tmp_path, seed)
    adjacency = reference_adjacency(n, src, dst)
    rng = np.random.default_rng(100 + seed)
    # Interleave anchors so the small LRU cache is exercised with evictions and hits.
    anchors = np.concatenate([rng.integers(0, n, 25), [n - 1, n - 5]])
    for e in anchors.tolist():
        dist = reference_bfs(n, src, dst, e, 3, adjacency)
        ids, hops = rm.distances_within(e)
        assert dict(zip(ids.tolist(), hops.tolist())) == {v: d for v, d in dist.items() if d > 0}
        for hop in (1, 2, 3):
            counts = rm.type_counts(e, hop)
            counts_within = rm.type_counts_within(e, hop)
            for t in range(len(rm.type_names)):
                want = expected_members(dist, types, hop, t)
                got = rm.members(e, hop, t)
                assert got.dtype == np.int32 and got.tolist() == want
                assert counts.get(t, 0) == len(want)
                want_within = sorted(v for h in range(1, hop + 1) for v in expected_members(dist, types, h, t))
                got_within = rm.members_within(e, hop, t)
                assert got_within.dtype == np.int32 and got_within.tolist() == want_within
                assert counts_within.get(t, 0) == len(want_within)
            assert all(c > 0 for c in counts.values()) and all(c > 0 for c in counts_within.values())


@pytest.mark.parametrize("seed", [3, 9])
def test_edges_within_are_every_relationship_with_an_end_within_hops_minus_one(tmp_path, seed):
    rm, _, (n, src, dst, types) = built(tmp_path, seed)
    adjacency = reference_adjacency(n, src, dst)
    for e in np.random.default_rng(300 + seed).integers(0, n, 10).tolist():
        dist = reference_bfs(n, src, dst, e, 3, adjacency)
        for hops in (1, 2, 3):
            rids, near, far = rm.edges_within(e, hops)
            inner = {v for v, d in dist.items() if d < hops}
            assert sorted(rids.tolist()) == [r for r in range(len(src)) if src[r] in inner or dst[r] in inner]
            for r, a, b in zip(rids.tolist(), near.tolist(), far.tolist()):
                assert {a, b} == {int(src[r]), int(dst[r])} and dist[a] <= dist.get(b, hops)  # from its nearer end


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_extending_edges_match_brute_force(tmp_path, seed):
    rm, _, (n, src, dst, types) = built(tmp_path, seed)
    rng = np.random.default_rng(200 + seed)
    for e in rng.integers(0, n, 15).tolist():
        previous = np.array([e], dtype=np.int32)
        for hop in (1, 2, 3):
            for t in range(len(rm.type_names)):
                # The retrieval frontier, plus an arbitrary unsorted one with duplicates.
                messy = rng.integers(0, n, 20)
                for within in (False, True):
                    targets = rm.members_within(e, hop, t) if within else rm.members(e, hop, t)
                    for frontier in (previous, messy):
                        rids, near, far = rm.extending_edges(e, hop, t, frontier, within)
                        got = sorted(zip(rids.tolist(), near.tolist(), far.tolist()))
                        assert got == brute_extending(src, dst, frontier.tolist(), targets.tolist())
                        assert near.tolist() == sorted(near.tolist())
            counts = rm.type_counts(e, hop)
            if counts:
                previous = rm.members(e, hop, max(counts, key=counts.get))


@pytest.mark.parametrize("seed", [5, 8])
def test_edges_by_type_is_extending_edges_for_every_type(tmp_path, seed):
    rm, _, (n, src, dst, types) = built(tmp_path, seed)
    rng = np.random.default_rng(300 + seed)
    for e in rng.integers(0, n, 15).tolist():
        for hop in (1, 2, 3):
            for frontier in (rm.distances_within(e)[0][:7], rng.integers(0, n, 30), np.array([e], dtype=np.int32)):
                for within in (False, True):
                    grouped = rm.edges_by_type(e, hop, frontier, within)
                    for t in range(len(rm.type_names)):
                        want = rm.extending_edges(e, hop, t, frontier, within)
                        got = grouped.get(t, (np.array([]),) * 3)
                        assert [g.tolist() for g in got] == [w.tolist() for w in want], (e, hop, t, within)
                    assert all(len(group[0]) for group in grouped.values())


def test_hub_graph_and_dense_layers(tmp_path):
    # A star plus a chain through it: one hub reaches nearly everything at hop 1, which takes the dense path.
    n = 6000
    src = np.concatenate([np.zeros(n - 1, dtype=np.int64), np.arange(1, 50)])
    dst = np.concatenate([np.arange(1, n), np.arange(2, 51)])
    indptr = np.arange(n + 1)
    ids = np.arange(n) % 2
    out = tmp_path / "star"
    out.mkdir()
    build_reach(out, n, src, dst, indptr, ids, ["even", "odd"], max_hops=2)
    rm = ReachMap.open(out)
    adjacency = reference_adjacency(n, src, dst)
    for e in (0, 1, 7, n - 1):
        dist = reference_bfs(n, src, dst, e, 2, adjacency)
        for hop in (1, 2):
            for t in (0, 1):
                want = sorted(v for v, d in dist.items() if d == hop and v % 2 == t)
                assert rm.members(e, hop, t).tolist() == want
                assert rm.type_counts(e, hop).get(t, 0) == len(want)
    # Few candidates against ~3000 targets (binary search) and the hub's whole row (mark array).
    for frontier in ([2], [0, 2]):
        rids, near, far = rm.extending_edges(1, 2, 1, np.array(frontier))
        got = sorted(zip(rids.tolist(), near.tolist(), far.tolist()))
        assert got == brute_extending(src, dst, frontier, rm.members(1, 2, 1).tolist())


def test_self_loops_and_parallel_edges(tmp_path):
    # 0-1 twice (once reversed), a loop on 0 and on 2, 1-2; entity 3 only has a loop.
    src = np.array([0, 1, 0, 2, 1, 3])
    dst = np.array([1, 0, 0, 2, 2, 3])
    out = tmp_path / "tiny"
    out.mkdir()
    seen = []
    types = (np.array([0, 1, 2, 3, 4]), np.array([0, 0, 1, 1]), ["a", "b"])
    stats = build_reach(out, 4, src, dst, *types, progress=lambda *stage: seen.append(stage))
    assert seen[-1] == ("done", 1.0) and [f for _, f in seen] == sorted(f for _, f in seen)
    assert (stats.self_loops, stats.parallel_edges, stats.isolated_entities) == (3, 1, 1)
    rm = ReachMap.open(out)
    assert rm.type_counts(0, 1) == {0: 1}
    assert rm.type_counts(0, 2) == {1: 1}
    assert rm.type_counts(3, 1) == {}
    assert rm.members(3, 1, 1).size == 0
    rids, near, far = rm.extending_edges(0, 1, 0, np.array([0]))
    assert (rids.tolist(), near.tolist(), far.tolist()) == ([0, 1], [0, 0], [1, 1])
    # A loop joins a frontier entity to itself when the entity is also a target.
    rids, near, far = rm.extending_edges(0, 2, 1, np.array([2]))
    assert (rids.tolist(), near.tolist(), far.tolist()) == ([3], [2], [2])


def test_show_shape_and_errors(tmp_path):
    rm, stats, (n, *_rest) = built(tmp_path, 9)
    view = rm.show(0)
    assert set(view) == {"entity", "hops"} and set(view["hops"]) == {"1", "2", "3"}
    assert all(isinstance(name, str) and count > 0 for hop in view["hops"].values() for name, count in hop.items())
    json.dumps(view)
    one = rm.show(0, 2)
    assert one["types"] == view["hops"]["2"]
    t = rm.type_id("type1")
    listed = rm.show(0, 2, t)
    assert listed["members"] == rm.members(0, 2, t).tolist() and listed["count"] == len(listed["members"])
    json.dumps(listed)
    with pytest.raises(KeyError):
        rm.type_id("nope")
    for bad in (0, 4, -1):
        with pytest.raises(ValueError):
            rm.type_counts(0, bad)
    with pytest.raises(ValueError):
        rm.members(n, 1, 0)
    with pytest.raises(ValueError):
        rm.members(0, 1, 99)
    with pytest.raises(ValueError):
        rm.show(0, None, 1)
    with pytest.raises(ValueError):
        rm.extending_edges(0, 1, 0, np.array([n]))


def test_open_is_memory_mapped_and_stats(tmp_path):
    rm, stats, (n, src, *_rest) = built(tmp_path, 11)
    assert isinstance(stats, ReachStats) and stats.num_entities == n and stats.num_edges == src.size
    assert stats.bytes_on_disk == sum(p.stat().st_size for p in rm.directory.iterdir())
    assert stats.max_degree >= stats.degree_p99 >= stats.degree_p50 and stats.hub_count >= 1
    json.dumps(stats.to_dict())
    assert isinstance(rm._nbr.base, np.memmap) and not rm._nbr.flags.writeable
    assert rm.num_entities == n and rm.max_hops == 3 and rm.type_names[0] == "type0"
    # Returned members are cached; they must not be writable by callers.
    assert not rm.members(0, 2, 0).flags.writeable


def test_build_and_open_refuse_bad_directories_and_input(tmp_path):
    n, src, dst, indptr, ids, names, _ = make_graph(0)
    with pytest.raises(KgrError):
        build_reach(tmp_path / "missing", n, src, dst, indptr, ids, names)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(KgrError):
        build_reach(tmp_path / "full", n, src, dst, indptr, ids, names)
    (tmp_path / "empty").mkdir()
    with pytest.raises(KgrError):
        ReachMap.open(tmp_path / "empty")
    with pytest.raises(ValueError):
        build_reach(tmp_path / "empty", n, src, dst + n, indptr, ids, names)
    with pytest.raises(ValueError):
        build_reach(tmp_path / "empty", n, src, dst, indptr, ids + len(names), names)
    with pytest.raises(ValueError):
        build_reach(tmp_path / "empty", n, src, dst, indptr[:-1], ids, names)


def test_graph_without_edges_or_types(tmp_path):
    out = tmp_path / "bare"
    out.mkdir()
    stats = build_reach(out, 3, np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.zeros(4), [], [])
    assert stats.isolated_entities == 3
    rm = ReachMap.open(out)
    assert rm.type_counts(1, 1) == {} and rm.type_counts(1, 3) == {}
    assert rm.distances_within(2)[0].size == 0
