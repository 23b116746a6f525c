"""Readers for LLM-built KGs (HippoRAG OpenIE, GraphRAG, LightRAG, kgr triples with `source`) and provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgr.errors import ExitStatus, InputError
from kgr.ingest import detect_format, read_graph
from kgr.project import Project
from kgr.store import GraphStore

ROOT = Path(__file__).resolve().parent.parent
EXTRACTED = ROOT / "fixtures" / "extracted"
FORMATS = ROOT / "fixtures" / "formats"


def sourced_edges(graph) -> dict[tuple[str, str, str], list[str]]:
    """(subject, relation, object) -> titles (or keys, for untitled passages) of its source passages."""
    label = [p.title or p.key for p in graph.passages]
    return {(r.source, r.relation, r.target): [label[p] for p in r.sources] for r in graph.relationships}


def test_openie_results_are_detected_and_read_with_provenance():
    text = (EXTRACTED / "openie_results.json").read_text()
    assert detect_format(EXTRACTED / "openie_results.json", text, None, None)[0] == "openie"
    graph = read_graph([EXTRACTED / "openie_results.json"])
    assert [(p.title, p.text[:8]) for p in graph.passages] == [
        ("Heat (1995 film)", "Heat is "), ("Michael Mann", "Michael "), ("Chicago", "Chicago ")]
    edges = sourced_edges(graph)
    # The same triple extracted from two passages is one relationship sourced to both.
    assert edges[("Heat", "directed by", "Michael Mann")] == ["Heat (1995 film)", "Chicago"]
    assert edges[("Michael Mann", "born in", "Chicago")] == ["Michael Mann"]
    assert len(edges) == 5
    assert [graph.passages[p].title for p in graph.entities["Chicago"].sources] == ["Michael Mann", "Chicago"]


def test_malformed_openie_records_are_reported_not_fatal():
    path = EXTRACTED / "openie_results.json"
    skipped = read_graph([path]).skipped
    assert skipped == [
        f"{path}:3: docs[0]: triple 3: expected 3 non-empty strings, found ['Heat', 'is a crime film']",
        f"{path}:15: docs[1]: entity 2: expected a non-empty string, found 7",
        f"{path}:15: docs[1]: triple 1: expected 3 non-empty strings, found ['Michael Mann', 'is', 'American', "
        f"'filmmaker']",
        f"{path}:15: docs[1]: triple 2: expected 3 non-empty strings, found ['Michael Mann', '', 'filmmaker']",
    ]


def test_openie_v2_ids_title_lines_and_literal_triples():
    graph = read_graph([EXTRACTED / "openie_v2.json"])
    assert [(p.key, p.title) for p in graph.passages] == [("chunk-8f2a", "Thief (film)"), ("chunk-41c0", "")]
    assert graph.passages[0].text == "Thief is a 1981 film directed by Michael Mann."
    assert sourced_edges(graph)[("passage", "has", "one line")] == ["chunk-41c0"]
    assert not graph.skipped


def test_openie_without_docs_is_bad_input(tmp_path):
    path = tmp_path / "openie.json"
    path.write_text('{"docs": {"passage": "x"}}')
    with pytest.raises(InputError, match=r"openie.json:1: expected HippoRAG OpenIE results"):
        read_graph([path])


def test_graphrag_output_folder():
    graph = read_graph([EXTRACTED / "graphrag"])
    assert [(p.key, p.title) for p in graph.passages] == [("tu-1", "Heat (1995 film)"), ("tu-2", "Heat (1995 film)")]
    assert graph.entities["MICHAEL MANN"].types == ["PERSON"]
    assert graph.entities["HEAT"].description == "A 1995 crime film."
    assert [graph.passages[p].key for p in graph.entities["HEAT"].sources] == ["tu-1", "tu-2"]
    assert {(r.source, r.target, r.description, tuple(graph.passages[p].key for p in r.sources))
            for r in graph.relationships} == {
        ("HEAT", "MICHAEL MANN", "Michael Mann directed Heat.", ("tu-1",)),
        ("AL PACINO", "HEAT", "Al Pacino stars in Heat.", ("tu-2",))}


def test_graphrag_table_without_a_required_column(tmp_path):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "output"
    shutil.copytree(EXTRACTED / "graphrag", folder)
    pq.write_table(pa.table({"source": ["HEAT"], "description": ["x"]}), folder / "relationships.parquet")
    with pytest.raises(InputError, match=r"relationships.parquet: no column 'target'"):
        read_graph([folder])


def test_lightrag_source_ids_name_chunks():
    graph = read_graph([FORMATS / "lightrag_kg.json"])
    edges = {(r.source, r.target): [graph.passages[p].key for p in r.sources] for r in graph.relationships}
    assert edges == {("Heat", "Michael Mann"): ["doc-1#0"], ("Al Pacino", "Heat"): ["doc-2#1"],
                     ("Heat", "Los Angeles"): []}
    assert [graph.passages[p].key for p in graph.entities["Al Pacino"].sources] == ["doc-2#1"]


def test_triples_name_sources_by_passage_id_or_title():
    graph = read_graph([EXTRACTED / "triples_sources.jsonl"], passages=[EXTRACTED / "passages.jsonl"])
    edges = sourced_edges(graph)
    assert edges[("Heat", "starred_actors", "Al Pacino")] == ["Heat (1995 film)", "Al Pacino"]
    assert edges[("Michael Mann", "born_in", "Chicago")] == ["Michael Mann"]
    assert [graph.passages[p].key for p in graph.entities["Michael Mann"].sources] == ["p-heat"]


@pytest.mark.parametrize("passages", [True, False])
def test_a_source_naming_no_passage_is_bad_input(tmp_path, passages):
    path = tmp_path / "kb.jsonl"
    path.write_text('{"subject": "A", "relation": "r", "object": "B"}\n'
                    '{"subject": "A", "relation": "r", "object": "C", "source": "nowhere"}\n')
    hint = "" if passages else r" \(no passages were given"
    with pytest.raises(InputError, match=rf"kb.jsonl:2: source 'nowhere' names no passage id or title{hint}"):
        read_graph([path], passages=[EXTRACTED / "passages.jsonl"] if passages else [])


def test_provenance_round_trips_into_the_store(tmp_path, run_kgr):
    root = tmp_path / "project"
    result = run_kgr("ingest", root, EXTRACTED / "graphrag", "--quiet")
    assert result.exit_code == 0, result.stderr
    with Project.open(root) as project:
        store = GraphStore(project)
        titles = [key for (key,) in project.db.execute("SELECT key FROM passages ORDER BY pid").fetchall()]
        by_triple = {store.triple(rid): [titles[p] for p in pids] for rid, pids in store.relationship_passages.items()}
        assert by_triple == {("HEAT", "related_to", "MICHAEL MANN"): ["tu-1"],
                             ("AL PACINO", "related_to", "HEAT"): ["tu-2"]}
        heat = store.find("HEAT")[0]
        assert [titles[p] for p in store.entity_source_passages[heat]] == ["tu-1", "tu-2"]


def test_kgr_ingest_an_openie_file_end_to_end(tmp_path, run_kgr):
    root = tmp_path / "project"
    result = run_kgr("ingest", root, EXTRACTED / "openie_results.json")
    assert result.exit_code == 0, result.stderr
    summary = [line for line in result.stderr.splitlines() if "malformed" in line]
    assert len(summary) == 1 and "left out 4 malformed record(s)" in summary[0] and "docs[0]: triple 3" in summary[0]
    assert "4 skipped_records" in result.stderr
    with Project.open(root) as project:
        counts = project.last_run("ingest").counts
        assert (counts["passages"], counts["relationships"], counts["skipped_records"]) == (3, 5, 4)
        assert counts["relationship_passages"] == 6
        store = GraphStore(project)
        rid = next(r for r in range(len(store.src)) if store.triple(r) == ("Michael Mann", "born in", "Chicago"))
        assert [store.passages[p][0] for p in store.relationship_passages[rid]] == ["Michael Mann"]
    report = json.loads(run_kgr("ingest", root, EXTRACTED / "openie_results.json", "--force", "--json").stdout)
    assert len(report["skipped_records"]) == 4 and report["counts"]["skipped_records"] == 4


def test_kgr_ingest_a_folder_that_is_not_graphrag(tmp_path, run_kgr):
    folder = tmp_path / "empty"
    folder.mkdir()
    result = run_kgr("ingest", tmp_path / "project", folder)
    assert result.exit_code == ExitStatus.BAD_INPUT
    assert "not a GraphRAG output folder" in result.stderr and not (tmp_path / "project" / "kgr.duckdb").exists()


def test_csrag_evidence_of_a_resolved_constraint_is_its_triples_source_passages(tmp_path, run_kgr):
    root = tmp_path / "project"
    assert run_kgr("ingest", root, EXTRACTED / "openie_results.json", "--quiet").exit_code == 0
    result = run_kgr("retrieve", root, "--query", "who is [Heat] directed by", "--method", "csrag", "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    resolved = [c for c in record["trace"]["constraints"] if c["decision"] == "resolved"]
    assert resolved and "Michael Mann" in resolved[0]["bound"], record["trace"]["constraints"]
    # "Heat directed by Michael Mann" was extracted from the Heat and the Chicago passages; no title links the
    # Chicago passage to Heat or Michael Mann, so only provenance brings it in.
    assert record["passages"][:2] == ["Heat (1995 film)", "Chicago"]
