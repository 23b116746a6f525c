"""CS-RAG planning: a question as an ordered plan of atomic constraints (h, r, t) over entities and variables.

A term is an entity mention (any text) or a typed variable (`?film`, `?person1`). Each constraint carries up to
`csrag.variants` relation phrasings. Plans come from the backbone or the offline planners (`kgr.methods.csrag.planner`):
the offline policy's walk over the graph (`kgr.methods.csrag.chains`) when it is sure of it, else the planner over
the graph's relation labels below, which reads the graph itself:

1. Anchor mentions: the bracketed mentions of the question; else entity names occurring in it (longest
   non-overlapping matches, whole words, casefolded); else the entity whose name tokens the question covers best
   (at least `csrag.min_coverage` of them); else the entity whose embedding is closest to the question (these two
   are guesses, and the plan's warnings say so when the words are less alike the entity than
   `anchors.min_similarity`). A mention names the entities spelled like it, else those at least
   `anchors.min_similarity` alike it (cosine), else none.
2. The question's residual (the text without its mentions) is embedded once, and so is every relation label of the
   graph in plain words (`kgr.graph.relation_words`, once per store).
3. Hop by hop from each anchor: the labels of the relationships around the current frontier (both directions, not
   the edges already walked) are ranked by cosine to the residual; the best becomes the constraint's relation and
   the top m its variants; the frontier moves to that relation's far endpoints, named by a variable typed after
   their most common entity type.
   When the frontier has no unwalked edges, when a previous hop was planned from the vocabulary (its targets are
   unknown), or when some label elsewhere in the graph matches the residual `csrag.global_margin` better than every
   label around the frontier, the hop is planned from the graph's label vocabulary instead (variants: only labels
   within `global_margin` of the best). After a first hop, that vocabulary holds only the labels that follow the
   previous one in the graph (`PlanIndex.follows`: a date of birth follows a mother, nothing follows a date; at
   least `follow_min_edges` edges and `follow_min_share` of the previous label's, so stray edges do not count), minus
   those already walked; so a frontier of true leaves ends the chain while an entity that merely lost
   its edges does not. Vocabulary labels are ranked with their best continuation (`_with_continuation`), which
   puts "mother" before "date of birth" in "X's mother's birthday" though "birthday" matches better (two labels
   closest to the same word, like father and spouse to "husband", make no chain).
   A damaged graph may have lost the asked edge; such a constraint then finds no (or unaligned) candidates and is
   recovered from passages rather than replaced by whatever relation is left.
4. Hop rule: hop 1 is always planned; hop h >= 2 is added only while its best adjacent label scores at least
   `csrag.hop_floor` and no less than hop 1's score minus `hop_margin` / (h - 1) (a further relation that matches the
   question about as well as the first, with a tighter tolerance the longer the chain). Before scoring a hop, the
   words of the labels already used are removed from the residual, or, when the question does not use a label's
   words, the one word closest to it ("husband" for spouse, "paternal" for father), so a further hop must match a
   part of the question the earlier ones did not explain; once no content word is left, the chain ends. At most
   `csrag.max_hops` hops.
   The first hop from the graph takes the label the content word nearest the mention fits (at least
   `csrag.nearest_similarity`; the words on either side at that distance), whatever fits the residual better:
   English nests relations outward from the mention ("the packages that [X] depends on first released").
   Each noun of the possessive chain after a mention ("[X]'s sister's husband") names one hop, in order, once per
   generation of a generational noun ("[X]'s grandparents": two hops along the same label; `lexicon.possessive_chain`),
   once per link of a relative further off ("[X]'s aunt": parent, sibling; `lexicon.kin_nouns`); a kin word for one
   member of a relation's group fits labels as well as its generic kin noun does ("sons" as "child"):
   such a hop takes the label that fits the noun best (if any fits at least `csrag.hop_floor`) instead of the one
   fitting the residual, its variants only the labels within `global_margin` of that fit, and the hop rule does not
   cut it. English names one relation per such noun, however little the encoder makes of it ("grandparents" is 0.29
   from `born in` as a residual, 0.45 from `child of` as a noun).
   A sharing cue ("other", "same", "share", "also", "co-"; `lexicon.CUE_WORDS`) says the answer shares something
   with the anchor: where the chain would end, it walks its last label back once ("which other packages share [X]'s
   license": out along `licensed under` and back to the packages), as the offline policy's `sharing_bonus` reads it.
   A word saying what kind of thing the answer is ("which country", "who"; `lexicon.answer_kind_words`) names the
   types whose members' mean vector it is nearest (`kgr.ranking.named_types`): a label around the frontier whose far
   ends are mostly of such a type ranks `csrag.answer_type` higher and the hop rule does not cut it, until a hop has
   reached that kind ("in which country was [X]'s mother born": on from the town along `located in`).
   A mention's span includes a parenthesis right after it ("Sigrid of Sweden (1566-1633)"): it names the anchor,
   it does not ask for a date.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kgr.config import OfflineConfig
from kgr.embed import TextVectors
from kgr.lexicon import (MENTION, PARENTHESIS, WORD, answer_kind_words, content_tokens, kin_class, possessive_chain,
                         question_words, sharing_cue, tokens, whole_word, without_relative_wh)
from kgr.methods.direction import EITHER, WalkReader, name
from kgr.methods.graph_index import PlanIndex
from kgr.ranking import named_types
from kgr.reach import csr_entries
from kgr.store import GraphStore

if TYPE_CHECKING:
    from kgr.config import CsragConfig
    from kgr.methods.base import Query

# 2: vocabulary hops follow the graph's label succession; 3: hops explain words; 4: no stray follows;
# 5: plans carry warnings, anchors below anchors.min_similarity are unmatched; 6: one hop per possessive-chain noun,
# the word nearest the mention names the first hop, a sharing cue walks the last label back; 7: a word naming the
# answer's kind leads the walk to that kind; 8: a possessed noun's hop varies only to labels as near the noun;
# 9: a relative wh-word is not the word nearest the mention; 10: kin terms as the links they name, a kin word
# reads as its generic kin noun too; 11: "else" a sharing cue; 12: the offline policy's walk plans what it is sure of;
# 13: "what does [X] do" asks for an occupation, and a walk ends on a leaf where nothing goes on in its direction;
# 14: a plan says whether it is hedged (the policy unsure: labels, then walk), which the fill reads; 15: a walk that
# reaches another mention meets it there, both constraining the answer (`chains.meeting_points`); 16: an unsure walk
# is followed by the walks of the policy's next first steps (`csrag.hedge_walks`); 17: a sure one by those near-tied;
# 18: a noun naming the answer's kind names the type the graph's labels call it (`offline.TypeLooks`); 19: a walk whose
# best stop is not of the kind such a noun names goes on toward it (`OfflinePolicy.review`); 20: a constraint along a
# relation between things of one kind keeps the direction the question reads (`Constraint.direction`); 21: a walk goes
# on past entities the graph does not call what the kind noun names (`HopSummary.called`), and the kind noun tells no
# first relation into its type from another (`ChainScorer.affinity`); 22: a wh-word names no step arriving at the
# subject end of a label naming its object ("who" for an author's books), and places only the last step; a plan
# whose best chain is the one relation into the kind the question names is sure (not hedged); 23: a plan whose best
# chain misses the kind a noun of the question clearly names, where another chain reaches it, is unsure (hedged); 24: the
# offline policy's chain score has no role bonus, agent cost or right offset; 25: a noun naming the answer's kind
# explains no step of a chain ending elsewhere unless it fits that step itself, and "was born in" reads as a verb; 26:
# a walk is followed by its continuations near-tied with the one it took (`Continue.also`), as DotRAG follows them;
# 27: the offline policy's last step to the kind a noun names costs as a bridge (DotRAG's plan version 27); 28: it
# reads a Freebase-style label with its type segment (DotRAG's 28); 29: a question naming such a label by its property
# alone is confident (DotRAG's 29); 30: a verb before a mention that owns a noun ("studied under [X]'s teacher") reads
# the hop after the owned noun's, not the first (`WalkReader`); 31: the offline policy is sure of a relation a question
# word names, not of a type's name alone (DotRAG's 30); 32: classes name types (DotRAG's 31); 33: "when"
# names the types spelling dates (DotRAG's 32); 34: entities are called by their classes too (DotRAG's 33); 35:
# "under" leads a verb's doer (DotRAG's 34); 36: a role word naming another way out unsettles one step into the
# named kind (DotRAG's 35)
PLAN_VERSION = 36
_VARIABLE = re.compile(r"^\?[A-Za-z_][\w\-]*$")


class PlanError(ValueError):
    """An unusable plan; the message says what is wrong (it is shown to the model in the repair prompt)."""


def is_variable(term: str) -> bool:
    return term.startswith("?")


def chains_of(constraints: list["Constraint"]) -> list[int]:
    """Per constraint, the number of its chain: constraints sharing a variable, directly or through others, are one
    chain (a hedged plan's walk, its variables renamed apart, is a chain of its own beside the labels')."""
    parent = list(range(len(constraints)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[str, int] = {}
    for i, constraint in enumerate(constraints):
        for term in (constraint.head, constraint.tail):
            if is_variable(term):
                parent[root(i)] = root(first_with.setdefault(term, i))
    return [root(i) for i in range(len(constraints))]


def variable_type(term: str) -> str:
    """The type word of a variable: `?film2` -> `film`."""
    word = re.sub(r"[\d_\-]+$", "", term.lstrip("?")).replace("_", " ").strip()
    return word or "entity"


@dataclass
class Constraint:
    """One atomic constraint: head and tail are mentions or variables; variants are relation phrasings."""

    head: str
    relation: str
    tail: str
    variants: list[str] = field(default_factory=list)
    # "forward": the head is the subject of the relation's stored triples, "backward" their object, "": either (read
    # from the question for a relation between things of one kind: `kgr.methods.direction`)
    direction: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = {"head": self.head, "relation": self.relation, "tail": self.tail, "variants": list(self.variants)}
        return {**data, "direction": self.direction} if self.direction else data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Constraint":
        variants = [str(v) for v in data.get("variants") or data.get("relations") or []]
        relation = str(data.get("relation") or (variants[0] if variants else ""))
        direction = str(data.get("direction") or "")
        if direction not in ("", "forward", "backward"):
            raise ValueError(f"a constraint's direction is forward, backward or empty, not {direction!r}")
        return cls(str(data["head"]), relation, str(data["tail"]), variants or ([relation] if relation else []),
                   direction)

    def text(self) -> str:
        return f"({self.head}, {self.relation}, {self.tail})"


@dataclass
class Plan:
    """An ordered list of constraints; `answer` (optional) names the term the question asks for."""

    question: str
    constraints: list[Constraint]
    answer: str | None = None
    source: str = "offline"  # offline | llm | cache | fallback | stored
    reason: str = ""
    version: int = PLAN_VERSION
    warnings: list[str] = field(default_factory=list)  # guesses the plan rests on (a seed anchor, a fallback)
    # the offline policy was unsure of its walk: the labels' constraints, then the walk's (`planner.hedged`)
    hedged: bool = False

    @property
    def variables(self) -> list[str]:
        return list(dict.fromkeys(t for c in self.constraints for t in (c.head, c.tail) if is_variable(t)))

    @property
    def mentions(self) -> list[str]:
        return list(dict.fromkeys(t for c in self.constraints for t in (c.head, c.tail) if not is_variable(t)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version, "question": self.question, "source": self.source, "reason": self.reason,
            "answer": self.answer, "constraints": [c.to_dict() for c in self.constraints],
            "warnings": list(self.warnings), "hedged": self.hedged,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> "Plan":
        """A stored plan (validated); `source` overrides the recorded one (e.g. "stored")."""
        plan = cls(
            question=str(data.get("question", "")),
            constraints=[Constraint.from_dict(c) for c in data.get("constraints") or []],
            answer=data.get("answer") or None,
            source=source or str(data.get("source", "stored")),
            reason=str(data.get("reason", "")),
            version=int(data.get("version", PLAN_VERSION)),
            warnings=[str(w) for w in data.get("warnings") or []],
            hedged=bool(data.get("hedged", False)),
        )
        return validate_plan(plan)

    def describe(self) -> str:
        return " ; ".join(c.text() for c in self.constraints)


def validate_plan(plan: Plan) -> Plan:
    """Return the plan if usable, else raise PlanError naming the first problem."""
    if not plan.constraints:
        raise PlanError("the plan has no constraints; give at least one")
    for number, c in enumerate(plan.constraints, 1):
        for side, term in (("head", c.head), ("tail", c.tail)):
            if not isinstance(term, str) or not term.strip():
                raise PlanError(f"constraint {number} has an empty {side}")
            if is_variable(term) and not _VARIABLE.match(term):
                raise PlanError(f"constraint {number}: {term!r} is not a variable name like ?film")
        if c.head.strip() == c.tail.strip():
            raise PlanError(f"constraint {number} relates {c.head!r} to itself")
        if not c.variants or any(not isinstance(v, str) or not v.strip() for v in c.variants):
            raise PlanError(f"constraint {number} needs at least one non-empty relation variant")
        if not c.relation.strip():
            c.relation = c.variants[0]
    # Every variable must be reachable from a constraint anchored on an entity mention.
    bound: set[str] = set()
    changed = True
    while changed:
        changed = False
        for c in plan.constraints:
            terms = (c.head, c.tail)
            if any(not is_variable(t) or t in bound for t in terms):
                for t in terms:
                    if is_variable(t) and t not in bound:
                        bound.add(t)
                        changed = True
    for variable in plan.variables:
        if variable not in bound:
            raise PlanError(f"variable {variable} is not connected to any constraint that names an entity")
    if plan.answer is not None:
        if not isinstance(plan.answer, str) or plan.answer not in plan.variables + plan.mentions:
            raise PlanError(f"the answer {plan.answer!r} refers to no term of the plan")
    return plan


# -- the offline planner ---------------------------------------------------------------------------------------
def anchor_mentions(index: PlanIndex, query: "Query", settings: "CsragConfig",
                    floor: float = 1.0) -> tuple[list[str], str, list[str]]:
    """The question's anchor mentions, its residual text (the question without them) and warnings: a question
    naming no entity is anchored on a guess (`csrag.min_coverage`), said aloud when its words are less alike the
    entity than `floor`."""
    plain = query.plain
    if query.mentions:
        residual = MENTION.sub(" ", query.text)
        return query.mentions, " ".join(residual.split()), []
    found = index.find_names(plain)
    if found:
        return [plain[s:e] for s, e, _ in found], _without_spans(plain, [(s, e) for s, e, _ in found]), []
    store = index.store
    how: str | None = None
    eid = index.best_covered(plain, settings.min_coverage)
    if eid is None and not store.num_entities:
        return [], plain, []
    if eid is None:
        best, similarities = store.nearest("entities", store.encoder.encode_query(plain), 1)
        eid = int(best[0])
        similarity, how = float(similarities[0]), "the entity most like it"
    name = store.names[eid]
    # the words the name covers, from the first to the last, are the mention
    wanted = content_tokens(name)
    covered = [m for m in WORD.finditer(plain) if m.group().casefold() in wanted]
    spans = [(covered[0].start(), covered[-1].end())] if covered else []
    if how is None:
        words = plain[spans[0][0]:spans[0][1]] if spans else plain
        similarity = float(store.entity_vectors[eid] @ store.encoder.encode_query(words))
        how = f"the entity whose name shares the most of its words ({words!r})"
    warnings = [] if similarity >= floor else [
        f"the question names no entity; its anchor is {how}, {name!r}, at cosine {similarity:.2f}"
        f" < anchors.min_similarity {floor:g}"]
    return [name], _without_spans(plain, spans), warnings


def _without_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` without the mention spans, each with the parenthesis that may follow it ("X (1566-1633)")."""
    parts, last = [], 0
    for start, end in spans:
        parts.append(text[last:start])
        follow = PARENTHESIS.match(text, end)
        last = follow.end() if follow else end
    parts.append(text[last:])
    return " ".join(" ".join(parts).split())


