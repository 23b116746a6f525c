"""`kgr ingest` as a new user meets it: a refused first ingest leaves no half project behind."""

from __future__ import annotations

import pytest

import kgr.ingest.stage as stage
from kgr.errors import ExitStatus

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


def test_an_interrupted_first_ingest_removes_the_directory_it_created(files, run_kgr, monkeypatch):
    written = []

    def interrupted(directory, name, *args, **kwargs):
        written.append(name)
        raise KeyboardInterrupt

    monkeypatch.setattr(stage, "write_vector_table", interrupted)
    root = files / "new-dir"
    refused(run_kgr("ingest", root, files / "kb.txt"), ExitStatus.INTERRUPTED)
    assert written == ["entities"]  # it got as far as embedding (a vectors generation existed)
    assert not root.exists()
