"""Check the hand-made dev graphs (fixtures/devgraphs/*/): every gold answer follows from the graph's triples.

    python bench/devgraphs_check.py                                 # every graph under fixtures/devgraphs/
    python bench/devgraphs_check.py fixtures/devgraphs/genealogy    # one graph

Each folder holds one triples file (`kb.txt`: `subject|relation|object` lines, `triples.jsonl`: `{subject,
relation, object}` objects, `triples.csv`: a CSV file with the header row `subject,relation,object`, RFC 4180
quoting, read with the csv module, or `triples.tsv`: the same, tab-delimited, header `subject<TAB>relation<TAB>object`)
and `questions.jsonl` (kgr's JSONL question format: `id`, `question`, `anchors`, `answers`, `hops`, plus `path`,
which kgr ignores and this script reads). Checks:

- the graph: no malformed or repeated triple, and no two entity names that differ only in case or spacing
  (names must not be ambiguous);
- each question: its anchors and answers are entities of the graph; a [bracketed] mention is one of its anchors;
  an anchor without brackets still occurs verbatim in the text; every gold answer is reachable from every anchor
  within `hops` steps of the undirected graph (the requirement kgr's eval assumes: see kgr/evaluate/gold.py);
- exactness: `path` lists one chain per anchor, `Anchor > step > step ...`, where a step is `relation` (subject to
  object), `~relation` (object to subject) or `*relation` (either way), optionally with `[key=value]` (the node
  reached must have the triple `node|key|value`, e.g. `child_of[sex=female]` for a mother). A step may also be
  alternatives separated by ` / ` (a slash with a space either side, which no relation label may hold), e.g.
  `was founded by / ~co-founded`: the walk may take any of them (a meaning the graph records under two labels).
  A chain's answers are the ends of its simple walks (no node twice: a sibling is never the person asked about);
  the question's answers are the intersection over its chains and must equal the gold answers exactly, and the
  longest chain must have `hops` steps.

It prints per graph: triples, entities, relations, questions per hop count, bracketed questions, questions with 5+
answers; exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter, defaultdict, deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = ROOT / "fixtures" / "devgraphs"
TRIPLE_FILES = ("kb.txt", "triples.jsonl", "triples.csv", "triples.tsv")
CSV_HEADER = ["subject", "relation", "object"]
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_STEP = re.compile(r"^(?P<dir>[~*]?)(?P<rel>[^\[\]]+?)(?:\[(?P<filters>[^\[\]]+)\])?$")


def triples_file(folder: Path) -> Path:
    found = [folder / name for name in TRIPLE_FILES if (folder / name).exists()]
    if len(found) != 1:
        raise SystemExit(f"{folder}: expected exactly one of {', '.join(TRIPLE_FILES)}")
    return found[0]


def read_csv_rows(path: Path, errors: list[str]):
    """(line number, fields) of a triples.csv (or tab-delimited triples.tsv) after its header row."""
    delimiter = "\t" if path.suffix == ".tsv" else ","
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        header = next(reader, None)
        if header != CSV_HEADER:
            errors.append(f"{path.name}: header {header!r}, expected {delimiter.join(CSV_HEADER)!r}")
        for row in reader:
            if row:
                yield reader.line_num, row


def read_rows(path: Path, errors: list[str]):
    """(line number, fields, the record as written) of each record of a triples file, in any of its kinds."""
    if path.suffix in (".csv", ".tsv"):
        for lineno, row in read_csv_rows(path, errors):
            yield lineno, row, row
        return
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            obj = json.loads(line)
            parts = [obj.get("subject"), obj.get("relation"), obj.get("object")]
            if set(obj) != {"subject", "relation", "object"}:
                errors.append(f"{path.name}:{lineno}: expected exactly subject, relation, object")
        else:
            parts = line.split("|")
        yield lineno, parts, line


def read_triples(path: Path, errors: list[str]) -> list[tuple[str, str, str]]:
    triples = []
    for lineno, parts, written in read_rows(path, errors):
        if len(parts) != 3 or not all(isinstance(p, str) and p.strip() == p and p for p in parts):
            errors.append(f"{path.name}:{lineno}: malformed triple {written!r}")
            continue
        triples.append(tuple(parts))
    for triple, count in Counter(triples).items():
        if count > 1:
            errors.append(f"{path.name}: triple {'|'.join(triple)} appears {count} times")
    return triples


class Graph:
    def __init__(self, triples: list[tuple[str, str, str]]):
        self.out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self.into: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self.undirected: dict[str, set[str]] = defaultdict(set)
        self.relations = Counter(r for _, r, _ in triples)
        for s, r, o in triples:
            self.out[s][r].add(o)
            self.into[o][r].add(s)
            self.undirected[s].add(o)
            self.undirected[o].add(s)
        self.entities = set(self.undirected)

    def distances(self, start: str, limit: int) -> dict[str, int]:
        seen = {start: 0}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if seen[node] == limit:
                continue
            for nxt in self.undirected[node]:
                if nxt not in seen:
                    seen[nxt] = seen[node] + 1
                    queue.append(nxt)
        return seen

    def step(self, node: str, step: str) -> set[str]:
        """The nodes one step from node; a step of alternatives (`a / ~b`) reaches the union of theirs."""
        return set().union(*(self.one_step(node, alt) for alt in step.split(" / ")))

    def one_step(self, node: str, step: str) -> set[str]:
        match = _STEP.match(step.strip())
        if match is None:
            raise ValueError(f"bad step {step!r}")
        rel, direction = match["rel"].strip(), match["dir"]
        if rel not in self.relations:
            raise ValueError(f"unknown relation {rel!r} in step {step!r}")
        found = set()
        if direction in ("", "*"):
            found |= self.out[node].get(rel, set())
        if direction in ("~", "*"):
            found |= self.into[node].get(rel, set())
        for condition in (match["filters"] or "").split(","):
            if condition.strip():
                key, _, value = condition.partition("=")
                found = {n for n in found if value.strip() in self.out[n].get(key.strip(), set())}
        return found

    def chain(self, text: str) -> tuple[str, int, set[str]]:
        """A path chain's start, length and answers (ends of its simple walks)."""
        start, *steps = [part.strip() for part in text.split(" > ")]
        walks = [(start,)]
        for step in steps:
            walks = [walk + (nxt,) for walk in walks for nxt in self.step(walk[-1], step) if nxt not in walk]
        return start, len(steps), {walk[-1] for walk in walks}


def check_graph(folder: Path) -> tuple[list[str], dict]:
    errors: list[str] = []
    path = triples_file(folder)
    triples = read_triples(path, errors)
    graph = Graph(triples)
    spellings: dict[str, set[str]] = defaultdict(set)
    for name in graph.entities:
        spellings[" ".join(name.casefold().split())].add(name)
    for names in spellings.values():
        if len(names) > 1:
            errors.append(f"{path.name}: ambiguous entity names {sorted(names)}")
    errors += [f"{path.name}: relation {rel!r} holds ' / ', the path syntax for alternatives"
               for rel in graph.relations if " / " in rel]
    questions = [json.loads(line) for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    ids = Counter(q.get("id") for q in questions)
    errors += [f"questions.jsonl: duplicate id {qid!r}" for qid, n in ids.items() if n > 1]
    for q in questions:
        where = f"questions.jsonl {q.get('id')}"
        text, anchors, answers, hops = q.get("question", ""), q.get("anchors", []), q.get("answers", []), q.get("hops")
        if not (isinstance(hops, int) and hops >= 1 and anchors and answers):
            errors.append(f"{where}: needs anchors, answers and hops >= 1")
            continue
        if len(set(answers)) != len(answers):
            errors.append(f"{where}: repeated answers")
        for name in [*anchors, *answers]:
            if name not in graph.entities:
                errors.append(f"{where}: {name!r} is not an entity of the graph")
        for mention in _BRACKETED.findall(text):
            if mention not in anchors:
                errors.append(f"{where}: bracketed {mention!r} is not an anchor")
        for anchor in anchors:
            if anchor not in text:
                errors.append(f"{where}: anchor {anchor!r} does not occur in the question text")
            reach = graph.distances(anchor, hops)
            for answer in answers:
                if answer not in reach:
                    errors.append(f"{where}: answer {answer!r} is not within {hops} hops of {anchor!r}")
        chains = q.get("path") or []
        if not chains:
            errors.append(f"{where}: no path to check the answers against")
            continue
        try:
            results = [graph.chain(chain) for chain in chains]
        except ValueError as exc:
            errors.append(f"{where}: {exc}")
            continue
        if sorted(start for start, _, _ in results) != sorted(anchors):
            errors.append(f"{where}: path starts {[s for s, _, _ in results]} are not the anchors {anchors}")
        if max(length for _, length, _ in results) != hops:
            errors.append(f"{where}: longest path chain has {max(n for _, n, _ in results)} steps, hops is {hops}")
        derived = set.intersection(*(found for _, _, found in results))
        if derived != set(answers):
            errors.append(f"{where}: gold answers {sorted(answers)} but the path gives {sorted(derived)} "
                          f"(missing {sorted(derived - set(answers))}, extra {sorted(set(answers) - derived)})")
    stats = {
        "triples": len(triples), "entities": len(graph.entities), "relations": len(graph.relations),
        "questions": len(questions),
        "hops": dict(sorted(Counter(q.get("hops") for q in questions).items())),
        "bracketed": sum(1 for q in questions if _BRACKETED.search(q.get("question", ""))),
        "answers_5_plus": sum(1 for q in questions if len(q.get("answers", [])) >= 5),
        "multi_anchor": sum(1 for q in questions if len(q.get("anchors", [])) > 1),
    }
    return errors, stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    args = parser.parse_args(argv)
    folders = args.folders or sorted(p for p in GRAPHS.iterdir() if p.is_dir())
    failed = False
    for folder in folders:
        errors, stats = check_graph(folder)
        print(f"{folder.name}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
        for error in errors:
            print(f"  ERROR {error}")
        failed = failed or bool(errors)
    print("FAILED" if failed else "all answers check out")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
