"""Reports over scored runs: rich tables, JSON, CSV, Markdown and PNG charts.

A report takes rows `(label, split, summary)`: the run label (usually the method), the hop split
(`2` or `"2-hop"`, or `"all"`) and its `Summary`. Methods appear side by side per split, in row order.
matplotlib is imported lazily and drawn through its Agg canvas, never through pyplot's global state.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from kgr.evaluate.metrics import Summary

Row = tuple[str, str | int, Summary]

STAR = "★"
# Fixed colors (tab10 indices) for the methods kgr ships, so a method looks the same in every chart.
_KNOWN_COLORS = {"dotrag": 0, "csrag": 1, "bm25": 2, "vss": 3}
_TAB10 = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


@dataclass(frozen=True)
class Column:
    """A table column: how to read, format and rank a value (`better` is "high", "low" or None)."""

    header: str
    get: Callable[[Summary], float | int | None]
    fmt: Callable[[float], str]
    better: str | None = None


def split_label(split: str | int) -> str:
    """Spell a hop split for display: 2 becomes `2-hop`, strings pass through."""
    return f"{split}-hop" if isinstance(split, int) else str(split)


def columns(summaries: Iterable[Summary]) -> list[Column]:
    """Return the columns worth showing for these summaries (those no summary has a value for are dropped)."""
    summaries = list(summaries)
    ks = sorted({k for s in summaries for k in s.passage_recall})
    ratio, count = "{:.3f}".format, "{:,.0f}".format
    candidates = [
        Column("n", lambda s: s.n_questions, count),
        Column("missing", lambda s: s.n_missing, count),
        Column("mismatched", lambda s: s.n_mismatched, count),
        Column("unmatched", lambda s: s.n_unmatched, count),
        Column("Recall ↑", lambda s: s.recall, ratio, "high"),
        Column("Precision ↑", lambda s: s.precision, ratio, "high"),
        Column("F1 ↑", lambda s: s.f1, ratio, "high"),
        Column("GP ↑", lambda s: s.gp, ratio, "high"),
        Column("GP n", lambda s: s.n_gp if s.gp is not None else None, count),
        Column("Ans in ctx ↑", lambda s: s.answers_in_context, ratio, "high"),
        *(Column(f"P-R@{k} ↑", lambda s, k=k: s.passage_recall.get(k), ratio, "high") for k in ks),
        Column("calls/q ↓", lambda s: s.llm_calls, "{:,.1f}".format, "low"),
        Column("prompt tok/q ↓", lambda s: s.prompt_tokens, count, "low"),
        Column("compl tok/q ↓", lambda s: s.completion_tokens, count, "low"),
        Column("cost $ ↓", lambda s: s.cost_usd_total, "{:,.4f}".format, "low"),
        Column("lat med ms ↓", lambda s: s.latency_ms_median, count, "low"),
        Column("lat p95 ms ↓", lambda s: s.latency_ms_p95, count, "low"),
        Column("lat mean ms ↓", lambda s: s.latency_ms_mean, count, "low"),
    ]
    return [c for c in candidates if any(c.get(s) is not None for s in summaries)]


def grouped(rows: Iterable[Row]) -> dict[str, list[tuple[str, Summary]]]:
    """Group rows by displayed split, keeping first-appearance order of splits and methods."""
    out: dict[str, list[tuple[str, Summary]]] = {}
    for label, split, summary in rows:
        out.setdefault(split_label(split), []).append((label, summary))
    return out


def best_flags(values: list[float | int | None], better: str | None) -> list[bool]:
    """Mark the best values (ties included); nothing is marked when fewer than two values differ."""
    present = [v for v in values if v is not None]
    if better is None or len(set(present)) < 2:
        return [False] * len(values)
    best = max(present) if better == "high" else min(present)
    return [v is not None and v == best for v in values]


def table_cells(entries: list[tuple[str, Summary]]) -> tuple[list[Column], list[list[tuple[str, bool]]]]:
    """Return the columns and, per method, (formatted value, is best) cells for one split."""
    cols = columns(s for _, s in entries)
    flags = [best_flags([c.get(s) for _, s in entries], c.better) for c in cols]
    cells = []
    for row, (_, summary) in enumerate(entries):
        values = [c.get(summary) for c in cols]
        cells.append(
            [("–" if v is None else c.fmt(v), flags[j][row]) for j, (c, v) in enumerate(zip(cols, values))]
        )
    return cols, cells


# The columns a terminal table shows (the report files hold them all), with headers short enough for 80 columns.
TERMINAL_COLUMNS = {"missing": "missing", "unmatched": "unmatched", "Recall ↑": "R", "Precision ↑": "P", "F1 ↑": "F1", "GP ↑": "GP",
                    "Ans in ctx ↑": "Ans", "P-R@5 ↑": "PR@5", "calls/q ↓": "calls", "prompt tok/q ↓": "tok in",
                    "lat med ms ↓": "ms p50"}


def rich_tables(rows: Iterable[Row], title: str = "", compact: bool = True) -> list:
    """Build one rich Table per hop split with methods side by side and the best per column in bold ★."""
    from rich.table import Table
    from rich.text import Text

    tables = []
    for split, entries in grouped(rows).items():
        cols, cells = table_cells(entries)
        # Zero columns stay (0 missing, 0 calls say something); `columns` already dropped those with no values.
        shown = [j for j, c in enumerate(cols) if not compact or c.header in TERMINAL_COLUMNS]
        sizes = sorted({summary.n_questions for _, summary in entries})
        name = f"{split} (n={'/'.join(map(str, sizes))})" if compact else split
        table = Table(title=f"{title} — {name}" if title else name, title_style="bold", show_lines=False,
                      caption="missing: questions without a record, unmatched: records naming a mention no entity "
                      "matched; R recall, P precision, GP golden proximity, Ans answers in context; per question"
                      if compact else None)
        # In the terminal the method name folds onto two lines rather than squeezing the numbers.
        table.add_column("method", style="cyan", no_wrap=not compact, overflow="fold",
                         min_width=12 if compact else None)
        for j in shown:
            table.add_column(TERMINAL_COLUMNS[cols[j].header] if compact else cols[j].header, justify="right",
                             no_wrap=True)
        for (label, _), row in zip(entries, cells):
            table.add_row(
                label,
                *(Text(f"{row[j][0]} {STAR}", style="bold green") if row[j][1] else Text(row[j][0]) for j in shown),
            )
        tables.append(table)
    return tables


def print_tables(rows: Iterable[Row], console=None, title: str = "") -> None:
    """Print the per-split tables to a rich console (stdout by default)."""
    from rich.console import Console

    from rich.measure import Measurement

    console = console or Console()
    for table in rich_tables(rows, title):
        # Never squeeze a column below its content: at its measured minimum width rich still collapses the method
        # column to nothing (three runs piped at 80 columns), so a table wider than the terminal is printed at its
        # natural width and wraps.
        needed = Measurement.get(console, console.options.update_width(10_000), table).maximum
        width = console.width
        console.width = max(width, needed)
        try:
            console.print(table)
        finally:
            console.width = width


def write_json(rows: Iterable[Row], path: str | Path, title: str = "") -> Path:
    """Write the rows with full summaries as JSON (readable back with `read_json`)."""
    path = Path(path)
    data = {
        "title": title,
        "rows": [{"label": label, "split": split, "summary": s.to_dict()} for label, split, s in rows],
    }
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def read_json(path: str | Path) -> list[Row]:
    """Read rows written by `write_json`."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [(r["label"], r["split"], Summary.from_dict(r["summary"])) for r in data["rows"]]


