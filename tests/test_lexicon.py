"""kgr.lexicon: the stop-word sets equal the lists the modules kept before the lexicon (copied here from the code of
b8f43fe), their compositions say how they differ, and the tokenizers on tricky strings."""

from __future__ import annotations

import re

import pytest

from kgr import lexicon
from kgr.lexicon import (ASCII_WORD, BY_MENTION, CHUNK, CORE_FUNCTION_WORDS, CUE_WORDS, FUNCTION_WORDS,
                         HYPHENATED_WORD, INDEX_STOP_WORDS, KIND_QUESTION_WORDS, MENTION, NAME_WORD, NON_WORD,
                         OF_MENTION, OFFLINE_STOP_WORDS, PARENTHESIS, POSSESSIVE, QUESTION_WORDS, SHARING_CUES, WORD,
                         bounded, content_tokens, hyphenated_words, mark_names, name_spans, tokens, whole_word,
                         written_as_name)

# kgr/methods/graph_index.py's STOPWORDS before the lexicon (36 words)
OLD_GRAPH_INDEX_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from has have in is it of on or the to was were what when where which "
    "who whom whose why how with s".split()
)
# the offline policy's STOP_WORDS (then kgr/methods/dotrag/offline.py) before the lexicon (71 words)
OLD_OFFLINE_STOP_WORDS = frozenset(
    "a an the of in on at is are was were be been being did do does done what which whom whose how that this these "
    "those with by for to and or as from their its his her they them there it he she i you we me my our your "
    "any some can could would should will shall may might has have had about into than then so such".split()
)
OLD_SHARING_CUES = frozenset({"share", "shares", "shared", "sharing", "same", "also", "together", "fellow"})
OLD_CUE_WORDS = OLD_SHARING_CUES | {"co"}
# each regex's pattern and flags before the lexicon, by its new name (where it was)
OLD_PATTERNS = {
    "WORD": (r"\w+", 0),  # graph_index._WORD
    "CHUNK": (r"\S+", 0),  # graph_index._CHUNK
    "NON_WORD": (r"\W", 0),  # graph_index._NON_WORD
    "PARENTHESIS": (r"\s*\([^()]*\)", 0),  # graph_index._PARENTHESIS
    "NAME_WORD": (r"[^\W_]+", 0),  # store._WORDS
    "ASCII_WORD": (r"[0-9A-Za-z]+", 0),  # methods.base._ALNUM
    "HYPHENATED_WORD": (r"[a-z0-9']+(?:-[a-z0-9']+)*", 0),  # offline._WORD
    "POSSESSIVE": (r"'s?$|^'", 0),  # offline._POSSESSIVE
    "MENTION": (r"\[([^\[\]]+)\]", 0),  # methods.base._MENTION, offline._MENTION, evaluate.questions._BRACKETED
    "MENTION_RUN": (r"\[[^\[\]]+\](?:(?:\s*,\s*|\s*,?\s+or\s+)\[[^\[\]]+\])+", re.IGNORECASE),  # base._MENTION_RUN
    "OR_JOIN": (r"\]\s*,?\s+or\s+\[", re.IGNORECASE),  # methods.base._OR
    "OF_MENTION": (r"([\w-]+)\s+of\s+\[", 0),  # offline._OF_MENTION
    "BY_MENTION": (r"([\w-]+)\s+by\s+\[", 0),  # offline._BY_MENTION
}


def test_stop_word_sets_equal_the_old_lists():
    assert INDEX_STOP_WORDS == OLD_GRAPH_INDEX_STOPWORDS and len(INDEX_STOP_WORDS) == 36
    assert OFFLINE_STOP_WORDS == OLD_OFFLINE_STOP_WORDS and len(OFFLINE_STOP_WORDS) == 71
    assert len(INDEX_STOP_WORDS & OFFLINE_STOP_WORDS) == 31
    # since the lexicon, cues were added on measurement (docs/decisions.md, issue #35): "other", "else"
    assert SHARING_CUES == OLD_SHARING_CUES | {"other", "else"} and CUE_WORDS == OLD_CUE_WORDS | {"other", "else"}


