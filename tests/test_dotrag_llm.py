"""DotRAG with an LLM backbone (LiteLLM against the scripted OpenAI-compatible server), and the random policy.

The default responder answers every decision with a valid reply built from the JSON schema kgr puts in the prompt
(as bench/dotrag_llm_cost.py does): rank in offered order and continue whenever allowed, the most calls a question
can cost. It reports usage by counting the real prompt with the o200k tokenizer, and remembers what it reported.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from fake_llm_server import FakeLLMServer, ok
from kgr.backbone import count_tokens
from kgr.config import load_config
from kgr.methods.base import Query, RunContext
from kgr.methods.dotrag.method import DotRAG
from kgr.methods.dotrag.random_policy import RandomChooser
from kgr.project import Project
from kgr.store import GraphStore
from test_dotrag import THREE_HOP, TWO_HOP, build_tiny_movies

ONE_HOP = "[Dark Harbor] was directed by who"
SCHEMA_MARK = "matches this JSON schema:\n"
FIRST_OPTION = re.compile(r"^0\. (\S+) \([\d,]+ entities; via ([^,)]+)", re.MULTILINE)


def valid_reply(schema: dict, prompt: str) -> dict:
    """Rank in offered order, continue whenever allowed (with option 0), and name option 0's relation and type."""
    properties = schema.get("properties", {})
    reply: dict = {"reason": "scripted"}
    first = FIRST_OPTION.search(prompt)
    query = f"{first.group(2).replace('_', ' ')} {first.group(1)}" if first else "related entities"
    if "ranking" in properties:
        reply.update(ranking=list(properties["ranking"]["items"]["enum"]), query=query)
    if "action" in properties:
        if "continue" in properties["action"]["enum"]:
            reply.update(action="continue", option=0, query=query)
        else:
            reply.update(action="stop", depths=[max(properties["depths"]["items"]["enum"])])
    return reply


class Responder:
    """Valid replies from the prompt's schema; usage counted on the real messages and logged."""

    def __init__(self):
        self.usage: list[tuple[int, int]] = []

    def __call__(self, body: dict):
        text = "\n".join(m["content"] for m in body["messages"])
        prompt = body["messages"][1]["content"]  # the decision's prompt (a repair request follows it)
        schema, _ = json.JSONDecoder().raw_decode(prompt, prompt.rindex(SCHEMA_MARK) + len(SCHEMA_MARK))
        content = json.dumps(valid_reply(schema, prompt))
        usage = (count_tokens(text), count_tokens(content))
        self.usage.append(usage)
        return ok(content, prompt_tokens=usage[0], completion_tokens=usage[1])


@pytest.fixture(scope="module")
def server():
    responder = Responder()
    with FakeLLMServer(default=responder) as fake:
        fake.responder = responder
        yield fake


