"""Shared fixtures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
METAQA = ROOT / "fixtures" / "metaqa"


@pytest.fixture(scope="session")
def metaqa_project(tmp_path_factory) -> Path:
    """The MetaQA fixture slice ingested (real embedding model) with its reachability map, built once per session.

    Treat it as read-only: a test that writes to a project (e.g. retrieval records) should copy it first.
    """
    root = tmp_path_factory.mktemp("metaqa") / "project"
    for args in (
        ["ingest", str(root), str(METAQA / "kb.txt"), "--schema", str(METAQA / "schema.toml")],
        ["reach", str(root)],
    ):
        done = subprocess.run([sys.executable, "-m", "kgr", *args], capture_output=True, text=True)
        assert done.returncode == 0, f"kgr {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return root
