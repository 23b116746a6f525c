"""`kgr.methods.csrag.chains`: CS-RAG's constraints along the offline policy's walk over small hand-made graphs, and
the questions it leaves to the planner over the relation labels (saying why in the plan's reason)."""

from __future__ import annotations

import pytest

from kgr.methods.csrag.method import CSRAG
from kgr.methods.csrag.plan import Constraint, Plan
from kgr.methods.csrag.planner import hedged, plan_question
from test_csrag import by_labels, graph_context, query

WALKED = "walked by the offline policy: "
BY_LABELS = "planned over the relation labels ("


@pytest.fixture(scope="module")
def people(tmp_path_factory):
    """People with parents, birthplaces and jobs; towns in countries (no schema: types inferred from relations)."""
    yield from graph_context(tmp_path_factory.mktemp("people"), [
        ("Ada Berg", "father", "Bo Berg"), ("Ada Berg", "mother", "Cy Berg"), ("Eli Dahl", "father", "Finn Dahl"),
        ("Eli Dahl", "mother", "Gro Dahl"), ("Bo Berg", "born_in", "Malmo"), ("Cy Berg", "born_in", "Oslo"),
        ("Finn Dahl", "born_in", "Bergen"), ("Ada Berg", "born_in", "Lund"), ("Gro Dahl", "born_in", "Malmo"),
        ("Malmo", "located_in", "Sweden"), ("Oslo", "located_in", "Norway"), ("Bergen", "located_in", "Norway"),
        ("Lund", "located_in", "Sweden"), ("Bo Berg", "occupation", "baker"), ("Cy Berg", "occupation", "pilot"),
        ("Ada Berg", "occupation", "teacher")])


def relations(plan):
    return [c.relation for c in plan.constraints]


def test_each_step_of_the_walk_is_a_constraint_from_the_last_ones_variable(people):
    plan = plan_question(people, query("In which country was [Ada Berg]'s father born?"))
    assert plan.reason.startswith(WALKED)
    assert relations(plan) == ["father", "born in", "located in"]
    first, second, third = plan.constraints
    assert first.head == "Ada Berg" and second.head == first.tail and third.head == second.tail
    assert plan.answer == third.tail
    assert "Sweden" in CSRAG(people).retrieve(query("In which country was [Ada Berg]'s father born?")).entities


def test_the_walk_stops_where_the_policy_does(people):
    plan = plan_question(people, query("What is [Ada Berg]'s occupation?"))
    assert plan.reason.startswith(WALKED) and relations(plan) == ["occupation"]


def test_a_walk_ending_where_nothing_goes_on_in_its_direction_ends_on_a_leaf(people):
    # a job has no edges after `occupation`, though people (the relation's heads) go on along `father` and the rest:
    # the walk reached the tails, so it ends there (before, either end going on made it a lost edge)
    question = query("What does [Ada Berg]'s father do?")
    plan = plan_question(people, question)
    assert plan.reason.startswith(WALKED) and relations(plan) == ["father", "occupation"]
    assert "baker" in CSRAG(people).retrieve(question).entities


def test_first_relations_the_policy_cannot_tell_apart_are_the_first_constraints_variants(people):
    plan = plan_question(people, query("Who is a parent of [Ada Berg]?"))
    assert plan.reason.startswith(WALKED)
    assert set(plan.constraints[0].variants) == {"father", "mother"}
    assert {"Bo Berg", "Cy Berg"} <= set(CSRAG(people).retrieve(query("Who is a parent of [Ada Berg]?")).entities)


def test_a_mention_matching_no_entity_is_planned_over_the_labels(people):
    plan = plan_question(people, query("Where was [Nobody Known] born?"))
    assert plan.reason.startswith(BY_LABELS + "'Nobody Known' matches no entity")
    assert relations(plan) == ["born in"]  # the asked relation all the same, for textual recovery


def test_an_unsure_policy_leaves_the_question_to_the_labels(people):
    plan = plan_question(people, query("Who are the parents of [Ada Berg]?"))  # "parents" is 0.53 from `mother`
    assert plan.reason.startswith(BY_LABELS + "the offline policy is unsure of the walk from 'Ada Berg'")
    # ... and its constraints are followed by the walk's, recall first, their variables renamed apart
    assert "| and " + WALKED in plan.reason
    labels_plan = by_labels(people, query("Who are the parents of [Ada Berg]?"))
    assert plan.constraints[:len(labels_plan.constraints)] == labels_plan.constraints
    assert plan.answer == labels_plan.answer
    walked = plan.constraints[len(labels_plan.constraints):]
    assert walked and walked[0].head == "Ada Berg"
    assert not {walked[0].tail} & set(labels_plan.variables)


def test_an_unsure_policys_next_walks_follow_its_best(people):
    # `csrag.hedge_walks`: where the policy is unsure, the walks of its next-ranked first steps follow (recall first,
    # as DotRAG hedges over several trajectories); each a chain of its own from the mention
    from test_csrag import with_csrag

    question = query("Who are the parents of [Ada Berg]?")
    one, four = (plan_question(with_csrag(people, hedge_walks=n), question) for n in (1, 4))
    assert "its next walk" not in one.reason and one.constraints == four.constraints[:len(one.constraints)]
    assert "Ada Berg (its next walk 1): " in four.reason
    extra = four.constraints[len(one.constraints):]
    assert extra and extra[0].head == "Ada Berg" and not {c.tail for c in extra} & set(one.variables)
    assert four.answer == one.answer