@pytest.fixture(scope="module")
def env(tmp_path_factory, server):
    """A private writable copy of the tiny movie project, opened for the module, and its loaded graph."""
    target = tmp_path_factory.mktemp("dotrag_llm") / "project"
    shutil.copytree(build_tiny_movies(tmp_path_factory), target, ignore=shutil.ignore_patterns(".kgr.lock"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-dummy-dotrag")
        with Project.open(target, write=True) as project:
            store = GraphStore(project)
            store.warm()
            yield project, store


def method(env, server, *, use_cache: bool = False, **overrides) -> DotRAG:
    project, store = env
    settings = {"backbone.model": "openai/fake", "backbone.api_base": server.url, "backbone.timeout": 10.0}
    settings.update(overrides)
    config = load_config(project.root, settings)
    return DotRAG(RunContext(project, config, store, "retrieve", use_cache=use_cache))


def calls_of(env, run_id: str, qid: str) -> list[dict]:
    project, _ = env
    cursor = project.db.execute("SELECT * FROM llm_calls WHERE run_id = ? AND question_id = ? "
                                "ORDER BY created_at, attempts", [run_id, qid])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


@pytest.mark.parametrize("hops, text", [(1, ONE_HOP), (2, TWO_HOP), (3, THREE_HOP)])
def test_calls_and_tokens_per_question(env, server, hops, text):
    dotrag = method(env, server)
    assert dotrag.policy.name == "openai/fake"
    before = len(server.requests)
    record = dotrag.retrieve(Query(f"h{hops}", text))
    sent = len(server.requests) - before
    # One anchor: rank its trajectories, then a review at depths 1 and 2 (depth 3 is the last: no review).
    assert 1 <= record.llm_calls == sent <= 3
    usage = server.responder.usage[before:]
    assert record.prompt_tokens == sum(p for p, _ in usage) > 0
    assert record.completion_tokens == sum(c for _, c in usage) > 0
    rows = calls_of(env, dotrag.context.run_id, f"h{hops}")
    assert len(rows) == sent and not any(r["fallback"] or r["cache_hit"] for r in rows)
    assert [r["purpose"] for r in rows] == ["dotrag_rank_trajectories"] + ["dotrag_review"] * (sent - 1)
    assert record.backbone == "openai/fake" and record.anchors and record.paths
    # The model's own hop query is what the search used.
    [walk] = record.trace["trajectories"]
    first_hop = walk["hops"][0]
    assert first_hop["query"] == record.trace["plan"]["pairs"][0]["query"] == f"{first_hop['relation'].replace('_', ' ')} {first_hop['type']}"


def test_invalid_reply_is_repaired_once_then_the_offline_policy_decides(env, server):
    offline_plan = DotRAG(RunContext(env[0], load_config(env[0].root, {}), env[1], "retrieve")).plan(Query("o", TWO_HOP))
    dotrag = method(env, server)
    before = len(server.requests)
    server.push(ok("I would rank the movies first."), ok('{"ranking": [7], "query": "x"}'))
    record = dotrag.retrieve(Query("bad", TWO_HOP))
    assert server.pending() == 0
    repair = server.requests[before + 1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "I would rank the movies first."}
    assert "JSON" in repair[-1]["content"] or "json" in repair[-1]["content"]
    # The fallback decision is the offline policy's: its ranking and hop query.
    assert [p["type"] for p in record.trace["plan"]["pairs"]] == [p["type"] for p in offline_plan["pairs"]]
    assert record.trace["plan"]["pairs"][0]["query"] == offline_plan["pairs"][0]["query"] == "written by movie"
    rows = calls_of(env, dotrag.context.run_id, "bad")
    assert [r["purpose"] for r in rows[:2]] == ["dotrag_rank_trajectories", "dotrag_rank_trajectories:repair"]
    assert [r["fallback"] for r in rows] == [False, True] + [False] * (len(rows) - 2)
    assert rows[0]["error_kind"] == "invalid_output"
    assert record.llm_calls == len(rows) == len(server.requests) - before  # the repair is a call too
    assert dotrag.context.client.log.usage("bad").fallbacks == 1


def test_rerun_with_the_cache_makes_no_request(env, server):
    first = method(env, server, use_cache=True)
    before = len(server.requests)
    server.push(ok("not json at all"))  # the first decision is repaired (by the default responder): cached too
    one = first.retrieve(Query("c", TWO_HOP))
    made = len(server.requests) - before
    assert made == one.llm_calls >= 2

    second = method(env, server, use_cache=True)
    two = second.retrieve(Query("c", TWO_HOP))
    assert len(server.requests) - before == made  # zero new HTTP requests
    assert (two.paths, two.entities, two.context) == (one.paths, one.entities, one.context)
    rows = calls_of(env, second.context.run_id, "c")
    assert rows and all(r["cache_hit"] and r["attempts"] == 0 for r in rows)
    assert two.trace["plan"]["pairs"] == one.trace["plan"]["pairs"]


def test_random_chooser_is_deterministic_per_seed_question_purpose():
    chooser = RandomChooser(7)
    assert chooser.order(10, "q1", "hop1") == RandomChooser(7).order(10, "q1", "hop1")
    assert sorted(chooser.order(10, "q1", "hop1")) == list(range(10))
    draws = {tuple(RandomChooser(s).order(10, q, p)) for s in (7, 8) for q in ("q1", "q2") for p in ("a", "b")}
    assert len(draws) == 8
    assert chooser.choose("abc", "q1", "x") in "abc"
    assert chooser.subset(list(range(10)), 3, "q1", "x") == sorted(chooser.subset(list(range(10)), 3, "q1", "x"))
    assert chooser.subset([1, 2], 5) == [1, 2]


def test_random_policy_is_deterministic_for_a_seed(env, server):
    before = len(server.requests)
    questions = [Query(f"r{i}", text) for i, text in enumerate([ONE_HOP, TWO_HOP, THREE_HOP])]

    def run(seed: int):
        dotrag = method(env, server, **{"backbone.model": "random", "backbone.seed": seed})
        assert dotrag.policy.name == "random" and dotrag.context.client is None
        return [dotrag.retrieve(q) for q in questions]

    first, again = run(1), run(1)
    for a, b in zip(first, again):
        assert (a.paths, a.entities, a.context) == (b.paths, b.entities, b.context)
        assert a.trace["plan"]["pairs"] == b.trace["plan"]["pairs"]
        assert a.backbone == "random" and a.llm_calls == 0
    def outcome(records) -> str:
        return json.dumps([[r.trace["plan"]["pairs"], r.paths] for r in records])

    assert len({outcome(first), outcome(run(2)), outcome(run(3))}) > 1  # the seed matters
    assert len(server.requests) == before  # no backbone requests
