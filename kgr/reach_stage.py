"""The `kgr reach` stage: build the reachability map from the ingested graph into a new generation."""

from __future__ import annotations

import time
from typing import Callable

from kgr.errors import KgrError
from kgr.project import REACH_DIR, Project
from kgr.reach import ReachMap, ReachStats, build_reach
from kgr.store import GraphStore


def run_reach(project: Project, *, force: bool = False, progress: Callable[[str, float], None] | None = None,
              store: GraphStore | None = None) -> ReachStats | None:
    """Build and commit the map; None when it is already current for this graph and max hop count."""
    started = time.time()
    upstream = project.check_inputs("reach")
    input_fp = upstream["ingest"]
    if not force and project.is_current("reach", input_fp):
        return None
    store = store or GraphStore(project)
    gen = project.new_generation(REACH_DIR)
    stats = build_reach(
        gen, store.num_entities, store.src, store.dst, store.type_indptr, store.type_ids, store.type_names,
        max_hops=project.config.reach.max_hops, progress=progress,
    )
    with project.transaction():
        project.record_stage("reach", started=started, input_fingerprint=input_fp, upstream=upstream,
                             counts=stats.to_dict(), artifacts={"map": gen})
    project.prune_generations(REACH_DIR, keep=gen)
    return stats


def open_reach(project: Project) -> ReachMap:
    """The current map, refusing a missing or stale one."""
    return ReachMap.open(project.artifact("reach", "map"))


def resolve_entity(store: GraphStore, text: str) -> int:
    """An entity id from a name (exact, then case-insensitive) or a `#eid`."""
    if text.startswith("#") and text[1:].isdigit() and int(text[1:]) < store.num_entities:
        return int(text[1:])
    chosen = store.find(text)
    if not chosen:
        raise KgrError(f"no entity named {text!r}")
    return chosen[0]
