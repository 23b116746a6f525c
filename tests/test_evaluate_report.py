"""Reports of kgr.evaluate.report: tables, JSON/CSV/Markdown files and PNG charts."""

from __future__ import annotations

import csv
import io
import struct

from rich.console import Console

from kgr.evaluate.metrics import Summary
from kgr.evaluate.report import (
    best_flags,
    method_colors,
    plot_curve,
    read_json,
    rich_tables,
    write_report,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def summary(recall, latency, calls, gp=0.4, passages=None):
    """Build a summary with the fields the report shows."""
    return Summary(
        n_questions=10,
        recall=recall,
        precision=recall / 2,
        f1=recall / 1.5,
        gp=gp,
        n_gp=8 if gp is not None else 0,
        passage_recall=passages or {},
        n_passages=10 if passages else 0,
        n_missing=1 if recall < 0.5 else 0,
        missing_ids=["q9"] if recall < 0.5 else [],
        llm_calls=calls,
        llm_calls_total=int(calls * 10),
        cost_usd_total=calls * 0.01,
        latency_ms_mean=latency * 1.2,
        latency_ms_median=latency,
        latency_ms_p95=latency * 3,
    )


ROWS = [
    ("dotrag", 1, summary(0.9, 4000.0, 5.0)),
    ("bm25", 1, summary(0.6, 12.0, 0.0, gp=None)),
    ("dotrag", 2, summary(0.8, 5000.0, 6.0, passages={2: 0.5, 5: 0.75})),
    ("bm25", 2, summary(0.4, 15.0, 0.0, passages={2: 0.25, 5: 0.5})),
    ("my method", "all", summary(0.7, 300.0, 1.0)),
]


def png_size(path):
    """Return (width, height) from a PNG header, checking the signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return struct.unpack(">II", data[16:24])


def test_best_flags():
    assert best_flags([0.5, 0.9, None, 0.9], "high") == [False, True, False, True]
    assert best_flags([3, 1, 2], "low") == [False, True, False]
    assert best_flags([0.0, 0.0], "low") == [False, False]  # no winner among equals
    assert best_flags([0.3, 0.7], None) == [False, False]


def test_rich_tables_mark_best():
    tables = rich_tables(ROWS, title="MetaQA")
    assert [t.title.split(" (n=")[0] for t in tables] == ["MetaQA — 1-hop", "MetaQA — 2-hop", "MetaQA — all"]
    console = Console(file=io.StringIO(), width=250, color_system=None)
    for table in tables:
        console.print(table)
    out = console.file.getvalue()
    dotrag, bm25 = (next(line for line in out.splitlines() if line.startswith(f"│ {m} ")) for m in ("dotrag", "bm25"))
    assert "0.900 ★" in dotrag and "0.600" in bm25 and "0.600 ★" not in bm25  # higher recall wins
    assert "12 ★" in bm25 and "4,000 ★" not in dotrag  # lower latency wins
    assert "PR@5" in out  # compact headers in the terminal
    full = Console(file=io.StringIO(), width=250, color_system=None)
    for table in rich_tables(ROWS, title="MetaQA", compact=False):
        full.print(table)
    assert "P-R@5" in full.file.getvalue()


def test_write_report_files(tmp_path):
    console = Console(file=io.StringIO(), width=250)
    paths = write_report(ROWS, tmp_path / "out", title="MetaQA test", console=console)
    assert set(paths) == {"json", "csv", "markdown", "recall_f1", "latency"}
    assert all(p.exists() and p.parent == tmp_path / "out" for p in paths.values())
    assert "MetaQA test" in console.file.getvalue()

    assert read_json(paths["json"]) == [(label, split, s) for label, split, s in ROWS]
    with paths["csv"].open(encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    assert [(r["label"], r["split"]) for r in lines] == [
        ("dotrag", "1-hop"), ("bm25", "1-hop"), ("dotrag", "2-hop"), ("bm25", "2-hop"), ("my method", "all"),
    ]  # fmt: skip
    assert lines[2]["passage_recall@5"] == "0.75" and lines[1]["missing_ids"] == ""

    md = paths["markdown"].read_text(encoding="utf-8")
    assert "## 2-hop" in md and "**0.900** ★" in md and "](recall_f1.png)" in md and "](latency.png)" in md
    assert "2-hop, bm25: 1 question(s) without a record" in md

    for key in ("recall_f1", "latency"):
        width, height = png_size(paths[key])
        assert width > 400 and height > 300 and paths[key].stat().st_size > 10_000


def test_plot_curve(tmp_path):
    series = {"dotrag": [(0.2, 0.8), (0.0, 0.9), (0.4, 0.6)], "vss": [(x / 20, 0.5 - x / 50) for x in range(20)]}
    path = plot_curve(series, "edge drop rate", "recall", "Robustness", tmp_path / "c" / "curve.png")
    width, height = png_size(path)
    assert width > 400 and height > 300 and path.stat().st_size > 10_000


def test_method_colors_are_stable():
    first = method_colors(["bm25", "dotrag-k10", "custom"])
    second = method_colors(["DotRAG (gpt-4o)", "custom", "CS-RAG"])
    assert first["dotrag-k10"] == second["DotRAG (gpt-4o)"]
    assert len(set(first.values())) == 3 and len(set(second.values())) == 3


def test_an_80_column_terminal_still_shows_the_method_names():
    # a real `kgr eval` of three runs piped to a file: at the table's measured minimum width rich collapsed the
    # method column to nothing
    from kgr.evaluate.report import print_tables

    def run(recall, precision, f1, latency):
        return Summary(n_questions=38, recall=recall, precision=precision, f1=f1, gp=None, n_gp=0,
                       answers_in_context=recall, n_context=38, latency_ms_median=latency)

    console = Console(file=io.StringIO(), width=80, color_system=None)
    print_tables([("fam-dotrag", "family", run(0.789, 0.382, 0.496, 18.0)),
                  ("fam-vss", "family", run(1.0, 0.029, 0.056, 22.0)),
                  ("fam-bm25", "family", run(0.842, 0.063, 0.114, 1.0))], console)
    out = console.file.getvalue()
    assert "method" in out and all(name in out for name in ("fam-dotrag", "fam-vss", "fam-bm25"))
    assert console.width == 80  # the console is given back as it was


def test_terminal_table_shows_missing_unmatched_and_zero_columns():
    # An offline run: zero calls and tokens are worth showing, and so are missing and unmatched counts.
    offline = Summary(n_questions=5, recall=0.5, precision=0.5, f1=0.5, gp=None, n_gp=0, n_missing=2,
                      missing_ids=["a", "b"], n_unmatched=1, latency_ms_median=3.0)
    console = Console(file=io.StringIO(), width=250, color_system=None)
    for table in rich_tables([("bm25", "1-hop", offline)]):
        console.print(table)
    out = console.file.getvalue()
    header = next(line for line in out.splitlines() if "missing" in line)
    assert "unmatched" in header and "calls" in header and "tok in" in header
    row = next(line for line in out.splitlines() if line.startswith("│ bm25 "))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells[:3] == ["bm25", "2", "1"] and "0.0" in cells  # missing 2, unmatched 1, calls 0.0
