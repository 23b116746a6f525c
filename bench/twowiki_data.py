"""The CS-RAG paper's 2WikiMultihopQA set-up as kgr inputs, and the project built from them.

Shared by `bench/twowiki_table.py` and `bench/robustness.py`:

- the KG is the union of the gold evidence triples of all 1,000 questions (HippoRAG's 2Wiki subset), written as
  JSONL triples `{subject, relation, object}` (deduplicated, first-seen order);
- the passage corpus is the full corpus.json (6,119 passages); `kgr ingest --passages` links entities to passages
  by title, which gives CS-RAG its linked passages and textual recovery;
- questions become kgr's generic JSONL: `id`, `question`, `anchors` (evidence subjects and objects whose name
  occurs in the question, case-insensitively, as whole words), `answers` = [answer], `hops` = number of evidence
  triples, `passages` = gold titles = the evidence subjects, `qtype` = the 2Wiki question type.

    python bench/twowiki_data.py --out bench/out/twowiki/data     # only write the three files
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hipporag" / "2wikimultihopqa"  # the data folder beside the clone
DEFAULT_PROJECT = ROOT / "bench" / "out" / "projects" / "twowiki"


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """`--threads`: the encoder's torch threads for every project the bench opens (`embedding.threads`)."""
    parser.add_argument("--threads", type=int, default=1,
                        help="embedding.threads for the encoder (default 1: on a shared 2-core machine two threads "
                             "made a query encoding 10-20x slower)")


def apply_threads(threads: int) -> None:
    """Set `embedding.threads` for the projects opened from now on (through kgr's environment settings)."""
    os.environ["KGR_EMBEDDING__THREADS"] = str(threads)


def _named_in(name: str, text: str) -> bool:
    """Whether `name` occurs in `text` (both casefolded) as whole words."""
    key = " ".join(name.casefold().split())
    return bool(key) and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) is not None


def convert(data: Path, out: Path) -> dict:
    """Write triples.jsonl, corpus.json and questions.jsonl into `out`; return counts."""
    out.mkdir(parents=True, exist_ok=True)
    questions = json.loads((data / "questions.json").read_text(encoding="utf-8"))
    triples: dict[tuple[str, str, str], None] = {}
    records = []
    no_anchor = 0
    for q in questions:
        evidence = [tuple(t) for t in q["evidence"]]
        triples.update(dict.fromkeys(evidence))
        text = " ".join(q["question"].casefold().split())
        names = list(dict.fromkeys(n for s, _, o in evidence for n in (s, o)))
        anchors = [n for n in names if _named_in(n, text)]
        no_anchor += not anchors
        records.append({
            "id": q["id"], "question": q["question"], "anchors": anchors, "answers": [q["answer"]],
            "hops": len(evidence), "passages": list(dict.fromkeys(s for s, _, _ in evidence)),
            "qtype": q["question_type"],
        })
    (out / "triples.jsonl").write_text("".join(
        json.dumps({"subject": s, "relation": r, "object": o}, ensure_ascii=False) + "\n" for s, r, o in triples),
        encoding="utf-8")
    (out / "questions.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    shutil.copyfile(data / "corpus.json", out / "corpus.json")
    entities = {n for s, _, o in triples for n in (s, o)}
    return {"questions": len(records), "triples": len(triples), "entities": len(entities),
            "questions_without_anchor": no_anchor,
            "answer_is_anchor": sum(any(a.casefold() == r["answers"][0].casefold() for a in r["anchors"])
                                    for r in records)}


def ensure_project(project_dir: Path, files: Path, console=print) -> dict:
    """Ingest (skipped when up to date) and build the reachability map; return the stage timings."""
    return build_project(project_dir, {"paths": [files / "triples.jsonl"], "passages": [files / "corpus.json"]},
                         console)


def build_project(project_dir: Path, inputs: dict, log=print) -> dict:
    """Ingest `inputs` (paths, passages, an optional schema; skipped when up to date) and build the reachability map
    when missing; return the stage seconds. Shared by the 2Wiki benches and bench/suite.py."""
    import time

    from kgr.ingest.stage import IngestOptions, run_ingest
    from kgr.project import Project
    from kgr.reach_stage import run_reach

    timings = {}
    began = time.perf_counter()
    with Project.open(project_dir, write=True, create=True) as project:
        report = run_ingest(project, IngestOptions(paths=inputs["paths"], passages=inputs["passages"],
                                                          schema=inputs.get("schema")))
        timings["ingest_s"] = round(time.perf_counter() - began, 2)
        log(f"{project_dir.name}: ingest {'up to date' if report.skipped else report.counts} ({timings['ingest_s']}s)")
        began = time.perf_counter()
        stats = run_reach(project)
        timings["reach_s"] = round(time.perf_counter() - began, 2)
        log(f"{project_dir.name}: reach {'up to date' if stats is None else 'built'} ({timings['reach_s']}s)")
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/twowiki/data")
    parser.add_argument("--project", type=Path, default=None, help="also ingest + reach into this project")
    args = parser.parse_args(argv)
    print(json.dumps(convert(args.data, args.out)))
    if args.project:
        ensure_project(args.project, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
