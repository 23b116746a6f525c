"""The Makefile's test lists name files that exist (a renamed test file must not break `make test` in CI)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_file_the_makefile_names_exists():
    text = ROOT.joinpath("Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    named = set(re.findall(r"tests/[\w/]+\.py", text))
    assert named, "the Makefile names its precision tests"
    assert sorted(p for p in named if not ROOT.joinpath(p).is_file()) == []