def write_csv(rows: Iterable[Row], path: str | Path) -> Path:
    """Write one CSV line per (label, split) with every summary field flattened."""
    path = Path(path)
    rows = list(rows)
    ks = sorted({k for _, _, s in rows for k in s.passage_recall})
    flat = []
    for label, split, summary in rows:
        data = summary.to_dict()
        recall_at = data.pop("passage_recall")
        data["missing_ids"] = " ".join(data["missing_ids"])
        data.update({f"passage_recall@{k}": recall_at.get(str(k)) for k in ks})
        flat.append({"label": label, "split": split_label(split), **data})
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(flat[0]) if flat else ["label", "split"])
        writer.writeheader()
        writer.writerows(flat)
    return path


def markdown(rows: Iterable[Row], title: str = "kgr evaluation", charts: Iterable[tuple[str, str]] = ()) -> str:
    """Render the report as Markdown: a table per split (best in bold ★), missing questions, chart links."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    legend = f"↑ higher is better, ↓ lower is better, {STAR} best per column."
    lines = [f"# {title}", "", f"Generated {stamp}. {legend}", ""]
    missing_notes = []
    for split, entries in grouped(rows).items():
        cols, cells = table_cells(entries)
        lines += [f"## {split}", "", "| method | " + " | ".join(c.header for c in cols) + " |"]
        lines.append("|---|" + "---:|" * len(cols))
        for (label, summary), row in zip(entries, cells):
            shown = (f"**{text}** {STAR}" if best else text for text, best in row)
            lines.append(f"| {_md_escape(label)} | " + " | ".join(shown) + " |")
            if summary.n_missing:
                other = f" ({summary.n_mismatched} with a record of another question text)" if summary.n_mismatched else ""
                missing_notes.append(
                    f"- {split}, {_md_escape(label)}: {summary.n_missing} question(s) without a record{other}"
                )
        lines.append("")
    if missing_notes:
        lines += ["## Missing records", "", "Scored as retrieving nothing.", "", *missing_notes, ""]
    charts = list(charts)
    if charts:
        lines += ["## Charts", ""]
        lines += [f"![{caption}]({target})\n" for caption, target in charts]
    lines += [
        "## Metrics",
        "",
        "R' = R \\ (I \\ A): retrieved entities minus gold intermediates that are not answers. "
        "Recall = |R'∩A|/|A|, Precision = |R'∩A|/|R'|, F1 their harmonic mean, "
        "GP (golden proximity) = |R∩I|/|I| over questions with intermediates (GP n). "
        "Macro-averaged over questions; cost and calls are per question, cost $ is the run total.",
        "",
    ]
    return "\n".join(lines)


def write_markdown(rows: Iterable[Row], path: str | Path, title: str = "kgr evaluation", charts=()) -> Path:
    """Write the Markdown report; chart paths are made relative to the report's folder."""
    path = Path(path)
    links = [(caption, _relative(Path(chart), path.parent)) for caption, chart in charts]
    path.write_text(markdown(rows, title, links), encoding="utf-8")
    return path


