"""DotRAG: trajectory discovery and ranking (the plan), then hop-by-hop relational path search over the map."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property, partial
from typing import Any, Callable, Sequence

import numpy as np

from kgr.embed import TextVectors
from kgr.graph import normalize_name, typed_labels
from kgr.lexicon import mark_names, name_spans, offered_alternatives, written_as_name
from kgr.methods.base import Query, RunContext, Stopwatch
from kgr.methods.budget import pack_paths, token_counter
from kgr.methods.direction import EITHER, WalkReader, name
from kgr.methods.dotrag.plan import PLAN_VERSION, Pair, PlannedAnchor, TrajectoryPlan
from kgr.methods.dotrag.policy import LLMPolicy, RandomPolicy
from kgr.methods.graph_index import most_like, plan_index, to_named_kind
from kgr.methods.offline.decisions import AnchorOption, Continue, HopSummary, Policy, TrajectoryOption
from kgr.methods.offline.policy import OfflinePolicy, label_words, step_query
from kgr.methods.passages import bounded_evidence, fuse_passages
from kgr.methods.records import RetrievalRecord
from kgr.ranking import top_k, top_k_per_group
from kgr.schema import open_vocabulary, step_counts
from kgr.store import GraphStore


def make_policy(context: RunContext, store: GraphStore, embed: Callable[[Sequence[str]], np.ndarray] | None = None,
                tally: Counter | None = None) -> Policy:
    """The policy named by backbone.model: `offline`, `random`, or an LLM (falling back to offline); the offline
    policy encodes with `embed` (default: the store's encoder) and reads the graph's steps from `tally`."""
    offline = OfflinePolicy.for_graph(store, context.config.offline, context.config.dotrag.max_hops,
                                      embed or store.encoder.encode, tally)
    if context.backbone == "offline":
        return offline
    if context.backbone == "random":
        return RandomPolicy(context.config.backbone.seed)
    overview = context.overview if context.config.dotrag.use_overview else ""
    return LLMPolicy(context.client, offline, overview)


@dataclass
class Path:
    """Relationships from an anchor outward; `eids` has one more entry than `rids`."""

    rids: tuple[int, ...]
    eids: tuple[int, ...]
    sims: tuple[float, ...]
    score: float = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.score is None:  # the similarities summed left to right (a walk's extension passes the same sum)
            self.score = float(sum(self.sims))


@dataclass
class PathLayer:
    """A walk's paths of one depth as arrays, best first: path i extends path `parent[i]` of the depth before by
    relationship `rids[i]` to entity `eids[i]` at (rounded) similarity `sims[i]`; `scores` are the sums so far."""

    parent: np.ndarray
    rids: np.ndarray
    eids: np.ndarray
    sims: np.ndarray
    scores: np.ndarray

    @classmethod
    def start(cls, anchor: int) -> PathLayer:
        """Depth 0: the anchor alone."""
        empty = np.empty(0, dtype=np.int64)
        return cls(np.array([-1]), empty, np.array([anchor], dtype=np.int64), np.empty(0), np.zeros(1))


def layer_paths(layers: list[PathLayer], depth: int) -> list[Path]:
    """The paths of `depth` as Path objects, traced back through the layers before it."""
    at = np.arange(len(layers[depth].eids))
    rids, eids, sims = [], [], []
    for layer in layers[depth:0:-1]:
        rids.append(layer.rids[at])
        eids.append(layer.eids[at])
        sims.append(layer.sims[at])
        at = layer.parent[at]
    eids.append(layers[0].eids[at])
    rids_rows = np.stack(rids[::-1], axis=1).tolist()
    eids_rows = np.stack(eids[::-1], axis=1).tolist()
    sims_rows = np.stack(sims[::-1], axis=1).tolist()
    return [Path(tuple(r), tuple(e), tuple(x), score)
            for r, e, x, score in zip(rids_rows, eids_rows, sims_rows, layers[depth].scores.tolist())]


def round_robin(ranked: list[tuple[tuple, Path]]) -> list[tuple[tuple, Path]]:
    """The paths ranked within their pair (key: pair priority, preferred depth, -score), then dealt one per pair in
    turn: the k-th path of every pair before any pair's (k+1)-th.

    The packer keeps paths in this order until the token budget is spent. Pair after pair, a hedged plan's first
    trajectory through a hub ("describing [JFK]" -> its genre -> hundreds of films) spent the budget before a later
    pair's answer; dealt in turn, each trajectory the policy kept is heard, and an unhedged plan (one pair) keeps its
    order.
    """
    ranked = sorted(ranked, key=lambda item: item[0])
    turn: dict[int, int] = {}
    dealt = []
    for key, path in ranked:
        turn[key[0]] = turn.get(key[0], -1) + 1
        dealt.append(((turn[key[0]], key[0]), path))
    dealt.sort(key=lambda item: item[0])
    return dealt


class DotRAG:
    """LLM-guided relational path retrieval, with the offline, random or an LLM policy making decisions."""

    name = "dotrag"
    needs_reach = True
    plan_version = PLAN_VERSION  # stored plans of another planner version are planned again

    def __init__(self, context: RunContext):
        self.context = context
        self.store = context.store
        self.settings = context.config.dotrag
        self.reach = context.open_reach()
        # the walk's and the offline policy's texts in one memo, started afresh by each question; the graph's phrases
        # (labels, schema texts, hop queries) are read from the project's phrase cache once a run has encoded them
        self._vectors = TextVectors(self.store.encoder, phrases=self.store.phrases)
        tally = step_counts(self.store)
        self.open_vocabulary = open_vocabulary(self.store)
        self.policy = make_policy(context, self.store, self._vectors, tally)
        self.count = token_counter(context.config.budget.encoding)
        self._warm(tally)

    def _warm(self, tally: Counter) -> None:
        """Encode the relation labels, the policy's graph texts (`Policy.warm`: the offline policy's schema texts) and
        the hop queries it may write (`Policy.hop_queries`: the offline policy's, one per step the graph holds), and
        build what the graph calls each entity (`PlanIndex.called`) and the passage walk, before any question is timed:
        each is a per-graph cost (seconds on an open vocabulary of thousands of phrasings) the first question would pay,
        and the encoded ones are kept in the project's phrase cache for the next run."""
        if self.settings.label_weight > 0 or self.settings.label_margin > 0:
            _ = self._label_vectors
        with self._vectors.warming():
            self.policy.warm()
        # encoded as a question's texts are (none for a policy that writes no hop queries of its own)
        self._vectors.keep(self.policy.hop_queries((r, b) for _, r, b in tally), as_queries=True)
        plan_index(self.store).called(())
        if self.store.passages and self.settings.passages:
            plan_index(self.store).warm_passage_ranking()

    def _begin_question(self, query: Query, hedged: bool = False) -> None:
        """Forget the last question's vectors and encode this one's opening texts in one pass (the policy's words, and
        the question itself when the seed search or an unsure plan's fill reads it), so that its vectors, and its
        record, do not depend on the questions before it (`TextVectors`)."""
        words = self.policy.begin_question(query.text)
        reads_question = not query.mentions or self._fill_size(hedged) > 0  # the seed search, the fill
        self._vectors.begin_question(([query.plain] if reads_question else []) + words)

    # -- planning ----------------------------------------------------------------------------------------------
    def plan(self, query: Query) -> dict[str, Any]:
        """The question's plan as JSON-able data (what `kgr plan` stores; `retrieve(plan=...)` takes it back)."""
        return self.make_plan(query).to_dict()

    def make_plan(self, query: Query) -> TrajectoryPlan:
        """Trajectory discovery and ranking: anchors, first-hop types with previews, and the kept pairs."""
        watch = Stopwatch()
        self._begin_question(query)
        settings, store = self.settings, self.store
        # the question's vector, encoded on first use: under the offline policy a question that names its entities
        # needs none (the hops search with the policy's step queries), saving the encoder pass VSS cannot avoid
        qv = partial(self._embed, query.plain)
        anchors, unmatched, warnings = self._anchors(query, qv)
        # the policy reads the names it anchors as mentions, bracketed or found: their words name entities, not the
        # way to the answer
        question = query.text if query.mentions else mark_names(query.text, [store.names[e] for e, named in anchors
                                                                             if named])
        alternatives = self._alternatives(query, question, [e for e, named in anchors if named])
        options = [AnchorOption(store.names[e], store.types_of(e), named) for e, named in anchors]
        if len(options) > 1 and self.policy.reads_similarity(options):
            similarities = store.entity_vectors[[e for e, _ in anchors]] @ qv()
            options = [replace(o, similarity=float(s)) for o, s in zip(options, similarities)]
        watch.lap("seeds")
        anchor_order = self.policy.rank_anchors(query.id, question, options) if options else []
        watch.lap("rank_anchors")
        pairs: list[Pair] = []
        hedged = tied = 0
        # only the anchors whose trajectories can make the top k_tau pairs are worth a ranking call
        wanted_anchors = math.ceil(settings.trajectories / max(settings.trajectories_per_anchor, 1))
        self.policy.prepare(question, [store.names[anchors[i][0]] for i in anchor_order[:wanted_anchors]])
        for anchor_rank, index in enumerate(anchor_order[:wanted_anchors]):
            eid = anchors[index][0]
            trajectories = self._trajectories(eid, qv)
            if not trajectories:
                continue
            order, first_query = self.policy.rank_trajectories(query.id, question, options[index], trajectories)
            keep = settings.trajectories_per_anchor
            unsure = settings.hedge_trajectories > keep and not self.policy.confident(query.id, question,
                                                                                    options[index], trajectories)
            if unsure:
                keep = hedged = settings.hedge_trajectories
            else:  # near-tied leading trajectories are all followed: budget packing ranks their paths
                keep = max(keep, self.policy.near_ties(query.id, question, options[index], trajectories))
            for type_rank, t in enumerate(order[:keep]):
                option = trajectories[t]
                # the policy wrote the query for its first choice; hedged ones search for their own relation
                hop_query = first_query if type_rank == 0 else \
                    step_query(option.relations[0] if option.relations else "", option.type, self._typed_labels)
                pairs.append(Pair(eid, anchor_rank, option.type, type_rank, hop_query, tuple(option.previews)))
            if order:  # first relations to the leading type the policy cannot tell apart are walked too
                leading = trajectories[order[0]]
                ties = self.policy.tied_first_queries(query.id, question, options[index], trajectories)
                if unsure:  # unsure of the reading, all of them ("who are the members of [X]": not `mbr_of_party`)
                    ties += [q for q in dict.fromkeys(step_query(r, leading.type, self._typed_labels)
                                                      for r in leading.relations)
                             if q != first_query and q not in ties][:settings.hedge_trajectories]
                tied += len(ties)
                pairs += [Pair(eid, anchor_rank, leading.type, 0, q, tuple(leading.previews)) for q in ties]
        pairs.sort(key=lambda p: (p.anchor_rank, p.type_rank))
        watch.lap("rank_trajectories")
        kept = max(settings.trajectories, hedged) + tied
        return TrajectoryPlan(
            question=question,
            anchors=tuple(PlannedAnchor(e, o.name, tuple(o.types), o.named,
                                        None if o.similarity is None else round(o.similarity, 4),
                                        anchor_order.index(i))
                          for i, ((e, _), o) in enumerate(zip(anchors, options))),
            pairs=tuple(pairs[:kept]),
            alternatives=tuple(alternatives),
            hedged=hedged > 0,
            unmatched_mentions=tuple(unmatched),
            warnings=tuple(warnings + self.context.take_warnings(query.id)),
            timings_ms=watch.steps,
            latency_ms=watch.total_ms,
        )

    def _anchors(self, query: Query, qv: Callable[[], np.ndarray]) -> tuple[list[tuple[int, bool]], list[str], list[str]]:
        """(anchors, unmatched mentions, warnings): the entities the bracketed mentions name (exactly, or loosely at
        `anchors.min_similarity`), else seed names found in the question, else the top seeds.

        A bracketed mention that matches nothing anchors nothing: the seeds most like the question would be
        look-alikes of an entity the graph does not hold, and their paths would answer another question. The
        global seed search (top `seeds` entities by similarity to the question) runs only for questions without
        brackets, which also saves a full matrix-vector product per question.
        """
        store = self.store
        floor = self.context.config.anchors.min_similarity
        if query.mentions:
            matches = [store.match_mention(mention, floor) for mention in query.mentions]
            named = dict.fromkeys(e for match in matches for e in match.eids)
            return ([(e, True) for e in named], [m.mention for m in matches if not m.matched],
                    [m.warning for m in matches if m.warning])
        seeds, similarities = store.nearest("entities", qv(), self.settings.seeds)
        spans = [(*span, e) for e, span in zip(seeds.tolist(), name_spans(query.plain, [store.names[e] for e in seeds]))
                 if span is not None]
        named = [e for s, t, e in spans
                 if not any((s2 <= s and t <= t2) and (t2 - s2) > (t - s) for s2, t2, _ in spans)]
        named += self._lexical_anchors(query.plain, [(s, t) for s, t, e in spans if e in named])
        if named:
            return [(e, True) for e in dict.fromkeys(named)], [], []
        warnings = []
        if len(seeds) and similarities[0] < floor:
            kept = min(len(seeds), self.settings.anchors)
            warnings.append(f"the question names no entity; its anchors are the {kept} entities most like it"
                            f" (best {store.names[seeds[0]]!r}, cosine {similarities[0]:.2f}"
                            f" < anchors.min_similarity {floor:g})")
        return [(e, False) for e in seeds[:self.settings.anchors].tolist()], [], warnings

    def _alternatives(self, query: Query, question: str, named: list[int]) -> list[int]:
        """The anchors the question offers as its answer's alternatives (`offered_alternatives`), in order."""
        offered = offered_alternatives(question)
        if not offered:
            return []
        store = self.store
        if query.mentions:  # a bracketed mention may have anchored loosely: its matches, among the anchors
            floor = self.context.config.anchors.min_similarity
            kept = set(named)
            return list(dict.fromkeys(e for m in offered for e in store.match_mention(m, floor).eids if e in kept))
        by_name: dict[str, list[int]] = {}
        for e in named:  # a found name is marked as it is spelled in the graph
            by_name.setdefault(store.names[e], []).append(e)
        return list(dict.fromkeys(e for m in offered for e in by_name.get(m, [])))

    def _lexical_anchors(self, text: str, taken: list[tuple[int, int]]) -> list[int]:
        """Entities whose names occur word for word in `text` outside the `taken` spans and are specific to this graph
        (`GraphStore.specificity` >= `dotrag.lexical_anchors`).

        The seed search ranks entities by their vector's likeness to the whole question, so of two names in one
        question ("which film came out earlier, A or B?") the second may rank below the top `seeds`; a common word
        that is also an entity's name ("country", "state") occurs in too many texts to count, unless the question
        writes it as a proper name (`written_as_name`): a hub's own edges hold its name ("United States" is in 50 of a
        1,559-edge catalogue's texts), yet "books by authors from the United States" names it.
        """
        floor = self.settings.lexical_anchors
        if floor <= 0:
            return []
        store = self.store
        found = []
        for start, end, name in plan_index(store).find_names(text):
            if all(end <= s or start >= t for s, t in taken) and (written_as_name(text, start, end, name)
                                                                   or store.specificity(name) >= floor):
                found += store.name_index[normalize_name(name)]
        return found

    def _trajectories(self, anchor: int, qv: Callable[[], np.ndarray]) -> list[TrajectoryOption]:
        """First-hop types from the anchor, with the relations leading there and (for a policy that reads them) the
        previews most like the question."""
        options = []
        grouped = self.reach.edges_by_type(anchor, 1, np.array([anchor], dtype=np.int32))
        for type_id, count in sorted(self.reach.type_counts(anchor, 1).items()):
            rids = grouped[type_id][0]
            previews = []
            if self.settings.use_previews and self.policy.reads_previews and len(rids):
                sims = self.store.relationship_vectors[rids] @ qv()
                previews = [self.store.relationship_texts[rids[i]] for i in top_k(sims, self.settings.previews)]
            options.append(TrajectoryOption(self.reach.type_names[type_id], count, self._relations(rids), previews))
        return options

    def _relations(self, rids: np.ndarray) -> list[str]:
        """The relation labels among `rids`, most frequent first."""
        if not len(rids):
            return []
        labels, counts = np.unique(self.store.relation_ids[rids], return_counts=True)
        return [self.store.relation_labels[i] for i in labels[np.argsort(-counts, kind="stable")]]

    # -- path search -------------------------------------------------------------------------------------------
    def retrieve(self, query: Query, plan: TrajectoryPlan | dict[str, Any] | None = None) -> RetrievalRecord:
        """The question's record, walking `plan` (a stored plan, or its JSON form) or a plan made now."""
        watch = Stopwatch()
        if isinstance(plan, dict):
            plan = TrajectoryPlan.from_dict(plan)
        elif plan is None:
            plan = self.make_plan(query)
        # afresh after planning as after reading a stored plan: the same question's opening pass is kept, the rest
        # encoded again, so a record is the same whether its plan was made now or read back
        self._begin_question(query, plan.hedged)
        watch.lap("plan")
        trace: dict[str, Any] = {"plan": plan.to_dict(), "trajectories": [], "reached": set(), "filtered": set()}
        ranked: list[tuple[tuple, Path]] = []
        self._vectors([pair.query for pair in plan.pairs])
        for priority, pair in enumerate(plan.pairs):
            paths, walk, preferred = self._search(query, plan.question, pair, trace, plan.hedged)
            trace["trajectories"].append({"anchor": self.store.names[pair.anchor], "type": pair.type,
                                          "type_named_by": self._type_names.get(pair.type, []),
                                          "hops": [asdict(h) for h in walk], "preferred_depths": preferred})
            for path in paths:
                ranked.append(((priority, preferred.index(len(path.rids)), -path.score), path))
        watch.lap("search")
        ranked = round_robin(ranked)
        unique: dict[tuple[int, ...], Path] = {}
        for _, path in ranked:
            unique.setdefault(path.rids, path)
        paths, shared = self._conjoin(query, list(unique.values()), bool(plan.alternatives))
        if shared is not None:
            trace["conjunction"] = sorted(self.store.names[e] for e in shared)
        passages = self._passages(query, plan, paths, trace) if self.store.passages and self.settings.passages else []
        watch.lap("passages")
        if fill := self._fill_size(plan.hedged):  # the evidence may lie off the walks
            filled, trace["fill_cut"], trace["fill_kind"] = self._fill(query, [p.anchor for p in plan.pairs], paths,
                                                                       fill, plan.question)
            trace["fill"], trace["fill_why"] = len(filled), "unsure plan" if plan.hedged else "open vocabulary"
            paths = paths + filled
            watch.lap("fill")
        packed = pack_paths(self.store, [p.rids for p in paths], self.context.config.budget.tokens, self.count,
                            endpoints=[p.eids for p in paths], passages=passages)
        watch.lap("pack")
        anchors = {p.anchor for p in plan.pairs}
        names = self.store.names
        kept_paths = [paths[i] for i in packed.kept_paths]
        trace["cut_by_budget"] = sorted({names[e] for i in packed.cut_paths for e in paths[i].eids[1:]})
        trace["reached"] = sorted({names[e] for e in trace["reached"]})  # entity ids until now: names once each
        trace["filtered"] = sorted({names[e] for e in trace["filtered"]})
        return RetrievalRecord(
            id=query.id, question=query.text, method=self.name, backbone=self.policy.name,
            anchors=[a.name for a in plan.anchors if a.eid in anchors],
            unmatched_mentions=list(plan.unmatched_mentions),
            warnings=[*plan.warnings, *self.context.take_warnings(query.id),
                      *(f"hop {hop} from {name} kept relationships under dotrag.min_similarity: none reached it"
                        for name, hop in dict.fromkeys((u["anchor"], u["hop"])
                                                       for u in trace.get("under_floor", [])))],
            # the alternatives a question offers are its candidate answers, though they anchor its paths
            entities=list(dict.fromkeys([*(names[e] for e in plan.alternatives),
                                         *(names[e] for e in packed.eids if e not in anchors)])),
            paths=[self._describe(p) for p in kept_paths],
            context=packed.context, context_tokens=packed.tokens,
            passages=[self.store.passages[p][0] for p in packed.pids] if self.store.passages else None,
            latency_ms=round(watch.total_ms - watch.steps["plan"] + plan.latency_ms, 3),
            timings_ms={**{f"plan.{k}": v for k, v in plan.timings_ms.items()},
                        **{k: v for k, v in watch.steps.items() if k != "plan"}},
            trace=trace, **self.context.usage(query.id),
        )

    def _fill_size(self, hedged: bool) -> int:
        """How many of the anchors' neighbourhood's relationships follow the walk's paths: `dotrag.fill` after an
        unsure plan, `dotrag.open_fill` after any plan on an open-vocabulary graph, whichever is more."""
        return max(self.settings.fill if hedged else 0, self.settings.open_fill if self.open_vocabulary else 0)

    def _fill(self, query: Query, anchors: list[int], paths: list[Path], size: int, question: str
              ) -> tuple[list[Path], bool, str | None]:
        """Up to `size` relationships within `max_hops` of the anchors that no path holds, the most like the
        question (a dense search of the anchors' neighbourhood: where a walk stopped short or turned wrong, the
        evidence is still near), each as a one-hop path from its end nearer an anchor; whether the neighbourhood
        was cut to its nearest `graph_index.NEIGHBOURHOOD_ROWS` relationships; and the type the answer-kind words of
        `question` (the plan's reading) name, the one the fill's relationships reach (`dotrag.fill_named_kind`)."""
        found = [self.reach.edges_within(a, self.settings.max_hops) for a in dict.fromkeys(anchors)]
        if not found:
            return [], False, None
        edges = tuple(np.concatenate(column) for column in zip(*found))
        kind = None
        if self.settings.fill_named_kind:
            edges, kind = to_named_kind(self.policy, self.store, question, anchors[0], edges)
        best, cut = most_like(self.store.relationship_vectors, self._embed(query.plain), edges,
                              [r for p in paths for r in p.rids], size)
        return [Path((rid,), (near, far), (round(sim, 4),)) for rid, near, far, sim in best], cut, kind

    def _passages(self, query: Query, plan: TrajectoryPlan, paths: list[Path], trace: dict) -> list[int]:
        """The top `dotrag.passages` passages by the question's dense score plus graph evidence, as CS-RAG ranks
        them: the provenance of the paths' relationships, and a walk from the anchors weighted by their names'
        specificity (`csrag.specificity`, `csrag.walk_*`, `csrag.evidence_weight`)."""
        store, csrag = self.store, self.context.config.csrag
        seeds = {a.eid: store.specificity(a.name) ** csrag.specificity for a in plan.anchors}
        evidence = plan_index(store).walk_evidence(seeds, csrag)
        for path in paths:
            for rid in path.rids:
                for p in store.relationship_passages.get(rid, []):
                    evidence[p] = evidence.get(p, 0.0) + csrag.triple_evidence
        order, _ = fuse_passages(store.passage_vectors @ self._embed(query.plain), {p: bounded_evidence(v) for p, v in
                                 evidence.items()}, self.settings.passages, self.settings.passages,
                                 csrag.evidence_weight)
        trace["passages"] = [store.passages[p][0] for p in order]
        return order

    def _search(self, query: Query, question: str, pair: Pair, trace: dict, hedged: bool = False
                ) -> tuple[list[Path], list[HopSummary], list[int]]:
        """Walk from the anchor hop by hop (the policy reviews each hop reading `question`); return the paths at the
        preferred depths, the walk and those depths. A hedged plan's walk keeps every depth it walked, the preferred
        first: the policy unsure of its reading, a depth it walked past may hold the answer (recall first)."""
        settings, store, reach = self.settings, self.store, self.reach
        anchor = pair.anchor
        anchor_option = AnchorOption(store.names[anchor], store.types_of(anchor), True, 1.0)
        frontier = np.array([anchor], dtype=np.int32)
        layers = [PathLayer.start(anchor)]  # layers[d]: the paths of depth d
        walk: list[HopSummary] = []
        # the hop's branches: (type, query, candidate edges); near ties in a review add branches (recall first)
        branches: list[tuple[str, str, Any]] = [(pair.type, pair.query, None)]
        preferred: list[int] = []
        also_depths: list[int] = []  # depths a near-tied Stop would have kept
        first_depths: list[int] = []  # depths a Stop the policy preferred would have kept (a speculative Continue)
        reader = WalkReader(question, store.names[anchor], plan_index(store).links_siblings) \
            if settings.read_direction else None
        for depth in range(1, settings.max_hops + 1):
            picked = []
            self._vectors([hop_query for _, hop_query, _ in branches])
            for type_name, hop_query, edges in branches:
                if edges is None:
                    edges = self._candidates(anchor, depth, reach.type_id(type_name), frontier)
                rids, near, far = self._directed(edges, reader, anchor, depth, trace)
                kept, sims, under_floor = self._select(rids, hop_query, near, depth)
                if under_floor:
                    trace.setdefault("under_floor", []).append({"anchor": store.names[anchor], "hop": depth})
                trace["reached"].update(far.tolist())
                dropped = np.ones(len(rids), dtype=bool)
                dropped[kept] = False
                trace["filtered"].update(far[dropped].tolist())
                picked.append((rids[kept], near[kept], far[kept], sims[kept]))
            rids, near, far, sims = (np.concatenate(column) for column in zip(*picked))
            unique = np.sort(np.unique(rids, return_index=True)[1])  # a multi-typed entity may be in two branches
            rids, near, far, sims = rids[unique], near[unique], far[unique], sims[unique]
            if not len(rids):
                break
            layers.append(self._extend(layers[-1], rids, near, far, sims))
            frontier = np.unique(far).astype(np.int32)
            type_name, hop_query = branches[0][0], branches[0][1]
            walk.append(HopSummary(depth, type_name, hop_query, store.relation_of(int(rids[0])), len(rids),
                                   [store.relationship_texts[r] for r in rids[:3]], plan_index(store).called(frontier)))
            if reader is not None:
                reader.take(walk[-1].relation)
            if depth == settings.max_hops:
                preferred = [depth]  # the walk went all the way on purpose: its last hop holds the answer
                break
            options, option_edges = self._next_options(anchor, depth + 1, frontier)
            step = self.policy.review(query.id, question, anchor_option, walk, options, settings.max_hops)
            if isinstance(step, Continue):
                branches = [(options[i].type, q, option_edges[i]) for i, q in [(step.option, step.query), *step.also]
                            if 0 <= i < len(options)]
                (first_depths if step.speculative else also_depths).extend(step.keep)
                continue
            preferred = [d for d in step.depths if 0 < d < len(layers)]
            break
        preferred = list(dict.fromkeys([d for d in first_depths if 0 < d < len(layers)] + preferred))
        preferred += [d for d in also_depths if 0 < d < len(layers) and d not in preferred]
        if not preferred and walk:
            preferred = [len(walk)]
        if hedged:
            # "what do the startups that had [X] as lead investor make" walked on to the products, then stopped back at
            # the startups ("make" is 0.37 from `develops`): unsure of the reading, every depth walked is kept
            preferred += [d for d in range(1, len(layers)) if d not in preferred]
        paths = [p for d in preferred for p in layer_paths(layers, d)]
        return paths, walk, preferred

    def _directed(self, edges, reader: WalkReader | None, anchor: int, depth: int, trace: dict):
        """The hop's candidate edges less those walking a relation against the direction the question reads
        (`kgr.methods.direction`), for each relation the frontier has edges of both ways; the readings go to the
        trace."""
        rids, near, far = edges
        if reader is None or not len(rids):
            return edges
        store = self.store
        forward = store.src[rids] == near
        relations = store.relation_ids[rids]
        keep = np.ones(len(rids), dtype=bool)
        for relation in np.unique(relations).tolist():
            along = relations == relation
            label = store.relation_labels[relation]
            keep[along], direction, word = reader.keep(label, forward[along])
            if direction != EITHER:
                trace.setdefault("directions", []).append(
                    {"anchor": store.names[anchor], "depth": depth, "relation": label, "word": word,
                     "direction": name(direction)})
        return rids[keep], near[keep], far[keep]

    def _conjoin(self, query: Query, paths: list[Path], alternatives: bool) -> tuple[list[Path], set[int] | None]:
        """With several bracketed mentions that each reached something, the paths to the entities reached from every
        mention's anchors (cut after the last such entity; all the paths when there is none) and those entities; else
        every path and None.

        Each mention is a constraint on the answer ("a player who plays at [Forward] from [Mexico]"): an entity only
        one mention reaches answers another question. An entity counts wherever it lies on a path, since a walk from
        one mention may pass the answer on its way to the other ("born in [Lyon] and founded [Ember Solar]": Ember
        Solar -> Eva Lund -> Lyon). A mention whose anchors reached nothing constrains nothing, nor do mentions the
        question offers as `alternatives` ("who was born first, [A] or [B]?" asks about each).
        """
        mentions = list(dict.fromkeys(query.mentions))
        if not self.settings.conjunctive or alternatives or len(mentions) < 2 or not paths:
            return paths, None
        floor = self.context.config.anchors.min_similarity
        groups = [set(self.store.match_mention(mention, floor).eids) for mention in mentions]
        anchors = set().union(*groups)
        reached = [{e for p in paths if p.eids[0] in group for e in p.eids[1:]} - anchors for group in groups]
        reached = [entities for entities in reached if entities]
        if len(reached) < 2:
            return paths, None
        shared = set.intersection(*reached)
        if not shared:
            return paths, shared
        cut: dict[tuple[int, ...], Path] = {}
        for path in paths:
            if shared.isdisjoint(path.eids):  # the anchor, first, is never shared
                continue
            last = max(i for i, e in enumerate(path.eids) if e in shared)
            if path.rids[:last] not in cut:
                cut[path.rids[:last]] = Path(path.rids[:last], path.eids[:last + 1], path.sims[:last])
        return list(cut.values()), shared

    def _candidates(self, anchor: int, depth: int, type_id: int, frontier: np.ndarray):
        """Relationships searched at this hop: those extending the frontier toward N_{h,t}(anchor), or with
        `search_within` toward N_{1..h,t}(anchor) ("the languages of the films that share an actor with [X]" may
        include X's own language, one hop from X)."""
        if self.settings.constrained_search:
            return self.reach.extending_edges(anchor, depth, type_id, frontier, self.settings.search_within)
        rids = np.arange(len(self.store.src), dtype=np.int64)  # the "no constrained search" ablation
        in_frontier = np.isin(self.store.src, frontier)
        near = np.where(in_frontier, self.store.src, self.store.dst)
        far = np.where(in_frontier, self.store.dst, self.store.src)
        return rids, near, far

    def _select(self, rids: np.ndarray, hop_query: str, near: np.ndarray,
                depth: int = 2) -> tuple[np.ndarray, np.ndarray, bool]:
        """Indices of the top-ks candidates (per frontier entity `near`, or per hop; `anchor_top` at the first hop)
        above the minimum similarity to the hop's query (at the first hop, the best of them when none is), all
        similarities, and whether the hop kept relationships under the floor (none reached it).

        A relationship's similarity is that of its text (`head relation tail`), blended with that of its relation
        label by `label_weight`: entity names dominate the text's embedding, so a relationship of exactly the asked
        relation can otherwise fall under the floor just because its entities have long or foreign names.
        """
        settings = self.settings
        query_vector = self._embed(hop_query)
        sims = self.store.relationship_vectors[rids] @ query_vector
        eligible = np.ones(len(rids), dtype=bool)
        if (settings.label_margin > 0 or settings.label_weight > 0) and len(rids):
            label_sims = (self._label_vectors @ query_vector)[self.store.relation_ids[rids]]
            if settings.label_weight > 0:
                sims = (1 - settings.label_weight) * sims + settings.label_weight * label_sims
            if settings.label_margin > 0:
                # Keep only relationships whose relation label is (nearly) the best match for the query's wording.
                eligible = label_sims >= label_sims.max() - settings.label_margin
                if settings.search_per_entity and len(near):
                    # ... and of a frontier entity with none, its own best (one link recorded by two labels: a
                    # restaurant's `dbo:headChef`, another's chef `ex:worksAt` it)
                    groups, at = np.unique(near, return_inverse=True)
                    has = np.zeros(len(groups), dtype=bool)
                    np.logical_or.at(has, at, eligible)
                    own = np.full(len(groups), -np.inf, dtype=label_sims.dtype)
                    np.maximum.at(own, at, label_sims)
                    eligible |= ~has[at] & (label_sims >= own[at] - settings.label_margin)
        masked = np.where(eligible, sims, -np.inf)
        top = settings.anchor_top if depth == 1 and settings.anchor_top else settings.search_top
        if settings.search_per_entity:
            if depth > 1 and settings.hop_breadth and len(near):
                # a narrow frontier's share of the hop: a hub reached through one entity keeps its edges of the asked
                # relation ("other books in the language of [X]": 99 of English's), a wide frontier still ks each
                top = max(top, settings.hop_breadth // len(np.unique(near)))
            best = top_k_per_group(masked, near, top)
        else:
            best = top_k(masked, top)
        floor = settings.min_similarity
        if settings.relative_margin > 0 and len(best):
            floor = max(floor, float(sims[best[0]]) - settings.relative_margin)
        kept = best[masked[best] >= floor]
        if not len(kept) and len(best):
            # relationships of the asked relation differ only by their entities' names, which the question does not
            # give: when none reaches the floor, the best of them still extend the walk the policy chose (at 10x, 22
            # of 200 first hops kept none of an author's `writes` edges, "X writes <title>" 0.2-0.3 from "writes
            # paper"; with a user's schema the query names the type too, "depends on package", and "wisp-uuid
            # depends_on sable-crypto" is 0.18 from it: dev-packages-schema 0.848 -> 0.873)
            return best[np.isfinite(masked[best])], sims, True
        return kept, sims, False

    @cached_property
    def _type_names(self) -> dict[str, list[str]]:
        """Per type, the relation labels naming its members and the classes they are stated to be of
        (`GraphStore.type_naming_labels`, `type_naming_classes`), for the record."""
        return {name: labels + classes for name, labels, classes in
                zip(self.store.type_names, self.store.type_naming_labels, self.store.type_naming_classes)}

    @cached_property
    def _typed_labels(self) -> frozenset[str]:
        """The labels read with their type segment (`kgr.graph.typed_labels`), as the hops' queries name them."""
        return typed_labels(self.store.relation_labels)

    @cached_property
    def _label_vectors(self) -> np.ndarray:
        texts = [label_words(label, label in self._typed_labels) for label in self.store.relation_labels]
        return self.store.phrases.vectors(texts, "list", self.store.encoder.encode)

    def _extend(self, layer: PathLayer, rids, near, far, sims) -> PathLayer:
        """The paths one hop longer through the picked relationships (each one extends every path ending at its near
        entity), best first, at most 4 x max(search_top, picked)."""
        by_end = np.argsort(layer.eids, kind="stable")  # the paths grouped by end entity, each group best first
        first = np.searchsorted(layer.eids[by_end], near, "left")
        counts = np.searchsorted(layer.eids[by_end], near, "right") - first
        edge = np.repeat(np.arange(len(rids)), counts)  # the (relationship, path) pairs, relationship-major
        parent = by_end[np.arange(len(edge)) - np.repeat(np.cumsum(counts) - counts - first, counts)]
        # records show 4 decimals; paths rank by them. Exactly Python's round(): a float32 times 10**4 is exact in
        # float64, so rint sees the true decimal, and the quotient is the double nearest the rounded decimal
        rounded = np.round(np.asarray(sims, dtype=np.float64), 4)
        scores = layer.scores[parent] + rounded[edge]  # summed left to right, as Path.score sums a path's
        keep = np.argsort(-scores, kind="stable")[:4 * max(self.settings.search_top, len(rids))]
        edge = edge[keep]
        return PathLayer(parent[keep], rids[edge].astype(np.int64), far[edge].astype(np.int64), rounded[edge],
                         scores[keep])

    def _next_options(self, anchor: int, depth: int, frontier: np.ndarray):
        """Types at the next hop that the frontier actually reaches, with the relationships leading there."""
        options, option_edges = [], []
        grouped = self.reach.edges_by_type(anchor, depth, frontier, self.settings.search_within)
        for type_id in sorted(grouped):
            rids, near, far = grouped[type_id]
            options.append(TrajectoryOption(self.reach.type_names[type_id], len(np.unique(far)), self._relations(rids)))
            option_edges.append((rids, near, far))
        return options, option_edges

    def _embed(self, text: str) -> np.ndarray:
        return self._vectors([text])[0]

    def _describe(self, path: Path) -> dict[str, Any]:
        names = self.store.names
        return {"entities": [names[e] for e in path.eids], "relations": [self.store.relation_of(r) for r in path.rids],
                "directions": [self.store.direction(r, e) for r, e in zip(path.rids, path.eids)],
                "similarities": list(path.sims), "score": round(path.score, 4), "depth": len(path.rids)}
