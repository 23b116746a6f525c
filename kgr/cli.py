"""The `kgr` command line: parses arguments, calls the library, prints results."""

from __future__ import annotations

import functools
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from kgr import __version__, api
from kgr.console import Output, counted
from kgr.errors import ExitStatus, KgrError, RetiredSettingWarning, UsageError
from kgr.ingest.formats import FORMATS
from kgr.methods import METHODS


class PlainFlags:
    """Flags shown without a value placeholder: typer would print `<bool>` beside --json, --quiet, --help, ..."""

    def get_params(self, ctx: Any) -> list:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class KgrCommand(PlainFlags, TyperCommand):
    """A kgr command: flags shown without a value placeholder."""


class LiteralHelpGroup(PlainFlags, TyperGroup):
    """Help texts shown as written: rich markup is escaped, so "[brackets]" in a help string stay visible."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        commands = list(self.commands.values())
        for item in [self, *self.params, *commands, *(param for command in commands for param in command.params)]:
            for attribute in ("help", "short_help"):
                text = getattr(item, attribute, None)
                if isinstance(text, str):
                    setattr(item, attribute, escape(text))


app = typer.Typer(
    cls=LiteralHelpGroup,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Retrieve relational paths from knowledge graphs (DotRAG, CS-RAG, BM25, VSS).",
)


def print_version(requested: bool) -> None:
    if requested:
        typer.echo(f"kgr {__version__}")
        raise typer.Exit()


@app.callback()
def global_options(
    version: bool = typer.Option(False, "--version", callback=print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Retrieve relational paths from knowledge graphs (DotRAG, CS-RAG, BM25, VSS)."""
    warnings.showwarning = show_warning


python_show_warning = warnings.showwarning


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """kgr's own warnings (a retired setting in kgr.toml) as one line on stderr, like the CLI's other messages; any
    other library's as Python shows it."""
    if issubclass(category, RetiredSettingWarning):
        print(f"kgr: warning: {message}", file=sys.stderr)
    else:
        python_show_warning(message, category, filename, lineno, file, line)


def one_of(values) -> str:
    """The metavar of an option that takes one of `values`: "[a|b|c]"."""
    return "[" + "|".join(values) + "]"


ProjectDir = typer.Argument(..., help="Project directory.", show_default=False)
SetOption = typer.Option([], "--set", metavar="SECTION.KEY=VALUE",
                         help="Override a setting, e.g. --set dotrag.search_top=20 (repeatable).")
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress or messages; results only.")
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON.")
ForceOption = typer.Option(False, "--force", help="Redo the stage even if it is up to date.")


def parse_pairs(pairs: list[str], option: str) -> dict[str, str]:
    """Parse repeated KEY=VALUE options."""
    parsed: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{option} {pair!r}: expected KEY=VALUE")
        parsed[key.strip()] = value.strip()
    return parsed


def parse_settings(pairs: list[str], **named: Any) -> dict[str, Any]:
    """Turn `--set section.key=value` pairs and named flags into config overrides (flags win)."""
    overrides: dict[str, Any] = parse_pairs(pairs, "--set")
    for key in overrides:
        if "." not in key:
            raise UsageError(f"--set {key!r}: expected SECTION.KEY=VALUE")
    overrides.update({key: value for key, value in named.items() if value is not None})
    return overrides


