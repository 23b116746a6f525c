"""`kgr.methods.baselines`: BM25 and VSS on the MetaQA fixture project (real embedding model)."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from kgr.methods.base import Query, RunContext
from kgr.methods.baselines import BM25, VSS
from kgr.methods.budget import pack_paths, token_counter
from kgr.methods.records import RetrievalRecord
from kgr.project import Project
from kgr.store import GraphStore

METAQA = Path(__file__).resolve().parent.parent / "fixtures" / "metaqa"


def first_question(hops: int) -> tuple[str, list[str]]:
    text, _, answers = (METAQA / f"qa_{hops}hop.txt").read_text(encoding="utf-8").splitlines()[0].partition("\t")
    return text, answers.split("|")


@pytest.fixture(scope="module")
def context(metaqa_project):
    with Project.open(metaqa_project) as project:
        store = GraphStore(project)
        yield RunContext(project, project.config, store, "retrieve")


@pytest.fixture(scope="module")
def methods(context):
    return {"bm25": BM25(context), "vss": VSS(context)}


@pytest.fixture(scope="module")
def temuera():
    text, answers = first_question(1)
    assert text == "what movies did [Temuera Morrison] act in"
    return Query("q1", text), answers


def tiny(context: RunContext, tokens: int) -> RunContext:
    config = copy.deepcopy(context.config)
    config.budget.tokens = tokens
    return dataclasses.replace(context, config=config)


@pytest.mark.parametrize("name", ["bm25", "vss"])
def test_record_fields(methods, context, temuera, name):
    method = methods[name]
    assert method.name == name and method.needs_reach is False
    record = method.retrieve(temuera[0])
    assert isinstance(record, RetrievalRecord)
    assert record.id == "q1" and record.question == temuera[0].text and record.method == name
    assert record.backbone == context.backbone
    assert 0 < len(record.entities) <= context.config.baselines.top_entities
    assert len(set(record.entities)) == len(record.entities)
    assert 0 < len(record.paths) <= context.config.baselines.top_relationships
    for path in record.paths:
        assert set(path) == {"entities", "relations", "directions", "similarities", "score"}
        assert path["directions"] == ["forward"]  # a relationship hit is shown as stored: subject to object
        assert len(path["entities"]) == 2 and len(path["relations"]) == 1 and len(path["similarities"]) == 1
        assert path["score"] == path["similarities"][0]
        assert f"({path['entities'][0]}; {path['relations'][0]}; {path['entities'][1]})" in record.context
    scores = [p["score"] for p in record.paths]
    assert scores == sorted(scores, reverse=True)
    assert 0 < record.context_tokens <= context.config.budget.tokens
    assert record.context_tokens == sum(token_counter()(line) + 1 for line in record.context.split("\n"))
    assert all(entity in record.context for entity in record.entities)
    assert record.llm_calls == 0 and record.cost_usd == 0
    assert record.latency_ms > 0 and record.timings_ms and sum(record.timings_ms.values()) <= record.latency_ms + 1
    assert set(record.entities) <= set(record.trace["reached"])
    assert record.trace["cut_by_budget"] == []  # the default budget fits 40 + 40 short items
    json.loads(record.to_json())


def test_vss_finds_the_one_hop_answers(methods, temuera):
    query, answers = temuera
    record = methods["vss"].retrieve(query)
    in_paths = {e for path in record.paths for e in path["entities"]}
    assert set(answers) <= in_paths
    assert set(answers) <= set(record.entities)
    assert "Temuera Morrison" in record.entities[:5]


def test_bm25_uses_english_stopwords_and_the_name(methods, temuera):
    query, answers = temuera
    record = methods["bm25"].retrieve(query)
    assert record.entities[0] == "Temuera Morrison"  # the exact-name entity hit ranks first
    assert set(answers) <= set(record.entities)
    # Nothing matches: no entities, empty context, still a full record.
    empty = methods["bm25"].retrieve(Query("q0", "the of and"))
    assert empty.entities == [] and empty.paths == [] and empty.context == "" and empty.context_tokens == 0


@pytest.mark.parametrize("cls", [BM25, VSS])
def test_tiny_budget_cuts(context, temuera, cls):
    method = cls(tiny(context, 40))
    record = method.retrieve(temuera[0])
    assert 0 < record.context_tokens <= 40
    assert record.trace["cut_by_budget"], "a 40-token budget must cut candidates"
    assert record.trace["cut_items"] > 0
    assert not set(record.trace["cut_by_budget"]) & set(record.entities)
    assert all(entity in record.context for entity in record.entities)
    assert len(record.paths) < record.trace["relationship_hits"]


def test_entity_cap(context, temuera):
    config = copy.deepcopy(context.config)
    config.baselines.top_entities = 3
    config.baselines.top_relationships = 5
    record = VSS(dataclasses.replace(context, config=config)).retrieve(temuera[0])
    assert len(record.entities) <= 3
    assert len(record.paths) <= 5
    assert record.trace["filtered"]  # endpoints packed beyond the cap


def test_bare_entity_path_packs_its_name(context):
    store = context.store
    eid = store.names.index("Temuera Morrison")
    count = token_counter()
    packed = pack_paths(store, [[]], 100, count, endpoints=[[eid]])
    assert packed.context == "Temuera Morrison" and packed.eids == [eid]
    # A relationship path still adds no line for an entity without a description.
    rid = int(((store.src == eid) | (store.dst == eid)).nonzero()[0][0])
    packed = pack_paths(store, [[rid]], 100, count)
    assert packed.context.count("\n") == 0 and packed.context.startswith("(")


# -- dense passages (dpr) on the 2Wiki fixture, which has a passage corpus ------------------------------------
TWOWIKI = Path(__file__).resolve().parent.parent / "fixtures" / "2wiki"


@pytest.fixture(scope="module")
def passages_project(tmp_path_factory, run_kgr):
    """The 2Wiki fixture ingested through the real command (`kgr ingest DIR triples.jsonl --passages corpus.json`)."""
    root = tmp_path_factory.mktemp("dpr") / "project"
    done = run_kgr("ingest", root, TWOWIKI / "triples.jsonl", "--passages", TWOWIKI / "corpus.json", "--quiet")
    assert done.exit_code == 0, done.output
    return root


@pytest.fixture(scope="module")
def passages_context(passages_project):
    with Project.open(passages_project) as project:
        store = GraphStore(project)
        store.warm()
        yield RunContext(project, project.config, store, "retrieve")


def test_dpr_ranks_the_passage_about_the_mention(passages_context):
    from kgr.methods.baselines import DensePassages

    method = DensePassages(passages_context)
    assert method.name == "dpr" and method.needs_reach is False
    record = method.retrieve(Query("q", "When did [Lothair Ii]'s mother die?"))
    store = passages_context.store
    assert record.method == "dpr" and record.entities == [] and record.paths == []
    assert len(record.passages) == passages_context.config.baselines.top_passages == 5
    assert record.passages[0] == "Lothair II"
    scores = [p["score"] for p in record.trace["passages"]]
    assert scores == sorted(scores, reverse=True) and record.trace["cut_by_budget"] == []
    # The context is the passages' texts, in rank order, each counted once in the token total.
    lines = ["[{}] {}".format(*store.passages[hit["pid"]]) for hit in record.trace["passages"]]
    assert record.context == "\n".join(lines)
    assert [store.passages[hit["pid"]][0] for hit in record.trace["passages"]] == record.passages
    assert record.context_tokens == sum(token_counter()(line) + 1 for line in lines)
    assert set(record.timings_ms) == {"encode", "score", "pack"} and record.latency_ms > 0
    json.loads(record.to_json())


def test_dpr_tiny_budget_keeps_only_what_fits(passages_context):
    from kgr.methods.baselines import DensePassages

    full = DensePassages(passages_context).retrieve(Query("q", "When did Lothair Ii's mother die?"))
    first = passages_context.store.passages[full.trace["passages"][0]["pid"]]
    budget = token_counter()("[{}] {}".format(*first)) + 1
    record = DensePassages(tiny(passages_context, budget)).retrieve(Query("q", "When did Lothair Ii's mother die?"))
    assert 0 < record.context_tokens <= budget
    assert record.passages and len(record.passages) < len(full.passages)
    assert record.trace["cut_by_budget"] and not set(record.trace["cut_by_budget"]) & set(record.passages)


def test_cli_dpr_batch_scores_passage_recall(passages_project, copy_project, run_kgr, tmp_path):
    """Probe: `kgr retrieve --method dpr` then `kgr eval` reports passage R@2 / R@5 for it."""
    project = copy_project(passages_project, "dpr-cli")
    questions = TWOWIKI / "questions.jsonl"
    done = run_kgr("retrieve", project, "--questions", questions, "--method", "dpr", "--quiet")
    assert done.exit_code == 0, done.output
    done = run_kgr("eval", project, "--questions", questions, "--run", "dpr-offline", "--json")
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)["summaries"]["dpr-offline"]
    split = "all" if len(summary) > 1 else next(iter(summary))  # a file of several hop counts is split by them
    recall = summary[split]["passage_recall"]
    assert summary[split]["n_passages"] == 32
    assert 0.5 < recall["2"] <= recall["5"] <= 1.0
    assert summary[split]["answers_in_context"] > 0


def test_cli_dpr_without_passages_is_a_missing_stage(metaqa_project, copy_project, run_kgr):
    """Probe: a project ingested without passages refuses dpr (exit 4, one line naming the fix), no record written."""
    project = copy_project(metaqa_project, "dpr-none")
    out = project.parent / "dpr.jsonl"
    done = run_kgr("retrieve", project, "--questions", METAQA / "qa_1hop.txt", "--method", "dpr", "--out", out,
                   "--quiet")
    assert done.exit_code == 4, done.output
    message = done.stderr.strip()
    assert "dpr" in message and "--passages" in message and len(message.splitlines()) == 1
    assert not out.exists()
    with Project.open(project) as opened:
        assert not opened.has_table("records") or not opened.db.execute("SELECT count(*) FROM records").fetchone()[0]
