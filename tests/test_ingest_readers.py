"""Tests for kgr.ingest readers: every input format, detection, the columns option, bad input, passages."""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path

import pytest

from kgr.errors import ExitStatus, InputError
from kgr.ingest import detect_format, fill_descriptions, link_passages, read_graph

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ROOT / "fixtures" / "formats"
BAD = FORMATS / "bad"
METAQA = ROOT / "fixtures" / "metaqa"
WIKI = ROOT / "fixtures" / "2wiki"
FULL_METAQA = ROOT.parent / "shared" / "data" / "metaqa" / "kb.txt"  # the data folder beside the clone


def edges(graph) -> set[tuple[str, str, str]]:
    """The graph's relationships as (source, relation, target) keys."""
    return {(r.source, r.relation, r.target) for r in graph.relationships}


def test_pipe_triples_use_names_as_keys_and_skip_blank_lines():
    graph = read_graph([FORMATS / "kb.txt"])
    assert list(graph.entities)[:3] == ["Heat", "Michael Mann", "Al Pacino"]
    assert graph.entities["Heat"].name == "Heat"
    assert len(graph.relationships) == 6
    assert ("Collateral", "release_year", "2004") in edges(graph)
    assert all(r.description == "" for r in graph.relationships)


@pytest.mark.parametrize(("name", "fmt"), [("triples.tsv", None), ("headerless.tsv", "triples"),
                                           ("triples.jsonl", None), ("records.json", None),
                                           ("relationships_only.jsonl", None)])
def test_triple_formats_give_the_same_edges(name, fmt):
    delimiter = "\t" if fmt else None
    graph = read_graph([FORMATS / name], fmt=fmt, delimiter=delimiter)
    assert edges(graph) == {("Heat", "directed_by", "Michael Mann"), ("Heat", "starred_actors", "Al Pacino")}


def test_relationship_description_is_kept():
    graph = read_graph([FORMATS / "relationships_only.jsonl"])
    assert graph.relationships[0].description == "Michael Mann directed Heat (1995)."


@pytest.mark.parametrize(("name", "expected"), [
    ("kb.txt", ("triples", "|")), ("triples.tsv", ("tsv", "\t")),
    ("triples_custom.csv", ("csv", ",")), ("triples.jsonl", ("jsonl", "|")), ("records.json", ("json", "|")),
    ("lightrag_kg.json", ("lightrag", "|")),
])
def test_detect_format_by_extension_and_content(name, expected):
    path = FORMATS / name
    assert detect_format(path, path.read_text(encoding="utf-8"), None, None) == expected


def test_detect_format_by_content_for_other_extensions(tmp_path):
    cases = {"a.txt": ("Heat\tdirected_by\tMichael Mann\n", ("triples", "\t")),
             "b.txt": ("subject\trelation\tobject\nHeat\tdirected_by\tMichael Mann\n", ("tsv", "\t")),
             "c.data": ('{"subject": "Heat", "relation": "r", "object": "X"}\n', ("jsonl", "|")),
             "d.json": ('{"subject": "Heat", "relation": "r", "object": "X"}\n{"subject": "A", "relation": "r",'
                        ' "object": "B"}\n', ("jsonl", "|"))}
    for name, (text, expected) in cases.items():
        assert detect_format(tmp_path / name, text, None, None) == expected
    (tmp_path / "a.txt").write_text(cases["a.txt"][0], encoding="utf-8")
    assert edges(read_graph([tmp_path / "a.txt"])) == {("Heat", "directed_by", "Michael Mann")}


def test_explicit_format_and_delimiter(tmp_path):
    path = tmp_path / "kb.dat"
    path.write_text("Heat;directed_by;Michael Mann\n", encoding="utf-8")
    graph = read_graph([path], fmt="triples", delimiter=";")
    assert edges(graph) == {("Heat", "directed_by", "Michael Mann")}


def test_columns_option_maps_header_names():
    graph = read_graph([FORMATS / "triples_custom.csv"],
                       columns={"subject": "head", "relation": "rel", "object": "tail", "description": "note"})
    assert edges(graph) == {("Heat", "directed_by", "Michael Mann"),
                            ("Heat, the film", "starred_actors", "Al Pacino")}
    assert [r.description for r in graph.relationships] == ["x", "y"]
    # Left unmapped, the `note` column would be dropped silently: it is refused instead.
    error = bad([FORMATS / "triples_custom.csv"], columns={"subject": "head", "relation": "rel", "object": "tail"})
    assert error.line == 1 and "unknown column(s) 'note'" in error.message


