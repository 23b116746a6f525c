"""Run a method over many questions: progress, concurrency, resumable records in DuckDB and JSONL."""

from __future__ import annotations

import importlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Iterator

from kgr.errors import KgrError
from kgr.methods.base import Method, Query, RunContext
from kgr.methods.records import RetrievalRecord, write_jsonl

METHODS = {
    "dotrag": "kgr.methods.dotrag:DotRAG",
    "csrag": "kgr.methods.csrag:CSRAG",
    "bm25": "kgr.methods.baselines:BM25",
    "vss": "kgr.methods.baselines:VSS",
}

_RECORDS_DDL = """
CREATE TABLE IF NOT EXISTS records (
    run VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    record JSON NOT NULL,
    PRIMARY KEY (run, id)
)
"""


_PLANS_DDL = """
CREATE TABLE IF NOT EXISTS plans (
    method VARCHAR NOT NULL,
    key VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    question VARCHAR NOT NULL,
    plan JSON NOT NULL,
    PRIMARY KEY (method, key, id)
)
"""


def open_run(project, method_name: str, *, stage: str = "retrieve", use_cache: bool = True) -> RunContext:
    """Check the stages a method needs, load the graph into memory, and return the run context."""
    from kgr.store import GraphStore

    cls = method_class(method_name)
    project.require("ingest")
    if cls.needs_reach:
        project.require("reach")
    store = GraphStore(project)
    store.warm()
    return RunContext(project, project.config, store, stage, use_cache=use_cache)


# The settings a stored plan depends on; search and budget settings can change without replanning.
PLANNING_SETTINGS = {
    "dotrag": ("seeds", "anchors", "previews", "trajectories_per_anchor", "trajectories", "use_overview",
               "use_previews", "max_hops", "hedge_trajectories"),
    "csrag": ("variants", "anchor_matches"),
}
# Whole config sections a method's plans depend on: DotRAG's offline policy ranks trajectories (or is the fallback).
PLANNING_SECTIONS = {"dotrag": ("offline",)}


def plan_key(context: RunContext, method_name: str) -> str:
    """What stored plans depend on: the backbone, the planning settings and the graph they were made on."""
    from kgr.project import fingerprint

    section = context.config.section(method_name)
    settings = {name: section[name] for name in PLANNING_SETTINGS.get(method_name, ()) if name in section}
    settings.update({name: context.config.section(name) for name in PLANNING_SECTIONS.get(method_name, ())})
    settings["plan_version"] = getattr(method_class(method_name), "plan_version", 1)
    return fingerprint([context.backbone, settings, context.project.upstream_ids("plan")])


def run_plans(context: RunContext, method_name: str, queries: list[Query], *, fresh: bool = False,
              progress: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Plan every query not planned yet under the current key; return (planned now, already planned)."""
    cls = method_class(method_name)
    if not hasattr(cls, "plan"):
        raise KgrError(f"method {method_name} has no planning stage")
    db = context.project.db
    db.execute(_PLANS_DDL)
    key = plan_key(context, method_name)
    if fresh:
        db.execute("DELETE FROM plans WHERE method = ? AND key = ?", [method_name, key])
    done = {r[0] for r in db.execute("SELECT id FROM plans WHERE method = ? AND key = ?", [method_name, key]).fetchall()}
    method = cls(context)
    count = 0
    for query in queries:
        if query.id in done:
            continue
        plan = method.plan(query)
        plan["usage"] = context.usage(query.id)
        db.execute("INSERT OR REPLACE INTO plans VALUES (?, ?, ?, ?, ?)",
                   [method_name, key, query.id, query.text, json.dumps(plan, default=str)])
        count += 1
        if progress:
            progress(1)
    return count, len(done)


def stored_plans(context: RunContext, method_name: str) -> dict[str, dict]:
    """Plans made under the current key, by question id (empty when none were stored)."""
    if not context.project.has_table("plans"):
        return {}
    rows = context.project.db.execute("SELECT id, plan FROM plans WHERE method = ? AND key = ?",
                                      [method_name, plan_key(context, method_name)]).fetchall()
    return {qid: json.loads(plan) for qid, plan in rows}


def method_class(name: str) -> type[Method]:
    """The class implementing a method name."""
    if name not in METHODS:
        raise KgrError(f"unknown method {name!r} (choose from {', '.join(METHODS)})")
    module, _, attribute = METHODS[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def default_run_name(method: str, backbone: str) -> str:
    return f"{method}-{backbone.replace('/', '_')}"


def finished_ids(context: RunContext, run: str) -> set[str]:
    db = context.project.db
    db.execute(_RECORDS_DDL)
    return {row[0] for row in db.execute("SELECT id FROM records WHERE run = ?", [run]).fetchall()}


def load_records(context_or_db, run: str) -> list[dict]:
    """The stored records of a run, in question-id order."""
    db = getattr(getattr(context_or_db, "project", None), "db", context_or_db)
    rows = db.execute("SELECT record FROM records WHERE run = ? ORDER BY id", [run]).fetchall()
    return [json.loads(row[0]) for row in rows]


def run_method(
    context: RunContext,
    method_name: str,
    queries: list[Query],
    *,
    run: str | None = None,
    resume: bool = True,
    workers: int = 1,
    progress: Callable[[int], None] | None = None,
    on_record: Callable[[RetrievalRecord], None] | None = None,
) -> tuple[str, int, int]:
    """Retrieve for every query not yet in the run; return (run name, done now, skipped as already done)."""
    run = run or default_run_name(method_name, context.backbone)
    db = context.project.db
    if not resume:
        db.execute(_RECORDS_DDL)
        db.execute("DELETE FROM records WHERE run = ?", [run])
    done = finished_ids(context, run)
    todo = [q for q in queries if q.id not in done]
    cls = method_class(method_name)
    plans = stored_plans(context, method_name) if hasattr(cls, "plan") else {}
    count = 0
    for record in _retrieve_all(context, cls, todo, workers, plans):
        db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)", [run, record.id, record.method,
                                                                        record.to_json()])
        count += 1
        if on_record:
            on_record(record)
        if progress:
            progress(1)
    return run, count, len(queries) - len(todo)


def _retrieve(method: Method, query: Query, plans: dict[str, dict]) -> RetrievalRecord:
    """One record; a stored plan's backbone usage is added to what retrieval itself spent."""
    plan = plans.get(query.id)
    if plan is None:
        return method.retrieve(query)
    record = method.retrieve(query, plan=plan)
    for name, value in plan.get("usage", {}).items():
        setattr(record, name, getattr(record, name) + value)
    return record


def _retrieve_all(context: RunContext, cls: type[Method], queries: list[Query], workers: int,
                  plans: dict[str, dict]) -> Iterator[RetrievalRecord]:
    """Records in input order; threads only help when a remote backbone dominates the time."""
    if workers <= 1 or len(queries) <= 1:
        method = cls(context)
        for query in queries:
            yield _retrieve(method, query, plans)
        return
    import threading

    local = threading.local()

    def work(query: Query) -> RetrievalRecord:
        if not hasattr(local, "method"):
            local.method = cls(context)  # per thread: a method keeps scratch state (e.g. the map's BFS arrays)
        return _retrieve(local.method, query, plans)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(work, queries)


def export_jsonl(context: RunContext, run: str, path: Path, ids: Iterable[str] | None = None) -> int:
    """Write a run's records (optionally only some ids) to a JSONL file."""
    wanted = set(ids) if ids is not None else None
    rows = [r for r in load_records(context, run) if wanted is None or r["id"] in wanted]
    return write_jsonl(path, (RetrievalRecord(**r) for r in rows))
