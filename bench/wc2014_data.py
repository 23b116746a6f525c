"""WC2014 (Zhou et al., COLING 2018; IRN's World Cup 2014 players KG) as kgr inputs: an unseen-domain dev set.

- the KG is `WC2014.txt` as it is (`subject<TAB>relation<TAB>object`, `<relation>_inverse` twins included);
- each question set (`WC-P1.txt` 1-hop, `WC-P2.txt` 2-hop, `WC-C.txt` conjunctive) becomes kgr's generic JSONL:
  `id` (a hash of the question text and its gold path, so a file of other questions never shares ids), `question`
  with the anchor mention(s) bracketed (the anchors are the gold path's first entities, which occur verbatim in
  the question), `anchors`, `answers` = the answer set, `hops` = the gold path's hop count (conjunctive: 1, two
  anchors), `qtype` = the set name.

    python bench/wc2014_data.py --out bench/out/wc2014/data       # write kb.txt and the three JSONL files
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "wc2014"
SETS = {"wc2014-1hop": "WC-P1.txt", "wc2014-2hop": "WC-P2.txt", "wc2014-conj": "WC-C.txt"}


def _bracket(text: str, mention: str) -> str | None:
    """The question with the first whole-word occurrence of `mention` bracketed, or None when it is absent."""
    match = re.search(rf"(?<![\w\[]){re.escape(mention)}(?![\w\]])", text)
    if match is None:
        return None
    return f"{text[:match.start()]}[{mention}]{text[match.end():]}"


def parse_line(line: str, set_name: str) -> dict | None:
    """One WC2014 question line as a kgr JSONL question (None when an anchor does not occur in the text)."""
    fields = line.rstrip("\n").split("\t")
    text, gold_path, answer_set = fields[0].strip(), fields[2].strip(), fields[3]
    paths = [p.split("#") for p in gold_path.split("*")]
    anchors = list(dict.fromkeys(p[0] for p in paths))
    # a path is anchor#rel#entity[#rel#entity...], ending in `<end>#answer` when shorter than the longest
    hops = max(sum(1 for part in p[1::2] if part != "<end>") for p in paths)
    question = text.rstrip(" ?").strip() + "?"
    for anchor in anchors:
        question = _bracket(question, anchor)
        if question is None:
            return None
    answers = [a for a in answer_set.split("/") if a]
    digest = hashlib.sha1(f"{text}\t{gold_path}".encode()).hexdigest()[:12]
    return {"id": f"{set_name}-{digest}", "question": question, "anchors": anchors, "answers": answers,
            "hops": hops, "qtype": set_name}


def convert(data: Path, out: Path) -> dict:
    """Write kb.txt and one JSONL question file per set into `out`; return counts per set."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(data / "WC2014.txt", out / "kb.txt")
    counts = {}
    for set_name, file_name in SETS.items():
        seen: set[str] = set()
        kept = skipped = 0
        with open(out / f"{set_name}.jsonl", "w", encoding="utf-8") as handle:
            for line in (data / file_name).read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                question = parse_line(line, set_name)
                if question is None or question["id"] in seen:
                    skipped += 1
                    continue
                seen.add(question["id"])
                handle.write(json.dumps(question, ensure_ascii=False) + "\n")
                kept += 1
        counts[set_name] = {"questions": kept, "skipped": skipped}
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "wc2014" / "data")
    args = parser.parse_args()
    print(json.dumps(convert(args.data, args.out), indent=2))


if __name__ == "__main__":
    main()