def test_columns_option_maps_jsonl_keys(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text('{"h": "Heat", "r": "directed_by", "t": "Michael Mann"}\n', encoding="utf-8")
    graph = read_graph([path], columns={"subject": "h", "relation": "r", "object": "t"})
    assert edges(graph) == {("Heat", "directed_by", "Michael Mann")}


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_entities_and_relationships_files(suffix):
    graph = read_graph([FORMATS / f"entities.{suffix}", FORMATS / f"relationships.{suffix}"])
    assert list(graph.entities) == ["m1", "p1", "p2"]
    heat, mann = graph.entities["m1"], graph.entities["p1"]
    assert heat.name == "Heat" and heat.types == ["movie"]
    assert heat.description.startswith("A 1995 crime film")
    assert mann.types[:2] == ["director", "writer"]
    assert edges(graph) == {("m1", "directed_by", "p1"), ("m1", "starred_actors", "p2")}
    assert graph.relationships[1].description in ("", "Al Pacino plays Vincent Hanna.")


def test_repeated_entity_id_that_agrees_is_merged():
    graph = read_graph([FORMATS / "entities.jsonl", FORMATS / "relationships.jsonl"])
    mann = graph.entities["p1"]
    # The repeat gives no types, so it agrees with the first record's and adds its description.
    assert mann.types == ["director", "writer"]
    assert mann.description == "American filmmaker."


def test_relationship_file_order_does_not_matter():
    graph = read_graph([FORMATS / "relationships.jsonl", FORMATS / "entities.jsonl"])
    assert graph.entities["p1"].name == "Michael Mann"


def test_lightrag_custom_kg():
    graph = read_graph([FORMATS / "lightrag_kg.json"])
    assert graph.entities["Heat"].types == ["film"]
    assert graph.entities["Michael Mann"].types == ["person", "director"]
    assert graph.entities["Heat"].description == "A 1995 crime film."
    # UNKNOWN is LightRAG's placeholder, so inference types Al Pacino; an unlisted endpoint is created.
    assert graph.entities["Al Pacino"].types and "UNKNOWN" not in graph.entities["Al Pacino"].types
    assert "Los Angeles" in graph.entities
    assert edges(graph) == {("Heat", "directed by", "Michael Mann"), ("Al Pacino", "related_to", "Heat"),
                            ("Heat", "set in", "Los Angeles")}
    assert graph.relationships[0].description == "Michael Mann directed Heat."
    assert [(p.key, p.title) for p in graph.passages] == [("doc-1#0", ""), ("doc-2#1", "")]
    assert graph.passages[1].text == "Al Pacino stars as detective Vincent Hanna."


def test_passages_json_and_jsonl_and_linking_by_title():
    graph = read_graph([FORMATS / "kb.txt"], passages=[FORMATS / "passages.json", FORMATS / "passages.jsonl"])
    assert [p.key for p in graph.passages] == ["0", "1", "2", "p-heat", "p-pacino"]
    assert graph.passages[2].text == "Thief is a 1981 film by Michael Mann."
    # Titles match names case-insensitively with whitespace collapsed; "Thief" names no entity.
    assert link_passages(graph) == [("Heat", 0), ("Michael Mann", 1), ("Heat", 3), ("Al Pacino", 4)]


def test_fill_descriptions_only_fills_empty_ones():
    graph = read_graph([FORMATS / "relationships_only.jsonl"])
    fill_descriptions(graph)
    assert graph.relationships[0].description == "Michael Mann directed Heat (1995)."
    assert graph.relationships[1].description == "Heat starred actors Al Pacino"


def test_duplicate_triples_are_kept_once(tmp_path):
    path = tmp_path / "kb.txt"
    path.write_text("A|r|B\nA|r|B\nA|s|B\n", encoding="utf-8")
    assert len(read_graph([path]).relationships) == 2


def bad(paths, **options) -> InputError:
    """Read input that must fail and return the error."""
    with pytest.raises(InputError) as caught:
        read_graph(paths, **options)
    assert caught.value.status == ExitStatus.BAD_INPUT
    assert "\n" not in caught.value.message
    return caught.value


@pytest.mark.parametrize(("name", "line", "words"), [
    ("malformed_line.txt", 2, "found 2 field(s)"),
    ("latin1.txt", 2, "not UTF-8"),
    ("duplicate_entities.jsonl", 3, "'p1' repeats with different content"),
    ("bad_json.jsonl", 2, "invalid JSON"),
    ("ragged.csv", 3, "expected 3 fields"),
    ("lightrag_missing.json", 7, "relationship without tgt_id"),
    ("conflicting_types.jsonl", 3, "'p1' repeats with type(s) producer but"),
    ("conflicting_names.csv", 4, "'Heat' repeats with type(s) book but"),
    ("extra_column.csv", 1, "unknown column(s) 'weight'; known columns: subject, relation, object"),
    ("header_only.tsv", 1, "no records: a header but no rows"),
    ("empty_array.json", 1, "no records: an empty JSON array"),
    ("lightrag_empty.json", 1, "no records: empty entities, relationships and chunks"),
    ("zero_bytes.txt", 1, "empty file (0 bytes)"),
    ("empty.txt", 1, "empty file (only blank lines)"),
])
def test_bad_input_names_file_and_line(name, line, words):
    error = bad([BAD / name])
    assert error.path == str(BAD / name)
    assert error.line == line
    assert words in error.message
    assert error.message.startswith(f"{BAD / name}:{line}: ")


def test_conflicting_types_name_both_records():
    error = bad([BAD / "conflicting_types.jsonl"])
    assert f"{BAD / 'conflicting_types.jsonl'}:1 gives director, writer" in error.message
    assert "list all its types in one record" in error.message


def test_unknown_column_message_names_the_column_option():
    error = bad([BAD / "extra_column.csv"])
    assert "--column FIELD=HEADER" in error.message


def test_mapped_headers_are_not_unknown():
    graph = read_graph([BAD / "extra_column.csv"], columns={"description": "weight"})
    assert graph.relationships[0].description == "0.9"


@pytest.mark.parametrize(("content", "words"), [("", "empty file (0 bytes)"), ("\n  \n", "only blank lines"),
                                                ("[]\n", "no records: no passages")])
def test_empty_passage_file(tmp_path, content, words):
    path = tmp_path / "passages.json"
    path.write_text(content, encoding="utf-8")
    error = bad([FORMATS / "kb.txt"], passages=[path])
    assert error.path == str(path) and error.line == 1 and words in error.message


def test_missing_file(tmp_path):
    error = bad([tmp_path / "nope.txt"])
    assert error.path == str(tmp_path / "nope.txt") and "no such file" in error.message


def test_unknown_column_in_columns_option():
    error = bad([BAD / "unknown_column.csv"], columns={"subject": "head", "relation": "rel", "object": "obj"})
    assert error.line == 1 and "unknown column 'obj'" in error.message and "head, rel, tail" in error.message


def test_header_without_known_columns():
    error = bad([BAD / "unknown_column.csv"])
    assert error.line == 1 and "no known columns" in error.message


def test_unknown_field_in_columns_option():
    error = bad([FORMATS / "triples_custom.csv"], columns={"head": "head"})
    assert "unknown field(s) head" in error.message


def test_relationship_naming_unknown_entity_id():
    path = BAD / "unknown_entity.jsonl"
    error = bad([BAD / "entities.jsonl", path])
    assert error.path == str(path) and error.line == 2 and "unknown entity id 'p9'" in error.message


def test_bad_passage_file(tmp_path):
    path = tmp_path / "passages.jsonl"
    path.write_text('{"title": "A", "text": "a"}\n{"title": "B"}\n', encoding="utf-8")
    error = bad([FORMATS / "kb.txt"], passages=[path])
    assert error.line == 2 and "passage without text" in error.message


def test_json_array_errors_name_the_record_line(tmp_path):
    path = tmp_path / "records.json"
    path.write_text('[\n  {"subject": "A", "relation": "r", "object": "B"},\n  {"subject": "A", "object": "B"}\n]\n',
                    encoding="utf-8")
    error = bad([path])
    assert error.line == 3 and "no relation" in error.message


def test_metaqa_fixture_answers_reachable_within_hops():
    graph = read_graph([METAQA / "kb.txt"])
    neighbours: dict[str, set[str]] = {}
    for rel in graph.relationships:
        neighbours.setdefault(rel.source, set()).add(rel.target)
        neighbours.setdefault(rel.target, set()).add(rel.source)
    for hops in (1, 2, 3):
        lines = (METAQA / f"qa_{hops}hop.txt").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 20
        for line in lines:
            question, answers = line.split("\t")
            topic = question[question.index("[") + 1:question.index("]")]
            depth = {topic: 0}
            queue = deque([topic])
            while queue:
                node = queue.popleft()
                if depth[node] < hops:
                    for other in neighbours.get(node, ()):
                        if other not in depth:
                            depth[other] = depth[node] + 1
                            queue.append(other)
            assert set(answers.split("|")) <= set(depth), line


def test_2wiki_fixture_reads_and_links_gold_passages():
    graph = read_graph([WIKI / "triples.jsonl"], passages=[WIKI / "corpus.json"])
    linked_titles = {graph.passages[i].title for _, i in link_passages(graph)}
    questions = [json.loads(line) for line in (WIKI / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(questions) >= 30
    for q in questions:
        assert set(q["passages"]) <= linked_titles
        assert q["hops"] >= 1 and q["answers"]


@pytest.mark.skipif(not FULL_METAQA.exists(), reason="full MetaQA KB not present")
def test_full_metaqa_kb_reads_fast():
    start = time.perf_counter()
    graph = read_graph([FULL_METAQA])
    elapsed = time.perf_counter() - start
    assert len(graph.relationships) == 133_582 and len(graph.entities) == 43_234
    # ~0.6 s on an idle machine; the bound only catches a pathological slowdown on a loaded CI machine.
    assert elapsed < 10.0
