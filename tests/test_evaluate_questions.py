"""Question loaders and sampling of kgr.evaluate.questions on small temp files."""

from __future__ import annotations

import json

import pytest

from kgr.errors import ExitStatus, InputError, KgrError
from kgr.evaluate.questions import (
    Question,
    hops_from_path,
    load_question_sets,
    load_questions,
    question_id,
    sample,
)
from kgr.methods.records import same_question

METAQA = (
    "what movies are about [ginger rogers]\tTop Hat|Kitty Foyle|The Barkleys of Broadway\n"
    "\n"
    "who directed the movies written by [Daniel  Pyne]\tJonathan Demme|Jonathan Demme\n"
)


def write(path, text):
    """Write a UTF-8 temp file and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_metaqa_with_hops_from_path_and_qtypes(tmp_path):
    path = write(tmp_path / "2-hop" / "vanilla" / "qa_test.txt", METAQA)
    qtypes = write(tmp_path / "2-hop" / "qa_test_qtype.txt", "tag_to_movie\n\nwriter_to_movie_to_director\n")
    questions = load_questions(path, qtype_path=qtypes)
    assert [q.id for q in questions] == [question_id(q.question) for q in questions]
    first, second = questions
    assert first == Question(
        id=question_id("what movies are about [ginger rogers]"),
        question="what movies are about [ginger rogers]",
        anchors=["ginger rogers"],
        answers=["Top Hat", "Kitty Foyle", "The Barkleys of Broadway"],
        hops=2,
        qtype="tag_to_movie",
    )
    assert second.anchors == ["Daniel  Pyne"] and second.answers == ["Jonathan Demme"]
    assert second.question == "who directed the movies written by [Daniel Pyne]"
    assert second.qtype == "writer_to_movie_to_director"


def test_metaqa_hops_argument_wins(tmp_path):
    path = write(tmp_path / "1-hop" / "qa.txt", METAQA)
    assert {q.hops for q in load_questions(path, hops=3)} == {3}
    assert load_questions(write(tmp_path / "plain.txt", METAQA))[0].hops is None
    assert hops_from_path("data/MetaQA/3-hop/vanilla/qa_dev.txt") == 3
    assert hops_from_path("data/qa_dev.txt") is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("no tab here [x]", "question<TAB>"),
        ("no topic entity\tans", "topic entity"),
        ("empty answers [x]\t | ", "no answers"),
    ],
)
def test_metaqa_malformed_lines(tmp_path, line, message):
    path = write(tmp_path / "qa.txt", "fine [x]\ty\n" + line + "\n")
    with pytest.raises(InputError, match=message) as err:
        load_questions(path, fmt="metaqa")
    assert err.value.line == 2 and err.value.path == str(path)


def test_qtype_file_must_align(tmp_path):
    path = write(tmp_path / "qa.txt", METAQA)
    with pytest.raises(InputError, match="has 1 lines"):
        load_questions(path, qtype_path=write(tmp_path / "short.txt", "a\n"))
    with pytest.raises(InputError) as err:
        load_questions(path, qtype_path=write(tmp_path / "long.txt", "a\n\nb\nc\n"))
    assert err.value.line == 4


def test_jsonl(tmp_path):
    rows = [
        {"id": "h1", "question": "Who?", "anchors": ["A"], "answers": ["B", "B", "C"], "hops": 2, "passages": ["T"]},
        {"id": 7, "question": "What?", "anchors": "A", "answers": "D", "qtype": "comparison"},
    ]
    path = write(tmp_path / "qs.data", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    first, second = load_questions(path)  # detected from the leading `{`
    assert first == Question("h1", "Who?", ["A"], ["B", "C"], 2, ["T"], None)
    assert second == Question("7", "What?", ["A"], ["D"], None, [], "comparison")


def test_jsonl_hops_precedence(tmp_path):
    # The hops argument (eval --hops) beats a line's `hops`, which beats the hop count in the path.
    rows = [{"id": "a", "question": "Who?", "answers": ["B"], "hops": 2}, {"id": "b", "question": "Q", "answers": ["C"]}]
    path = write(tmp_path / "3-hop" / "qs.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    assert [q.hops for q in load_questions(path)] == [2, 3]
    assert [q.hops for q in load_questions(path, hops=1)] == [1, 1]


def test_ids_name_the_question_not_its_line(tmp_path):
    # Two files of the same hop count: a question keeps its id wherever it sits, other questions get other ids.
    one = load_questions(write(tmp_path / "a" / "qa_2hop.txt", METAQA))
    other = load_questions(write(tmp_path / "b" / "qa_2hop.txt", "who wrote [Heat]\tMichael Mann\n" + METAQA))
    assert [q.id for q in other[1:]] == [q.id for q in one]
    assert other[0].id not in {q.id for q in one}
    assert question_id("what  movies are about [ginger rogers] ") == one[0].id  # whitespace does not count
    assert same_question("what  movies are about [ginger rogers]", one[0].question)
    assert not same_question("What movies are about [ginger rogers]", one[0].question) and not same_question(None, "q")


def test_repeated_question_text_is_each_its_own_question(tmp_path):
    # MetaQA asks "who acted in the movie [Eden]" twice, once per film named Eden: two questions, two ids.
    text = "who acted in the movie [Eden]\tBeau Bridges\nwho wrote [Eden]\tX\nwho acted in the movie [Eden]\tFelix\n"
    first, _, repeat = load_questions(write(tmp_path / "qa.txt", text))
    assert first.question == repeat.question and (first.answers, repeat.answers) == (["Beau Bridges"], ["Felix"])
    assert repeat.id == first.id + "-2"


@pytest.mark.parametrize("text", ["", "\n  \n\t\n"])
def test_empty_question_file_is_bad_input(tmp_path, text):
    path = write(tmp_path / "qa_1hop.txt", text)
    with pytest.raises(InputError, match="has no questions") as err:
        load_questions(path)
    assert err.value.path == str(path) and err.value.status == ExitStatus.BAD_INPUT


def test_question_sets_take_hops_from_the_flag_then_the_path(tmp_path):
    a = write(tmp_path / "2-hop" / "qa.txt", METAQA)
    b = write(tmp_path / "dev.txt", METAQA)
    assert [(label, qs[0].hops) for label, qs in load_question_sets([a, b])] == [("2-hop", 2), ("dev", None)]
    assert [(label, qs[0].hops) for label, qs in load_question_sets([a], [3])] == [("3-hop", 3)]
    assert [label for label, _ in load_question_sets([a, b], [1, 3])] == ["1-hop", "3-hop"]
    with pytest.raises(KgrError, match="--hops") as err:
        load_question_sets([a, b, b], [1, 2])
    assert err.value.status == ExitStatus.USAGE


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"question": "q", "answers": ["a"]}', "`id`"),
        ('{"id": "x", "answers": ["a"]}', "`question`"),
        ('{"id": "x", "question": "q", "answers": []}', "at least one answer"),
        ('{"id": "x", "question": "q", "answers": [1]}', "`answers`"),
        ('{"id": "x", "question": "q", "answers": ["a"], "hops": "two"}', "`hops`"),
        ('{"id": "q1", "question": "q", "answers": ["a"]}', "duplicate"),
    ],
)
def test_jsonl_malformed_lines(tmp_path, line, message):
    path = write(tmp_path / "qs.jsonl", '{"id": "q1", "question": "q", "answers": ["a"]}\n' + line + "\n")
    with pytest.raises(InputError, match=message) as err:
        load_questions(path)
    assert err.value.line == 2


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_questions(tmp_path / "missing.txt")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9 [x]\ty\n".encode("latin-1"))
    with pytest.raises(InputError, match="UTF-8"):
        load_questions(bad)
    with pytest.raises(InputError, match="unknown question format"):
        load_questions(write(tmp_path / "qa.txt", METAQA), fmt="csv")


def test_sample_is_reproducible_and_sorted():
    questions = [Question(f"q{i:03d}", "?", [], ["a"]) for i in range(50)]
    picked = sample(questions, 10, seed=3)
    assert [q.id for q in picked] == sorted(q.id for q in picked) and len(picked) == 10
    assert sample(list(reversed(questions)), 10, seed=3) == picked  # input order does not matter
    assert sample(questions, 10, seed=4) != picked
    assert sample(questions, None, seed=3) == questions and sample(questions, 99, seed=3) == questions
