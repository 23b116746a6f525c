"""Reachability map (DotRAG): exact typed hop-h neighbourhoods of an anchor entity, memory-mapped.

N_{h,t}(e) is the set of entities whose shortest undirected hop distance from e is exactly h and that carry type t.
Materializing every set grows with the number of pairs within H hops, which hubs make near-quadratic (MetaQA has
~311M pairs within 3 hops), so the map stores only the undirected CSR adjacency (with relationship ids), the
entity->types CSR and the hop-1 type counts. Deeper layers come from a vectorized BFS on demand, and the last few
anchors' layers are cached because retrieval asks several lookups for the same anchor.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kgr.errors import KgrError

FORMAT_VERSION = 1
META_FILE = "meta.json"
_ARRAYS = (
    "adj_indptr",  # int64 [N+1]: undirected adjacency rows
    "adj_nbr",  # int32: neighbour of each adjacency entry
    "adj_rid",  # int32: relationship id of each adjacency entry
    "type_indptr",  # int64 [N+1]: entity -> types rows (sorted, distinct)
    "type_ids",  # int32
    "hop1_indptr",  # int64 [N+1]: entity -> (type, count) rows at hop 1
    "hop1_type",  # int32
    "hop1_count",  # int32
)
_EMPTY = np.empty(0, dtype=np.int32)
_EMPTY.flags.writeable = False


@dataclass
class ReachStats:
    """Shape of the graph and cost of one build."""

    num_entities: int
    num_edges: int
    num_types: int
    max_hops: int
    adjacency_entries: int
    self_loops: int
    parallel_edges: int  # non-loop edges whose endpoint pair was already joined by an earlier edge
    isolated_entities: int
    max_degree: int
    degree_p50: float
    degree_p90: float
    degree_p99: float
    hub_threshold: int  # degree >= sqrt(N): a hub's neighbours' neighbours can cover the whole graph
    hub_count: int
    build_seconds: float
    bytes_on_disk: int

    def to_dict(self) -> dict:
        """The stats as a JSON-able dict."""
        return asdict(self)


def csr_entries(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the CSR entries of `rows` concatenated in row order, and each row's length."""
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64), lens
    # Entry k of the output is k plus (start of its row - where its row begins in the output).
    shift = np.repeat(starts - (np.cumsum(lens) - lens), lens)
    return np.arange(total, dtype=np.int64) + shift, lens


