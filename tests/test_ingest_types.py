"""Tests for kgr.ingest.types: schema loading and application, and role-type inference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgr.errors import InputError
from kgr.graph import Entity, Graph, Relationship
from kgr.ingest import apply_schema, infer_types, load_schema, read_graph

ROOT = Path(__file__).resolve().parent.parent
METAQA = ROOT / "fixtures" / "metaqa"
FORMATS = ROOT / "fixtures" / "formats"
BAD = FORMATS / "bad"


@pytest.fixture(scope="module")
def metaqa():
    """The MetaQA fixture slice with inferred types."""
    return read_graph([METAQA / "kb.txt"])


def test_load_metaqa_schema():
    schema = load_schema(METAQA / "schema.toml")
    assert len(schema.relations) == 9
    assert schema.relations["directed_by"] == ("movie", "director")
    assert schema.relations["has_tags"] == ("movie", "tag")


def test_read_graph_applies_schema():
    graph = read_graph([METAQA / "kb.txt"], schema=METAQA / "schema.toml")
    types = {t for e in graph.entities.values() for t in e.types}
    assert types == {"movie", "director", "writer", "actor", "year", "language", "genre", "tag", "rating", "votes"}
    movie = graph.relationships[0].source
    assert graph.entities[movie].types == ["movie"]


def test_schema_keeps_input_types():
    graph = Graph(entities={"a": Entity("a", "A", types=["film"])},
                  relationships=[Relationship("a", "directed_by", "b")])
    graph.entity("b")
    apply_schema(graph, load_schema(METAQA / "schema.toml"))
    assert graph.entities["a"].types == ["film"]
    assert graph.entities["b"].types == ["director"]


def test_schema_missing_relation_lists_it():
    with pytest.raises(InputError) as caught:
        read_graph([FORMATS / "kb.txt"], schema=BAD / "schema_missing.toml")
    assert caught.value.path == str(BAD / "schema_missing.toml")
    assert "missing from the schema: release_year, starred_actors" in caught.value.message


def test_schema_invalid_toml_names_line():
    with pytest.raises(InputError) as caught:
        load_schema(BAD / "schema_invalid.toml")
    assert caught.value.line == 3 and "invalid TOML" in caught.value.message


def test_schema_table_errors_name_table_line():
    with pytest.raises(InputError) as caught:
        load_schema(BAD / "schema_no_object.toml")
    assert caught.value.line == 1 and "relations.directed_by needs a non-empty object type" in caught.value.message


def test_schema_unknown_key(tmp_path):
    path = tmp_path / "schema.toml"
    path.write_text('[relations.r]\nsubject = "a"\nobjekt = "b"\n', encoding="utf-8")
    with pytest.raises(InputError, match="unknown key.*objekt"):
        load_schema(path)


def test_missing_schema_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_schema(tmp_path / "none.toml")


def test_inference_merges_movie_roles(metaqa):
    groups = infer_types(_untyped_copy(metaqa))
    movie_type = next(name for name, roles in groups.items() if "directed_by:subject" in roles)
    assert sorted(groups[movie_type]) == sorted(f"{r}:subject" for r in {x.relation for x in metaqa.relationships})
    # Named after its largest member role.
    assert movie_type == "release_year:subject"


def test_inference_keeps_directors_apart(metaqa):
    movie = metaqa.relationships[0].source
    assert metaqa.entities[movie].types == ["release_year:subject"]
    director = next(r.target for r in metaqa.relationships if r.relation == "directed_by")
    assert "directed_by:object" in metaqa.entities[director].types
    for name in ("directed_by:object", "written_by:object", "starred_actors:object"):
        assert any(e.types == [name] for e in metaqa.entities.values())


def test_person_who_directs_and_acts_gets_two_types(metaqa):
    directors = {r.target for r in metaqa.relationships if r.relation == "directed_by"}
    actors = {r.target for r in metaqa.relationships if r.relation == "starred_actors"}
    both = sorted(directors & actors)
    assert both
    for key in both:
        assert {"directed_by:object", "starred_actors:object"} <= set(metaqa.entities[key].types)


def test_inference_leaves_input_types_alone():
    graph = read_graph([FORMATS / "entities.jsonl", FORMATS / "relationships.jsonl"])
    assert graph.entities["m1"].types == ["movie"]
    assert graph.entities["p2"].types == ["actor"]


def test_inference_types_untyped_entities_only():
    graph = Graph()
    for source, target in (("m1", "p1"), ("m2", "p2")):
        graph.entity(source)
        graph.entity(target)
        graph.relationships.append(Relationship(source, "directed_by", target))
    graph.entities["p1"].types = ["person"]
    infer_types(graph)
    assert graph.entities["p1"].types == ["person"]
    assert graph.entities["p2"].types == ["directed_by:object"]
    assert graph.entities["m1"].types == ["directed_by:subject"]


def _graph(triples) -> Graph:
    graph = Graph()
    for source, relation, target in triples:
        graph.entity(source)
        graph.entity(target)
        graph.relationships.append(Relationship(source, relation, target))
    return graph


def _art_world(located: list[tuple[str, str, str]] = ()) -> list[tuple[str, str, str]]:
    """Six paintings by three painters in two museums; every one of them has an `instance of` edge to its kind."""
    triples = [*located]
    for i in range(6):
        triples += [(f"work{i}", "created by", f"painter{i % 3}"), (f"work{i}", "kept in", f"museum{i % 2}"),
                    (f"work{i}", "completed in", f"{1900 + i}"), (f"work{i}", "instance of", "painting")]
    for i in range(3):
        triples += [(f"painter{i}", "born in", f"{1850 + i}"), (f"painter{i}", "instance of", "human")]
    for i in range(2):
        triples += [(f"museum{i}", "opened in", f"{1800 + i}"), (f"museum{i}", "instance of", "museum")]
    return triples


def test_a_relation_stating_kinds_makes_no_type_of_its_subjects():
    graph = _graph(_art_world())
    groups = infer_types(graph)
    types = {key: entity.types for key, entity in graph.entities.items()}
    # without the rule, every entity with an `instance of` edge was one type, `instance of:subject`
    assert "instance of:subject" not in {t for ts in types.values() for t in ts}
    # works, painters and museums apart, each type named after its first role by size, then name
    assert types["work0"] == ["completed in:subject"] and types["painter0"] == ["born in:subject"]
    assert types["museum0"] == ["kept in:object"] and types["painting"] == types["human"] == ["instance of:object"]
    assert "instance of:subject" not in groups and graph.kind_relations == ["instance of"]


def test_an_entity_stated_of_a_kind_only_keeps_that_role_as_its_type():
    graph = _graph(_art_world([("sketch", "instance of", "drawing")]))
    infer_types(graph)
    assert graph.entities["sketch"].types == ["instance of:subject"]
    assert graph.entities["work1"].types == ["completed in:subject"]


def test_a_relation_to_things_of_the_graph_states_no_kinds():
    # the objects of `located in` (cities) play other roles: it joins places, it states no kinds, and groups as before
    located = [(f"museum{i % 2}", "located in", f"city{i % 2}") for i in range(2)] + [
        (f"city{i}", "located in", "country0") for i in range(2)] + [("painter0", "lives in", "city0")]
    graph = _graph(_art_world(located))
    infer_types(graph)
    assert graph.entities["work0"].types == ["completed in:subject"]
    assert "located in:subject" in graph.entities["museum0"].types
    assert graph.kind_relations == ["instance of"]  # `instance of` still states kinds; `located in` does not


def test_the_classes_a_relation_states_name_their_members_types(tmp_path, run_kgr):
    """An inferred type has no name a question uses ("which paintings"); its members' `instance of` classes name it,
    in `kgr status`, in the store the policy reads, and after an append that infers nothing new."""
    from kgr.project import Project
    from kgr.store import GraphStore

    kb, more = tmp_path / "art.txt", tmp_path / "more.txt"
    kb.write_text("".join(f"{s}|{r}|{o}\n" for s, r, o in _art_world()), encoding="utf-8")
    more.write_text("work0|kept in|museum1\n", encoding="utf-8")
    project = tmp_path / "art"
    for args in ([kb], [more, "--append"]):
        assert (result := run_kgr("ingest", project, *args)).exit_code == 0, result.output
        status = json.loads(run_kgr("status", project, "--json").stdout)
        assert status["stages"][0]["counts"]["kind_relations"] == ["instance of"]
        assert status["type_names"]["completed in:subject"] == ["instance of: painting"]  # no label names works
        assert status["type_names"]["born in:subject"] == ["created by", "instance of: human"]
    with Project.open(project) as opened:
        store = GraphStore(opened)
        classes = dict(zip(store.type_names, store.type_naming_classes))
    assert classes["completed in:subject"] == ["painting"] and classes["kept in:object"] == ["museum"]
    assert classes["instance of:object"] == []  # the classes themselves are of no class


def _untyped_copy(graph: Graph) -> Graph:
    """A copy of the graph's structure with every entity untyped."""
    copy = Graph(relationships=list(graph.relationships))
    for key, entity in graph.entities.items():
        copy.entities[key] = Entity(key, entity.name)
    return copy


