"""English as kgr reads it: function words, question words, cue words, tokenizers, mentions and the name finder.

Nothing here knows a graph: these are facts of English text and of kgr's question format (`[...]` marks a mention),
shared by every method. Two users keep different stop-word lists on purpose; both are compositions of the same
parts below, so the difference is written down:

    OFFLINE_STOP_WORDS = FUNCTION_WORDS | (QUESTION_WORDS - KIND_QUESTION_WORDS)          (71 words)
    INDEX_STOP_WORDS   = CORE_FUNCTION_WORDS | QUESTION_WORDS | {POSSESSIVE_S}            (36 words)

The offline policy scores a question's words against relation and type names, so it drops every function word but
keeps the question words that name the answer's kind ("who" ~ a person type, "when" ~ a date). The graph index
(entity-name lookups, relation labels named word for word, CS-RAG's offline planner) drops only the commonest words
a label or name shares with a question without naming anything, every question word, and the `s` its `\\w+`
tokenizer leaves of "X's"; its longer words ("their", "about") can be part of a name or label.
"""

from __future__ import annotations

import bisect
import re
from typing import Sequence

# -- words ----------------------------------------------------------------------------------------------------------
# Articles, the commonest prepositions and conjunctions, and forms of be/do/have: words a relation label or an entity
# name shares with a question without naming anything ("place of birth", "The Who", "has part").
CORE_FUNCTION_WORDS = frozenset(
    "a an the and or of in on at by for to from with as is are was were be do does did has have it".split()
)
# Every English function word: the core ones and the other auxiliaries, modals, pronouns, determiners and
# connectives. They carry no relation or type meaning in any graph.
FUNCTION_WORDS = CORE_FUNCTION_WORDS | frozenset(
    "been being done had can could would should will shall may might that this these those any some such their its "
    "his her my our your they them he she i you we me there about into than then so".split()
)
# The English wh-question words: what a question asks, never which relation leads to it.
QUESTION_WORDS = frozenset("what which who whom whose when where why how".split())
# Question words that say what kind of thing the answer is (a person, a time, a place, a reason): the offline
# policy scores them against types ("who" fits a person step), so it does not drop them.
KIND_QUESTION_WORDS = frozenset("who when where why".split())
# The question word asking for a time: its answer is a date, which a graph spells as one (`DATE_SPELLING`).
DATE_QUESTION_WORD = "when"
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
# Spellings that are a date whatever their neighbourhood: "1854", "21 April 1854", "March 30, 1970", "1990s". Read
# by spelling, not embeddings, which place bare numerals poorly (`kgr.ingest.types.coarse_kinds`, `GraphStore`).
DATE_SPELLING = re.compile(rf"^(?:(?:\d{{1,2}}\s+)?(?:{_MONTHS})\.?(?:\s+\d{{1,2}},?)?\s+\d{{3,4}}|\d{{3,4}}s?|"
                           rf"\d{{4}}-\d{{2}}(?:-\d{{2}})?|(?:{_MONTHS})\.?\s+\d{{1,2}})$", re.IGNORECASE)
# What the `\w+` tokenizer leaves of an English possessive ("Ada's" -> "ada", "s").
POSSESSIVE_S = "s"

# The offline policy's stop words: question and relation-label words it does not score (kgr.methods.offline.policy).
OFFLINE_STOP_WORDS = FUNCTION_WORDS | (QUESTION_WORDS - KIND_QUESTION_WORDS)
# The graph index's stop words: tokens that are no content of a name, a label or a question (`content_tokens`).
INDEX_STOP_WORDS = CORE_FUNCTION_WORDS | QUESTION_WORDS | {POSSESSIVE_S}

# English cues that the answer is reached through something it shares with the anchor ("co-starred", "same",
# "what else did the publisher of [X] release").
SHARING_CUES = frozenset({"share", "shares", "shared", "sharing", "same", "also", "together", "fellow", "other",
                          "else"})
