"""Reading a question's mentions: `Query` (kgr.methods.base), marking names and offered alternatives (kgr.lexicon)."""

from __future__ import annotations

import pytest

from kgr.lexicon import mark_names, offered_alternatives
from kgr.methods.base import Query


@pytest.mark.parametrize("text, names, marked", [
    ("Who lived longer, ada helm or Boris Vane?", ["Ada Helm", "Boris Vane"],
     "Who lived longer, [Ada Helm] or [Boris Vane]?"),
    ("Where did the composer of The Queen Of Spades (Prokofiev) study?", ["The Queen of Spades (Prokofiev)"],
     "Where did the composer of [The Queen of Spades (Prokofiev)] study?"),
    ("Who is Tlilpotoncatzin's uncle?", ["Tlilpotoncatzin"], "Who is [Tlilpotoncatzin]'s uncle?"),
    ("films of Red Gap and Raiders of Red Gap", ["Red Gap", "Raiders of Red Gap"],  # the longer name first
     "films of [Red Gap] and [Raiders of Red Gap]"),
    ("the Gapping of Redgap", ["Red Gap", "Gap"], "the Gapping of Redgap"),  # whole words only
])
def test_mark_names_brackets_the_first_whole_word_occurrence(text, names, marked):
    assert mark_names(text, names) == marked


@pytest.mark.parametrize("question, offered", [
    ("Who lived longer, [Ada Helm] or [Boris Vane]?", ["Ada Helm", "Boris Vane"]),
    ("Which came first: [A], [B], or [C]?", ["A", "B", "C"]),
    ("is it [A] or [B] or [C]", ["A", "B", "C"]),
    ("Was [A] released before [B] OR after it?", []),  # "or" joins clauses, not the mentions
    ("films by [A] and [B]", []),  # a conjunction: each mention constrains the answer
    ("players from [A], [B]", []),
    ("Who directed [A]?", []),
])
def test_offered_alternatives_are_mentions_joined_by_or(question, offered):
    assert offered_alternatives(question) == offered


def test_query_mentions_and_plain_text():
    q = Query("q", "who wrote [ Dark Harbor ] and [Blue  Canyon]")
    assert q.mentions == ["Dark Harbor", "Blue  Canyon"] and q.plain == "who wrote Dark Harbor and Blue Canyon"