# -- coarse kinds for graphs whose relation roles do not merge (LLM-built KGs) ----------------------------------

# A hand-made open-vocabulary graph: every relation phrasing occurs once, as in an LLM-extracted KG, so role
# inference gives one type per phrasing.
OPEN_TRIPLES = [
    ("Ada Lovelace", "was born in", "London"),
    ("Ada Lovelace", "wrote notes on", "Analytical Engine"),
    ("Charles Babbage", "designed", "Analytical Engine"),
    ("Charles Babbage", "was a member of", "Royal Society"),
    ("London", "is the capital of", "England"),
    ("Ada Lovelace", "died in", "1852"),
    ("Royal Society", "was founded on", "28 November 1660"),
    ("Royal Society", "has about", "1,700 fellows"),
]


def test_coarse_kinds_read_dates_and_numbers_by_spelling():
    from kgr.ingest.types import _NUMBER
    from kgr.lexicon import DATE_SPELLING as _DATE

    assert all(_DATE.match(t) for t in ("1852", "28 November 1660", "March 30, 1970", "1990s", "2001-05-03"))
    assert all(_NUMBER.match(t) for t in ("35", "12.5 million", "3%", "1,700", "1.2 billion people"))
    assert not any(p.match(t) for p in (_DATE, _NUMBER) for t in ("Area 51", "Route 66", "May", "Jay Z", "1009 Drayton Road"))


