"""Does DotRAG depend on how a graph spells its relation labels? WC2014 with its labels respelled, every method.

    python bench/relabel.py                                   # every style, DotRAG and VSS, 200 questions per set
    python bench/relabel.py --styles camel --methods dotrag,vss,bm25 --limit 100

The same WC2014 graph and questions as the dev suite (bench/suite.py), with each relation label written in another
convention, mechanically (no label is named here):

| style | `plays_in_club` | its `_inverse` twin |
|---|---|---|
| snake (as given) | `plays_in_club` | `plays_in_club_inverse` |
| camel | `playsInClub` | `playsInClubInverse` |
| spaced | `plays in club` (words, as a hand-made graph might write them) | `plays in club inverse` |
| path | `/football/player/plays_in_club` (a namespace every label shares, as Freebase's domain/type prefix) | `/football/player/plays_in_club_inverse` |
| dunder | `__football__player__plays_in_club` (the same path flattened with double underscores, as Freebase dumps write it) | `__football__player__plays_in_club__inverse` |
| opaque | `r3` (labels carry no words: only types and the question are left) | `r3_inverse` |

A policy that reads the graph's own labels should do as well on camel, spaced, path and dunder as on snake; opaque is the floor.
Each style is a project under bench/out/projects/wc2014-<style> (ingest + reach, skipped when up to date); the dev
suite runs camel, spaced, path and dunder as its sets `wc2014-<style>-1hop`, `-2hop`, `-conj` on the same projects.
Output: bench/out/relabel/relabel.md and relabel.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402
import twowiki_data  # noqa: E402
import wc2014_data  # noqa: E402

OUT = ROOT / "bench" / "out" / "relabel"
STYLES = ("snake", "camel", "spaced", "path", "dunder", "opaque")


def respell(label: str, style: str, numbers: dict[str, int]) -> str:
    """`label` (snake_case, maybe with an `_inverse` suffix) written in `style`."""
    base, inverse = (label[:-len("_inverse")], True) if label.endswith("_inverse") else (label, False)
    if style == "snake":
        return label
    if style == "camel":
        words = base.split("_")
        return words[0] + "".join(w.capitalize() for w in words[1:]) + ("Inverse" if inverse else "")
    if style == "spaced":
        return " ".join(base.split("_")) + (" inverse" if inverse else "")
    if style == "path":
        return f"/football/player/{label}"
    if style == "dunder":
        return f"__football__player__{base}" + ("__inverse" if inverse else "")
    if style == "opaque":
        return f"r{numbers.setdefault(base, len(numbers))}" + ("_inverse" if inverse else "")
    raise ValueError(f"unknown style {style!r}")


def write_kb(style: str, out: Path) -> Path:
    """WC2014's kb.txt with every relation label respelled; return its path."""
    source = suite.DATA_OUT / "wc2014" / "kb.txt"
    if not source.exists():
        wc2014_data.convert(wc2014_data.DATA, source.parent)
    numbers: dict[str, int] = {}
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        head, relation, tail = line.split("\t")
        lines.append(f"{head}\t{respell(relation, style, numbers)}\t{tail}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "kb.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--styles", default=",".join(STYLES))
    parser.add_argument("--methods", default="dotrag,vss")
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--fresh", action="store_true")
    args = parser.parse_args(argv)
    styles = [s for s in args.styles.split(",") if s]
    if set(styles) - set(STYLES):
        parser.error(f"styles: {', '.join(STYLES)}")
    args.backbone, args.wait = "offline", 0
    from kgr.evaluate.questions import sample

    sets = [(s, sample(s.questions(), args.limit, args.seed)) for s in suite.SETS if s.project == "wc2014"]
    methods = [m for m in args.methods.split(",") if m]
    rows = []
    for style in styles:
        project = f"wc2014-{style}"
        kb = write_kb(style, suite.DATA_OUT / project)
        twowiki_data.build_project(suite.PROJECTS / project, {"paths": [kb], "passages": []})
        suite_args = argparse.Namespace(**{**vars(args), "out": args.out / style})
        for row in suite.run_project(project, sets, methods, suite_args, print):
            rows.append({"style": style, **row})
    lines = ["| style | set | method | recall | F1 | p50 ms |", "|---|---|---|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['style']} | {row['set']} | {suite.LABELS[row['method']]} | {row['recall']:.3f} | "
                     f"{row['f1']:.3f} | {row['p50_ms']:.1f} |")
    command = "python bench/relabel.py " + " ".join(argv if argv is not None else sys.argv[1:])
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = "\n".join(lines)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "relabel.md").write_text(f"# WC2014 with respelled relation labels\n\n`{command.strip()}` ({stamp})"
                                         f"\n\n{table}\n", encoding="utf-8")
    (args.out / "relabel.json").write_text(json.dumps({"command": command.strip(), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}/relabel.md, relabel.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
