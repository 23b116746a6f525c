"""Damaged copies of an ingested project for the CS-RAG robustness protocol (`kgr perturb`).

Two damage modes, each applied to a ratio rho of the *in-scope* relationships:

- ``noise`` (spurious noise): each chosen relationship is corrupted by one operation, drawn uniformly among those
  that apply to it:
  ``rebind``     replace the subject or the object (side drawn 50/50) by a random other entity sharing at least one
                 type with the replaced one ("type-compatible"); when there is none, by any entity. The new entity is
                 never the replaced one or the other endpoint, and never recreates a triple already in the graph.
  ``flip``       replace the label by another label seen in the graph (uniformly; needs two or more labels).
  ``generalize`` replace the label by the generic ``GENERIC_LABEL`` ("related to"; not if already that label).
  A changed relationship gets a fresh `kgr.graph.default_description` of its new triple.
- ``incomplete`` (incomplete information): the chosen relationships are dropped. Bridge edges are taken first:
  k = the number to drop; when k <= |bridges|, k bridges are drawn uniformly, otherwise every bridge is dropped plus
  k - |bridges| non-bridge in-scope relationships drawn uniformly.

Scope, over the undirected graph with A = the anchor entities (every entity whose normalized name equals a
given anchor name) and N1 = the entities adjacent to A:

- ``query``: relationships with at least one endpoint in A or N1, i.e. exactly those on some path of at most two hops
  starting at an anchor.
- ``whole``: every relationship.

Bridge edges: with anchors, a relationship is a bridge when it lies on a simple two-hop path a - m - x starting at an
anchor a (a, m, x three distinct entities, the two edges distinct): the anchor's edge a - m when m leads on to some
x, and m's onward edge m - x. Without anchors (``whole`` scope, none given) every entity counts as an anchor, so a
bridge is any non-loop edge (u, v) where u or v has a neighbour other than u and v. Anchors given with the
``whole`` scope do not narrow the scope but do select the bridges.

Counts: k = floor(rho * n + 0.5) of the n in-scope relationships, at least 1 when n > 0. Everything is drawn from
one `numpy.random.default_rng(seed)` in a fixed order (selection, then each chosen rid ascending), so the same
source, parameters and seed give the identical damaged graph.

The target is a new project directory: the source's kgr.toml, the graph tables (entities, passages and their links
unchanged; relationships re-numbered densely after drops), vectors re-embedded with the same model reusing the
source's current vectors by text hash (only changed relationship descriptions are encoded), an ``ingest`` manifest
entry whose counts carry the perturbation parameters and ``perturbed_from``, and a ``perturbation`` table with one
row per affected original rid.
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from kgr.config import CONFIG_FILE
from kgr.embed import Encoder, project_encoder
from kgr.errors import KgrError
from kgr.graph import Entity, Graph, Passage, Relationship, default_description
from kgr.ingest.stage import ProgressFactory, graph_tables, store_graph
from kgr.project import Project, fingerprint

MODES = ("noise", "incomplete")
SCOPES = ("query", "whole")
OPERATIONS = ("rebind", "flip", "generalize")  # noise operations, in draw order
DROP = "drop"
GENERIC_LABEL = "related to"
_REBIND_TRIES = 32


@dataclass
class PerturbReport:
    """What a perturbation did: parameters, scope size, affected relationships by operation, target counts, timings."""

    mode: str
    scope: str
    ratio: float
    seed: int
    in_scope: int
    affected: int
    by_operation: dict[str, int]
    bridges: int = 0
    anchors_matched: int = 0
    anchors_missing: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    encoded: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Change:
    """One affected relationship (original rid); the new fields are None for a dropped one."""

    rid: int
    operation: str
    detail: str = ""
    new_src: int | None = None
    new_relation: str | None = None
    new_dst: int | None = None


@dataclass
class Plan:
    """The damage to apply, computed from the source arrays alone."""

    in_scope: np.ndarray  # sorted original rids
    bridges: np.ndarray  # sorted original rids (subset of in_scope)
    changes: list[Change]

    def by_operation(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for change in self.changes:
            counts[change.operation] = counts.get(change.operation, 0) + 1
        return dict(sorted(counts.items()))


# -- pure planning on arrays ---------------------------------------------------------------------------------------
def _incidence(n: int, src: np.ndarray, dst: np.ndarray):
    """Undirected CSR incidence: for entity e, others[indptr[e]:indptr[e+1]] via rids[...] (a self-loop once)."""
    rid = np.arange(src.size, dtype=np.int64)
    loop = src == dst
    ends = np.concatenate([src, dst[~loop]]).astype(np.int64)
    others = np.concatenate([dst, src[~loop]]).astype(np.int64)
    rids = np.concatenate([rid, rid[~loop]])
    order = np.argsort(ends, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=n), out=indptr[1:])
    return indptr, others[order], rids[order]


def scope_rids(n: int, src: np.ndarray, dst: np.ndarray, anchors: np.ndarray | None) -> np.ndarray:
    """In-scope rids: all of them without anchors, else those with an endpoint in the anchors or their neighbours."""
    if anchors is None:
        return np.arange(src.size, dtype=np.int64)
    near = np.zeros(n, dtype=bool)
    near[anchors] = True
    touching = near[src] | near[dst]
    near[src[touching]] = True
    near[dst[touching]] = True
    return np.flatnonzero(near[src] | near[dst]).astype(np.int64)


def bridge_rids(n: int, src: np.ndarray, dst: np.ndarray, anchors: np.ndarray | None) -> np.ndarray:
    """Rids on simple two-hop paths starting at an anchor (at any entity when `anchors` is None)."""
    if src.size == 0:
        return np.zeros(0, dtype=np.int64)
    if anchors is None:
        pairs = np.unique(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])], axis=1), axis=0)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        distinct = np.bincount(pairs[:, 0], minlength=n)
        bridge = (src != dst) & ((distinct[src] >= 2) | (distinct[dst] >= 2))
        return np.flatnonzero(bridge).astype(np.int64)
    indptr, others, rids = _incidence(n, src, dst)
    mark = np.zeros(src.size, dtype=bool)
    for a in np.unique(anchors).tolist():
        for m, e1 in zip(others[indptr[a]:indptr[a + 1]].tolist(), rids[indptr[a]:indptr[a + 1]].tolist()):
            if m == a:
                continue
            x = others[indptr[m]:indptr[m + 1]]
            e2 = rids[indptr[m]:indptr[m + 1]]
            onward = (e2 != e1) & (x != m) & (x != a)
            if onward.any():
                mark[e1] = True
                mark[e2[onward]] = True
    return np.flatnonzero(mark).astype(np.int64)


def affected_count(ratio: float, n: int) -> int:
    """floor(ratio * n + 0.5), at least 1 when there is anything in scope."""
    return 0 if n == 0 else min(n, max(1, math.floor(ratio * n + 0.5)))


def plan_perturbation(
    n_entities: int,
    src: np.ndarray,
    dst: np.ndarray,
    relations: Sequence[str],
    entity_types: Sequence[Sequence[str]],
    *,
    mode: str,
    ratio: float,
    seed: int,
    anchors: np.ndarray | None,
    query_scope: bool,
) -> Plan:
    """Choose the affected relationships and what happens to each (see the module docstring for the rules)."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    rng = np.random.default_rng(seed)
    in_scope = scope_rids(n_entities, src, dst, anchors if query_scope else None)
    k = affected_count(ratio, in_scope.size)
    if mode == "incomplete":
        bridges = np.intersect1d(bridge_rids(n_entities, src, dst, anchors), in_scope)
        if k <= bridges.size:
            chosen = rng.choice(bridges, size=k, replace=False) if k else bridges[:0]
        else:
            rest = np.setdiff1d(in_scope, bridges)
            chosen = np.concatenate([bridges, rng.choice(rest, size=k - bridges.size, replace=False)])
        changes = [Change(int(rid), DROP) for rid in np.sort(chosen).tolist()]
        return Plan(in_scope, bridges, changes)
    chosen = np.sort(rng.choice(in_scope, size=k, replace=False)) if k else in_scope[:0]
    corrupter = _Corrupter(n_entities, src, dst, relations, entity_types, rng)
    changes = [corrupter.corrupt(int(rid)) for rid in chosen.tolist()]
    return Plan(in_scope, np.zeros(0, dtype=np.int64), changes)


