"""LLM-built KG vs. gold KG, side by side (issue #15): the dev suite on its two passage sets, every method.

MuSiQue with HippoRAG's GPT-3.5 OpenIE graph (`kgr ingest DIR openie_results.json`: provenance, coarse types) and
2WikiMultihopQA with its gold evidence triples as the KG; every method (DotRAG, CS-RAG, dense passages `dpr`, VSS,
BM25): recall, F1, answers in context, passage R@2 / R@5, tokens, p50 latency and its ratio to VSS. This is
`bench/suite.py --sets twowiki,musique` with its table written to bench/out/openkg/:

    python bench/openkg_table.py                 # all 1,000 2Wiki questions and the 50 MuSiQue dev questions
    python bench/openkg_table.py --limit 200     # any other bench/suite.py option passes through
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite  # noqa: E402

OPEN_KG_SETS = "twowiki,musique"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", str(suite.ROOT / "bench" / "out" / "openkg")]
    return suite.main(["--sets", OPEN_KG_SETS, *argv])


if __name__ == "__main__":
    sys.exit(main())
