"""Run a method over many questions: progress, concurrency, resumable records (stored by `kgr.methods.runs`) and
JSONL."""

from __future__ import annotations

import importlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from kgr.config import planning_sections, planning_settings
from kgr.errors import ExitStatus, KgrError, UsageError
from kgr.methods import METHODS, runs
from kgr.methods.base import Method, Query, RunContext
from kgr.methods.records import EMPTY_RESULT, RetrievalRecord, empty_result_warning, same_question


def open_run(project, method_name: str, *, stage: str = "retrieve", use_cache: bool = True) -> RunContext:
    """Check the stages a method needs, load the graph into memory, and return the run context."""
    from kgr.store import GraphStore

    cls = method_class(method_name)
    project.require("ingest")
    if cls.needs_reach:
        project.require("reach")
    store = GraphStore(project)
    if hasattr(cls, "check_store"):
        cls.check_store(project, store)  # refuse a project lacking what the method reads, before anything is written
    # the vector matrices the method reads (`held_matrices`; a method without it: every table's), loaded by the
    # context's warm-up (plan and retrieve are timed stages)
    matrices = cls.held_matrices(store) if hasattr(cls, "held_matrices") else None
    return RunContext(project, project.config, store, stage, use_cache=use_cache, matrices=matrices)


# The settings a stored plan depends on, by method: those marked in their field metadata in kgr.config (`PLAN` in the
# method's section; whole sections by their `plan` metadata). Search and budget settings can change without replanning.
PLANNING_SETTINGS = planning_settings()
PLANNING_SECTIONS = planning_sections()


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
    """Plan every query not planned yet under the current key; return (planned now, already planned).

    A stored plan counts only for the question it was made for: one stored under the same id for another
    question text (JSONL ids reused by another file) is replaced.
    """
    cls = method_class(method_name)
    if not hasattr(cls, "plan"):
        raise KgrError(f"method {method_name} has no planning stage")
    project = context.project
    key = plan_key(context, method_name)
    if fresh:
        runs.clear_plans(project, method_name, key)
    stored = runs.plan_questions(project, method_name, key)
    todo = [q for q in _distinct(queries) if not same_question(stored.get(q.id), q.text)]
    method = cls(context)
    for query in todo:
        plan = method.plan(query)
        plan["usage"] = context.usage(query.id)
        runs.save_plan(project, method_name, key, query.id, query.text, plan)
        if progress:
            progress(1)
    return len(todo), len(queries) - len(todo)


def stored_plans(context: RunContext, method_name: str, queries: Iterable[Query]) -> dict[str, dict]:
    """The plans made under the current key for these queries, by id (a plan of another question text is left out)."""
    stored = runs.load_plans(context.project, method_name, plan_key(context, method_name))
    return {q.id: stored[q.id][1] for q in queries if q.id in stored and same_question(stored[q.id][0], q.text)}


def method_class(name: str) -> type[Method]:
    """The class implementing a method name."""
    if name not in METHODS:
        raise UsageError(f"unknown method {name!r} (choose from {', '.join(METHODS)})")
    module, _, attribute = METHODS[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def default_run_name(method: str, backbone: str) -> str:
    return f"{method}-{backbone.replace('/', '_')}"


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
    out: Path | None = None,
    engine: str = "local",
) -> tuple[str, int, int]:
    """Retrieve for every query not yet in the run; return (run name, done now, skipped as already done).

    A stored record is reused only for the question text it was made for; a record stored under a query's id
    for another question raises RunConflictError before anything is written. With `out`, every query's record
    (reused or new) is written to that JSONL file in query order as it completes, one flushed line each. `engine`
    "ray" retrieves on Ray workers (`ray_runner`), `workers` of them; "local" in this process, `workers` threads.
    """
    if engine == "ray":
        check_ray_retrieval(context)  # before anything is written
    run = run or default_run_name(method_name, context.backbone)
    project = context.project
    queries = _distinct(queries)
    stored = _stored_questions(context, run, queries) if resume else {}
    cls = method_class(method_name)
    sink = _open_out(out) if out is not None else None
    if not resume:
        runs.clear_run(project, run)
    done = {q.id for q in queries if q.id in stored}
    todo = [q for q in queries if q.id not in done]
    if progress and done:
        progress(len(done))
    plans = stored_plans(context, method_name, todo) if hasattr(cls, "plan") else {}
    try:
        if engine == "ray":
            fresh_records = retrieve_on_ray(context, method_name, todo, plans, workers)
        else:
            fresh_records = _retrieve_all(context, cls, todo, workers, plans)
        for query in queries:
            if query.id in done:
                if sink:
                    _write_line(sink, runs.record_line(project, run, query.id))
                continue
            record = next(fresh_records)
            line = record.to_json()
            runs.save_record(project, run, record.id, record.method, line)
            if sink:
                _write_line(sink, line)
            if on_record:
                on_record(record)
            if progress:
                progress(1)
    finally:
        if sink:
            sink.close()
    return run, len(todo), len(done)