class _Corrupter:
    """Draws one noise operation per relationship, consuming the shared generator in a fixed order."""

    def __init__(self, n, src, dst, relations, entity_types, rng: np.random.Generator):
        self.n = n
        self.src, self.dst, self.relations = src, dst, list(relations)
        self.rng = rng
        self.labels = sorted(set(self.relations))
        self.triples = set(zip(src.tolist(), self.relations, dst.tolist()))
        self.types = [tuple(sorted(set(ts))) for ts in entity_types]
        members: dict[str, list[int]] = {}
        for eid, ts in enumerate(self.types):
            for t in ts:
                members.setdefault(t, []).append(eid)
        self.members = {t: np.asarray(eids, dtype=np.int64) for t, eids in members.items()}
        self._pools: dict[tuple[str, ...], np.ndarray] = {}

    def corrupt(self, rid: int) -> Change:
        relation = self.relations[rid]
        ops = [op for op in OPERATIONS if self._may(op, relation)]
        while ops:
            op = ops[int(self.rng.integers(len(ops)))]
            change = getattr(self, f"_{op}")(rid)
            if change is not None:
                return change
            ops.remove(op)
        raise KgrError(f"cannot corrupt relationship {rid}: no other entity or label to use")

    def _may(self, op: str, relation: str) -> bool:
        if op == "rebind":
            return self.n >= 3
        if op == "flip":
            return len(self.labels) >= 2
        return relation != GENERIC_LABEL

    def _flip(self, rid: int) -> Change:
        others = [label for label in self.labels if label != self.relations[rid]]
        label = others[int(self.rng.integers(len(others)))]
        return Change(rid, "flip", "", int(self.src[rid]), label, int(self.dst[rid]))

    def _generalize(self, rid: int) -> Change:
        return Change(rid, "generalize", "", int(self.src[rid]), GENERIC_LABEL, int(self.dst[rid]))

    def _rebind(self, rid: int) -> Change | None:
        side = "subject" if self.rng.random() < 0.5 else "object"
        s, d, relation = int(self.src[rid]), int(self.dst[rid]), self.relations[rid]
        old, fixed = (s, d) if side == "subject" else (d, s)

        def ok(candidate: int) -> bool:
            if candidate in (old, fixed):
                return False
            triple = (candidate, relation, d) if side == "subject" else (s, relation, candidate)
            return triple not in self.triples

        for kind, pool in (("type-compatible", self._pool(self.types[old])), ("any entity", None)):
            size = self.n if pool is None else pool.size
            if size == 0:
                continue
            for _ in range(_REBIND_TRIES):
                index = int(self.rng.integers(size))
                candidate = index if pool is None else int(pool[index])
                if ok(candidate):
                    break
            else:
                everything = np.arange(self.n, dtype=np.int64) if pool is None else pool
                valid = [c for c in everything.tolist() if ok(c)]
                if not valid:
                    continue
                candidate = valid[int(self.rng.integers(len(valid)))]
            new_s, new_d = (candidate, d) if side == "subject" else (s, candidate)
            return Change(rid, "rebind", f"{side}; {kind}", new_s, relation, new_d)
        return None

    def _pool(self, types: tuple[str, ...]) -> np.ndarray:
        if types not in self._pools:
            parts = [self.members[t] for t in types]
            self._pools[types] = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
        return self._pools[types]


