"""MuSiQue with HippoRAG's GPT-3.5 OpenIE graph (../shared/data/musique-openie/) as kgr inputs: an LLM-built KG.

- the graph is the OpenIE results file as it is: `kgr ingest DIR openie_results.json` reads it (auto-detected),
  with its 1,890 passages and each triple's source passage (provenance); malformed triples are counted, not fatal;
- the 50 dev questions (`musique_train_dev50.json`; the other 50 are withheld) become kgr's generic JSONL: `id`,
  `question` (no brackets: MuSiQue names its entities in plain text), `anchors` = the OpenIE entities of the gold
  passages that occur in the question (casefolded, whole words), `answers` = [answer] (aliases are left out: a
  question's answers-in-context is the fraction of its answers found, and an alias is not a second answer),
  `hops` = the decomposition's length (2-4), `passages` = the gold (supporting) passages' titles, `qtype` = "<n>hop".

Titles are not unique in this corpus (85 of 1,764 titles name two or more passages), and passage recall is scored by
title, as kgr scores every set.

    python bench/musique_data.py --out bench/out/musique/data     # write questions.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from twowiki_data import _named_in  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "musique-openie"
OPENIE = "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"
QUESTIONS = "musique_train_dev50.json"


def convert(data: Path, out: Path) -> dict:
    """Write questions.jsonl into `out`; return counts. The graph file is ingested from `data` as it is."""
    out.mkdir(parents=True, exist_ok=True)
    docs = json.loads((data / OPENIE).read_text(encoding="utf-8"))["docs"]
    entities_of: dict[tuple[str, str], list[str]] = {(d["title"], d["text"]): d["extracted_entities"] for d in docs}
    questions = json.loads((data / QUESTIONS).read_text(encoding="utf-8"))
    records = []
    for q in questions:
        gold = [p for p in q["paragraphs"] if p["is_supporting"]]
        text = " ".join(q["question"].casefold().split())
        named = (e for p in gold for e in entities_of.get((p["title"], p["paragraph_text"]), []))
        anchors = list(dict.fromkeys(e for e in named if isinstance(e, str) and _named_in(e, text)))
        hops = len(q["question_decomposition"])
        records.append({"id": q["id"], "question": q["question"], "anchors": anchors, "answers": [q["answer"]],
                        "hops": hops, "passages": list(dict.fromkeys(p["title"] for p in gold)),
                        "qtype": f"{hops}hop"})
    (out / "questions.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return {"questions": len(records), "passages": len(docs),
            "questions_without_anchor": sum(not r["anchors"] for r in records)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "musique" / "data")
    args = parser.parse_args(argv)
    print(json.dumps(convert(args.data, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