def _mention_end(question: str, mention: str) -> int:
    """Where the mention ends in the question (its bracketed form first), -1 if it is not written there."""
    at = question.find(f"[{mention}]")
    if at >= 0:
        return at + len(mention) + 2
    at = question.casefold().find(mention.casefold())
    return at + len(mention) if at >= 0 else -1


def _nearest_named(words: list[tuple[str, float]], word_vectors: dict[str, np.ndarray], label_vectors: np.ndarray,
                   settings: "CsragConfig") -> int | None:
    """The label (row of `label_vectors`) the content word nearest the mention names, if that word fits it at least
    `csrag.nearest_similarity`: English nests relations outward from the mention, so that word names the first hop
    ("when were the packages that [X] depends on first released": depends on, though "first released" fits the
    question better), as the offline policy's `nearest_cost` assumes; `words` are the question's words with their
    distances from the mention (`lexicon.question_words`). Words after the mention count as near as words before it
    (the offline policy once counted them 0.5 farther; the dev suite read alike without it)."""
    placed = [(distance, word) for word, distance in words if word in word_vectors]
    if not placed or not len(label_vectors) or settings.nearest_similarity > 1.0:
        return None
    closest = min(distance for distance, _ in placed)
    fits = np.stack([word_vectors[word] for distance, word in placed if distance == closest]) @ label_vectors.T
    return int(np.argmax(fits.max(axis=0))) if fits.max() >= settings.nearest_similarity else None


