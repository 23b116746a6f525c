"""Backbone calls and prompt tokens per question for DotRAG with an LLM backbone, measured on real prompts.

A scripted OpenAI-compatible server on 127.0.0.1 (tests/fake_llm_server.py) answers every decision with a valid
reply built from the JSON schema kgr sends (always ranking in offered order and always continuing while it may:
the most calls a question can cost) and reports usage by counting the real prompt with the o200k tokenizer.
LiteLLM, validation, caching (off here) and accounting run exactly as with a hosted model.

    python bench/dotrag_llm_cost.py --limit 100

The DotRAG paper reports 4.6-5.7 calls and 5.4k-9.8k input tokens per MetaQA question (gpt-4o-mini).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_llm_server import FakeLLMServer, ok  # noqa: E402

from kgr.backbone import count_tokens  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "metaqa"  # the data folder beside the clone
DEFAULT_PROJECT = ROOT / "bench" / "out" / "projects" / "metaqa"
SCHEMA_MARK = "matches this JSON schema:\n"


def first_option_query(prompt: str) -> str:
    """A search phrase like a model would write: the first offered option's relation and type words."""
    match = re.search(r"^0\. (\S+) \(\d+ entities; via ([^,)\n]+)", prompt, re.MULTILINE)
    return f"{match.group(2).replace('_', ' ')} {match.group(1)}" if match else "related entities"


def valid_reply(schema: dict, prompt: str) -> dict:
    """The most call-hungry valid answer: rank in offered order, continue whenever allowed."""
    properties = schema.get("properties", {})
    reply: dict = {}
    if "ranking" in properties:
        reply["ranking"] = list(properties["ranking"]["items"]["enum"])
        reply["query"] = first_option_query(prompt)
    if "action" in properties:
        actions = properties["action"]["enum"]
        if "continue" in actions:
            reply.update(action="continue", option=0, query=first_option_query(prompt))
        else:
            reply.update(action="stop", depths=[max(properties["depths"]["items"]["enum"])])
    if "choice" in properties:
        reply["choice"] = properties["choice"]["enum"][0]
    reply["reason"] = "scripted"
    return reply


def responder(body: dict):
    """Answer from the schema in the prompt; report usage counted on the real messages."""
    text = "\n".join(m["content"] for m in body["messages"])
    schema = json.loads(text[text.rindex(SCHEMA_MARK) + len(SCHEMA_MARK):].strip())
    content = json.dumps(valid_reply(schema, text))
    return ok(content, prompt_tokens=count_tokens(text), completion_tokens=count_tokens(content))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, default=DEFAULT_PROJECT,
                        help=f"project with MetaQA ingested and reach built (default {DEFAULT_PROJECT})")
    parser.add_argument("--limit", type=int, default=100, help="questions per hop split")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/dotrag_llm_cost.json")
    args = parser.parse_args()

    from kgr.config import load_config
    from kgr.evaluate.questions import load_questions, sample
    from kgr.methods.base import Query, RunContext
    from kgr.methods.dotrag.method import DotRAG
    from kgr.project import Project
    from kgr.store import GraphStore

    os.environ.setdefault("OPENAI_API_KEY", "sk-local-dummy")
    results = {}
    with FakeLLMServer(default=responder, lifetime=3600) as server, Project.open(args.project) as project:
        store = GraphStore(project)
        store.warm()
        config = load_config(args.project, {"backbone.model": "openai/kgr-scripted", "backbone.api_base": server.url,
                                            "backbone.cache": False})
        method = DotRAG(RunContext(project, config, store, "retrieve", use_cache=False))
        for hops in (1, 2, 3):
            questions = sample(load_questions(DATA / f"{hops}-hop/vanilla/qa_dev.txt", hops=hops), args.limit, args.seed)
            records = [method.retrieve(Query(q.id, q.question)) for q in questions]
            calls = [r.llm_calls for r in records]
            tokens = [r.prompt_tokens for r in records]
            results[f"{hops}-hop"] = {
                "questions": len(records),
                "calls_mean": round(statistics.mean(calls), 2), "calls_max": max(calls),
                "prompt_tokens_mean": round(statistics.mean(tokens)), "prompt_tokens_p95":
                    sorted(tokens)[int(0.95 * (len(tokens) - 1))],
                "completion_tokens_mean": round(statistics.mean(r.completion_tokens for r in records)),
            }
            print(f"{hops}-hop: {results[f'{hops}-hop']}", flush=True)
        results["http_requests"] = len(server.requests)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