def test_the_compositions_name_the_difference():
    # the index drops every question word, the offline policy keeps the ones naming the answer's kind
    assert INDEX_STOP_WORDS - OFFLINE_STOP_WORDS == KIND_QUESTION_WORDS | {"s"}
    assert KIND_QUESTION_WORDS == {"who", "when", "where", "why"} and KIND_QUESTION_WORDS < QUESTION_WORDS
    # the offline policy drops every function word, the index only the core ones
    assert OFFLINE_STOP_WORDS - INDEX_STOP_WORDS == FUNCTION_WORDS - CORE_FUNCTION_WORDS
    assert CORE_FUNCTION_WORDS < FUNCTION_WORDS and not FUNCTION_WORDS & QUESTION_WORDS
    assert not CUE_WORDS & (INDEX_STOP_WORDS | OFFLINE_STOP_WORDS)


@pytest.mark.parametrize("name", sorted(OLD_PATTERNS))
def test_regexes_equal_the_old_ones(name):
    pattern = getattr(lexicon, name)
    assert (pattern.pattern, pattern.flags & ~re.UNICODE) == OLD_PATTERNS[name]


@pytest.mark.parametrize("text, words", [
    ("Who directed [Jean-Paul Sartre]'s films?", ["who", "directed", "jean", "paul", "sartre", "s", "films"]),
    ("snake_case Ǆemal STRASSE 3.14", ["snake_case", "ǆemal", "strasse", "3", "14"]),
    ("", []),
])
def test_tokens_casefold_word_runs(text, words):
    assert tokens(text) == words


def test_content_tokens_drop_index_stop_words():
    assert content_tokens("Who was the director of [Ada]'s film, and when?") == {"director", "ada", "film"}
    assert content_tokens("The Who") == set()


@pytest.mark.parametrize("text, words", [
    ("who co-starred with [Nora]'s father's father", ["who", "co-starred", "with", "nora", "father", "father"]),
    ("the players' clubs", ["the", "players", "clubs"]),
    ("'tis rock-'n'-roll's", ["tis", "rock-'n'-roll"]),
    ("ÉCOLE--normale -x- 's", ["cole", "normale", "x"]),
])
def test_hyphenated_words_lowercase_without_possessives(text, words):
    assert hyphenated_words(text) == words


def test_the_other_tokenizers_on_tricky_strings():
    text = "U.S. AC/DC (band) snake_case Straße"
    assert CHUNK.findall(text) == ["U.S.", "AC/DC", "(band)", "snake_case", "Straße"]
    assert WORD.findall(text) == ["U", "S", "AC", "DC", "band", "snake_case", "Straße"]
    assert NAME_WORD.findall(text) == ["U", "S", "AC", "DC", "band", "snake", "case", "Straße"]
    assert ASCII_WORD.findall(text) == ["U", "S", "AC", "DC", "band", "snake", "case", "Stra", "e"]
    assert [m.start() for m in NON_WORD.finditer("new york-city")] == [3, 8]
    assert PARENTHESIS.sub("", "Inherent Vice (film) (2014)") == "Inherent Vice"
    assert [POSSESSIVE.sub("", w) for w in ("ada's", "players'", "'tis", "it")] == ["ada", "players", "tis", "it"]
    assert HYPHENATED_WORD.findall("co-star's -x- a--b") == ["co-star's", "x", "a", "b"]


def test_mentions():
    assert MENTION.findall("who was born first, [ Ada ] or [B]? [] [[C]]") == [" Ada ", "B", "C"]
    assert OF_MENTION.search("the co-directors of [X]").group(1) == "co-directors"
    assert BY_MENTION.search("the films acted by  [X]").group(1) == "acted"


def test_whole_word_needs_a_boundary():
    assert re.search(whole_word("up"), "look up!") and not re.search(whole_word("up"), "upside")
    assert re.search(whole_word("c++"), "c++ code") and re.sub(whole_word("a.b"), "-", "a.b axb") == "- axb"


def test_name_spans_and_mark_names():
    assert name_spans("Who is ADA helm's son, or Boris-Vane?", ["Ada Helm", "Boris Vane", "Nobody", "!"]) == \
        [(7, 15), (26, 36), None, None]
    assert name_spans("", ["A"]) == [None]
    assert mark_names("C.S. Lewis met New York City", ["C.S. Lewis", "New York", "New York City"]) == \
        "[C.S. Lewis] met [New York City]"


def test_bounded_spans():
    text = "Paris Hilton, Parisian"
    assert bounded(text, 0, 5) and bounded(text, 0, 12) and not bounded(text, 14, 19) and not bounded(text, 1, 5)


