"""README.md's "Your own graph" example, run as written: its files, its commands and the paths it says they print.

The example's fenced blocks follow a marker line `<!-- readme-example: NAME -->`: NAME is the file the block is
saved as (`books.csv`, `schema.toml`), or `commands` (the `kgr` lines to run, in order) or `output` (what the last
command prints). Offline policy, no API key; ~15-30 s, most of it loading the embedding model.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from kgr.errors import ExitStatus
from kgr.ingest.readers import FIELDS

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^<!-- readme-example: (?P<name>\S+) -->\n```[\w-]*\n(?P<body>.*?)^```$", re.S | re.M)
ANSWERS = ("Harbour Press", "Lantern Books")
# The tree's drawing characters, which depend on the order the paths are printed in.
TREE = "│├└─ "


def example(text: str) -> dict[str, str]:
    """The README's example blocks by name."""
    blocks: dict[str, str] = {}
    for match in BLOCK.finditer(text):
        assert match["name"] not in blocks, f"two README example blocks named {match['name']}"
        blocks[match["name"]] = match["body"]
    return blocks


def run_example(blocks: dict[str, str], folder: Path, run_kgr, monkeypatch) -> list:
    """Save the example's files in `folder` and run its commands there; return each command's result."""
    for name, body in blocks.items():
        if name not in ("commands", "output"):
            (folder / name).write_text(body, encoding="utf-8")
    monkeypatch.chdir(folder)
    results = []
    for line in blocks["commands"].splitlines():
        args = shlex.split(line, comments=True)
        if not args:
            continue
        assert args[0] == "kgr", f"README example command does not start with kgr: {line}"
        results.append(run_kgr(*args[1:]))
        if results[-1].exit_code != 0:
            break
    return results


def tree_lines(text: str) -> list[str]:
    """The lines of an `--explain` tree without their drawing characters, sorted."""
    return sorted(line.lstrip(TREE).rstrip() for line in text.splitlines() if line.strip())


def test_the_readme_example_runs_and_prints_what_the_readme_shows(run_kgr, tmp_path, monkeypatch):
    blocks = example(README.read_text(encoding="utf-8"))
    assert {"books.csv", "schema.toml", "commands", "output"} <= set(blocks), sorted(blocks)
    results = run_example(blocks, tmp_path, run_kgr, monkeypatch)
    for result in results:
        assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    assert len(results) >= 3 and (tmp_path / "books").is_dir()
    printed = results[-1].stdout
    assert all(answer in printed for answer in ANSWERS), printed
    assert all(answer in blocks["output"] for answer in ANSWERS)
    assert tree_lines(printed) == tree_lines(blocks["output"]), printed


def test_a_broken_example_fails(run_kgr, tmp_path, monkeypatch):
    """The check above is not vacuous: a misspelled column stops the example at its ingest (bad input)."""
    blocks = example(README.read_text(encoding="utf-8"))
    header = blocks["books.csv"].splitlines()[0]
    blocks["books.csv"] = blocks["books.csv"].replace(header, header.replace("object", "objekt"), 1)
    results = run_example(blocks, tmp_path, run_kgr, monkeypatch)
    assert len(results) == 1 and results[0].exit_code == ExitStatus.BAD_INPUT, results[0].stderr
    assert "books.csv:1:" in results[0].stderr  # the header line is named


def test_the_readme_names_only_real_columns():
    """The column table of "Your own graph" lists the readers' own field names."""
    text = README.read_text(encoding="utf-8")
    rows = re.findall(r"^\| (triple|relationship|entity) \|(.*)$", text, re.M)
    assert [kind for kind, _ in rows] == ["triple", "relationship", "entity"]
    for kind, row in rows:
        names = set(re.findall(r"`([a-z_]+)`", row))
        assert names and names <= set(FIELDS), (kind, sorted(names - set(FIELDS)))
