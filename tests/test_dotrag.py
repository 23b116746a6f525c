"""`kgr.methods.dotrag` with the offline policy on a tiny hand-made movie graph whose right paths are known.

The graph (tests/data/tiny_movies/kb.txt, typed by its schema.toml) has 8 movies, all in English (the hub), and a
person who both directs and acts (Clint Ranger: directed Dark Harbor and Silent River, acted in Golden Hour and
Paper Moon Rising), so he is typed both `director` and `actor`.

Settings: the defaults (kgr.config.DotragConfig), except where a test names its overrides:
`dotrag.label_margin=0.05` for the 1-hop relation-precision tests, `dotrag.search_top=3` for the hub test,
`budget.tokens` for the budget test and `dotrag.constrained_search=false` for the ablation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgr.config import load_config
from kgr.methods.base import Query, RunContext
from kgr.methods.budget import token_counter, triple_line
from kgr.graph import relation_words
from kgr.methods.dotrag.method import DotRAG, Path as WalkPath, PathLayer, layer_paths, round_robin
from kgr.project import PHRASES_DIR, Project
from kgr.ranking import top_k_per_group
from kgr.schema import open_vocabulary
from kgr.store import GraphStore

DATA = Path(__file__).resolve().parent / "data" / "tiny_movies"

ACTED = {"Golden Hour", "Paper Moon Rising"}  # Clint Ranger acted in these
DIRECTED = {"Dark Harbor", "Silent River"}  # ... and directed these
MOVIES = {"Dark Harbor", "Silent River", "Golden Hour", "Paper Moon Rising", "The Last Orchard", "Blue Canyon",
          "Iron Meadow", "Night Ferry"}
TWO_HOP = "who directed the movies written by [Wendy Scribe]"  # Dark Harbor -> Clint Ranger, Golden Hour -> Ada Helm
THREE_HOP = "who acted in the movies directed by the director of [The Last Orchard]"  # Boris Vane -> Blue Canyon
THREE_HOP_ANSWERS = {"Maya Lorne", "Leo Sterling"}
# Actors reachable within 3 hops of The Last Orchard only through a hub (the English language, the Drama genre) or
# not at all; the unconstrained ablation does return some of them.
HUB_ONLY_ACTORS = {"Pia Mendez", "Sam Okafor", "Nora Quill", "Hugo Brant", "Clint Ranger"}


def build_tiny_movies(tmp_path_factory) -> Path:
    """Ingest + reach of the tiny movie graph, built once per session (in-process) and shared read-only."""
    from kgr.ingest.stage import IngestOptions, run_ingest
    from kgr.reach_stage import run_reach

    root = tmp_path_factory.getbasetemp() / "tiny_movies" / "project"
    done = root.parent / "built"
    if not done.exists():
        with Project.open(root, write=True, create=True) as project:
            run_ingest(project, IngestOptions([DATA / "kb.txt"], schema=DATA / "schema.toml"))
            run_reach(project)
        done.touch()
    return root


def tiny_movies_store(tmp_path_factory):
    """(project, warmed store) of the tiny movie graph (yields; closes the project)."""
    root = build_tiny_movies(tmp_path_factory)
    with Project.open(root) as project:
        graph = GraphStore(project)
        graph.warm()
        yield project, graph


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    yield from tiny_movies_store(tmp_path_factory)


@pytest.fixture(scope="module")
def dotrag(store):
    """DotRAG(**overrides) on the tiny graph, offline policy; instances are cached per overrides."""
    project, graph = store
    made: dict[tuple, DotRAG] = {}

    def make(**overrides) -> DotRAG:
        """Keyword names without a section are dotrag settings: make(label_margin=0.05, **{"budget.tokens": 50})."""
        overrides = {(k if "." in k else f"dotrag.{k}"): v for k, v in overrides.items()}
        key = tuple(sorted(overrides.items()))
        if key not in made:
            config = load_config(project.root, overrides)
            made[key] = DotRAG(RunContext(project, config, graph, "retrieve"))
        return made[key]

    return make


@pytest.fixture(scope="module")
def triples(store) -> set[tuple[str, str, str]]:
    _, graph = store
    return {graph.triple(r) for r in range(len(graph.src))}


def ask(method: DotRAG, text: str, qid: str = "q"):
    return method.retrieve(Query(qid, text))


def endpoints(record, depth: int | None = None) -> set[str]:
    return {p["entities"][-1] for p in record.paths if depth is None or p["depth"] == depth}


def assert_paths_are_in_the_graph(record, triples):
    """Every path walks real triples (in either direction) from an anchor."""
    for path in record.paths:
        assert path["entities"][0] in record.anchors
        for a, relation, b in zip(path["entities"], path["relations"], path["entities"][1:]):
            assert (a, relation, b) in triples or (b, relation, a) in triples, path


# -- anchors -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [TWO_HOP, "who directed the movies written by [wendy  scribe]",
                                  "who directed the movies written by Wendy Scribe"])
def test_anchor_from_the_mention_or_the_name(dotrag, text):
    plan = dotrag().plan(Query("q", text))
    named = [a for a in plan["anchors"] if a["named"]]
    assert [a["name"] for a in named] == ["Wendy Scribe"] and named[0]["rank"] == 0
    assert named[0]["types"] == ["writer"]
    assert {p["anchor"] for p in plan["pairs"]} == {named[0]["eid"]}


def test_a_second_name_the_seed_search_misses_anchors_when_it_is_specific(dotrag, store):
    """With one seed the seed search names one of the question's two names; the other, found word for word, anchors
    too when its specificity in the graph reaches `dotrag.lexical_anchors` (0 = off), or at any floor when the
    question writes it as the graph spells it, capitalized."""
    _, graph = store

    def anchors(text: str, **settings) -> set[str]:
        return {a["name"] for a in dotrag(seeds=1, **settings).plan(Query("q", text))["anchors"] if a["named"]}

    lowercase = "who lived longer, ada helm or boris vane?"
    seeded = anchors(lowercase, lexical_anchors=0)
    assert len(seeded) == 1 and seeded < {"Ada Helm", "Boris Vane"}
    assert anchors(lowercase, lexical_anchors=0.01) == {"Ada Helm", "Boris Vane"}
    (other,) = {"Ada Helm", "Boris Vane"} - seeded
    assert anchors(lowercase, lexical_anchors=graph.specificity(other) + 1e-6) == seeded
    assert anchors("Who lived longer, Ada Helm or Boris Vane?", lexical_anchors=0.999) == {"Ada Helm", "Boris Vane"}


def test_stored_plans_are_keyed_by_the_lexical_anchor_floor(dotrag):
    # the floor decides a plan's anchors: a plan stored under another floor must be planned again
    from kgr.methods.runner import plan_key

    assert plan_key(dotrag(lexical_anchors=0).context, "dotrag") != plan_key(dotrag().context, "dotrag")


def test_record_anchors_are_the_searched_ones(dotrag):
    record = ask(dotrag(), "[Dark Harbor] was directed by who")
    assert record.anchors == ["Dark Harbor"]
    assert endpoints(record) == {"Clint Ranger"}


@pytest.mark.parametrize("text", ["Whose director is older, [Dark Harbor] or [Golden Hour]?",
                                  "Whose director is older, Dark Harbor or golden hour?"])
def test_the_alternatives_a_question_offers_are_its_candidate_answers(dotrag, text):
    """The answer is one of the anchors: they lead the entities, and each is searched on its own, not conjoined."""
    record = ask(dotrag(), text)
    assert record.entities[:2] == ["Dark Harbor", "Golden Hour"]
    assert record.trace["plan"]["alternatives"] and "conjunction" not in record.trace
    assert {t["anchor"] for t in record.trace["trajectories"]} == set(record.anchors)
    assert {"Clint Ranger", "Ada Helm"} <= set(record.entities)


def test_mentions_joined_by_and_stay_out_of_the_entities(dotrag):
    record = ask(dotrag(), "Who directed [Dark Harbor] and [Golden Hour]?")
    assert record.trace["plan"]["alternatives"] == []
    assert not {"Dark Harbor", "Golden Hour"} & set(record.entities)


def test_a_mention_the_graph_lacks_anchors_nothing_and_says_so(dotrag):
    record = ask(dotrag(), "who directed the movies written by [Zebra Motors]")
    assert record.paths == [] and record.anchors == [] and record.entities == []
    assert record.unmatched_mentions == ["Zebra Motors"]
    [warning] = record.warnings
    assert warning.startswith("mention 'Zebra Motors' matches no entity") and "anchors.min_similarity" in warning


def test_a_near_miss_spelling_is_used_and_said_aloud(dotrag):
    record = ask(dotrag(), "who directed the movies written by [Wendy Scribes]")
    assert record.anchors == ["Wendy Scribe"] and endpoints(record) == {"Clint Ranger", "Ada Helm"}
    assert record.unmatched_mentions == []
    [warning] = record.warnings
    assert warning.startswith("mention 'Wendy Scribes' matched entity 'Wendy Scribe' loosely (cosine 0.9")


def test_an_exact_mention_has_no_warning_and_one_unmatched_mention_leaves_the_other(dotrag):
    assert ask(dotrag(), TWO_HOP).warnings == []
    record = ask(dotrag(), "which movies did [Wendy Scribe] and [Zebra Motors] write")
    assert record.anchors == ["Wendy Scribe"] and record.unmatched_mentions == ["Zebra Motors"]


def test_the_floor_is_a_setting(dotrag):
    record = ask(dotrag(**{"anchors.min_similarity": 0.99}), "who directed the movies written by [Wendy Scribes]")
    assert record.paths == [] and record.unmatched_mentions == ["Wendy Scribes"]


def test_a_question_naming_no_entity_says_its_seeds_are_a_guess(dotrag):
    record = ask(dotrag(), "which films have gloomy harbours in them")
    assert record.unmatched_mentions == [] and record.anchors  # seeds by design
    [warning] = record.warnings
    assert warning.startswith("the question names no entity; its anchors are the 5 entities most like it")


# -- 1 hop on a multi-typed person ---------------------------------------------------------------------------------
def test_one_hop_directed_movies_of_a_director_who_acts(dotrag, triples):
    record = ask(dotrag(label_margin=0.05), "[Clint Ranger] directed which movies")
    assert record.anchors == ["Clint Ranger"]
    assert endpoints(record) == DIRECTED
    assert {p["depth"] for p in record.paths} == {1}
    assert set(record.entities) == DIRECTED
    assert_paths_are_in_the_graph(record, triples)


def test_one_hop_acted_movies_of_a_director_who_acts(dotrag):
    # the walk of the offline ranking's first choice (not hedged: "movies" fits both his relations, and "act" names
    # `starred_actors` under `confident_similarity`, so the policy alone would walk both)
    record = ask(dotrag(label_margin=0.05, hedge_trajectories=0), "what movies did [Clint Ranger] act in")
    assert endpoints(record) == ACTED
    assert set(record.entities) == ACTED


def test_one_hop_acted_movies_given_the_right_hop_query(dotrag):
    """The search itself separates the two relations once the hop query names the asked one (label_margin 0.05)."""
    method = dotrag(label_margin=0.05, hedge_trajectories=0)
    query = Query("q", "what movies did [Clint Ranger] act in")
    plan = method.plan(query)
    assert [p["type"] for p in plan["pairs"]] == ["movie"]
    plan["pairs"][0]["query"] = "starred actors movie"
    record = method.retrieve(query, plan=plan)
    assert endpoints(record) == ACTED and set(record.entities) == ACTED


# -- 2 and 3 hops ------------------------------------------------------------------------------------------------
def test_two_hop_paths_go_anchor_movie_director(dotrag, triples):
    record = ask(dotrag(), TWO_HOP)
    assert record.anchors == ["Wendy Scribe"]
    assert record.paths and {p["depth"] for p in record.paths} == {2}
    for path in record.paths:
        assert path["relations"][0] == "written_by" and path["entities"][1] in {"Dark Harbor", "Golden Hour"}
    directed = {(p["entities"][1], p["entities"][2]) for p in record.paths if p["relations"][1] == "directed_by"}
    assert directed == {("Dark Harbor", "Clint Ranger"), ("Golden Hour", "Ada Helm")}
    assert {"Clint Ranger", "Ada Helm"} <= set(record.entities)
    assert "Wendy Scribe" not in record.entities  # anchors are excluded
    [walk] = record.trace["trajectories"]
    assert [h["type"] for h in walk["hops"]] == ["movie", "director"] and walk["preferred_depths"] == [2]
    assert_paths_are_in_the_graph(record, triples)


def test_a_hedged_plans_walk_keeps_every_depth_it_walked(dotrag):
    method, query = dotrag(fill=0), Query("q", TWO_HOP)
    plan = method.plan(query)
    [walk] = method.retrieve(query, plan=plan).trace["trajectories"]
    assert not plan["hedged"] and walk["preferred_depths"] == [2]
    # unsure of its reading, the walk keeps the movies it walked through, after the directors it preferred
    record = method.retrieve(query, plan={**plan, "hedged": True})
    [walk] = record.trace["trajectories"]
    assert walk["preferred_depths"] == [2, 1] and {"Dark Harbor", "Golden Hour"} <= set(record.entities)


def test_three_hop_follows_the_anchors_director_not_the_hub(dotrag, triples):
    record = ask(dotrag(), THREE_HOP)
    assert record.anchors == ["The Last Orchard"]
    # the stop after two hops scored within offline.tie_margin: its film is kept too (a gold intermediate)
    assert endpoints(record, 3) == THREE_HOP_ANSWERS and endpoints(record) - THREE_HOP_ANSWERS <= {"Blue Canyon"}
    for path in record.paths:
        assert path["entities"][1:3] == ["Boris Vane", "Blue Canyon"]
        assert path["relations"] == ["directed_by", "directed_by", "starred_actors"][:path["depth"]]
    assert THREE_HOP_ANSWERS <= set(record.entities)
    assert not HUB_ONLY_ACTORS & set(record.entities)
    assert "English" not in record.entities and "English" not in record.context
    assert_paths_are_in_the_graph(record, triples)


@pytest.mark.parametrize("within", [True, False])
def test_a_hop_reaches_back_to_entities_nearer_the_anchor(dotrag, within):
    # The Last Orchard -> Boris Vane -> Blue Canyon -> English: English is one hop from the anchor (its own
    # language), so only the search toward the language entities within 3 hops (the default) can find it.
    record = ask(dotrag(search_within=within), "what languages are the movies directed by the director of "
                                               "[The Last Orchard] in")
    [walk] = record.trace["trajectories"]
    assert [h["relation"] for h in walk["hops"]][:2] == ["directed_by", "directed_by"]
    assert ("English" in endpoints(record, 3)) == within
    assert "The Last Orchard" not in record.entities


@pytest.mark.parametrize("text", [TWO_HOP, THREE_HOP, "[Clint Ranger] directed which movies",
                                  "who acted together with [Nora Quill]"])
def test_the_hub_is_never_an_answer(dotrag, text):
    record = ask(dotrag(), text)
    assert "English" not in record.entities
    assert not any("English" in p["entities"] for p in record.paths)


def test_a_hub_anchor_search_stays_within_top_ks(dotrag, triples):
    record = ask(dotrag(search_top=3, anchor_top=0, hedge_trajectories=0), "which movies are in [English]")
    assert record.anchors == ["English"]
    [walk] = record.trace["trajectories"]
    assert walk["hops"] and all(h["kept"] <= 3 for h in walk["hops"])
    assert 0 < len(endpoints(record, 1)) <= 3 and endpoints(record, 1) <= MOVIES
    assert len([p for p in record.paths if p["depth"] == 1]) <= 3
    assert len(record.trace["reached"]) >= len(MOVIES)  # all 8 movies were candidates, 3 were kept
    assert_paths_are_in_the_graph(record, triples)


@pytest.mark.parametrize("anchor_top, kept", [(1000, len(MOVIES)), (5, 5)])
def test_the_anchors_own_relationships_are_capped_by_anchor_top_not_ks(dotrag, anchor_top, kept):
    # all 8 English movies answer the question; they differ only by the name the question does not give
    record = ask(dotrag(search_top=3, anchor_top=anchor_top, hedge_trajectories=0), "which movies are in [English]")
    [walk] = record.trace["trajectories"]
    assert walk["hops"][0]["kept"] == kept and len(endpoints(record, 1)) == kept


# -- the record --------------------------------------------------------------------------------------------------
def test_record_fields(dotrag):
    # Without the label filter, hop 2 also keeps Golden Hour's actor Clint Ranger (who directs elsewhere), so two
    # kept paths share the triple (Golden Hour; written_by; Wendy Scribe) that the context must hold once.
    method = dotrag(label_margin=0)
    record = ask(method, TWO_HOP, qid="two")
    assert (record.id, record.question, record.method, record.backbone) == ("two", TWO_HOP, "dotrag", "offline")
    assert (record.llm_calls, record.prompt_tokens, record.cost_usd) == (0, 0, 0.0)
    for path in record.paths:
        assert set(path) >= {"entities", "relations", "similarities", "score", "depth"}
        assert len(path["entities"]) == path["depth"] + 1 == len(path["relations"]) + 1 == len(path["similarities"]) + 1
        assert path["score"] == pytest.approx(sum(path["similarities"]), abs=1e-3)
        assert all(-1.0 <= s <= 1.0 for s in path["similarities"])
    scores = [p["score"] for p in record.paths]
    assert scores == sorted(scores, reverse=True)  # one trajectory: best paths first
    lines = record.context.splitlines()
    assert len(lines) == len(set(lines))  # each triple once
    shared = "(Golden Hour; written_by; Wendy Scribe)"
    in_paths = {(a, r, b) for p in record.paths for a, r, b in zip(p["entities"], p["relations"], p["entities"][1:])}
    assert len(lines) == len(in_paths)
    assert lines.count(shared) == 1
    assert sum(1 for p in record.paths if p["entities"][1] == "Golden Hour") >= 2  # ...though two paths use it
    count = token_counter(method.context.config.budget.encoding)
    assert record.context_tokens == sum(count(line) + 1 for line in lines)
    assert record.context_tokens <= method.context.config.budget.tokens
    assert record.latency_ms > 0 and "search" in record.timings_ms and "plan.rank_trajectories" in record.timings_ms
    json.loads(record.to_json())


def test_a_tiny_budget_cuts_paths_and_says_so(dotrag, store):
    _, graph = store
    full = ask(dotrag(), TWO_HOP)
    first = full.paths[0]
    count = token_counter("o200k_base")
    by_triple = {graph.triple(rid): triple_line(graph, rid) for rid in range(len(graph.src))}
    lines = [by_triple.get((a, r, b)) or by_triple[(b, r, a)]
             for a, r, b in zip(first["entities"], first["relations"], first["entities"][1:])]
    budget = sum(count(line) + 1 for line in lines)
    small = ask(dotrag(**{"budget.tokens": budget}), TWO_HOP)
    assert small.paths == [first]
    assert small.context.splitlines() == lines and small.context_tokens == budget
    cut = set(small.trace["cut_by_budget"])
    lost = {e for p in full.paths[1:] for e in p["entities"][1:]} - set(first["entities"])
    assert lost and lost <= cut
    assert not lost & set(small.entities)
    assert full.trace["cut_by_budget"] == []


def test_no_constrained_search_ablation_still_returns_a_record(dotrag, triples):
    record = ask(dotrag(constrained_search=False), TWO_HOP)
    assert record.method == "dotrag" and record.anchors == ["Wendy Scribe"]
    assert record.paths and {"Clint Ranger", "Ada Helm"} <= set(record.entities)
    assert_paths_are_in_the_graph(record, triples)
    # Unconstrained, every relationship in the graph is a candidate at each hop.
    assert len(record.trace["reached"]) > len(ask(dotrag(), TWO_HOP).trace["reached"])


@pytest.mark.parametrize("text", [TWO_HOP, THREE_HOP])
def test_a_stored_plan_gives_the_same_record(dotrag, text):
    method = dotrag()
    query = Query("q", text)
    stored = json.loads(json.dumps(method.plan(query), default=str))  # as `kgr plan` stores it
    planned, direct = method.retrieve(query, plan=stored), method.retrieve(query)
    for name in ("anchors", "entities", "paths", "context", "context_tokens"):
        assert getattr(planned, name) == getattr(direct, name), name
    assert planned.trace["plan"]["pairs"] == direct.trace["plan"]["pairs"]


# A plan as `kgr plan` stored it before DotRAG's plan was a typed dataclass (main at e050770, plan version 4; the
# plans table's JSON, `usage` added by the runner): the typed plan reads it and writes it back unchanged.
ALTERNATIVES = "which movie came out first, [Dark Harbor] or [Golden Hour]"
STORED_V4_PLAN = (
    '{"question": "which movie came out first, [Dark Harbor] or [Golden Hour]", "anchors": [{"eid": 0, "name": '
    '"Dark Harbor", "types": ["movie"], "named": true, "similarity": 0.6087, "rank": 0}, {"eid": 11, "name": '
    '"Golden Hour", "types": ["movie"], "named": true, "similarity": 0.5843, "rank": 1}], "pairs": [{"anchor": 0, '
    '"anchor_rank": 0, "type": "language", "type_rank": 0, "query": "in language language", "previews": []}, '
    '{"anchor": 11, "anchor_rank": 1, "type": "language", "type_rank": 0, "query": "in language language", '
    '"previews": []}], "alternatives": [0, 11], "hedged": false, "unmatched_mentions": [], "warnings": [], '
    '"timings_ms": {"seeds": 40.055, "rank_anchors": 0.027, "rank_trajectories": 3.192}, "latency_ms": 43.332, '
    '"usage": {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}}'
)


def test_a_plan_stored_before_the_plan_was_typed_reads_back_unchanged_and_retrieves(dotrag):
    from kgr.methods.dotrag.plan import TrajectoryPlan

    stored = json.loads(STORED_V4_PLAN)
    plan = TrajectoryPlan.from_dict(stored)
    assert plan.alternatives == (0, 11) and [a.similarity for a in plan.anchors] == [0.6087, 0.5843]
    assert json.dumps(plan.to_dict()) == STORED_V4_PLAN  # the same keys, in the same order, with the same values
    method = dotrag()
    record = method.retrieve(Query("q", ALTERNATIVES), plan=stored)
    assert json.dumps(record.trace["plan"]) == STORED_V4_PLAN
    assert record.anchors == ["Dark Harbor", "Golden Hour"] and record.entities[:2] == ["Dark Harbor", "Golden Hour"]
    assert record.latency_ms >= 43.332  # the stored plan's planning time counts
    # a plan made today has the stored form (the runner adds `usage`): the same keys in the same order, at each level
    # (its decisions may differ: the planner changes without changing the form)
    made = method.plan(Query("q", ALTERNATIVES))
    assert list(made) == [k for k in stored if k != "usage"]
    for key in ("anchors", "pairs"):
        assert {tuple(item) for item in made[key]} == {tuple(item) for item in stored[key]}, key


def test_a_plan_lacking_what_a_plan_holds_is_refused_by_name(dotrag):
    from kgr.errors import KgrError

    stored = json.loads(STORED_V4_PLAN)
    del stored["pairs"], stored["latency_ms"]
    with pytest.raises(KgrError, match="not a DotRAG plan .*lacks pairs, latency_ms"):
        dotrag().retrieve(Query("q", ALTERNATIVES), plan=stored)


# -- kgr's extensions of the search ------------------------------------------------------------------------------
def test_label_weight_blends_text_and_label_similarity(dotrag):
    plain, blended = dotrag(label_weight=0, label_margin=0), dotrag(label_weight=0.3, label_margin=0)
    graph = plain.store
    rids = np.arange(len(graph.src), dtype=np.int64)
    query = "written by writer"
    near = graph.src[rids]
    _, text_sims, _ = plain._select(rids, query, near)
    _, sims, _ = blended._select(rids, query, near)
    label_vectors = graph.encoder.encode([relation_words(label) for label in graph.relation_labels])
    label_sims = (label_vectors @ graph.encoder.encode_query(query))[graph.relation_ids[rids]]
    np.testing.assert_allclose(sims, 0.7 * text_sims + 0.3 * label_sims, atol=1e-5)
    # a floor the relationship texts alone miss is cleared by the triples of the asked relation
    floor = float(np.sort(text_sims[graph.relation_ids[rids] == graph.relation_labels.index("written_by")])[-1]) + 0.01
    strict_plain, strict_blended = (dotrag(label_weight=w, label_margin=0, min_similarity=floor) for w in (0, 0.3))
    assert strict_plain._select(rids, query, near)[2]  # none reached the floor: the hop's best kept, flagged
    kept, _, flagged = strict_blended._select(rids, query, near)
    assert not flagged and {graph.relation_labels[graph.relation_ids[r]] for r in rids[kept]} == {"written_by"}


def test_a_frontier_entity_without_the_asked_label_keeps_its_own_best(dotrag):
    # one link recorded by two labels for different entities: B's edges of the asked label are not among its candidates
    method = dotrag(label_margin=0.05, min_similarity=-1.0)
    graph = method.store
    written, directed = (graph.relation_labels.index(label) for label in ("written_by", "directed_by"))
    movies = [m for m in np.unique(graph.src[graph.relation_ids == written]).tolist()
              if ((graph.src == m) & (graph.relation_ids == directed)).any()]
    a, b = movies[:2]
    rids = np.flatnonzero(((graph.src == a) & np.isin(graph.relation_ids, [written, directed]))
                          | ((graph.src == b) & (graph.relation_ids == directed))).astype(np.int64)
    kept, _, _ = method._select(rids, "written by writer", graph.src[rids], depth=2)
    labels = {(int(graph.src[r]), graph.relation_labels[graph.relation_ids[r]]) for r in rids[kept]}
    assert labels == {(a, "written_by"), (b, "directed_by")}  # a keeps the asked label only, b its own best


def test_a_hop_keeps_its_best_relationships_when_none_reaches_the_floor_and_says_so(dotrag):
    method = dotrag(min_similarity=0.99, label_margin=0)
    graph = method.store
    rids = np.flatnonzero(graph.relation_ids == graph.relation_labels.index("written_by")).astype(np.int64)
    near = graph.src[rids]
    for depth in (1, 2):
        kept, sims, flagged = method._select(rids, "written by writer", near, depth=depth)
        assert flagged and len(kept) == len(rids) and np.all(sims[kept] < 0.99)
    first_at_floor, _, flagged = dotrag(min_similarity=-1.0, label_margin=0)._select(rids, "written by writer", near,
                                                                                     depth=1)
    assert not flagged and len(first_at_floor) == len(rids)


def test_a_walks_layers_keep_the_paths_a_list_of_every_extension_would(dotrag):
    """Each hop extends every kept path that ends at a relationship's near entity, ranks the extensions by their summed
    (rounded) similarities, ties in relationship-then-path order, and keeps 4 x max(search_top, picked): the layers
    must keep exactly the paths, order and scores of building every extension as a Path and sorting the list."""
    dotrag = dotrag(search_top=2)
    rng = np.random.default_rng(7)
    layers, listed, cut = [PathLayer.start(0)], [WalkPath((), (0,), ())], False
    for _ in range(4):
        ends = sorted({p.eids[-1] for p in listed})
        near = rng.choice(ends, size=8).astype(np.int32)
        far = rng.integers(0, 4, size=8).astype(np.int32)  # few entities: paths meet, and extensions multiply
        rids = rng.integers(0, 1000, size=8).astype(np.int64)
        sims = rng.choice([0.5, 0.25, 0.6, 0.12345678], size=8)  # ties, and a value that rounds
        layers.append(dotrag._extend(layers[-1], rids, near, far, sims))
        every = [WalkPath(p.rids + (int(r),), p.eids + (int(v),), p.sims + (round(float(s), 4),))
                 for r, u, v, s in zip(rids, near, far, sims) for p in listed if p.eids[-1] == u]
        cut |= len(every) > 4 * 8
        listed = sorted(every, key=lambda p: -p.score)[:4 * 8]
        built = layer_paths(layers, len(layers) - 1)
        assert [(p.rids, p.eids, p.sims) for p in built] == [(p.rids, p.eids, p.sims) for p in listed]
        assert [p.score for p in built] == [p.score for p in listed]
    assert cut  # the limit bit


def test_a_layers_similarities_round_as_pythons_round_does(dotrag):
    # float32 similarities (the encoder's) at and beside the 4-decimal rounding boundaries: the vectorized rounding
    # must give exactly what round(s, 4) gives, or ties between paths would break differently
    halves = ((np.arange(-9999, 10000, 37) + 0.5) / 10000).astype(np.float32)
    sims = np.concatenate([halves, np.nextafter(halves, np.float32(2)), np.nextafter(halves, np.float32(-2))])
    n = len(sims)
    layer = dotrag()._extend(PathLayer.start(0), np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int32),
                             np.ones(n, dtype=np.int32), sims)
    assert sorted(layer.sims.tolist()) == sorted(round(s, 4) for s in sims.tolist())


def test_top_k_per_group_keeps_the_best_of_each_group_best_first():
    scores = np.array([0.9, 0.1, 0.8, 0.7, 0.3, 0.3, 0.2])
    groups = np.array([1, 1, 1, 2, 2, 2, 3])
    assert top_k_per_group(scores, groups, 2).tolist() == [0, 2, 3, 4, 6]  # a tie goes to the lower index
    assert top_k_per_group(scores, groups, 1).tolist() == [0, 3, 6]
    assert not len(top_k_per_group(scores, groups, 0))


@pytest.mark.parametrize("per_entity", [True, False])
def test_search_keeps_ks_per_frontier_entity_or_per_hop(dotrag, per_entity):
    # The 13 acting relationships, searched as one hop out of the 8 movies: with ks = 1 per entity every movie keeps
    # its best one (a popular movie's cast cannot crowd out another's); per hop only one is kept in all.
    method = dotrag(search_top=1, search_per_entity=per_entity, label_margin=0, hop_breadth=0)
    graph = method.store
    rids = np.flatnonzero(graph.relation_ids == graph.relation_labels.index("starred_actors")).astype(np.int64)
    near = graph.src[rids]
    kept, sims, _ = method._select(rids, "starred actors actor", near)
    assert len(rids) == 13
    assert sorted(near[kept].tolist()) == (sorted(set(near.tolist())) if per_entity else near[kept].tolist())
    assert len(kept) == (8 if per_entity else 1)
    assert np.all(np.diff(sims[kept]) <= 0)


def test_a_narrow_frontier_keeps_its_share_of_the_hop_breadth(dotrag):
    # Past the first hop a frontier entity keeps max(ks, hop_breadth / frontier entities): the 8 movies' 13 acting
    # relationships keep ks (1) each at hop_breadth 8 (8 / 8 movies); one movie alone keeps all its cast
    method = dotrag(search_top=1, label_margin=0, hop_breadth=8)
    graph = method.store
    rids = np.flatnonzero(graph.relation_ids == graph.relation_labels.index("starred_actors")).astype(np.int64)
    near = graph.src[rids]
    kept, _, _ = method._select(rids, "starred actors actor", near, depth=2)
    movies = np.unique(near)
    assert len(kept) == len(movies) == 8 < len(rids)
    biggest = rids[near == near[np.argmax(np.bincount(near))]]
    assert len(biggest) > 1
    kept, _, _ = method._select(biggest, "starred actors actor", graph.src[biggest], depth=2)
    assert len(kept) == len(biggest)
    kept, _, _ = dotrag(search_top=1, label_margin=0, hop_breadth=0)._select(biggest, "starred actors actor",
                                                                               graph.src[biggest], depth=2)
    assert len(kept) == 1


def test_paths_are_dealt_one_per_pair_in_turn():
    # keys: (pair priority, preferred depth rank, -score); pair 0 holds three paths, pair 1 two
    ranked = [((0, 0, -0.9), "a1"), ((0, 0, -0.8), "a2"), ((0, 1, -0.7), "a3"), ((1, 0, -0.95), "b1"),
              ((1, 1, -0.5), "b2")]
    assert [path for _, path in round_robin(ranked[::-1])] == ["a1", "b1", "a2", "b2", "a3"]
    one_pair = ranked[:3]
    assert [path for _, path in round_robin(one_pair)] == ["a1", "a2", "a3"]


def test_a_name_written_as_a_proper_name_anchors_however_common(dotrag, store):
    # "English" is the tiny graph's hub (every movie's language): too common for the lexical-anchor floor, unless
    # the question writes it as the graph spells it, capitalized
    _, graph = store
    floor = graph.specificity("English") + 1e-6

    def anchors(text: str) -> set[str]:
        return {a["name"] for a in dotrag(seeds=1, lexical_anchors=floor).plan(Query("q", text))["anchors"]
                if a["named"]}

    assert "English" in anchors("Which movies did Ada Helm write in English?")
    assert "English" not in anchors("Which movies did Ada Helm write in english?")


def test_an_unsure_plan_hedges_over_several_trajectories_each_with_its_own_query(dotrag):
    method = dotrag(hedge_trajectories=4)
    sure = method.plan(Query("q", "who directed [Dark Harbor]"))
    assert not sure["hedged"] and [p["type"] for p in sure["pairs"]] == ["director"]
    unsure = method.plan(Query("q", "describe [Dark Harbor] in a few words"))
    assert unsure["hedged"] and len(unsure["pairs"]) == 4
    assert [p["type_rank"] for p in unsure["pairs"]] == [0, 1, 2, 3]
    assert all(relation_words(p["query"].split()[0]) for p in unsure["pairs"])
    assert len({p["query"] for p in unsure["pairs"]}) == 4  # each follows its own relation, not the first choice's
    assert len(dotrag(hedge_trajectories=0).plan(Query("q", "describe [Dark Harbor] in a few words"))["pairs"]) == 1


def test_an_unsure_plan_walks_every_first_relation_into_the_leading_type(dotrag):
    # Clint Ranger acts and directs: unsure which, the plan walks both ways into his movies, not only its first choice
    unsure = dotrag(hedge_trajectories=4).plan(Query("q", "describe [Clint Ranger] in a few words"))
    assert unsure["hedged"] and [p["type"] for p in unsure["pairs"]] == ["movie", "movie"]
    assert {p["query"] for p in unsure["pairs"]} == {"directed by movie", "starred actors movie"}
    sure = dotrag(hedge_trajectories=4).plan(Query("q", "which movies were directed by [Clint Ranger]"))
    assert not sure["hedged"] and [p["query"] for p in sure["pairs"]] == ["directed by movie"]


def recorded_encodes(monkeypatch, graph) -> list[list[str]]:
    """The texts of every encoder call made from now on (the list fills as they come)."""
    calls: list[list[str]] = []
    encode = graph.encoder.encode
    monkeypatch.setattr(graph.encoder, "encode", lambda texts, *a, **k: calls.append(list(texts)) or encode(texts, *a, **k))
    return calls


def test_a_question_costs_at_most_one_encoder_pass(store, monkeypatch):
    # The relation labels, schema texts, type words and hop queries (one per step the graph holds) are encoded when
    # DotRAG is built, not on a question's clock. Each question then opens with one pass of its own: the words the
    # policy scores, and the question itself when it has no brackets (it finds its anchors); none is remembered from
    # the question before, so what shares a pass never depends on the batch.
    project, graph = store
    calls = recorded_encodes(monkeypatch, graph)
    method = DotRAG(RunContext(project, load_config(project.root, {}), graph, "retrieve"))
    assert "_label_vectors" in vars(method)
    calls.clear()
    plan = method.plan(Query("q", TWO_HOP))
    content = {"who", "directed", "movies", "written"}  # outside the mention; some may have come with the schema
    assert len(calls) <= 1 and all(set(batch) <= content for batch in calls), calls
    assert content <= set(method.policy._vectors)
    assert [a["similarity"] for a in plan["anchors"]] == [None]  # one anchor: nothing to order by it
    opening = calls[:]
    calls.clear()
    method.plan(Query("q", TWO_HOP))  # the same question again (its retrieval stage): the same pass, kept
    assert calls == []
    method.plan(Query("q2", "who directed the movies written by Wendy Scribe"))
    method.plan(Query("q", TWO_HOP))  # after another question: its own pass again, the same texts
    assert calls[0][0] == "who directed the movies written by Wendy Scribe" and {"scribe", "wendy"} <= set(calls[0])
    assert len(calls) == 2 and calls[1:] == opening
    calls.clear()
    plan = method.plan(Query("q4", "which movies were written by Wendy Scribe and Otto Penn"))
    # both names anchor; neither name's words are the way to the answer
    assert plan["question"] == "which movies were written by [Wendy Scribe] and [Otto Penn]"
    assert len(calls) == 1 and calls[0][0] == "which movies were written by Wendy Scribe and Otto Penn"
    calls.clear()
    record = method.retrieve(Query("q", TWO_HOP))
    assert calls == opening  # its hop queries were encoded with the graph's steps
    assert endpoints(record) == {"Clint Ranger", "Ada Helm"}


def test_a_later_run_reads_the_graphs_phrases_from_the_project(store, monkeypatch):
    # the first DotRAG on a project encodes the labels, schema texts and hop queries and leaves them in the phrase
    # cache; the next one encodes none of them, and answers alike
    project, graph = store
    config = load_config(project.root, {})
    first = DotRAG(RunContext(project, config, graph, "retrieve"))
    assert list((project.root / PHRASES_DIR).glob("*.npy"))
    calls = recorded_encodes(monkeypatch, graph)
    context = RunContext(project, config, graph, "retrieve")
    calls.clear()  # the context's warm-up loads the model
    second = DotRAG(context)
    assert calls == []
    for text in (TWO_HOP, THREE_HOP, "which movies did Clint Ranger direct"):
        one, two = ask(first, text), ask(second, text)
        assert (one.paths, one.context) == (two.paths, two.context)


@pytest.fixture(scope="module")
def sourced_songs(tmp_path_factory):
    """A graph whose triples name their source passages, among passages the graph does not reach."""
    from conftest import build_sourced

    root = build_sourced(tmp_path_factory.mktemp("sourced_songs"), {
        "Quiet Harbour": "Quiet Harbour is a song recorded by Lena Voss in 1998.",
        "Lena Voss": "Lena Voss grew up in Ostrava, where she was born.",
        "Marek Dal": "Marek Dal was born in Brno.",
        "Song performers": "The performer of a song is the singer who recorded the song."}, reach=True)
    with Project.open(root) as project:
        yield project, GraphStore(project)


def test_with_passages_the_paths_come_with_their_source_passages(sourced_songs):
    project, graph = sourced_songs
    question = Query("s1", "who performed [Quiet Harbour]")
    record = DotRAG(RunContext(project, project.config, graph, "retrieve")).retrieve(question)
    assert ["Quiet Harbour", "Lena Voss"] in [p["entities"] for p in record.paths]
    assert record.passages[0] == "Quiet Harbour" and "in 1998" in record.context  # the answer's passage, packed
    assert record.passages.index("Lena Voss") < record.passages.index("Marek Dal")  # reached by the walk
    bare = DotRAG(RunContext(project, load_config(project.root, {"dotrag.passages": 0}), graph, "retrieve"))
    assert bare.retrieve(question).passages == [] and "1998" not in bare.retrieve(question).context


def test_on_an_open_vocabulary_graph_a_sure_plan_is_filled_too(sourced_songs):
    """`dotrag.open_fill`: where the labels are phrasings (`kgr.schema.open_vocabulary`, tested there; set here on a
    three-triple graph), every plan's paths are followed by the anchors' neighbourhood's relationships most like the
    question; elsewhere only an unsure plan's are."""
    project, graph = sourced_songs
    assert not open_vocabulary(graph)
    question = Query("s1", "who is the performer of [Quiet Harbour]")

    def ask_with(open_fill: int, phrasings: bool):
        config = load_config(project.root, {"dotrag.open_fill": open_fill})
        method = DotRAG(RunContext(project, config, graph, "retrieve"))
        method.open_vocabulary = phrasings
        return method.retrieve(question)

    plain, filled = ask_with(5, False), ask_with(5, True)
    assert not filled.trace["plan"]["hedged"] and "fill" not in plain.trace
    assert ask_with(0, True).paths == plain.paths
    assert (filled.trace["fill"], filled.trace["fill_why"]) == (1, "open vocabulary")
    walked = len(plain.paths)
    assert filled.paths[:walked] == plain.paths
    # the one relationship within reach of the anchor that no path holds (Marek Dal is not within reach)
    assert [p["entities"] for p in filled.paths[walked:]] == [["Lena Voss", "Ostrava"]]


