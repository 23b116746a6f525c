"""The dev suite: every method on every dev set, one table (issue #14 item 1). Changes are judged by its mean recall.

    python bench/suite.py                                   # all sets, all methods (builds missing projects)
    python bench/suite.py --methods dotrag,vss --limit 100  # a quick loop: 100 seeded questions per set
    python bench/suite.py --sets wc2014-2hop,musique --fresh
    python bench/suite.py --sets 'dev-*,*noschema*,wc2014-*-*' --limit 100  # the unsaturated sets

Sets (default sizes; `--limit N` samples N per set instead, with `--seed`):

| set | questions | project (bench/out/projects/) | built by the suite |
|---|---|---|---|
| metaqa-1hop, -2hop, -3hop | 500 per hop split of MetaQA dev, seeded | metaqa | no: `kgr ingest` (with its schema) + `kgr reach` |
| wc2014-1hop, -2hop, -conj | 200 each, seeded (`bench/wc2014_data.py`: anchors bracketed from the gold path) | wc2014 | `kgr ingest DIR kb.txt`, reach |
| twowiki | all 1,000 (`bench/twowiki_data.py`: gold evidence triples + 6,119 passages) | twowiki | ingest, reach |
| musique | the 50 MuSiQue dev questions (`bench/musique_data.py`; HippoRAG's OpenIE graph, 1,890 passages) | musique | `kgr ingest DIR openie_results.json`, reach |
| dev-packages, dev-genealogy, dev-hospital, dev-publishing, dev-kinfolk, dev-mediabase, dev-catalog, dev-research, dev-transit, dev-campus, dev-ventures, dev-civics, dev-pharma, dev-music, dev-league, dev-airways, dev-letters, dev-museums | all (50 / 47 / 50 / 53 / 48 / 57 / 59 / 56 / 55 / 50 / 50 / 50 / 50 / 50 / 50 / 50 / 50 / 60, 1-3 hops mixed): hand-made graphs in `fixtures/devgraphs/` | dev-<graph> | `kgr ingest DIR <triples>` (no schema), reach |
| metaqa-noschema-1hop, -2hop, -3hop | as metaqa-Nhop | metaqa-noschema | `kgr ingest DIR ../shared/data/metaqa/kb.txt` (no schema; a full ingest, ~5-10 min), reach |
| wc2014-camel-1hop, -2hop, -conj; wc2014-spaced-…; wc2014-path-…; wc2014-dunder-… | as wc2014-* | wc2014-<style> | WC2014's kb.txt with its labels respelled (`bench/relabel.py`), ingest, reach |

The sets after musique are the unsaturated ones (DotRAG was >= 0.97 recall on most of the first eight): graphs kgr
was not tuned on (their questions were committed before any method ran on them: `fixtures/devgraphs/README.md`), and
known graphs without their schema or with their labels spelled otherwise. WC2014, 2Wiki and MuSiQue are ingested
without a schema already. `--sets` takes names or shell patterns (`dev-*`, `*noschema*`, `wc2014-*-*`).

Methods: dotrag, vss, bm25 and csrag on every set (CS-RAG runs on a graph without passages too: constraint binding
over the graph, no passage evidence); dpr (dense passages) only on sets whose project has passages (twowiki,
musique); asked for on a set without passages, it is listed as not run.

Records: each (set, method) is stored in its project's `records` table under run
`suite-<set>-<method>-<backbone>-<code>`, where <code> fingerprints every kgr/*.py source file and the project's
settings. A rerun of unchanged code and settings reuses the records (and resumes an interrupted run); any change to
kgr's code or settings makes a new run name, so the records are recomputed without asking, and the set's older
suite runs of that method are deleted. `--fresh` recomputes even unchanged code (e.g. to remeasure latency).

Columns (kgr.evaluate.run.evaluate on each set): entity recall and F1 (DotRAG appendix D.1, as `kgr eval`); answers
found in the packed context; passage Recall@2 / @5 where the questions name gold passages (– for a method whose
records list no passages: VSS, BM25, DotRAG); mean context tokens; p50 retrieval latency per question (model loading excluded); and that
p50 over VSS's p50 on the same set in the same table. dpr retrieves passages, not entities: its recall and F1 are –.
"Suite mean recall": each method's recall averaged over the sets it ran on with entity output (the number changes
are judged by: issue #14 item 4). Latency on the shared 2-core machine is noisy (other processes run beside it).

Outputs in `--out` (default bench/out/suite/): suite.md, suite.json, and <set>/ with kgr eval's reports.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import hashlib
import importlib
import json
import pkgutil
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import metaqa_table  # noqa: E402
import musique_data  # noqa: E402
import twowiki_data  # noqa: E402
import wc2014_data  # noqa: E402
from devgraphs_check import triples_file  # noqa: E402
from twowiki_data import add_threads_option, apply_threads, build_project  # noqa: E402

from kgr.errors import KgrError  # noqa: E402

PROJECTS = ROOT / "bench" / "out" / "projects"
OUT = ROOT / "bench" / "out" / "suite"
DATA_OUT = ROOT / "bench" / "out" / "suite" / "data"
DEVGRAPHS = ROOT / "fixtures" / "devgraphs"  # hand-made graphs (`devgraphs_check.TRIPLE_FILES`, questions.jsonl)
DEV_GRAPHS = ("packages", "genealogy", "hospital", "publishing", "kinfolk", "mediabase", "catalog", "research",
              "transit", "campus", "ventures", "civics", "pharma", "music", "league", "airways", "letters", "museums",
              "dining")
# the dev graphs with a user's schema (`schema.toml` beside the triples) run again, ingested with it: dev-<graph>-schema
SCHEMA_GRAPHS = tuple(graph for graph in DEV_GRAPHS if (DEVGRAPHS / graph / "schema.toml").exists())
RELABEL_STYLES = ("camel", "spaced", "path", "dunder")  # bench/relabel.py's respellings run as suite sets
METHODS = ("dotrag", "vss", "bm25", "csrag", "dpr")
PASSAGE_METHODS = {"dpr"}  # run only where the project has passages
ENTITY_FREE = {"dpr"}  # retrieves passages, not entities: no recall or F1
LABELS = {"dotrag": "DotRAG", "vss": "VSS", "bm25": "BM25", "csrag": "CS-RAG", "dpr": "dense passages"}


@dataclass
class DevSet:
    """One question set: its project, how to build that project, and how to load its questions."""

    name: str
    project: str  # folder under PROJECTS; sets of one project run together
    size: int | None  # default sample size (None: all)
    questions: Callable[[], list]  # every question of the set (kgr.evaluate.questions.Question)


def _jsonl(path: Path) -> list:
    from kgr.evaluate.questions import load_questions

    return load_questions(path, fmt="jsonl")


def _metaqa(hops: int) -> list:
    from kgr.evaluate.questions import load_questions

    folder = metaqa_table.DATA / f"{hops}-hop"
    return load_questions(folder / "vanilla" / "qa_dev.txt", fmt="metaqa", hops=hops,
                          qtype_path=folder / "qa_dev_qtype.txt")


SETS = [
    DevSet("metaqa-1hop", "metaqa", 500, lambda: _metaqa(1)),
    DevSet("metaqa-2hop", "metaqa", 500, lambda: _metaqa(2)),
    DevSet("metaqa-3hop", "metaqa", 500, lambda: _metaqa(3)),
    *(DevSet(name, "wc2014", 200, lambda name=name: _jsonl(DATA_OUT / "wc2014" / f"{name}.jsonl"))
      for name in wc2014_data.SETS),
    DevSet("twowiki", "twowiki", None, lambda: _jsonl(DATA_OUT / "twowiki" / "questions.jsonl")),
    DevSet("musique", "musique", None, lambda: _jsonl(DATA_OUT / "musique" / "questions.jsonl")),
    *(DevSet(f"dev-{graph}", f"dev-{graph}", None, lambda graph=graph: _jsonl(DEVGRAPHS / graph / "questions.jsonl"))
      for graph in DEV_GRAPHS),
    *(DevSet(f"dev-{graph}-schema", f"dev-{graph}-schema", None,
             lambda graph=graph: _jsonl(DEVGRAPHS / graph / "questions.jsonl"))
      for graph in SCHEMA_GRAPHS),
    *(DevSet(f"metaqa-noschema-{hops}hop", "metaqa-noschema", 500, lambda hops=hops: _metaqa(hops))
      for hops in (1, 2, 3)),
    *(DevSet(name.replace("wc2014-", f"wc2014-{style}-"), f"wc2014-{style}", 200,
             lambda name=name: _jsonl(DATA_OUT / "wc2014" / f"{name}.jsonl"))
      for style in RELABEL_STYLES for name in wc2014_data.SETS),
]
SET_NAMES = [s.name for s in SETS]


def prepare_inputs(project: str) -> dict:
    """Write a project's kgr inputs (graph files and question JSONL) under DATA_OUT; return the ingest arguments (a
    schema for the dev graphs' -schema projects; MetaQA's own project, with its schema, is built outside the suite)."""
    out = DATA_OUT / project
    if project == "wc2014":
        wc2014_data.convert(wc2014_data.DATA, out)
        return {"paths": [out / "kb.txt"], "passages": []}
    if project.removeprefix("wc2014-") in RELABEL_STYLES:
        import relabel  # it imports this module: load it only when needed

        wc2014_data.convert(wc2014_data.DATA, DATA_OUT / "wc2014")  # the questions, shared with wc2014's sets
        return {"paths": [relabel.write_kb(project.removeprefix("wc2014-"), out)], "passages": []}
    if project.removeprefix("dev-") in DEV_GRAPHS:
        return {"paths": [triples_file(DEVGRAPHS / project.removeprefix("dev-"))], "passages": []}
    if project.removeprefix("dev-").removesuffix("-schema") in SCHEMA_GRAPHS:
        folder = DEVGRAPHS / project.removeprefix("dev-").removesuffix("-schema")
        return {"paths": [triples_file(folder)], "passages": [], "schema": folder / "schema.toml"}
    if project == "metaqa-noschema":
        return {"paths": [metaqa_table.DATA / "kb.txt"], "passages": []}
    if project == "twowiki":
        twowiki_data.convert(twowiki_data.DATA, out)
        return {"paths": [out / "triples.jsonl"], "passages": [out / "corpus.json"]}
    if project == "musique":
        musique_data.convert(musique_data.DATA, out)
        return {"paths": [musique_data.DATA / musique_data.OPENIE], "passages": []}
    return {}  # metaqa: built outside the suite


@functools.cache
def source_digest() -> str:
    """A hash of every kgr source file, taken once, after importing them all: the records of this process are made
    by the code it imported, even if the files are edited while it runs."""
    for module in pkgutil.walk_packages([str(ROOT / "kgr")], prefix="kgr."):
        if not module.name.endswith("__main__"):  # running it would start the CLI
            importlib.import_module(module.name)
    digest = hashlib.sha1()
    for path in sorted((ROOT / "kgr").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def code_fingerprint(config: dict) -> str:
    """A short hash of kgr's source (`source_digest`) and the project's settings: records are reused only under the
    same."""
    digest = hashlib.sha1(source_digest().encode())
    digest.update(json.dumps(config, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:10]


def run_name(set_name: str, method: str, backbone: str, code: str) -> str:
    return f"suite-{set_name}-{method}-{backbone.replace('/', '_')}-{code}"


def drop_older_runs(project, set_name: str, method: str, backbone: str, keep: str) -> int:
    """Delete this set's and method's suite runs made under other code or settings; return how many records."""
    from kgr.methods.runs import drop_runs

    return drop_runs(project, run_name(set_name, method, backbone, ""), keep)


def record_stats(records: list[dict], ids: set[str]) -> dict:
    """Mean context tokens over the set's records."""
    tokens = [r["context_tokens"] for r in records if r["id"] in ids]
    return {"context_tokens_mean": statistics.fmean(tokens) if tokens else None, "n_records": len(tokens)}


