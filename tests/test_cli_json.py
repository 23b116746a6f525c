"""`--json` on every command: each path a command can take prints one JSON value on stdout, messages go to stderr.

Driven through the real commands on a fresh tiny project: first runs and up-to-date reruns, `--show` views, a batch
retrieval, and a refused command (an error object on stdout beside the one-line error on stderr).
"""

from __future__ import annotations

import json

import pytest
import typer

from kgr.cli import app
from kgr.errors import ExitStatus

TRIPLES = """\
Acme Robotics|acquired|Bluefin Analytics
Acme Robotics|headquartered_in|Springfield
Bluefin Analytics|headquartered_in|Springfield
Corvid Labs|acquired|Delta Sensors
"""
QUESTIONS = [
    {"id": "q1", "question": "what did [Acme Robotics] acquire", "anchors": ["Acme Robotics"],
     "answers": ["Bluefin Analytics"], "hops": 1},
    {"id": "q2", "question": "which company acquired [Delta Sensors]", "anchors": ["Delta Sensors"],
     "answers": ["Corvid Labs"], "hops": 1},
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("json")
    (folder / "kb.txt").write_text(TRIPLES, encoding="utf-8")
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return folder


def json_out(result, status: int = 0):
    """The command's stdout as one JSON value (it must parse, whole)."""
    assert result.exit_code == status, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_every_json_path_prints_json_on_stdout(inputs, run_kgr, tmp_path):
    root = tmp_path / "project"
    kb, questions = inputs / "kb.txt", inputs / "questions.jsonl"
    exercised: set[str] = set()

    def run(name: str, *args, status: int = 0):
        exercised.add(name)
        return json_out(run_kgr(name, *args, "--json"), status)

    assert run("init", root) == {"config": str(root / "kgr.toml"), "created": True}
    assert run("init", root)["created"] is False
    first = run("ingest", root, kb)
    assert first["skipped"] is False and first["counts"]["relationships"] == 4
    assert run("ingest", root, kb)["skipped"] is True
    assert run("status", root)["stages"][0]["stage"] == "ingest"

    built = run("reach", root)
    assert built["up_to_date"] is False and built["num_entities"] == 5
    again = run("reach", root)  # nothing to do: still JSON, with the stored map's stats
    assert again["up_to_date"] is True and again["num_entities"] == 5 and again["max_hops"] == built["max_hops"]
    assert run("reach", root, "--show", "Acme Robotics")["entity"] == "Acme Robotics"

    assert run("overview", root)["up_to_date"] is False
    assert run("overview", root)["up_to_date"] is True
    assert "entities" in run("overview", root, "--show")["overview"]

    assert len(run("plan", root, "--questions", questions)) == 2
    assert run("retrieve", root, "--query", QUESTIONS[0]["question"])["id"] == "query"
    batch = run("retrieve", root, "--questions", questions)
    assert batch["run"] == "dotrag-offline" and (batch["retrieved"], batch["already_done"]) == (2, 0)
    resumed = run("retrieve", root, "--questions", questions)
    assert (resumed["retrieved"], resumed["already_done"]) == (0, 2)

    assert run("eval", root, "--questions", questions, "--run", "dotrag-offline")["runs"] == ["dotrag-offline"]
    damaged = run("perturb", root, tmp_path / "damaged", "--mode", "incomplete", "--ratio", "0.5")
    assert damaged["affected"] >= 1

    commands = typer.main.get_command(app).commands
    with_json = {name for name, command in commands.items() if any("--json" in p.opts for p in command.params)}
    assert exercised == with_json  # every command that takes --json was driven above


def test_a_refused_command_prints_an_error_object_with_json(run_kgr, tmp_path):
    result = run_kgr("status", tmp_path / "nowhere", "--json")
    error = json_out(result, ExitStatus.ERROR)
    assert error["exit_status"] == ExitStatus.ERROR and "not a kgr project" in error["error"]
    assert result.stderr.startswith("kgr: error: ") and "not a kgr project" in result.stderr