def test_an_unsure_plan_is_filled_with_the_neighbourhoods_relationships_most_like_the_question(dotrag):
    """`dotrag.fill`: after an unsure (hedged) plan's paths, the anchors' neighbourhood's relationships most like the
    question (one hop each, from the end nearer an anchor), none already on a walked path; a sure plan is not filled."""
    sure, sure_filled = ask(dotrag(fill=0), TWO_HOP), ask(dotrag(fill=3), TWO_HOP)
    assert not sure_filled.trace["plan"]["hedged"]
    assert sure_filled.paths == sure.paths and "fill" not in sure_filled.trace
    unsure = "describe [Wendy Scribe] in a few words"
    plain, filled = ask(dotrag(fill=0), unsure), ask(dotrag(fill=3), unsure)
    assert filled.trace["plan"]["hedged"]
    walked = len(plain.paths)
    assert filled.paths[:walked] == plain.paths and filled.trace["fill"] == len(filled.paths) - walked == 3
    on_paths = {(tuple(p["entities"]), tuple(p["relations"])) for p in plain.paths}
    for path in filled.paths[walked:]:
        assert path["depth"] == 1 and (tuple(path["entities"]), tuple(path["relations"])) not in on_paths
    assert set(plain.entities) <= set(filled.entities)


def test_a_first_hop_under_the_floor_is_a_warning_in_the_record(dotrag):
    record = ask(dotrag(min_similarity=0.99), "who directed [Dark Harbor]")
    assert record.entities
    assert any("hop 1 from Dark Harbor kept relationships under dotrag.min_similarity" in w for w in record.warnings)
    assert not any("under dotrag.min_similarity" in w for w in ask(dotrag(), "who directed [Dark Harbor]").warnings)