# The `co` that `question_words` splits off "co-starred": a sharing cue too.
CO_PREFIX = "co"
# Cue words: they say how the answer relates to the anchor, never which relation; no scorer reads them as words.
CUE_WORDS = SHARING_CUES | {CO_PREFIX}

# -- tokenizers -----------------------------------------------------------------------------------------------------
# Unicode word runs (underscore included): the graph index's tokens of names, labels and questions.
WORD = re.compile(r"\w+")
# Whitespace-separated chunks: name spans that keep their inner punctuation ("U.S.", "AC/DC").
CHUNK = re.compile(r"\S+")
# One non-word character: where a name can be cut into a shorter name's prefix ("new" of "new york").
NON_WORD = re.compile(r"\W")
# A parenthesis after a name or title ("Inherent Vice (film)", "X (1566-1633)"): a qualifier, not the name.
PARENTHESIS = re.compile(r"\s*\([^()]*\)")
# Letters and digits only (underscore splits): the words of names and texts the store counts specificity over.
NAME_WORD = re.compile(r"[^\W_]+")
# ASCII letters and digits: the words `name_spans` matches a name by, whatever punctuation sits between them.
ASCII_WORD = re.compile(r"[0-9A-Za-z]+")
# Lower-case words with their apostrophes and hyphen-joined parts ("co-starred", "father's"): the offline policy's.
HYPHENATED_WORD = re.compile(r"[a-z0-9']+(?:-[a-z0-9']+)*")
# English possessive endings: "[X]'s father's father" is the words father, father (not 's, father's, father).
POSSESSIVE = re.compile(r"'s?$|^'")


def tokens(text: str) -> list[str]:
    """The casefolded `WORD` tokens of `text`, in order."""
    return [t for t in WORD.findall(text.casefold())]


def content_tokens(text: str) -> set[str]:
    """The tokens of `text` that are not `INDEX_STOP_WORDS`."""
    return {t for t in tokens(text) if t not in INDEX_STOP_WORDS}


def hyphenated_words(text: str) -> list[str]:
    """The lower-cased `HYPHENATED_WORD`s of `text` without possessive endings, in order (a possessive ending is no
    word of its own: in "[X]'s mother" the mother is the word next to the mention)."""
    return [w for w in (POSSESSIVE.sub("", w) for w in HYPHENATED_WORD.findall(text.lower())) if w]


def whole_word(text: str) -> str:
    """A regular expression matching `text` literally where no word character continues it on either side."""
    return rf"(?<!\w){re.escape(text)}(?!\w)"


# -- mentions -------------------------------------------------------------------------------------------------------
# A mention: `[...]` in a question marks an entity's name.
MENTION = re.compile(r"\[([^\[\]]+)\]")
# A run of mentions joined by commas or "or": "who was born first, [A] or [B]?", "[A], [B] or [C]".
MENTION_RUN = re.compile(r"\[[^\[\]]+\](?:(?:\s*,\s*|\s*,?\s+or\s+)\[[^\[\]]+\])+", re.IGNORECASE)
# The "or" joining two mentions in a run (a run of commas alone lists, it offers no choice).
OR_JOIN = re.compile(r"\]\s*,?\s+or\s+\[", re.IGNORECASE)
# "director of [X]": a noun joined to the mention by "of" (a co- noun keeps describing X: "co-directors of [X]").
OF_MENTION = re.compile(r"([\w-]+)\s+of\s+\[")
# "the films acted by [X]": the mention is the agent of the verb before "by".
BY_MENTION = re.compile(r"([\w-]+)\s+by\s+\[")
# "the film [X]": a noun between an article and a mention names what the mention is (an appositive)
ARTICLE_NOUN_MENTION = re.compile(r"\b(?:the|a|an)\s+([\w-]+)\s+\[", re.IGNORECASE)
# The question's interrogative: the first wh-word, and the word after it ("in which city", "who", "what year").
INTERROGATIVE = re.compile(r"\b(what|which|who|whom|whose|when|where|why|how)\b(?:\s+([\w-]+))?", re.IGNORECASE)


