"""The `kgr` command line: parses arguments, calls the library, prints results."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from kgr.console import Output
from kgr.errors import ExitStatus, KgrError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Retrieve relational paths from knowledge graphs (DotRAG, CS-RAG, BM25, VSS).",
)

ProjectDir = typer.Argument(..., help="Project directory.", show_default=False)
SetOption = typer.Option([], "--set", help="Override a setting, e.g. --set dotrag.search_top=20 (repeatable).")
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress or messages; results only.")
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON.")
ForceOption = typer.Option(False, "--force", help="Redo the stage even if it is up to date.")


def parse_pairs(pairs: list[str], option: str) -> dict[str, str]:
    """Parse repeated KEY=VALUE options."""
    parsed: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise KgrError(f"{option} {pair!r}: expected KEY=VALUE")
        parsed[key.strip()] = value.strip()
    return parsed


def parse_settings(pairs: list[str], **named: Any) -> dict[str, Any]:
    """Turn `--set section.key=value` pairs and named flags into config overrides (flags win)."""
    overrides: dict[str, Any] = parse_pairs(pairs, "--set")
    for key in overrides:
        if "." not in key:
            raise KgrError(f"--set {key!r}: expected SECTION.KEY=VALUE")
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
            output.error(exc.message)
            raise typer.Exit(int(exc.status)) from None
        except KeyboardInterrupt:
            output.error("interrupted; the project keeps its previous state")
            raise typer.Exit(int(ExitStatus.INTERRUPTED)) from None

    return wrapper


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


@app.command()
@command
def init(directory: Path = ProjectDir, settings: list[str] = SetOption, quiet: bool = QuietOption) -> None:
    """Create a project directory with a kgr.toml listing every setting."""
    from kgr.project import Project

    path = Project.init(directory, parse_settings(settings))
    Output(quiet).info(f"project ready: {path}")


@app.command()
@command
def ingest(
    directory: Path = ProjectDir,
    graph: list[Path] = typer.Argument(..., help="Graph files: triples, entities/relationships, or LightRAG JSON."),
    fmt: Optional[str] = typer.Option(None, "--format", help="Input format (auto-detected by default)."),
    passages: list[Path] = typer.Option([], "--passages", help="Passage corpus, JSON or JSONL of {title, text}."),
    schema: Optional[Path] = typer.Option(None, "--schema", help="TOML mapping each relation's roles to types."),
    column: list[str] = typer.Option([], "--column", help="Map a field to a header, e.g. subject=head."),
    delimiter: Optional[str] = typer.Option(None, "--delimiter", help="Field delimiter for CSV/TSV/triples."),
    embedding_model: Optional[str] = typer.Option(None, "--embedding-model", help="Model name or local path."),
    settings: list[str] = SetOption,
    force: bool = ForceOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Load a knowledge graph (and passages) into the project and embed it."""
    from kgr.ingest.stage import IngestOptions, run_ingest
    from kgr.project import Project

    output = Output(quiet)
    columns = parse_pairs(column, "--column") or None
    options = IngestOptions(paths=graph, fmt=fmt, passages=passages, schema=schema, columns=columns,
                            delimiter=delimiter)
    overrides = parse_settings(settings, **{"embedding.model": embedding_model})
    with Project.open(directory, write=True, create=True, overrides=overrides) as project, output.progress() as bar:
        report = run_ingest(project, options, force=force, progress=bar)
    if as_json:
        print_json({"skipped": report.skipped, "counts": report.counts, "seconds": report.seconds,
                    "encoded": report.encoded})
    elif report.skipped:
        output.info("ingest is up to date (same inputs and settings); use --force to redo it")
    else:
        counts = ", ".join(f"{value:,} {name}" for name, value in report.counts.items())
        times = ", ".join(f"{name} {value:.1f}s" for name, value in report.seconds.items())
        output.info(f"ingested {counts}; encoded {report.encoded:,} new texts ({times})")


@app.command()
@command
def status(directory: Path = ProjectDir, as_json: bool = JsonOption, quiet: bool = QuietOption) -> None:
    """Show stages, counts per entity type and relation, and sizes on disk."""
    from kgr.project import Project
    from kgr.status import project_status, render_status

    with Project.open(directory) as project:
        report = project_status(project)
    if as_json:
        print_json(report)
    else:
        render_status(report, Output(quiet).out)


@app.command()
@command
def reach(
    directory: Path = ProjectDir,
    show: Optional[str] = typer.Option(None, "--show", help="Print lookups for this entity (name or #id)."),
    hop: Optional[int] = typer.Option(None, "--hop", help="With --show: one hop."),
    type_name: Optional[str] = typer.Option(None, "--type", help="With --show and --hop: list the members."),
    settings: list[str] = SetOption,
    force: bool = ForceOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Build the reachability map (typed entities per hop), or inspect it with --show."""
    from kgr.project import Project
    from kgr.reach_stage import open_reach, resolve_entity, run_reach
    from kgr.store import GraphStore

    output = Output(quiet)
    if show is not None:
        with Project.open(directory, overrides=parse_settings(settings)) as project:
            store = GraphStore(project)
            reach_map = open_reach(project)
            eid = resolve_entity(store, show)
            if type_name is not None and hop is None:
                raise KgrError("--type needs --hop")
            try:
                type_id = reach_map.type_id(type_name) if type_name is not None else None
                shown = reach_map.show(eid, hop, type_id)
            except (KeyError, ValueError) as exc:
                raise KgrError(f"--show {show!r}: {exc}") from None
        if "members" in shown:
            shown["members"] = [store.names[m] for m in shown["members"]]
        shown["entity"] = store.names[eid]
        shown["types"] = store.types_of(eid) if "types" not in shown else shown["types"]
        if as_json:
            print_json(shown)
        else:
            render_reach_show(shown, output)
        return
    with Project.open(directory, write=True, overrides=parse_settings(settings)) as project:
        stats = run_reach(project, force=force)
    if stats is None:
        output.info("reach is up to date; use --force to rebuild it")
    elif as_json:
        print_json(stats.to_dict())
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