# -- the project-level operation -----------------------------------------------------------------------------------
@dataclass
class _SourceGraph:
    keys: list[str]
    names: list[str]
    descriptions: list[str]
    texts: list[str]
    types: list[list[str]]
    src: np.ndarray
    dst: np.ndarray
    relations: list[str]
    rel_descriptions: list[str]
    passages: list[tuple[str, str, str]]
    links: list[tuple[int, int]]
    # provenance: the passages each relationship / entity was extracted from (empty lists when none is recorded)
    edge_sources: list[list[int]]
    entity_sources: list[list[int]]


def _read_source(project: Project) -> _SourceGraph:
    db = project.db
    entities = db.execute("SELECT eid, key, name, description, text FROM entities ORDER BY eid").fetchall()
    if [row[0] for row in entities] != list(range(len(entities))):
        raise KgrError(f"{project.root}: entity ids are not dense; re-ingest the project")
    types: list[list[str]] = [[] for _ in entities]
    for eid, type_name in db.execute("SELECT eid, type FROM entity_types").fetchall():
        types[eid].append(type_name)
    rels = db.execute("SELECT src, dst, relation, description FROM relationships ORDER BY rid").fetchall()
    passages = db.execute("SELECT key, title, text FROM passages ORDER BY pid").fetchall()
    links = db.execute("SELECT eid, pid FROM entity_passages").fetchall()
    edge_sources: list[list[int]] = [[] for _ in rels]
    entity_sources: list[list[int]] = [[] for _ in entities]
    for table, column, sources in (("relationship_passages", "rid", edge_sources),
                                   ("entity_source_passages", "eid", entity_sources)):
        if project.has_table(table):
            for index, pid in db.execute(f"SELECT {column}, pid FROM {table} ORDER BY rowid").fetchall():
                sources[index].append(pid)
    return _SourceGraph(
        keys=[r[1] for r in entities], names=[r[2] for r in entities], descriptions=[r[3] for r in entities],
        texts=[r[4] for r in entities], types=types,
        src=np.asarray([r[0] for r in rels], dtype=np.int64), dst=np.asarray([r[1] for r in rels], dtype=np.int64),
        relations=[r[2] for r in rels], rel_descriptions=[r[3] for r in rels],
        passages=[tuple(p) for p in passages], links=[tuple(link) for link in links],
        edge_sources=edge_sources, entity_sources=entity_sources,
    )