def test_a_later_hop_under_the_floor_still_extends_the_walk(dotrag):
    # the policy chose the hop: a floor no relationship of it reaches does not end the walk there
    record = ask(dotrag(min_similarity=0.99), TWO_HOP)
    assert {"Clint Ranger", "Ada Helm"} <= set(record.entities)
    assert any("hop 2 from Wendy Scribe kept relationships under dotrag.min_similarity" in w for w in record.warnings)



# -- an inferred type holding several kinds -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def transit(tmp_path_factory):
    """Stations in districts in a city, no schema: stations and districts are both `located in:subject` (the type of
    what is located somewhere), and only the stations are called `adjacent station`."""
    from conftest import dotrag_over

    stations = ["Tellplatz", "Kannenfeld", "Voltamatte", "Lysbuechel", "Zoo Dorenbach", "Birskoepfli"]
    triples = [(s, "located in", "Iselin" if i < 3 else "Gundeldingen") for i, s in enumerate(stations)]
    triples += [(a, "adjacent station", b) for a, b in zip(stations, stations[1:])]
    triples += [("Iselin", "located in", "Basel"), ("Gundeldingen", "located in", "Basel"),
                ("Basel", "located in", "Switzerland"), ("Basel", "population", "177000")]
    triples += [(s, "connecting line", "Green Line") for s in stations[:5]]  # its stations, and its two ends
    triples += [("Green Line", "terminus", stations[0]), ("Green Line", "terminus", stations[4])]
    yield from dotrag_over(tmp_path_factory.mktemp("transit"), triples)


