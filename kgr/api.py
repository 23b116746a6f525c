"""kgr's Python API: the functions scripts call, and the `kgr` command line is a thin layer over.

Each function takes a project directory (a path, or a `Project` already open from `open_project`, to run several
steps under one lock), does what the command of the same name does, and returns what the command prints: a report,
stats, records. Nothing here prints, reads `sys.argv` or exits: a refusal is a `kgr.errors.KgrError` subclass
(`UsageError`, `InputError`, `StaleStageError`, `ProjectBusyError`, `BackboneError`), whose `status` is the exit
status the command line would give it.

Settings are overrides keyed "section.key" (`{"dotrag.search_top": 20, "backbone.model": "offline"}`), checked as
`--set` checks them. `progress` is a factory `progress(description, total)` returning `advance(n)`, as
`kgr.console.Output.progress()` yields. Modules beyond the standard library are imported inside the functions, so
that importing this module (and `kgr --help`) stays fast. docs/python-api.md has an example.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, Union

from kgr.errors import KgrError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from kgr.evaluate.questions import Question
    from kgr.evaluate.run import EvalResult
    from kgr.ingest.stage import IngestReport
    from kgr.methods.base import Query
    from kgr.methods.records import RetrievalRecord
    from kgr.perturb import PerturbReport
    from kgr.project import Project
    from kgr.reach import ReachStats

__all__ = [
    "PlanReport", "Retrieval", "evaluate", "ingest", "init", "open_project", "overview", "perturb", "plan", "reach",
    "question_text_id", "read_overview", "records", "retrieve", "show_reach", "status",
]

PathLike = Union[str, "os.PathLike[str]"]
ProjectLike = Union[str, "os.PathLike[str]", "Project"]
Settings = Mapping[str, Any]
Progress = Callable[[str, int], Callable[[int], None]]
# One question (a string or a Query), a question file (a Path: MetaQA vanilla or JSONL), or a sequence of questions
# (strings, Query objects, or the Question objects `kgr.evaluate.questions.load_questions` returns).
Questions = Union[str, "Query", "os.PathLike[str]", Iterable[Union[str, "Query", "Question"]]]

# The id of a single question, as `kgr retrieve --query` and `kgr plan --query` give it.
SINGLE_ID = "query"


# -- opening a project --------------------------------------------------------------------------------------------
@contextmanager
def open_project(directory: PathLike, *, write: bool = False, create: bool = False,
                 settings: Settings | None = None) -> Iterator["Project"]:
    """Open a project for the duration of a `with` block, holding its lock (exclusive with `write`, else shared).

    `create` makes the directory and its kgr.toml when missing (and removes them again if the block is refused with
    a KgrError); `settings` override kgr.toml for this opening. The project can be passed to every function here
    in place of a directory, so that several steps run under one lock (settings then come from this opening).
    Raises KgrError for a directory that is no project, ProjectBusyError when another process writes it."""
    from kgr.project import Project

    with Project.open(Path(directory), write=write, create=create, overrides=dict(settings or {})) as project:
        yield project


@contextmanager
def _opened(target: ProjectLike, *, write: bool = False, create: bool = False,
            settings: Settings | None = None) -> Iterator["Project"]:
    """The project `target` names: opened here from a directory, or `target` itself when already open."""
    from kgr.project import Project

    if isinstance(target, Project):
        if settings:
            raise UsageError("settings apply when a project is opened: pass them to open_project()")
        if write and not target.writable:
            raise UsageError(f"{target.root}: opened to read; open_project(..., write=True) to change it")
        yield target
        return
    if not isinstance(target, (str, os.PathLike)):
        raise UsageError(f"expected a project directory or an open Project, not {type(target).__name__}")
    with open_project(target, write=write, create=create, settings=settings) as project:
        yield project


def init(directory: PathLike, *, settings: Settings | None = None) -> Path:
    """Create a project directory with a kgr.toml listing every setting (`kgr init`); return the kgr.toml path.

    An existing kgr.toml is kept; giving `settings` for one is a UsageError (they would not be written)."""
    from kgr.config import CONFIG_FILE
    from kgr.project import Project

    existed = (Path(directory) / CONFIG_FILE).exists()
    path = Project.init(Path(directory), dict(settings or {}))
    if existed and settings:
        raise UsageError(f"{path} exists and was kept; edit it, or pass --set to the command that should use it")
    return path


# -- stages -------------------------------------------------------------------------------------------------------
def ingest(
    directory: ProjectLike,
    paths: PathLike | Sequence[PathLike],
    *,
    passages: Sequence[PathLike] = (),
    schema: PathLike | None = None,
    fmt: str | None = None,
    columns: Mapping[str, str] | None = None,
    delimiter: str | None = None,
    mode: str | None = None,
    force: bool = False,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> "IngestReport":
    """Read a graph (and passages) into the project, creating it if needed, and embed it (`kgr ingest`).

    `paths` are graph files (triples, CSV/TSV, JSON(L), LightRAG JSON, OpenIE, a GraphRAG folder); `fmt` names their
    format (detected by default); `columns` maps fields to headers ({"subject": "head"}); `schema` is a TOML file
    typing each relation's roles. `mode` is None (the same inputs as the project's graph, or a first ingest),
    "append" (add these inputs) or "replace" (replace the graph). Returns the IngestReport: `skipped` when the same
    inputs and settings were ingested already (`force` redoes it), `counts`, `seconds`, `encoded`, and the records
    left out (`skipped_records`) and names shared across types (`names_with_several_types`)."""
    from kgr.ingest.formats import FORMATS
    from kgr.ingest.stage import MODES, IngestOptions, run_ingest

    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: choose from {', '.join(FORMATS)}")
    if mode is not None and mode not in MODES:
        raise UsageError(f"mode {mode!r}: choose from {', '.join(MODES)} (or None)")
    graph_paths = _paths(paths, "paths")
    if not graph_paths:
        raise UsageError("paths: give at least one graph file")
    options = IngestOptions(paths=graph_paths, fmt=fmt, passages=_paths(passages, "passages"),
                            schema=Path(schema) if schema is not None else None,
                            columns=dict(columns) if columns else None, delimiter=delimiter)
    overrides = dict(settings or {})
    with _opened(directory, write=True, create=True, settings=overrides) as project:
        return run_ingest(project, options, force=force, mode=mode, progress=progress, settings=overrides)


def reach(directory: ProjectLike, *, force: bool = False, settings: Settings | None = None) -> "ReachStats | None":
    """Build the reachability map (`kgr reach`); return its ReachStats, or None when the current map is up to date
    (`force` rebuilds it). Raises StaleStageError when the project has not been ingested."""
    from kgr.reach_stage import run_reach

    with _opened(directory, write=True, settings=settings) as project:
        return run_reach(project, force=force)


def show_reach(directory: ProjectLike, entity: str, *, hop: int | None = None, type_name: str | None = None,
               settings: Settings | None = None) -> dict[str, Any]:
    """Look an entity up in the reachability map (`kgr reach --show`): its types and, per hop, the number of
    entities of each type it reaches; with `hop`, that hop only; with `hop` and `type_name`, the members by name.

    `entity` is a name (exact, else case-insensitive) or `#id`. Raises KgrError for an unknown entity or hop,
    UsageError for an unknown type or a `type_name` without `hop`."""
    from kgr.reach_stage import open_reach, resolve_entity
    from kgr.store import GraphStore

    with _opened(directory, settings=settings) as project:
        store = GraphStore(project)
        reach_map = open_reach(project)
        eid = resolve_entity(store, entity)
        if type_name is not None and hop is None:
            raise UsageError("--type needs --hop")
        if type_name is not None and type_name not in reach_map.type_names:
            raise UsageError(f"--type {type_name!r}: no such entity type ({', '.join(reach_map.type_names)})")
        try:
            type_id = reach_map.type_id(type_name) if type_name is not None else None
            shown = reach_map.show(eid, hop, type_id)
        except (KeyError, ValueError) as exc:
            raise KgrError(f"--show {entity!r}: {exc}") from None
        if "members" in shown:
            shown["members"] = [store.names[m] for m in shown["members"]]
        shown["entity"] = store.names[eid]
        shown["types"] = store.types_of(eid) if "types" not in shown else shown["types"]
    return shown


def overview(directory: ProjectLike, *, force: bool = False, use_cache: bool = True,
             settings: Settings | None = None, progress: Progress | None = None) -> dict[str, Any] | None:
    """Summarize each entity type and the whole graph and store it (`kgr overview`): |T|+1 backbone calls, or
    extractive summaries with the offline policy. Returns {"types", "llm_calls", "text"}, or None when the stored
    overview is up to date (`force` redoes it); `use_cache=False` bypasses the backbone's response cache."""
    from kgr.overview import run_overview

    with _opened(directory, write=True, settings=settings) as project:
        return run_overview(project, force=force, use_cache=use_cache, progress=progress)


