"""The ANN index (`embedding.index_min_rows`): built at ingest for the vector tables at or above the threshold only,
and searched through `VectorIndex` / `GraphStore.nearest`. Uses a deterministic stand-in encoder (no model load)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from kgr.embed import VectorIndex, build_vector_index, load_vectors, missing_parts, write_vector_table
from kgr.ingest.stage import store_graph
from kgr.project import Project


class HashEncoder:
    """Unit vectors from each text's hash."""

    model_name = "stand-in"
    batch_size = 64
    dimension = 16
    encode_seconds = 0.0
    vectors_kind = "torch"

    def truncated(self, texts):
        return 0

    def encode(self, texts, progress=None):
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8) for t in texts]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), 16) - 127.5
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_search_through_the_index_finds_a_stored_vector_first_with_its_cosine(tmp_path):
    encoder, texts = HashEncoder(), [f"thing {i}" for i in range(600)]
    parts = missing_parts(texts, {}, 64)
    write_vector_table(tmp_path, "things", texts, 16, {}, parts, iter([encoder.encode([texts[i] for i in part])
                                                                          for part in parts]))
    assert VectorIndex.open(tmp_path, "things") is None  # no index yet: callers scan
    params = build_vector_index(tmp_path, "things")
    assert params["rows"] == 600 and params["num_partitions"] == 1 and params["type"] == "IVF_HNSW_SQ"
    index = VectorIndex.open(tmp_path, "things")
    vectors = load_vectors(tmp_path, "things")
    for row in range(0, 600, 37):
        ids, scores = index.search(vectors[row], 5)
        assert ids[0] == row and len(ids) == 5
        assert abs(scores[0] - 1.0) < 1e-2  # exact re-ranking on the stored float16 vectors
        assert np.all(np.diff(scores) <= 0)
        np.testing.assert_allclose(scores, vectors[ids] @ vectors[row], atol=1e-2)
    assert VectorIndex.open(tmp_path, "missing") is None


def tables_of(entities: int, relationships: int) -> dict:
    names = [f"entity {i}" for i in range(entities)]
    edges = [(i % entities, (i * 7 + 1) % entities) for i in range(relationships)]
    return {
        "entities": {"eid": list(range(entities)), "key": names, "name": names, "description": [""] * entities,
                     "text": names},
        "entity_types": {"eid": [], "type": []},
        "relationships": {"rid": list(range(relationships)), "src": [s for s, _ in edges], "dst": [d for _, d in edges],
                          "relation": ["links"] * relationships,
                          "description": [f"{names[s]} links {names[d]} ({i})" for i, (s, d) in enumerate(edges)]},
        "passages": {"pid": [], "key": [], "title": [], "text": []},
        **{name: {column: [] for column in columns} for name, columns in (
            ("entity_passages", ("eid", "pid")), ("relationship_passages", ("rid", "pid")),
            ("entity_source_passages", ("eid", "pid")))},
    }


def test_ingest_indexes_only_the_tables_at_or_above_the_threshold(tmp_path):
    Project.init(tmp_path / "p", {"embedding.index_min_rows": 500})
    with Project.open(tmp_path / "p", write=True) as project:
        report = store_graph(project, tables_of(100, 500), started=0.0, input_fingerprint="fp", encoder=HashEncoder())
        folder = project.artifact("ingest", "vectors")
    assert json.loads((Path(folder) / "relationships.index.json").read_text())["rows"] == 500
    assert not (Path(folder) / "entities.index.json").exists()
    assert report.seconds["index"] >= 0
    assert VectorIndex.open(folder, "entities") is None and VectorIndex.open(folder, "relationships") is not None

    Project.init(tmp_path / "q", {"embedding.index_min_rows": 0})  # 0: never
    with Project.open(tmp_path / "q", write=True) as project:
        report = store_graph(project, tables_of(100, 500), started=0.0, input_fingerprint="fp", encoder=HashEncoder())
        assert not list(Path(project.artifact("ingest", "vectors")).glob("*.index.json"))
    assert "index" not in report.seconds


