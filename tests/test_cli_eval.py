"""`kgr eval` on a JSONL question file whose questions carry several hop counts: one split per count."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METAQA = ROOT / "fixtures" / "metaqa"


def jsonl_questions(hops: int, count: int) -> list[dict]:
    """The first `count` MetaQA questions of a hop count, as JSONL records carrying `hops`."""
    lines = (METAQA / f"qa_{hops}hop.txt").read_text(encoding="utf-8").splitlines()[:count]
    return [{"id": f"h{hops}-{n}", "question": text, "anchors": re.findall(r"\[([^\]]+)\]", text),
             "answers": answers.split("|"), "hops": hops}
            for n, (text, answers) in enumerate(line.split("\t") for line in lines)]


def test_a_file_of_mixed_hops_is_scored_per_hop(metaqa_project, copy_project, run_kgr, tmp_path):
    root = copy_project(metaqa_project, "eval-hops")
    questions = tmp_path / "mixed.jsonl"
    records = jsonl_questions(2, 2) + jsonl_questions(1, 3) + [{**jsonl_questions(1, 4)[3], "hops": None}]
    questions.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert run_kgr("retrieve", root, "--questions", questions, "--quiet").exit_code == 0

    result = run_kgr("eval", root, "--questions", questions, "--run", "dotrag-offline", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["splits"] == ["mixed.jsonl (1-hop)", "mixed.jsonl (2-hop)", "mixed.jsonl (hops not given)", "all"]
    assert report["n_questions"] == {"mixed.jsonl (1-hop)": 3, "mixed.jsonl (2-hop)": 2,
                                     "mixed.jsonl (hops not given)": 1, "all": 6}

    # Given --hops, the file is one split of that hop count, as before.
    given = json.loads(run_kgr("eval", root, "--questions", questions, "--run", "dotrag-offline", "--hops", "2",
                               "--json").stdout)
    assert given["splits"] == ["2-hop"]
