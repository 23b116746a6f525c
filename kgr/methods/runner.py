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
    count = 0
    for record in _retrieve_all(context, cls, todo, workers):
        db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)", [run, record.id, record.method,
                                                                        record.to_json()])
        count += 1
        if on_record:
            on_record(record)
        if progress:
            progress(1)
    return run, count, len(queries) - len(todo)


def _retrieve_all(context: RunContext, cls: type[Method], queries: list[Query], workers: int
                  ) -> Iterator[RetrievalRecord]:
    """Records in completion order; threads only help when a remote backbone dominates the time."""
    if workers <= 1 or len(queries) <= 1:
        method = cls(context)
        for query in queries:
            yield method.retrieve(query)
        return
    import threading

    local = threading.local()

    def work(query: Query) -> RetrievalRecord:
        if not hasattr(local, "method"):
            local.method = cls(context)  # per thread: a method keeps scratch state (e.g. the map's BFS arrays)
        return local.method.retrieve(query)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(work, queries)


def export_jsonl(context: RunContext, run: str, path: Path, ids: Iterable[str] | None = None) -> int:
    """Write a run's records (optionally only some ids) to a JSONL file."""
    wanted = set(ids) if ids is not None else None
    rows = [r for r in load_records(context, run) if wanted is None or r["id"] in wanted]
    return write_jsonl(path, (RetrievalRecord(**r) for r in rows))
