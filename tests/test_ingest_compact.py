"""Tests for the compact read (kgr.ingest.compact, the merge in kgr.ingest.sources, kgr.ingest.readers' line
streams): chunk boundaries change nothing, duplicates and provenance as before, bad input found past a file's head."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kgr.errors import InputError
from kgr.ingest.compact import CompactGraph
from kgr.ingest.readers import Batch, StringChunks, stream_lines
from kgr.ingest.sources import merge, passage_links, read_compact, read_graph
from kgr.ingest.stage import graph_columns, names_with_several_types

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
FORMATS = FIXTURES / "formats"
EXTRACTED = FIXTURES / "extracted"

# (graph files, options): every reader, a schema, inference, passages and provenance.
CASES = {
    "metaqa, schema": ([FIXTURES / "metaqa" / "kb.txt"], {"schema": FIXTURES / "metaqa" / "schema.toml"}),
    "metaqa, inferred": ([FIXTURES / "metaqa" / "kb.txt"], {}),
    "entities and relationships": ([FORMATS / "entities.csv", FORMATS / "relationships.csv"], {}),
    "jsonl and passages": ([FORMATS / "entities.jsonl", FORMATS / "relationships.jsonl"],
                           {"passages": [FORMATS / "passages.jsonl"]}),
    "mixed": ([FORMATS / "kb.txt", FORMATS / "triples.tsv", FORMATS / "triples.jsonl", FORMATS / "records.json"],
              {"passages": [FORMATS / "passages.json"]}),
    "openie": ([EXTRACTED / "openie_results.json"], {}),
    "graphrag": ([EXTRACTED / "graphrag"], {}),
    "lightrag": ([FORMATS / "lightrag_kg.json"], {}),
    "sources": ([EXTRACTED / "triples_sources.jsonl"], {"passages": [EXTRACTED / "passages.jsonl"]}),
}


def tables(graph: CompactGraph) -> dict[str, dict[str, list]]:
    """Every graph table a compact graph makes, as Python lists."""
    links = passage_links(graph.names.to_pylist(), graph.passages)
    return {name: {column: values.to_pylist() for column, values in columns.items()}
            for name, columns in graph_columns(graph, links, chunk_rows=5).items()}


@pytest.mark.parametrize("case", CASES)
def test_chunks_of_seven_rows_read_what_one_chunk_reads(case):
    paths, options = CASES[case]
    whole = read_compact(paths, chunk_rows=1 << 30, **options)
    chunked = read_compact(paths, chunk_rows=7, **options)
    assert tables(chunked) == tables(whole)
    assert chunked.skipped == whole.skipped and chunked.inferred_types == whole.inferred_types


def test_the_compact_graph_and_the_graph_of_objects_make_the_same_tables():
    paths, options = CASES["sources"]
    compact = read_compact(paths, **options)
    assert tables(CompactGraph.from_graph(compact.to_graph())) == tables(compact)


def test_duplicate_edges_are_kept_once_in_first_order_and_pool_their_sources(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text("\n".join([
        '{"subject": "B", "relation": "r", "object": "C", "source": "p1"}',
        '{"subject": "A", "relation": "r", "object": "B", "description": "one", "source": "p2"}',
        '{"subject": "A", "relation": "r", "object": "B", "description": "two"}',
        '{"subject": "B", "relation": "r", "object": "C", "source": "p2"}',
        '{"subject": "A", "relation": "r", "object": "B", "description": "one", "source": "p1"}',
    ]) + "\n", encoding="utf-8")
    passages = tmp_path / "passages.jsonl"
    passages.write_text('{"id": "p1", "text": "x"}\n{"id": "p2", "text": "y"}\n', encoding="utf-8")
    graph = read_graph([path], passages=[passages])
    assert list(graph.entities) == ["B", "C", "A"]
    assert [(r.source, r.target, r.description, list(r.sources)) for r in graph.relationships] == [
        ("B", "C", "", [0, 1]), ("A", "B", "one", [1, 0]), ("A", "B", "two", [])]


def test_a_relationship_naming_an_undeclared_id_is_refused_at_its_line(tmp_path):
    entities = tmp_path / "entities.tsv"
    entities.write_text("id\tname\ne1\tOne\ne2\tTwo\n", encoding="utf-8")
    relationships = tmp_path / "relationships.tsv"
    relationships.write_text("source\trelation\ttarget\ne1\tr\te2\ne2\tr\te9\ne9\tr\te1\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_compact([entities, relationships], chunk_rows=1)
    assert caught.value.message == f"{relationships}:3: relationship names unknown entity id 'e9'"


def test_bad_utf8_past_a_files_head_is_found_at_its_line(tmp_path):
    path = tmp_path / "kb.txt"
    path.write_bytes("".join(f"a{i}|r|b{i}\n" for i in range(20)).encode() + b"caf\xe9|r|x\n")
    with pytest.raises(InputError) as caught:
        read_compact([path])
    assert caught.value.message == f"{path}:21: not UTF-8 text (invalid byte 0xe9)"


def test_lines_stream_as_the_whole_text_split_and_as_csv_read_it(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"\xef\xbb\xbfx,y\r\n\"multi\nline\",2\rlast\n\n")
    text = path.read_bytes().decode("utf-8-sig")
    assert list(stream_lines(path)) == text.split("\n")[:-1]  # the last, empty, piece is a blank line either way
    assert list(stream_lines(path, newline="")) == list(io.StringIO(text, newline=""))
    assert list(stream_lines(path, newline="")) == ["x,y\r\n", "\"multi\n", "line\",2\r", "last\n", "\n"]


def test_string_chunks_hold_strings_in_chunks_of_their_size():
    column = StringChunks(chunk_rows=3)
    for text in "abcdefg":
        column.append(text)
    assert len(column) == 7 and [len(chunk) for chunk in column.chunks] == [3, 3]
    assert column.array().to_pylist() == list("abcdefg")


def test_merging_a_batch_with_keys_of_its_own():
    base, added = Batch(Path("base")), Batch(Path("added"))
    base.add_edge(1, "A", "r", "B", "")
    added.add_entity(1, "C", "C", ["t"], "")
    added.add_edge(2, "B", "r", "C", "")
    graph = merge([base, added])
    assert graph.keys.to_pylist() == ["C", "A", "B"]
    assert graph.src.tolist() == [1, 2] and graph.dst.tolist() == [2, 0]


def test_names_shared_across_types_are_found_by_their_collapsed_spelling_in_first_order():
    tables = {"entities": {"eid": [0, 1, 2, 3, 4, 5], "name": ["Ada  Lee", "Mercury", "Ada Lee", "Mercury", "Solo",
                                                               "Ada\tLee"]},
              "entity_types": {"eid": [3, 1, 1, 0, 2, 4], "type": ["planet", "metal", "element", "person", "city",
                                                                    "x"]}}
    assert names_with_several_types(tables, chunk_rows=2) == [
        "'Ada Lee' (untyped / city / person)", "'Mercury' (element, metal / planet)"]
