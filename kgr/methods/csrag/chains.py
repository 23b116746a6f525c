"""CS-RAG's constraints along the chain the offline policy walks over the graph: one reading of a question for both
methods.

The offline policy (`kgr.methods.offline.policy`) reads a question against the graph's type schema as chains of
(relation, type) steps, and DotRAG walks the best of them hop by hop. The planner asks it the same, over the edges
around each mention's entities: the first step it ranks (`rank_trajectories`), then, from the entities that step
reaches, whether to go on and where (`review`), until it stops or reaches `csrag.max_hops`. Each step becomes one
constraint `(term, relation, ?type)`, the next starting from its variable; the first step's variants are the other
first relations to the same type the policy cannot tell from it (`tied_first_queries`: "[X]'s parents", `father` and
`mother`). Later hops take no variants: a near-tied continuation the policy would also walk adds another relation's
edges to a pool the reranker reads by the whole question, and they outrank the asked ones ("[X]'s son-in-law": a
daughter's `mother` before her `spouse`). Such a continuation (`Continue.also`) is walked on as a chain of its own
instead, after the others, recall first ("who manages the club that [X] captains": `memberOf` to the league and, tied
with it, `coach`).

With several mentions, a walk that reaches another mention's entities after its first step meets that mention
there (`meeting_points`): "a player who plays at [Forward] at the club [Tigres]" walks from Forward along
`plays_position`, then `plays_in_club` to Tigres, so the plan is (Forward, plays position, ?player) and (Tigres, plays
in club, ?player), the answer bound by both (`propagate` intersects them); the other mention is not walked alone.

Walked over the graph, not the schema: a schema chain may take a step that only multi-typed entities have ("the
movies starred by the actors in [X]": actors who also write have `written_by` into movies, a shorter chain than the
way through their films), which the entities actually reached do not.

The walk plans a question alone only when the policy is sure of it; the planner over the relation labels
(`kgr.methods.csrag.plan`) plans the others (`ChainPlanner.plan` says why, and the plan's reason shows it):
- the policy is unsure (`OfflinePolicy.confident`: no question word names a step the walk could reach, or its best
  chain does not explain the word nearest the mention): the labels' constraints come first and the walk's follow,
  then the walks of the policy's next `csrag.hedge_walks` - 1 first steps, recall first, as DotRAG hedges over
  several trajectories there (`kgr.methods.csrag.planner.hedged`); where it is sure, the walks of the first steps
  near-tied with the best follow it (`OfflinePolicy.near_ties`, as DotRAG follows them);
- a mention matching no entity, or entities without relationships (nothing to walk; the label planner still plans
  the asked relation, for textual recovery);
- the walk reaches entities without further relationships where the graph goes on from the relation's ends it
  reached, in its direction, elsewhere (`PlanIndex.follows`: a mother without a birth date, not a date, nor a job
  reached along `occupation`, whose other end, people, goes on), or the question names word for word a relation
  no step of the walk was offered ("the spouse of [X]" for an X with a father only): the graph may have lost the asked
  edge, and the walk would settle for what is left.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kgr.config import OfflineConfig
from kgr.embed import TextVectors
from kgr.lexicon import content_tokens, mark_names
from kgr.methods.csrag.plan import Constraint, Plan, variable_slug
from kgr.methods.direction import EITHER, WalkReader, name
from kgr.methods.graph_index import PlanIndex, of_type
from kgr.methods.offline.decisions import AnchorOption, Continue, HopSummary, TrajectoryOption
from kgr.methods.offline.policy import OfflinePolicy
from kgr.reach import csr_entries

if TYPE_CHECKING:
    from kgr.config import CsragConfig
    from kgr.methods.base import Query

# a walk's step: relation, type, variants, the entities it reached, the direction it took ("": either)
WalkStep = tuple[str, str, list[str], list[int], str]


@dataclass
class WalkState:
    """Where a walk stands before its next step: the option and hop query it takes next (with its tied relations),
    the frontier, the relationships walked, the steps and their summaries so far, and its direction reader."""

    option: TrajectoryOption
    query: str
    tied: list[str]
    frontier: list[int]
    walked: np.ndarray
    steps: list[WalkStep]
    summaries: list[HopSummary]
    reader: WalkReader | None


class ChainPlanner:
    """Plans questions along the offline policy's walk over one graph (its vectors and memos kept across questions)."""

    def __init__(self, index: PlanIndex, offline: OfflineConfig, max_hops: int):
        self.index = index
        self.store = store = index.store
        self.vectors = TextVectors(store.encoder, phrases=store.phrases)
        self.policy = OfflinePolicy.for_graph(store, offline, max_hops, self.vectors)
        self._rows = {label: row for row, label in enumerate(store.relation_labels)}
        self._warm = False

    def warm(self) -> None:
        """Encode the policy's graph texts (schema steps, type words) now, kept across questions."""
        if not self._warm:
            with self.vectors.warming():
                self.policy.warm()
            self._warm = True

    def plan(self, query: "Query", settings: "CsragConfig", floor: float,
             anchored: tuple[list[str], str, list[str]]) -> tuple[Plan | None, str]:
        """The question's plan along the policy's walk from each mention and "", or why the labels should plan it: with
        the walk when the policy walked but is unsure (the walk then follows the labels' plan), with None when there is
        no walk to trust (see the module docstring); `floor` is anchors.min_similarity, `anchored` the question's
        `anchor_mentions`."""
        self.warm()
        index = self.index
        mentions, residual, warnings = anchored
        if not mentions:
            return None, "the question names no entity"
        anchors = {m: list(index.match_anchors(m, settings.anchor_matches, floor).eids) for m in mentions}
        unmatched = [m for m in mentions if not anchors[m]]
        if unmatched:
            return None, f"{unmatched[0]!r} matches no entity"
        question = query.text if query.mentions else mark_names(query.text, mentions)
        self.vectors.begin_question(self.policy.begin_question(question))
        self.policy.prepare(question, mentions)
        seen: set[str] = set()  # the labels the walks took or were offered
        unsure = ""
        walked: dict[str, list[WalkStep]] = {}
        near: dict[str, list[WalkState]] = {}  # per mention, its walk's near-tied continuations
        starts: dict[str, tuple[AnchorOption, list[TrajectoryOption], list[int], int]] = {}  # per mention, its walks
        for mention in mentions:
            eids = anchors[mention]
            options = self.options(eids, np.empty(0, dtype=np.int64))
            if not options:
                return None, f"{mention!r} has no relationships"
            anchor = AnchorOption(mention, list(dict.fromkeys(t for e in eids for t in self.store.types_of(e))), True)
            # how many walks: the best, and where the policy is unsure its next ones (`hedge_walks`), where it is sure
            # those near-tied with the best (as DotRAG follows near-tied trajectories)
            if self.policy.confident(query.id, question, anchor, options):
                count = self.policy.near_ties(query.id, question, anchor, options)
            else:
                unsure = unsure or f"the offline policy is unsure of the walk from {mention!r}"
                count = settings.hedge_walks
            starts[mention] = (anchor, options, eids, count)
            walked[mention], offered, stranded = self.walk(query.id, question, anchor, options, eids, settings,
                                                           branches=near.setdefault(mention, []))
            seen |= offered
            if stranded:
                return None, stranded
        missed = self.named_unseen(residual, seen)
        if missed:
            return None, f"the question names {missed!r}, which the walk was never offered"
        constraints: list[Constraint] = []
        names: dict[str, int] = {}
        walks, answer = [], None
        meetings = meeting_points(mentions, anchors, walked)
        for mention in mentions:
            if mention not in walked:
                continue
            steps = walked.pop(mention)
            met = meetings.get(mention)
            if met is None:
                self.chain(constraints, names, mention, steps, settings.variants)
                walks.append(f"{mention}: {describe(steps)}")
                continue
            other, at = met  # the other mention is not walked alone: it constrains the variable before the step
            walked.pop(other, None)
            head = self.chain(constraints, names, mention, steps[:at], settings.variants)
            label = index.label_words[self._rows[steps[at][0]]]
            constraints.append(Constraint(other, label, head, [label]))
            answer = answer or head  # bound by both mentions: the question's answer
            walks.append(f"{mention}: {describe(steps[:at + 1])} meets {other}")
        answer = answer or constraints[-1].tail
        for mention, (anchor, options, eids, count) in starts.items():  # recall first: the next-ranked first steps
            for rank in range(1, count):
                steps = self.walk(query.id, question, anchor, options, eids, settings, rank)[0]
                if steps:
                    self.chain(constraints, names, mention, steps)
                    walks.append(f"{mention} (its next walk {rank}): " + describe(steps))
            for state in near[mention]:  # and the continuations near-tied with the walk's
                # as far as each goes: an extra chain, recall first, even where it strands (the main walk did not)
                self.walk_on(query.id, question, anchor, state, set(), settings)
                self.chain(constraints, names, mention, state.steps)
                walks.append(f"{mention} (a near-tied continuation): " + describe(state.steps))
        plan = Plan(query.plain, constraints, answer=answer, source="offline",
                    reason="walked by the offline policy: " + "; ".join(walks), warnings=list(warnings))
        return plan, unsure

    def chain(self, constraints: list[Constraint], names: dict[str, int], mention: str,
              steps: list[WalkStep], variants: int = 1) -> str:
        """Append one constraint per step of a walk from `mention`, each from the last one's variable (named by its
        type, numbered apart by `names`), with up to `variants` phrasings; return the last variable."""
        index, head = self.index, mention
        for relation, type_name, tied, _, direction in steps:
            word = variable_slug(type_name)
            names[word] = names.get(word, 0) + 1
            variable = f"?{word}{names[word]}"
            phrasings = [index.label_words[self._rows[r]] for r in dict.fromkeys([relation, *tied])]
            constraints.append(Constraint(head, phrasings[0], variable, phrasings[:max(1, variants)], direction))
            head = variable
        return head

    def walk(self, qid: str, question: str, anchor: AnchorOption, options: list[TrajectoryOption], eids: list[int],
             settings: "CsragConfig", rank: int = 0,
             branches: list[WalkState] | None = None) -> tuple[list[WalkStep], set[str], str]:
        """(relation, type, variants, entities reached) per step of the policy's walk from `eids` (from its first step
        ranked `rank`, counted from 0; none past the last), the labels it was offered on the way, and why the walk
        cannot tell where it ends ("": it can). Into `branches` go the walks' states at each continuation the policy
        found near-tied with the one it took (`Continue.also`), for `walk_on`."""
        policy = self.policy
        order, query = policy.rank_trajectories(qid, question, anchor, options)
        if rank >= len(order):
            return [], set(), ""
        option = options[order[rank]]
        if rank:
            query = policy.step_query(option.relations[0], option.type)
        tied = [] if rank else [self.relation_of(q, option)
                                for q in policy.tied_first_queries(qid, question, anchor, options)]
        reader = WalkReader(question, anchor.name, self.index.links_siblings) if settings.read_direction else None
        state = WalkState(option, query, tied, list(eids), np.empty(0, dtype=np.int64), [], [], reader)
        offered = {r for o in options for r in o.relations}
        stranded = self.walk_on(qid, question, anchor, state, offered, settings, branches)
        return state.steps, offered, stranded

    def walk_on(self, qid: str, question: str, anchor: AnchorOption, state: WalkState, offered: set[str],
                settings: "CsragConfig", branches: list[WalkState] | None = None) -> str:
        """Walk from `state` (its next step taken, the policy deciding each further one) until the policy stops, in
        place; the labels offered go into `offered`, the states at near-tied continuations into `branches`. Returns
        why the walk cannot tell where it ends ("": it can)."""
        policy = self.policy
        option, query, tied, frontier, walked = state.option, state.query, state.tied, state.frontier, state.walked
        steps, walk, reader = state.steps, state.summaries, state.reader
        while True:
            relation = self.relation_of(query, option)
            frontier, walked, ends, direction = self.follow(frontier, relation, option.type, walked, reader)
            steps.append((relation, option.type, tied, frontier, direction))
            walk.append(HopSummary(len(walk) + 1, option.type, query, relation, len(frontier),
                                   called=self.index.called(frontier)))
            if len(steps) >= policy.max_hops:
                break
            options = self.options(frontier, walked)
            offered.update(r for o in options for r in o.relations)
            if not options:
                if self.goes_on(relation, ends, settings):
                    return f"the entities {relation!r} reaches have no further relationships, " \
                           "though the graph goes on from it elsewhere"
                break
            step = policy.review(qid, question, anchor, walk, options, policy.max_hops)
            if not isinstance(step, Continue):
                break
            if branches is not None:  # as DotRAG walks near-tied continuations beside the best
                branches.extend(WalkState(options[at], near, [], list(frontier), walked.copy(), list(steps), list(walk),
                                          copy.deepcopy(reader)) for at, near in step.also)
            option, query, tied = options[step.option], step.query, []
        return ""

    def relation_of(self, query: str, option: TrajectoryOption) -> str:
        """The relation of `option` the policy's hop query names (it writes one query per step: `step_query`)."""
        return next(r for r in option.relations if self.policy.step_query(r, option.type) == query)

    def options(self, eids: list[int], walked: np.ndarray) -> list[TrajectoryOption]:
        """The types the relationships around `eids` (but the `walked` ones) reach, each with their relations, the
        most frequent first."""
        store = self.store
        rids, _, far = self.index.incident(eids)
        fresh = ~np.isin(rids, walked)
        rids, far = rids[fresh], far[fresh]
        entries, counts = csr_entries(store.type_indptr, far)  # every (relationship, type of its far end)
        types = store.type_ids[entries].astype(np.int64)
        relations = np.repeat(store.relation_ids[rids], counts).astype(np.int64)
        pairs, tally = np.unique(np.stack([types, relations], axis=1), axis=0, return_counts=True) if len(types) \
            else (np.empty((0, 2), dtype=np.int64), np.empty(0, dtype=np.int64))
        found = []
        for type_id in np.unique(pairs[:, 0]).tolist():
            mine = np.flatnonzero(pairs[:, 0] == type_id)
            ranked = mine[np.argsort(-tally[mine], kind="stable")]
            found.append(TrajectoryOption(store.type_names[type_id], int(tally[mine].sum()),
                                          [store.relation_labels[int(pairs[i, 1])] for i in ranked]))
        return found

    def follow(self, eids: list[int], relation: str, type_name: str, walked: np.ndarray,
               reader: WalkReader | None = None) -> tuple[list[int], np.ndarray, tuple[bool, bool], str]:
        """The entities of `type_name` the unwalked `relation` edges around `eids` reach (in edge order), the walked
        edges with those, whether they reached the edges' tails (walked forward) and their heads (backward), and the
        direction `reader` reads where they go both ways ("": either; the edges against it are not walked)."""
        store = self.store
        rids, near, far = self.index.incident(eids)
        along = (store.relation_ids[rids] == self._rows[relation]) & ~np.isin(rids, walked)
        rids, near, far = rids[along], near[along], far[along]
        typed = of_type(store, far, store.type_names.index(type_name))
        rids, near, far = rids[typed], near[typed], far[typed]
        direction = EITHER
        if reader is not None:
            kept, direction, _ = reader.keep(relation, store.src[rids] == near)
            rids, far = rids[kept], far[kept]
            reader.take(relation)
        ends = (bool((far == store.dst[rids]).any()), bool((far == store.src[rids]).any()))
        return list(dict.fromkeys(far.tolist())), np.concatenate([walked, rids]), ends, name(direction)

    def goes_on(self, relation: str, ends: tuple[bool, bool], settings: "CsragConfig") -> bool:
        """Whether the graph goes on from `relation`'s ends the walk reached (`ends`: its tails, its heads) along
        another label somewhere, in the walk's direction (`PlanIndex.follows`): a frontier without relationships is
        then a damaged graph's, not a leaf (a mother without a birth date, not a date; a person's occupation, not the
        person whose mother is recorded elsewhere)."""
        row = self._rows[relation]
        follows = self.index.follows(settings.follow_min_edges, settings.follow_min_share)
        return any(bool(matrix[row].any()) for matrix, reached in zip(follows, ends) if reached)

    def named_unseen(self, residual: str, seen: set[str]) -> str | None:
        """A relation label (in words) the question names word for word that no step of the walks was offered (`seen`:
        labels), if any: the graph may have lost the asked edge, and the walk would settle for what is left. A named
        label the walk was offered and passed by is the policy's choice ("which country does [X] play in": the club's
        `is_in_country_inverse`, not `is_in_country`)."""
        named = np.flatnonzero(self.index.labels_named_by(content_tokens(residual)))
        missed = [self.index.label_words[row] for row in named.tolist() if self.store.relation_labels[row] not in seen]
        return missed[0] if missed else None


def meeting_points(mentions: list[str], anchors: dict[str, list[int]],
                   walks: dict[str, list[WalkStep]]) -> dict[str, tuple[str, int]]:
    """Per mention whose walk reaches another mention's entities after its first step, that mention and the step
    ("a player who plays at [Forward] at the club [Tigres]": the walk from Forward reaches Tigres along
    `plays_in_club`): the two mentions constrain the entity before that step together, the question's answer. Each
    mention meets at most one other, the earlier mention's walk first."""
    meetings: dict[str, tuple[str, int]] = {}
    joined: set[str] = set()
    for mention in mentions:
        if mention in joined:
            continue
        for other in mentions:
            if other == mention or other in joined:
                continue
            targets = set(anchors[other])
            at = next((k for k, step in enumerate(walks[mention]) if k > 0 and targets & set(step[3])), None)
            if at is not None:
                meetings[mention] = (other, at)
                joined |= {mention, other}
                break
    return meetings


def describe(steps: list[WalkStep]) -> str:
    """A walk in a plan's reason: each step's relation and type."""
    return " -> ".join(f"{relation} ({kind})" for relation, kind, *_ in steps)
