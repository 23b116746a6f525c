"""The options every command shares: `--set` on each one, and help texts that show what each option takes."""

from __future__ import annotations

import json

import typer

from kgr.cli import app
from kgr.errors import ExitStatus


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