def command(function: Callable) -> Callable:
    """Run a command body, turning kgr errors and interrupts into one line and an exit status."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        output = Output(quiet=bool(kwargs.get("quiet")))
        try:
            function(*args, **kwargs)
        except KgrError as exc:
            fail(output, exc.message, exc.status, as_json=bool(kwargs.get("as_json")))
        except KeyboardInterrupt:
            fail(output, "interrupted; the project keeps its previous state", ExitStatus.INTERRUPTED,
                 as_json=bool(kwargs.get("as_json")))

    return wrapper


def fail(output: Output, message: str, status: int, *, as_json: bool) -> None:
    """Report a failed command: one line on stderr, and with --json an error object on stdout, so a script that
    parses stdout always gets JSON; then exit with `status`."""
    output.error(message)
    if as_json:
        print_json({"error": message, "exit_status": int(status)})
    raise typer.Exit(int(status)) from None


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


@app.command(cls=KgrCommand)
@command
def init(directory: Path = ProjectDir, settings: list[str] = SetOption, quiet: bool = QuietOption,
         as_json: bool = JsonOption) -> None:
    """Create a project directory with a kgr.toml listing every setting."""
    existed = (directory / "kgr.toml").exists()
    path = api.init(directory, settings=parse_settings(settings))
    if as_json:
        print_json({"config": str(path), "created": not existed})
    else:
        Output(quiet).info(f"project ready: {path}" + (" (kept the existing file)" if existed else ""))


@app.command(cls=KgrCommand)
@command
def ingest(
    directory: Path = ProjectDir,
    graph: list[Path] = typer.Argument(..., help="Graph files: triples, entities/relationships, or LightRAG JSON."),
    fmt: Optional[str] = typer.Option(None, "--format", metavar=one_of(FORMATS),
                                      help="Input format (auto-detected by default)."),
    passages: list[Path] = typer.Option([], "--passages", metavar="FILE",
                                        help="Passage corpus, JSON or JSONL of {title, text} (repeatable)."),
    schema: Optional[Path] = typer.Option(None, "--schema", metavar="FILE",
                                          help="TOML mapping each relation's roles to types."),
    column: list[str] = typer.Option([], "--column", metavar="FIELD=HEADER",
                                     help="Map a field to a header, e.g. subject=head (repeatable)."),
    delimiter: Optional[str] = typer.Option(None, "--delimiter", metavar="CHAR",
                                            help="Field delimiter for CSV/TSV/triples."),
    embedding_model: Optional[str] = typer.Option(None, "--embedding-model", metavar="MODEL",
                                                  help="Model name or local path."),
    engine: Optional[str] = typer.Option(None, "--engine", metavar="local|ray",
                                         help="Encode here (local) or on a Ray cluster (ray; see [ray] settings)."),
    replace: bool = typer.Option(False, "--replace", help="Replace the project's graph with these inputs."),
    append: bool = typer.Option(False, "--append", help="Add these inputs to the project's graph."),
    settings: list[str] = SetOption,
    force: bool = ForceOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Load a knowledge graph (and passages) into the project and embed it."""
    from kgr.ingest.stage import ingest_mode

    output = Output(quiet)
    columns = parse_pairs(column, "--column") or None
    overrides = parse_settings(settings, **{"embedding.model": embedding_model, "embedding.engine": engine})
    mode = ingest_mode(replace, append)
    with output.progress() as bar:
        report = api.ingest(directory, graph, passages=passages, schema=schema, fmt=fmt, columns=columns,
                            delimiter=delimiter, mode=mode, force=force, settings=overrides, progress=bar)
    if as_json:
        print_json({"skipped": report.skipped, "counts": report.counts, "seconds": report.seconds,
                    "encoded": report.encoded, "skipped_records": report.skipped_records,
                    "names_with_several_types": report.names_with_several_types})
    elif report.skipped:
        output.info("ingest is up to date (same inputs and settings); use --force to redo it")
    else:
        counts = ", ".join(f"{value:,} {name}" for name, value in report.counts.items() if name != "kind_relations")
        times = ", ".join(f"{name} {value:.1f}s" for name, value in report.seconds.items())
        output.info(f"ingested {counts}; encoded {report.encoded:,} new texts ({times})")
        if report.counts.get("coarse_typed"):
            output.info(f"typed {report.counts['coarse_typed']:,} entities by coarse kinds: their relation roles "
                        f"gave {report.counts['role_types']:,} types (more than types.max_inferred)")
        if report.counts.get("kind_relations"):
            output.info(escape(f"read {', '.join(report.counts['kind_relations'])} as stating kinds: its classes name "
                               f"the types of its subjects (kgr status)"))
    # Warnings go to stderr with --json too: they change how the result reads.
    if report.skipped_records:
        output.info(escape(f"warning: left out {len(report.skipped_records):,} malformed record(s): "
                           + first_few(report.skipped_records)))
    if report.counts.get("truncated_texts"):
        output.info(f"warning: {counted(report.counts['truncated_texts'], 'text')} longer than the embedding model's "
                    f"window: their vectors stand for their beginning only")
    if report.names_with_several_types:
        shared = report.names_with_several_types
        output.info(escape(f"warning: {counted(len(shared), 'name')} given to entities of different types, kept as "
                           f"separate entities: " + first_few(shared)))


