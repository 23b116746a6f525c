"""The options every command shares: `--set` on each one, and help texts that show what each option takes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer

from kgr.cli import app
from kgr.errors import ExitStatus
from kgr.ingest.formats import FORMATS


def commands() -> dict:
    return typer.main.get_command(app).commands


def test_every_command_takes_set():
    missing = [name for name, command in commands().items() if not any("--set" in p.opts for p in command.params)]
    assert not missing, f"commands without --set: {missing}"


def test_status_applies_set(metaqa_project, run_kgr):
    result = run_kgr("status", metaqa_project, "--set", "reach.max_hops=1", "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert json.loads(result.stdout)["project"] == str(metaqa_project)
    refused = run_kgr("status", metaqa_project, "--set", "reach.max_hops=0")  # applied, so checked: out of range
    assert refused.exit_code == ExitStatus.USAGE, (refused.stdout, refused.stderr)
    assert "reach.max_hops: 0 is out of range" in refused.stderr


# -- help texts -------------------------------------------------------------------------------------------------------
def shown_metavar(help_text: str, option: str) -> str:
    """The value placeholder shown beside `option` in a rich help table, its folded lines put back together."""
    lines = help_text.splitlines()
    row = next(n for n, line in enumerate(lines) if f" {option} " in line)
    after = lines[row].index(f" {option} ") + 1 + len(option)
    start = len(lines[row]) - len(lines[row][after:].lstrip())
    end = lines[row].index("  ", start)
    pieces = [lines[row][start:end]]
    for line in lines[row + 1:]:  # folded: the next lines carry the rest in the same column, nothing before it
        if line[:start].strip(" │") or not line[start:end].strip():
            break
        pieces.append(line[start:end].strip())
    return "".join(pieces)


@pytest.mark.parametrize("columns", ["80", "120"])
def test_help_shows_value_placeholders_and_no_bool(run_kgr, columns):
    for name in ["", *commands()]:
        result = run_kgr(*([name] if name else []), "--help", env={"COLUMNS": columns})
        assert result.exit_code == 0, (name, result.stderr)
        assert "<bool>" not in result.stdout and "<str>" not in result.stdout, (name, result.stdout)
        assert "<list[str]>" not in result.stdout, (name, result.stdout)
    ingest = run_kgr("ingest", "--help", env={"COLUMNS": columns}).stdout
    assert shown_metavar(ingest, "--format") == "[" + "|".join(FORMATS) + "]"
    assert shown_metavar(ingest, "--set") == "SECTION.KEY=VALUE"
    retrieve = run_kgr("retrieve", "--help", env={"COLUMNS": columns}).stdout
    assert shown_metavar(retrieve, "-m") == "[dotrag|csrag|bm25|vss|dpr]"
    assert (shown_metavar(retrieve, "--questions"), shown_metavar(retrieve, "--backbone")) == ("FILE", "MODEL")


def test_every_option_that_takes_a_value_names_it_and_flags_name_none():
    for name, command in commands().items():
        for param in command.params:
            if getattr(param, "is_flag", False) or not param.opts[0].startswith("--"):
                continue
            assert param.metavar, (name, param.opts)  # typer's own would be "<str>", "<list[str]>", ...


def test_an_unknown_format_is_a_usage_error_listing_the_formats(run_kgr, tmp_path):
    result = run_kgr("ingest", tmp_path / "p", tmp_path / "kb.txt", "--format", "xml")
    assert result.exit_code == ExitStatus.USAGE, (result.stdout, result.stderr)
    assert result.stderr.strip() == f"kgr: error: --format 'xml': choose from {', '.join(FORMATS)}"
    assert not (tmp_path / "p").exists()


def test_the_command_line_loads_no_numpy():
    """`kgr --help` stays fast: the lists of formats and methods shown in help come without their readers."""
    code = "import sys, kgr.cli; print([m for m in ('numpy', 'duckdb', 'kgr.ingest.sources', 'kgr.methods.runner') " \
           "if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr)
