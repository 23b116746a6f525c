"""Probes (issue #16, items 3, 4, 6) driving the real `kgr ingest` on a fresh 52-triple project: strict reading,
no silent replacement of the graph by a second ingest, `--append`, and a killed ingest that resumes its embedding."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from kgr.embed import CHECKPOINT_DIR, Encoder, load_vectors
from kgr.errors import ExitStatus
from kgr.project import Project

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "fixtures" / "metaqa" / "kb.txt"
BAD = ROOT / "fixtures" / "formats" / "bad"
TRIPLES = 52


def error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def files(root: Path) -> dict[str, str]:
    """Content hash of every file of the project, leaving out the lock files and readers' snapshots (not state)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".kgr") and "snapshots" not in p.relative_to(root).parts}


def status_counts(run_kgr, root: Path) -> dict:
    result = run_kgr("status", root, "--json")
    assert result.exit_code == 0, result.stderr
    return {stage["stage"]: stage["counts"] for stage in json.loads(result.stdout)["stages"]}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    kb = folder / "kb.txt"
    kb.write_text("".join(KB.read_text(encoding="utf-8").splitlines(keepends=True)[:TRIPLES]), encoding="utf-8")
    other = folder / "other.csv"
    other.write_text("subject,relation,object\nZebra Film,directed_by,Zed Director\n", encoding="utf-8")
    return {"kb": kb, "other": other}