# A possessed noun: after a possessive ("[X]'s grandparents", "the members' packages") or before "of" ("the
# grandchildren of [X]"): English names a relation from its owner this way.
POSSESSED = re.compile(r"(?:'s?|s')\]?\s+([\w-]+)|([\w-]+)\s+of\b", re.IGNORECASE)
# One link of a possessive chain, right after its owner ("'s mother", "' members").
POSSESSIVE_NOUN = re.compile(r"(?:'s|')\s+([\w-]+)", re.IGNORECASE)


def possessed_words(question: str) -> set[str]:
    """The lower-cased words of the question's possessed nouns (`POSSESSED`), a hyphenated one's parts each (a kin
    noun's links: "grandparents" -> "parents", "father-in-law" -> "spouse", "father"; `kin_nouns`)."""
    found = set()
    for match in POSSESSED.finditer(question):
        for noun in kin_nouns((match.group(1) or match.group(2)).lower()):
            found.update(part for part in noun.split("-") if part)
    return found - FUNCTION_WORDS


def possessive_chain(question: str, end: int) -> list[tuple[str, str]]:
    """The nouns of the possessive chain starting at character `end` (a mention's end: "[X]'s mother's father"),
    in order, each as (the word written, a kin noun it chains): "'s grandparents" -> ("grandparents", "parents")
    twice (`generations`). English names one relation per noun of such a chain, the first nearest the owner."""
    chain = []
    while (match := POSSESSIVE_NOUN.match(question, end)) and match.group(1).lower() not in FUNCTION_WORDS:
        word = match.group(1).lower()
        chain += [(word, noun) for noun in kin_nouns(word)]
        end = match.end()
    return chain


# English counts generations with prefixes: a grandparent is a parent's parent, a great-grandchild a child's child's
# child. The kin nouns they combine with, singular and plural.
GENERATIONAL = re.compile(r"^((?:great-)*)grand(parents?|child|children|fathers?|mothers?|sons?|daughters?)$")


def generations(word: str) -> list[str]:
    """A generational kin noun as the kin nouns it chains ("grandparents" -> parents, parents; "great-grandson" -> son
    three times), any other word as itself: English names one relation per generation."""
    match = GENERATIONAL.match(word)
    if match is None:
        return [word]
    noun = match.group(2)
    # a grandmother is a parent's mother, not a mother's mother: the generations before the last are any member's
    return [kin_class(noun) or noun] * (1 + match.group(1).count("great-")) + [noun]


# English kin terms for relatives two or three links away, as the generic kin nouns of those links, outward from the
# owner: an aunt is a parent's sibling, a cousin a parent's sibling's child, a father-in-law a spouse's father. A graph
# has labels for the near links (parent, child, spouse, sibling, in whatever words) and seldom one for these, and the
# encoder puts "aunt" nearer `mother` (0.61) than `siblings` (0.50), "cousin" nearer `siblings` than anything else.
KIN_CHAINS = {
    "aunt": ("parent", "sibling"), "uncle": ("parent", "sibling"),
    "niece": ("sibling", "child"), "nephew": ("sibling", "child"),
    "cousin": ("parent", "sibling", "child"),
    "father-in-law": ("spouse", "father"), "mother-in-law": ("spouse", "mother"),
    "parent-in-law": ("spouse", "parent"), "in-law": ("spouse", "parent"),
    "son-in-law": ("child", "spouse"), "daughter-in-law": ("child", "spouse"), "child-in-law": ("child", "spouse"),
    "brother-in-law": ("spouse", "sibling"), "sister-in-law": ("spouse", "sibling"),
}
KIN_CHAIN_NOUNS = frozenset(KIN_CHAINS.values())


