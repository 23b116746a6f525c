"""Which way a question walks a relation between things of one kind: forward (subject to object, as the graph stores
it), backward, or either.

Where a relation joins two things of one kind (`depends_on`, `CITES`, `child_of`), the type a step reaches does not
tell its direction: "what does [X] depend on" and "which packages depend on [X]" reach packages either way. English
does, with a few marks that hold in any graph:

- a verb's subject stands before it and its object after ("[X] depends on", "which packages depend on [X]", "what
  does [X] depend on"), unless a passive swaps them ("maintained by [X]", "[X] is used by"); a label in the passive
  (`superseded_by`) names its subject by the verb's object;
- a noun names the far end of a relation from its owner ("[X]'s advisor", "the children of [X]"): an agent noun
  ("advisor", "maintainer") names the verb's subject; a kin noun names its own kind of relative, and a kin label says
  whether its subject is that relative (`parent_of`: the subject is the parent; `children`: the object is a child);
  a noun label's own noun names its object ("[X]'s advisor" along `doctoral advisor`), an "of" label's its subject;
- some relations have no direction ("married", `collaborated_with`, siblings, spouses): either way.

A step's word is the nearest question word sharing the label's stem ("depend", "dependents" for `depends_on`), or a kin
word for a kin label, that no step before took (`step_word`); a reading names the word it rests on. A step no word
names ("which packages require [X]"), or whose word says nothing of direction ("[X]'s dependencies"), is walked either
way, as before: a guessed direction would cost the answers of the other one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kgr.graph import inverse_base, relation_words
from kgr.lexicon import (FUNCTION_WORDS, HYPHENATED_WORD, KIN_CONVERSE, POSSESSIVE, QUESTION_WORDS, SIBLING_LINKS,
                         around_mention, is_sibling_word, kin_kind, kin_nouns)

FORWARD, BACKWARD, EITHER = 1, -1, 0

MENTION_TOKEN = "[]"  # the anchor's mention among a question's tokens
# Forms of "be" (and "get") that make a participle after them passive ("[X] is used by", "papers were cited").
BE_FORMS = frozenset("is are was were be been being get gets got".split())
# Words a noun follows ("the", "their"), never a verb.
DETERMINERS = frozenset("the a an his her their its my your our".split())
# The possessive endings `QuestionTokens` keeps as words of their own.
POSSESSIVE_ENDINGS = frozenset({"'s", "'"})
# Prepositions that lead a verb's doer: "maintained by [X]", "trained under [X]" (X trained them), so a verb before one
# reads as a passive ("[X] trained under" a mentor: `trained under` names its subject by the verb's object).
AGENT_PREPOSITIONS = frozenset({"by", "under"})
# Prepositions a verb label ends with ("depends on", "belongs to"); a label ending in "of" is a noun's ("child of").
PREPOSITIONS = frozenset("on in at to from by with under into onto upon for about over through".split())
# Forms of "be" that lead a participle in a label ("was born in", "is located in"): the word after them is the verb.
BE_FORMS = frozenset("is was are were be been being".split())

@dataclass(frozen=True)
class LabelForm:
    """How a relation label reads in English."""

    verb: bool  # a verb phrase ("depends on", "cites", "maintained by"), else a noun ("children", "child of")
    passive: bool  # a verb in the passive ("superseded by", "trained under"): its subject is the verb's object
    of_form: bool  # a noun joined by "of" ("child of"): the subject is the noun's relative, not the object
    head: str  # the verb's or noun's word
    symmetric: bool  # no direction: a verb "with" ("collaborated with"), a sibling or spouse noun
    inverse: bool  # an `_inverse` twin: it runs its base relation backward


@lru_cache(maxsize=1 << 14)
def label_form(relation: str) -> LabelForm:
    """The English form of a relation label (`LabelForm`)."""
    words = relation_words(relation)
    base = inverse_base(words)
    parts = (base or words).split()
    if len(parts) > 1 and parts[0] in BE_FORMS and parts[1] not in FUNCTION_WORDS and parts[-1] != "of" and (
            len(parts) == 2 or parts[2] in PREPOSITIONS):
        parts = parts[1:]  # "was born in" reads as "born in", a participle; "is member of" stays a noun's
    participle = len(parts) < len((base or words).split())
    content = [w for w in parts if w not in FUNCTION_WORDS]
    head = content[0] if content else (parts[0] if parts else "")
    # a verb: an -ed participle or a third-person -s form, alone or before a preposition ("cites", "relies on");
    # "has"/"is" lead nouns ("has part", "is in country"), not verbs
    verb = bool(parts) and parts[0] not in FUNCTION_WORDS and (
        parts[0].endswith("ed") or participle or (parts[0].endswith("s") and not parts[0].endswith("ss")
                                                  and (len(parts) == 1 or parts[1] in PREPOSITIONS)))
    of_form = not verb and len(parts) > 1 and parts[-1] == "of"
    noun = parts[-2] if of_form else (parts[-1] if parts else "")
    kin = kin_kind(noun)
    symmetric = (verb and parts[-1] == "with") or kin in ("sibling", "spouse")
    return LabelForm(verb, verb and parts[-1] in AGENT_PREPOSITIONS, of_form, head if verb else noun, symmetric,
                     base is not None)


@dataclass(frozen=True)
class QuestionTokens:
    """A question's lower-cased words in order, the anchor's mention one token (`MENTION_TOKEN`) at `mention`, and
    per word where the owner of an owned noun stands (`owner_of`); a kin word chaining several relatives is one word
    per link ("grandparents": parent, parents), outward from its owner."""

    tokens: tuple[str, ...]
    mention: int
    owners: tuple[int | None, ...]

    @classmethod
    def of(cls, question: str, anchor_name: str, siblings_as_links: bool = False) -> "QuestionTokens":
        """The question's words read from the anchor's mention; with `siblings_as_links` (a graph with no sibling
        label) a sibling word is a parent's child."""
        before, after = (_words(part) for part in around_mention(question, anchor_name))
        raw = [*before, MENTION_TOKEN, *after]
        tokens: list[str] = []
        owners: list[int | None] = []
        mention = 0
        for at, word in enumerate(raw):
            if at == len(before):
                mention, parts = len(tokens), [word]
            else:
                parts = [part for noun in kin_nouns(word) for part in noun.split("-") if part]
                if siblings_as_links:
                    parts = [link for part in parts for link in (SIBLING_LINKS if is_sibling_word(part) else [part])]
            owner = owner_of(raw, at)
            tokens += parts[::-1] if owner == 1 else parts  # the link nearest the owner first
            owners += [owner] * len(parts)
        return cls(tuple(tokens), mention, tuple(owners))

    def content(self) -> list[int]:
        """The places of the words that can name a relation: no function, question or possessive word."""
        return [i for i, t in enumerate(self.tokens)
                if i != self.mention and t not in FUNCTION_WORDS and t not in QUESTION_WORDS and not t.startswith("'")]

    def distance(self, a: int, b: int) -> int:
        """Words between two places and one, a possessive ending or "of" no word: "[X]'s kids" and "the kids of [X]"
        are next to X, closer than "depend on [X]"."""
        low, high = sorted((a, b))
        return high - low - sum(t in POSSESSIVE_ENDINGS or t == "of" for t in self.tokens[low + 1:high])

    def mention_owns(self) -> bool:
        """Whether a possessive ending follows the mention ("[X]'s teacher")."""
        return self.mention + 1 < len(self.tokens) and self.tokens[self.mention + 1] in POSSESSIVE_ENDINGS

    def may_be_verb(self, at: int) -> bool:
        """Whether the word at `at` can be a verb: not the noun "which" asks for ("which dependents") nor one after a
        determiner ("the citations", "their dependency tree")."""
        before = self.tokens[max(at - 2, 0):at]
        return not (before and (before[-1] in DETERMINERS or before[-1] == "which"
                                or (before[0] in DETERMINERS and before[-1] not in FUNCTION_WORDS)))

    def is_passive(self, at: int) -> bool:
        """Whether the verb at `at` is passive: "by" or "under" follows it (`AGENT_PREPOSITIONS`), or a form of "be"
        precedes its participle."""
        after = self.tokens[at + 1] if at + 1 < len(self.tokens) else ""
        before = self.tokens[at - 1] if at > 0 else ""
        return after in AGENT_PREPOSITIONS or (before in BE_FORMS and self.tokens[at].endswith(("ed", "en")))