def _check_edges(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validate the edge arrays and return them as int32."""
    src, dst = np.asarray(src), np.asarray(dst)
    if src.ndim != 1 or src.shape != dst.shape:
        raise ValueError("src and dst must be 1-d arrays of the same length")
    if src.size and not (np.issubdtype(src.dtype, np.integer) and np.issubdtype(dst.dtype, np.integer)):
        raise ValueError("src and dst must hold integer entity ids")
    if src.size >= 2**31:
        raise ValueError("at most 2**31-1 relationships are supported")
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise ValueError(f"src/dst hold entity ids outside 0..{n - 1}")
    return src.astype(np.int32, copy=False), dst.astype(np.int32, copy=False)


def _normalize_types(
    n: int, type_indptr: np.ndarray, type_ids: np.ndarray, num_types: int
) -> tuple[np.ndarray, np.ndarray]:
    """Validate the entity->types CSR and make each row sorted and duplicate-free."""
    indptr = np.asarray(type_indptr, dtype=np.int64)
    ids = np.asarray(type_ids)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError("type_ids must be a 1-d array of integer type ids")
    ids = ids.astype(np.int64, copy=False)
    if indptr.shape != (n + 1,) or indptr[0] != 0 or indptr[-1] != ids.size or np.any(np.diff(indptr) < 0):
        raise ValueError(f"type_indptr must be a non-decreasing array of {n + 1} offsets from 0 to len(type_ids)")
    if ids.size and (ids.min() < 0 or ids.max() >= num_types):
        raise ValueError(f"type_ids hold type ids outside 0..{num_types - 1}")
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    key = np.unique(owner * num_types + ids)
    out_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // num_types, minlength=n), out=out_indptr[1:])
    return out_indptr, (key % num_types).astype(np.int32)


def _undirected_csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected CSR (indptr, neighbour, relationship id); each row lists its entries by relationship id."""
    m = src.size
    # Interleave both directions so entries are in relationship-id order; the stable sort keeps that order per row.
    owner = np.empty(2 * m, dtype=np.int32)
    other = np.empty(2 * m, dtype=np.int32)
    owner[0::2], owner[1::2] = src, dst
    other[0::2], other[1::2] = dst, src
    rid = np.repeat(np.arange(m, dtype=np.int32), 2)
    # A self-loop is kept once: it never changes distances but extending_edges must still be able to return it.
    keep = np.ones(2 * m, dtype=bool)
    keep[1::2] = src != dst
    owner, other, rid = owner[keep], other[keep], rid[keep]
    order = np.argsort(owner, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=indptr[1:])
    return indptr, other[order], rid[order]


def _hop1_counts(
    n: int, indptr: np.ndarray, nbr: np.ndarray, type_indptr: np.ndarray, type_ids: np.ndarray, num_types: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-entity hop-1 type counts as a CSR (indptr, type, count), plus each entity's distinct-neighbour count."""
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    loop = owner == nbr
    # Distinct (u, v) pairs: parallel edges must count a neighbour once; a self-loop is not a hop.
    pair = np.unique(owner[~loop] * n + nbr[~loop])
    u, v = pair // n, pair % n
    idx, lens = csr_entries(type_indptr, v)
    key, count = np.unique(np.repeat(u, lens) * num_types + type_ids[idx], return_counts=True)
    out_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // num_types, minlength=n), out=out_indptr[1:])
    return out_indptr, (key % num_types).astype(np.int32), count.astype(np.int32), np.bincount(u, minlength=n)


def build_reach(
    out_dir: Path,
    num_entities: int,
    src: np.ndarray,
    dst: np.ndarray,
    type_indptr: np.ndarray,
    type_ids: np.ndarray,
    type_names: list[str],
    max_hops: int = 3,
    progress: Callable[[str, float], None] | None = None,
) -> ReachStats:
    """Write the reachability map of the graph into the existing, empty directory out_dir."""
    start = time.perf_counter()
    report = progress or (lambda stage, fraction: None)
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise KgrError(f"{out_dir}: reach output directory does not exist")
    if any(out_dir.iterdir()):
        raise KgrError(f"{out_dir}: reach output directory is not empty")
    n = int(num_entities)
    if n < 0 or n >= 2**31:
        raise ValueError("num_entities must be in 0..2**31-1")
    if int(max_hops) < 1:
        raise ValueError("max_hops must be at least 1")
    type_names = [str(name) for name in type_names]
    if len(set(type_names)) != len(type_names):
        raise ValueError("type_names must be distinct")
    num_types = max(len(type_names), 1)  # keeps the (entity, type) key arithmetic valid with no types

    report("validate", 0.0)
    src, dst = _check_edges(n, src, dst)
    t_indptr, t_ids = _normalize_types(n, type_indptr, type_ids, num_types)
    report("adjacency", 0.1)
    indptr, nbr, rid = _undirected_csr(n, src, dst)
    report("hop-1 type counts", 0.5)
    h1_indptr, h1_type, h1_count, distinct = _hop1_counts(n, indptr, nbr, t_indptr, t_ids, num_types)

    report("write", 0.8)
    arrays = dict(zip(_ARRAYS, (indptr, nbr, rid, t_indptr, t_ids, h1_indptr, h1_type, h1_count)))
    for name, array in arrays.items():
        np.save(out_dir / f"{name}.npy", array)
    self_loops = int(np.count_nonzero(src == dst))
    degree = np.diff(indptr)
    hub_threshold = max(int(np.ceil(np.sqrt(n))), 1)
    pct = np.percentile(degree, [50, 90, 99]) if n else np.zeros(3)
    meta = {
        "format": FORMAT_VERSION,
        "num_entities": n,
        "num_edges": int(src.size),
        "max_hops": int(max_hops),
        "type_names": type_names,
    }
    # meta.json goes last: its presence marks a complete build.
    (out_dir / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    stats = ReachStats(
        num_entities=n,
        num_edges=int(src.size),
        num_types=len(type_names),
        max_hops=int(max_hops),
        adjacency_entries=int(nbr.size),
        self_loops=self_loops,
        parallel_edges=int(src.size) - self_loops - int(distinct.sum()) // 2,
        isolated_entities=int(np.count_nonzero(distinct == 0)),
        max_degree=int(degree.max()) if n else 0,
        degree_p50=float(pct[0]),
        degree_p90=float(pct[1]),
        degree_p99=float(pct[2]),
        hub_threshold=hub_threshold,
        hub_count=int(np.count_nonzero(degree >= hub_threshold)),
        build_seconds=time.perf_counter() - start,
        bytes_on_disk=sum(path.stat().st_size for path in out_dir.iterdir()),
    )
    report("done", 1.0)
    return stats


class _Anchor:
    """Cached BFS state of one anchor: layers[h] is the sorted int32 array of entities at distance exactly h."""

    __slots__ = ("layers", "counts", "members")

    def __init__(self, e: int):
        self.layers: list[np.ndarray] = [np.array([e], dtype=np.int32)]
        self.counts: dict[int, dict[int, int]] = {}
        self.members: dict[tuple[int, int], np.ndarray] = {}


class ReachMap:
    """Memory-mapped reachability lookups; not thread-safe, since lookups share BFS scratch arrays."""

    def __init__(self, directory: Path, meta: dict, arrays: dict[str, np.ndarray], cache_size: int):
        """Wrap loaded arrays; use ReachMap.open."""
        self.directory = directory
        self.num_entities: int = meta["num_entities"]
        self.num_edges: int = meta["num_edges"]
        self.max_hops: int = meta["max_hops"]
        self.type_names: list[str] = list(meta["type_names"])
        self._type_index = {name: i for i, name in enumerate(self.type_names)}
        self._indptr = arrays["adj_indptr"]
        self._nbr = arrays["adj_nbr"]
        self._rid = arrays["adj_rid"]
        self._type_indptr = arrays["type_indptr"]
        self._type_ids = arrays["type_ids"]
        self._h1_indptr = arrays["hop1_indptr"]
        self._h1_type = arrays["hop1_type"]
        self._h1_count = arrays["hop1_count"]
        self._cache: OrderedDict[int, _Anchor] = OrderedDict()
        self._cache_size = max(int(cache_size), 1)
        self._mark: np.ndarray | None = None  # uint8 scratch, all zero between calls
        # Above this many candidates a dense scan of the mark array beats sorting them (measured ~N/16).
        self._dense_cutoff = max(self.num_entities // 16, 4096)

    @classmethod
    def open(cls, directory: Path, cache_size: int = 8) -> ReachMap:
        """Open a built map; arrays are memory-mapped read-only, so opening is fast and pages are shared."""
        directory = Path(directory)
        meta_path = directory / META_FILE
        if not meta_path.is_file():
            raise KgrError(f"{directory}: no complete reachability map (missing {META_FILE}); run `kgr reach`")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise KgrError(f"{meta_path}: reachability map format {meta.get('format')} is not {FORMAT_VERSION}")
        arrays = {}
        for name in _ARRAYS:
            path = directory / f"{name}.npy"
            if not path.is_file():
                raise KgrError(f"{path}: missing reachability map file; run `kgr reach`")
            # np.asarray drops the memmap subclass (no copy), which makes fancy indexing cheaper.
            arrays[name] = np.asarray(np.load(path, mmap_mode="r"))
        return cls(directory, meta, arrays, cache_size)

    def type_id(self, name: str) -> int:
        """The id of a type name; KeyError if unknown."""
        return self._type_index[name]

    def degree(self, e: int) -> int:
        """Number of adjacency entries of e (parallel edges counted, a self-loop once)."""
        self._check_entity(e)
        return int(self._indptr[e + 1] - self._indptr[e])

    def clear_cache(self) -> None:
        """Forget the cached anchors."""
        self._cache.clear()

    def type_counts(self, e: int, hop: int) -> dict[int, int]:
        """Map type id -> |N_{hop,t}(e)| for the non-empty types."""
        self._check(e, hop)
        if hop == 1:
            lo, hi = self._h1_indptr[e], self._h1_indptr[e + 1]
            return dict(zip(self._h1_type[lo:hi].tolist(), self._h1_count[lo:hi].tolist()))
        anchor = self._anchor(e)
        counts = anchor.counts.get(hop)
        if counts is None:
            idx, _ = csr_entries(self._type_indptr, self._layer(anchor, hop))
            tally = np.bincount(self._type_ids[idx], minlength=len(self.type_names))
            nonzero = np.flatnonzero(tally)
            counts = anchor.counts[hop] = dict(zip(nonzero.tolist(), tally[nonzero].tolist()))
        return dict(counts)

    def members(self, e: int, hop: int, t: int) -> np.ndarray:
        """Sorted int32 ids of N_{hop,t}(e) (read-only array)."""
        self._check(e, hop, t)
        anchor = self._anchor(e)
        found = anchor.members.get((hop, t))
        if found is None:
            layer = self._layer(anchor, hop)
            idx, lens = csr_entries(self._type_indptr, layer)
            # Types are distinct per entity and the layer is sorted, so the hits come out sorted and unique.
            found = np.repeat(layer, lens)[self._type_ids[idx] == t]
            found.flags.writeable = False
            anchor.members[(hop, t)] = found
        return found

    def type_counts_within(self, e: int, hop: int) -> dict[int, int]:
        """Map type id -> |N_{1..hop,t}(e)|: the type's entities at distance 1 to `hop` (e itself excluded)."""
        totals: dict[int, int] = {}
        for h in range(1, hop + 1):
            for t, count in self.type_counts(e, h).items():
                totals[t] = totals.get(t, 0) + count
        return totals

    def members_within(self, e: int, hop: int, t: int) -> np.ndarray:
        """Sorted int32 ids of N_{1..hop,t}(e), the union of the layers 1 to `hop` (read-only array)."""
        if hop == 1:
            return self.members(e, 1, t)
        layers = [self.members(e, h, t) for h in range(1, hop + 1)]
        found = np.sort(np.concatenate(layers))  # layers are disjoint: no duplicates to remove
        found.flags.writeable = False
        return found

    def extending_edges(
        self, e: int, hop: int, t: int, frontier: np.ndarray, within: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rids, near, far) of every relationship joining near in frontier to far in N_{hop,t}(e), by (near, rid);
        with `within`, to far in N_{1..hop,t}(e)."""
        targets = self.members_within(e, hop, t) if within else self.members(e, hop, t)
        front = self._frontier(frontier)
        if front.size == 0 or targets.size == 0:
            return _EMPTY.copy(), _EMPTY.copy(), _EMPTY.copy()
        idx, lens = csr_entries(self._indptr, front)
        far = self._nbr[idx]
        hit = self._isin_sorted(far, [targets])
        return self._rid[idx[hit]], np.repeat(front, lens)[hit], far[hit]

    def edges_by_type(
        self, e: int, hop: int, frontier: np.ndarray, within: bool = False
    ) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """{t: extending_edges(e, hop, t, frontier, within)} for every type t that some relationship reaches, in one
        pass over the frontier's edges (a walk asks this for every type at each hop: per type it re-reads them all)."""
        self._check(e, hop)
        front = self._frontier(frontier)
        if front.size == 0:
            return {}
        anchor = self._anchor(e)
        layers = [self._layer(anchor, h) for h in (range(1, hop + 1) if within else (hop,))]
        idx, lens = csr_entries(self._indptr, front)
        far = self._nbr[idx]
        hit = self._isin_sorted(far, layers)
        idx, near, far = idx[hit], np.repeat(front, lens)[hit], far[hit]
        type_idx, type_lens = csr_entries(self._type_indptr, far)
        types = self._type_ids[type_idx]
        # one row per (edge, type of its far end); a stable sort by type keeps each type's edges in (near, rid) order
        edge = np.repeat(np.arange(far.size), type_lens)
        order = np.argsort(types, kind="stable")
        types, edge = types[order], edge[order]
        bounds = np.flatnonzero(types[1:] != types[:-1]) + 1
        return {int(types[start]): (self._rid[idx[group]], near[group], far[group])
                for start, group in zip(np.r_[0, bounds].tolist(), np.split(edge, bounds)) if group.size}

    def edges_within(self, e: int, hops: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rids, near, far) of every relationship with an end at most `hops` - 1 hops from e (so its other end is at
        most `hops` away), near being the end nearer e; each relationship once, by (near's distance, near, rid)."""
        self._check(e, hops)
        anchor = self._anchor(e)
        inner = np.concatenate([np.array([e], dtype=np.int64)]
                               + [self._layer(anchor, h).astype(np.int64) for h in range(1, hops)])
        idx, lens = csr_entries(self._indptr, inner)
        first = np.sort(np.unique(self._rid[idx], return_index=True)[1])  # each relationship from its nearer end: the inner entities are in distance order
        return self._rid[idx[first]], np.repeat(inner, lens)[first], self._nbr[idx[first]].astype(np.int64)

    def distances_within(self, e: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, hops) of every entity at distance 1..max_hops from e, ordered by hop then id."""
        self._check_entity(e)
        anchor = self._anchor(e)
        layers = [self._layer(anchor, h) for h in range(1, self.max_hops + 1)]
        hops = np.repeat(np.arange(1, self.max_hops + 1, dtype=np.int8), [layer.size for layer in layers])
        return np.concatenate(layers).astype(np.int32, copy=False), hops

    def show(self, e: int, hop: int | None = None, t: int | None = None) -> dict:
        """JSON-able view: per hop {type name: count}, one hop's counts, or the members of (hop, t)."""
        e = int(e)
        if hop is None:
            if t is not None:
                raise ValueError("show: a type needs a hop")
            self._check_entity(e)
            hops = {str(h): self._named(self.type_counts(e, h)) for h in range(1, self.max_hops + 1)}
            return {"entity": e, "hops": hops}
        if t is None:
            return {"entity": e, "hop": hop, "types": self._named(self.type_counts(e, hop))}
        found = self.members(e, hop, t)
        name = self.type_names[t]
        return {"entity": e, "hop": hop, "type": name, "count": int(found.size), "members": found.tolist()}

    def _named(self, counts: dict[int, int]) -> dict[str, int]:
        """Counts keyed by type name, largest first."""
        return {self.type_names[t]: c for t, c in sorted(counts.items(), key=lambda item: (-item[1], item[0]))}

    def _check_entity(self, e: int) -> None:
        """Raise ValueError unless e is an entity id."""
        if not 0 <= e < self.num_entities:
            raise ValueError(f"entity {e} is outside 0..{self.num_entities - 1}")

    def _check(self, e: int, hop: int, t: int | None = None) -> None:
        """Raise ValueError unless e, hop (1..max_hops) and t are in range."""
        self._check_entity(e)
        if not 1 <= hop <= self.max_hops:
            raise ValueError(f"hop {hop} is outside 1..{self.max_hops}")
        if t is not None and not 0 <= t < len(self.type_names):
            raise ValueError(f"type {t} is outside 0..{len(self.type_names) - 1}")

    def _frontier(self, frontier: np.ndarray) -> np.ndarray:
        """The frontier as a sorted, distinct int32 array of entity ids; ValueError if it holds anything else."""
        front = np.asarray(frontier)
        if front.ndim == 0:
            front = front.reshape(1)
        if front.ndim != 1 or (front.size and not np.issubdtype(front.dtype, np.integer)):
            raise ValueError("frontier must be a 1-d array of entity ids")
        if front.size and (front.min() < 0 or front.max() >= self.num_entities):
            raise ValueError(f"frontier holds entity ids outside 0..{self.num_entities - 1}")
        front = front.astype(np.int32, copy=False)
        if front.size > 1 and not np.all(front[1:] > front[:-1]):
            front = np.unique(front)
        return front

    def _isin_sorted(self, values: np.ndarray, sets: list[np.ndarray]) -> np.ndarray:
        """Whether each value is in one of the sorted, disjoint entity sets."""
        total = sum(s.size for s in sets)
        if values.size * 8 < total:
            # Few candidates against large sets: binary search costs less than marking the sets.
            hit = np.zeros(values.size, dtype=bool)
            for targets in sets:
                if targets.size:
                    pos = np.minimum(np.searchsorted(targets, values), targets.size - 1)
                    hit |= targets[pos] == values
            return hit
        mark = self._scratch()
        for targets in sets:
            mark[targets] = 1
        hit = mark[values] == 1
        for targets in sets:
            mark[targets] = 0
        return hit

    def _scratch(self) -> np.ndarray:
        """The shared all-zero uint8 mark array, allocated on first use."""
        if self._mark is None:
            self._mark = np.zeros(self.num_entities, dtype=np.uint8)
        return self._mark

    def _anchor(self, e: int) -> _Anchor:
        """The cached BFS state of e, evicting the least recently used anchor when full."""
        e = int(e)
        anchor = self._cache.get(e)
        if anchor is None:
            anchor = self._cache[e] = _Anchor(e)
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(e)
        return anchor

    def _layer(self, anchor: _Anchor, hop: int) -> np.ndarray:
        """Layer `hop` of the anchor, extending its BFS one layer at a time as needed."""
        layers = anchor.layers
        while len(layers) <= hop:
            prev = layers[-2] if len(layers) > 1 else _EMPTY
            layers.append(self._expand(prev, layers[-1]))
        return layers[hop]

    def _expand(self, prev: np.ndarray, cur: np.ndarray) -> np.ndarray:
        """The next BFS layer after `cur` (whose predecessor layer is `prev`)."""
        if cur.size == 0:
            return _EMPTY
        # In an undirected graph the neighbours of layer h lie in layers h-1, h and h+1, so marking the two
        # known layers is enough to keep only new entities; only touched entries are reset afterwards.
        mark = self._scratch()
        mark[prev] = 1
        mark[cur] = 1
        if cur.size == 1:
            lo, hi = self._indptr[cur[0]], self._indptr[cur[0] + 1]
            cand = self._nbr[lo:hi]
        else:
            cand = self._nbr[csr_entries(self._indptr, cur)[0]]
        cand = cand[mark[cand] == 0]
        if cand.size > self._dense_cutoff:
            mark[cand] = 2
            nxt = np.flatnonzero(mark == 2).astype(np.int32)
            mark[nxt] = 0
        else:
            nxt = np.unique(cand)
        mark[prev] = 0
        mark[cur] = 0
        nxt.flags.writeable = False
        return nxt


def reference_adjacency(num_entities: int, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """Plain Python undirected adjacency lists, for reference_bfs."""
    adjacency: list[list[int]] = [[] for _ in range(num_entities)]
    for a, b in zip(np.asarray(src).tolist(), np.asarray(dst).tolist()):
        adjacency[a].append(b)
        adjacency[b].append(a)
    return adjacency


def reference_bfs(
    num_entities: int,
    src: np.ndarray,
    dst: np.ndarray,
    e: int,
    max_hops: int,
    adjacency: list[list[int]] | None = None,
) -> dict[int, int]:
    """Plain Python BFS: {entity: shortest undirected hop distance} for distances 0..max_hops from e."""
    if adjacency is None:
        adjacency = reference_adjacency(num_entities, src, dst)
    dist = {e: 0}
    queue = deque([e])
    while queue:
        u = queue.popleft()
        if dist[u] == max_hops:
            continue
        for v in adjacency[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist
