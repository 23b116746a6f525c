"""The offline policy: DotRAG's decisions, and the walk CS-RAG plans along, made deterministically from embeddings,
with no LLM.

It knows nothing about any dataset. Everything comes from the question and the graph: the relation labels and
entity types offered at each step, and the graph's type-level schema (which relation joins which types) for
looking ahead. A candidate *chain* is a sequence of steps (relation, type) leaving the anchor. Its score is how
well its steps explain the question's content words, with each weight a field of `kgr.config.OfflineConfig` (whose
comments give its reason), summed in this order (`ChainScorer`: one method per term, `ChainScorer.TERMS`):

    score = sum over words w of max over steps i of sim(w, step i)                            (explained)
            - step_cost * len(chain)
            - unsupported * [a step has no word of its own]            (bridge_cost if each such step is a bridge)
            - order_cost * [order inversions]
            - nearest_cost * [the placed word nearest the mention is not the first step's]
            + (sharing_bonus with a sharing cue, else return_prior) * [the chain goes out and back]
            + typicality * sum over steps of log-typicality(step)
            + answer_type * [the word saying what kind of thing the answer is names the last step's type]

sim(w, step) is the larger cosine between the word and the step's relation words or type words. A word that names a
label word several relations share ("play" ~ the `plays` of `plays_in_club`, `plays_position`, `plays_for_country`;
cosine >= `shared_word_similarity`) says nothing about which of them is asked, so it fits each of their steps as well
as the best of them, and the other words decide ("which team does [X] play for": club). Words that only
describe the anchor itself (right before its mention or as the verb of "... by [X]", or after it within
`appositive_distance`, and similar to one of its types, as in "the film [X]"; not a verb two words off, as in "who
heads the [X]"; not a noun joined to it by "of", as in "director of [X]", which asks for X's director) are left out
of the sum, and so are relative wh-words (any after the first: "the hospital where [X] works"); a role word names
the anchor's way out, the most frequent relation leaving the type it describes ("the director [X]":
directed by), so a first step along that relation counts as supported ("who are the actors of the director [X]"
is two steps, though no other word names the first).
A step has a word of its own when each step of the chain can be given a different word that it explains best or
nearly as well (within `support_margin`, at a cosine of at least `nearest_explained`; not the answer-kind words, not
the same label walked again): the encoder's small preferences are noise ("which writers has [X] published":
"published" fits `author` 0.60 and `publisher` 0.57), but one word never stands for two steps. A step no word names
is a detour, unless it is a bridge: the next step's relation leaves none of the types the chain has stood at, so
the question could only name the next ("which country is [X] in" for a college with a city; "[X]'s publishers" for
a writer, whose books have them), or the last step arriving at the kind a noun of the question names ("what symptoms
come with the diseases [X] treats": no word fits `presents`, but its objects are the symptoms); a bridge costs
`bridge_cost` instead of `unsupported`.
English nests relations outward from the mention ("the directors of the films written by [X]"), so a step nearer
the anchor should explain words nearer the mention: the mean distance of each step's words should not be smaller
than the previous step's, and each inversion costs `order_cost`. Only words that prefer their step by
`order_margin` over every other step place it (`who` fits an actor and a movie almost equally and says nothing
about order). The mean can hide an inverted pair ("which person wrote the films acted by [X]": "acted" is next to
the mention, so acting is the first step), so the placed word nearest the mention must also belong to the first step,
or the chain pays `nearest_cost`.
Words that say the answer shares a neighbour with the anchor ("co-starred", "share", "also", "same", ...) are
English, not any graph's: when one is present, a chain that goes out and comes back to a type through the same
relation (actor -> movie -> actor) earns `sharing_bonus`, and the cue counts as what both steps of that pair explain.
Without a sharing cue an out-and-back chain still earns the small `return_prior`, which breaks ties toward it.
Log-typicality (kgr.schema.step_priors) is 0 for a relation's dominant reading and negative for readings
that only exist because entities carry several types.
The question's first wh-word says what kind of thing the answer is ("which country", "what year", "when"); a type's
members say what it holds where its name cannot (a schema-less `located_in:object` of countries), and so do the
relation labels naming them, to a noun (`adjacent station`: "which stations"): the word names the types it is within
`answer_type_margin` of its best match to, if every other type trails by `answer_type_clarity` (`TypeLooks`), and a
chain ending in such a type earns `answer_type`. A wh-word asks for the end a label names: it fits no step arriving at
the subject end of a label naming its object ("who" fits `author`, not the step from an author to his books;
`names_its_object`, `kgr.schema.subject_arrivals`), and it places only a chain's last step in the order terms. A noun
saying the answer's kind explains a chain ending at a type it names; in one ending elsewhere it counts in the sum only
where it fits its step itself (at `nearest_explained`: "country" 0.36 from `produced` is no step of "what country is
the producer of [X] from").
The best chain decides the trajectory ranking, each continuation and where to stop; `confident` says whether any
question word names a reachable step at all, whether the best chain reaches the kind a noun of the question clearly
names where another chain does ("which cities is [X] taught in", `taught by` fitting "taught"), and whether it explains
the word nearest the mention or is the one step into the kind the question names (else DotRAG hedges over several
trajectories). Near ties are walked beside the best chain: other first steps to the leading type within `tie_margin`
(and whose relations' words fit as well) as pairs of their own (`tied_first_queries`), and near-tied continuations, of
any type, in each review ("[X]'s parents": `father` and `mother`). A review that would stop walks on, one hop per
possessed noun ("[X]'s grandparents") the chain up to the stop leaves unexplained, along the continuation that fits the
noun best, and keeps the stop ranked first: English names one relation per possessed noun, whatever the encoder makes of
it. It names one per generation too: a generational noun is read as its kin noun said once per generation
("grandparents": parents, parents; "grandmother": parent, mother; `lexicon.generations`), and a word said again is
explained by the same step walked again however little it is like it ("parents" is 0.45 from `child of`). A relative
further off is read as the links it names ("aunt": parent, sibling; "father-in-law": spouse, father;
`lexicon.kin_nouns`), each explained by a step of its own, in order outward from the anchor (`_steps_in_order`); and a
kin word for one member of a relation's group fits a step as well as its generic kin noun does ("sons" as "child": 0.71
from `children`, where "sons" is 0.36; `lexicon.kin_class`). Two different words for one relation name two steps along
it when the chain goes on from the second ("the release dates of the films directed by the [X] director": out to the
director, back to his films, on to their dates; `_spread_relation_words`): where types have no words (a graph without a
schema), nothing else names the way back.

Chains are scored many at a time as rows of step numbers; that numbering and the memos that make it fast live in
kgr.methods.offline.chain_cache and change no score.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from itertools import combinations, product
from typing import Callable, Iterable, Sequence

import numpy as np

from kgr.config import OfflineConfig
from kgr.graph import inverse_base, relation_words, subject_kind, typed_labels
from kgr.lexicon import (ARTICLE_NOUN_MENTION, BY_MENTION, CUE_WORDS, DATE_QUESTION_WORD, MENTION, OF_MENTION,
                         OFFLINE_STOP_WORDS, QUESTION_WORDS, SIBLING_LINKS, answer_kind_words, around_mention,
                         hyphenated_words, is_sibling_word, kin_chains, kin_class, possessed_words, question_words,
                         sharing_cue, siblings_as_links, without_relative_wh)
from kgr.methods.direction import label_form
from kgr.methods.offline.chain_cache import (CompiledGroups, RecentScorers, StepNumbers, TailMemo, fanned, stacked,
                                            tail_rows)
from kgr.methods.offline.decisions import AnchorOption, Continue, HopSummary, Policy, Step, Stop, TrajectoryOption
from kgr.ranking import named_by_similarity, named_types
from kgr.schema import step_counts, step_priors, subject_arrivals, type_schema
from kgr.store import GraphStore

Chain = tuple[tuple[str, str], ...]  # ((relation, type), ...) from the anchor outward


class OfflinePolicy(Policy):
    """Deterministic decisions from embeddings of the question, relation labels and type names."""

    name = "offline"

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray], schema: dict[str, list[tuple[str, str]]],
                 max_hops: int = 3, settings: OfflineConfig | None = None,
                 priors: dict[tuple[str, str, str], float] | None = None,
                 type_centroids: tuple[list[str], np.ndarray] | None = None,
                 type_labels: list[list[str]] | None = None, subject_steps: frozenset[tuple[str, str]] = frozenset(),
                 type_classes: list[list[str]] | None = None, date_types: np.ndarray | None = None):
        """`type_centroids`: type names and their members' mean entity vectors (`GraphStore.type_centroids`), and
        `type_labels` the relation labels naming each type's members (`GraphStore.type_naming_labels`), which the
        `answer_type` term compares with the words naming the answer's kind (`TypeLooks`; None: the term is off),
        as it does `type_classes`, the classes each type's members are stated to be of
        (`GraphStore.type_naming_classes`), and `date_types`, whether each type's members spell dates
        (`GraphStore.date_types`);
        `subject_steps` the steps arriving at their relation's subject end (`kgr.schema.subject_arrivals`)."""
        self._embed = embed
        self._subject_steps = subject_steps
        relations = {r for steps in schema.values() for r, _ in steps}
        # the Freebase-style labels read with their type segment (`kgr.graph.typed_labels`; none on most graphs)
        self.typed_labels = typed_labels(relations)
        # ... of which those whose property alone names no kind of the graph ("genre"; not the "airline" of
        # `__aviation__pilot__airline`, which the `__aviation__airline__...` labels' subjects are): a question naming
        # one by its property ("what is the genre of [X]") names it clearly (`confident`)
        kinds = {subject_kind(r) for r in self.typed_labels}
        self._bare_labels = frozenset(r for r in self.typed_labels if property_words(r) not in kinds)
        self._looks = None if type_centroids is None else TypeLooks.of(*type_centroids, type_labels, self.typed_labels,
                                                                    type_classes, date_types)
        self._priors = priors or {}
        # speed machinery (kgr.methods.offline.chain_cache): it changes no score
        self._steps = StepNumbers()  # every step a scored chain has taken, numbered
        self._groups = CompiledGroups(partial(compile_chains, numbers=self._steps, priors=self._priors))
        self._tails: TailMemo = {}  # continuations along the whole schema, kept across questions
        self._recent: RecentScorers[ChainScorer] = RecentScorers()
        self.schema = schema
        self._schema_steps = {t: set(steps) for t, steps in schema.items()}
        # label words several relations share, each with the relations using it ("plays": plays_in_club, ...)
        self._shared = shared_label_words(relations, self.typed_labels)
        self._shared_vectors: np.ndarray | None = None
        self.max_hops = max_hops
        self.settings = settings or OfflineConfig()
        self._vectors: dict[str, np.ndarray] = {}
        self._graph_texts: frozenset[str] = frozenset()  # the texts `warm` encoded: kept across questions
        self._crowded: tuple | None = None
        self._sibling_label: bool | None = None  # `_labels_siblings`, once per graph
        self._last_option_scores: tuple | None = None  # (scorer, options, result) of the last `_option_scores`

    @classmethod
    def for_graph(cls, store: GraphStore, settings: OfflineConfig, max_hops: int,
                  embed: Callable[[Sequence[str]], np.ndarray], tally: Counter | None = None) -> "OfflinePolicy":
        """The policy over a graph's type schema and step priors (`kgr.schema`, from the step `tally` when given),
        encoding with `embed`."""
        tally = step_counts(store) if tally is None else tally
        return cls(embed, type_schema(store, settings.relation_share, tally), max_hops=max_hops, settings=settings,
                   priors=step_priors(tally),
                   type_centroids=(store.type_names, store.type_centroids) if settings.answer_type else None,
                   type_labels=store.type_naming_labels if settings.answer_type else None,
                   type_classes=store.type_naming_classes if settings.answer_type else None,
                   date_types=store.date_types if settings.answer_type else None,
                   subject_steps=frozenset(step for step in subject_arrivals(store) if names_its_object(step[0])))

    reads_previews = False  # decisions come from the question's words and the schema, not from example triples

    # -- decisions ---------------------------------------------------------------------------------------------
    def rank_anchors(self, qid: str, question: str, anchors: list[AnchorOption]) -> list[int]:
        """Named anchors first, longer (more specific) names first, then by similarity to the question."""
        return sorted(range(len(anchors)),
                      key=lambda i: (not anchors[i].named, -len(anchors[i].name), -(anchors[i].similarity or 0.0), i))

    def reads_similarity(self, anchors: list[AnchorOption]) -> bool:
        """Only to order anchors that tie on being named and on name length."""
        keys = [(a.named, len(a.name)) for a in anchors]
        return len(set(keys)) < len(keys)

    def rank_trajectories(self, qid: str, question: str, anchor: AnchorOption,
                          options: list[TrajectoryOption]) -> tuple[list[int], str]:
        if not options:
            return [], ""
        ids, scores, owner, best = self._option_scores(question, anchor, options)
        order = sorted(range(len(options)), key=lambda i: (-best[i], i))
        candidates = np.flatnonzero(owner == order[0])
        relation, type_name = self._steps.steps[ids[candidates[int(np.argmax(scores[candidates]))], 0]]
        return order, self.step_query(relation, type_name)

    def near_ties(self, qid: str, question: str, anchor: AnchorOption, options: list[TrajectoryOption]) -> int:
        """How many trajectories' best chains score within `tie_margin` of the best one's: recall first when the
        question does not settle the hop count or the relation ("the library that [X] builds on": a library's
        language, or X's own), as a review follows a near-tied stop and continuation."""
        if not options or self.settings.tie_margin <= 0:
            return 1
        best = self._option_scores(question, anchor, options)[3]
        return max(int(within_margin(best, best.max(), self.settings.tie_margin).sum()), 1)

    def tied_first_queries(self, qid: str, question: str, anchor: AnchorOption,
                           options: list[TrajectoryOption]) -> list[str]:
        """The first steps to the leading trajectory's type, other than the chosen one, whose best chains score within
        `tie_margin` of the best chain (as a review walks near-tied continuations) and whose relation's own words fit
        the question within `support_margin` of the best of them: the encoder's small preferences between two labels
        are noise ("parents": `mother` 0.68, `father` 0.66), a larger one is a choice ("what movies did [X] act in":
        "act" names no step better than the `movie` type does, so the chains tie exactly, but `starred actors` fits it
        0.36 and `directed by` 0.28)."""
        if not options or self.settings.tie_margin <= 0:
            return []
        ids, scores, owner, best = self._option_scores(question, anchor, options)
        leading = int(np.argmax(best))
        near = np.flatnonzero((owner == leading) & within_margin(scores, best[leading], self.settings.tie_margin))
        # best first, the first of equal scores first: the first step is the one `rank_trajectories` chose
        chosen, *others = dict.fromkeys(self._steps.steps[ids[i, 0]]
                                        for i in near[np.argsort(-scores[near], kind="stable")])
        scorer = self._scorer(question, anchor)
        fits = {relation: scorer.affinity(relation) for relation, _ in [chosen, *others]}
        best_fit = max(fits.values())
        return [self.step_query(relation, type_name) for relation, type_name in others
                if fits[relation] >= best_fit - self.settings.support_margin]

    def _option_scores(self, question: str, anchor: AnchorOption, options: list[TrajectoryOption]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every chain leaving the anchor through the options (step-id rows), its score, its option, and per option
        its best chain's score."""
        scorer = self._scorer(question, anchor)
        key = tuple((o.type, tuple(o.relations)) for o in options)
        last = self._last_option_scores  # ranking, confidence and near ties ask for the same chains in turn
        if last is not None and last[0] is scorer and last[1] == key:
            return last[2]
        blocks = [block for _, block in self._option_chains(options, [], anchor.types, self.max_hops - 1, scorer)]
        ids, lengths = stacked(blocks)
        scores = scorer.rows(ids, lengths)
        owner = np.repeat(np.arange(len(options)), [len(block_lengths) for _, block_lengths in blocks])
        best = np.full(len(options), -np.inf)
        np.maximum.at(best, owner, scores)
        self._last_option_scores = (scorer, key, (ids, scores, owner, best))
        return ids, scores, owner, best

    def confident(self, qid: str, question: str, anchor: AnchorOption, options: list[TrajectoryOption]) -> bool:
        """Whether some word of the question clearly names a relation the anchor's trajectories can reach (by its
        label: a type's name says where a step leads, not which relation it takes), the
        best chain reaches the kind a noun of the question clearly names where any chain does (`_misses_named_kind`),
        and it explains the word nearest the mention (`explains_nearest`) or is the one step into the kind the
        question names (`_one_step_to_named_kind`).

        Without them ("describe [X] in a few words"; "which packages require [X]" on a graph saying `depends_on`) the
        ranking is a guess, and DotRAG hedges by following several trajectories instead of one.
        """
        steps = {(r, o.type) for o in options for r in o.relations}
        scorer = self._scorer(question, anchor)
        for option in options:
            rows, _ = scorer.tails(option.type, self.max_hops - 1)
            steps |= {self._steps.steps[i] for i in np.unique(rows[rows >= 0]).tolist()}
        # sure of the relation, not of where it leads: a type's name ("which packages", "the company") may fit every
        # step into it, and a user's schema makes it fit 1.0 (dev-packages-schema 0.873 -> 0.943)
        best = scorer.best_match(sorted(steps), relations_only=True)
        if best is not None and best < self.settings.confident_similarity and \
                self._property_match(scorer, steps) < self.settings.confident_similarity:
            return False
        if self._misses_named_kind(question, anchor, options):
            return False
        return self.explains_nearest(question, anchor, options) or \
            self._one_step_to_named_kind(question, anchor, options)

    def _property_match(self, scorer: "ChainScorer", steps: set[tuple[str, str]]) -> float:
        """The highest similarity between a question word and the property alone of a typed label among `steps` whose
        property names no kind of the graph ("genre" 1.0 from `book.written_work.genre`, whose typed phrase "written
        work genre" it fits 0.69); -inf without one."""
        bare = sorted({r for r, _ in steps if r in self._bare_labels})
        if not bare or scorer.reading.vectors is None:
            return -np.inf
        return float((scorer.reading.vectors @ self._vector([property_words(r) for r in bare]).T).max())

    def _misses_named_kind(self, question: str, anchor: AnchorOption, options: list[TrajectoryOption]) -> bool:
        """Whether a noun naming the answer's kind clearly names a type some chain from the anchor reaches but the best
        chain does not ("which cities is [X] taught in": "taught" fits `taught by` 0.85, but people are no cities, and
        the courses' buildings are in some): the best chain reads the other words only. An anchor of the named kind
        stands among it already ("which company in [Oslo] is in the [software] industry": "company" 0.71 from
        `industry`, whose objects the anchor is one of)."""
        ids, scores, _, _ = self._option_scores(question, anchor, options)
        own = [self._steps.type_number(t) for t in anchor.types]
        named = self._scorer(question, anchor).named_by_kind_nouns()  # per type numbered so far: the chains', own
        if named is None or not len(scores) or named[own].any():
            return False
        arrivals = np.where(ids >= 0, named[np.array(self._steps.type)[np.maximum(ids, 0)]], False)
        return bool(arrivals.any()) and not arrivals[int(np.argmax(scores))].any()

    def _one_step_to_named_kind(self, question: str, anchor: AnchorOption, options: list[TrajectoryOption]) -> bool:
        """Whether the best chain is one step along the one relation from the anchor into the one type the answer-kind
        words name ("what license is [X] released under": `licensed_under` into `licensed_under:object`): the word
        nearest the mention may name no step ("released" fits `first released`), but nothing is left to guess."""
        ids, scores, owner, _ = self._option_scores(question, anchor, options)
        top = int(np.argmax(scores))
        leading = int(owner[top])
        # a role word naming another way out ("the packages that [X] depends on": `depends_on`) is left to guess
        role = self._scorer(question, anchor).reading.role_relation
        return (int((ids[top] >= 0).sum()) == 1 and len(options[leading].relations) == 1
                and role in (None, options[leading].relations[0])
                and self.named_kind(question, anchor, [o.type for o in options]) == leading)

    def named_kind(self, question: str, anchor: AnchorOption, type_names: list[str]) -> int | None:
        """The one type of `type_names` the answer-kind words name ("what license": `licensed_under:object`): within
        `answer_type_margin` of their best, every other trailing by `answer_type_clarity` (`named_types`, read against
        the types' words, not their members' centroids as the `answer_type` term reads); None when they name none, or
        several ("who": actors, directors and writers alike). "When" names the types whose members spell dates."""
        scorer = self._scorer(question, anchor)
        reading = scorer.reading
        if not reading.answer_words or reading.vectors is None:
            return None
        named = np.zeros(len(type_names), dtype=bool)
        live = [i for i, t in enumerate(type_names) if type_words(t)]  # a relation's subject has no words to name
        if live:
            named[live] = named_types(reading.vectors[reading.answer_words],
                                      self._type_vectors([type_names[i] for i in live]),
                                      self.settings.answer_type_margin, self.settings.answer_type_clarity).any(axis=0)
        if scorer.asks_dates(reading.answer_words).any():
            rows = self._looks.rows
            named |= np.array([t in rows and bool(self._looks.dates[rows[t]]) for t in type_names], dtype=bool)
        hits = np.flatnonzero(named)
        return int(hits[0]) if len(hits) == 1 else None

    def explains_nearest(self, question: str, anchor: AnchorOption, options: list[TrajectoryOption]) -> bool:
        """Whether the best chain explains a question word nearest the mention (not one naming the answer's kind) at
        least `nearest_explained`: that word names the walk's first step (as `nearest_cost` assumes), so when no step
        of the chain fits it, the chain is a reading of the other words only."""
        scorer = self._scorer(question, anchor)
        reading = scorer.reading
        kinds = set(reading.answer_words)
        asked = [i for i in range(len(reading.words)) if i not in kinds]
        if not options or not asked or self.settings.nearest_explained <= 0:
            return True
        ids, scores, _, _ = self._option_scores(question, anchor, options)
        row = ids[int(np.argmax(scores))]
        sims = scorer.similarities([self._steps.steps[s] for s in row[row >= 0].tolist()], relations_only=True)
        nearest = min(reading.words[i][1] for i in asked)
        return any(sims[i].max() >= self.settings.nearest_explained for i in asked if reading.words[i][1] == nearest)

    def review(self, qid: str, question: str, anchor: AnchorOption, walk: list[HopSummary],
               options: list[TrajectoryOption], max_hops: int) -> Step:
        scorer = self._scorer(question, anchor)
        done: Chain = tuple((h.relation, h.type) for h in walk)
        done_ids = [self._steps.id(step) for step in done]
        stops = self._steps.rows(done[:d] for d in range(1, len(done) + 1))  # the walk so far, stopped at each depth
        goes, moves = [], []
        if len(done) < max_hops:
            chains = self._option_chains(options, done_ids, [done[-1][1]], max_hops - len(done) - 1, scorer)
            for index, (relations, block) in enumerate(chains):
                goes.append(block)
                per_relation = len(block[1]) // len(relations)
                moves += [(index, relation) for relation in relations for _ in range(per_relation)]
        ids, lengths = stacked([stops] + goes)
        scores = scorer.rows(ids, lengths)
        best_stop = int(np.argmax(scores[:len(done)]))  # the first (shallowest) of equal scores
        stop_score, margin = scores[best_stop], self.settings.tie_margin
        if goes:
            go_scores = scores[len(done):]
            best_go = int(np.argmax(go_scores))
            go_score = go_scores[best_go]
            # recall first: a near tie continues and keeps the walk so far; near-tied options are searched too
            if go_score > stop_score or (margin > 0 and within_margin(go_score, stop_score, margin)):
                index, relation = moves[best_go]
                chosen = (index, self.step_query(relation, options[index].type))
                also: dict[tuple[int, str], None] = {}
                for k in np.argsort(-go_scores, kind="stable"):
                    other, other_relation = moves[k]
                    if margin <= 0 or not within_margin(go_scores[k], go_score, margin):
                        break
                    # another option, or another relation to the same one ("parents": `father` and `mother`)
                    also.setdefault((other, self.step_query(other_relation, options[other].type)))
                also.pop(chosen, None)
                keep = [best_stop + 1] if margin > 0 and within_margin(stop_score, go_score, margin) else []
                return Continue(*chosen, list(also), keep)
        # recall first: each possessed noun the chain up to the stop leaves unexplained may name one more hop ("[X]'s
        # grandparents" stops after one `child_of`, 0.35 from "grandparents"): the walk goes on, as many hops as there
        # are such nouns, along the continuation that fits them best, and keeps the stop, ranked first, and each depth
        unexplained = self._unexplained_possessed(scorer, done[:best_stop + 1])
        walked_on = list(range(best_stop + 1, len(done) + 1))  # the stop, then the depths walked beyond it
        if goes and len(walked_on) - 1 < len(unexplained):
            candidates = list(dict.fromkeys(moves))
            fits = scorer.similarities([(relation, options[index].type) for index, relation in candidates])
            index, relation = candidates[int(np.argmax(fits[unexplained].max(axis=0)))]
            return Continue(index, self.step_query(relation, options[index].type), [], walked_on, speculative=True)
        # recall first: a noun naming the answer's kind ("which country") names a type the stop does not end at: the
        # walk goes on toward it, keeping the stop, ranked first, and every depth walked after it ("which country is
        # [X] in" stops at X's district, `located in` explaining "country" 0.40, while the country is two hops further)
        toward = self._toward_named_kind(scorer, walk, best_stop, ids[len(done):], lengths[len(done):])
        if toward is True:
            return Stop(walked_on)
        if toward is not None:
            best_go = int(np.flatnonzero(toward)[np.argmax(scores[len(done):][toward])])
            index, relation = moves[best_go]
            return Continue(index, self.step_query(relation, options[index].type), [], walked_on, speculative=True)
        return Stop(walked_on if unexplained else [best_stop + 1])

    def _toward_named_kind(self, scorer: "ChainScorer", walk: list[HopSummary], best_stop: int, ids: np.ndarray,
                           lengths: np.ndarray) -> np.ndarray | bool | None:
        """When a noun naming the answer's kind names some type but not the best stop's: True if the walk has reached
        one since, else per continuing chain whether it ends at one (None: no such noun, the stop is at one, or no
        continuation reaches one)."""
        named = scorer.named_by_kind_nouns()
        numbers = self._steps

        def reached(hop: HopSummary) -> bool:
            """Whether the hop reached the named kind: its type is named, and unless the type is named by its own name,
            some entity it reached is called so (an inferred type may hold several kinds: districts and stations are
            both `located in ...:subject`, only stations are called `adjacent station`)."""
            if not named[numbers.type_number(hop.type)]:  # walked types are numbered in `named`
                return False
            labels = scorer.kind_label_words(hop.type)
            return labels is None or hop.called is None or not labels.isdisjoint(hop.called)

        if named is None or reached(walk[best_stop]):
            return None
        if any(reached(hop) for hop in walk[best_stop + 1:]):
            return True
        if not len(lengths):
            return None
        toward = named[np.array(numbers.type)[ids[np.arange(len(lengths)), lengths - 1]]]
        return toward if toward.any() else None

    def _unexplained_possessed(self, scorer: "ChainScorer", chain: Chain) -> list[int]:
        """The places of the question's possessed nouns ("[X]'s grandparents") that fit no step of `chain` at
        `possessed_explained`: English names one relation per possessed noun, so each may name a hop still to walk."""
        floor, possessed = self.settings.possessed_explained, scorer.reading.possessed
        if floor <= 0 or not possessed or not chain:
            return []
        sims = scorer.similarities(list(chain))[:, None, :]  # words x one chain x steps
        best_step, fits = sims.argmax(axis=2), sims.max(axis=2)
        for group in scorer.reading.kin_chains:  # a kin chain's nouns each need a step of their own
            _steps_in_order(sims, group, best_step, fits)
        return [i for i in possessed if fits[i, 0] < floor]

    def _option_chains(self, options: list[TrajectoryOption], prefix: list[int], from_types: list[str], depth: int,
                       scorer: ChainScorer) -> list[tuple[list[str], tuple[np.ndarray, np.ndarray]]]:
        """Per option: its relations from `from_types` (`_relations`), and the chains that take the `prefix` steps, one
        of those relations into the option's type, then each continuation of up to `depth` steps (`fanned`)."""
        found = []
        for option in options:
            relations = self._relations(option, from_types, scorer.affinity)
            firsts = [self._steps.id((relation, option.type)) for relation in relations]
            found.append((relations, fanned(prefix, firsts, scorer.tails(option.type, depth))))
        return found

    def _relations(self, option: TrajectoryOption, from_types: list[str],
                   affinity: Callable[[str], float]) -> list[str]:
        """The option's relations typical between these types in the schema (all if none is), best-matching first.

        An entity may carry several types, so `starred_actors` also reaches the type `director` (directors who
        act); such steps are artifacts of multi-typing, not a way the question can be asked. Chains that tie
        (two relations into the same type, where the type's words explain the question) go to the relation whose
        own words match the question best, because the first of equal scores wins.
        """
        typical = [r for r in option.relations
                   if any((r, option.type) in self._schema_steps.get(t, ()) for t in from_types)]
        # an open-vocabulary graph may offer hundreds of phrasings into one type: the best-matching few are enough
        return sorted(typical or option.relations, key=lambda r: -affinity(r))[:self.settings.steps_per_type] or [""]

    # -- hooks: vectors ahead of the clock ---------------------------------------------------------------------
    def warm(self) -> None:
        """Embed the schema's step texts, shared label words and type words now, so that the first question does not
        pay for them on its clock; they are kept across questions (`begin_question`)."""
        self._crowded_steps()
        self._shared_matrix()
        self._type_vectors(sorted(set(self.schema) | {b for steps in self.schema.values() for _, b in steps}))
        self._graph_texts = frozenset(self._vectors)

    def step_query(self, relation: str, type_name: str) -> str:
        """The hop query for a step (`step_query`), a Freebase-style label with its type segment where it is read so."""
        return step_query(relation, type_name, self.typed_labels)

    def hop_queries(self, steps: Iterable[tuple[str, str]]) -> list[str]:
        """Every hop query this policy writes is a step's (`step_query`)."""
        return sorted({self.step_query(relation, type_name) for relation, type_name in steps})

    def begin_question(self, question: str) -> list[str]:
        """Forget the last question's words and scorers (a question's vectors come from its own encoder passes) and
        return the words this one's scorers will read first (`words_to_expect`)."""
        self._recent.clear()
        self._vectors = {t: v for t, v in self._vectors.items() if t in self._graph_texts}
        return self.words_to_expect(question)

    def words_to_expect(self, question: str) -> list[str]:
        """The content words outside the question's bracketed mentions that have no vector yet: what its scorers will
        read once its anchors are known (their names are marked as mentions then), and the words of those names."""
        return sorted({w for w, _ in question_words(question, "")} - CUE_WORDS - self._vectors.keys())

    def prepare(self, question: str, anchor_names: list[str]) -> None:
        """Encode in one batch the words the scorers of these anchors will read and that have no vector yet (a batch
        of short words costs about one short text; `words_to_expect` lets most of them ride with an earlier pass)."""
        words = {w for name in anchor_names for w, _ in question_words(question, name)}
        self._encode_missing(sorted(words - CUE_WORDS))

    # -- the scorer --------------------------------------------------------------------------------------------
    def _scorer(self, question: str, anchor: AnchorOption) -> ChainScorer:
        """The chain scorer of this question and anchor (the recent ones are reused: a question's ranking, confidence
        check and reviews all ask for the same, and a walk from each of several anchors comes after every anchor's
        ranking)."""
        key = (question, anchor.name, tuple(anchor.types))
        return self._recent.get(key, lambda: self._new_scorer(question, anchor))

    def _new_scorer(self, question: str, anchor: AnchorOption) -> ChainScorer:
        """The question read from this anchor, and the schema its chains follow (cut along crowded types)."""
        reading = self._read(question, anchor)
        cut = self._question_schema(reading.vectors)
        schema, tails = (self.schema, self._tails) if cut is None else (cut, {})
        return ChainScorer(reading, anchor.types, self.settings, self._vector, self._steps, self._groups,
                           bool(self._priors), schema, tails, self._looks, self._subject_steps,
                           self.typed_labels)

    def _read(self, question: str, anchor: AnchorOption) -> Reading:
        """What the question says from this anchor's mention (`Reading`): its content words, less the cue words and the
        words that only describe the anchor, the relation the anchor's role names, and the sharing cue."""
        settings = self.settings
        words = question_words(question, anchor.name)
        links_siblings = any(is_sibling_word(w) for w, _ in words) and not self._labels_siblings()
        if links_siblings:
            words = siblings_as_links(words)
        sharing = sharing_cue(words)
        words = [(w, d) for w, d in without_relative_wh(words, question) if w not in CUE_WORDS]
        if words:
            self._vector([w for w, _ in words])  # one encoder call for all of the question's new words
        if words and anchor.types:
            sims = self._vector([w for w, _ in words]) @ self._type_vectors(anchor.types).T
            # "the director [X]" describes X; "director of [X]" asks for X's director; "who heads the [X]" names a
            # relation: a word describing X stands right before its mention ("the director [X]", "maintained by
            # [X]") or after it ("[X] the writer")
            owned_by_mention = {m.group(1).lower() for m in OF_MENTION.finditer(question)}
            agent_verbs = {m.group(1).lower() for m in BY_MENTION.finditer(question)}
            before = set(hyphenated_words(around_mention(question, anchor.name)[0].lower())) - agent_verbs
            role = [not (d <= (1 if w in before else settings.appositive_distance)
                         and s > settings.appositive_similarity and w not in owned_by_mention)
                    for (w, d), s in zip(words, sims.max(axis=1))]
            roles = [w for (w, _), keep in zip(words, role) if not keep]
            words = [item for item, keep in zip(words, role) if keep]
        else:
            roles = []
        if anchor.types and not any(type_words(t) for t in anchor.types):
            # a type without words (a schema-less subject type) cannot tell a role noun: "the film [X]" still only
            # says what X is (an anchor typed `written_by:object` keeps "the writer [X]" for its role)
            described = {m.group(1).lower() for m in ARTICLE_NOUN_MENTION.finditer(question)
                         if (named := MENTION.match(question, m.end() - 1)) and
                         named.group(1).casefold() == anchor.name.casefold()}
            words = [(w, d) for w, d in words if not (w in described and d <= 1)]
        role_relation = self._role_relation(roles, anchor.types)
        word_vectors = self._vector([w for w, _ in words]) if words else None
        # a kin word for one member of a relation's group reads as its generic kin noun too ("sons": child)
        classes = [kin_class(w) for w, _ in words]
        kin_vectors = self._vector([c or w for (w, _), c in zip(words, classes)]) if any(classes) else None
        # a word said twice is two steps ("[X]'s father's father"), unless the answer shares a neighbour with the
        # anchor: then it names that neighbour twice ("the director of [X] is also the director of which films")
        repeated = [] if sharing else _repeated_words(words)
        kinds, owned = answer_kind_words(question), possessed_words(question)
        if links_siblings and any(is_sibling_word(noun) for noun in owned):
            owned |= set(SIBLING_LINKS)
        answer_words = [i for i, (w, _) in enumerate(words) if w in kinds]
        possessed = [i for i, (w, _) in enumerate(words) if w in owned and w not in kinds]
        return Reading(words, word_vectors, sharing, repeated, self._shared_support(word_vectors), role_relation,
                       answer_words, possessed, kin_vectors, kin_chains(words))

    def _labels_siblings(self) -> bool:
        """Whether some relation label of the graph names siblings (fits "sibling" at `kin_label_similarity`): where
        none does, a sibling word is read as a parent's child (`lexicon.siblings_as_links`)."""
        if self._sibling_label is None:
            relations = sorted({r for steps in self.schema.values() for r, _ in steps})
            fits = self._vector(["sibling"]) @ self._vector([label_words(r) or r for r in relations]).T \
                if relations else np.zeros((1, 0))
            self._sibling_label = bool(fits.size) and float(fits.max()) >= self.settings.kin_label_similarity
        return self._sibling_label

    # -- reading the question and the schema -------------------------------------------------------------------
    def _role_relation(self, roles: list[str], anchor_types: list[str]) -> str | None:
        """The relation of the anchor's role in the question ("the director [X]"): the most frequent way out of
        the anchor type its role words name (role words are those close to one of the anchor's types)."""
        if not roles or not anchor_types:
            return None
        return self._way_out(anchor_types[int(np.argmax(self._type_similarities(roles, anchor_types)))])

    def _type_similarities(self, words: list[str], anchor_types: list[str]) -> np.ndarray:
        """Per anchor type, the highest cosine between any of `words` and the type's words."""
        return (self._vector(words) @ self._type_vectors(anchor_types).T).max(axis=0)

    def _way_out(self, type_name: str) -> str | None:
        """The most frequent relation leaving a type (the schema lists them most frequent first)."""
        return next((r for r, _ in self.schema.get(type_name, []) if label_words(r)), None)

    def _crowded_steps(self) -> tuple[list[tuple[str, list[tuple[str, str]]]], np.ndarray, np.ndarray, np.ndarray]:
        """The types with more than `steps_per_type` schema steps, with their steps; those steps' distinct texts'
        vectors, each step's texts as slots into them and each step's first slot. Built once; every schema step's
        texts are embedded on the way (`warm`)."""
        if self._crowded is None:
            self._vector(list(dict.fromkeys(text for steps in self.schema.values() for r, t in steps
                                            for text in step_texts(r, t, r in self.typed_labels))))
            crowded = [(t, steps) for t, steps in self.schema.items() if len(steps) > self.settings.steps_per_type]
            texts = [step_texts(r, t, r in self.typed_labels) for _, steps in crowded for r, t in steps]
            unique = {text: i for i, text in enumerate(dict.fromkeys(text for group in texts for text in group))}
            slots = np.array([unique[text] for group in texts for text in group], dtype=np.int64)
            starts = np.cumsum([0] + [len(group) for group in texts[:-1]])
            self._crowded = (crowded, self._vector(list(unique)), slots, starts)
        return self._crowded

    def _question_schema(self, word_vectors: np.ndarray | None) -> dict[str, list[tuple[str, str]]] | None:
        """The schema with each type's steps cut to the `steps_per_type` most like a question word (None: no cut).

        Kept steps stay in frequency order, so ties break as on the whole schema."""
        crowded, columns, slots, starts = self._crowded_steps()
        if word_vectors is None or not crowded:
            return None
        limit = self.settings.steps_per_type
        # the long matrix on the left: the same product bit for bit, and BLAS runs it ~2x faster that way round
        relevance = np.maximum.reduceat((columns @ word_vectors.T).max(axis=1)[slots], starts)
        cut, first = dict(self.schema), 0
        for type_name, type_steps in crowded:  # relevance lists the crowded types' steps in this order
            count = len(type_steps)
            kept = np.sort(np.argpartition(-relevance[first:first + count], limit)[:limit])
            cut[type_name] = [type_steps[i] for i in kept]
            first += count
        return cut

    def _shared_support(self, word_vectors: np.ndarray | None) -> tuple[list[set[str]], np.ndarray] | None:
        """The label words several relations share that a question word names (cosine >= `shared_word_similarity`:
        "play" ~ `plays`), each as the relations using it, and per question word its support for them: its best
        similarity to any of their phrases where it names the word, else -inf (None when no word names one)."""
        threshold = self.settings.shared_word_similarity
        if word_vectors is None or not self._shared or threshold <= 0:
            return None
        words = list(self._shared)
        named = word_vectors @ self._shared_matrix().T >= threshold  # question words x shared words
        columns = np.flatnonzero(named.any(axis=0))
        if not len(columns):
            return None
        names, support = [], np.full((len(word_vectors), len(columns)), -np.inf)
        for k, j in enumerate(columns.tolist()):
            users = self._shared[words[j]]
            best = (word_vectors @ self._vector([label_words(r, r in self.typed_labels) for r in users]).T).max(axis=1)
            support[:, k] = np.where(named[:, j], best, -np.inf)
            names.append(set(users))
        return names, support

    # -- vectors -----------------------------------------------------------------------------------------------
    def _shared_matrix(self) -> np.ndarray:
        """The shared label words' vectors, in `_shared` order, built once (an open vocabulary shares thousands)."""
        if self._shared_vectors is None:
            self._shared_vectors = self._vector(list(self._shared))
        return self._shared_vectors

    def _type_vectors(self, type_names: list[str]) -> np.ndarray:
        """The types' word vectors; a type with no words of its own (a relation's subject) matches no word."""
        texts = [type_words(t) for t in type_names]
        vectors = self._vector([t or " " for t in texts])
        return np.where(np.array([bool(t) for t in texts])[:, None], vectors, 0.0)

    def _encode_missing(self, texts: Sequence[str]) -> None:
        """Encode, in one batch, the texts that have no vector yet."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            for text, vector in zip(missing, self._embed(missing)):
                self._vectors[text] = vector

    def _vector(self, texts: Sequence[str]) -> np.ndarray:
        self._encode_missing(texts)
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)


@dataclass(frozen=True)
class Reading:
    """What a question says, read from one anchor's mention: what the chain score's terms compare chains with."""

    words: list[tuple[str, float]]  # content words (no cue or role word) and their distances from the mention
    vectors: np.ndarray | None  # their vectors, words x dimensions (None: no content word)
    sharing: bool  # a sharing cue ("also", "co-", "same"): the answer shares a neighbour with the anchor
    repeated: list[list[int]]  # the places of each word said more than once (none under a sharing cue)
    shared: tuple[list[set[str]], np.ndarray] | None  # shared label words' support (OfflinePolicy._shared_support)
    role_relation: str | None  # the way out the anchor's role names ("the director [X]": directed_by)
    answer_words: list[int]  # the places of the words naming the answer's kind ("which country", "when")
    possessed: list[int]  # the places of possessed nouns ("[X]'s grandparents", "the grandchildren of [X]")
    # per word, the vector of the generic kin noun it also reads as (`lexicon.kin_class`; its own where it has none);
    # None when no word has one
    kin_vectors: np.ndarray | None = None
    kin_chains: list[list[int]] = field(default_factory=list)  # the places of each chain of kin nouns, outward


@dataclass
class ChainGroup:
    """Chains of one length, as the score's terms read them."""

    length: int
    sims: np.ndarray  # words x chains x steps: each word's similarity to each step (`ChainScorer.similarities`)
    best_step: np.ndarray  # words x chains: the step explaining the word (-1: none; a repeat or kind noun fitting none)
    credit: np.ndarray  # words x chains: how well that step explains it
    owned: np.ndarray  # steps x words x chains: the step explains the word
    supported: np.ndarray  # steps x chains: the step explains a word, a sharing cue or the anchor's role
    returning: np.ndarray  # steps x chains: the step is part of an out-and-back pair (`compile_chains`)
    priors: np.ndarray  # per chain, its steps' summed log-typicality (`compile_chains`)
    first_relations: np.ndarray  # per chain, its first step's relation number
    last_types: np.ndarray  # per chain, its last step's type number
    placed: np.ndarray | None  # steps x words x chains: owned words that place their step (None: one step)
    # steps x chains: the only way to the next step (`ChainScorer._bridges`), or the last step into the kind a noun
    # names; None: off
    bridges: np.ndarray | None


@dataclass(frozen=True)
class TypeLooks:
    """What each type of the graph looks like to a word naming the answer's kind: its members' mean vector, and to a
    noun ("which stations", not "where") also the relation labels naming its members (`GraphStore.type_naming_labels`)
    and the classes they are stated to be of (`GraphStore.type_naming_classes`), whichever is nearer. Invented station
    names average to nothing "stations" is near, but the graph calls them `adjacent station`; a wh-word is not the
    graph's wording ("when" is near `born in`, whose objects are places)."""

    rows: dict[str, int]  # row per type name
    centroids: np.ndarray  # types x dimensions (`GraphStore.type_centroids`)
    name_texts: list[str]  # the words of every naming label, naming class and schema type name, once each
    labels: list[np.ndarray]  # per type row, its naming labels' and classes' places in `name_texts`
    own: np.ndarray  # per type row, its own name's place in `name_texts` (-1: an inferred type, named by a role)
    dates: np.ndarray  # per type row, whether its members spell dates (`GraphStore.date_types`)

    @classmethod
    def of(cls, types: list[str], centroids: np.ndarray, labels: list[list[str]] | None,
           typed: frozenset[str] = frozenset(), classes: list[list[str]] | None = None,
           dates: np.ndarray | None = None) -> "TypeLooks":
        """`typed`: the labels read with their type segment, which names what the label's object is to its subject
        ("pilot airline": a pilot's airline, an airline; `label_words`); `classes`: per type, the classes its members
        are stated to be of (`GraphStore.type_naming_classes`), names as they are."""
        names = [[label_words(r, r in typed) for r in rs] for rs in labels or [[] for _ in types]]
        for row, found in enumerate(classes or []):
            names[row] += found
        own = ["" if _inferred(t) else type_words(t) for t in types]
        texts = sorted({text for texts in names for text in texts} | set(own) - {""})
        place = {text: i for i, text in enumerate(texts)}
        return cls({name: row for row, name in enumerate(types)}, centroids, texts,
                   [np.array(sorted({place[text] for text in texts}), dtype=np.int64) for texts in names],
                   np.array([place.get(text, -1) for text in own], dtype=np.int64),
                   np.zeros(len(types), dtype=bool) if dates is None else np.asarray(dates, dtype=bool))

    def similarities(self, word_vectors: np.ndarray, nouns: np.ndarray,
                     vector: Callable[[Sequence[str]], np.ndarray], by_words: bool = False,
                     dated: np.ndarray | None = None) -> np.ndarray:
        """Words x types: each word's cosine to the type's centroid, a noun's to its nearest naming label if higher;
        `by_words`: to its names in the graph's words alone (its naming labels, a schema type's own name; -inf for a
        word that is no noun or a type without one). A word asking for a date (`dated`: "when") names the types whose
        members spell dates as a noun names its own type (1.0): their spelling is their name."""
        sims = np.full((len(word_vectors), len(self.rows)), -np.inf, dtype=np.float32) if by_words else \
            word_vectors @ self.centroids.T
        if self.name_texts and nouns.any():
            by_name = word_vectors[nouns] @ vector(self.name_texts).T
            for row, places in enumerate(self.labels):
                if by_words and self.own[row] >= 0:
                    places = np.append(places, self.own[row])
                if len(places):
                    sims[nouns, row] = np.maximum(sims[nouns, row], by_name[:, places].max(axis=1))
        if dated is not None and dated.any() and self.dates.any():
            sims[np.ix_(dated, self.dates)] = 1.0
        return sims


class ChainScorer:
    """The chain score of one question from one anchor (the module docstring's formula): `rows` sums one method per
    term, `explained - step_cost` and then `TERMS` in order, each term's weight a field of `OfflineConfig`."""

    def __init__(self, reading: Reading, anchor_types: list[str], settings: OfflineConfig,
                 vector: Callable[[Sequence[str]], np.ndarray], numbers: StepNumbers, groups: CompiledGroups,
                 has_priors: bool, schema: dict[str, list[tuple[str, str]]], tails: TailMemo,
                 looks: "TypeLooks | None" = None, subject_steps: frozenset[tuple[str, str]] = frozenset(),
                 typed: frozenset[str] = frozenset()):
        self.reading = reading
        self.typed_labels = typed  # the labels read with their type segment (`label_words`)
        self._subject_steps = subject_steps  # steps a wh-word cannot name (`similarities`)
        self._looks = looks  # what the answer-kind words match
        self._kind_names: np.ndarray | None = None  # per type number, the answer-kind words naming it
        self._kind_word_names: np.ndarray | None = None  # answer-kind words x type numbers: the word names the type
        self._noun_names: np.ndarray | None = None  # per graph type, whether a kind noun clearly names it by its names
        self.anchor_types = anchor_types
        self.settings = settings
        self._vector = vector
        self._numbers = numbers
        self._groups = groups
        self._has_priors = has_priors
        # the schema the chains follow: cut to the question's steps along crowded types (OfflinePolicy._question_schema)
        self.schema = schema
        self._tails = tails
        self.distance = np.array([d for _, d in reading.words], dtype=float)  # per word, from the mention
        self._affinities: dict[str, float] = {}  # a walk's every review orders the same relations again
        self._leaving_memo: dict[int, np.ndarray] = {}  # per type number, the relations leaving it (`_leaving`)

    def __call__(self, chains: list[Chain]) -> np.ndarray:
        """Scores of chains given as steps."""
        return self.rows(*self._numbers.rows(chains))

    def rows(self, chain_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Scores of chains given as rows of step ids (padded with -1) and their lengths (without a content word,
        only `step_cost` tells chains apart)."""
        if self.reading.vectors is None:
            return np.where(lengths > 0, -self.settings.step_cost * lengths, -np.inf)
        scores = np.full(len(lengths), -np.inf)
        for members, group in self.groups(chain_ids, lengths):
            total = self.explained(group) - self.step_cost(group)
            for sign, term in self.TERMS:  # in place, in this order: each sum rounds as it always has
                value = term(self, group)
                if value is not None:
                    if sign > 0:
                        total += value
                    else:
                        total -= value
            scores[members] = total
        return scores

    # -- the terms (None: the term does not apply to these chains) ---------------------------------------------
    def explained(self, group: ChainGroup) -> np.ndarray:
        """Explained words: each word's credit from the step explaining it best (a cosine each, no weight)."""
        return group.credit.sum(axis=0)

    def step_cost(self, group: ChainGroup) -> float:
        """`step_cost` per step: a longer chain must explain more words to win."""
        return self.settings.step_cost * group.length

    def unsupported(self, group: ChainGroup) -> np.ndarray:
        """`unsupported` when some step has no word of its own (nor a sharing cue, nor the anchor's role); only
        `bridge_cost` when each such step is a bridge, the way to where a named step leaves from ("which country is
        [X] in" for a college with a city: no word names `city`, and `country` does not leave a college) or the last
        step into the kind a noun of the question names."""
        unsupported = ~group.supported
        if group.bridges is None:
            return self.settings.unsupported * unsupported.any(axis=0)
        detour = (unsupported & ~group.bridges).any(axis=0)
        bridged = unsupported.any(axis=0) & ~detour
        return self.settings.unsupported * detour + self.settings.bridge_cost * bridged

    def order_cost(self, group: ChainGroup) -> np.ndarray | None:
        """`order_cost` per inversion: a step nearer the anchor whose placed words sit farther from the mention."""
        if group.length <= 1:
            return None
        placed_counts = group.placed.sum(axis=1)
        means = (group.placed * self.distance[None, :, None]).sum(axis=1) / np.maximum(placed_counts, 1)
        means = np.where(placed_counts > 0, means, np.nan)
        return self.settings.order_cost * _inversions(means)

    def nearest_cost(self, group: ChainGroup) -> np.ndarray | None:
        """`nearest_cost` when the placed word nearest the mention is not the first step's ("which person wrote the
        films acted by [X]": acting first)."""
        if group.length <= 1 or not self.settings.nearest_cost:
            return None
        placed = group.placed
        reach = np.where(placed.any(axis=0), self.distance[:, None], np.inf)  # words x chains
        nearest = reach.argmin(axis=0)
        misplaced = np.isfinite(reach.min(axis=0)) & ~placed[0, nearest, np.arange(placed.shape[2])]
        return self.settings.nearest_cost * misplaced

    def returns(self, group: ChainGroup) -> np.ndarray | None:
        """`sharing_bonus` (with a sharing cue: "co-starred") or else `return_prior` for an out-and-back chain (actor
        -> movie -> actor)."""
        if group.length <= 1:
            return None
        returns = group.returning.any(axis=0).astype(float)
        settings = self.settings
        return (settings.sharing_bonus if self.reading.sharing else settings.return_prior) * returns

    def typicality(self, group: ChainGroup) -> np.ndarray | None:
        """`typicality` times the steps' summed log-typicality (0 for a relation's dominant reading)."""
        if not (self.settings.typicality and self._has_priors):
            return None
        return self.settings.typicality * group.priors

    def answer_type(self, group: ChainGroup) -> np.ndarray | None:
        """`answer_type` per word naming the answer's kind ("which country", "when") that names the chain's last
        type: its members' centroid within `answer_type_margin` of the word's best type, which every other type trails
        by `answer_type_clarity` ("which country was [X] born in" ends among countries, not at the town)."""
        named = self._named_types()
        if named is None:
            return None
        return self.settings.answer_type * named[group.last_types]

    def named_by_kind_nouns(self) -> np.ndarray | None:
        """Per type number, whether a noun naming the answer's kind (not a wh-word) names it by one of its names in
        the graph's words (`TypeLooks`; not its members' centroid: "movies" is near the genres' names, Drama and
        Thriller); None when there is no such noun or it names no type."""
        reading, settings, looks = self.reading, self.settings, self._looks
        nouns = self._kind_noun_places()
        if not (nouns and settings.answer_type and looks is not None and reading.vectors is not None):
            return None
        if self._noun_names is None:  # per graph type (row), once per question and anchor
            sims = looks.similarities(reading.vectors[nouns], np.ones(len(nouns), dtype=bool), self._vector,
                                      by_words=True, dated=self.asks_dates(nouns))
            # clearly, as `confident` asks of a word naming a step: "person" is near the actors' and writers' alike
            named = named_by_similarity(sims, settings.answer_type_margin, settings.answer_type_clarity)
            self._noun_names = (named & (sims >= settings.confident_similarity)).any(axis=0)
        rows = looks.rows
        by_number = np.array([self._noun_names[rows[t]] if t in rows else False for t in self._numbers.type_names],
                             dtype=bool)
        return by_number if by_number.any() else None

    def kind_label_words(self, type_name: str) -> frozenset[str] | None:
        """The words of the type's naming labels a noun naming the answer's kind names clearly (at
        `confident_similarity`), for a type such a noun names by them; None when the noun names it by its own (schema)
        name or "when" its spelling (a date type), or the type has no naming label."""
        looks, reading = self._looks, self.reading
        row = None if looks is None else looks.rows.get(type_name)
        nouns = self._kind_noun_places()
        if row is None or not nouns or not len(looks.labels[row]) or reading.vectors is None or (
                looks.dates[row] and self.asks_dates(nouns).any()):
            return None
        texts = [looks.name_texts[i] for i in looks.labels[row]]
        sims = reading.vectors[nouns] @ self._vector(texts).T
        if looks.own[row] >= 0:
            own = reading.vectors[nouns] @ self._vector([looks.name_texts[looks.own[row]]]).T
            if own.max() >= sims.max():
                return None
        return frozenset(t for t, s in zip(texts, sims.max(axis=0)) if s >= self.settings.confident_similarity)

    @cached_property
    def _wh_places(self) -> list[int]:
        """The places of the answer-kind words that are wh-words ("who", "when"), not nouns."""
        return [w for w, noun in zip(self.reading.answer_words, self._kind_nouns()) if not noun]

    def _kind_noun_places(self) -> list[int]:
        """The places of the answer-kind words that are nouns (`_kind_nouns`)."""
        return [w for w, noun in zip(self.reading.answer_words, self._kind_nouns()) if noun]

    def _kind_nouns(self) -> np.ndarray:
        """Per answer-kind word, whether it is a noun ("which stations"), not a wh-word ("who"): only a noun is read
        against a type's names in the graph's words (`TypeLooks`). "When" is read as one where types spell dates
        (`asks_dates`): it names them as clearly as "which year" does."""
        reading = self.reading
        return np.array([reading.words[i][0] not in QUESTION_WORDS for i in reading.answer_words], dtype=bool) | \
            self.asks_dates(reading.answer_words)

    def asks_dates(self, places: Sequence[int]) -> np.ndarray:
        """Per word place, whether it is "when" (`lexicon.DATE_QUESTION_WORD`) and some type of the graph spells
        dates (`TypeLooks.dates`)."""
        looks = self._looks
        if looks is None or not looks.dates.any():
            return np.zeros(len(places), dtype=bool)
        return np.array([self.reading.words[i][0] == DATE_QUESTION_WORD for i in places], dtype=bool)

    def _named_types(self) -> np.ndarray | None:
        """Per type number, how many of the answer-kind words name the type (None: no such word, or no centroids)."""
        reading, settings, looks = self.reading, self.settings, self._looks
        if not (settings.answer_type and reading.answer_words and looks is not None):
            return None
        type_names = self._numbers.type_names  # grows as chains take new steps: count the types seen so far
        if self._kind_names is None or len(self._kind_names) < len(type_names):
            sims = looks.similarities(reading.vectors[reading.answer_words], self._kind_nouns(), self._vector,
                                      dated=self.asks_dates(reading.answer_words))
            named = named_by_similarity(sims, settings.answer_type_margin,
                                        settings.answer_type_clarity)  # kind words x graph types
            rows, unnamed = looks.rows, np.zeros(len(named), dtype=bool)
            self._kind_word_names = np.array([named[:, rows[t]] if t in rows else unnamed for t in type_names],
                                             dtype=bool).T  # kind words x type numbers
            self._kind_names = self._kind_word_names.sum(axis=0).astype(float)
        return self._kind_names

    def _kind_nouns_elsewhere(self, last_types: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Per noun naming the answer's kind that names some type (as `answer_type` reads it), its place and, per
        chain, whether the chain ends at a type it does not name."""
        if self._named_types() is None:
            return []
        return [(place, ~self._kind_word_names[k, last_types])
                for k, (place, noun) in enumerate(zip(self.reading.answer_words, self._kind_nouns()))
                if noun and self._kind_word_names[k].any()]

    # after `explained - step_cost`, the terms in the order they are summed: (+1 added, -1 subtracted, function)
    TERMS = ((-1, unsupported), (-1, order_cost), (-1, nearest_cost), (+1, returns), (+1, typicality),
             (+1, answer_type))

    # -- what the terms read -----------------------------------------------------------------------------------
    def groups(self, chain_ids: np.ndarray, lengths: np.ndarray) -> Iterable[tuple[np.ndarray, ChainGroup]]:
        """The chains of each length (their places among the rows, and the group); the question must have content
        words. Each distinct step's similarities are computed once for all of them."""
        reading, settings = self.reading, self.settings
        groups = {length: np.flatnonzero(lengths == length) for length in np.unique(lengths[lengths > 0]).tolist()}
        if not groups:
            return
        facts = {}
        for length, members in groups.items():
            group_ids = np.ascontiguousarray(chain_ids[members, :length])
            facts[length] = (group_ids, *self._groups.get(group_ids, self.anchor_types))
        # the distinct steps of these chains, and each chain step's place among them
        every_step = np.concatenate([ids.ravel() for ids, _, _ in facts.values()])
        used, inverse = np.unique(every_step, return_inverse=True)
        step_sims = self.similarities([self._numbers.steps[i] for i in used.tolist()])
        offset = 0
        for length, members in groups.items():
            ids, returning, priors = facts[length]
            index = inverse[offset:offset + ids.size].reshape(ids.shape)
            offset += ids.size
            sims = step_sims[:, index]  # words x chains x steps
            best_step, credit = sims.argmax(axis=2), sims.max(axis=2)  # words x chains
            for repeats in reading.repeated:
                _spread_repeats(sims[repeats[0]], repeats, best_step, credit, settings.repeat_similarity, ids)
            for chain in reading.kin_chains:
                _steps_in_order(sims, chain, best_step, credit)
            relations = np.array(self._numbers.relation)[ids]  # chains x steps
            _spread_relation_words(sims, best_step, credit, relations, self.distance, reading.answer_words,
                                   settings.nearest_explained)
            last_types = np.array(self._numbers.type)[ids[:, -1]]  # type numbers
            # a noun naming the answer's kind explains a chain ending at the kind it names; in a chain ending elsewhere
            # it explains a step only if it fits that step itself, at `nearest_explained` ("what country is the
            # producer of [X] from" stopped at the producer: "country" 0.36 from `produced`, the one-step chain 1.02,
            # the way on to the country 0.75)
            arrivals = np.zeros(len(members), dtype=bool)  # chains whose last step arrives at a kind a noun names
            for place, elsewhere in self._kind_nouns_elsewhere(last_types):
                unexplained = elsewhere & (credit[place] < settings.nearest_explained)
                best_step[place, unexplained] = -1
                credit[place, unexplained] = 0.0
                arrivals |= ~elsewhere
            owned = np.stack([(best_step == k) for k in range(length)])  # steps x words x chains
            counts = owned.sum(axis=1)
            returning = returning.T  # steps x chains
            # a sharing cue ("together", "co-", "same") is what an out-and-back pair of steps explains
            supported = (counts > 0) | (returning & reading.sharing)
            first_relations = np.array(self._numbers.relation)[ids[:, 0]]  # relation numbers
            if reading.role_relation is not None:  # "the director [X]": X's directing is the way out
                supported[0] |= first_relations == self._numbers.relation_numbers.get(reading.role_relation, -1)
            if settings.support_margin and length > 1:
                content = np.ones(len(reading.words), dtype=bool)
                content[reading.answer_words] = False  # "who" fits any step a little: the answer's kind, no step
                supported |= _matched(sims, credit, best_step, owned, relations, supported & ~(counts > 0), content,
                                      settings.support_margin, settings.nearest_explained)[None, :]
            placed = None
            if length > 1:
                # only words one step clearly explains best say where that step sits in the sentence
                top_two = -np.partition(-sims, 1, axis=2)[:, :, :2]
                placed = owned & (top_two[:, :, 0] - top_two[:, :, 1] >= settings.order_margin)[None]
                # a wh-word asks for the answer, the chain's far end: it places no step before the last
                placed[:length - 1, self._wh_places] = False
            bridges = None
            if settings.bridge_cost != settings.unsupported:
                bridges = self._bridges(ids) if length > 1 else np.zeros((1, len(members)), dtype=bool)
                # a last step no word names but arriving at the kind a noun of the question names is the way there,
                # as a bridge is ("what symptoms come with the diseases [X] treats": `presents`, which "symptoms"
                # fits 0.16 though its objects are symptoms)
                bridges[-1] |= arrivals
            yield members, ChainGroup(length, sims, best_step, credit, owned, supported, returning, priors,
                                      first_relations, last_types, placed, bridges)

    def _bridges(self, ids: np.ndarray) -> np.ndarray:
        """steps x chains: the steps that are the only way to the next step: its relation leaves none of the types the
        chain has stood at so far (the anchor's, and each earlier step's target). Going out and back to take a
        relation the anchor has itself ("the language and genre of [X]") is no bridge."""
        numbers = self._numbers
        relations, types = np.array(numbers.relation)[ids], np.array(numbers.type)[ids]  # chains x steps
        bridges = np.zeros((ids.shape[1], ids.shape[0]), dtype=bool)
        for k in range(ids.shape[1] - 1):
            following = relations[:, k + 1]
            bridge = ~np.isin(following, self._leaving(-1))
            for j in range(k):
                for start in np.unique(types[:, j]).tolist():
                    rows = types[:, j] == start
                    bridge[rows] &= ~np.isin(following[rows], self._leaving(start))
            bridges[k] = bridge
        return bridges

    def _leaving(self, type_number: int) -> np.ndarray:
        """The numbers of the relations leaving a type in the schema the chains follow (-1: the anchor's types)."""
        found = self._leaving_memo.get(type_number)
        if found is None:
            names = self.anchor_types if type_number < 0 else [self._numbers.type_names[type_number]]
            found = self._leaving_memo[type_number] = np.array(sorted(
                {self._numbers.relation_numbers.get(r, -1) for t in names for r, _ in self.schema.get(t, [])}),
                dtype=np.int64)
        return found

    def similarities(self, steps: list[tuple[str, str]], relations_only: bool = False) -> np.ndarray:
        """words x steps: each word's best cosine with the step's relation phrase or type phrase (`step_texts`; the
        relation phrase alone with `relations_only`); a word naming a label word several relations share supports each
        of their steps alike (`shared_word_similarity`). Single label words as texts of their own were dropped: they
        cost MetaQA 2- and 3-hop recall."""
        word_vectors = self.reading.vectors
        texts = [step_texts(r, t, r in self.typed_labels, not relations_only) for r, t in steps]
        # each distinct text once: steps named alike tie exactly (a matrix product may round equal columns apart)
        distinct = {text: i for i, text in enumerate(dict.fromkeys(text for group in texts for text in group))}
        slots = [distinct[text] for group in texts for text in group]
        starts = np.cumsum([0] + [len(group) for group in texts[:-1]])
        text_vectors = self._vector(list(distinct)).T
        cosines = word_vectors @ text_vectors
        if self.reading.kin_vectors is not None:  # "sons" fits `children` as well as "child" does
            cosines = np.maximum(cosines, self.reading.kin_vectors @ text_vectors)
        sims = np.maximum.reduceat(cosines[:, slots], starts, axis=1)
        if self.reading.shared is not None:  # "play" supports every `plays ...` step alike
            names, support = self.reading.shared
            uses = np.array([[r in users for users in names] for r, _ in steps], dtype=bool)  # steps x words
            lifted = np.where(uses[None], support[:, None, :], -np.inf).max(axis=2)  # words x steps
            sims = np.maximum(sims, lifted)
        # a wh-word asks what the answer is, and a noun label names its object end ("who" fits `author` 0.53): a step
        # arriving at the subject end (an author's books) is no "who" ("who teaches [X]" walked on from the teacher to
        # his books)
        wh, backward = self._wh_places, [i for i, step in enumerate(steps) if step in self._subject_steps]
        if wh and backward:
            sims[np.ix_(wh, backward)] = 0.0
        return sims

    def affinity(self, relation: str) -> float:
        """How well the relation's own words match the question's best word, not one naming the answer's kind (orders
        tied choices: "which stations are on [X]" says nothing of `terminus` or `connecting line`, both reaching
        stations; "stations" is nearer a terminus only because a terminus is a station)."""
        reading = self.reading
        words = [i for i in range(len(reading.words)) if i not in reading.answer_words]
        if reading.vectors is None or not words:
            return 0.0
        found = self._affinities.get(relation)
        if found is None:
            text = label_words(relation, relation in self.typed_labels) or relation
            found = self._affinities[relation] = float((reading.vectors[words] @ self._vector([text])[0]).max())
        return found

    def best_match(self, steps: list[tuple[str, str]], relations_only: bool = False) -> float | None:
        """The highest similarity between any question word and any of the steps (`similarities`; None without content
        words)."""
        if self.reading.vectors is None or not steps:
            return None
        return float(self.similarities(steps, relations_only).max())

    def tails(self, type_name: str, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """All continuations of up to `depth` steps from a type along `schema` (`chain_cache.tail_rows`).

        Along a type with more than `steps_per_type` schema steps (an LLM-built graph has thousands of relation
        phrasings) only the steps most like the question's words are followed: the others explain no word and cost
        the unsupported penalty, and following them all multiplies the chains by the vocabulary."""
        return tail_rows(type_name, depth, self.schema, self._tails, self._numbers)


_PAIR_BASE = 1 << 32  # (type number, step id) as one int64 key: both stay far below 2**31


def compile_chains(ids: np.ndarray, anchor_types: tuple[str, ...], numbers: StepNumbers,
                   priors: dict[tuple[str, str, str], float]) -> tuple[np.ndarray, np.ndarray]:
    """For chains of one length (rows of step ids): which steps are part of an out-and-back pair, and the prior.

    Out and back: a step along the relation just taken, back to the type before it (actor -> movie -> actor is
    "acted together"); both steps of the pair count. The prior: summed log-typicality of the steps, the first from
    the anchor's most typical type (0 where unknown)."""
    n, length = ids.shape
    if length == 0:
        return np.zeros((n, 0), dtype=bool), np.zeros(n)
    relation = np.array(numbers.relation)[ids]
    target = np.array(numbers.type)[ids]
    anchor_type_ids = [numbers.type_number(t) for t in anchor_types]
    back = np.zeros((n, length), dtype=bool)
    if length > 1:
        back[:, 1] = (relation[:, 0] == relation[:, 1]) & np.isin(target[:, 1], anchor_type_ids)
        back[:, 2:] = (relation[:, 1:-1] == relation[:, 2:]) & (target[:, 2:] == target[:, :-2])
    returning = back.copy()
    returning[:, :-1] |= back[:, 1:]
    step_list = numbers.steps
    first_ids, first_at = np.unique(ids[:, 0], return_inverse=True)
    first = np.array([max((priors.get((t, *step_list[s]), 0.0) for t in anchor_types), default=0.0)
                      for s in first_ids.tolist()])
    total = first[first_at]
    for k in range(1, length):  # (type before, step) pairs repeat across chains: look each up once
        keys, at = np.unique(target[:, k - 1] * _PAIR_BASE + ids[:, k], return_inverse=True)
        values = np.array([priors.get((numbers.type_names[key // _PAIR_BASE], *step_list[key % _PAIR_BASE]), 0.0)
                           for key in keys.tolist()])
        total = total + values[at.reshape(-1)]
    return returning, total


def _repeated_words(words: list[tuple[str, float]]) -> list[list[int]]:
    """The places of each word said more than once ("[X]'s father's father"), nearest the mention first."""
    places: dict[str, list[int]] = {}
    for index, (word, _) in enumerate(words):
        places.setdefault(word, []).append(index)
    return [sorted(group, key=lambda i: words[i][1]) for group in places.values() if len(group) > 1]


def _spread_repeats(sims: np.ndarray, group: list[int], best_step: np.ndarray, credit: np.ndarray,
                    fits: float, ids: np.ndarray) -> None:
    """A word said k times is explained by k different steps ("[X]'s father's father" is two `father` steps): the
    first time by its best step, as any word, each further time by the next-best step of the chain if that step also
    fits the word by `fits` or is the best step taken again (`ids`: chains x steps; "[X]'s grandparents" is two
    `child_of` steps between people, however little "parents" is like "child of"), else by none (no credit, no step
    owned). The steps it takes are given to its occurrences in sentence order, the one nearest the mention taking the
    step nearest the anchor (in place, on `best_step` and `credit`, words x chains; `sims` is the word's chains x
    steps)."""
    chains, length = sims.shape
    order = np.argsort(-sims, axis=1, kind="stable")[:, :len(group)]
    ranked = np.take_along_axis(sims, order, axis=1)
    taken = (ranked >= fits) | (np.take_along_axis(ids, order, axis=1) == ids[np.arange(chains), order[:, 0]][:, None])
    taken[:, 0] = True
    positions = np.sort(np.where(taken, order, length), axis=1)  # taken steps first, in chain order
    rows = np.arange(chains)
    for k, word in enumerate(group):
        if k < positions.shape[1]:
            position = positions[:, k]
            found = position < length
            best_step[word] = np.where(found, position, -1)
            credit[word] = np.where(found, sims[rows, np.minimum(position, length - 1)], 0.0)
        else:
            best_step[word], credit[word] = -1, 0.0


# Chain scores are sums of cosines and fixed costs (multiples of 0.05 and 0.1, as `tie_margin` is): two chains apart
# by exactly the margin would be a near tie or not by the last bit of their sums, which differs between CPUs
TIE_TOLERANCE = 1e-6


def within_margin(scores, best, margin: float):
    """Whether `scores` trail `best` by less than `margin` (a gap of the margin itself, to rounding, is no near tie)."""
    return scores > best - margin + TIE_TOLERANCE


def _spread_relation_words(sims: np.ndarray, best_step: np.ndarray, credit: np.ndarray, relations: np.ndarray,
                           distance: np.ndarray, answer_words: Sequence[int], floor: float) -> None:
    """Two different words for one relation name two steps along it when the chain goes on from the second ("the
    release dates of the films directed by the [X] director": out to the director, back to his films, on to their
    dates): where a chain walks a relation again and that later step, not its last, owns no word, the word farthest
    from the mention among the two or more words that fit an earlier step of the relation at least `floor` and own
    it takes it, if it fits it as well (in place, on `best_step` and `credit`, words x chains; `sims` words x chains x
    steps, `relations` chains x steps). Without it the way back had no word of its own wherever the types have no
    words to name it (a graph without a schema), and a one-step chain won. A last step is left out: a way back that
    leads nowhere else explains nothing more, and a label's own two words ("release years") would make it a near tie
    worth walking."""
    length = relations.shape[1]
    if length < 3 or sims.shape[0] < 2:
        return
    chains = np.arange(relations.shape[0])
    asked = np.ones(sims.shape[0], dtype=bool)
    asked[list(answer_words)] = False  # "who" fits any step a little: it names the answer's kind, no step
    for later in range(1, length - 1):
        for earlier in range(later):
            owners = (best_step == earlier) & asked[:, None] & (credit >= floor)  # words x chains, fitting it
            free = ~(best_step == later).any(axis=0) & (relations[:, earlier] == relations[:, later])
            farthest = np.where(owners, distance[:, None], -np.inf).argmax(axis=0)
            moves = free & (owners.sum(axis=0) >= 2) & (sims[farthest, chains, later] >= floor)
            best_step[farthest[moves], chains[moves]] = later
            credit[farthest[moves], chains[moves]] = sims[farthest[moves], chains[moves], later]


def _steps_in_order(sims: np.ndarray, group: list[int], best_step: np.ndarray, credit: np.ndarray) -> None:
    """The nouns of one kin chain ("aunt": parent, sibling) are explained by different steps, in their order outward
    from the anchor: the assignment of words to increasing steps (or to none, when the chain is shorter) that they fit
    best in sum (in place, on `best_step` and `credit`, words x chains; `sims` is words x chains x steps). English
    names one relation per link: a parent's sibling is two steps, though "parent" fits `siblings` 0.62."""
    length = sims.shape[2]
    options = [p for p in product(range(-1, length), repeat=len(group))
               if _increasing([q for q in p if q >= 0])]
    totals = np.stack([sum((sims[w, :, q] for w, q in zip(group, p) if q >= 0), np.zeros(sims.shape[1]))
                       for p in options])  # options x chains
    chosen = np.asarray(options)[totals.argmax(axis=0)]  # chains x words of the group
    rows = np.arange(sims.shape[1])
    for k, word in enumerate(group):
        position = chosen[:, k]
        best_step[word] = position
        credit[word] = np.where(position >= 0, sims[word, rows, np.maximum(position, 0)], 0.0)


def _increasing(positions: list[int]) -> bool:
    return all(a < b for a, b in zip(positions, positions[1:]))


def _matched(sims: np.ndarray, credit: np.ndarray, best_step: np.ndarray, owned: np.ndarray, relations: np.ndarray,
             wordless: np.ndarray, content: np.ndarray, margin: float, floor: float) -> np.ndarray:
    """Per chain, whether every step gets a word of its own when a word may stand for its best step or for one it
    fits nearly as well (within `margin`, and at least `floor`): the encoder's small preferences between two labels
    are noise ("which writers has [X] published": `author` fits "published" 0.60, `publisher` 0.57, which left
    `publisher` no word). Steps supported without a word (`wordless`: a sharing cue, the anchor's role) need none;
    only `content` words stand for a step other than their best.
    Hall's condition over every set of the other steps: one word never supports two steps, and a word stands only for
    steps of other relations than its best ("release dates" fits the way back along `release_year` as well as the
    way there, and names it once) whose phrases fit it less (an exact tie is the same phrase: "films" fits every
    step reaching a `movie` alike)."""
    length = sims.shape[2]
    chain = np.arange(sims.shape[1])
    best_relation = relations[chain[None, :], np.maximum(best_step, 0)]  # words x chains
    near = ((sims >= credit[:, :, None] - margin) & (sims < credit[:, :, None]) & (sims >= floor)
            & ((best_step >= 0) & content[:, None])[:, :, None]
            & (relations[None, :, :] != best_relation[:, :, None]))  # words x chains x steps
    candidates = owned | np.moveaxis(near, 2, 0)  # steps x words x chains
    needs = ~wordless  # steps x chains
    matched = np.ones(needs.shape[1], dtype=bool)
    for size in range(1, length + 1):
        for subset in combinations(range(length), size):
            rows = list(subset)
            wanted = needs[rows].sum(axis=0)  # the subset's steps that need a word, per chain
            offered = (candidates[rows] & needs[rows][:, None, :]).any(axis=0).sum(axis=0)
            matched &= offered >= wanted
    return matched


def _inversions(means: np.ndarray) -> np.ndarray:
    """Per chain (column), how many placed steps sit in the sentence nearer the mention than the placed step before
    them; steps with no placed word (NaN) are skipped."""
    inversions = np.zeros(means.shape[1])
    last = np.full(means.shape[1], np.nan)
    for row in means:  # a chain has at most max_hops steps
        placed = ~np.isnan(row)
        inversions += placed & (last > row)  # comparisons with NaN are False
        last = np.where(placed, row, last)
    return inversions


@lru_cache(maxsize=1 << 16)  # labels come from the graph: a bounded set, asked for on every chain scored
def label_words(relation: str, typed: bool = False) -> str:
    """A relation label as words, an `_inverse` twin read as its base relation (`plays_in_club_inverse` -> `plays in
    club`): the walk goes both ways along every edge, so the twin names the same link. `typed`: a Freebase-style label
    keeps its type segment (`__aviation__pilot__airline`: "pilot airline"; `kgr.graph.typed_labels`): its property
    alone ("airline") reads as any airline's own relation, and "which airlines fly to [X]" took the pilots' airlines
    for the airports'."""
    words = property_words(relation)
    kind = subject_kind(relation) if typed else None
    return f"{kind} {words}" if kind and not words.startswith(kind) else words


def property_words(relation: str) -> str:
    """A relation label's own words, an `_inverse` twin's its base relation's (`plays_in_club_inverse` -> `plays in
    club`), a Freebase-style label's its property's: what names the label's object end."""
    words = relation_words(relation)
    return inverse_base(words) or words


@lru_cache(maxsize=1 << 16)
def step_texts(relation: str, type_name: str, typed: bool = False, with_type: bool = True) -> tuple[str, ...]:
    """What a step is called: its relation phrase (`label_words`, `typed` as it says) and, for a type of the graph's
    schema (and `with_type`), its type phrase.

    An inferred type is named after one of its relations (`maintained_by:object`): its words are that relation's, so
    they name a step along it, not whatever else reaches the type. A person typed `maintained_by:object` reached by
    `member_of` must not explain "maintained" ("the packages maintained by members of [X]" walks both relations)."""
    type_text = "" if _inferred(type_name) or not with_type else type_words(type_name)
    phrases = [p for p in (label_words(relation, typed), type_text) if p] or [relation or type_name]
    return tuple(dict.fromkeys(phrases))


@lru_cache(maxsize=1 << 16)
def names_its_object(relation: str) -> bool:
    """Whether a label names its object end (`author`, `is in country`, `taught by`): not an active verb, whose
    subject acts ("cites", "plays position"), nor an "of" noun naming its subject (`child of`), nor a preposition."""
    form = label_form(relation)
    words = property_words(relation).split()
    acts = (form.verb and not form.passive) or (  # a verb's -s form before its object noun: "plays position"
        len(words) > 1 and words[-1] != "by" and words[0] not in OFFLINE_STOP_WORDS and words[0].endswith("s")
        and not words[0].endswith("ss"))
    # a label of function words only ("about") names neither end
    return not acts and not form.of_form and any(w not in OFFLINE_STOP_WORDS for w in words)


def shared_label_words(relations, typed: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """Content words used by more than one distinct relation label (an `_inverse` twin counts as its base; the labels
    in `typed` read with their type segment), each with the relations whose label uses it."""
    users: dict[str, set[str]] = {}
    for relation in relations:
        for word in set(label_words(relation, relation in typed).split()) - OFFLINE_STOP_WORDS:
            users.setdefault(word, set()).add(relation)
    return {w: sorted(rs) for w, rs in sorted(users.items())
            if len({label_words(r, r in typed) for r in rs}) > 1}


def _inferred(type_name: str) -> bool:
    """Whether a type was inferred from a relation's role (`relation:object`, `relation:subject`)."""
    return type_name.endswith((":object", ":subject"))


@lru_cache(maxsize=1 << 16)
def type_words(type_name: str) -> str:
    """A type name as words. An inferred type is a relation's object or subject: the object of `is_in_country` is
    what the relation names (`is in country`), its subject has no name of its own in the graph (""), so a club
    typed `is_in_country:subject` does not already explain "where" or "country" before the step that reaches one."""
    if type_name.endswith(":object"):
        return property_words(type_name.rsplit(":", 1)[0])
    if type_name.endswith(":subject"):
        return ""
    return relation_words(type_name)


def step_query(relation: str, type_name: str, typed: frozenset[str] = frozenset()) -> str:
    """The search phrase for a hop: the relation's words (with its type segment if in `typed`: `label_words`) and the
    target type's words (each once)."""
    relation_text, type_text = label_words(relation, relation in typed), type_words(type_name)
    return relation_text if type_text in ("", relation_text) else f"{relation_text} {type_text}".strip()