def method_colors(labels: Iterable[str]) -> dict[str, str]:
    """Assign each label a color: shipped methods keep fixed colors, others take the rest in order."""
    labels = list(dict.fromkeys(labels))
    fixed = {label: _TAB10[_KNOWN_COLORS[_base(label)]] for label in labels if _base(label) in _KNOWN_COLORS}
    # Other labels never borrow a shipped method's color, even when that method is absent from this chart.
    free = [c for i, c in enumerate(_TAB10) if i not in _KNOWN_COLORS.values()]
    others = [label for label in labels if label not in fixed]
    return {label: fixed.get(label) or free[others.index(label) % len(free)] for label in labels}


def plot_hop_metrics(rows: Iterable[Row], path: str | Path, title: str = "Recall and F1 by hop split") -> Path:
    """Draw grouped bars of recall and F1 per hop split, one bar color per method."""
    rows = list(rows)
    groups = grouped(rows)
    splits = list(groups)
    methods = list(dict.fromkeys(label for label, _, _ in rows))
    colors = method_colors(methods)
    fig = _figure(width=max(8.0, 2.2 + 1.6 * len(splits) * max(1, len(methods)) / 2), height=4.8, ncols=2)
    for ax, (metric, name) in zip(fig.axes, (("recall", "Recall"), ("f1", "F1"))):
        values = {m: [_value(groups[s], m, lambda x: getattr(x, metric)) for s in splits] for m in methods}
        _grouped_bars(ax, splits, values, colors, lambda v: f"{v:.2f}")
        ax.set_ylim(0, 1.12)
        ax.set_title(name)
        ax.set_xlabel("hop split")
        ax.set_ylabel(f"{name} (macro average)")
    _finish(fig, title, methods, colors)
    return _save(fig, path)


def plot_latency(rows: Iterable[Row], path: str | Path, title: str = "Retrieval latency per question") -> Path:
    """Draw median latency bars with a p95 whisker, per hop split and method."""
    rows = list(rows)
    groups = grouped(rows)
    splits = list(groups)
    methods = list(dict.fromkeys(label for label, _, _ in rows))
    colors = method_colors(methods)
    medians = {m: [_value(groups[s], m, lambda x: x.latency_ms_median) for s in splits] for m in methods}
    p95s = {m: [_value(groups[s], m, lambda x: x.latency_ms_p95) for s in splits] for m in methods}
    fig = _figure(width=max(7.0, 2.0 + 1.4 * len(splits) * max(1, len(methods)) / 2), height=4.8)
    ax = fig.axes[0]
    positions = _grouped_bars(ax, splits, medians, colors, _ms, inside=True)
    for m in methods:
        for x, med, p95 in zip(positions[m], medians[m], p95s[m]):
            if med is None or p95 is None:
                continue
            ax.errorbar(x, med, yerr=[[0], [max(p95 - med, 0)]], fmt="none", ecolor="#333333", capsize=4, lw=1)
            ax.annotate(f"p95 {_ms(p95)}", (x, p95), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7, color="#333333")  # fmt: skip
    present = [v for series in (*medians.values(), *p95s.values()) for v in series if v]
    if present and max(present) / min(present) > 50:
        # Methods differ by orders of magnitude (BM25 vs LLM-guided search); a log axis keeps both readable.
        ax.set_yscale("log")
        ax.set_ylim(min(present) / 2, max(present) * 4)
    elif present:
        ax.set_ylim(0, max(present) * 1.2)
    ax.set_xlabel("hop split")
    ax.set_ylabel("latency per question (ms)")
    ax.set_title("bar: median, whisker: p95", fontsize=9, color="#555555")
    _finish(fig, title, methods, colors)
    return _save(fig, path)