def test_a_kind_noun_walks_on_past_entities_the_graph_does_not_call_so(transit):
    # the walk from Basel stops at its districts, whose type the noun "stations" names (its members are called
    # `adjacent station`); but none of the districts is: the walk goes on to the stations, the districts ranked first
    record = transit().retrieve(Query("q", "Which stations are in [Basel]?"))
    reached = {p["entities"][-1] for p in record.paths}
    assert {"Tellplatz", "Birskoepfli", "Kannenfeld"} <= reached and {"Iselin", "Gundeldingen"} <= reached
    walk = record.trace["trajectories"][0]
    assert [h["relation"] for h in walk["hops"]] == ["located in", "located in"] and walk["preferred_depths"] == [1, 2]
    assert walk["hops"][0]["called"] == ["located in"] and "adjacent station" in walk["hops"][1]["called"]


def test_a_noun_naming_the_answers_kind_tells_no_relation_to_that_kind_from_another(transit):
    # "stations" names the stations' type, reached from a line by `terminus` and `connecting line` alike; it is nearer
    # `terminus` only because a terminus is a station, so both first relations are walked, not the two ends alone
    record = transit().retrieve(Query("q", "Which stations are on the [Green Line]?"))
    first = {h["hops"][0]["relation"] for h in record.trace["trajectories"]}
    assert {"terminus", "connecting line"} <= first
    assert {"Tellplatz", "Kannenfeld", "Voltamatte", "Lysbuechel", "Zoo Dorenbach"} <= set(record.entities)