def read_overview(directory: ProjectLike, *, settings: Settings | None = None) -> str:
    """The stored graph overview (`kgr overview --show`); StaleStageError when none is current."""
    from kgr.overview import read_overview as stored_overview

    with _opened(directory, settings=settings) as project:
        return stored_overview(project)


def status(directory: ProjectLike, *, settings: Settings | None = None) -> dict[str, Any]:
    """The project's state as JSON-able data (`kgr status --json`): stages, counts per type and relation, sizes."""
    from kgr.status import project_status

    with _opened(directory, settings=settings) as project:
        return project_status(project)


# -- questions, plans and retrieval -------------------------------------------------------------------------------
@dataclass
class PlanReport:
    """What `plan` did: questions planned now, questions that had a current plan, and the stored plans."""

    planned: int
    already_planned: int
    plans: list[dict[str, Any]] = field(default_factory=list)  # in question order, one per question planned


class Retrieval(list):
    """A retrieval's records (RetrievalRecord) in question order, and what it did.

    `run` is the run the records are stored in (None for a single question, which is not stored); `retrieved`
    counts the questions retrieved now and `already_done` those whose stored record was reused. With
    `keep_records=False` the list is empty and only the counts are set."""

    def __init__(self, records: Iterable["RetrievalRecord"] = (), *, method: str, run: str | None,
                 retrieved: int, already_done: int, out: Path | None = None):
        super().__init__(records)
        self.method = method
        self.run = run
        self.retrieved = retrieved
        self.already_done = already_done
        self.out = out

    def __repr__(self) -> str:
        return (f"Retrieval({len(self)} records, method={self.method!r}, run={self.run!r}, "
                f"retrieved={self.retrieved}, already_done={self.already_done})")