def run_project(project_name: str, sets: list[tuple[DevSet, list]], methods: list[str], args, log) -> list[dict]:
    """Retrieve and score every set of one project with every method; return one row per (set, method)."""
    from kgr.evaluate.run import evaluate, queries_for
    from kgr.methods.base import RunContext
    from kgr.methods.runner import run_method
    from kgr.methods.runs import create_records_table, load_records
    from kgr.project import Project
    from kgr.store import GraphStore

    project_dir = PROJECTS / project_name
    rows = []
    with Project.open(project_dir, write=True, overrides={"backbone.model": args.backbone}) as project:
        project.require("ingest")
        project.require("reach")
        began = time.perf_counter()
        store = GraphStore(project)
        store.warm()
        log(f"{project_name}: {store.num_entities:,} entities, {len(store.src):,} relationships, "
            f"{len(store.passages):,} passages loaded in {time.perf_counter() - began:.1f}s")
        context = RunContext(project, project.config, store, "retrieve")
        code = code_fingerprint(project.config.to_dict())
        create_records_table(project)
        for dev_set, questions in sets:
            runs: dict[str, str] = {}
            timing: dict[str, dict] = {}
            for method in methods:
                if method in PASSAGE_METHODS and not store.passages:
                    rows.append({"set": dev_set.name, "method": method, "skipped": "no passages in the project"})
                    continue
                run = runs[method] = run_name(dev_set.name, method, context.backbone, code)
                dropped = drop_older_runs(project, dev_set.name, method, context.backbone, run)
                began = time.perf_counter()
                _, done, reused = run_method(context, method, queries_for(questions), run=run, resume=not args.fresh)
                timing[method] = {"retrieved": done, "reused": reused, "seconds": round(time.perf_counter() - began, 1),
                                  "older_records_dropped": dropped}
                log(f"  {dev_set.name} {method}: {done} retrieved, {reused} reused in {timing[method]['seconds']}s")
            if not runs:
                continue
            result = evaluate(project, [(dev_set.name, questions)], list(runs.values()), out_dir=args.out / dev_set.name,
                              seed=args.seed, store=store, title=f"dev suite: {dev_set.name}",
                              labels={run: LABELS[m] for m, run in runs.items()})
            ids = {q.id for q in questions}
            vss_p50 = (result.summaries[runs["vss"]][dev_set.name].latency_ms_median if "vss" in runs else None)
            for method, run in runs.items():
                summary = result.summaries[run][dev_set.name]
                p50 = summary.latency_ms_median
                rows.append({
                    "set": dev_set.name, "method": method, "run": run, "n": summary.n_questions,
                    "recall": None if method in ENTITY_FREE else summary.recall,
                    "f1": None if method in ENTITY_FREE else summary.f1,
                    "answers_in_context": summary.answers_in_context,
                    "passage_r2": summary.passage_recall.get(2) if summary.n_passages else None,
                    "passage_r5": summary.passage_recall.get(5) if summary.n_passages else None,
                    "p50_ms": p50, "p95_ms": summary.latency_ms_p95,
                    "p50_over_vss": p50 / vss_p50 if p50 is not None and vss_p50 else None,
                    **record_stats(load_records(project, run), ids), **timing[method],
                })
    return rows