def _words(text: str) -> list[str]:
    """The lower-cased words of `text`, a possessive ending a word of its own ("father's" -> father, 's)."""
    words = []
    for word in HYPHENATED_WORD.findall(text.lower()):
        ending = POSSESSIVE.search(word)
        stem = POSSESSIVE.sub("", word)
        words += [w for w in (stem, ending and ending.group()) if w]
    return words


def owner_of(words: list[str], at: int) -> int | None:
    """Where the owner of the noun at `at` stands, -1 before it ("[X]'s advisor") or 1 after it ("the advisor of
    [X]"); 0 after "whose" (the owner is what the question asks); None when the word is no owned noun."""
    before = words[at - 1] if at > 0 else ""
    after = words[at + 1] if at + 1 < len(words) else ""
    if before in POSSESSIVE_ENDINGS:
        return -1
    if before == "whose":
        return 0
    return 1 if after == "of" else None


def agent_noun(word: str) -> bool | None:
    """Whether a noun derived from a verb names its doer (True: "advisor", "maintainers", "dependents") or what it is
    done to (False: "employees"); None when its ending does not say ("dependencies", "citations")."""
    stem = word.removesuffix("s")
    if kin_kind(word) is not None or len(stem) < 5:
        return None
    if stem.endswith(("er", "or", "ent", "ant")):
        return True
    return False if stem.endswith("ee") else None


