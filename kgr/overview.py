"""The `kgr overview` stage: a global picture of the graph, one summary per entity type plus a synthesis.

With an LLM backbone this costs |T| + 1 calls whatever the graph's size (samples are fixed per type). With the
offline policy the overview is extractive: counts, relation patterns per type and sampled example entities.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from kgr.console import counted
from kgr.project import Project
from kgr.schema import type_schema
from kgr.store import GraphStore

STAGE = "overview"
_DDL = "CREATE OR REPLACE TABLE overview (kind VARCHAR, name VARCHAR, text VARCHAR, source VARCHAR)"


@dataclass
class TypeProfile:
    """What the graph says about one entity type."""

    name: str
    count: int
    relations: list[tuple[str, str, int]]  # (relation, other type, relationships), most frequent first
    examples: list[str]


def profile_types(store: GraphStore, samples: int, seed: int) -> list[TypeProfile]:
    """Counts, relation patterns and seeded example entities for every type."""
    schema = type_schema(store, share=0.1)
    per_relation = Counter(store.relation_ids.tolist())
    profiles = []
    rng = random.Random(seed)
    members: dict[int, list[int]] = {}
    owners = np.repeat(np.arange(store.num_entities), np.diff(store.type_indptr))
    for eid, type_id in zip(owners.tolist(), store.type_ids.tolist()):
        members.setdefault(type_id, []).append(eid)
    for type_id, name in enumerate(store.type_names):
        eids = members.get(type_id, [])
        picked = sorted(rng.sample(eids, min(samples, len(eids))))
        relations = [(r, other, per_relation[store.relation_labels.index(r)]) for r, other in schema.get(name, [])]
        profiles.append(TypeProfile(name, len(eids), relations[:12], [_example(store, e) for e in picked]))
    return profiles


def _example(store: GraphStore, eid: int) -> str:
    description = store.descriptions[eid]
    return f"{store.names[eid]}: {description[:160]}" if description else store.names[eid]


def extractive_summary(profile: TypeProfile) -> str:
    """A type's summary built from the graph alone (the overview lists it under the type's name)."""
    relations = "; ".join(f"{r} -> {other}" for r, other, _ in profile.relations) or "none"
    examples = ", ".join(profile.examples) or "none"
    return f"{counted(profile.count, 'entity')}. Linked by: {relations}. Examples: {examples}."


def run_overview(project: Project, *, force: bool = False, use_cache: bool = True,
                 progress=None) -> dict | None:
    """Summarize every type, then the graph; store them. None when already current."""
    from kgr.backbone.decide import complete_text
    from kgr.methods.base import RunContext

    started = time.time()
    upstream = project.check_inputs(STAGE)
    if not force and project.is_current(STAGE, upstream["ingest"]):
        return None
    store = GraphStore(project)
    context = RunContext(project, project.config, store, STAGE, use_cache=use_cache)
    client = context.client  # None for the offline and random policies: extractive overview
    settings = project.config.overview
    profiles = profile_types(store, settings.samples_per_type, settings.seed)
    advance = progress("summarizing types", len(profiles) + 1) if progress else None
    rows = []
    for profile in profiles:
        decision = complete_text(
            client, "overview_type",
            {"type": profile.name, "count": profile.count, "examples": "\n".join(profile.examples),
             "relations": "\n".join(f"{r} -> {o} ({counted(n, 'relationship')})"
                                     for r, o, n in profile.relations)},
            purpose="overview_type", stage=STAGE, fallback=lambda p=profile: extractive_summary(p),
        )
        rows.append(("type", profile.name, decision.value, decision.source))
        if advance:
            advance(1)
    labels = counted(len(store.relation_labels), "relation label")
    counts = (f"{counted(store.num_entities, 'entity')} of {counted(len(store.type_names), 'type')}, "
              f"{counted(len(store.src), 'relationship')} with {labels}.")
    summaries = "\n".join(f"- {name}: {text}" for _, name, text, _ in rows)
    graph = complete_text(client, "overview_graph", {"counts": counts, "summaries": summaries},
                          purpose="overview_graph", stage=STAGE,
                          fallback=lambda: f"{counts}\nEntity types:\n{summaries}")
    rows.append(("graph", "", graph.value, graph.source))
    if advance:
        advance(1)
    with project.transaction() as db:
        db.execute(_DDL)
        db.executemany("INSERT INTO overview VALUES (?, ?, ?, ?)", rows)
        calls = client.log.total.calls if client else 0
        project.record_stage(STAGE, started=started, input_fingerprint=upstream["ingest"], upstream=upstream,
                             counts={"types": len(profiles), "llm_calls": calls,
                                     "backbone": context.backbone})
    return {"types": len(profiles), "llm_calls": calls, "text": graph.value}


def read_overview(project: Project) -> str:
    """The stored graph overview."""
    project.require(STAGE)
    row = project.db.execute("SELECT text FROM overview WHERE kind = 'graph'").fetchone()
    return row[0] if row else ""