def check_resumable(context: RunContext, method_name: str, queries: list[Query], run: str | None = None) -> str:
    """Raise RunConflictError when the run holds a record of another question under a query's id; return the run."""
    run = run or default_run_name(method_name, context.backbone)
    _stored_questions(context, run, _distinct(queries))
    return run


def _stored_questions(context: RunContext, run: str, queries: list[Query]) -> dict[str, str]:
    """The question text of each record the run holds, by id; refuses a record of another question under a query's id."""
    stored = runs.record_questions(context.project, run)
    for query in queries:
        if query.id in stored and not same_question(stored[query.id], query.text):
            raise RunConflictError(
                f"run {run!r} holds a record {query.id!r} for another question ({stored[query.id]!r}, not "
                f"{query.text!r}); name another run with --run NAME, or redo this one with --fresh")
    return stored


class RunConflictError(KgrError):
    """A run already holds a record under a query's id for another question (ids reused by another file)."""

    status = ExitStatus.USAGE


def _distinct(queries: Iterable[Query]) -> list[Query]:
    """Queries with repeats of the same id and text dropped; one id for two texts is an error."""
    seen: dict[str, Query] = {}
    for query in queries:
        first = seen.setdefault(query.id, query)
        if not same_question(first.text, query.text):
            raise KgrError(f"two questions share the id {query.id!r}: {first.text!r} and {query.text!r}")
    return list(seen.values())


def _open_out(path: Path):
    """Open the --out JSONL file for writing, reporting a path that cannot be written as one line."""
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise KgrError(f"{path}: cannot write the records ({exc.strerror})") from None


def _write_line(handle, line: str) -> None:
    """Append one complete JSONL line and flush it, so a killed run leaves only whole records behind."""
    handle.write(line + "\n")
    handle.flush()


def retrieve_one(context: RunContext, method: Method, query: Query,
                 plans: dict[str, dict] | None = None) -> RetrievalRecord:
    """One finished record; a stored plan's backbone usage is added to what retrieval itself spent."""
    plan = (plans or {}).get(query.id)
    if plan is None:
        return finish_record(method.retrieve(query), context)
    record = method.retrieve(query, plan=plan)
    for name, value in plan.get("usage", {}).items():
        setattr(record, name, getattr(record, name) + value)
    return finish_record(record, context)


def finish_record(record: RetrievalRecord, context: RunContext) -> RetrievalRecord:
    """Say so in a record that found nothing (no path, no passage): an empty result rests on what could not be
    matched, and a script reading records should not take it for an answerless question. Other records are kept
    as they are, and so is an empty one whose method already said why (CS-RAG: its unresolved constraints)."""
    if not record.is_empty or any(w.startswith(EMPTY_RESULT) for w in record.warnings):
        return record
    record.warnings.append(empty_result_warning(empty_reason(record)))
    return record


