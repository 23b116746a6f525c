"""The offline policy: DotRAG's decisions made deterministically from embeddings, with no LLM.

It knows nothing about any dataset. Everything comes from the question and the graph: the relation labels and
entity types offered at each step, and the graph's type-level schema (which relation joins which types) for
looking ahead. A candidate *chain* is a sequence of steps (relation, type) leaving the anchor. Its score is how
well its steps explain the question's content words:

    score = sum over words w of max over steps i of sim(w, step i)  -  step_cost * len(chain)
            - unsupported * [a step explains no word best]  -  order_cost * [order inversions]
            - nearest_cost * [the placed word nearest the mention is not the first step's]
            - agent_cost * [the anchor is a passive verb's agent and the chain leaves by another role]
            + typicality * sum over steps of log-typicality(step)

sim(w, step) is the larger cosine between the word and the step's relation words or type words. A word that names a
label word several relations share ("play" ~ the `plays` of `plays_in_club`, `plays_position`, `plays_for_country`;
cosine >= `shared_word_similarity`) says nothing about which of them is asked, so it fits each of their steps as well
as the best of them, and the other words decide ("which team does [X] play for": club). Words that only
describe the anchor itself (next to its mention and similar to one of its types, as in "the film [X]"; not a noun
joined to it by "of", as in "director of [X]", which asks for X's director) are left out of the sum; such a role
word names the anchor's way out, the most frequent relation leaving the type it describes ("the director [X]":
directed by), so a first step along that relation counts as supported ("who are the actors of the director [X]"
is two steps, though no other word names the first) and gets `role_bonus`. Likewise the mention after "by" is
the agent of the verb before it: "the films acted by [X]", for an X who acts and writes, leaves X by the way out of
the type the verb names (acting), and other first steps pay `agent_cost`.
English nests relations outward from the mention ("the directors of the films written by [X]"), so a step nearer
the anchor should explain words nearer the mention: the mean distance of each step's words should not be smaller
than the previous step's, and each inversion costs `order_cost`. Only words that prefer their step by
`order_margin` over every other step place it (`who` fits an actor and a movie almost equally and says nothing
about order). Words after the mention count `right_offset` farther. The mean can hide an inverted pair ("which
person wrote the films acted by [X]": "acted" is next to the mention, so acting is the first step), so the placed
word nearest the mention must also belong to the first step, or the chain pays `nearest_cost`.
Words that say the answer shares a neighbour with the anchor ("co-starred", "share", "also", "same", ...) are
English, not any graph's: when one is present, a chain that goes out and comes back to a type through the same
relation (actor -> movie -> actor) earns `sharing_bonus`, and the cue counts as what both steps of that pair explain.
Log-typicality (kgr.methods.dotrag.method.step_priors) is 0 for a relation's dominant reading and negative for readings
that only exist because entities carry several types.
The best chain decides the trajectory ranking, each continuation and where to stop; `confident` says whether any
question word names a reachable step at all (else DotRAG hedges over several trajectories).
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np

from kgr.methods.dotrag.policy import AnchorOption, Continue, HopSummary, Policy, Step, Stop, TrajectoryOption
from kgr.config import OfflineConfig
from kgr.graph import relation_words

_WORD = re.compile(r"[a-z0-9']+(?:-[a-z0-9']+)*")
# English possessive endings: "[X]'s father's father" is the words father, father (not 's, father's, father)
_POSSESSIVE = re.compile(r"'s?$|^'")
_MENTION = re.compile(r"\[([^\[\]]+)\]")
# Generic English function words: they carry no relation or type meaning in any graph.
STOP_WORDS = frozenset(
    "a an the of in on at is are was were be been being did do does done what which whom whose how that this these "
    "those with by for to and or as from their its his her they them there it he she i you we me my our your "
    "any some can could would should will shall may might has have had about into than then so such".split()
)

# "director of [X]": a noun joined to the mention by "of" (a co- noun keeps describing X: "co-directors of [X]")
_OF_MENTION = re.compile(r"([\w-]+)\s+of\s+\[")
# "the films acted by [X]": the mention is the agent of the verb before "by"
_BY_MENTION = re.compile(r"([\w-]+)\s+by\s+\[")
# English cues that the answer is reached through something it shares with the anchor.
SHARING_CUES = frozenset({"share", "shares", "shared", "sharing", "same", "also", "together", "fellow"})
# ... and with the `co` that `question_words` splits off "co-starred": cues, never words the scorers read
CUE_WORDS = SHARING_CUES | {"co"}

Chain = tuple[tuple[str, str], ...]  # ((relation, type), ...) from the anchor outward


def question_words(question: str, anchor_name: str, right_offset: float = 0.0) -> list[tuple[str, float]]:
    """Content words outside the anchor's mention, each with its distance (in words) from the mention.

    The mention is the bracketed one naming the anchor (else the first); the words of other bracketed mentions name
    other entities, not the way to the answer. A `co-` prefix is a sharing cue: `co-starred` gives the word
    `starred` and the cue word `co`.
    """
    mentions = list(_MENTION.finditer(question))
    mention = next((m for m in mentions if m.group(1).casefold() == anchor_name.casefold()),
                   mentions[0] if mentions else None)
    if mention:
        left, right = (_MENTION.sub(" ", part) for part in (question[:mention.start()], question[mention.end():]))
    else:
        lowered, name = question.lower(), anchor_name.lower()
        at = lowered.find(name)
        left, right = (question[:at], question[at + len(name):]) if at >= 0 and name else ("", question)
    words = []
    # a possessive ending is no word of its own: in "[X]'s mother" the mother is the word next to the mention
    left_words, right_words = ([w for w in (_POSSESSIVE.sub("", w) for w in _WORD.findall(side.lower())) if w]
                               for side in (left, right))
    for distance, word in [(len(left_words) - k, w) for k, w in enumerate(left_words)] + \
                          [(k + 1 + right_offset, w) for k, w in enumerate(right_words)]:
        if word.startswith("co-") and len(word) > 3:
            words.append(("co", distance))
            word = word[3:]
        for part in word.split("-"):
            if part and part not in STOP_WORDS:
                words.append((part, distance))
    return words


def sharing_cue(words: list[tuple[str, float]]) -> bool:
    """True when the question says the answer shares something with the anchor."""
    return any(w in CUE_WORDS for w, _ in words)


# Compiled chain groups memoized (OfflinePolicy._chain_arrays): groups of at most 1,000 chains, 200,000 chains in all
# before the memo starts afresh (tens of MB at most)
_GROUP_CHAINS, _CHAINS_KEPT = 1000, 200_000
RECENT_SCORERS = 8  # a question's anchors (rarely more than 3)
_PAIR_BASE = 1 << 32  # (type number, step id) as one int64 key: both stay far below 2**31


class OfflinePolicy(Policy):
    """Deterministic decisions from embeddings of the question, relation labels and type names."""

    name = "offline"

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray], schema: dict[str, list[tuple[str, str]]],
                 max_hops: int = 3, settings: OfflineConfig | None = None,
                 priors: dict[tuple[str, str, str], float] | None = None):
        self._embed = embed
        self._priors = priors or {}
        self._groups: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._memoized = 0  # chains in _groups
        self._step_ids: dict[tuple[str, str], int] = {}  # every step a scored chain has taken, numbered
        self._step_list: list[tuple[str, str]] = []
        self._step_relation: list[int] = []  # per step id, its relation's number
        self._step_type: list[int] = []  # per step id, its target type's number
        self._relation_numbers: dict[str, int] = {}
        self._type_numbers: dict[str, int] = {}
        self._type_names: list[str] = []
        self._tail_rows_memo: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
        self.schema = schema
        self._schema_steps = {t: set(steps) for t, steps in schema.items()}
        # label words several relations share, each with the relations using it ("plays": plays_in_club, ...)
        self._shared = shared_label_words({r for steps in schema.values() for r, _ in steps})
        self._shared_vectors: np.ndarray | None = None
        self.max_hops = max_hops
        self.settings = settings or OfflineConfig()
        self._vectors: dict[str, np.ndarray] = {}
        self._graph_texts: frozenset[str] = frozenset()  # the texts `warm` encoded: kept across questions
        self._crowded: tuple | None = None
        self._recent_scorers: dict[tuple, Callable] = {}
        self._scorers_lock = threading.Lock()

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
        scorer = self._scorer(question, anchor)
        blocks = [block for _, block in self._option_chains(options, [], anchor.types, self.max_hops - 1, scorer)]
        ids, lengths = _stacked(blocks)
        scores = scorer.rows(ids, lengths)
        owner = np.repeat(np.arange(len(options)), [len(block_lengths) for _, block_lengths in blocks])
        best = np.full(len(options), -np.inf)
        np.maximum.at(best, owner, scores)
        order = sorted(range(len(options)), key=lambda i: (-best[i], i))
        candidates = np.flatnonzero(owner == order[0])
        relation, type_name = self._step_list[ids[candidates[int(np.argmax(scores[candidates]))], 0]]
        return order, step_query(relation, type_name)

    def confident(self, qid: str, question: str, anchor: AnchorOption, options: list[TrajectoryOption]) -> bool:
        """Whether some word of the question clearly names a relation or type the anchor's trajectories can reach.

        Without such a word ("describe [X] in a few words") the ranking is a guess, and DotRAG hedges by
        following several trajectories instead of one.
        """
        steps = {(r, o.type) for o in options for r in o.relations}
        scorer = self._scorer(question, anchor)
        for option in options:
            rows, _ = self._tail_rows(option.type, self.max_hops - 1, scorer)
            steps |= {self._step_list[i] for i in np.unique(rows[rows >= 0]).tolist()}
        best = scorer.best_match(sorted(steps))
        return best is None or best >= self.settings.confident_similarity

    def review(self, qid: str, question: str, anchor: AnchorOption, walk: list[HopSummary],
               options: list[TrajectoryOption], max_hops: int) -> Step:
        scorer = self._scorer(question, anchor)
        done: Chain = tuple((h.relation, h.type) for h in walk)
        done_ids = [self._step_id(step) for step in done]
        stops = self._chain_rows(done[:d] for d in range(1, len(done) + 1))  # the walk so far, stopped at each depth
        goes, moves = [], []
        if len(done) < max_hops:
            chains = self._option_chains(options, done_ids, [done[-1][1]], max_hops - len(done) - 1, scorer)
            for index, (relations, block) in enumerate(chains):
                goes.append(block)
                per_relation = len(block[1]) // len(relations)
                moves += [(index, relation) for relation in relations for _ in range(per_relation)]
        scores = scorer.rows(*_stacked([stops] + goes))
        best_stop = int(np.argmax(scores[:len(done)]))  # the first (shallowest) of equal scores
        stop_score, margin = scores[best_stop], self.settings.tie_margin
        if goes:
            go_scores = scores[len(done):]
            best_go = int(np.argmax(go_scores))
            go_score = go_scores[best_go]
            # recall first: a near tie continues and keeps the walk so far; near-tied options are searched too
            if go_score > stop_score or (margin > 0 and go_score > stop_score - margin):
                index, relation = moves[best_go]
                also: dict[int, str] = {}
                for k in np.argsort(-go_scores, kind="stable"):
                    other, other_relation = moves[k]
                    if go_scores[k] < go_score - margin or margin <= 0:
                        break
                    if other != index and other not in also:
                        also[other] = step_query(other_relation, options[other].type)
                keep = [best_stop + 1] if margin > 0 and abs(go_score - stop_score) < margin else []
                return Continue(index, step_query(relation, options[index].type), list(also.items()), keep)
        return Stop([best_stop + 1])

    def _option_chains(self, options: list[TrajectoryOption], prefix: list[int], from_types: list[str], depth: int,
                       scorer) -> list[tuple[list[str], tuple[np.ndarray, np.ndarray]]]:
        """Per option: its relations from `from_types` (`_relations`), and the chains that take the `prefix` steps, one
        of those relations into the option's type, then each continuation of up to `depth` steps (`_fanned`)."""
        found = []
        for option in options:
            relations = self._relations(option, from_types, scorer.affinity)
            firsts = [self._step_id((relation, option.type)) for relation in relations]
            found.append((relations, _fanned(prefix, firsts, self._tail_rows(option.type, depth, scorer))))
        return found

    # -- vectors -----------------------------------------------------------------------------------------------
    def warm(self) -> None:
        """Embed the schema's step texts, shared label words and type words now, so that the first question does not
        pay for them on its clock; they are kept across questions (`begin_question`)."""
        self._crowded_steps()
        self._shared_matrix()
        self._type_vectors(sorted(set(self.schema) | {b for steps in self.schema.values() for _, b in steps}))
        self._graph_texts = frozenset(self._vectors)

    def hop_queries(self, steps: Iterable[tuple[str, str]]) -> list[str]:
        """Every hop query this policy writes is a step's (`step_query`)."""
        return sorted({step_query(relation, type_name) for relation, type_name in steps})

    def begin_question(self, question: str) -> list[str]:
        """Forget the last question's words and scorers (a question's vectors come from its own encoder passes) and
        return the words this one's scorers will read first (`words_to_expect`)."""
        with self._scorers_lock:
            self._recent_scorers.clear()
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

    # -- scoring -----------------------------------------------------------------------------------------------
    def _chain_arrays(self, ids: np.ndarray, anchor_types: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """For chains of one length (rows of step ids): which steps are part of an out-and-back pair, and each chain's
        prior (`_compile`). The last few groups are memoized whole: on a schema-sized graph the same groups come back
        question after question (an open vocabulary brings thousands of new chains per question, which a memo per
        chain would cost as much to look up as to compile)."""
        memo = len(ids) <= _GROUP_CHAINS
        key = (ids.shape, ids.tobytes(), tuple(anchor_types)) if memo else None
        found = self._groups.get(key) if memo else None
        if found is None:
            found = self._compile(ids, tuple(anchor_types))
            if memo:
                self._memoized += len(ids)
                if self._memoized > _CHAINS_KEPT:
                    self._groups.clear()  # starts afresh (one atomic step: questions may run concurrently)
                    self._memoized = len(ids)
                self._groups[key] = found
        return found

    def _chain_rows(self, chains: Iterable[Chain]) -> tuple[np.ndarray, np.ndarray]:
        """Chains as rows of step ids padded with -1, and their lengths."""
        chains = list(chains)
        lengths = np.fromiter(map(len, chains), dtype=np.int64, count=len(chains))
        rows = np.full((len(chains), int(lengths.max(initial=0))), -1, dtype=np.int64)
        for row, chain in zip(rows, chains):
            row[:len(chain)] = [self._step_id(step) for step in chain]
        return rows, lengths

    def _compile(self, ids: np.ndarray, anchor_types: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """For chains of one length (rows of step ids): which steps are part of an out-and-back pair, and the prior.

        Out and back: a step along the relation just taken, back to the type before it (actor -> movie -> actor is
        "acted together"); both steps of the pair count. The prior: summed log-typicality of the steps, the first from
        the anchor's most typical type (0 where unknown)."""
        n, length = ids.shape
        if length == 0:
            return np.zeros((n, 0), dtype=bool), np.zeros(n)
        relation = np.array(self._step_relation)[ids]
        target = np.array(self._step_type)[ids]
        anchor_type_ids = [self._type_number(t) for t in anchor_types]
        back = np.zeros((n, length), dtype=bool)
        if length > 1:
            back[:, 1] = (relation[:, 0] == relation[:, 1]) & np.isin(target[:, 1], anchor_type_ids)
            back[:, 2:] = (relation[:, 1:-1] == relation[:, 2:]) & (target[:, 2:] == target[:, :-2])
        returning = back.copy()
        returning[:, :-1] |= back[:, 1:]
        step_list, priors = self._step_list, self._priors
        first_ids, first_at = np.unique(ids[:, 0], return_inverse=True)
        first = np.array([max((priors.get((t, *step_list[s]), 0.0) for t in anchor_types), default=0.0)
                          for s in first_ids.tolist()])
        total = first[first_at]
        for k in range(1, length):  # (type before, step) pairs repeat across chains: look each up once
            keys, at = np.unique(target[:, k - 1] * _PAIR_BASE + ids[:, k], return_inverse=True)
            values = np.array([priors.get((self._type_names[key // _PAIR_BASE], *step_list[key % _PAIR_BASE]), 0.0)
                               for key in keys.tolist()])
            total = total + values[at.reshape(-1)]
        return returning, total

    def _step_id(self, step: tuple[str, str]) -> int:
        """The number of a step (relation, type), given on first sight."""
        found = self._step_ids.get(step)
        if found is None:
            found = self._step_ids[step] = len(self._step_list)
            self._step_list.append(step)
            self._step_relation.append(self._relation_numbers.setdefault(step[0], len(self._relation_numbers)))
            self._step_type.append(self._type_number(step[1]))
        return found

    def _type_number(self, type_name: str) -> int:
        found = self._type_numbers.get(type_name)
        if found is None:
            found = self._type_numbers[type_name] = len(self._type_names)
            self._type_names.append(type_name)
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

    def _agent_relation(self, question: str, anchor_types: list[str]) -> str | None:
        """The relation of the anchor's role as the agent of a passive verb ("the films acted by [X]"), for an
        anchor of several types when the verb names one of them clearly (by `order_margin`)."""
        match = _BY_MENTION.search(question)
        if match is None or len(anchor_types) < 2:
            return None
        sims = self._type_similarities([match.group(1).lower()], anchor_types)
        second, first = np.sort(sims)[-2:]
        if first - second < self.settings.order_margin:
            return None  # the verb fits two of the anchor's types about equally: no role to prefer
        return self._way_out(anchor_types[int(np.argmax(sims))])

    def _tail_rows(self, type_name: str, depth: int, scorer) -> tuple[np.ndarray, np.ndarray]:
        """All continuations of up to `depth` steps from a type along the schema, the empty one first, as rows of step
        ids padded with -1 to `depth` and their lengths; built once per scorer (every trajectory into the type
        extends the same tails).

        Along a type with more than `steps_per_type` schema steps (an LLM-built graph has thousands of relation
        phrasings) only the steps most like the question's words are followed (`scorer.schema`): the others explain
        no word and cost the unsupported penalty, and following them all multiplies the chains by the vocabulary."""
        key = (type_name, depth)
        found = scorer.tail_rows.get(key)
        if found is None:
            rows, lengths = np.full((1, depth), -1, dtype=np.int64), np.zeros(1, dtype=np.int64)
            steps = scorer.schema.get(type_name, []) if depth > 0 else []
            if steps:
                tails = [self._tail_rows(next_type, depth - 1, scorer) for _, next_type in steps]
                first = np.repeat(np.array([self._step_id(step) for step in steps], dtype=np.int64),
                                  [len(below) for below, _ in tails])
                rows = np.vstack([rows, np.hstack([first[:, None], np.vstack([below for below, _ in tails])])])
                lengths = np.concatenate([lengths] + [below_lengths + 1 for _, below_lengths in tails])
            found = scorer.tail_rows[key] = (rows, lengths)
        return found

    def _crowded_steps(self) -> tuple[list[tuple[str, list[tuple[str, str]]]], np.ndarray, np.ndarray, np.ndarray]:
        """The types with more than `steps_per_type` schema steps, with their steps; those steps' distinct texts'
        vectors, each step's texts as slots into them and each step's first slot. Built once; every schema step's
        texts are embedded on the way (`warm`)."""
        if self._crowded is None:
            self._vector(list(dict.fromkeys(text for steps in self.schema.values() for r, t in steps
                                            for text in step_texts(r, t))))
            crowded = [(t, steps) for t, steps in self.schema.items() if len(steps) > self.settings.steps_per_type]
            texts = [step_texts(r, t) for _, steps in crowded for r, t in steps]
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
            best = (word_vectors @ self._vector([label_words(r) for r in users]).T).max(axis=1)
            support[:, k] = np.where(named[:, j], best, -np.inf)
            names.append(set(users))
        return names, support

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

    def _scorer(self, question: str, anchor: AnchorOption) -> Callable[[list[Chain]], np.ndarray]:
        """A function scoring many chains at once for this question and anchor (the recent ones are reused: a
        question's ranking, confidence check and reviews all ask for the same, and a walk from each of several anchors
        comes after every anchor's ranking)."""
        key = (question, anchor.name, tuple(anchor.types))
        recent = self._recent_scorers
        scorer = recent.get(key)
        if scorer is None:
            scorer = self._new_scorer(question, anchor)
            with self._scorers_lock:  # questions may run in threads
                recent[key] = scorer
                while len(recent) > RECENT_SCORERS:
                    del recent[next(iter(recent))]  # the oldest
        return scorer

    def _new_scorer(self, question: str, anchor: AnchorOption) -> Callable[[list[Chain]], np.ndarray]:
        settings = self.settings
        words = question_words(question, anchor.name, settings.right_offset)
        sharing = sharing_cue(words)
        words = [(w, d) for w, d in words if w not in CUE_WORDS]
        if words:
            self._vector([w for w, _ in words])  # one encoder call for all of the question's new words
        if words and anchor.types:
            sims = self._vector([w for w, _ in words]) @ self._type_vectors(anchor.types).T
            # "the director [X]" describes X; "director of [X]" asks for X's director
            owned_by_mention = {m.group(1).lower() for m in _OF_MENTION.finditer(question)}
            role = [not (d <= settings.appositive_distance and s > settings.appositive_similarity
                         and w not in owned_by_mention)
                    for (w, d), s in zip(words, sims.max(axis=1))]
            roles = [w for (w, _), keep in zip(words, role) if not keep]
            words = [item for item, keep in zip(words, role) if keep]
        else:
            roles = []
        role_relation = self._role_relation(roles, anchor.types)
        agent_relation = self._agent_relation(question, anchor.types) if settings.agent_cost else None
        word_vectors = self._vector([w for w, _ in words]) if words else None
        distance = np.array([d for _, d in words], dtype=float)
        # a word said twice is two steps ("[X]'s father's father"), unless the answer shares a neighbour with the anchor:
        # then it names that neighbour twice ("the director of [X] is also the director of which films")
        repeated = [] if sharing else _repeated_words(words)
        shared = self._shared_support(word_vectors)

        def similarities(steps: list[tuple[str, str]]) -> np.ndarray:
            """words x steps: each word's best cosine with the step's relation or type phrase or any single word of
            them, so a synonym of one label word ("team" for `plays_in_club`'s "club") is not diluted by the rest."""
            texts = [step_texts(r, t) for r, t in steps]
            # each distinct text once: steps named alike tie exactly (a matrix product may round equal columns apart)
            distinct = {text: i for i, text in enumerate(dict.fromkeys(text for group in texts for text in group))}
            slots = [distinct[text] for group in texts for text in group]
            starts = np.cumsum([0] + [len(group) for group in texts[:-1]])
            sims = np.maximum.reduceat((word_vectors @ self._vector(list(distinct)).T)[:, slots], starts, axis=1)
            if shared is not None:  # "play" supports every `plays ...` step alike
                names, support = shared
                uses = np.array([[r in users for users in names] for r, _ in steps], dtype=bool)  # steps x words
                lifted = np.where(uses[None], support[:, None, :], -np.inf).max(axis=2)  # words x steps
                sims = np.maximum(sims, lifted)
            return sims

        def rows(chain_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
            """Scores of chains given as rows of step ids (padded with -1) and their lengths."""
            if word_vectors is None:
                return np.where(lengths > 0, -settings.step_cost * lengths, -np.inf)
            scores = np.full(len(lengths), -np.inf)
            groups = {length: np.flatnonzero(lengths == length) for length in np.unique(lengths[lengths > 0]).tolist()}
            if not groups:
                return scores
            facts = {}
            for length, members in groups.items():
                group_ids = np.ascontiguousarray(chain_ids[members, :length])
                facts[length] = (group_ids, *self._chain_arrays(group_ids, anchor.types))
            # the distinct steps of these chains, and each chain step's place among them
            every_step = np.concatenate([ids.ravel() for ids, _, _ in facts.values()])
            used, inverse = np.unique(every_step, return_inverse=True)
            step_sims = similarities([self._step_list[i] for i in used.tolist()])
            offset = 0
            for length, members in groups.items():
                ids, returning, priors = facts[length]
                index = inverse[offset:offset + ids.size].reshape(ids.shape)
                offset += ids.size
                sims = step_sims[:, index]  # words x chains x steps
                best_step, credit = sims.argmax(axis=2), sims.max(axis=2)  # words x chains
                for group in repeated:
                    _spread_repeats(sims[group[0]], group, best_step, credit, settings.confident_similarity)
                total = credit.sum(axis=0) - settings.step_cost * length
                owned = np.stack([(best_step == k) for k in range(length)])  # steps x words x chains
                counts = owned.sum(axis=1)
                returning = returning.T  # steps x chains
                # a sharing cue ("together", "co-", "same") is what an out-and-back pair of steps explains
                supported = (counts > 0) | (returning & sharing)
                first_relations = np.array(self._step_relation)[ids[:, 0]]  # relation numbers
                if role_relation is not None:  # "the director [X]": X's directing is the way out
                    leaves_by_role = first_relations == self._relation_numbers.get(role_relation, -1)
                    supported[0] |= leaves_by_role
                    total += settings.role_bonus * leaves_by_role
                total -= settings.unsupported * (~supported).any(axis=0)
                if agent_relation is not None:  # "the films acted by [X]": X's acting is the way out
                    total -= settings.agent_cost * (first_relations != self._relation_numbers.get(agent_relation, -1))
                if length > 1:
                    # only words one step clearly explains best say where that step sits in the sentence
                    top_two = -np.partition(-sims, 1, axis=2)[:, :, :2]
                    placed = owned & (top_two[:, :, 0] - top_two[:, :, 1] >= settings.order_margin)[None]
                    placed_counts = placed.sum(axis=1)
                    means = (placed * distance[None, :, None]).sum(axis=1) / np.maximum(placed_counts, 1)
                    means = np.where(placed_counts > 0, means, np.nan)
                    total -= settings.order_cost * _inversions(means)
                    if settings.nearest_cost:
                        reach = np.where(placed.any(axis=0), distance[:, None], np.inf)  # words x chains
                        nearest = reach.argmin(axis=0)
                        misplaced = np.isfinite(reach.min(axis=0)) & ~placed[0, nearest, np.arange(len(members))]
                        total -= settings.nearest_cost * misplaced
                    returns = returning.any(axis=0).astype(float)
                    total += (settings.sharing_bonus if sharing else settings.return_prior) * returns
                if settings.typicality and self._priors:
                    total += settings.typicality * priors
                scores[members] = total
            return scores

        affinities: dict[str, float] = {}  # a walk's every review orders the same relations again

        def affinity(relation: str) -> float:
            """How well the relation's own words match the question's best word (orders tied choices)."""
            if word_vectors is None:
                return 0.0
            found = affinities.get(relation)
            if found is None:
                found = affinities[relation] = float(
                    (word_vectors @ self._vector([label_words(relation) or relation])[0]).max())
            return found

        def best_match(steps: list[tuple[str, str]]) -> float | None:
            """The highest similarity between any question word and any of the steps (None without content words)."""
            if word_vectors is None or not steps:
                return None
            return float(similarities(steps).max())

        def score(chains: list[Chain]) -> np.ndarray:
            return rows(*self._chain_rows(chains))

        score.rows = rows
        score.affinity = affinity
        score.best_match = best_match
        cut = self._question_schema(word_vectors)
        score.schema, score.tail_rows = (self.schema, self._tail_rows_memo) if cut is None else (cut, {})
        return score


def _fanned(prefix: list[int], firsts: list[int], tails: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Chains that take the `prefix` steps, then one of the `firsts`, then each tail (rows of step ids padded with -1,
    and lengths); ordered first step by first step, as a loop over them and then over the tails would list them."""
    rows, lengths = tails
    width = len(prefix) + 1
    out = np.empty((len(firsts), len(rows), width + rows.shape[1]), dtype=np.int64)  # first step x tail x step
    out[:, :, :len(prefix)] = prefix
    out[:, :, len(prefix)] = np.array(firsts, dtype=np.int64)[:, None]
    out[:, :, width:] = rows
    out_lengths = np.empty((len(firsts), len(rows)), dtype=np.int64)
    out_lengths[:] = lengths + width
    return out.reshape(-1, out.shape[2]), out_lengths.ravel()


def _stacked(blocks: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of chain rows as one matrix, padded with -1 to the widest, and their lengths (in block order)."""
    width = max((rows.shape[1] for rows, _ in blocks), default=0)
    out = np.full((sum(len(rows) for rows, _ in blocks), width), -1, dtype=np.int64)
    start = 0
    for rows, _ in blocks:
        out[start:start + len(rows), :rows.shape[1]] = rows
        start += len(rows)
    return out, np.concatenate([lengths for _, lengths in blocks]) if blocks else np.zeros(0, dtype=np.int64)


def _repeated_words(words: list[tuple[str, float]]) -> list[list[int]]:
    """The places of each word said more than once ("[X]'s father's father"), nearest the mention first."""
    places: dict[str, list[int]] = {}
    for index, (word, _) in enumerate(words):
        places.setdefault(word, []).append(index)
    return [sorted(group, key=lambda i: words[i][1]) for group in places.values() if len(group) > 1]


def _spread_repeats(sims: np.ndarray, group: list[int], best_step: np.ndarray, credit: np.ndarray,
                    fits: float) -> None:
    """A word said k times is explained by k different steps ("[X]'s father's father" is two `father` steps): the
    first time by its best step, as any word, each further time by the next-best step of the chain if that step also
    fits the word by `fits`, else by none (no credit, no step owned). The steps it takes are given to its
    occurrences in sentence order, the one nearest the mention taking the step nearest the anchor (in place,
    on `best_step` and `credit`, words x chains; `sims` is the word's chains x steps)."""
    chains, length = sims.shape
    order = np.argsort(-sims, axis=1, kind="stable")[:, :len(group)]
    ranked = np.take_along_axis(sims, order, axis=1)
    taken = ranked >= fits
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
def label_words(relation: str) -> str:
    """A relation label as words, an `_inverse` twin read as its base relation (`plays_in_club_inverse` -> `plays in
    club`): the walk goes both ways along every edge, so the twin names the same link."""
    words = relation_words(relation)
    base = re.sub(r"(?:^| )inverse$", "", words).strip()
    return base or words


@lru_cache(maxsize=1 << 16)
def step_texts(relation: str, type_name: str) -> tuple[str, ...]:
    """What a step is called: its relation phrase and its type phrase."""
    phrases = [p for p in (label_words(relation), type_words(type_name)) if p] or [relation or type_name]
    return tuple(dict.fromkeys(phrases))


def shared_label_words(relations) -> dict[str, list[str]]:
    """Content words used by more than one distinct relation label (an `_inverse` twin counts as its base), each with
    the relations whose label uses it."""
    users: dict[str, set[str]] = {}
    for relation in relations:
        for word in set(label_words(relation).split()) - STOP_WORDS:
            users.setdefault(word, set()).add(relation)
    return {w: sorted(rs) for w, rs in sorted(users.items()) if len({label_words(r) for r in rs}) > 1}


@lru_cache(maxsize=1 << 16)
def type_words(type_name: str) -> str:
    """A type name as words. An inferred type is a relation's object or subject: the object of `is_in_country` is
    what the relation names (`is in country`), its subject has no name of its own in the graph (""), so a club
    typed `is_in_country:subject` does not already explain "where" or "country" before the step that reaches one."""
    if type_name.endswith(":object"):
        return label_words(type_name.rsplit(":", 1)[0])
    if type_name.endswith(":subject"):
        return ""
    return relation_words(type_name)


def step_query(relation: str, type_name: str) -> str:
    """The search phrase for a hop: the relation's words and the target type's words (each once)."""
    relation_text, type_text = label_words(relation), type_words(type_name)
    return relation_text if type_text in ("", relation_text) else f"{relation_text} {type_text}".strip()