def kin_nouns(word: str) -> list[str]:
    """A kin noun as the kin nouns it chains, one per relation English names by it: a generational one per
    generation (`generations`), a relative two or three links away as those links (`KIN_CHAINS`: "cousins" ->
    parent, sibling, child); any other word as itself."""
    for form in (word, word.removesuffix("s"), word.replace("s-in-law", "-in-law")):  # "aunts", "sons-in-law"
        if form in KIN_CHAINS:
            return list(KIN_CHAINS[form])
    return generations(word)


# The generic kin noun a kin word for one member of a relation's group reads as too (`kin_class`): "son" is 0.36 from
# `children` and 0.58 from `father` to the encoder, "child" 0.71 and 0.59; "sister" is 0.76 from `siblings`, "sibling"
# 0.92. Gendered and everyday words keep their own reading beside it ("dad": `father` 0.90, "parent" 0.75).
KIN_CLASSES = {
    "child": ("son", "daughter", "kid", "boy", "girl"),
    "sibling": ("brother", "sister"),
    "spouse": ("husband", "wife", "wives"),
    "parent": ("father", "mother", "dad", "daddy", "mum", "mom", "mummy", "mommy"),
}
_KIN_CLASS = {member: generic for generic, members in KIN_CLASSES.items() for member in members}
# The generic kin noun each generic kin word names, singular and plural; a relative's converse (the parent of a child
# is that child's parent; siblings and spouses are each other's).
KIN_KINDS = {**{generic: generic for generic in KIN_CLASSES},
             "parents": "parent", "children": "child", "siblings": "sibling", "spouses": "spouse"}
GENERIC_KIN = frozenset(KIN_KINDS)
KIN_CONVERSE = {"parent": "child", "child": "parent", "sibling": "sibling", "spouse": "spouse"}


def kin_class(word: str) -> str | None:
    """The generic kin noun a kin word for one member of a relation's group also reads as ("sons" -> child), or
    None."""
    return _KIN_CLASS.get(word) or (_KIN_CLASS.get(word[:-1]) if word.endswith("s") else None)


def kin_kind(word: str) -> str | None:
    """The generic kin noun a kin word names, a member ("mother") or generic one ("children"): parent, child, sibling,
    spouse; else None."""
    return KIN_KINDS.get(word) or kin_class(word)


def kin_chains(words: list[tuple[str, float]]) -> list[list[int]]:
    """The places of each chain of kin nouns among `question_words`' words, outward from the owner: a kin term's links
    ("aunt": parent, sibling; "grandmother": parent, mother) and the kin nouns of a possessive chain around them
    ("[X]'s mother's brother": mother, then a brother's links), words next to each other. Each names a relation of its
    own, in that order. A generational noun's repeats alone ("grandparents": parents, parents) are repeated words."""
    chains, run = [], []
    for index, (word, distance) in enumerate(words):
        kin = word in GENERIC_KIN or kin_class(word) is not None
        if kin and run and abs(distance - words[run[-1]][1]) <= 1:
            run.append(index)
            continue
        chains.append(run)
        run = [index] if kin else []
    chains.append(run)
    return [sorted(run, key=lambda i: words[i][1]) for run in chains
            if len(run) > 1 and len({words[i][0] for i in run}) > 1]


# A sibling is a parent's child: how a graph with no label for siblings links them.
SIBLING_LINKS = ("parent", "child")


def is_sibling_word(word: str) -> bool:
    """Whether `word` names a sibling ("siblings", "sister", "brothers")."""
    return word in ("sibling", "siblings") or kin_class(word) == "sibling"