def test_an_indexed_table_is_held_as_float16_and_its_rows_give_the_float32_products(tmp_path):
    from kgr.store import GraphStore, HalfVectors

    Project.init(tmp_path / "p", {"embedding.index_min_rows": 500})
    with Project.open(tmp_path / "p", write=True) as project:
        store_graph(project, tables_of(100, 500), started=0.0, input_fingerprint="fp", encoder=HashEncoder())
    with Project.open(tmp_path / "p") as project:
        store = GraphStore(project, encoder=HashEncoder())
        exact = load_vectors(store.vectors_dir, "relationships")  # float32, as a table without an index is held
        held = store.relationship_vectors
        assert isinstance(held, HalfVectors) and held.matrix.dtype == np.float16 and held.shape == exact.shape
        assert isinstance(store.entity_vectors, np.ndarray) and store.entity_vectors.dtype == np.float32
    rng = np.random.default_rng(0)
    question, questions = HashEncoder().encode(["q"])[0], HashEncoder().encode(["a", "b", "c"])
    for count in (1, 17, 100, 500):
        rows = rng.choice(500, count, replace=False)
        assert held[rows].dtype == np.float32 and np.array_equal(held[rows], exact[rows])
        assert np.array_equal(held[rows] @ question, exact[rows] @ question)
        assert np.array_equal(questions @ held[rows].T, questions @ exact[rows].T)
        assert np.array_equal(held[int(rows[0])] @ question, exact[int(rows[0])] @ question)
    assert np.array_equal(held @ question, exact @ question)


def test_vss_ranks_an_indexed_tables_hits_only_in_their_order(tmp_path):
    # through an index VSS scores the k hits alone (a score per row cost 17 ms a question on 4.87M rows at 10x), and
    # ranks them as the index returned them: its records hold the index's top relationships and entities
    from kgr.methods.base import Query, RunContext, Stopwatch
    from kgr.methods.baselines import VSS
    from kgr.store import GraphStore

    class QueryEncoder(HashEncoder):
        def encode_query(self, text):
            return self.encode([text])[0]

    Project.init(tmp_path / "p", {"embedding.index_min_rows": 100})
    with Project.open(tmp_path / "p", write=True) as project:
        store_graph(project, tables_of(100, 500), started=0.0, input_fingerprint="fp", encoder=HashEncoder())
    with Project.open(tmp_path / "p") as project:
        store = GraphStore(project, encoder=QueryEncoder())
        searched, nearest = [], store.nearest
        store.nearest = lambda table, vector, k: searched.append(table) or nearest(table, vector, k)
        vss = VSS(RunContext(project, project.config, store, "retrieve"))
        assert sorted(searched) == ["entities", "relationships"]  # each index loaded by a search before a question
        assert store.has_index("entities") and store.has_index("relationships")
        entity_hits, relationship_hits = vss.score("which entity", Stopwatch())
        assert isinstance(entity_hits, tuple) and isinstance(relationship_hits, tuple)
        vector = QueryEncoder().encode_query("which entity")
        ids, scores = store.nearest("relationships", vector, vss.top_relationships)
        top, top_scores = vss._top(relationship_hits, vss.top_relationships)
        assert np.array_equal(top, ids) and np.array_equal(top_scores, scores)
        # the entities' index, searched beside the relationships', gives the same hits as alone
        entity_ids, entity_scores = store.nearest("entities", vector, vss.top_entities)
        assert np.array_equal(entity_hits[0], entity_ids) and np.array_equal(entity_hits[1], entity_scores)
        record = vss.retrieve(Query("q", "which entity"))
        packed = [(p["entities"][0], p["relations"][0], p["entities"][1]) for p in record.paths]
        assert packed == [store.triple(int(r)) for r in ids[:len(packed)]] and packed


def test_a_method_holds_only_the_matrices_it_scans(tmp_path):
    # VSS searches an indexed table through its index alone and BM25 reads texts: neither holds those tables'
    # matrices (the 10x relationships' is 3.5 GiB); a store warmed without a table's matrix never reads it
    from kgr.methods.baselines import BM25, VSS
    from kgr.store import GraphStore

    class QueryEncoder(HashEncoder):
        def encode_query(self, text):
            return self.encode([text])[0]

    Project.init(tmp_path / "p", {"embedding.index_min_rows": 500})  # the relationships (500 rows) only
    with Project.open(tmp_path / "p", write=True) as project:
        store_graph(project, tables_of(100, 500), started=0.0, input_fingerprint="fp", encoder=HashEncoder())
    with Project.open(tmp_path / "p") as project:
        store = GraphStore(project, encoder=QueryEncoder())
        assert VSS.held_matrices(store) == ("entities",) and BM25.held_matrices(store) == ()
        store.warm(VSS.held_matrices(store))
        assert "entity_vectors" in vars(store) and "relationship_vectors" not in vars(store)
        store = GraphStore(project, encoder=QueryEncoder())
        store.warm(BM25.held_matrices(store))
        assert not {"entity_vectors", "relationship_vectors"} & set(vars(store))
        store.warm()  # every table's, as before
        assert {"entity_vectors", "relationship_vectors"} <= set(vars(store))