def plot_curve(
    series: dict[str, list[tuple[float, float]]], xlabel: str, ylabel: str, title: str, path: str | Path
) -> Path:
    """Draw one line per label through its (x, y) points, e.g. a robustness curve."""
    colors = method_colors(series)
    fig = _figure(width=7.5, height=4.8)
    ax = fig.axes[0]
    for label, points in series.items():
        points = sorted(points)
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, marker="o", color=colors[label], label=label, lw=2, ms=5)
        # Label every point while that stays legible, else only the ends of each line.
        shown = points if len(points) <= 12 else [points[0], points[-1]]
        for x, y in shown:
            ax.annotate(_short(y), (x, y), xytext=(0, 6), textcoords="offset points",
                        ha="center", fontsize=7, color=colors[label])  # fmt: skip
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.05, y=0.12)
    _finish(fig, title, list(series), colors, lines=True)
    return _save(fig, path)


def write_report(
    rows: Iterable[Row], out_dir: str | Path, title: str = "kgr evaluation", console=None
) -> dict[str, Path]:
    """Write JSON, CSV, Markdown and the PNG charts into `out_dir`; print the tables when given a console."""
    rows = list(rows)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": write_json(rows, out / "summary.json", title),
        "csv": write_csv(rows, out / "summary.csv"),
        "recall_f1": plot_hop_metrics(rows, out / "recall_f1.png"),
        "latency": plot_latency(rows, out / "latency.png"),
    }
    charts = [("Recall and F1 by hop split", paths["recall_f1"]), ("Retrieval latency", paths["latency"])]
    paths["markdown"] = write_markdown(rows, out / "report.md", title, charts)
    if console is not None:
        print_tables(rows, console, title)
    return paths


def _base(label: str) -> str:
    """Return a label's method name: `DotRAG-k10 (gpt-4o)` gives `dotrag`, `CS-RAG` gives `csrag`."""
    match = re.match(r"[a-z0-9]+", label.casefold().replace("cs-rag", "csrag"))
    return match.group(0) if match else ""


def _value(entries: list[tuple[str, Summary]], label: str, get) -> float | None:
    """Read a value for one method from a split's entries (None when the method is absent)."""
    return next((get(s) for name, s in entries if name == label), None)


def _grouped_bars(
    ax, groups: list[str], values: dict[str, list[float | None]], colors, fmt, inside: bool = False
) -> dict[str, list[float]]:
    """Draw bars grouped by x category with value labels (above, or inside); return the bars' x positions."""
    from matplotlib import patheffects

    n = max(1, len(values))
    width = 0.8 / n
    positions = {}
    for i, (label, series) in enumerate(values.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        heights = [math.nan if v is None else v for v in series]
        bars = ax.bar(xs, heights, width * 0.92, color=colors[label], label=label)
        texts = ax.bar_label(
            bars,
            labels=["" if v is None else fmt(v) for v in series],
            label_type="center" if inside else "edge",
            padding=0 if inside else 2,
            fontsize=7,
        )
        # A white outline keeps labels legible on any bar color and across whisker lines.
        for text in texts:
            text.set_path_effects([patheffects.withStroke(linewidth=2.5, foreground="white")])
        positions[label] = xs
    ax.set_xticks(range(len(groups)), groups)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return positions


def _figure(width: float, height: float, ncols: int = 1):
    """Create a figure on the Agg canvas without touching pyplot's global state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(min(width, 16.0), height), dpi=110)
    FigureCanvasAgg(fig)
    fig.subplots(1, ncols)
    return fig


def _finish(fig, title: str, labels: list[str], colors: dict[str, str], lines: bool = False) -> None:
    """Add the title and one shared legend (bar swatches, or line samples) above the plots."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig.suptitle(title, fontsize=13, fontweight="bold")
    handles = [
        Line2D([], [], color=colors[label], marker="o", lw=2, label=label)
        if lines
        else Patch(color=colors[label], label=label)
        for label in labels
    ]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.945), ncols=min(len(labels), 6),
               frameon=False, fontsize=9)  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 0.93))


def _save(fig, path: str | Path) -> Path:
    """Save a figure as PNG, creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _ms(value: float) -> str:
    """Format milliseconds compactly (seconds from 1 s up)."""
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


def _short(value: float) -> str:
    """Format a curve value with three significant digits."""
    return f"{value:.3g}"


def _md_escape(text: str) -> str:
    """Escape the pipe so a label cannot break a Markdown table row."""
    return str(text).replace("|", "\\|")


def _relative(target: Path, start: Path) -> str:
    """Return target relative to start when possible (a POSIX path for Markdown links)."""
    try:
        return target.resolve().relative_to(start.resolve()).as_posix()
    except ValueError:
        return target.resolve().as_posix()
