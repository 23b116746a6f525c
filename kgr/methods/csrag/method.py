"""CS-RAG: constraint-based, sufficiency-guided retrieval.

A question becomes a plan of atomic constraints (`kgr.methods.csrag.plan`). Each constraint whose source side is
known (an anchored entity mention, or a variable bound earlier) is retrieved over the one-hop neighbourhood of its
source entities: relation alignment keeps the top `align_top` candidates by the cosine of their relation label to the
constraint's variants (with one variant some candidate's label is word for word, only those nearly as aligned:
`sole_variant_pool`), contextual reranking keeps the top `rerank_top`. The pool is *sufficient* when its effective
size N_eff = 1/sum(p^2), p = softmax(scores / temperature), is at most `gamma`; a sufficient (resolved) constraint
binds its variable to the far endpoints of its round(N_eff) best candidates (intersecting with earlier bindings of the
same variable), which lets constraints starting at that variable run next. A variable several mentions constrain
together ("a player at [Forward] in [Tigres]") takes each one's whole answer set and keeps their intersection, and
their pools keep only the evidence reaching it (`keep_agreed`). Constraints left unresolved fall back to
passages (textual recovery), or, on a graph without passages, to its own texts: the unsettled pool's best bind the
variable (`graph_recovery`) and the anchors' neighbourhood most like the question follows (`graph_fill`; after a
hedged plan too, one the offline policy was unsure of, and on an open-vocabulary graph after every plan). Within a
chain of constraints (`plan.chains_of`) a triple that bound a variable is no candidate again; a hedged plan's walk,
a chain of its own, reads the same edges anew. Resolved constraints contribute the passages linked to their kept
triples' entities. A constraint that found no candidates at all (the graph lost the edge) binds its variable to the
entities its passages name that fit (`CSRAG.fitting_bindings`), so the chain can go on in the graph.

The pure steps (`n_eff`, `sufficient`, `bind`, `propagate`) take plain values so they can be tested without models.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from kgr.embed import TextVectors
from kgr.errors import KgrError
from kgr.graph import normalize_name
from kgr.lexicon import mark_names, offered_alternatives
from kgr.methods.base import TIMED_STAGES, Query, RunContext, Stopwatch
from kgr.methods.csrag.chains import ChainPlanner
from kgr.methods.csrag.plan import PLAN_VERSION, Constraint, Plan, chains_of, is_variable, variable_type
from kgr.methods.csrag.planner import chain_planner, plan_question
from kgr.methods.graph_index import NEIGHBOURHOOD_ROWS, PlanIndex, most_like, plan_index
from kgr.methods.passages import bounded_evidence, fuse_passages
from kgr.schema import open_vocabulary
from kgr.methods.records import RetrievalRecord, empty_result_warning
from kgr.ranking import top_k

__all__ = [
    "CSRAG", "Candidate", "ConstraintState", "Plan", "bind", "n_eff", "orient", "plan_question",
    "propagate", "softmax", "sufficient",
]


# -- pure logic ----------------------------------------------------------------------------------------------
def softmax(scores: Sequence[float], temperature: float) -> np.ndarray:
    """Softmax of scores / temperature (a temperature <= 0 puts all mass on the best score)."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        return values
    if temperature <= 0:
        p = (values == values.max()).astype(np.float64)
        return p / p.sum()
    z = np.exp((values - values.max()) / temperature)
    return z / z.sum()


def n_eff(scores: Sequence[float], temperature: float) -> float:
    """Effective pool size 1/sum(p^2): 1 when one candidate dominates, len(scores) when all tie; 0 for no pool."""
    p = softmax(scores, temperature)
    return float(1.0 / np.sum(p * p)) if p.size else 0.0


def sufficient(scores: Sequence[float], temperature: float, gamma: float) -> tuple[float, bool]:
    """(N_eff, resolved): a non-empty pool is sufficient when N_eff <= gamma."""
    value = n_eff(scores, temperature)
    return value, bool(len(scores)) and value <= gamma + 1e-9


def settled_group(scores: Sequence[float], groups: Sequence[int], temperature: float, gamma: float) -> int | None:
    """The group (a relation) whose candidates share the pool's probability mass when the pool is settled on it: the
    effective number of groups, 1/sum(P_g^2) with P_g the summed softmax of its candidates, is at most `gamma`
    (None otherwise). Many near-equal candidates of one relation are one answer set, not an ambiguity."""
    if not len(scores):
        return None
    p = softmax(scores, temperature)
    keys, inverse = np.unique(np.asarray(groups), return_inverse=True)
    mass = np.bincount(inverse, weights=p, minlength=len(keys))
    if 1.0 / float(np.sum(mass * mass)) > gamma + 1e-9:
        return None
    return int(keys[int(np.argmax(mass))])


@dataclass
class Candidate:
    """A triple in a constraint's pool: `near` is the known side, `far` the other endpoint."""

    rid: int
    near: int
    far: int
    align: float = 0.0
    score: float = 0.0


@dataclass
class ConstraintState:
    """What happened to one constraint."""

    index: int
    status: str = "pending"  # resolved | unresolved | blocked
    reason: str = ""
    source: str | None = None  # the term retrieved from
    target: str | None = None
    sources: list[int] = field(default_factory=list)
    pool: list[Candidate] = field(default_factory=list)
    n_eff: float = 0.0
    bound: list[int] = field(default_factory=list)  # far endpoints this constraint proposed for its target
    # resolved as one relation's answer set (`settled_group`), not by N_eff <= gamma: the reranked pool's size, the
    # rest of `pool` being the relation's other edges (None: not an answer set)
    set_from: int | None = None


