"""How well kgr reads a question's direction along relations between things of one kind (`kgr.methods.direction`),
against the relation paths the hand-made dev graphs' questions were derived from.

    python bench/direction_check.py            # every graph under fixtures/devgraphs/
    python bench/direction_check.py -v         # also each step read wrong or not read

For each question and each step of its gold `path` (`relation` subject to object, `~relation` backward, `*relation`
either way; see `bench/devgraphs_check.py`) along a relation some entity is both subject and object of (the steps
whose direction a type cannot tell), the step is read as a walk reads it (`WalkReader`: the step's word, then its
direction; the walk's steps taken in order) and counted: right, wrong, not read (walked both ways), or symmetric
(gold `*`, nothing to read). A wrong reading costs a walk the answers the other way; an unread one only precision.
Steps along other relations are taken too (their words are no longer free for the next step) but not counted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.devgraphs_check import read_triples, triples_file  # noqa: E402
from kgr.methods.direction import EITHER, WalkReader, links_siblings  # noqa: E402

GRAPHS = ROOT / "fixtures" / "devgraphs"


def check(folder: Path, verbose: bool) -> Counter:
    """The step counts of one graph (right, wrong, unread, symmetric)."""
    triples = read_triples(triples_file(folder), [])
    subjects, objects = {}, {}
    for head, relation, tail in triples:
        subjects.setdefault(relation, set()).add(head)
        objects.setdefault(relation, set()).add(tail)
    one_kind = {r for r in subjects if subjects[r] & objects[r]}
    siblings_as_links = links_siblings(subjects)
    counts: Counter = Counter()
    for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        for chain in question.get("path", []):
            anchor, *steps = chain.split(" > ")
            text = question["question"]
            if f"[{anchor}]" not in text:  # an unbracketed anchor is marked as the method marks a name it finds
                text = text.replace(anchor, f"[{anchor}]", 1)
            reader = WalkReader(text, anchor, siblings_as_links)
            for step in steps:
                relation = re.sub(r"\[.*\]$", "", step.lstrip("~*"))
                if relation in one_kind:
                    direction, word = reader.direction(relation)
                    gold = 0 if step.startswith("*") else (-1 if step.startswith("~") else 1)
                    kind = "symmetric" if gold == 0 else ("unread" if direction == EITHER else
                                                          "right" if direction == gold else "wrong")
                    counts[kind] += 1
                    if verbose and kind in ("wrong", "unread"):
                        print(f"  {kind:6} {question['id']} {step} (word {word!r}): {question['question']}")
                reader.take(relation)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print each step read wrong or not read")
    args = parser.parse_args(argv)
    total: Counter = Counter()
    print("| graph | steps of one kind | right | wrong | unread | symmetric |\n|---|---|---|---|---|---|")
    for folder in sorted(p for p in GRAPHS.iterdir() if (p / "questions.jsonl").exists()):
        counts = check(folder, args.verbose)
        total.update(counts)
        print(f"| {folder.name} | {sum(counts.values())} | {counts['right']} | {counts['wrong']} | {counts['unread']} "
              f"| {counts['symmetric']} |")
    print(f"| all | {sum(total.values())} | {total['right']} | {total['wrong']} | {total['unread']} "
          f"| {total['symmetric']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
