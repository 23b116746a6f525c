"""What `kgr status` reports: stages, graph counts by type and relation, sizes on disk."""

from __future__ import annotations

import json
from typing import Any

from kgr.config import pinned_settings
from kgr.project import Project
from kgr.store import naming_classes, naming_labels


def project_status(project: Project) -> dict[str, Any]:
    """A JSON-able description of the project's state."""
    report: dict[str, Any] = {"project": str(project.root), "stages": [], "types": {}, "relations": {},
                              "disk_bytes": project.disk_usage()}
    if project.last_run("ingest") is None and (resume := project.started_ingest_command()):
        report["interrupted_ingest"] = resume  # the command that resumes it
    pinned = pinned_settings(project.root)
    if pinned:  # what kgr.toml holds other than this version's defaults: often the defaults of an older version
        report["pinned_settings"] = {dotted: {"value": value, "default": default}
                                     for dotted, (value, default) in pinned.items()}
    if not project.db_path.exists():
        return report
    for run in project.runs():
        report["stages"].append({
            "stage": run.stage,
            "ran_at": run.started_at.isoformat(timespec="seconds"),
            "duration_s": run.duration_s,
            "kgr_version": run.kgr_version,
            "state": project.stale_reason(run.stage, run) or "current",
            "counts": run.counts,
        })
    if project.has_table("entity_types"):
        report["types"] = dict(project.db.execute(
            "SELECT type, count(*) FROM entity_types GROUP BY type ORDER BY count(*) DESC, type").fetchall())
        report["relations"] = dict(project.db.execute(
            "SELECT relation, count(*) FROM relationships GROUP BY relation ORDER BY count(*) DESC, relation"
        ).fetchall())
        # what the graph's own words call each type's members: a type inferred from a relation role
        # (`located_in:subject`) is otherwise nameless to a question ("which stations")
        report["type_names"] = naming_labels(project.db)
        # ... and the classes a relation stating kinds gives them (`instance-of` -> `painting`)
        ingest = project.last_run("ingest")
        kinds = ingest.counts.get("kind_relations", []) if ingest is not None else []
        for type_name, classes in naming_classes(project.db, kinds).items():
            report["type_names"].setdefault(type_name, []).extend(f"{' / '.join(kinds)}: {c}" for c in classes)
    return report


def _size(value: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return str(value)


# In a narrow terminal a count's name keeps at least this width beside its value; the rest of the name folds below.
NAME_ROOM = 6


def _value(value: Any) -> str:
    """A count as shown: integers with thousands separators, fractions to three decimals, text as it is."""
    if not _is_number(value):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{round(value, 3):,}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _widths(counts: dict[str, Any]) -> tuple[int, int, int]:
    """The widest name, number and text value of a stage's counts."""
    names = max((len(name) for name in counts), default=0)
    numbers = max((len(_value(v)) for v in counts.values() if _is_number(v)), default=0)
    texts = max((len(_value(v)) for v in counts.values() if not _is_number(v)), default=0)
    return names, numbers, texts


def _counts_grid(counts: dict[str, Any], width: int | None):
    """A stage's counts as rows of name and value within `width` (None: as wide as they are).

    Numbers stay whole; names and text values (a model, a path) fold, sharing what the numbers leave."""
    from rich.table import Table
    from rich.text import Text

    names, numbers, texts = _widths(counts)
    name_width = value_width = None
    if width is not None and names + 1 + max(numbers, texts) > width:
        value_width = max(numbers, min(texts, (width - 1) // 2))
        name_width = min(names, max(width - 1 - value_width, NAME_ROOM))
        value_width = max(numbers, width - 1 - name_width)
    grid = Table.grid(padding=(0, 1))
    # Fixed widths: rich narrows the widest columns of a table that does not fit, numbers or not.
    grid.add_column(overflow="fold", width=name_width)
    grid.add_column(justify="right", overflow="fold", width=value_width)
    for name, value in counts.items():
        number = _is_number(value)
        grid.add_row(Text(name), Text(_value(value), no_wrap=number, justify="right" if number else "left"))
    return grid


def _counts_width(rows: list[tuple[str, str, str, str]], stage_counts: list[dict[str, Any]],
                  console_width: int) -> int | None:
    """The counts column's width when the table would not fit the console: what the other columns leave it, but
    never less than a stage's widest number beside NAME_ROOM letters of its name. None when everything fits."""
    headers = ("stage", "ran at", "took", "state")
    others = sum(max([len(header), *(len(line) for row in rows for line in row[i].splitlines())])
                 for i, header in enumerate(headers))
    available = console_width - others - 2 * 5 - 6  # a cell's padding of one each side, six borders
    natural = max((names + 1 + max(numbers, texts) for names, numbers, texts in map(_widths, stage_counts)),
                  default=0)
    if natural <= available:
        return None
    needed = max((min(names, NAME_ROOM) + 1 + numbers for names, numbers, _ in map(_widths, stage_counts)),
                 default=0)
    return max(available, needed, len("counts"))


def render_status(report: dict[str, Any], console) -> None:
    """Print the status report as rich tables: text folds in a narrow column (never cut short), numbers stay whole."""
    from rich.markup import escape
    from rich.table import Table

    rows = [(stage["stage"],
             stage["ran_at"].replace("T", "\n"),  # date above time: a narrow column, room left for the counts
             f"{stage['duration_s']:.1f}s",
             stage["state"] if stage["state"] == "current" else f"stale: {stage['state']}")
            for stage in report["stages"]]
    stage_counts = [stage["counts"] for stage in report["stages"]]
    width = _counts_width(rows, stage_counts, console.width)
    # Names and counts come from the user's data: escaped, so "[x]" in them is shown rather than read as markup.
    stages = Table(title=f"kgr project {escape(report['project'])}", title_justify="left")
    stages.add_column("stage", overflow="fold")
    stages.add_column("ran at", overflow="fold")
    stages.add_column("took", justify="right", no_wrap=True)
    stages.add_column("state", overflow="fold")
    stages.add_column("counts", overflow="fold", width=width)
    for (name, ran_at, took, state), counts in zip(rows, stage_counts):
        shown_state = state if state == "current" else f"[red]{escape(state)}[/red]"
        stages.add_row(escape(name), ran_at, took, shown_state, _counts_grid(counts, width))
    if report.get("interrupted_ingest"):
        stages.add_row("ingest", "", "", "[red]interrupted[/red]", f"resume: {escape(report['interrupted_ingest'])}")
    elif not report["stages"]:
        stages.add_row("(none)", "", "", "", "run `kgr ingest`")
    console.print(stages)
    for title, key in (("entities per type", "types"), ("relationships per relation", "relations")):
        if report[key]:
            named = report.get("type_names", {}) if key == "types" else None
            table = Table(title=title, title_justify="left")
            table.add_column(key[:-1], overflow="fold")
            table.add_column("count", justify="right", no_wrap=True)
            if named:
                table.add_column("named by", overflow="fold")  # the labels whose objects they are
            for name, count in report[key].items():
                table.add_row(escape(name), f"{count:,}", *([escape(", ".join(named.get(name, [])))] if named else []))
            console.print(table)
    console.print("on disk: " + ", ".join(f"{k} {_size(v)}" for k, v in report["disk_bytes"].items()))
    if report.get("pinned_settings"):
        console.print("kgr.toml sets, unlike this version's defaults: " + ", ".join(
            f"{escape(dotted)} = {escape(json.dumps(item['value']))} (default {escape(json.dumps(item['default']))})"
            for dotted, item in report["pinned_settings"].items()))
