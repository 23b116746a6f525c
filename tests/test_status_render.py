"""`kgr status` in a narrow terminal: names and text fold in their columns, every number is printed whole."""

from __future__ import annotations

import json
import re

import pytest
from rich.console import Console

from kgr.status import render_status


def shown_whole(number: str, text: str) -> bool:
    """Whether `number` is printed on one line, not as part of a longer number."""
    pattern = re.compile(rf"(?<![\d.,]){re.escape(number)}(?![\d.,])")
    return any(pattern.search(line) for line in text.splitlines())


def numbers_of(report: dict) -> list[str]:
    """Every number of a status report as status prints it."""
    shown = []
    for stage in report["stages"]:
        shown.append(f"{stage['duration_s']:.1f}s")
        for value in stage["counts"].values():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            shown.append(f"{value:,}" if isinstance(value, int) else f"{round(value, 3):,}")
    shown += [f"{count:,}" for key in ("types", "relations") for count in report[key].values()]
    return shown


def test_status_at_80_columns_prints_every_number_whole(metaqa_project, run_kgr):
    report = json.loads(run_kgr("status", metaqa_project, "--json").stdout)
    result = run_kgr("status", metaqa_project, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    broken = [number for number in numbers_of(report) if not shown_whole(number, result.stdout)]
    assert not broken, result.stdout


@pytest.mark.parametrize("width", [60, 80])
def test_long_names_and_large_numbers_fold_the_names_only(width):
    counts = {"entities": 1_234_567_890, "relationship_source_passages_of_long_name": 987_654_321,
              "build_seconds": 0.011261707999892678, "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
              "perturbed_from": "/a/rather/long/path/to/the/source/project/directory"}
    report = {"project": "/p", "stages": [{"stage": "ingest", "ran_at": "2026-12-04T08:53:59+00:00",
                                           "duration_s": 1234.5, "state": "current", "counts": counts}],
              "types": {"a_type_with_a_rather_long_name_indeed": 123_456_789}, "relations": {"r": 42},
              "disk_bytes": {"database": 1}}
    console = Console(width=width, record=True, soft_wrap=True)
    render_status(report, console)
    text = console.export_text()
    assert "…" not in text
    for number in numbers_of(report):
        assert shown_whole(number, text), (number, text)


def test_status_names_each_type_by_the_labels_whose_objects_its_members_are(metaqa_project, run_kgr):
    from kgr.project import Project
    from kgr.store import GraphStore

    report = json.loads(run_kgr("status", metaqa_project, "--json").stdout)
    with Project.open(metaqa_project) as project:
        store = GraphStore(project)
        expected = {t: labels for t, labels in zip(store.type_names, store.type_naming_labels) if labels}
    assert report["type_names"] == expected and report["type_names"]["director"] == ["directed_by"]
    assert "movie" not in report["type_names"]  # a movie is the object of no relation: nothing names it
    shown = run_kgr("status", metaqa_project, env={"COLUMNS": "120"}).stdout
    assert "named by" in shown and re.search(r"director\s.*directed_by", shown)
