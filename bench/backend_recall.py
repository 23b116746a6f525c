"""A quick check of an encoder backend against the suite's: recall of VSS and DotRAG on dev-suite sets with the
project's stored vectors (as the suite runs them) and with every text re-encoded by another backend.

    python bench/backend_recall.py --backend onnx --quantize int8 --projects wc2014 dev-genealogy --limit 100

Each project is copied from bench/out/projects/ (built by bench/suite.py; --source elsewhere) to
bench/out/backend_recall/, so its runs do not mix with the suite's. The other backend's vectors replace the stored ones in memory (as float16, as ingest
stores them); questions are encoded by that backend too. This is not the dev suite (bench/suite.py decides): it is a
quick look at the same questions. Output: bench/out/backend_recall.json and .md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402

OUT = ROOT / "bench" / "out"


def swap_vectors(store, encoder) -> float:
    """Re-encode the store's entity, relationship and passage texts with `encoder` and use them; return seconds."""
    began = time.perf_counter()
    db = store._db
    entity_texts = [r[0] for r in db.execute("SELECT text FROM entities ORDER BY eid").fetchall()]
    store.__dict__["encoder"] = encoder
    store.__dict__["entity_vectors"] = encoder.encode(entity_texts).astype(np.float16).astype(np.float32)
    store.__dict__["relationship_vectors"] = \
        encoder.encode(store.relationship_texts).astype(np.float16).astype(np.float32)
    if store.passages:
        texts = [f"{t}. {x}" for t, x in store.passages]
        store.__dict__["passage_vectors"] = encoder.encode(texts).astype(np.float16).astype(np.float32)
    return time.perf_counter() - began


def run_project(name: str, sets: list, methods: list[str], args) -> list[dict]:
    from kgr.embed import Encoder
    from kgr.evaluate.run import evaluate, queries_for
    from kgr.methods.base import RunContext
    from kgr.methods.runner import run_method
    from kgr.methods.runs import create_records_table
    from kgr.project import Project
    from kgr.store import GraphStore

    copy = OUT / "backend_recall" / name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(args.source / name, copy)
    rows = []
    kinds = {"stored": None, f"{args.backend}-{args.quantize}": Encoder(
        batch_size=256, threads=args.threads, precision="float32", backend=args.backend, quantize=args.quantize)}
    for kind, encoder in kinds.items():
        with Project.open(copy, write=True, overrides={"backbone.model": "offline"}) as project:
            store = GraphStore(project)
            store.warm()
            seconds = swap_vectors(store, encoder) if encoder is not None else 0.0
            context = RunContext(project, project.config, store, "retrieve")
            create_records_table(project)
            for dev_set, questions in sets:
                runs = {}
                for method in methods:
                    runs[method] = f"{dev_set.name}-{method}-{kind}"
                    run_method(context, method, queries_for(questions), run=runs[method], resume=False)
                result = evaluate(project, [(dev_set.name, questions)], list(runs.values()), store=store)
                for method, run in runs.items():
                    summary = result.summaries[run][dev_set.name]
                    rows.append({"set": dev_set.name, "method": method, "vectors": kind, "n": summary.n_questions,
                                 "recall": round(summary.recall, 4), "reencode_s": round(seconds, 1)})
                    print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="onnx", choices=("torch", "onnx"))
    parser.add_argument("--quantize", default="int8", choices=("none", "int8"))
    parser.add_argument("--projects", nargs="+", default=["wc2014", "dev-genealogy", "dev-hospital", "dev-packages"])
    parser.add_argument("--methods", default="vss,dotrag")
    parser.add_argument("--limit", type=int, default=None, help="questions per set (default: the suite's sample)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", type=Path, default=suite.PROJECTS, help="where the suite's projects are")
    args = parser.parse_args(argv)

    from kgr.evaluate.questions import sample

    rows = []
    for name in args.projects:
        sets = [(s, sample(s.questions(), args.limit or s.size or 10**9, args.seed))
                for s in suite.SETS if s.project == name]
        rows += run_project(name, sets, args.methods.split(","), args)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "backend_recall.json").write_text(json.dumps(rows, indent=2) + "\n")
    other = f"{args.backend}-{args.quantize}"
    lines = [f"| set | method | n | recall, stored vectors | recall, {other} | difference |",
             "|---|---|---|---|---|---|"]
    by = {(r["set"], r["method"], r["vectors"]): r for r in rows}
    for (dev_set, method, kind), row in by.items():
        if kind == "stored":
            mine = by[(dev_set, method, other)]
            lines.append(f"| {dev_set} | {method} | {row['n']} | {row['recall']:.3f} | {mine['recall']:.3f} | "
                         f"{mine['recall'] - row['recall']:+.3f} |")
    (OUT / "backend_recall.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