def keep_agreed(states: Sequence[ConstraintState], bindings: Mapping[str, list[int]]) -> set[str]:
    """Narrow the pools of the resolved constraints that bind one variable together to the candidates reaching their
    intersection (`propagate`): the others are evidence for answers another constraint ruled out ("a player at
    [Forward] in [Tigres]": the forwards of other clubs); return those variables."""
    binders: dict[str, list[ConstraintState]] = {}
    for state in states:
        if state.status == "resolved" and state.target is not None and is_variable(state.target):
            binders.setdefault(state.target, []).append(state)
    agreed_on: set[str] = set()
    for target, together in binders.items():
        if len(together) < 2 or target not in bindings:
            continue
        agreed_on.add(target)
        agreed = set(bindings[target])
        for state in together:
            if state.set_from is not None:
                state.set_from = sum(1 for c in state.pool[:state.set_from] if c.far in agreed)
            state.pool = [c for c in state.pool if c.far in agreed]
    return agreed_on


def bind(pool: Sequence[Candidate], value: float) -> list[int]:
    """Far endpoints of the round(N_eff) best candidates (at least one), distinct, best first: the binding of a
    resolved pool keeps as many candidates as the pool effectively has."""
    count = max(1, math.floor(value + 0.5))
    return list(dict.fromkeys(c.far for c in pool[:count]))


def orient(c: Constraint, bound: Mapping[str, Sequence[int]]) -> tuple[str, str] | None:
    """(source, target) of a constraint: from its head when the head is known (an entity mention or a bound
    variable), else from its tail when that is known; None while neither is."""
    if not is_variable(c.head) or c.head in bound:
        return c.head, c.tail
    if not is_variable(c.tail) or c.tail in bound:
        return c.tail, c.head
    return None


def propagate(
    constraints: Sequence[Constraint],
    anchors: Mapping[str, Sequence[int]],
    retrieve: Callable[[int, list[int], dict[str, list[int]]], list[Candidate]],
    temperature: float,
    gamma: float,
    on_decided: Callable[[ConstraintState], None] | None = None,
    recover: Callable[[int, dict[str, list[int]]], list[int]] | None = None,
    unsettled_binds: int = 0,
    widen: Callable[[int, list[int], list[Candidate]], list[Candidate] | None] | None = None,
    directed: Callable[[int, str, list[Candidate]], list[bool]] | None = None,
) -> tuple[list[ConstraintState], dict[str, list[int]]]:
    """Run every constraint whose source is known until nothing more propagates; return states and bindings.

    `retrieve(index, source_entities, bindings_so_far)` returns the constraint's reranked pool, best first;
    `on_decided(state)` is called after each constraint is decided.
    A constraint's source is its head when the head is an entity mention (resolved to `anchors`) or a bound
    variable, else its tail under the same condition. Variables used as sources wait until every constraint that
    binds them from an entity has run (so intersections are final), unless nothing else can progress.
    A variable bound by several resolved constraints keeps the intersection; an empty intersection unbinds it and
    marks all the constraints that bound it unresolved.
    `recover(index, bindings_so_far)`, when given, is asked for the entities that passages name for a constraint
    that found no candidates at all (the graph lacks the edge): they bind its free variable so that later
    constraints can still be retrieved from the graph; the constraint itself stays unresolved.
    `unsettled_binds`, when there are no passages to recover from: an unresolved constraint's best that many
    candidates bind its variable all the same (recall first), and it stays unresolved.
    `widen(index, source_entities, pool)`, when given, is asked about a pool that is not sufficient: it returns the
    whole answer set when the pool is settled on one relation (`settled_group`), which then resolves the constraint
    and binds every far endpoint, or None.
    `directed(index, source, pool)`, when given, says which candidates go the way the constraint's direction reads
    from `source`: once the constraint is decided (on the whole pool, as the sufficiency check was designed), those
    against it bind nothing and leave the pool, unless none goes that way.
    """
    states = [ConstraintState(i) for i in range(len(constraints))]
    # a variable several constraints bind from entity mentions is their intersection: each proposes its whole answer
    # set, and the intersection selects ("a player at [Forward] in [Tigres]")
    from_mentions = Counter(c.tail if is_variable(c.tail) else c.head for c in constraints
                            if is_variable(c.head) != is_variable(c.tail))
    joined = {variable for variable, count in from_mentions.items() if count > 1}
    bindings: dict[str, list[int]] = {}
    binders: dict[str, list[int]] = {}
    dead: set[str] = set()

    def settled(term: str, pending: list[int]) -> bool:
        """No pending constraint still to bind `term` from an entity mention."""
        return all(
            not (term in (c.head, c.tail) and any(not is_variable(t) for t in (c.head, c.tail)))
            for j in pending for c in [constraints[j]]
        )

    strict = True
    decided: list[ConstraintState] = []
    while True:
        if on_decided is not None and decided:
            on_decided(decided.pop())
        pending = [i for i, s in enumerate(states) if s.status == "pending"]
        ready = []
        for i in pending:
            oriented = orient(constraints[i], bindings)
            if oriented is None:
                continue
            source = oriented[0]
            if strict and is_variable(source) and not settled(source, [j for j in pending if j != i]):
                continue
            ready.append((i, oriented))
        if not ready:
            if strict and pending:
                strict = False
                continue
            break
        strict = True
        i, (source, target) = ready[0]
        state = states[i]
        decided.append(state)
        state.source, state.target = source, target
        state.sources = list(dict.fromkeys(anchors.get(source, []) if not is_variable(source) else bindings[source]))
        if not state.sources:
            state.status, state.reason = "unresolved", f"no entity matches {source!r}"
            continue
        state.pool = retrieve(i, state.sources, bindings)
        state.n_eff, ok = sufficient([c.score for c in state.pool], temperature, gamma)
        sufficient_pool = ok
        whole = widen(i, state.sources, state.pool) if (not ok or target in joined or target in bindings) \
            and widen is not None \
            and state.pool else None
        if whole:
            state.set_from, state.pool, ok = len(state.pool), whole, True
        keep = directed(i, source, state.pool) if directed is not None and state.pool else []
        if any(keep) and not all(keep):
            if state.set_from is not None:
                state.set_from = sum(keep[:state.set_from])
            state.pool = [c for c, k in zip(state.pool, keep) if k]
            whole = state.pool if whole else whole
        if not ok:
            state.status = "unresolved"
            state.reason = "no candidates" if not state.pool else f"N_eff {state.n_eff:.2f} > gamma {gamma:g}"
            if not state.pool and recover is not None and is_variable(target) and target not in bindings \
                    and target not in dead:
                named = [e for e in recover(i, bindings) if e not in state.sources]
                if named:
                    bindings[target] = named
                    state.bound = named
                    state.reason += f"; {len(named)} entities named in its passages bind {target}"
            if not (state.pool and unsettled_binds):
                continue
        elif whole:
            state.status = "resolved"
            state.reason = f"N_eff {state.n_eff:.2f} {'<=' if sufficient_pool else '>'} gamma {gamma:g}, settled on " \
                           f"one relation: {len(whole)} answers"
        else:
            state.status, state.reason = "resolved", f"N_eff {state.n_eff:.2f} <= gamma {gamma:g}"
        if not is_variable(target):
            continue
        if whole:
            state.bound = list(dict.fromkeys(c.far for c in whole))
        elif ok:
            state.bound = bind(state.pool, state.n_eff)
        else:
            state.bound = list(dict.fromkeys(c.far for c in state.pool[:unsettled_binds]))
            state.reason += f"; its best {len(state.bound)} bind {target} (no passages to recover from)"
        if target in dead:
            state.status, state.reason = "unresolved", f"{target} has conflicting bindings"
            continue
        binders.setdefault(target, []).append(i)
        if target in bindings:
            proposed = set(state.bound)
            kept = [e for e in bindings[target] if e in proposed]
            if kept:
                bindings[target] = kept
            else:
                del bindings[target]
                dead.add(target)
                for j in binders[target]:
                    states[j].status, states[j].reason = "unresolved", f"empty intersection for {target}"
        else:
            bindings[target] = list(state.bound)
    if on_decided is not None and decided:
        on_decided(decided.pop())
    for state in states:
        if state.status == "pending":
            state.status, state.reason = "blocked", "its variables were never bound"
    return states, bindings