def question_text_id(text: str) -> str:
    """The id a question string in a list gets: `q-` and a short hash of its whitespace-collapsed text, so the same
    question keeps its id (and its stored record and plan) from one call to the next."""
    return "q-" + hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()[:12]


def load_queries(questions: Questions, *, limit: int = 0, seed: int = 0) -> tuple[list["Query"], bool]:
    """The queries `questions` names, and whether it was a single question (a str or a Query).

    A string is always a question, never a file: pass a question file as a `pathlib.Path`. Strings in a sequence
    get `question_text_id` ids; a single string gets the id "query", as `--query` gives it. `limit` samples that
    many questions of a file or sequence (reproducibly for `seed`, in id order; 0 keeps them all, in order)."""
    from kgr.evaluate.questions import Question, load_questions, sample
    from kgr.methods.base import Query

    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise UsageError(f"limit {limit!r}: expected a number of questions >= 0 (0 = all)")
    if isinstance(questions, str):
        return [Query(SINGLE_ID, questions)], True
    if isinstance(questions, Query):
        return [questions], True
    if isinstance(questions, os.PathLike):
        loaded = load_questions(Path(questions))
        queries = [Query(q.id, q.question) for q in (sample(loaded, limit, seed) if limit else loaded)]
        return queries, False
    if isinstance(questions, (bytes, Mapping)) or not isinstance(questions, Iterable):
        raise UsageError(f"questions: expected a question, a question file (Path) or a list of questions, "
                         f"not {type(questions).__name__}")
    queries = []
    for item in questions:
        if isinstance(item, Query):
            queries.append(item)
        elif isinstance(item, Question):
            queries.append(Query(item.id, item.question))
        elif isinstance(item, str):
            queries.append(Query(question_text_id(item), item))
        else:
            raise UsageError(f"questions: expected question strings or Query objects in the list, "
                             f"not {type(item).__name__}")
    if not queries:
        raise UsageError("questions: the list is empty")
    return (sample(queries, limit, seed) if limit else queries), False