def _hop_floor(hop: int, first_score: float | np.ndarray, settings: "CsragConfig") -> float | np.ndarray:
    """The hop rule: the least score hop `hop` >= 2 may have, given hop 1's score (scalar or array)."""
    return np.maximum(settings.hop_floor, first_score - settings.hop_margin / (hop - 1))


def _with_continuation(sims: np.ndarray, labels: np.ndarray, everywhere: np.ndarray, follows: np.ndarray,
                       hop: int, first_score: float | None, named: np.ndarray, word_of: np.ndarray,
                       settings: "CsragConfig") -> np.ndarray:
    """Vocabulary labels ranked by their own score plus that of the best other label that can follow them.

    With no frontier to say which asked relation comes first ("X's mother's birthday" asks for both), the graph
    does: nothing follows a birthday, a birthday often follows a mother. A label the hop rule would refuse ranks
    last (at hop 1: one not within `csrag.hop_margin` of the best); a continuation counts only where the hop rule would
    take it as the next hop, and only when the two labels are closest to different words of the question
    (`word_of`: each label's closest word, -1 for none): "husband" evokes both a father and a spouse, which makes
    no father-then-spouse chain.
    """
    # a first hop must be asked about nearly as much as the best label (as a second hop must be to follow it),
    # or be named in the question word for word
    first = sims if first_score is None else np.full(sims.shape, first_score)
    passes = named | (sims >= _hop_floor(max(hop, 2), float(sims.max()) if first_score is None else first_score,
                                         settings))
    going = np.zeros(sims.shape)
    if hop < settings.max_hops and labels.size:
        # over the (label, follower) pairs only: a dense labels x labels pass costs ~0.2 s on open vocabularies
        if hasattr(follows, "indptr"):  # CSR: (row in `labels`, follower label) of each nonzero of those rows
            entries, counts = csr_entries(follows.indptr, labels)
            rows, cols = np.repeat(np.arange(labels.size), counts), follows.indices[entries]
        else:
            rows, cols = follows[labels].nonzero()
        onward = (cols != labels[rows]) & ((word_of[labels][rows] != word_of[cols]) | (word_of[cols] < 0))
        best = np.full(labels.size, -np.inf)
        np.maximum.at(best, rows[onward], everywhere[cols[onward]])
        going = np.where(best >= _hop_floor(hop + 1, first, settings), best, 0.0)
    return np.where(passes, sims + going, sims - 2.0)  # cosines are at most 1: refused labels rank after the rest