# -- the method ------------------------------------------------------------------------------------------------
class CSRAG:
    """CS-RAG over a GraphStore; `plans` maps question ids to stored plans (Plan or Plan.to_dict() dicts)."""

    name: ClassVar[str] = "csrag"
    needs_reach: ClassVar[bool] = False
    plan_version: ClassVar[int] = PLAN_VERSION  # stored plans of another planner version are planned again

    def __init__(self, context: RunContext, plans: Mapping[str, Plan | dict] | None = None):
        self.context = context
        self.store = context.store
        self.settings = context.config.csrag
        self.index: PlanIndex = plan_index(self.store)
        self.open_vocabulary = open_vocabulary(self.store)
        if context.stage in TIMED_STAGES:
            self.index.warm(self.settings, walk=bool(self.store.passages))
            self.chains.warm()
        self.plans = dict(plans or {})
        self._cross_encoder = None
        self._role_types: dict[tuple[bytes, bool], int | None] = {}
        self._label_rows = {words: row for row, words in enumerate(self.index.label_words)}
        from kgr.methods.budget import token_counter

        self.count = token_counter(context.config.budget.encoding)

    @cached_property
    def chains(self) -> ChainPlanner:
        """The offline policy's walk over this graph (per instance, as it keeps a question's state), built when first
        planning: a run of stored plans needs none."""
        return chain_planner(self.context)

    def plan(self, query: Query) -> dict[str, Any]:
        """The question's plan as JSON-able data (what `kgr plan --method csrag` stores; `retrieve(plan=...)` takes
        it back)."""
        return plan_question(self.context, query, chains=self.chains).to_dict()

    # -- reranking ---------------------------------------------------------------------------------------------
    @property
    def reranker_name(self) -> str:
        name = self.settings.reranker.strip()
        return f"cross-encoder:{name}" if name else f"bi-encoder:{self.store.model_name}"

    def _cross(self):
        if self._cross_encoder is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from sentence_transformers import CrossEncoder

                self._cross_encoder = CrossEncoder(self.settings.reranker, device="cpu")
            except Exception as exc:  # any loading failure means the configured reranker is unusable
                raise KgrError(f"cannot load csrag.reranker {self.settings.reranker!r}: "
                               f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        return self._cross_encoder

    def rerank(self, query_text: str, query_vector: np.ndarray, texts: list[str], vectors: np.ndarray) -> np.ndarray:
        """Scores of (question | constraint, text) pairs: cross-encoder when configured, else bi-encoder cosine."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        if not self.settings.reranker.strip():
            return vectors @ query_vector
        scores = np.asarray(self._cross().predict([(query_text, t) for t in texts], show_progress_bar=False),
                            dtype=np.float64).reshape(len(texts), -1)[:, -1]
        if scores.min() < 0 or scores.max() > 1:  # logits: squash so the temperature means the same thing
            scores = 1 / (1 + np.exp(-scores))
        return scores

    def encode_variants(self, c: Constraint, vectors: TextVectors,
                        query_text: str | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Vectors of the constraint's variants (graph labels reuse their stored vectors) and of `query_text` when
        given, encoded in one batch through the question's `vectors`."""
        variants = list(dict.fromkeys(c.variants or [c.relation]))
        missing = [v for v in variants if v not in self._label_rows]
        texts = missing + ([query_text] if query_text is not None else [])
        encoded = vectors(texts) if texts else None
        fresh = dict(zip(missing, encoded)) if missing else {}
        labels = self.index.label_vectors
        rows = [labels[self._label_rows[v]] if v in self._label_rows else fresh[v] for v in variants]
        return np.stack(rows), (encoded[-1] if query_text is not None else None)

    # -- linearization -------------------------------------------------------------------------------------------
    def _term_text(self, term: str, plan: Plan, bindings: dict[str, list[int]], anchors: dict[str, list[int]],
                   skip: int, depth: int = 0) -> str:
        names = self.store.names
        if not is_variable(term):
            return names[anchors[term][0]] if anchors.get(term) else term
        if term in bindings:
            return " or ".join(names[e] for e in bindings[term][:3])
        if depth < 3:
            for j, c in enumerate(plan.constraints):
                if j != skip and term in (c.head, c.tail):
                    other = c.head if c.tail == term else c.tail
                    return f"the {c.relation} of {self._term_text(other, plan, bindings, anchors, j, depth + 1)}"
        return variable_type(term)

    def linearize(self, index: int, plan: Plan, bindings: dict[str, list[int]], anchors: dict[str, list[int]]) -> str:
        c = plan.constraints[index]
        head = self._term_text(c.head, plan, bindings, anchors, index)
        tail = variable_type(c.tail) if is_variable(c.tail) and c.tail not in bindings else \
            self._term_text(c.tail, plan, bindings, anchors, index)
        return f"{head} {c.relation} {tail}"

    def sole_variant_pool(self, constraint: Constraint, keep: np.ndarray, align: np.ndarray,
                          labels: np.ndarray) -> np.ndarray:
        """The aligned candidates (`keep`, rows of `align` and `labels`) a constraint with one relation phrasing keeps
        when some candidate's label is that phrasing word for word: only those within `csrag.sole_variant_margin` of
        its alignment. The planner gave no variant because no other label was near ("[X]'s mother": `mother`), and
        the reranker, reading the whole question, would tie `father` (0.73 aligned) with it."""
        margin = self.settings.sole_variant_margin
        if margin <= 0 or len(constraint.variants) != 1 or not keep.size:
            return keep
        exact = np.array([self.index.label_words[label] == constraint.variants[0] for label in labels[keep].tolist()])
        if not exact.any():
            return keep
        return keep[align[keep] >= align[keep][exact].max() - margin]

    def constraint_texts(self, question: str, index: int, plan: Plan, bindings: dict[str, list[int]],
                         anchors: dict[str, list[int]]) -> list[str]:
        """Constraint `index` linearized, alone and after the question (retrieval encodes the second, recovery both)."""
        text = self.linearize(index, plan, bindings, anchors)
        return [text, f"{question} | {text}"]

    # -- retrieval -----------------------------------------------------------------------------------------------
    def retrieve(self, query: Query, plan: Plan | dict | None = None) -> RetrievalRecord:
        watch = Stopwatch()
        store, settings = self.store, self.settings
        if plan is None:
            plan = self.plans.get(query.id)
        if isinstance(plan, dict):
            plan = Plan.from_dict(plan, source="stored")
        elif plan is not None:
            plan.source = plan.source if plan.source == "stored" else f"stored:{plan.source}"
        if plan is None:
            # in encoder passes of its own, as `kgr plan` makes it
            plan = plan_question(self.context, query, chains=self.chains)
        # Every text is encoded once per question, and what is likely needed next rides along with each miss; the
        # passes start afresh after planning, so a record is the same whether its plan was made now or read back.
        vectors = TextVectors(store.encoder)
        plain = query.plain
        vectors.expect([plain])  # the passages' ranking needs it at the end
        floor = self.context.config.anchors.min_similarity
        watch.lap("plan")

        matches = [self.index.match_anchors(m, settings.anchor_matches, floor) for m in plan.mentions]
        # an unmatched mention anchors nothing: its constraints get no graph candidates, only textual recovery
        anchors: dict[str, list[int]] = {m.mention: list(m.eids) for m in matches}
        anchor_ids = {e for eids in anchors.values() for e in eids}
        # the alternatives a question offers ("who was born first, A or B?") are its candidate answers
        marked = query.text if query.mentions else mark_names(query.text, plan.mentions)
        alternatives = list(dict.fromkeys(e for m in offered_alternatives(marked) for e in anchors.get(m, [])))
        watch.lap("anchors")

        reached: set[int] = set(anchor_ids)
        aligned_out: set[int] = set()

        # per chain (`chains_of`): a hedged plan's walk reads the question again, along edges the labels' took too
        chain_of = chains_of(plan.constraints)
        used_rids: dict[int, set[int]] = {chain: set() for chain in chain_of}

        def on_decided(state: ConstraintState) -> None:
            # Triples that bound a variable are not candidates again in the chain (no walking back along the edge
            # just taken), also an unsettled pool's best binding it on a graph without passages
            used_rids[chain_of[state.index]].update(c.rid for c in state.pool if c.far in state.bound)

        retrieved: set[int] = set()

        def texts_of(i: int, bound: dict[str, list[int]]) -> list[str]:
            return self.constraint_texts(plain, i, plan, bound, anchors)

        def retrieve_constraint(i: int, sources: list[int], bound: dict[str, list[int]]) -> list[Candidate]:
            c = plan.constraints[i]
            retrieved.add(i)
            # Speculation: this constraint's recovery texts, and the retrieval texts of the others whose source is
            # known, as the bindings stand; a text that differs when it is needed is only a spare row in the batch.
            for j in [i, *(j for j in range(len(plan.constraints)) if j not in retrieved)]:
                if orient(plan.constraints[j], bound) is not None:
                    vectors.expect(texts_of(j, bound))
            rids, near, far = self.index.incident(sources)
            used = used_rids[chain_of[i]]
            fresh = np.array([r not in used for r in rids.tolist()], dtype=bool)
            rids, near, far = rids[fresh], near[fresh], far[fresh]
            reached.update(far.tolist())
            if rids.size == 0:
                return []
            # Deduplicate by triple (a triple between two sources appears from both sides: keep the first).
            _, first = np.unique(rids, return_index=True)
            first.sort()
            rids, near, far = rids[first], near[first], far[first]
            qc_text = texts_of(i, bound)[1]
            variant_vectors, qc_vector = self.encode_variants(c, vectors, qc_text)
            align_all = (self.index.label_vectors[store.relation_ids[rids]] @ variant_vectors.T).max(axis=1)
            keep = top_k(align_all, settings.align_top)
            keep = keep[align_all[keep] >= settings.min_align]  # an edge of another relation answers nothing asked
            keep = self.sole_variant_pool(c, keep, align_all, store.relation_ids[rids])
            aligned_out.update(far[np.setdiff1d(np.arange(rids.size), keep)].tolist())
            rids, near, far, align = rids[keep], near[keep], far[keep], align_all[keep]
            texts = [store.relationship_texts[r] for r in rids.tolist()] if settings.reranker.strip() else \
                [""] * rids.size
            scores = self.rerank(qc_text, qc_vector, texts, store.relationship_vectors[rids])
            best = top_k(np.asarray(scores, dtype=np.float64), settings.rerank_top)
            pool = [Candidate(int(rids[j]), int(near[j]), int(far[j]), float(align[j]), float(scores[j]))
                    for j in best.tolist()]
            chosen = set(best.tolist())
            aligned_out.update(int(far[j]) for j in range(rids.size) if j not in chosen)
            return pool

        def answer_set(i: int, sources: list[int], pool: list[Candidate]) -> list[Candidate] | None:
            """The pool, then every other fresh edge of the sources along the relation it is settled on
            (`settled_group`), up to `set_answers` in all; None when the pool is not settled on one relation."""
            relation = settled_group([c.score for c in pool], store.relation_ids[[c.rid for c in pool]],
                                     settings.temperature, settings.gamma)
            if relation is None:
                return None
            rids, near, far = self.index.incident(sources)
            members = list(pool)
            taken = {c.rid for c in members}
            lowest = min(c.score for c in members)
            align = max(c.align for c in members if store.relation_ids[c.rid] == relation)
            for rid, n, f in zip(rids.tolist(), near.tolist(), far.tolist()):
                if len(members) >= settings.set_answers:
                    break
                if store.relation_ids[rid] == relation and rid not in taken and rid not in used_rids[chain_of[i]]:
                    taken.add(rid)
                    members.append(Candidate(rid, n, f, align, lowest))
            return members

        has_passages = bool(store.passages)
        recovered: dict[int, list[tuple[int, float]]] = {}  # constraint -> (passage, score), best first

        def recover(i: int, bound: dict[str, list[int]]) -> list[tuple[int, float]]:
            """Textual recovery: the passages about the constraint's source entities (where a lost edge is most
            likely stated), then the top K't passages by similarity to the linearized constraint together with the
            passages its source entities were extracted from (provenance), reranked, keep Kt."""
            if i not in recovered:
                text, qc_text = texts_of(i, bound)
                first_vec, qc_vec = vectors([text, qc_text])
                sources = source_entities(i, bound)
                about = self.index.passages_about(sources)[:settings.passages_keep]
                first = store.nearest("passages", first_vec, settings.passages_first + len(about))[0]
                extracted = [p for e in sources for p in store.entity_source_passages.get(e, [])]
                first = np.array(list(dict.fromkeys(about + first.tolist() + extracted)), dtype=np.int64)
                texts = [f"{store.passages[p][0]}. {store.passages[p][1]}" for p in first.tolist()] \
                    if settings.reranker.strip() else [""] * first.size
                scores = np.asarray(self.rerank(qc_text, qc_vec, texts, store.passage_vectors[first]), dtype=np.float64)
                keep = top_k(scores[len(about):], settings.passages_keep) + len(about)
                recovered[i] = [(int(first[j]), float(scores[j])) for j in [*range(len(about)), *keep.tolist()]]
            return recovered[i]

        def source_entities(i: int, bound: dict[str, list[int]]) -> list[int]:
            """The entities constraint `i` is retrieved from; none while blocked."""
            oriented = orient(plan.constraints[i], bound)
            if oriented is None:
                return []
            return bound[oriented[0]] if is_variable(oriented[0]) else anchors.get(oriented[0], [])

        def named_in_passages(i: int, bound: dict[str, list[int]]) -> list[int]:
            """Graph entities named in the constraint's recovered passages (reading order) that can go on along
            a later constraint on the variable they would bind."""
            found = [self.index.find_names(store.passages[p][1]) for p, _ in recover(i, bound)]
            named = list(dict.fromkeys(e for spans in found for _, _, name in spans
                                       for e in store.name_index.get(normalize_name(name), [])))
            return self.fitting_bindings(named, i, plan, bound, vectors)

        def directed(i: int, source: str, pool: list[Candidate]) -> list[bool]:
            """Per candidate, whether it goes the way the constraint reads from `source` (its relation's edges the
            other way answer another question: what depends on X, not what X depends on)."""
            c = plan.constraints[i]
            if not c.direction:
                return [True] * len(pool)
            along = self.index.label_rows(c.relation)
            subject_side = (c.direction == "forward") == (source == c.head)  # the source is the triples' subject
            return [not along[store.relation_ids[p.rid]] or (int(store.src[p.rid]) == p.near) == subject_side
                    for p in pool]

        states, bindings = propagate(plan.constraints, anchors, retrieve_constraint, settings.temperature,
                                     settings.gamma, on_decided,
                                     recover=named_in_passages if has_passages and settings.bind_from_passages
                                     else None, unsettled_binds=0 if has_passages else settings.graph_recovery,
                                     widen=answer_set if settings.set_answers else None, directed=directed)
        agreed = keep_agreed(states, bindings)
        watch.lap("constraints")

        # Passages ranked by the question's dense score fused with graph evidence (`passage_evidence`): with no
        # evidence the ranking is the dense one, and passages the graph points to move up. The recoveries it still
        # needs are encoded in one batch.
        for state in states:
            if state.status != "resolved" and state.index not in recovered:
                vectors.expect(texts_of(state.index, bindings))
        evidence = self.passage_evidence(states, bindings, anchors, recover) if has_passages else {}
        passage_ids, passage_scores = self.rank_passages(vectors([plain])[0], evidence) if has_passages else ([], {})
        watch.lap("passages")

        from kgr.methods.budget import pack_paths

        ranked = [(state.index, cand) for state in states if state.status == "resolved"
                  for cand in state.pool[:state.set_from]]
        cut_fill = False  # whether the anchors' neighbourhood was cut to its nearest relationships
        if not has_passages:  # the graph's own texts are the only recovery: an unsettled pool's best, after the others
            ranked += [(state.index, cand) for state in states if state.status != "resolved"
                       for cand in state.pool[:settings.graph_recovery]]
        # the anchors' neighbourhood most like the question follows: without passages, after a plan that may have
        # missed (an unresolved constraint; an answer set rests on the relation it settled on, unless two mentions
        # agreed on it; a hedged plan on a reading the policy was unsure of: recall first, as DotRAG fills after a
        # hedged plan); on an open-vocabulary graph after every plan (a constraint's relation is one phrasing of a
        # fact the graph states in many)
        unsettled = any(state.status != "resolved" or state.set_from is not None and state.target not in agreed
                        for state in states)
        if settings.graph_fill and (self.open_vocabulary or not has_passages and (plan.hedged or unsettled)):
            taken = {cand.rid for _, cand in ranked}
            filled, cut_fill = self.neighbourhood(anchor_ids, vectors([plain])[0], taken)
            ranked += filled
        # an answer set's other edges come last: many, alike, and the budget keeps the evidence above them first
        ranked += [(state.index, cand) for state in states if state.set_from is not None
                   for cand in state.pool[state.set_from:]]
        seen_rids: set[int] = set()
        paths, endpoints, scored = [], [], []
        for i, cand in ranked:
            if cand.rid in seen_rids:
                continue
            seen_rids.add(cand.rid)
            paths.append([cand.rid])
            endpoints.append([cand.near, cand.far])
            scored.append((i, cand))
        packed = pack_paths(store, paths, self.context.config.budget.tokens, self.count, endpoints=endpoints,
                            passages=passage_ids)
        watch.lap("pack")

        names = store.names
        kept_paths = [scored[k] for k in packed.kept_paths]
        entity_order: list[int] = list(alternatives)
        for _, cand in kept_paths:
            for e in (cand.far, cand.near):
                if e not in anchor_ids:
                    entity_order.append(e)
        entity_order = list(dict.fromkeys(entity_order))
        kept_set = set(entity_order) | anchor_ids
        cut = {e for k in packed.cut_paths for e in (scored[k][1].near, scored[k][1].far)} - kept_set
        pooled = {e for s in states for c in s.pool for e in (c.near, c.far)}
        filtered = (aligned_out | pooled) - kept_set - cut
        usage = self.context.usage(query.id)
        trace = {
            "plan": plan.to_dict(),
            "plan_source": plan.source,
            "reranker": self.reranker_name,
            "anchors": {m: [names[e] for e in eids] for m, eids in anchors.items()},
            "alternatives": [names[e] for e in alternatives],
            "constraints": [self._state_trace(s, plan, recovered) for s in states],
            "bindings": {v: [names[e] for e in eids] for v, eids in bindings.items()},
            "fill": sum(1 for i, _ in ranked if i is None),  # the anchors' neighbourhood's, after an unresolved plan
            "fill_cut": cut_fill,
            "reached": sorted({names[e] for e in reached}),
            "filtered": sorted({names[e] for e in filtered}),
            "cut_by_budget": sorted({names[e] for e in cut}),
            "passage_scores": [{"title": store.passages[p][0], "dense": round(dense, 4),
                                "evidence": round(evidence.get(p, 0.0), 4), "score": round(score, 4)}
                               for p, (dense, score) in passage_scores.items()],
        }
        record = RetrievalRecord(
            id=query.id,
            question=query.text,
            method=self.name,
            backbone=self.context.backbone,
            anchors=list(dict.fromkeys(names[e] for eids in anchors.values() for e in eids)),
            unmatched_mentions=[m.mention for m in matches if not m.matched],
            warnings=[*plan.warnings, *(m.warning for m in matches if m.warning),
                      *self.context.take_warnings(query.id)],
            entities=[names[e] for e in entity_order],
            paths=[{"entities": [names[c.near], names[c.far]], "relations": [store.relation_of(c.rid)],
                    "directions": [store.direction(c.rid, c.near)],
                    "similarities": [round(c.score, 4)], "score": round(c.score, 4), "constraint": i}
                   for i, c in kept_paths],
            context=packed.context,
            context_tokens=packed.tokens,
            passages=[store.passages[p][0] for p in packed.pids],
            llm_calls=int(usage["llm_calls"]),
            prompt_tokens=int(usage["prompt_tokens"]),
            completion_tokens=int(usage["completion_tokens"]),
            cost_usd=float(usage["cost_usd"]),
            latency_ms=watch.total_ms,
            timings_ms=watch.steps,
            trace=trace,
        )
        unresolved = [s for s in states if s.status != "resolved"]
        if record.is_empty and unresolved and not record.unmatched_mentions:  # an unmatched mention says why itself
            reasons = "; ".join(dict.fromkeys(s.reason for s in unresolved if s.reason))
            recovery = "" if has_passages else ", and the graph has no passages to recover them from"
            record.warnings.append(empty_result_warning(f"{len(unresolved)} of {len(states)} constraint(s) unresolved"
                                                        + (f": {reasons}" if reasons else "") + recovery))
        return record

    def neighbourhood(self, anchors: set[int], question: np.ndarray, taken: set[int]
                      ) -> tuple[list[tuple[None, Candidate]], bool]:
        """Up to `csrag.graph_fill` relationships within `max_hops` of the anchors that no candidate holds, the most
        like the question (where a constraint is unresolved and there are no passages, the evidence is still near
        the anchors), each from its end nearer them; they answer no constraint (None). And whether the neighbourhood
        was cut to its nearest `NEIGHBOURHOOD_ROWS` relationships."""
        edges, short = self.index.edges_within(sorted(anchors), self.settings.max_hops,
                                               len(taken) + NEIGHBOURHOOD_ROWS)
        best, cut = most_like(self.store.relationship_vectors, question, edges, taken, self.settings.graph_fill)
        return [(None, Candidate(rid, near, far, score=sim)) for rid, near, far, sim in best], short or cut

    def passage_evidence(self, states: Sequence[ConstraintState], bindings: Mapping[str, list[int]],
                         anchors: Mapping[str, list[int]], recover: Callable[[int, dict[str, list[int]]], list]
                         ) -> dict[int, float]:
        """Graph evidence per passage in [0, 1) (`bounded_evidence`): the provenance of resolved constraints' kept
        triples (the paper's textual evidence of a resolved constraint), the passages titled by or extracted with the anchors and bound
        entities (an entity found in many passages says little about each: weight 1/sqrt(count)), the recovered
        passages of unresolved constraints, each scaled by the specificity of the mention its chain starts from; and
        the passages a walk from the anchors reaches (`PlanIndex.passage_walk`), by their share of its mass."""
        store, settings = self.store, self.settings
        evidence: dict[int, float] = {}
        weights = self.term_weights(states, anchors)

        def add(pids, weight: float) -> None:
            for p in pids:
                evidence[p] = evidence.get(p, 0.0) + weight

        def add_entity(e: int, weight: float) -> None:
            add(store.entity_passages.get(e, []), weight)
            extracted = store.entity_source_passages.get(e, [])
            if extracted:
                add(extracted, weight / math.sqrt(len(extracted)))

        for mention, eids in anchors.items():
            for e in eids:
                add_entity(e, settings.anchor_evidence * weights[mention])
        for variable, eids in bindings.items():
            for e in eids:
                add_entity(e, settings.binding_evidence * weights.get(variable, 1.0) / math.sqrt(len(eids)))
        for state in states:
            weight = weights.get(state.source, 1.0) if state.source is not None else 1.0
            if state.status == "resolved":
                for cand in state.pool:
                    if cand.far in state.bound:
                        add(store.relationship_passages.get(cand.rid, []), settings.triple_evidence * weight)
            else:
                add((p for p, _ in recover(state.index, dict(bindings))), settings.recovered_evidence * weight)
        seeds: dict[int, float] = {}
        for mention, eids in anchors.items():
            for e in eids:
                seeds[e] = max(seeds.get(e, 0.0), weights[mention] / len(eids))
        for p, value in self.index.walk_evidence(seeds, settings).items():
            evidence[p] = evidence.get(p, 0.0) + value
        return {p: bounded_evidence(value) for p, value in evidence.items()}

    def term_weights(self, states: Sequence[ConstraintState], anchors: Mapping[str, list[int]]) -> dict[str, float]:
        """Each mention's specificity in the graph (`GraphStore.specificity` ** `csrag.specificity`), and each
        bound variable's: the largest of the terms its binding constraints were retrieved from."""
        power = self.settings.specificity
        weights = {m: self.store.specificity(m) ** power if power > 0 else 1.0 for m in anchors}
        for _ in range(len(states)):  # a chain of n constraints settles in at most n rounds
            changed = False
            for state in states:
                if state.bound and state.target is not None and state.source in weights:
                    value = weights[state.source]
                    if value > weights.get(state.target, -1.0):
                        weights[state.target], changed = value, True
            if not changed:
                break
        return weights

    def rank_passages(self, question: np.ndarray, evidence: Mapping[int, float]) -> tuple[list[int], dict[int, tuple]]:
        """The top `passages_top` passages by dense cosine to the `question` vector + `evidence_weight` x graph
        evidence, among the dense top `passages_first` and every passage with evidence; also {pid: (dense, fused)}."""
        store, settings = self.store, self.settings
        return fuse_passages(store.passage_vectors @ question, evidence, settings.passages_first,
                             settings.passages_top, settings.evidence_weight)

    def fitting_bindings(self, eids: list[int], index: int, plan: Plan, bound: Mapping[str, list[int]],
                         vectors: TextVectors) -> list[int]:
        """The entities in `eids` fit to bind constraint `index`'s free variable, best tier first, in their order
        (variants not among the graph's labels are encoded through the question's `vectors`).

        A passage names many things (dates, countries, other people); binding them all would pull the later
        constraints' pools and passages off course. An entity fits the role when it has the type most of the
        relation's far ends have, and can go on when it has an edge (in the direction the plan walks) matching a
        variant of a later constraint on the variable (cosine >= `bind_fit`). Kept: those that do both, else
        those that can go on, else those that fit the role; none when no entity does either.
        """
        if not eids:
            return []
        c = plan.constraints[index]
        source, target = orient(c, bound) or (c.tail, c.head)
        forward = source == c.head
        store = self.store
        variants, _ = self.encode_variants(c, vectors)
        role = self.role_type(variants, forward)
        roles = {e for e in eids if role is not None and role in
                 store.type_ids[store.type_indptr[e]:store.type_indptr[e + 1]].tolist()}
        onward = [d for j, d in enumerate(plan.constraints) if j != index and target in (d.head, d.tail)]
        going: set[int] = set()
        if onward:
            rids, near, _ = self.index.incident(eids)
            labels = self.index.label_vectors[store.relation_ids[rids]]
            for d in onward:
                matches = (labels @ self.encode_variants(d, vectors)[0].T).max(axis=1) >= self.settings.bind_fit
                ends = store.src[rids] if d.head == target else store.dst[rids]
                going.update(near[matches & (ends == near)].tolist())
        for tier in (roles & going, going, roles):
            if tier:
                return [e for e in eids if e in tier]
        return []

    def role_type(self, variants: np.ndarray, forward: bool) -> int | None:
        """The type id most far ends of the edges matching `variants` have (tails when `forward`, else heads);
        ties go to the rarer type."""
        store = self.store
        key = (variants.tobytes(), forward)
        if key not in self._role_types:
            matches = (self.index.label_vectors @ variants.T).max(axis=1) >= self.settings.bind_fit
            edges = np.flatnonzero(matches[store.relation_ids])
            ends = np.unique(store.dst[edges] if forward else store.src[edges])
            spans = [store.type_ids[store.type_indptr[e]:store.type_indptr[e + 1]] for e in ends.tolist()]
            counts = np.bincount(np.concatenate(spans), minlength=len(store.type_names)) if spans else np.zeros(0)
            if counts.size and counts.max() > 0:
                overall = np.bincount(store.type_ids, minlength=len(store.type_names))
                best = np.flatnonzero(counts == counts.max())
                self._role_types[key] = int(best[np.argmin(overall[best])])
            else:
                self._role_types[key] = None
        return self._role_types[key]

    def _state_trace(self, state: ConstraintState, plan: Plan, recovered: dict[int, list]) -> dict[str, Any]:
        store, names = self.store, self.store.names
        temperature = self.settings.temperature
        probs = softmax([c.score for c in state.pool], temperature)
        return {
            "constraint": plan.constraints[state.index].to_dict(),
            "decision": state.status,
            "reason": state.reason,
            "source": state.source,
            "sources": [names[e] for e in state.sources],
            "n_eff": round(state.n_eff, 4),
            "pool": [{"triple": list(store.triple(c.rid)), "align": round(c.align, 4), "score": round(c.score, 4),
                      "p": round(float(p), 4)} for c, p in zip(state.pool, probs)],
            "bound": [names[e] for e in state.bound],
            "passages": [{"title": self.store.passages[p][0], "score": round(score, 4)}
                         for p, score in recovered.get(state.index, [])],
        }