def resolve_anchors(names: Sequence[str], anchors: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Entity ids whose normalized name equals an anchor's (all of them when names repeat), and unmatched anchors."""
    from kgr.graph import normalize_name

    index: dict[str, list[int]] = {}
    for eid, name in enumerate(names):
        index.setdefault(normalize_name(name), []).append(eid)
    found: set[int] = set()
    missing: list[str] = []
    for anchor in dict.fromkeys(anchors):
        eids = index.get(normalize_name(anchor))
        if eids:
            found.update(eids)
        else:
            missing.append(anchor)
    return np.asarray(sorted(found), dtype=np.int64), missing


def _check_target(target: Path) -> bool:
    """Refuse an existing non-empty target; return whether the directory already existed."""
    if target.exists():
        if not target.is_dir():
            raise KgrError(f"{target}: exists and is not a directory")
        if any(target.iterdir()):
            raise KgrError(f"{target}: exists and is not empty; perturb writes a new project")
        return True
    return False


def perturb_project(
    source: Project,
    target_dir: Path,
    *,
    mode: str,
    ratio: float,
    scope: str,
    seed: int,
    anchors: list[str] | None = None,
    progress: ProgressFactory | None = None,
    encoder: Encoder | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> PerturbReport:
    """Write a damaged copy of `source` (opened to read) as a new project at `target_dir`; see the module docstring.

    `encoder` shares an already loaded model for re-embedding changed relationships (used when its model is the
    target's). `overrides` (the command's `--set`) apply to the target as to the source; its kgr.toml is the
    source's, unchanged.
    """
    started = time.time()
    if mode not in MODES:
        raise KgrError(f"unknown perturbation mode {mode!r} (expected one of {', '.join(MODES)})")
    if scope not in SCOPES:
        raise KgrError(f"unknown perturbation scope {scope!r} (expected one of {', '.join(SCOPES)})")
    if not (isinstance(ratio, (int, float)) and 0 < ratio <= 1):
        raise KgrError(f"perturbation ratio must be in (0, 1], got {ratio!r}")
    if scope == "query" and not anchors:
        raise KgrError("query-scoped perturbation needs anchor entity names (from the questions' `anchors`)")
    target_dir = Path(target_dir)
    if target_dir.resolve() == Path(source.root).resolve():
        raise KgrError(f"{target_dir}: the target must differ from the source project")
    existed = _check_target(target_dir)

    run = source.require("ingest")
    source_vectors = source.artifact("ingest", "vectors")
    graph = _read_source(source)
    n = len(graph.names)
    anchor_eids, missing = resolve_anchors(graph.names, anchors or [])
    if scope == "query" and anchor_eids.size == 0:
        raise KgrError(f"{source.root}: none of the {len(anchors or [])} anchor names matches an entity")
    plan = plan_perturbation(
        n, graph.src, graph.dst, graph.relations, graph.types, mode=mode, ratio=float(ratio), seed=int(seed),
        anchors=anchor_eids if anchor_eids.size else None, query_scope=scope == "query",
    )
    plan_s = time.time() - started

    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(source.root) / CONFIG_FILE, target_dir / CONFIG_FILE)
        with Project.open(target_dir, write=True, overrides=overrides) as target:
            perturbation = {
                "perturb_mode": mode, "perturb_scope": scope, "perturb_ratio": float(ratio), "perturb_seed": int(seed),
                "perturb_anchors": int(anchor_eids.size), "perturb_in_scope": int(plan.in_scope.size),
                "perturb_affected": len(plan.changes),
                **{f"perturb_{op}": count for op, count in plan.by_operation().items()},
                "perturbed_from": str(Path(source.root).resolve()),
                "perturbed_from_run": run.run_id,
            }
            input_fp = fingerprint([run.run_id, run.input_fingerprint, mode, float(ratio), scope, int(seed),
                                    sorted(set(anchors or []))])
            damaged, new_rid, links = _damaged_graph(graph, plan)
            tables = graph_tables(damaged, links)
            tables["entities"]["text"] = list(graph.texts)  # keep the source's embedded text exactly
            stored = store_graph(
                target, tables, started=started, input_fingerprint=input_fp, counts_extra=perturbation,
                extra_tables={"perturbation": (_perturbation_table(graph, plan, new_rid), _PERTURBATION_INTS)},
                reuse_dirs=[source_vectors],
                encoder=_encoder(target, run.counts.get("embedding_model"), run.counts.get("dimension"), encoder),
                progress=progress,
            )
    except BaseException:
        _remove_partial(target_dir, existed)
        raise
    return PerturbReport(
        mode=mode, scope=scope, ratio=float(ratio), seed=int(seed), in_scope=int(plan.in_scope.size),
        affected=len(plan.changes), by_operation=plan.by_operation(), bridges=int(plan.bridges.size),
        anchors_matched=int(anchor_eids.size), anchors_missing=missing, counts=stored.counts,
        encoded=stored.encoded, seconds={"plan": round(plan_s, 3), **stored.seconds},
    )


def _remove_partial(target: Path, existed: bool) -> None:
    if not target.exists():
        return
    if existed:
        for child in target.iterdir():
            shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
    else:
        shutil.rmtree(target, ignore_errors=True)


def _damaged_graph(graph: _SourceGraph, plan: Plan) -> tuple[Graph, list[int | None], list[tuple[str, int]]]:
    """The target Graph (entities keyed as in the source), each original rid's new rid, and passage links."""
    out = Graph()
    for key, name, types, description, sources in zip(graph.keys, graph.names, graph.types, graph.descriptions,
                                                      graph.entity_sources):
        out.entities[key] = Entity(key=key, name=name, types=list(types), description=description,
                                   sources=list(sources))
    changes = {change.rid: change for change in plan.changes}
    new_rid: list[int | None] = []
    for rid, (s, d, relation, description) in enumerate(
        zip(graph.src.tolist(), graph.dst.tolist(), graph.relations, graph.rel_descriptions)
    ):
        change = changes.get(rid)
        if change is not None and change.operation == DROP:
            new_rid.append(None)
            continue
        if change is not None:
            s, d, relation = change.new_src, change.new_dst, change.new_relation
            description = default_description(graph.names[s], relation, graph.names[d])
        new_rid.append(len(out.relationships))
        # a damaged edge keeps its passage: noise models an extractor that misread it
        out.relationships.append(Relationship(graph.keys[s], relation, graph.keys[d], description,
                                              list(graph.edge_sources[rid])))
    out.passages = [Passage(key=k, title=t, text=x) for k, t, x in graph.passages]
    links = [(graph.keys[eid], pid) for eid, pid in graph.links]
    return out, new_rid, links


def _perturbation_table(graph: _SourceGraph, plan: Plan, new_rid: list[int | None]) -> dict[str, list]:
    rows = plan.changes
    name = lambda eid: None if eid is None else graph.names[eid]  # noqa: E731
    return {
        "rid": [c.rid for c in rows],
        "new_rid": [new_rid[c.rid] for c in rows],
        "operation": [c.operation for c in rows],
        "detail": [c.detail for c in rows],
        "old_src": [int(graph.src[c.rid]) for c in rows],
        "old_relation": [graph.relations[c.rid] for c in rows],
        "old_dst": [int(graph.dst[c.rid]) for c in rows],
        "new_src": [c.new_src for c in rows],
        "new_relation": [c.new_relation for c in rows],
        "new_dst": [c.new_dst for c in rows],
        "old_subject": [graph.names[graph.src[c.rid]] for c in rows],
        "old_object": [graph.names[graph.dst[c.rid]] for c in rows],
        "new_subject": [name(c.new_src) for c in rows],
        "new_object": [name(c.new_dst) for c in rows],
    }


_PERTURBATION_INTS = {"rid", "new_rid", "old_src", "old_dst", "new_src", "new_dst"}


def _encoder(target: Project, source_model: str | None, source_dimension: int | None,
             shared: Encoder | None = None) -> Encoder:
    """The target's encoder: `shared` when it is the target's model; else, when the target uses the source's model,
    one whose dimension is known without loading the model."""
    embedding = target.config.embedding
    if shared is not None and shared.model_name == embedding.model and \
            (shared.backend, shared.quantize) == (embedding.backend, embedding.quantize):
        return shared
    if source_dimension and source_model == embedding.model:
        return _KnownDimensionEncoder(int(source_dimension), embedding.model, embedding.batch_size,
                                      embedding.threads, embedding.precision, embedding.backend, embedding.quantize)
    return project_encoder(target.config)


class _KnownDimensionEncoder(Encoder):
    """Loads the model only when something must actually be encoded (dropping edges encodes nothing)."""

    def __init__(self, dimension: int, model: str, batch_size: int, threads: int, precision: str,
                 backend: str = "torch", quantize: str = "none"):
        super().__init__(model, batch_size, threads, precision, backend, quantize)
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension
