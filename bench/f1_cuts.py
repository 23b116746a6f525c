"""What F1 costs in recall: post-hoc cuts of the stored DotRAG suite records of the dev graphs, scored as `kgr eval`.

    python bench/suite.py --sets 'dev-*' --methods dotrag --limit 100   # the records (reused when current)
    python bench/f1_cuts.py                                              # every dev graph, every cut

A cut only drops paths (and so entities) from a record, so it can only lower recall; the table says how much F1 each
buys for it. Cuts of a hedged plan's paths (the plan's `hedged` flag; a sure plan's record is left whole):
- `path-sim M`: paths whose text ("anchor relation entity ...") is more than M under the best path's cosine to the
  question (one encoder pass per path);
- `walk-sim M`: the same, the fill's relationships kept;
- `fill-cap T`: the fill's relationships only while the record holds fewer than T entities;
- `fill-if-few P`: the fill only after walks that kept fewer than P paths.
Columns: mean recall and F1 over the graphs, and the graphs whose recall fell by more than a point.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402

from kgr.embed import project_encoder  # noqa: E402
from kgr.evaluate.gold import gold_intermediates  # noqa: E402
from kgr.evaluate.metrics import entity_scores  # noqa: E402
from kgr.evaluate.run import DEFAULT_MAX_DEGREE, graph_neighbors  # noqa: E402
from kgr.methods.runs import load_records, run_names  # noqa: E402
from kgr.project import Project  # noqa: E402
from kgr.store import GraphStore  # noqa: E402

Cut = Callable[[list[dict], int, list[float]], list[int]]  # (paths, fill count, path similarities) -> kept indices


def by_similarity(margin: float, fill_too: bool) -> Cut:
    def keep(paths, fill, sims):
        walk = len(paths) - fill
        ranked = sims if fill_too else sims[:walk]
        if not ranked:
            return list(range(len(paths)))
        floor = max(ranked) - margin
        return [i for i in range(len(paths)) if sims[i] >= floor or (not fill_too and i >= walk)]
    return keep


def fill_cap(total: int) -> Cut:
    def keep(paths, fill, sims):
        walk = len(paths) - fill
        kept = list(range(walk))
        entities = {e for p in paths[:walk] for e in p["entities"][1:]}
        for i in range(walk, len(paths)):
            if len(entities) >= total:
                break
            kept.append(i)
            entities.update(paths[i]["entities"])
        return kept
    return keep


def fill_if_few(walk_paths: int) -> Cut:
    return lambda paths, fill, sims: list(range(len(paths) if len(paths) - fill < walk_paths else len(paths) - fill))


CUTS: dict[str, Cut] = {
    "none": lambda paths, fill, sims: list(range(len(paths))),
    **{f"path-sim {m}": by_similarity(m, True) for m in (0.35, 0.3, 0.2)},
    **{f"walk-sim {m}": by_similarity(m, False) for m in (0.35, 0.2)},
    **{f"fill-cap {t}": fill_cap(t) for t in (15, 20, 30, 40)},
    **{f"fill-if-few {p}": fill_if_few(p) for p in (5, 10, 20)},
}


def path_text(path: dict) -> str:
    words = [path["entities"][0]]
    for relation, entity in zip(path["relations"], path["entities"][1:]):
        words += [relation.lstrip("~").replace("_", " "), entity]
    return " ".join(words)


def graph_scores(graph: str) -> dict[str, list[tuple[float, float]]]:
    """Per cut, each question's (recall, F1) on the dev graph's latest stored DotRAG suite run."""
    set_name = f"dev-{graph}"
    with Project.open(suite.PROJECTS / set_name) as project:
        runs = [r for r in run_names(project) if r.startswith(f"suite-{set_name}-dotrag-")]
        if not runs:
            raise SystemExit(f"{set_name}: no DotRAG suite run; run bench/suite.py --sets {set_name} first")
        records = load_records(project, runs[-1])
        store = GraphStore(project)
        encoder = project_encoder(project.config)
    neighbors, canonical = graph_neighbors(store)
    lines = (suite.DEVGRAPHS / graph / "questions.jsonl").read_text().splitlines()
    questions = {q["id"]: q for q in map(json.loads, lines)}
    scores: dict[str, list[tuple[float, float]]] = {name: [] for name in CUTS}
    for record in records:
        question = questions[record["id"]]
        answers = [canonical(a) for a in question["answers"]]
        gold = gold_intermediates(neighbors, [canonical(a) for a in question["anchors"]], answers, question["hops"],
                                  DEFAULT_MAX_DEGREE)
        paths, fill = record["paths"], record["trace"].get("fill") or 0
        hedged = record["trace"]["plan"].get("hedged")
        sims = []
        if hedged and paths:
            vectors = encoder.encode([re.sub(r"[\[\]]", "", record["question"])] + [path_text(p) for p in paths])
            sims = (vectors[1:] @ vectors[0]).tolist()
        for name, cut in CUTS.items():
            kept = cut(paths, fill, sims) if hedged else range(len(paths))
            # the record's own entities when nothing is cut (they include a question's offered alternatives)
            entities = record["entities"] if len(kept) == len(paths) else \
                {e for i in kept for e in paths[i]["entities"][1:]} - set(record["anchors"])
            recall, _, f1, _ = entity_scores(entities, answers, gold)
            scores[name].append((recall, f1))
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default=",".join(suite.DEV_GRAPHS))
    args = parser.parse_args()
    per_graph = {graph: graph_scores(graph) for graph in args.graphs.split(",")}
    print("| cut | mean recall | mean F1 | graphs more than a point lower |\n|---|---:|---:|---|")
    for name in CUTS:
        means = {g: tuple(statistics.mean(x) for x in zip(*s[name])) for g, s in per_graph.items()}
        base = {g: statistics.mean(r for r, _ in s["none"]) for g, s in per_graph.items()}
        lower = [f"{g} {means[g][0] - base[g]:.3f}" for g in means if means[g][0] < base[g] - 0.01]
        print(f"| {name} | {statistics.mean(m[0] for m in means.values()):.4f} | "
              f"{statistics.mean(m[1] for m in means.values()):.4f} | {', '.join(lower) or '-'} |")


if __name__ == "__main__":
    main()