def read_direction(form: LabelForm, words: QuestionTokens, at: int) -> int:
    """The direction (`FORWARD`, `BACKWARD`, `EITHER`) in which the word at `at` walks a relation of this form from
    the walk's frontier, which stands on the mention's side of the word: English names a chain's steps outward from
    its owner, so what a step leaves lies toward the mention."""
    frontier_left = words.mention < at
    if form.symmetric:
        return EITHER
    word = words.tokens[at]
    owner = words.owners[at]
    if owner is not None:  # an owned noun names one end of the relation
        if owner and frontier_left != (owner < 0):
            return EITHER  # owned by something else than the frontier
        kind = kin_kind(word)
        own = kin_kind(form.head)
        if kind is not None and own is not None:
            if kind in ("sibling", "spouse") or kind not in (own, KIN_CONVERSE[own]):
                return EITHER
            # the relative the noun names is the label's own kind or its converse; `child_of`'s subject is the
            # child, `children`'s object is
            noun_is_subject = (kind == own) == form.of_form
        elif form.verb and agent_noun(word) is not None:
            # the doer is an active label's subject, a passive one's object
            noun_is_subject = agent_noun(word) != form.passive
        elif not form.verb and own is None:
            # the label's own noun ("[X]'s advisor" along `doctoral advisor`) names what the label does: its object,
            # or an "of" noun's subject (`successor of`)
            noun_is_subject = form.of_form
        else:
            return EITHER
        # the frontier owns the noun, so the noun is the far end; after "whose" the noun is the frontier itself
        far_is_subject = noun_is_subject if owner else not noun_is_subject
        direction = BACKWARD if far_is_subject else FORWARD
    elif form.verb and words.may_be_verb(at):
        frontier_is_subject = frontier_left != words.is_passive(at)
        direction = FORWARD if frontier_is_subject != form.passive else BACKWARD
    else:
        return EITHER
    return -direction if form.inverse else direction


def shares_stem(word: str, head: str) -> bool:
    """Whether two words share a stem: a common beginning of at least four letters that leaves at most two of the
    shorter word ("cited", "cites"; "advisor", "advised"; not "student", "studied")."""
    common = len(os.path.commonprefix([word, head]))
    return common >= max(4, min(len(word), len(head)) - 2)


def step_word(form: LabelForm, words: QuestionTokens, free: list[int], previous: int) -> int | None:
    """The question word naming a step of this form, among the `free` places: a kin word for a kin label, else a word
    sharing the label's stem; the one nearest `previous` (the step before's word, or the mention), as English names
    a chain's steps outward from its owner. None: no word names it (a synonym the stem does not show)."""
    own_kin = kin_kind(form.head) is not None
    named = [i for i in free if (own_kin and kin_kind(words.tokens[i]) is not None)
             or shares_stem(words.tokens[i], form.head)]
    return min(named, key=lambda i: (words.distance(i, previous), -i)) if named else None


def links_siblings(labels) -> bool:
    """Whether a graph with these relation labels has none for siblings, so that a sibling is a parent's child."""
    return not any(kin_kind(label_form(label).head) == "sibling" for label in labels)


def name(direction: int) -> str:
    """A direction as a record says it: "forward", "backward" or "" (either)."""
    return {FORWARD: "forward", BACKWARD: "backward"}.get(direction, "")


class WalkReader:
    """Reads, hop by hop, which way a walk from one anchor takes its relations: each hop's word is the nearest one
    naming its relation that no hop before took."""

    def __init__(self, question: str, anchor_name: str, siblings_as_links: bool = False):
        self.words = QuestionTokens.of(question, anchor_name, siblings_as_links)
        self._free = self.words.content()
        self._previous = self.words.mention
        self._hops = 0

    def direction(self, relation: str) -> tuple[int, str | None]:
        """This hop's direction along `relation` (`FORWARD`, `BACKWARD`, `EITHER`) and the word it rests on."""
        form = label_form(relation)
        at = self._word(form)
        return (EITHER, None) if at is None else (read_direction(form, self.words, at), self.words.tokens[at])

    def _word(self, form: LabelForm) -> int | None:
        """This hop's word (`step_word`). A verb before a mention that owns a noun governs that noun ("who else
        studied under [X]'s teacher": the teacher's students), so it names no first hop: the owned noun does."""
        at = step_word(form, self.words, self._free, self._previous)
        if at is not None and not self._hops and at < self.words.mention and self.words.mention_owns() \
                and form.verb and self.words.may_be_verb(at):
            return None
        return at

    def keep(self, relation: str, forward: np.ndarray) -> tuple[np.ndarray, int, str | None]:
        """Which of this hop's edges along `relation` (`forward`: walked from the triple's subject) go the way the
        question reads, that direction and its word: all of them, `EITHER`, where they go one way only (the type
        tells) or the question reads none."""
        if forward.all() or not forward.any():
            return np.ones(len(forward), dtype=bool), EITHER, None
        direction, word = self.direction(relation)
        if direction == EITHER:
            return np.ones(len(forward), dtype=bool), EITHER, word
        return forward == (direction == FORWARD), direction, word

    def take(self, relation: str) -> None:
        """The hop went along `relation`: its word is taken, and the next hop's word is sought from there."""
        at = self._word(label_form(relation))
        self._hops += 1
        if at is not None:
            self._free.remove(at)
            self._previous = at