def run_when_free(jobs: dict[str, Callable[[], list[dict]]], wait: float, log) -> list[dict]:
    """Run each project's job; a project another process is writing is retried after the others, every 20 s, for
    up to `wait` seconds (then its ProjectBusyError stops the suite)."""
    from kgr.errors import ProjectBusyError

    deadline = time.monotonic() + wait
    rows: list[dict] = []
    pending = dict(jobs)
    while pending:
        for name, job in list(pending.items()):
            try:
                rows += job()
                del pending[name]
            except ProjectBusyError as exc:
                if time.monotonic() >= deadline:
                    raise
                log(f"{name} deferred: {exc.message}")
        if pending:
            time.sleep(20)
    return rows


def suite_means(rows: list[dict], methods: list[str]) -> dict[str, dict]:
    """Each method's recall averaged over the sets it ran on (entity methods only)."""
    means = {}
    for method in methods:
        recalls = [r["recall"] for r in rows if r["method"] == method and r.get("recall") is not None]
        if recalls:
            means[method] = {"mean_recall": statistics.fmean(recalls), "sets": len(recalls)}
    return means


def write_report(out: Path, stem: str, lines: list[str], command: str, stamp: str, rows: list[dict]) -> None:
    """A bench script's table as `<stem>.md` and its rows as `<stem>.json` (with the command and date) under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / f"{stem}.json").write_text(json.dumps({"command": command, "date": stamp, "rows": rows}, indent=2) + "\n",
                                      encoding="utf-8")
    print(f"wrote {out}/{stem}.md, {stem}.json")


def _cell(value, fmt: str = "{:.3f}") -> str:
    return "–" if value is None else fmt.format(value)


def markdown(rows: list[dict], means: dict[str, dict], n_sets: int) -> str:
    """The suite table, then the suite mean recall line."""
    lines = ["| set | method | n | recall | F1 | answers in context | passage R@2 | passage R@5 | context tokens "
             "| p50 ms | p50 / VSS |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "skipped" in r:
            continue
        lines.append(f"| {r['set']} | {LABELS[r['method']]} | {r['n']} | {_cell(r['recall'])} | {_cell(r['f1'])} | "
                     f"{_cell(r['answers_in_context'])} | {_cell(r['passage_r2'])} | {_cell(r['passage_r5'])} | "
                     f"{_cell(r['context_tokens_mean'], '{:.0f}')} | {_cell(r['p50_ms'], '{:.1f}')} | "
                     f"{_cell(r['p50_over_vss'], '{:.2f}×')} |")
    mean_line = " · ".join(f"{LABELS[m]} **{v['mean_recall']:.3f}**" + (f" ({v['sets']} sets)" if v["sets"] != n_sets
                                                                          else "") for m, v in means.items())
    return "\n".join(lines) + f"\n\nSuite mean recall ({n_sets} set{'s' if n_sets != 1 else ''}): {mean_line}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SET_NAMES),
                        help="comma-separated names or shell patterns, e.g. 'dev-*' (default: all)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated (default: all)")
    parser.add_argument("--limit", type=int, default=None, help="questions per set (default: each set's size)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backbone", default="offline")
    parser.add_argument("--fresh", action="store_true", help="recompute records even of unchanged code")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--wait", type=float, default=900,
                        help="seconds to wait for a project another process is writing (default 900; 0: fail at once)")
    add_threads_option(parser)
    args = parser.parse_args(argv)
    patterns = [s.strip() for s in args.sets.split(",") if s.strip()]
    names = [n for n in SET_NAMES if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = ([p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in SET_NAMES)]
               + [m for m in methods if m not in METHODS])
    if unknown or not names or not methods or (args.limit is not None and args.limit < 1):
        parser.error(f"unknown or empty --sets/--methods ({', '.join(unknown) or 'none given'}) or --limit < 1; "
                     f"sets: {', '.join(SET_NAMES)}; methods: {', '.join(METHODS)}")
    apply_threads(args.threads)
    source_digest()  # before any record is made

    from kgr.evaluate.questions import sample

    def log(message: str) -> None:
        print(message, flush=True)

    started = time.perf_counter()
    chosen = [s for s in SETS if s.name in names]
    rows: list[dict] = []
    stage_seconds: dict[str, dict] = {}
    try:
        def job(project_name: str) -> list[dict]:
            inputs = prepare_inputs(project_name)
            if inputs:
                stage_seconds[project_name] = build_project(PROJECTS / project_name, inputs, log)
            sets = [(s, sample(s.questions(), args.limit or s.size, args.seed)) for s in chosen
                    if s.project == project_name]
            log(f"{project_name}: " + ", ".join(f"{s.name} {len(qs)}" for s, qs in sets) + " questions")
            return run_project(project_name, sets, methods, args, log)

        jobs = {name: (lambda name=name: job(name)) for name in dict.fromkeys(s.project for s in chosen)}
        rows = run_when_free(jobs, args.wait, log)
        rows.sort(key=lambda r: (SET_NAMES.index(r["set"]), METHODS.index(r["method"])))
    except KgrError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status

    means = suite_means(rows, methods)
    table = markdown(rows, means, len(chosen))
    command = "python bench/suite.py " + " ".join(argv if argv is not None else sys.argv[1:])
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    skipped = [f"{r['set']} {r['method']} ({r['skipped']})" for r in rows if "skipped" in r]
    settings = {"command": command.strip(), "date": date, "sets": names, "methods": methods, "limit": args.limit,
                "seed": args.seed, "backbone": args.backbone, "fresh": args.fresh, "threads": args.threads,
                "stage_seconds": stage_seconds, "total_seconds": round(time.perf_counter() - started, 1),
                "python": platform.python_version(), "machine": platform.machine(), "not_run": skipped}
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "suite.md").write_text(
        f"# kgr dev suite\n\n`{settings['command']}` ({date}; backbone `{args.backbone}`, seed {args.seed}). "
        f"Latency is per question on a shared 2-core machine: compare within one table only.\n\n{table}\n"
        + (f"Not run: {'; '.join(skipped)}.\n\n" if skipped else "")
        + "Per-set reports (kgr eval): `<set>/report.md`.\n\n"
        f"```json\n{json.dumps(settings, indent=2)}\n```\n", encoding="utf-8")
    (args.out / "suite.json").write_text(json.dumps({"settings": settings, "rows": rows, "suite_mean_recall": means},
                                                    indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}/suite.md, suite.json ({settings['total_seconds']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