def first_few(items: list[str], shown: int = 3) -> str:
    """The first `shown` items joined by "; ", and how many more there are (--json lists them all)."""
    more = f"; {len(items) - shown:,} more (--json lists all)" if len(items) > shown else ""
    return "; ".join(items[:shown]) + more


@app.command(cls=KgrCommand)
@command
def status(directory: Path = ProjectDir, settings: list[str] = SetOption, as_json: bool = JsonOption,
           quiet: bool = QuietOption) -> None:
    """Show stages, counts per entity type and relation, and sizes on disk."""
    from kgr.status import render_status

    report = api.status(directory, settings=parse_settings(settings))
    if as_json:
        print_json(report)
    else:
        render_status(report, Output(quiet).out)


@app.command(cls=KgrCommand)
@command
def reach(
    directory: Path = ProjectDir,
    show: Optional[str] = typer.Option(None, "--show", metavar="ENTITY",
                                       help="Print lookups for this entity (name or #id)."),
    hop: Optional[int] = typer.Option(None, "--hop", metavar="N", help="With --show: one hop."),
    type_name: Optional[str] = typer.Option(None, "--type", metavar="TYPE",
                                            help="With --show and --hop: list the members."),
    settings: list[str] = SetOption,
    force: bool = ForceOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Build the reachability map (typed entities per hop), or inspect it with --show."""
    output = Output(quiet)
    if show is not None:
        shown = api.show_reach(directory, show, hop=hop, type_name=type_name, settings=parse_settings(settings))
        if as_json:
            print_json(shown)
        else:
            render_reach_show(shown, output)
        return
    with api.open_project(directory, write=True, settings=parse_settings(settings)) as project:
        stats = api.reach(project, force=force)
        stored = project.last_run("reach").counts if stats is None else None
    if as_json:
        print_json({"up_to_date": True, **stored} if stats is None else {"up_to_date": False, **stats.to_dict()})
    elif stats is None:
        output.info("reach is up to date; use --force to rebuild it")
    else:
        output.info(
            f"reachability map: {stats.num_entities:,} entities, {stats.num_edges:,} relationships, H={stats.max_hops}; "
            f"built in {stats.build_seconds:.2f}s, {stats.bytes_on_disk / 2**20:.1f} MiB; degree p50 "
            f"{stats.degree_p50:.0f}, p99 {stats.degree_p99:.0f}, max {stats.max_degree:,}; "
            f"{stats.hub_count:,} hubs (degree >= {stats.hub_threshold})"
        )


def render_reach_show(shown: dict, output: Output) -> None:
    from rich.tree import Tree

    tree = Tree(f"[bold]{shown['entity']}[/bold]")
    if "members" in shown:
        branch = tree.add(f"{shown['type']}: {shown['count']:,} at this hop")
        for name in shown["members"]:
            branch.add(name)
    else:
        for hop, types in shown.get("hops", {"?": shown.get("types", {})}).items():
            branch = tree.add(f"hop {hop}")
            for name, count in types.items():
                branch.add(f"{name}: {count:,}")
    output.out.print(tree)


BackboneOption = typer.Option(None, "--backbone", metavar="MODEL",
                              help="offline, random, or a LiteLLM model (e.g. openai/gpt-4o-mini).")
MethodOption = typer.Option("dotrag", "--method", "-m", metavar=one_of(METHODS),
                            help="Retrieval method (dpr: dense passages).")
QuestionsOption = typer.Option(None, "--questions", metavar="FILE",
                               help="Question file: MetaQA vanilla format or JSONL.")
QueryOption = typer.Option(None, "--query", metavar="TEXT", help="One question; [brackets] mark an entity mention.")
LimitOption = typer.Option(0, "--limit", metavar="N", help="Sample this many questions (0 = all).")
SeedOption = typer.Option(0, "--seed", metavar="N", help="Seed for --limit sampling.")
NoCacheOption = typer.Option(False, "--no-cache", help="Bypass the backbone response cache.")

# The DotRAG paper's ablations, as the settings they change.
ABLATIONS = {
    "no-overview": {"dotrag.use_overview": False},
    "no-previews": {"dotrag.use_previews": False},
    "global-search": {"dotrag.constrained_search": False},
    "random": {"backbone.model": "random"},
}


AblationOption = typer.Option([], "--ablation", metavar=one_of(ABLATIONS), help="DotRAG ablation (repeatable).")


def run_settings(ablation: list[str], settings: list[str], backbone: Optional[str]) -> dict[str, Any]:
    """Overrides for a planning or retrieval run: ablations, then --set pairs, then --backbone."""
    return {**ablation_settings(ablation), **parse_settings(settings, **{"backbone.model": backbone})}


def ablation_settings(names: list[str]) -> dict[str, Any]:
    """The settings behind --ablation names."""
    settings: dict[str, Any] = {}
    for name in names:
        if name not in ABLATIONS:
            raise UsageError(f"--ablation {name!r}: choose from {', '.join(ABLATIONS)}")
        settings.update(ABLATIONS[name])
    return settings


def question_source(questions: Optional[Path], query: Optional[str]) -> Path | str:
    """The questions named on the command line, as `kgr.api` takes them: one --query (a str) or a --questions file
    (a Path)."""
    if (questions is None) == (query is None):
        raise UsageError("give either --query or --questions")
    return query if query is not None else questions


@app.command(cls=KgrCommand)
@command
def overview(
    directory: Path = ProjectDir,
    backbone: Optional[str] = BackboneOption,
    show: bool = typer.Option(False, "--show", help="Print the stored overview instead of building it."),
    no_cache: bool = NoCacheOption,
    settings: list[str] = SetOption,
    force: bool = ForceOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Summarize each entity type and the whole graph (|T|+1 backbone calls; extractive when offline)."""
    output = Output(quiet)
    overrides = parse_settings(settings, **{"backbone.model": backbone})
    if show:
        text = api.read_overview(directory, settings=overrides)
        if as_json:
            print_json({"overview": text})
        else:
            output.out.print(text, markup=False)
        return
    with api.open_project(directory, write=True, settings=overrides) as project, output.progress() as bar:
        result = api.overview(project, force=force, use_cache=not no_cache, progress=bar)
        stored = project.last_run("overview").counts if result is None else None
    if as_json:
        print_json({"up_to_date": True, **stored} if result is None else {"up_to_date": False, **result})
    elif result is None:
        output.info("overview is up to date; use --force to redo it (or --show to print it)")
    else:
        output.info(f"overview of {result['types']} types stored ({result['llm_calls']} backbone calls)")


@app.command(cls=KgrCommand)
@command
def plan(
    directory: Path = ProjectDir,
    method: str = MethodOption,
    questions: Optional[Path] = QuestionsOption,
    query: Optional[str] = QueryOption,
    backbone: Optional[str] = BackboneOption,
    limit: int = LimitOption,
    seed: int = SeedOption,
    fresh: bool = typer.Option(False, "--fresh", help="Replan questions that already have a plan."),
    no_cache: bool = NoCacheOption,
    ablation: list[str] = AblationOption,
    settings: list[str] = SetOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Plan questions (DotRAG trajectories, CS-RAG constraints) and store the plans for `retrieve`."""
    output = Output(quiet)
    source = question_source(questions, query)
    overrides = run_settings(ablation, settings, backbone)
    with output.progress() as bar:
        report = api.plan(directory, source, method=method, fresh=fresh, limit=limit, seed=seed,
                          use_cache=not no_cache, settings=overrides, progress=bar)
    if as_json:
        print_json(report.plans)
    output.info(f"planned {report.planned} question(s) with {method}; {report.already_planned} already had a plan")


@app.command(cls=KgrCommand)
@command
def retrieve(
    directory: Path = ProjectDir,
    method: str = MethodOption,
    questions: Optional[Path] = QuestionsOption,
    query: Optional[str] = QueryOption,
    backbone: Optional[str] = BackboneOption,
    limit: int = LimitOption,
    seed: int = SeedOption,
    run: Optional[str] = typer.Option(None, "--run", metavar="NAME",
                                      help="Name of the run (default: METHOD-BACKBONE)."),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE",
                                       help="Also write the records to this JSONL file."),
    explain: bool = typer.Option(False, "--explain", help="Print the paths as a tree, anchor to answers."),
    workers: int = typer.Option(1, "--workers", metavar="N",
                                help="Questions retrieved concurrently (for remote backbones)."),
    fresh: bool = typer.Option(False, "--fresh", help="Redo questions the run already has."),
    engine: str = typer.Option("local", "--engine", metavar="local|ray",
                               help="Retrieve a batch here (local) or on Ray workers (ray; offline backbones)."),
    no_cache: bool = NoCacheOption,
    ablation: list[str] = AblationOption,
    settings: list[str] = SetOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Retrieve relational paths for a question or a question file; batch runs resume where they stopped."""
    from kgr.methods.base import WarningTally

    output = Output(quiet)
    source = question_source(questions, query)
    overrides = run_settings(ablation, settings, backbone)
    tally = WarningTally()
    # One --query is retrieved and printed, not stored (kgr.api.retrieve says why); --run, --fresh and --workers
    # apply to batches.
    single = query is not None
    with output.progress() as bar:
        result = api.retrieve(directory, source, method=method, run=None if single else run, resume=not fresh,
                              workers=workers, out=out, limit=limit, seed=seed, use_cache=not no_cache,
                              settings=overrides, progress=bar, on_record=tally, keep_records=False, engine=engine)
    if single:
        record = result[0]
        if as_json:
            sys.stdout.write(record.to_json() + "\n")
        elif explain:
            render_explain(record, output)
        else:
            output.out.print(record.context, markup=False, highlight=False)
            output.info(record_summary(record))
        for warning in record.warnings:  # printed even with --quiet: they change how the result reads
            output.err.print(f"warning: {warning}", markup=False, highlight=False)
        return
    if as_json:
        print_json({"run": result.run, "method": method, "retrieved": result.retrieved,
                    "already_done": result.already_done, "out": str(out) if out else None,
                    "empty_results": tally.empty, "warnings": tally.summary})
    else:
        output.info(f"run {result.run}: {result.retrieved} question(s) retrieved, {result.already_done} already done"
                    + (f"; records written to {out}" if out else ""))
    if tally.summary:
        output.err.print(f"warning: {tally.summary}", markup=False, highlight=False)


def hop_label(relation: str, entity: str, direction: str | None) -> str:
    """One hop as rich markup: `- r -> X` along the stored triple, `<- r - X` against it, `- r - X` if unknown."""
    head, tail = {"forward": ("-", "->"), "backward": ("<-", "-")}.get(direction or "", ("-", "-"))
    return f"{head} [dim]{escape(relation)}[/dim] {tail} {escape(entity)}"


def render_explain(record, output: Output) -> None:
    """The record's paths as a tree: anchor, then each hop's relation (in its stored direction) and entity."""
    from rich.tree import Tree

    tree = Tree(f"[bold]{escape(record.question)}[/bold]  [dim]({record.method}, {escape(record.backbone)})[/dim]")
    nodes: dict[tuple, Tree] = {}
    for path in record.paths:
        entities, relations = path["entities"], path["relations"]
        directions = path.get("directions") or [None] * len(relations)
        parent, key = tree, ()
        if len(entities) == len(relations) + 1:
            key = (entities[0],)
            if key not in nodes:
                nodes[key] = tree.add(f"[bold cyan]{escape(entities[0])}[/bold cyan]")
            parent, rest = nodes[key], list(zip(relations, entities[1:], directions))
        else:
            rest = list(zip(relations, entities, directions))
        for relation, entity, direction in rest:
            key = key + (relation, direction, entity)
            if key not in nodes:
                nodes[key] = parent.add(hop_label(relation, entity, direction))
            parent = nodes[key]
    output.out.print(tree)
    # each trajectory's first-hop type, as the graph's labels name its members (a schema-less type is a role)
    shown_types: dict[str, None] = {}  # each line once, in order
    for trajectory in (record.trace or {}).get("trajectories", []):
        named = ", ".join(trajectory.get("type_named_by") or [])
        shown_types.setdefault(f"first hop toward {escape(trajectory['type'])}"
                               + (f" (named by {escape(named)})" if named else ""))
    # the relations between things of one kind walked one way, as the question reads it (kgr.methods.direction)
    for reading in (record.trace or {}).get("directions", []):
        shown_types.setdefault(f"{escape(reading['relation'])} walked {reading['direction']} at hop {reading['depth']}"
                               f" from {escape(reading['anchor'])} (the question's \"{escape(reading['word'])}\")")
    for line in shown_types:
        output.out.print(f"[dim]{line}[/dim]")
    output.info(record_summary(record))


def record_summary(record) -> str:
    """One line on a record's size and cost."""
    return (f"{counted(len(record.paths), 'path')}, {counted(record.context_tokens, 'token')}, "
            f"{counted(record.llm_calls, 'backbone call')}, {record.latency_ms:.0f} ms")


@app.command(name="eval", cls=KgrCommand)
@command
def evaluate_command(
    directory: Path = ProjectDir,
    questions: list[Path] = typer.Option(..., "--questions", metavar="FILE",
                                         help="Question file(s); one split each (repeatable)."),
    runs: list[str] = typer.Option(..., "--run", metavar="NAME",
                                   help="Stored run(s) to score (repeatable), e.g. dotrag-offline."),
    limit: int = LimitOption,
    seed: int = SeedOption,
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR",
                                       help="Folder for JSON, CSV, Markdown and PNG reports."),
    hops: list[int] = typer.Option([], "--hops", min=1, metavar="N",
                                   help="Hop count of the questions, over JSONL `hops` and the path: once for all "
                                   "files or once per --questions (repeatable)."),
    settings: list[str] = SetOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Score stored runs against question sets: recall, precision, F1, golden proximity, cost and latency."""
    output = Output(quiet)
    overrides = parse_settings(settings)
    result = api.evaluate(directory, questions, runs, hops=hops, limit=limit, seed=seed, out=out,
                          console=None if (quiet or as_json) else output.out, settings=overrides)
    for warning in result.warnings:
        output.info(f"[yellow]warning:[/yellow] {escape(warning)}")
    if as_json:
        print_json(result.to_dict())
    elif out:
        output.info(f"reports written to {out}")


@app.command(cls=KgrCommand)
@command
def perturb(
    source: Path = typer.Argument(..., help="An ingested project."),
    target: Path = typer.Argument(..., help="New project directory for the damaged copy."),
    mode: str = typer.Option(..., "--mode", metavar="MODE",
                             help="noise (spurious relations) or incomplete (dropped edges)."),
    ratio: float = typer.Option(..., "--ratio", metavar="FRACTION",
                                help="Share of in-scope relationships to damage, in (0, 1]."),
    scope: str = typer.Option("whole", "--scope", metavar="SCOPE",
                              help="query (2-hop neighbourhoods of the anchors) or whole."),
    questions: Optional[Path] = typer.Option(None, "--questions", metavar="FILE",
                                             help="Questions whose anchors define the scope."),
    seed: int = typer.Option(0, "--seed", metavar="N", help="Seed of the damage's random choices."),
    settings: list[str] = SetOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Derive a damaged copy of a project (the CS-RAG robustness protocol)."""
    output = Output(quiet)
    overrides = parse_settings(settings)
    with output.progress() as bar:
        report = api.perturb(source, target, mode=mode, ratio=ratio, scope=scope, questions=questions, seed=seed,
                             settings=overrides, progress=bar)
    if as_json:
        print_json(report.to_dict())
    else:
        output.info(f"{target}: {report.affected:,} of {report.in_scope:,} in-scope relationships damaged "
                    f"({mode}, {scope}, ratio {ratio}, seed {seed}): {dict(report.by_operation)}")
    if report.anchors_missing:
        output.info(f"[yellow]warning:[/yellow] {len(report.anchors_missing)} anchor(s) not found in the graph")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