def test_open_vocabulary_graph_is_typed_by_coarse_kinds(tmp_path, run_kgr):
    """More role types than types.max_inferred: each entity gets one readable kind from its name and edges."""
    kb = tmp_path / "open.txt"
    kb.write_text("".join(f"{s}\t{r}\t{o}\n" for s, r, o in OPEN_TRIPLES), encoding="utf-8")
    project = tmp_path / "open"
    result = run_kgr("ingest", project, kb, "--set", "types.max_inferred=4")
    assert result.exit_code == 0, result.output
    assert "by coarse kinds" in result.stderr
    status = json.loads(run_kgr("status", project, "--json").stdout)
    kinds = {name: count for name, count in status["types"].items()}
    assert set(kinds) <= {"person", "organization", "place", "date", "number", "work", "event", "concept"}
    assert sum(kinds.values()) == 9  # one kind per entity
    import duckdb

    with duckdb.connect(str(project / "kgr.duckdb"), read_only=True) as db:
        typed = dict(db.execute("SELECT e.name, t.type FROM entities e JOIN entity_types t USING (eid)").fetchall())
    assert typed["1852"] == typed["28 November 1660"] == "date"
    assert typed["1,700 fellows"] == "number"
    assert typed["London"] == "place"
    assert typed["Ada Lovelace"] == "person"


def test_few_role_types_are_kept(tmp_path, run_kgr):
    """Under types.max_inferred the role types stay (they name where a type came from)."""
    kb = tmp_path / "open.txt"
    kb.write_text("".join(f"{s}\t{r}\t{o}\n" for s, r, o in OPEN_TRIPLES), encoding="utf-8")
    project = tmp_path / "roles"
    assert run_kgr("ingest", project, kb).exit_code == 0
    status = json.loads(run_kgr("status", project, "--json").stdout)
    assert "was born in:object" in status["types"] or len(status["types"]) > 8
