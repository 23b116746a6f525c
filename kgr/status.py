"""What `kgr status` reports: stages, graph counts by type and relation, sizes on disk."""

from __future__ import annotations

from typing import Any

from kgr.project import Project


def project_status(project: Project) -> dict[str, Any]:
    """A JSON-able description of the project's state."""
    report: dict[str, Any] = {"project": str(project.root), "stages": [], "types": {}, "relations": {},
                              "disk_bytes": project.disk_usage()}
    if project.last_run("ingest") is None and (resume := project.started_ingest_command()):
        report["interrupted_ingest"] = resume  # the command that resumes it
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
    return report


def _size(value: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return str(value)


def render_status(report: dict[str, Any], console) -> None:
    """Print the status report as rich tables; a value too wide for its column wraps, it is never cut short."""
    from rich.markup import escape
    from rich.table import Table

    # Names and counts come from the user's data: escaped, so "[x]" in them is shown rather than read as markup.
    stages = Table(title=f"kgr project {escape(report['project'])}", title_justify="left")
    for column in ("stage", "ran at", "took", "state", "counts"):
        stages.add_column(column, overflow="fold")
    for stage in report["stages"]:
        counts = "\n".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in stage["counts"].items())
        state = stage["state"] if stage["state"] == "current" else f"[red]stale: {escape(stage['state'])}[/red]"
        ran_at = stage["ran_at"].replace("T", " ")  # a space lets a narrow column wrap between date and time
        stages.add_row(stage["stage"], ran_at, f"{stage['duration_s']:.1f}s", state, escape(counts))
    if report.get("interrupted_ingest"):
        stages.add_row("ingest", "", "", "[red]interrupted[/red]", f"resume: {escape(report['interrupted_ingest'])}")
    elif not report["stages"]:
        stages.add_row("(none)", "", "", "", "run `kgr ingest`")
    console.print(stages)
    for title, key in (("entities per type", "types"), ("relationships per relation", "relations")):
        if report[key]:
            table = Table(title=title, title_justify="left")
            table.add_column(key[:-1], overflow="fold")
            table.add_column("count", justify="right", overflow="fold")
            for name, count in report[key].items():
                table.add_row(escape(name), f"{count:,}")
            console.print(table)
    console.print("on disk: " + ", ".join(f"{k} {_size(v)}" for k, v in report["disk_bytes"].items()))