@pytest.fixture(scope="module")
def project(tmp_path_factory, inputs, run_kgr) -> Path:
    """A fresh project holding the 52-triple graph (read-only for the tests; copy it to change it)."""
    root = tmp_path_factory.mktemp("probe") / "project"
    result = run_kgr("ingest", root, inputs["kb"], "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["counts"]["relationships"] == TRIPLES
    return root


@pytest.mark.parametrize(("name", "line", "words"), [
    ("extra_column.csv", 1, "unknown column(s) 'weight'"),
    ("conflicting_types.jsonl", 3, "repeats with type(s) producer"),
    ("header_only.tsv", 1, "no records: a header but no rows"),
    ("zero_bytes.txt", 1, "empty file (0 bytes)"),
])
def test_bad_input_exits_3_naming_file_and_line(tmp_path, run_kgr, name, line, words):
    result = run_kgr("ingest", tmp_path / "p", BAD / name)
    assert result.exit_code == ExitStatus.BAD_INPUT, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1 and lines[0].startswith(f"kgr: error: {BAD / name}:{line}: "), result.stderr
    assert words in lines[0]
    assert not (tmp_path / "p").exists()  # a refused first ingest leaves no half project


def test_unknown_column_names_the_known_ones_and_the_column_option(tmp_path, run_kgr):
    result = run_kgr("ingest", tmp_path / "p", BAD / "extra_column.csv")
    assert "known columns: subject, relation, object" in result.stderr and "--column" in result.stderr


def test_second_ingest_of_other_inputs_is_refused_and_changes_nothing(project, inputs, run_kgr):
    before_files, before_counts = files(project), status_counts(run_kgr, project)
    result = run_kgr("ingest", project, inputs["other"])
    assert result.exit_code == ExitStatus.USAGE, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert f"already holds a graph from kb.txt ({TRIPLES} relationships" in lines[0]
    assert "(other.csv)" in lines[0] and "--replace" in lines[0] and "--append" in lines[0]
    assert files(project) == before_files
    assert status_counts(run_kgr, project) == before_counts


def test_same_inputs_are_up_to_date(project, inputs, run_kgr):
    before = files(project)
    result = run_kgr("ingest", project, inputs["kb"])
    assert result.exit_code == 0 and "up to date" in result.stderr
    assert files(project) == before


def test_replace_and_append_together_are_a_usage_error(project, inputs, run_kgr):
    result = run_kgr("ingest", project, inputs["other"], "--replace", "--append")
    assert result.exit_code == ExitStatus.USAGE and "exclude each other" in result.stderr


def test_append_adds_the_new_records_and_encodes_only_their_texts(project, inputs, run_kgr, copy_project):
    root = copy_project(project, "append")
    before = status_counts(run_kgr, root)["ingest"]
    result = run_kgr("ingest", root, inputs["other"], "--append", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["counts"]["relationships"] == before["relationships"] + 1
    assert report["counts"]["entities"] == before["entities"] + 2
    assert report["encoded"] == 3  # two new entities and one new relationship; the rest is reused
    assert status_counts(run_kgr, root)["ingest"]["relationships"] == TRIPLES + 1
    # Both inputs are held now: rerunning either is up to date, and the graph keeps both.
    for path, flags in ((inputs["other"], ["--append"]), (inputs["kb"], [])):
        again = run_kgr("ingest", root, path, *flags)
        assert again.exit_code == 0 and "up to date" in again.stderr, again.stderr
    with Project.open(root) as opened:
        triples = opened.db.execute("SELECT count(*) FROM relationships WHERE relation = 'directed_by'").fetchone()
        assert ("Zebra Film",) in opened.db.execute("SELECT name FROM entities").fetchall()
    assert triples[0] >= 1
    # --replace brings back the graph of kb.txt alone.
    replaced = run_kgr("ingest", root, inputs["kb"], "--replace", "--json")
    assert replaced.exit_code == 0, replaced.stderr
    assert json.loads(replaced.stdout)["counts"]["relationships"] == TRIPLES
    assert json.loads(replaced.stdout)["encoded"] == 0


def test_killed_ingest_resumes_encoding_only_the_rest(project, inputs, run_kgr, tmp_path, monkeypatch):
    root = tmp_path / "killed"
    original = Encoder.encode
    calls = {"n": 0, "texts": 0}

    def interrupted_after_two_parts(self, texts, progress=None):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        calls["texts"] += len(texts)
        return original(self, texts, progress)

    monkeypatch.setattr(Encoder, "encode", interrupted_after_two_parts)
    # Batches of 8 texts, so a checkpoint part holds at most 32 texts: 50 entities and 52 relationships need 4 parts.
    small_batches = ("--set", "embedding.batch_size=8")
    # An interrupt (as a kill here) of a first ingest into a new directory removes it; `kgr init` first keeps it.
    assert run_kgr("init", root, "--quiet").exit_code == 0
    result = run_kgr("ingest", root, inputs["kb"], *small_batches)
    assert result.exit_code == ExitStatus.INTERRUPTED, result.stderr
    done = calls["texts"]
    assert done == 50 and (root / CHECKPOINT_DIR).exists()  # the entities' two parts
    with Project.open(root) as opened:
        assert opened.last_run("ingest") is None
    monkeypatch.setattr(Encoder, "encode", original)

    resumed = run_kgr("ingest", root, inputs["kb"], *small_batches, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    total = report["counts"]["entities"] + report["counts"]["relationships"]
    assert report["encoded"] == total - done
    assert not (root / CHECKPOINT_DIR).exists()
    with Project.open(root) as mine, Project.open(project) as clean:
        for name in ("entities", "relationships"):
            got = load_vectors(mine.artifact("ingest", "vectors"), name)
            want = load_vectors(clean.artifact("ingest", "vectors"), name)
            # float16 storage; batches of another size may round the last bit differently.
            assert got.shape == want.shape and np.allclose(got, want, atol=2e-3)


def test_appended_records_must_agree_with_the_graph(project, inputs, run_kgr, copy_project, tmp_path):
    root = copy_project(project, "append-conflict")
    before = files(root)
    entities = tmp_path / "entities.jsonl"
    first = inputs["kb"].read_text(encoding="utf-8").split("|", 1)[0]
    entities.write_text(json.dumps({"name": first, "type": "book"}) + "\n", encoding="utf-8")
    result = run_kgr("ingest", root, entities, "--append")
    assert result.exit_code == ExitStatus.BAD_INPUT, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1 and lines[0].startswith(f"kgr: error: {entities}:1: entity '{first}' repeats"), lines
    assert f"{root / 'kgr.duckdb'} gives" in lines[0]
    assert files(root) == before


def test_append_to_a_schema_typed_graph_needs_the_schema(metaqa_project, copy_project, inputs, run_kgr):
    root = copy_project(metaqa_project, "append-schema")
    before = files(root)
    result = run_kgr("ingest", root, inputs["other"], "--append")
    assert result.exit_code == ExitStatus.USAGE and "typed by the schema schema.toml" in result.stderr
    assert files(root) == before