def plan(
    directory: ProjectLike,
    questions: Questions,
    *,
    method: str = "dotrag",
    fresh: bool = False,
    limit: int = 0,
    seed: int = 0,
    use_cache: bool = True,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> PlanReport:
    """Plan questions (DotRAG trajectories, CS-RAG constraints) and store the plans for `retrieve` (`kgr plan`).

    `questions` is as for `retrieve`. A question with a plan made under the current backbone, planning settings and
    graph is not planned again unless `fresh`. Raises UsageError for a method without planning stage or an unknown
    one, StaleStageError when the stages it needs have not run."""
    from kgr.methods.runner import method_class, open_run, run_plans, stored_plans

    queries, _ = load_queries(questions, limit=limit, seed=seed)
    method_class(method)  # an unknown method is refused before the project is opened
    with _opened(directory, write=True, settings=settings) as project:
        context = open_run(project, method, stage="plan", use_cache=use_cache)
        advance = progress("planning", len(queries)) if progress else None
        done, skipped = run_plans(context, method, queries, fresh=fresh, progress=advance)
        plans = stored_plans(context, method, queries)
    return PlanReport(done, skipped, [plans[q.id] for q in queries if q.id in plans])


def retrieve(
    directory: ProjectLike,
    questions: Questions,
    *,
    method: str = "dotrag",
    run: str | None = None,
    resume: bool = True,
    workers: int = 1,
    out: PathLike | None = None,
    limit: int = 0,
    seed: int = 0,
    use_cache: bool = True,
    settings: Settings | None = None,
    progress: Progress | None = None,
    on_record: Callable[["RetrievalRecord"], None] | None = None,
    keep_records: bool = True,
    engine: str = "local",
) -> Retrieval:
    """Retrieve relational paths for questions (`kgr retrieve`); return their records in question order.

    `questions` is one question (a string, `[brackets]` marking entity mentions, or a Query), a question file (a
    `pathlib.Path`, MetaQA vanilla or JSONL; a plain string is taken as a question, not a file), or a sequence of
    strings, Query or Question objects. `method` is dotrag, csrag, bm25, vss or dpr.

    A file or a sequence is a run: each record is stored in the project's `records` table under `run` (default
    METHOD-BACKBONE), a question whose record the run holds is reused (`resume=False` empties the run first), stored
    plans are used, `workers` questions are retrieved at once (for remote backbones), `on_record` sees each new
    record, and with `out` every record is also written to that JSONL file as it completes. `keep_records=False`
    returns the counts without the records, so a large run's records are not held in memory (`records(directory,
    run)` reads them back).

    One question goes through the runner's per-question path (`retrieve_one`, the record a run would store, with
    id "query") but is not stored, as `kgr retrieve --query` stores nothing: (1) its id is the fixed "query", so a
    stored record would make the next, different question a conflicting record in the run (refused); (2) a run
    reuses records by question text whatever the settings, so asking again after changing a setting would return
    the earlier record instead of retrieving; (3) a run's records are what `evaluate` scores, and one-off lookups
    would mix into them. To store a question, pass it in a list: `retrieve(d, [question])` (its id is then
    `question_text_id(question)`); `run`, `resume`, `workers` and `engine` apply to runs only. `engine` "ray" splits
    a run's questions over Ray workers (`ray.address`; `workers` of them, else `ray.workers` or one per CPU), each
    opening the project read-only; offline backbones only.

    Raises UsageError for an unknown method, a `run` for a single question, or a run holding another question's
    record under one of the ids (RunConflictError); StaleStageError when ingest or reach has not run."""
    from kgr.methods.records import write_jsonl
    from kgr.methods.runner import check_resumable, method_class, open_run, retrieve_one, run_method

    queries, single = load_queries(questions, limit=limit, seed=seed)
    if single and run is not None:
        raise UsageError(f"a single question is not stored in a run; pass it in a list to store it in {run!r}")
    cls = method_class(method)  # an unknown method is refused before the project is opened
    if engine not in ("local", "ray"):
        raise UsageError(f"engine {engine!r}: choose from local, ray")
    out = Path(out) if out is not None else None
    with _opened(directory, write=True, settings=settings) as project:
        context = open_run(project, method, use_cache=use_cache)
        if single:
            record = retrieve_one(context, cls(context), queries[0])
            if out:
                write_jsonl(out, [record])
            if on_record:
                on_record(record)
            return Retrieval([record], method=method, run=None, retrieved=1, already_done=0, out=out)
        if resume:
            check_resumable(context, method, queries, run)  # refuses before progress starts
        fresh: dict[str, RetrievalRecord] = {}

        def new_record(record: "RetrievalRecord") -> None:
            if keep_records:
                fresh[record.id] = record
            if on_record:
                on_record(record)

        advance = progress(f"retrieving ({method})", len(queries)) if progress else None
        name, done, skipped = run_method(context, method, queries, run=run, resume=resume, workers=workers,
                                         progress=advance, out=out, on_record=new_record, engine=engine)
        kept = []
        if keep_records:
            ids = list(dict.fromkeys(q.id for q in queries))
            stored = _stored_records(project, name, [qid for qid in ids if qid not in fresh])
            kept = [fresh.get(qid) or stored[qid] for qid in ids]
    return Retrieval(kept, method=method, run=name, retrieved=done, already_done=skipped, out=out)


def records(directory: ProjectLike, run: str, *, settings: Settings | None = None) -> list["RetrievalRecord"]:
    """The records a run holds, in question-id order (empty for a run that does not exist)."""
    from kgr.methods.records import RetrievalRecord
    from kgr.methods.runs import load_records

    with _opened(directory, settings=settings) as project:
        return [RetrievalRecord(**row) for row in load_records(project, run)]


def _stored_records(project: "Project", run: str, ids: list[str]) -> dict[str, "RetrievalRecord"]:
    """The run's stored records of these question ids, by id."""
    import json

    from kgr.methods.records import RetrievalRecord
    from kgr.methods.runs import record_lines

    return {qid: RetrievalRecord(**json.loads(line)) for qid, line in record_lines(project, run, ids).items()}


# -- evaluation and robustness ------------------------------------------------------------------------------------
def evaluate(
    directory: ProjectLike,
    questions: PathLike | Sequence[PathLike],
    runs: str | Sequence[str],
    *,
    hops: Sequence[int] = (),
    limit: int = 0,
    seed: int = 0,
    out: PathLike | None = None,
    console: "Console | None" = None,
    settings: Settings | None = None,
) -> "EvalResult":
    """Score stored runs against question files (`kgr eval`): recall, precision, F1, golden proximity, cost, latency.

    Each file is one split (named after its hop count, from `hops` or the path, else its name); `hops` gives one
    hop count for all files or one per file. `limit` samples that many questions per split (`seed`). With `out`,
    JSON, CSV, Markdown and PNG reports are written into that folder; with a rich `console`, the tables are printed
    on it. Returns the EvalResult (`summaries[run][split]`, `to_dict()`, `warnings`). The project is opened to read,
    so this runs beside a writer. Raises KgrError for a run without records, InputError for a bad question file."""
    from kgr.evaluate.questions import load_question_sets
    from kgr.evaluate.run import evaluate as evaluate_runs

    paths = _paths(questions, "questions")
    run_names = [runs] if isinstance(runs, str) else list(runs)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise UsageError(f"limit {limit!r}: expected a number of questions >= 0 (0 = all)")
    sets = load_question_sets(paths, list(hops))
    with _opened(directory, settings=settings) as project:
        return evaluate_runs(project, sets, run_names, out_dir=Path(out) if out is not None else None,
                             limit=limit or None, seed=seed, console=console)


def perturb(
    source: ProjectLike,
    target: PathLike,
    *,
    mode: str,
    ratio: float,
    scope: str = "whole",
    questions: PathLike | None = None,
    seed: int = 0,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> "PerturbReport":
    """Write a damaged copy of an ingested project into `target` (`kgr perturb`, the CS-RAG robustness protocol).

    `mode` is "noise" (spurious relations) or "incomplete" (dropped edges), `ratio` the share of in-scope
    relationships damaged, in (0, 1]; `scope` is "whole" or "query" (the 2-hop neighbourhoods of the anchors of
    the `questions` file's questions). `settings` apply to the source and the copy alike."""
    from kgr.evaluate.questions import load_questions
    from kgr.perturb import perturb_project

    overrides = dict(settings or {})
    anchors = sorted({a for q in load_questions(Path(questions)) for a in q.anchors}) if questions else None
    with _opened(source, settings=overrides) as project:
        return perturb_project(project, Path(target), mode=mode, ratio=ratio, scope=scope, seed=seed,
                               anchors=anchors, progress=progress, overrides=overrides)


def _paths(value: PathLike | Sequence[PathLike], name: str) -> list[Path]:
    """One path or a sequence of paths, as Paths."""
    if isinstance(value, (str, os.PathLike)):
        return [Path(value)]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise UsageError(f"{name}: expected a path or a list of paths, not {type(value).__name__}")
    paths = []
    for item in value:
        if not isinstance(item, (str, os.PathLike)):
            raise UsageError(f"{name}: expected paths, not {type(item).__name__}")
        paths.append(Path(item))
    return paths