def siblings_as_links(words: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """`question_words`' words with each sibling word read as the links it names, a parent's child, at its distance
    ("[X]'s sister": parent, child), for a graph with no label for siblings; a second sibling word ("brothers and
    sisters") names the same links again, so it is dropped."""
    out, said = [], False
    for word, distance in words:
        if is_sibling_word(word):
            if not said:
                out += [(link, distance) for link in SIBLING_LINKS]
            said = True
        else:
            out.append((word, distance))
    return out


# "What does [X] do?" asks what X does for a living, as "who" asks for a person: a present-tense question asking "what"
# and ending on the verb "do" reads that verb as this noun, the answer's kind ("what did [X] do" asks for an act).
ACTIVITY_QUESTION = re.compile(r"^\W*what\s+(?:do|does)\b.*\bdo\W*$", re.IGNORECASE | re.DOTALL)
ACTIVITY_NOUN = "occupation"


def asks_activity(question: str) -> bool:
    """Whether the question asks what someone does (`ACTIVITY_QUESTION`)."""
    return ACTIVITY_QUESTION.match(question) is not None


def answer_kind_words(question: str) -> set[str]:
    """The word saying what kind of thing the answer is, lowercased: the noun the question's "which"/"what" asks about
    ("which country", "what year"), its kind question word ("who", "when", "where") or `ACTIVITY_NOUN` ("what does
    [X] do"). Only the first wh-word asks: a later one is relative ("the hospital where [X] was admitted")."""
    if asks_activity(question):
        return {ACTIVITY_NOUN}
    match = INTERROGATIVE.search(MENTION.sub(" ", question))
    if match is None:
        return set()
    wh, following = match.group(1).lower(), (match.group(2) or "").lower()
    if wh in ("what", "which"):
        return {following} if following and following not in FUNCTION_WORDS | QUESTION_WORDS else set()
    return {wh} & KIND_QUESTION_WORDS


def without_relative_wh(words: list[tuple[str, float]], question: str) -> list[tuple[str, float]]:
    """`question_words` less the relative wh-words: a wh-word other than the one the question asks with names no
    relation ("which departments are at the hospital where [X] works"); told apart by their text."""
    kinds = answer_kind_words(question)
    return [(w, d) for w, d in words if w not in KIND_QUESTION_WORDS or w in kinds]


def offered_alternatives(question: str) -> list[str]:
    """The mentions a question offers as the answer's alternatives ("who was born first, [A] or [B]?"), in order.

    The answer to such a question is one of its anchors, which every method otherwise leaves out of its entities
    (a question's own entities are not what it asks for)."""
    return list(dict.fromkeys(m.strip() for run in MENTION_RUN.finditer(question) if OR_JOIN.search(run.group())
                              for m in MENTION.findall(run.group())))


# -- finding names in text ------------------------------------------------------------------------------------------
def name_spans(text: str, names: Sequence[str]) -> list[tuple[int, int] | None]:
    """Per name, where it first occurs in `text` as whole words (any case, any punctuation between its words), with
    the punctuation the name itself starts or ends with when the text has it there; None where it does not occur."""
    words = list(ASCII_WORD.finditer(text))
    joined = " " + " ".join(w.group(0).lower() for w in words) + " "
    starts = [0]  # each word's offset in `joined`
    for w in words[:-1]:
        starts.append(starts[-1] + len(w.group(0)) + 1)
    spans: list[tuple[int, int] | None] = []
    for name in names:
        parts = ASCII_WORD.findall(name)
        at = joined.find(f" {' '.join(parts).lower()} ") if parts else -1
        if at < 0:
            spans.append(None)
            continue
        first = bisect.bisect_left(starts, at)
        start, end = words[first].start(), words[first + len(parts) - 1].end()
        lead, trail = re.match(r"[^0-9A-Za-z]*", name).group(0), re.search(r"[^0-9A-Za-z]*$", name).group(0)
        start -= len(lead) if lead and text[max(0, start - len(lead)):start] == lead else 0
        end += len(trail) if trail and text[end:end + len(trail)] == trail else 0
        spans.append((start, end))
    return spans


def mark_names(text: str, names: Sequence[str]) -> str:
    """`text` with the first occurrence of each of `names` (as `name_spans` finds it) replaced by the name in brackets,
    as a mention; a longer name wins over one it overlaps."""
    names = sorted((n for n in names if "[" not in n and "]" not in n), key=len, reverse=True)
    chosen: list[tuple[int, int, str]] = []
    for name, span in zip(names, name_spans(text, names)):
        if span and all(span[1] <= s or span[0] >= e for s, e, _ in chosen):
            chosen.append((*span, name))
    for start, end, name in sorted(chosen, reverse=True):
        text = f"{text[:start]}[{name}]{text[end:]}"
    return text


def bounded(text: str, start: int, end: int) -> bool:
    """No word character continues the span text[start:end] on either side (the graph index's name finder,
    `PlanIndex.find_names`, keeps only such spans)."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() and text[start].isalnum()) and not (after.isalnum() and text[end - 1].isalnum())


def written_as_name(text: str, start: int, end: int, name: str) -> bool:
    """True when text[start:end] spells `name` exactly, capitals included, and has a capital that does not open the
    text: a proper name as the question writes it ("authors from the United States"), not a common word that is also
    an entity's name ("which country", or "Country" opening the question)."""
    span = text[start:end]
    return span == name and any(c.isupper() for i, c in enumerate(span, start) if i > 0)


def sharing_cue(words: list[tuple[str, float]]) -> bool:
    """True when the question's words (`question_words`) say the answer shares something with the anchor."""
    return any(w in CUE_WORDS for w, _ in words)


# -- a question's words by their distance from a mention (the offline policy's reading, CS-RAG's first hop) ----------
def around_mention(question: str, anchor_name: str) -> tuple[str, str]:
    """The question's text before and after the anchor's mention (the bracketed one naming the anchor, else the
    first; else the name found unbracketed), other mentions blanked out."""
    mentions = list(MENTION.finditer(question))
    mention = next((m for m in mentions if m.group(1).casefold() == anchor_name.casefold()),
                   mentions[0] if mentions else None)
    if mention:
        return MENTION.sub(" ", question[:mention.start()]), MENTION.sub(" ", question[mention.end():])
    lowered, name = question.lower(), anchor_name.lower()
    at = lowered.find(name)
    return (question[:at], question[at + len(name):]) if at >= 0 and name else ("", question)


def question_words(question: str, anchor_name: str) -> list[tuple[str, float]]:
    """Content words outside the anchor's mention, each with its distance (in words) from the mention.

    The mention is the bracketed one naming the anchor (else the first); the words of other bracketed mentions name
    other entities, not the way to the answer. A `co-` prefix is a sharing cue: `co-starred` gives the word
    `starred` and the cue word `co`.
    """
    words = []
    said: set[tuple[str, ...]] = set()  # the kin chains said so far: "nephews and nieces" name one chain
    # a possessive ending is no word of its own: in "[X]'s mother" the mother is the word next to the mention
    left_words, right_words = (hyphenated_words(part) for part in around_mention(question, anchor_name))
    if right_words and right_words[-1] == "do" and asks_activity(question):
        right_words[-1] = ACTIVITY_NOUN  # "what does [X] do": the verb asks for X's occupation
    for distance, word in [(len(left_words) - k, w) for k, w in enumerate(left_words)] + \
                          [(k + 1, w) for k, w in enumerate(right_words)]:
        if word.startswith("co-") and len(word) > 3:
            words.append((CO_PREFIX, distance))
            word = word[3:]
        nouns = kin_nouns(word)
        if tuple(nouns) in KIN_CHAIN_NOUNS:
            if tuple(nouns) in said:
                continue
            said.add(tuple(nouns))
        for part in (part for noun in nouns for part in noun.split("-")):
            if part and part not in OFFLINE_STOP_WORDS:
                words.append((part, distance))
    return words