@pytest.mark.parametrize("question, words", [
    ("Which country was [Pieter Achterberg] born in?", {"country"}),
    ("In which towns were [Arthur]'s grandchildren born?", {"towns"}),
    ("When was Owen Pryce's father born?", {"when"}),
    ("Who treats the patients that are on metformin?", {"who"}),
    # only the question's first wh-word asks; a later one is relative
    ("Which doctors work at the hospital where [Noah] was admitted?", {"doctors"}),
    # "what" before a function word names no kind
    ("What do the dependencies of [glint-auth] depend on?", set()),
    ("how many films did [X] direct", set()),
    ("[X] directed", set()),
    # "what does [X] do" asks for an occupation; "what did [X] do" for an act
    ("What does Zara Adeyemi's mother do?", {"occupation"}),
    ("What do the members of [The Velvet Hollows] do?", {"occupation"}),
    ("What did [X] do in 1812?", set()),
])
def test_answer_kind_words(question, words):
    assert lexicon.answer_kind_words(question) == words


def test_the_verb_of_what_does_x_do_reads_as_the_occupation_it_asks_for():
    assert lexicon.question_words("what does [Ada]'s father do?", "Ada") == [("father", 1), ("occupation", 2)]
    assert lexicon.question_words("what do the members of [The Hollows] do", "The Hollows") == \
        [("members", 2), ("occupation", 1)]
    # only the question's last word, and only when it asks what someone does
    assert lexicon.question_words("what did [Ada] do", "Ada") == []
    assert lexicon.question_words("what does [Ada] do for a living", "Ada") == [("living", 4)]


@pytest.mark.parametrize("question, words", [
    # a generational noun is its kin nouns (`generations`), a relative further off the links it names (`kin_nouns`)
    ("Who are [Ravi Harrowgate]'s grandparents?", {"parents"}),
    ("List the grandchildren of [Edmund Harrowgate].", {"children"}),
    ("Who were [Ravi]'s great-grandfathers?", {"parent", "fathers"}),
    ("Who were [Ravi]'s great-uncles?", {"great", "uncles"}),
    ("Who is [Ravi]'s father-in-law?", {"spouse", "father"}),
    ("Who is Clare Harrowgate's sister's husband?", {"sister", "husband"}),
    ("which packages do Cobalt Systems' members maintain", {"members"}),
    # no possessive and no "of": nothing is possessed
    ("which professional football team do players from [X] play for", set()),
    # a function word before "of" is none ("some of [X]'s films": films only)
    ("which are some of [X]'s films", {"films"}),
])
def test_possessed_words(question, words):
    assert lexicon.possessed_words(question) == words


@pytest.mark.parametrize("question, owner, chain", [
    ("Who is [Clare]'s sister's husband?", "[Clare]", [("sister", "sister"), ("husband", "husband")]),
    ("Who are [Ravi]'s grandparents?", "[Ravi]", [("grandparents", "parents")] * 2),
    ("Who is [Ravi]'s grandmother?", "[Ravi]", [("grandmother", "parent"), ("grandmother", "mother")]),
    ("Who is [Ravi]'s aunt's husband?", "[Ravi]", [("aunt", "parent"), ("aunt", "sibling"), ("husband", "husband")]),
    ("which packages do Cobalt Systems' members maintain", "Cobalt Systems", [("members", "members")]),
    # the chain ends where the possessives do; "of" phrases are no part of it
    ("Where was [Ravi]'s mother born?", "[Ravi]", [("mother", "mother")]),
    ("Who is the father of [Ravi]?", "[Ravi]", []),
])
def test_possessive_chain(question, owner, chain):
    assert lexicon.possessive_chain(question, question.index(owner) + len(owner)) == chain


@pytest.mark.parametrize("word, nouns", [
    ("grandparents", ["parents", "parents"]),
    ("grandchild", ["child", "child"]),
    # a grandson is a child's son: the generations before the last are any member's
    ("great-grandson", ["child", "child", "son"]),
    ("great-great-grandmothers", ["parent"] * 3 + ["mothers"]),
    # only kin nouns take the prefix: other words stay as they are
    ("grandstand", ["grandstand"]),
    ("grandmaster", ["grandmaster"]),
    ("great-uncle", ["great-uncle"]),
    ("parents", ["parents"]),
])
def test_generations_chain_a_kin_noun_once_per_generation(word, nouns):
    assert lexicon.generations(word) == nouns


