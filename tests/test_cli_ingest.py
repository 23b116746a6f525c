"""`kgr ingest` as a new user meets it: a refused first ingest leaves no half project behind, and a killed one
is named, inputs and flags, in the hints of later commands."""

from __future__ import annotations

import json
import shlex

import pytest

import kgr.ingest.stage as stage
from kgr.errors import ExitStatus
from test_probes_cli import SCHEMA  # the companies graph's schema

TRIPLES = """\
Acme Robotics|acquired|Bluefin Analytics
Acme Robotics|headquartered_in|Springfield
"""


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "kb.txt").write_text(TRIPLES, encoding="utf-8")
    return tmp_path


def contents(folder) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def refused(result, status: ExitStatus = ExitStatus.BAD_INPUT):
    assert result.exit_code == status, (result.exit_code, result.stdout, result.stderr)
    return result


# -- a refused first ingest ---------------------------------------------------------------------------------------------
def test_a_refused_first_ingest_removes_the_directory_it_created(files, run_kgr):
    root = files / "new-dir"
    refused(run_kgr("ingest", root, files / "empty.txt"))
    assert not root.exists()
    nested = files / "a" / "b" / "project"  # parents created for it go too
    refused(run_kgr("ingest", nested, files / "empty.txt"))
    assert not (files / "a").exists()


def test_a_refused_first_ingest_empties_the_empty_directory_it_was_given(files, run_kgr):
    root = files / "made-by-the-user"
    root.mkdir()
    refused(run_kgr("ingest", root, files / "empty.txt"))
    assert root.is_dir() and not any(root.iterdir())


def test_a_refused_ingest_keeps_what_was_there(files, run_kgr):
    root = files / "notes"
    root.mkdir()
    (root / "mine.txt").write_text("the user's own file", encoding="utf-8")
    refused(run_kgr("ingest", root, files / "empty.txt"))
    assert (root / "mine.txt").read_text(encoding="utf-8") == "the user's own file"

    project = files / "project"
    assert run_kgr("ingest", project, files / "kb.txt", "--quiet").exit_code == 0
    before = contents(project)
    refused(run_kgr("ingest", project, files / "empty.txt", "--replace"))
    assert contents(project).keys() == before.keys()


def test_an_interrupted_first_ingest_keeps_its_checkpoint_and_names_the_command_that_resumes_it(
        files, run_kgr, monkeypatch):
    # unlike a refusal, an interrupt (Ctrl-C on a long first ingest) keeps the encoded vectors: rerunning resumes
    written = []

    def interrupted(directory, name, *args, **kwargs):
        written.append(name)
        raise KeyboardInterrupt

    monkeypatch.setattr(stage, "write_vector_table", interrupted)
    root = files / "new-dir"
    refused(run_kgr("ingest", root, files / "kb.txt"), ExitStatus.INTERRUPTED)
    assert written == ["entities"]  # it got as far as embedding (a vectors generation existed)
    assert (root / "kgr.toml").exists() and not (root / "kgr.duckdb").exists()  # a checkpoint, once encoded
    assert "resume it with `kgr ingest" in refused(run_kgr("reach", root), ExitStatus.STALE).stderr


# -- a killed first ingest ------------------------------------------------------------------------------------------


def test_a_later_command_names_the_command_that_resumes_a_killed_first_ingest(files, run_kgr, monkeypatch):
    monkeypatch.chdir(files)
    (files / "my data").mkdir()
    (files / "my data" / "kb.txt").write_text(TRIPLES, encoding="utf-8")
    (files / "schema.toml").write_text(SCHEMA, encoding="utf-8")
    # A directory that existed keeps what an interrupted ingest left in it, as a killed one does (the started
    # marker and a vectors generation; no database).
    assert run_kgr("init", "project", "--quiet").exit_code == 0

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(stage, "write_vector_table", killed)
    given = ("my data/kb.txt", "--schema", "schema.toml", "--set", "embedding.batch_size=8")
    refused(run_kgr("ingest", "project", *given), ExitStatus.INTERRUPTED)
    monkeypatch.undo()
    monkeypatch.chdir(files)
    assert not (files / "project" / "kgr.duckdb").exists()

    resume = "kgr ingest project 'my data/kb.txt' --schema schema.toml --set embedding.batch_size=8"
    for args in (("reach", "project"), ("retrieve", "project", "--query", "what did [Acme Robotics] acquire"),
                 ("reach", "project", "--show", "Acme Robotics")):
        result = refused(run_kgr(*args), ExitStatus.STALE)
        assert f"resume it with `{resume}`" in result.stderr, (args, result.stderr)
    status = run_kgr("status", "project", "--json")
    assert status.exit_code == 0 and json.loads(status.stdout)["interrupted_ingest"] == resume
    assert f"resume: {resume}" in " ".join(run_kgr("status", "project", env={"COLUMNS": "200"}).stdout.split())

    assert run_kgr(*shlex.split(resume)[1:], "--quiet").exit_code == 0  # the named command resumes it
    assert run_kgr("reach", "project", "--quiet").exit_code == 0
    assert "interrupted_ingest" not in json.loads(run_kgr("status", "project", "--json").stdout)


def test_without_a_started_ingest_the_hint_names_the_graph_files_to_give(files, run_kgr):
    root = files / "project"
    assert run_kgr("init", root, "--quiet").exit_code == 0
    result = refused(run_kgr("reach", root), ExitStatus.STALE)
    assert f"run `kgr ingest {root} GRAPH_FILE...` first" in result.stderr


# -- one name, entities of different types ------------------------------------------------------------------------------
def test_names_shared_by_entities_of_different_types_are_reported(files, run_kgr):
    entities = [{"id": "p1", "name": "Jordan Lee", "type": "person"},
                {"id": "c1", "name": "Jordan Lee", "type": "city"},
                {"id": "p2", "name": "Sam Park", "type": "person"},
                {"id": "p3", "name": "Sam Park", "type": "person"},  # two people of one name and type: not reported
                {"id": "f1", "name": "Mercury", "type": "planet"},
                {"id": "f2", "name": "Mercury", "types": ["element", "metal"]}]
    edges = [("p1", "born_in", "c1"), ("p2", "born_in", "c1"), ("p3", "knows", "p1"), ("f2", "named_after", "f1")]
    (files / "entities.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entities), encoding="utf-8")
    (files / "relationships.jsonl").write_text("".join(
        json.dumps({"source": s, "relation": r, "target": t}) + "\n" for s, r, t in edges), encoding="utf-8")
    args = ("ingest", files / "project", files / "entities.jsonl", files / "relationships.jsonl")

    result = run_kgr(*args)
    assert result.exit_code == 0, result.stderr
    warning = " ".join(result.stderr.split())
    assert ("warning: 2 names given to entities of different types, kept as separate entities: "
            "'Jordan Lee' (city / person); 'Mercury' (element, metal / planet)") in warning
    report = json.loads(run_kgr(*args, "--force", "--json").stdout)
    assert report["counts"]["names_with_several_types"] == 2 and report["counts"]["entities"] == 6
    assert report["names_with_several_types"] == ["'Jordan Lee' (city / person)", "'Mercury' (element, metal / planet)"]