def test_a_sure_policys_walks_near_tied_with_its_best_follow_it(people):
    # where the policy is sure, the first steps whose chains tie with the best one's (`offline.tie_margin`) are walked
    # too, as DotRAG follows near-tied trajectories: "[Bo Berg]'s child" may be read along `father` or `born_in`
    import copy
    import dataclasses

    question = query("Where was [Bo Berg]'s child born?")
    untied = copy.deepcopy(people.config)
    untied.offline.tie_margin = 0.0
    tied, alone = (plan_question(context, question) for context in (people, dataclasses.replace(people, config=untied)))
    assert tied.reason.startswith(WALKED) and "Bo Berg (its next walk 1): " in tied.reason
    assert "its next walk" not in alone.reason and tied.constraints[:len(alone.constraints)] == alone.constraints


def test_a_walks_continuations_near_tied_with_the_one_it_took_are_walked_too(people):
    # a review whose best continuation ties with another (`offline.tie_margin`, `Continue.also`) is followed down both,
    # as DotRAG's walk follows near-tied continuations: "what is known of [Ada Berg]'s father" names neither his
    # birthplace nor his job
    import copy
    import dataclasses

    question = query("What is known of [Ada Berg]'s father?")
    untied = copy.deepcopy(people.config)
    untied.offline.tie_margin = 0.0
    tied, alone = (plan_question(context, question) for context in (people, dataclasses.replace(people, config=untied)))
    assert "Ada Berg (a near-tied continuation): " in tied.reason and "near-tied" not in alone.reason
    assert tied.constraints[:len(alone.constraints)] == alone.constraints and tied.answer == alone.answer
    extra = tied.constraints[len(alone.constraints):]
    assert relations(alone) == ["father", "born in"] and [c.relation for c in extra] == ["father", "occupation"]
    assert extra[0].head == "Ada Berg" and not {c.tail for c in extra} & set(alone.variables)
    assert {"Malmo", "baker"} <= set(CSRAG(people).retrieve(question).entities)


def test_a_hedged_plans_walk_reads_the_edges_the_labels_took_again(people):
    # a triple that bound a variable is no candidate again within its chain (no walking back along the edge just
    # taken); the walk after the labels' plan is a chain of its own and starts from the same edges
    question = query("Who are the parents of [Ada Berg]?")
    record = CSRAG(people).retrieve(question)
    plan, states = record.trace["plan"], record.trace["constraints"]
    labels = len(by_labels(people, question).constraints)
    assert plan["hedged"] and len(states) > labels
    parents = {("Ada Berg", "father", "Bo Berg"), ("Ada Berg", "mother", "Cy Berg")}
    assert parents <= {tuple(k["triple"]) for k in states[0]["pool"] if k["triple"][2] in states[0]["bound"]}
    assert parents <= {tuple(k["triple"]) for k in states[labels]["pool"]}


def test_without_passages_a_hedged_plan_is_followed_by_the_neighbourhood(people):
    # `csrag.graph_fill` after a plan the policy was unsure of, though every constraint resolved (recall first, as
    # DotRAG fills after a hedged plan)
    question = query("What does [Ada Berg] do?")
    sure = Plan(question.plain, [Constraint("Ada Berg", "occupation", "?job", ["occupation"])], answer="?job")
    unsure = Plan(sure.question, sure.constraints, answer="?job", hedged=True)
    plain, filled = (CSRAG(people).retrieve(question, plan=plan) for plan in (sure, unsure))
    assert [k["decision"] for k in filled.trace["constraints"]] == ["resolved"]
    assert plain.trace["fill"] == 0 and filled.trace["fill"] > 0
    assert filled.paths[:len(plain.paths)] == plain.paths


def test_hedged_plans_rename_the_walks_variables_apart():
    labels = Plan("q", [Constraint("X", "father", "?person1", ["father"])], answer="?person1")
    walk = Plan("q", [Constraint("X", "mother", "?person1", ["mother"]),
                      Constraint("?person1", "born in", "?town1", ["born in"])], answer="?town1")
    plan = hedged(labels, walk)
    assert [(c.head, c.relation, c.tail) for c in plan.constraints] == [
        ("X", "father", "?person1"), ("X", "mother", "?person2"), ("?person2", "born in", "?town1")]
    assert plan.answer == "?person1"


@pytest.fixture(scope="module")
def squads(tmp_path_factory):
    """Footballers with positions, clubs and countries (no schema): conjunctive questions name two of them."""
    players = [("Ana Ruiz", "Forward", "Tigres", "Mexico"), ("Luis Paz", "Defender", "Tigres", "Mexico"),
               ("Ivo Kral", "Forward", "Sparta", "Czechia"), ("Jan Novak", "Forward", "Sparta", "Czechia"),
               ("Raul Mena", "Forward", "America", "Mexico"), ("Tom Sova", "Defender", "Sparta", "Czechia"),
               ("Eva Lopez", "Forward", "Tigres", "Spain")]
    triples = [triple for name, position, club, country in players for triple in (
        (name, "plays_position", position), (name, "plays_in_club", club), (name, "plays_for_country", country))]
    yield from graph_context(tmp_path_factory.mktemp("squads"), triples)


def test_a_walk_reaching_another_mention_meets_it_and_both_bind_the_answer(squads):
    question = query("Which player plays at [Forward] position at the club [Tigres]?")
    plan = plan_question(squads, question)
    assert plan.reason.startswith(WALKED) and "meets" in plan.reason
    assert [(c.head, c.relation) for c in plan.constraints] == [("Forward", "plays position"),
                                                                ("Tigres", "plays in club")]
    assert plan.constraints[0].tail == plan.constraints[1].tail == plan.answer
    record = CSRAG(squads).retrieve(question)
    # each mention proposes its whole answer set; the intersection is the answer, and only its evidence is kept
    assert record.trace["bindings"][plan.answer] == ["Ana Ruiz", "Eva Lopez"]
    assert set(record.entities) == {"Ana Ruiz", "Eva Lopez"}
    assert record.trace["fill"] == 0
