"""How CS-RAG plans a question: with an LLM backbone, the model writes the plan (`csrag_plan`, validated, repaired
once); with none, or when the model's plan is unusable, the offline planners do: the offline policy's walk over the
graph (`kgr.methods.csrag.chains`) when the policy is sure of it, else the planner over the graph's relation labels
(`kgr.methods.csrag.plan.offline_plan`), followed by the walk's constraints where the policy walked but was unsure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from kgr.embed import TextVectors
from kgr.graph import relation_words
from kgr.methods.csrag.chains import ChainPlanner
from kgr.methods.csrag.plan import Constraint, Plan, anchor_mentions, offline_plan, validate_plan
from kgr.methods.graph_index import plan_index
from kgr.store import GraphStore

if TYPE_CHECKING:
    from kgr.methods.base import Query, RunContext


def chain_planner(context: "RunContext") -> ChainPlanner:
    """A chain planner over the run's graph, by its offline settings and `csrag.max_hops` (it keeps per-question state:
    one per method instance, as each thread has its own)."""
    return ChainPlanner(plan_index(context.store), context.config.offline, context.config.csrag.max_hops)


def plan_offline(context: "RunContext", query: "Query", vectors: TextVectors | None = None,
                 chains: ChainPlanner | None = None) -> Plan:
    """The plan the offline planners make: along the offline policy's walk when it is sure of it (`ChainPlanner.plan`;
    `chains`, else a new planner), else over the relation labels, with the reason the walk was not taken alone (and,
    when the policy walked unsure, the walk's constraints after the labels')."""
    settings, floor = context.config.csrag, context.config.anchors.min_similarity
    planner, index = chains or chain_planner(context), plan_index(context.store)
    anchored = anchor_mentions(index, query, settings, floor)  # read once for both planners (it may encode)
    walked, why_not = planner.plan(query, settings, floor, anchored)
    if walked is not None and not why_not:
        return walked
    # in the walk's encoder passes: the question's words are encoded once
    plan = offline_plan(index, query, settings, floor, vectors or planner.vectors, anchored)
    plan.reason = f"planned over the relation labels ({why_not}): {plan.reason}"
    if walked is not None:  # unsure: the walk's constraints too, after the labels' (recall first, as DotRAG hedges)
        plan = hedged(plan, walked)
    return plan


def hedged(plan: Plan, walked: Plan) -> Plan:
    """`plan` followed by the `walked` plan's constraints, its variables renamed apart."""
    taken = set(plan.variables)
    renamed: dict[str, str] = {}
    for variable in walked.variables:
        stem = re.sub(r"\d+$", "", variable)
        number = 1
        while f"{stem}{number}" in taken:
            number += 1
        renamed[variable] = f"{stem}{number}"
        taken.add(renamed[variable])
    extra = [Constraint(renamed.get(c.head, c.head), c.relation, renamed.get(c.tail, c.tail), list(c.variants))
             for c in walked.constraints]
    return Plan(plan.question, plan.constraints + extra, answer=plan.answer, source=plan.source,
                reason=f"{plan.reason} | and {walked.reason}", warnings=plan.warnings, hedged=True)


# -- planning with the backbone --------------------------------------------------------------------------------
def plan_schema(variants: int) -> dict[str, Any]:
    constraint = {
        "type": "object",
        "properties": {
            "head": {"type": "string"},
            "relations": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "tail": {"type": "string"},
        },
        "required": ["head", "relations", "tail"],
    }
    return {
        "type": "object",
        "properties": {
            "constraints": {"type": "array", "items": constraint, "minItems": 1},
            "answer": {"type": "string"},
            "reason": {"type": "string"},
        },
        "required": ["constraints"],
    }


def plan_spec(question: str, variants: int):
    """The DecisionSpec of a CS-RAG plan: schema plus validation (variants trimmed to m)."""
    from kgr.backbone import DecisionSpec

    def validate(data: dict[str, Any]) -> Plan:
        constraints = []
        for item in data["constraints"]:
            words = list(dict.fromkeys(str(v).strip() for v in item["relations"] if str(v).strip()))[:max(1, variants)]
            constraints.append(Constraint(item["head"].strip(), words[0] if words else "", item["tail"].strip(), words))
        return validate_plan(Plan(question, constraints, answer=(data.get("answer") or None), source="llm"))

    return DecisionSpec("csrag_plan", plan_schema(variants), validate)


def relation_menu(store: GraphStore, limit: int) -> str:
    """The graph's `limit` most frequent relation labels in plain words, for the prompt (`csrag.prompt_relations`)."""
    counts = np.bincount(store.relation_ids, minlength=len(store.relation_labels)) if store.relation_labels else []
    order = np.argsort(-np.asarray(counts), kind="stable")[:limit] if len(counts) else []
    return "\n".join(relation_words(store.relation_labels[i]) or store.relation_labels[i] for i in order)


def plan_question(context: "RunContext", query: "Query", *, stage: str | None = None,
                  vectors: TextVectors | None = None, chains: ChainPlanner | None = None) -> Plan:
    """The plan of one question: from the backbone when there is one (repaired once, else offline), else offline."""
    from kgr.backbone import decide

    settings = context.config.csrag

    def fallback() -> Plan:
        return plan_offline(context, query, vectors, chains)

    if context.client is None:
        return fallback()
    decision = decide(
        context.client,
        plan_spec(query.plain, settings.variants),
        {"question": query.text, "variants": settings.variants,
         "relations": relation_menu(context.store, settings.prompt_relations)},
        fallback,
        stage=stage or context.stage,
        question_id=query.id,
    )
    plan = decision.value
    plan.source = "fallback" if decision.source == "fallback" and context.client is not None else decision.source
    if decision.source == "fallback":
        plan.reason = f"{decision.reason} | offline: {plan.reason}"
    elif decision.reason:
        plan.reason = decision.reason
    plan.warnings.extend(context.take_warnings(query.id))
    return plan