@pytest.mark.parametrize("word, nouns", [
    ("aunt", ["parent", "sibling"]),
    ("nephews", ["sibling", "child"]),
    ("cousins", ["parent", "sibling", "child"]),
    ("father-in-law", ["spouse", "father"]),
    ("sons-in-law", ["child", "spouse"]),
    ("in-laws", ["spouse", "parent"]),
    ("grandmother", ["parent", "mother"]),
    # a near relative, or no kin word, is itself
    ("sister", ["sister"]),
    ("law", ["law"]),
    ("auntie", ["auntie"]),
])
def test_kin_nouns_name_one_link_each(word, nouns):
    assert lexicon.kin_nouns(word) == nouns


@pytest.mark.parametrize("word, generic", [
    ("son", "child"), ("daughters", "child"), ("kids", "child"), ("sister", "sibling"), ("wives", "spouse"),
    ("dad", "parent"), ("mothers", "parent"),
    ("parent", None), ("children", None), ("mass", None), ("films", None),
])
def test_kin_class_is_the_generic_kin_noun(word, generic):
    assert lexicon.kin_class(word) == generic


def test_kin_chains_are_the_places_of_one_kin_terms_links():
    words = lexicon.question_words("where was [Ravi]'s aunt's husband born", "Ravi")
    assert [w for w, _ in words] == ["where", "parent", "sibling", "husband", "born"]
    # the aunt's links, then the husband: one chain of kin nouns outward from the owner
    assert lexicon.kin_chains(words) == [[1, 2, 3]]
    # kin nouns joined by "and" are no chain
    assert lexicon.kin_chains(lexicon.question_words("what jobs did [Ravi]'s mum and dad have", "Ravi")) == []
    # nor are nouns apart ("of the" between them): the chain is a possessive one
    assert lexicon.kin_chains(lexicon.question_words("who is the father of the husband of [Ravi]", "Ravi")) == []
    # a generational noun's repeats alone are repeated words; its last link, a member, makes a chain
    assert lexicon.kin_chains(lexicon.question_words("who are [Ravi]'s grandparents", "Ravi")) == []
    assert lexicon.kin_chains(lexicon.question_words("who is [Ravi]'s grandmother", "Ravi")) == [[1, 2]]
    # a hyphenated word that is no kin term makes none
    assert lexicon.kin_chains(lexicon.question_words("which films is [Ravi] well-known for", "Ravi")) == []


def test_siblings_as_links_read_a_sibling_as_a_parents_child():
    words = lexicon.question_words("who are [Ravi]'s brothers and sisters", "Ravi")
    assert lexicon.siblings_as_links(words) == [("who", 2), ("parent", 1.0), ("child", 1.0)]
    assert lexicon.siblings_as_links([("aunt", 1.0)]) == [("aunt", 1.0)]


def test_one_kin_chain_said_twice_is_read_once():
    words = lexicon.question_words("who are [Alan]'s nephews and nieces", "Alan")
    assert [w for w, _ in words] == ["who", "sibling", "child"]


def test_without_relative_wh_keeps_only_the_asking_wh_word():
    from kgr.lexicon import question_words, without_relative_wh
    question = "where is the hospital where [Noah] was admitted"
    words = question_words(question, "Noah")
    assert [w for w, _ in words].count("where") == 2
    # words are told apart by their text: a relative wh-word spelled as the asking one stays
    assert [w for w, _ in without_relative_wh(words, question)].count("where") == 2
    relative = "which doctors work at the hospital where [Noah] was admitted"
    kept = [w for w, _ in without_relative_wh(question_words(relative, "Noah"), relative)]
    assert "where" not in kept and "doctors" in kept


@pytest.mark.parametrize("text, name, expected", [
    ("Which books were written by authors from the United States?", "United States", True),
    ("Which movies are in English?", "English", True),
    ("which movies are in english?", "english", False),  # no capital: a common word
    ("Which country is Lyon in?", "country", False),  # a lowercase entity name stays a common word
    ("Country music stars", "Country", False),  # the capital opens the text
    ("Which singers play Country?", "country", False),  # not the graph's spelling
])
def test_written_as_name_is_the_graphs_spelling_with_a_capital_inside_the_text(text, name, expected):
    start = text.casefold().index(name.casefold())
    assert written_as_name(text, start, start + len(name), name) is expected