def _explained_words(text: str, label: str, word_vectors: dict[str, np.ndarray], label_vector: np.ndarray,
                     floor: float) -> str:
    """The words of `text` a hop along `label` explains: the label's own words where the text has them, else the
    one word closest to the label ("husband" for spouse) if at least `floor` alike it (`csrag.hop_floor`), so a
    further hop must match something else."""
    if content_tokens(label) & content_tokens(text):
        return label
    words, cosines = _word_label_cosines(text, word_vectors, label_vector[None, :])
    if not words:
        return label
    best = int(np.argmax(cosines[:, 0]))
    return f"{label} {words[best]}" if cosines[best, 0] >= floor else label


def _word_label_cosines(text: str, word_vectors: dict[str, np.ndarray],
                        label_vectors: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The embedded content words of `text` (sorted) and their cosines (rows) to every label (columns)."""
    present = _embedded_words(text, word_vectors)
    if not present:
        return [], np.zeros((0, len(label_vectors)))
    return present, np.stack([word_vectors[w] for w in present]) @ label_vectors.T


def _embedded_words(text: str, word_vectors: dict[str, np.ndarray]) -> list[str]:
    """The content words of `text` that have a vector, sorted."""
    return sorted(w for w in content_tokens(text) if w in word_vectors)


def _after_hop(text: str, label: str, word_vectors: dict[str, np.ndarray], label_vector: np.ndarray,
               floor: float) -> str:
    """What of `text` is left for the next hop once a hop along `label` explained its words."""
    return _drop_words(text, _explained_words(text, label, word_vectors, label_vector, floor)) or text


def _drop_words(text: str, words: str) -> str:
    for word in tokens(words):
        text = re.sub(whole_word(word), " ", text, flags=re.IGNORECASE)
    return " ".join(text.split())


# how close to its best type a kind word's other types must be to be named too, and how far every type it does not
# name must trail it: the offline policy's answer_type_margin and answer_type_clarity defaults (this planner reads the
# csrag section only; the project's offline settings are the walk's, `kgr.methods.csrag.chains`)
KIND_MARGIN, KIND_CLARITY = OfflineConfig().answer_type_margin, OfflineConfig().answer_type_clarity


def _kind_named_entities(store: GraphStore, question: str, vectors: TextVectors,
                         settings: "CsragConfig") -> np.ndarray | None:
    """Per entity, whether a type of it is named by the word saying what kind of thing the answer is ("which
    country": the type whose members' mean vector is nearest "country", `kgr.ranking.named_types`); None when the
    question has no such word, it names no type, or `csrag.answer_type` is off."""
    kinds = sorted(answer_kind_words(question))
    if not kinds or settings.answer_type <= 0 or not len(store.type_names):
        return None
    named = named_types(vectors(kinds), store.type_centroids, KIND_MARGIN, KIND_CLARITY).any(axis=0)
    if not named.any():
        return None
    held = np.concatenate([[0], np.cumsum(named[store.type_ids])])  # named types among each entity's types
    return held[store.type_indptr[1:]] > held[store.type_indptr[:-1]]


def _mostly(flags: np.ndarray, eids: list[int]) -> bool:
    """Whether at least half of `eids` are flagged (none: no)."""
    return bool(eids) and float(flags[eids].mean()) >= 0.5


def _reaching(of_kind: np.ndarray, labels: np.ndarray, edge_labels: np.ndarray, far: np.ndarray) -> np.ndarray:
    """Per label (sorted), whether at least half of the far ends of its edges here are of the answer's kind."""
    slot = np.searchsorted(labels, edge_labels)
    hits = np.bincount(slot, weights=of_kind[far].astype(float), minlength=labels.size)
    return hits >= 0.5 * np.bincount(slot, minlength=labels.size)


def _type_word(store: GraphStore, eids: list[int], label: str) -> str:
    """A variable name for entities: their most common type, preferring a type named after the relation."""
    counts = Counter(t for e in eids for t in store.types_of(e))
    if not counts:
        return "x"
    slug = variable_slug(label)
    ranked = sorted(counts, key=lambda t: (slug not in t.casefold(), -counts[t], t))
    return variable_slug(ranked[0])


def variable_slug(text: str) -> str:
    """Text as a variable name: `place of birth` -> `place_of_birth` (`x` if nothing usable is left)."""
    word = re.sub(r"\W+", "_", text.casefold()).strip("_")
    return word if word and word[0].isalpha() else "x"


def offline_plan(index: PlanIndex, query: "Query", settings: "CsragConfig", floor: float = 1.0,
                 vectors: TextVectors | None = None,
                 anchored: tuple[list[str], str, list[str]] | None = None) -> Plan:
    """Plan from the graph alone (see the module docstring) by the `csrag` settings; `floor` is
    anchors.min_similarity, `anchored` the question's `anchor_mentions` when already read."""
    store = index.store
    vectors = TextVectors(store.encoder) if vectors is None else vectors
    variants, max_hops, margin = settings.variants, settings.max_hops, settings.global_margin
    follow_rule = (settings.follow_min_edges, settings.follow_min_share)
    mentions, residual, warnings = anchored or anchor_mentions(index, query, settings, floor)
    warnings = list(warnings)
    constraints: list[Constraint] = []
    used_names: Counter[str] = Counter()
    label_vectors = index.label_vectors if store.relation_labels else np.zeros((0, 1), dtype=np.float32)
    hops_trace = []
    # the residual and its words (for the labels they name) in one encoder call
    chains = {mention: possessive_chain(query.text, end) if (end := _mention_end(query.text, mention)) >= 0 else []
              for mention in mentions}
    owned_nouns = {noun for chain in chains.values() for _, noun in chain}
    kin_classes = {noun: kin for noun in owned_nouns if (kin := kin_class(noun))}  # "sons" reads as "child" too
    asked_words = sorted(content_tokens(residual) | owned_nouns | set(kin_classes.values())) \
        if mentions and len(label_vectors) else []
    first_text = residual or query.plain
    word_vectors = index.word_vectors(asked_words, first_text, vectors) if mentions else {}
    word_label_cosines: dict[str, np.ndarray] = {}  # a question word's cosines to every label, computed once
    of_kind = _kind_named_entities(store, query.text, vectors, settings) if mentions else None

    def word_cosines(text: str) -> np.ndarray:
        """The cosines of `text`'s embedded content words (rows, sorted) to every label (columns)."""
        present = _embedded_words(text, word_vectors)
        missing = [w for w in present if w not in word_label_cosines]
        if missing:
            word_label_cosines.update(zip(missing, np.stack([word_vectors[w] for w in missing]) @ label_vectors.T))
        return np.stack([word_label_cosines[w] for w in present]) if present else np.zeros((0, len(label_vectors)))
    for mention in mentions:
        placed_words = without_relative_wh(question_words(query.text, mention), query.text)  # by distance
        sharing = sharing_cue(placed_words)
        anchors = list(index.match_anchors(mention, settings.anchor_matches, floor).eids)
        frontier, walked, head = anchors, set(), mention
        first_score = None
        walked_labels: list[int] = []
        arrived = (True, False)  # the walk reached the tails / the heads of the previous hop's edges
        remaining = residual
        # each noun of the mention's possessive chain names a hop, in order ("[X]'s grandparents": two parent hops)
        owned = [item for item in chains[mention] if item[1] in word_vectors]
        last_noun = None  # the possessed noun (as written, and the kin noun it chains) the last hop was for
        everywhere = np.zeros(0)  # the previous hop's cosines of the question to every label (read from hop 2 on)
        went_back = not sharing  # a sharing cue walks the chain's last label back once where the chain would end
        reached_kind = False  # a hop has led to the answer's kind: the kind word asks for no further hop
        reader = WalkReader(query.text, mention, index.links_siblings) if settings.read_direction else None
        for hop in range(1, max_hops + 1):
            rids, near, far = index.incident(frontier)
            keep = np.array([r not in walked for r in rids.tolist()], dtype=bool)
            rids, near, far = rids[keep], near[keep], far[keep]
            labels = np.unique(store.relation_ids[rids])
            back = not went_back and hop > 1 and walked_labels[-1] in labels
            if hop > 1 and asked_words and not content_tokens(remaining) and not back:
                break  # the hops so far explain every word the question has
            # Where a walk can go on at all: after a hop, only the labels that follow its label somewhere in the graph.
            if not walked_labels:
                vocabulary = np.arange(len(label_vectors))
            else:
                follows = np.any([m[walked_labels[-1]] for m, on in zip(index.follows(*follow_rule), arrived) if on],
                                 axis=0)
                # a label already walked explains nothing new: from the vocabulary it would only repeat itself
                follows[walked_labels] = False
                vocabulary = np.flatnonzero(follows)
            if 1 < hop < max_hops and word_vectors:
                # The next hop's text depends on the label this one picks, known only once this text is encoded:
                # the texts the likeliest labels (by the previous hop's cosines) would leave ride along with it.
                likely = [int(pool[i]) for pool in (labels, vocabulary)
                          for i in np.argsort(-everywhere[pool], kind="stable")[:settings.likely_labels]]
                vectors.expect(text for text in (_after_hop(remaining, index.label_words[label], word_vectors,
                                                            label_vectors[label], settings.hop_floor)
                                                 for label in likely)
                               if content_tokens(text))
            vector = vectors([remaining or query.plain])[0]
            everywhere = question_fit = label_vectors @ vector if len(label_vectors) else np.zeros(0)
            if labels.size == 0 and vocabulary.size == 0:
                break  # the chain reached leaves (dates, places): nothing in the graph ever goes on from there
            possessed = possessed_noun = None
            while owned and possessed is None:
                word, noun = owned.pop(0)
                fits = label_vectors @ word_vectors[noun]
                if noun in kin_classes and kin_classes[noun] in word_vectors:
                    fits = np.maximum(fits, label_vectors @ word_vectors[kin_classes[noun]])
                # a noun no label here or onward fits ("the name of [X]") names no hop
                if fits[np.concatenate([labels, vocabulary])].max() >= settings.hop_floor:
                    possessed, possessed_noun, everywhere = word, noun, fits
            source = "graph"
            if vocabulary.size and (labels.size == 0
                                    or everywhere[vocabulary].max() >= everywhere[labels].max() + margin):
                # The question asks for a relation the frontier does not have (the graph may have lost the edge):
                # plan it from the whole vocabulary, so retrieval finds it unresolved and recovers it from text.
                labels, source = vocabulary, "vocabulary"
            if labels.size == 0:
                break
            sims = everywhere[labels]
            rank = sims
            if source == "vocabulary":
                cosines = word_cosines(remaining)
                # named word for word, or by a synonym ("husband" names the spouse relation)
                named = index.labels_named_by(content_tokens(remaining))[labels]
                named |= cosines[:, labels].max(axis=0, initial=-1.0) >= settings.synonym_similarity
                word_of = cosines.argmax(axis=0) if len(cosines) else np.full(len(label_vectors), -1)
                rank = _with_continuation(sims, labels, everywhere, index.follows_rows(*follow_rule), hop, first_score,
                                          named, word_of, settings)
            reaches_kind = np.zeros(labels.size, dtype=bool)
            if of_kind is not None and not reached_kind and source == "graph" and possessed is None:
                reaches_kind = _reaching(of_kind, labels, store.relation_ids[rids], far)
                rank = rank + settings.answer_type * reaches_kind
            if hop == 1 and source == "graph" and possessed is None:
                nearest = _nearest_named(placed_words, word_vectors, label_vectors[labels], settings)
                if nearest is not None:
                    rank = np.where(np.arange(labels.size) == nearest, rank + 2.0, rank)  # cosines are at most 1
            order = np.lexsort((labels, -rank))
            walking_back = back and source == "graph" and hop > 1 and (
                not content_tokens(remaining)
                or (possessed is None and float(sims[order[0]]) < _hop_floor(hop, first_score, settings)))
            if walking_back:  # "which other packages share [X]'s license": out along the license and back
                possessed, went_back = None, True
            if walking_back or (possessed is not None and (possessed, possessed_noun) == last_noun
                                and walked_labels[-1] in labels):
                # the last label again: back after a sharing cue, or one generation more ("grandmother")
                order = np.concatenate([np.flatnonzero(labels == walked_labels[-1]),
                                        order[labels[order] != walked_labels[-1]]])
            best, score = int(labels[order[0]]), float(sims[order[0]])
            hops_trace.append({"mention": mention, "hop": hop, "label": index.label_words[best],
                               "score": round(score, 4), "from": source, "noun": possessed, "back": walking_back,
                               "kind": bool(reaches_kind[order[0]])})
            if hop > 1 and possessed is None and score < _hop_floor(hop, first_score, settings) and not walking_back \
                    and not reaches_kind[order[0]]:
                break
            chosen = store.relation_ids[rids] == best
            direction = EITHER
            if reader is not None:
                from_subject = store.src[rids[chosen]] == near[chosen]
                chosen[chosen], direction, _ = reader.keep(store.relation_labels[best], from_subject)
            targets = list(dict.fromkeys(far[chosen].tolist()))
            word = _type_word(store, targets, index.label_words[best]) if targets else \
                variable_slug(index.label_words[best])
            used_names[word] += 1
            variable = f"?{word}{used_names[word]}"
            top = order[:max(1, variants)]
            # only near-synonyms: other relations would bind whatever the anchor has (from the vocabulary), or what a
            # possessed noun does not name ("[X]'s grandchildren": not X's sex or birthplace)
            if source == "vocabulary" or possessed is not None:
                top = [i for i in top if rank[i] >= rank[order[0]] - margin]
            words = [index.label_words[int(labels[i])] for i in top]
            constraints.append(Constraint(head, index.label_words[best], variable, words, name(direction)))
            walked.update(rids[chosen].tolist())
            if targets:
                forward = store.dst[rids[chosen]] == far[chosen]
                arrived = (bool(forward.any()), bool((~forward).any()))
            else:
                arrived = (True, False)
            frontier, head = targets, variable
            reached_kind = reached_kind or (of_kind is not None and _mostly(of_kind, targets))
            walked_labels.append(best)
            if reader is not None:
                reader.take(store.relation_labels[best])
            # the hop rule weighs further hops against how well the question, not a noun, asks for the first
            first_score = float(question_fit[best]) if first_score is None else first_score
            last_noun = (possessed, possessed_noun) if possessed is not None else None
            if possessed is None or all(word != possessed for word, _ in owned):  # a generation more: not yet
                remaining = _after_hop(remaining, index.label_words[best], word_vectors, label_vectors[best],
                                       settings.hop_floor)
    answer = constraints[-1].tail if constraints else None
    plan = Plan(query.plain, constraints, answer=answer, source="offline",
                reason="; ".join(f"{h['mention']} hop {h['hop']}: {h['label']} ({h['score']}"
                                  + (f", for {h['noun']!r}" if h["noun"] else "")
                                  + (", back: a sharing cue" if h["back"] else "")
                                  + (", to the answer's kind" if h["kind"] else "")
                                  + (", from the vocabulary)" if h["from"] == "vocabulary" else ")")
                                  for h in hops_trace), warnings=warnings)
    return plan