def empty_reason(record: RetrievalRecord) -> str | None:
    """Why a record is empty, when the record tells: unmatched mentions or no anchor."""
    if record.unmatched_mentions:
        return "no entity matched " + ", ".join(repr(m) for m in record.unmatched_mentions)
    if not record.anchors and record.method in ANCHORED_METHODS:
        return "no anchor entity found for the question"
    return None


# Methods that start from anchor entities (their records list them); the others rank the whole graph.
ANCHORED_METHODS = ("dotrag", "csrag")


def _retrieve_all(context: RunContext, cls: type[Method], queries: list[Query], workers: int,
                  plans: dict[str, dict]) -> Iterator[RetrievalRecord]:
    """Records in input order; threads only help when a remote backbone dominates the time."""
    if workers <= 1 or len(queries) <= 1:
        method = cls(context)
        for query in queries:
            yield retrieve_one(context, method, query, plans)
        return
    import threading

    local = threading.local()

    def work(query: Query) -> RetrievalRecord:
        if not hasattr(local, "method"):
            local.method = cls(context)  # per thread: a method keeps scratch state (e.g. the map's BFS arrays)
        return retrieve_one(context, local.method, query, plans)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(work, queries)


# -- `kgr retrieve --engine ray`: a run's questions split over Ray workers that each open the project read-only --
# Offline backbones only: an LLM backbone's answers are cached in the project, which a worker opens read-only.
RAY_BACKBONES = ("offline", "random")


def check_ray_retrieval(context: RunContext):
    """The `ray` module, once the run is one Ray can retrieve (an offline backbone); else a one-line error."""
    from kgr.embed_ray import require_ray

    if context.backbone not in RAY_BACKBONES:
        raise UsageError(f"--engine ray retrieves with an offline backbone ({', '.join(RAY_BACKBONES)}); "
                         f"{context.backbone!r} answers are cached in the project, which workers open read-only")
    return require_ray()


def effective_settings(config) -> dict[str, Any]:
    """Every setting of `config` as `section.key` overrides: a worker's config is then the driver's exactly."""
    return {f"{section}.{key}": value for section, values in config.to_dict().items() for key, value in values.items()}


def retrieve_shard(root: str, settings: dict[str, Any], method_name: str, queries: list, plans: dict,
                   use_cache: bool) -> list[RetrievalRecord]:
    """One worker's questions, retrieved from the project opened read-only (the last committed snapshot while the
    driver holds it), each as the local runner retrieves it."""
    from kgr.project import Project

    with Project.open(Path(root), overrides=settings) as project:
        context = open_run(project, method_name, use_cache=use_cache)
        method = method_class(method_name)(context)
        return [retrieve_one(context, method, query, plans) for query in queries]


def retrieve_on_ray(context: RunContext, method_name: str, queries: list, plans: dict,
                    workers: int) -> Iterator[RetrievalRecord]:
    """The records of `queries` in order, contiguous shards retrieved by Ray tasks: `workers` of them when above 1,
    else `ray.workers`, else one per CPU of the cluster. A worker whose process dies is retried by Ray (it only
    reads); one that raises stops the run with a KgrError."""
    from kgr.embed_ray import connect, first_line

    if not queries:
        return
    ray = check_ray_retrieval(context)
    started = connect(ray, context.config.ray.address)
    try:
        count = workers if workers > 1 else context.config.ray.workers or int(ray.cluster_resources().get("CPU", 1))
        count = max(1, min(count, len(queries)))
        bounds = [len(queries) * i // count for i in range(count + 1)]
        task = ray.remote(num_cpus=1)(retrieve_shard)
        settings = effective_settings(context.config)
        root = str(Path(context.project.root).resolve())
        pending = [task.remote(root, settings, method_name, queries[lo:hi],
                               {q.id: plans[q.id] for q in queries[lo:hi] if q.id in plans}, context.use_cache)
                   for lo, hi in zip(bounds, bounds[1:])]
        try:
            for shard in pending:
                yield from ray.get(shard)
        except ray.exceptions.RayError as exc:
            raise KgrError(f"retrieval on Ray failed: {first_line(exc)}") from None
    finally:
        if started:
            ray.shutdown()
