"""`kgr.perturb`: damaged copies of the 2wiki fixture project (noise / incomplete, query / whole scope).

The embedding model is replaced by a deterministic hashing stand-in (same name and dimension as the configured one)
so the fixture project builds in well under a second; every kgr code path around the model is the real one.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kgr.embed import Encoder
from kgr.errors import KgrError
from kgr.graph import default_description
from kgr.ingest.stage import IngestOptions, run_ingest
from kgr.perturb import GENERIC_LABEL, bridge_rids, perturb_project, plan_perturbation, scope_rids
from kgr.project import Project
from kgr.store import GraphStore, normalize_name

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "2wiki"
DIM = 384


class FakeModel:
    """Stands in for SentenceTransformer: unit vectors seeded by the text's hash; remembers what it encoded."""

    def __init__(self):
        self.encoded: list[str] = []

    def get_embedding_dimension(self) -> int:
        return DIM

    def encode(self, texts, **_kwargs):
        self.encoded.extend(texts)
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            vector = np.random.default_rng(seed).standard_normal(DIM)
            rows.append(vector / np.linalg.norm(vector))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM)


@pytest.fixture(scope="module")
def fake_model():
    model = FakeModel()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Encoder, "model", property(lambda self: model))
        yield model


@pytest.fixture(scope="module")
def source(tmp_path_factory, fake_model) -> Path:
    """The 2wiki fixture ingested once for the module."""
    root = tmp_path_factory.mktemp("perturb") / "source"
    with Project.open(root, write=True, create=True) as project:
        run_ingest(project, IngestOptions(paths=[FIXTURES / "triples.jsonl"], passages=[FIXTURES / "corpus.json"]))
    return root


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "questions.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def few_anchors(questions) -> list[str]:
    """The anchors of three questions: a query scope well short of the whole graph."""
    return [a for q in questions[:3] for a in q["anchors"]]


@pytest.fixture
def outdir(tmp_path_factory):
    counter = iter(range(10**6))
    base = tmp_path_factory.mktemp("targets")
    return lambda: base / f"t{next(counter)}"


def perturb(source: Path, target: Path, **kwargs):
    with Project.open(source) as project:
        return perturb_project(project, target, **kwargs)


def table(root: Path, sql: str) -> list[tuple]:
    with Project.open(root) as project:
        return project.db.execute(sql).fetchall()


def source_graph(root: Path):
    """(names, types per eid, [(src, relation, dst)], undirected adjacency) from the source project."""
    with Project.open(root) as project:
        store = GraphStore(project)
        triples = [(int(s), store.relation_of(rid), int(d)) for rid, (s, d) in enumerate(zip(store.src, store.dst))]
        types = [set(store.types_of(e)) for e in range(store.num_entities)]
        return list(store.names), types, triples, store.adjacency()


def changes(root: Path) -> list[dict]:
    with Project.open(root) as project:
        cursor = project.db.execute("SELECT * FROM perturbation ORDER BY rid")
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row)) for row in cursor.fetchall()]


def checksums(root: Path) -> dict[str, str]:
    """Content hashes of every DuckDB table and every file under vectors/ (plus the config)."""
    sums = {}
    with Project.open(root) as project:
        db = project.db
        for (name,) in db.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall():
            rows = db.execute(f"SELECT * FROM {name}").fetchall()
            sums[name] = hashlib.sha256(repr(sorted(map(repr, rows))).encode()).hexdigest()
    for path in sorted((root / "vectors").rglob("*")) + [root / "kgr.toml"]:
        if path.is_file():
            sums[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return sums


# -- determinism and ratio ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["noise", "incomplete"])
def test_same_seed_same_damage_other_seed_differs(source, outdir, mode):
    runs = {}
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        target = outdir()
        perturb(source, target, mode=mode, ratio=0.3, scope="whole", seed=seed)
        runs[name] = (table(target, "SELECT * FROM relationships ORDER BY rid"),
                      table(target, "SELECT * FROM perturbation ORDER BY rid"))
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]


@pytest.mark.parametrize("mode", ["noise", "incomplete"])
@pytest.mark.parametrize("scope", ["query", "whole"])
@pytest.mark.parametrize("ratio", [0.05, 0.3, 1.0])
def test_ratio_respected(source, outdir, few_anchors, mode, scope, ratio):
    target = outdir()
    report = perturb(source, target, mode=mode, ratio=ratio, scope=scope, seed=3,
                     anchors=few_anchors if scope == "query" else None)
    assert abs(report.affected - ratio * report.in_scope) <= 1
    assert report.affected == len(changes(target)) == sum(report.by_operation.values())
    if scope == "whole":
        assert report.in_scope == 82


# -- scope ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["noise", "incomplete"])
def test_query_scope_only_touches_two_hop_neighbourhood(source, outdir, few_anchors, mode):
    names, _, triples, adjacency = source_graph(source)
    wanted = {normalize_name(a) for a in few_anchors}
    hop0 = {e for e, name in enumerate(names) if normalize_name(name) in wanted}
    hop1 = hop0 | {v for a in hop0 for v, _ in adjacency.get(a, [])}
    expected_scope = {rid for rid, (s, _, d) in enumerate(triples) if s in hop1 or d in hop1}
    assert 0 < len(expected_scope) < len(triples) // 2

    target = outdir()
    report = perturb(source, target, mode=mode, ratio=1.0, scope="query", seed=5, anchors=few_anchors)
    assert report.in_scope == len(expected_scope)
    assert report.anchors_matched == len(hop0) and report.anchors_missing == []
    touched = {row["rid"] for row in changes(target)}
    assert touched == expected_scope  # ratio 1: exactly the neighbourhood, nothing outside it

    # Every relationship outside the scope is carried over unchanged (in order).
    kept = [(s, r, d) for s, d, r in table(target, "SELECT src, dst, relation FROM relationships ORDER BY rid")]
    outside = [t for rid, t in enumerate(triples) if rid not in expected_scope]
    if mode == "incomplete":
        assert kept == outside
    else:
        assert [kept[rid] for rid in range(len(triples)) if rid not in expected_scope] == outside


def test_missing_anchor_names_are_reported(source, outdir, few_anchors):
    report = perturb(source, outdir(), mode="noise", ratio=0.5, scope="query", seed=1,
                     anchors=[*few_anchors, "No Such Entity Anywhere"])
    assert report.anchors_missing == ["No Such Entity Anywhere"]


# -- incomplete ------------------------------------------------------------------------------------------------------
def test_incomplete_drops_edges_preferring_bridges(source, outdir, few_anchors):
    names, _, triples, adjacency = source_graph(source)
    wanted = {normalize_name(a) for a in few_anchors}
    anchors = {e for e, name in enumerate(names) if normalize_name(name) in wanted}
    # Brute force: edges on a simple path a - m - x from an anchor (three distinct entities).
    bridges = set()
    for a in anchors:
        for m, e1 in adjacency.get(a, []):
            for x, e2 in adjacency.get(m, []):
                if m != a and e2 != e1 and x not in (a, m):
                    bridges |= {e1, e2}
    assert bridges

    target = outdir()
    report = perturb(source, target, mode="incomplete", ratio=0.2, scope="query", seed=11, anchors=few_anchors)
    rows = changes(target)
    dropped = {row["rid"] for row in rows}
    assert report.bridges == len(bridges)
    assert report.by_operation == {"drop": len(dropped)} and len(dropped) <= len(bridges)
    assert dropped <= bridges
    assert all(row["new_rid"] is None and row["new_relation"] is None for row in rows)
    for row in rows:
        assert (row["old_src"], row["old_relation"], row["old_dst"]) == triples[row["rid"]]

    remaining = table(target, "SELECT rid, src, relation, dst FROM relationships ORDER BY rid")
    assert [r[0] for r in remaining] == list(range(len(triples) - len(dropped)))  # dense rids
    assert [r[1:] for r in remaining] == [t for rid, t in enumerate(triples) if rid not in dropped]

    # More to drop than there are bridges: every bridge goes, the rest come from the other in-scope edges.
    target = outdir()
    report = perturb(source, target, mode="incomplete", ratio=1.0, scope="query", seed=11, anchors=few_anchors)
    assert {row["rid"] for row in changes(target)} >= bridges


def test_bridge_rule_on_a_small_graph():
    # 0 -a- 1 -b- 2 ; 0 -c- 3 (leaf) ; 4 -d- 5 (separate pair) ; 6 loop ; 1 -e- 0 (parallel to a)
    src = np.array([0, 1, 0, 4, 6, 1])
    dst = np.array([1, 2, 3, 5, 6, 0])
    assert scope_rids(7, src, dst, np.array([0])).tolist() == [0, 1, 2, 5]
    assert scope_rids(7, src, dst, np.array([3])).tolist() == [0, 2, 5]
    assert bridge_rids(7, src, dst, np.array([0])).tolist() == [0, 1, 5]  # a, b and e; not the leaf c
    assert bridge_rids(7, src, dst, np.array([3])).tolist() == [0, 2, 5]  # 3 -c- 0 -a/e- 1
    assert bridge_rids(7, src, dst, None).tolist() == [0, 1, 2, 5]  # every edge on some path of 3 entities
    # Whole scope with anchors: everything is in scope, but the anchors' bridges go first.
    plan = plan_perturbation(7, src, dst, ["r"] * 6, [[]] * 7, mode="incomplete", ratio=0.5, seed=0,
                             anchors=np.array([0]), query_scope=False)
    assert plan.in_scope.size == 6 and {c.rid for c in plan.changes} == {0, 1, 5}


# -- noise ----------------------------------------------------------------------------------------------------------
def test_noise_operations_change_what_they_say(source, outdir, fake_model):
    names, types, triples, _ = source_graph(source)
    labels = {r for _, r, _ in triples}
    existing = set(triples)
    source_descriptions = {d for (d,) in table(source, "SELECT description FROM relationships")}

    target = outdir()
    before = len(fake_model.encoded)
    report = perturb(source, target, mode="noise", ratio=0.6, scope="whole", seed=2)
    encoded = fake_model.encoded[before:]
    rows = changes(target)
    assert set(report.by_operation) == {"rebind", "flip", "generalize"}
    assert Counter(row["operation"] for row in rows) == report.by_operation

    target_rels = table(target, "SELECT rid, src, relation, dst, description FROM relationships ORDER BY rid")
    assert len(target_rels) == len(triples)
    for row in rows:
        old = (row["old_src"], row["old_relation"], row["old_dst"])
        new = (row["new_src"], row["new_relation"], row["new_dst"])
        assert old == triples[row["rid"]] and row["new_rid"] == row["rid"]
        assert (row["old_subject"], row["old_object"]) == (names[old[0]], names[old[2]])
        assert (row["new_subject"], row["new_object"]) == (names[new[0]], names[new[2]])
        assert target_rels[row["rid"]][1:4] == new
        assert target_rels[row["rid"]][4] == default_description(names[new[0]], new[1], names[new[2]])
        if row["operation"] == "rebind":
            assert new[1] == old[1]
            side = 0 if row["detail"].startswith("subject") else 2
            assert new[side] != old[side] and new[2 - side] == old[2 - side]
            assert new[side] != new[2 - side] and new not in existing
            if "type-compatible" in row["detail"]:
                assert types[new[side]] & types[old[side]]
        elif row["operation"] == "flip":
            assert (new[0], new[2]) == (old[0], old[2]) and new[1] != old[1] and new[1] in labels
        else:
            assert (new[0], new[2]) == (old[0], old[2]) and new[1] == GENERIC_LABEL != old[1]

    # Only the changed descriptions were encoded; everything else reused the source's vectors by text hash.
    changed = {target_rels[row["rid"]][4] for row in rows} - source_descriptions
    assert set(encoded) == changed and report.encoded == len(encoded)
    untouched = [rid for rid in range(len(triples)) if rid not in {row["rid"] for row in rows}]
    assert all(target_rels[rid][1:4] == triples[rid] for rid in untouched)


def test_noise_plan_rebinds_within_type_when_possible():
    # Entities 0..5; types: 0,1,2 are "film"; 3,4,5 are "person". Only rebinding is possible (one label, generic).
    src, dst = np.array([0, 1]), np.array([3, 4])
    plan = plan_perturbation(6, src, dst, [GENERIC_LABEL] * 2, [["film"]] * 3 + [["person"]] * 3,
                             mode="noise", ratio=1.0, seed=0, anchors=None, query_scope=False)
    assert [c.operation for c in plan.changes] == ["rebind", "rebind"]
    for change in plan.changes:
        old = (int(src[change.rid]), int(dst[change.rid]))
        moved = change.new_src if change.detail.startswith("subject") else change.new_dst
        group = {0, 1, 2} if change.detail.startswith("subject") else {3, 4, 5}
        assert moved in group and (change.new_src, change.new_dst) != old


# -- the target project -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["noise", "incomplete"])
def test_target_opens_with_graphstore(source, outdir, few_anchors, mode):
    target = outdir()
    report = perturb(source, target, mode=mode, ratio=0.5, scope="query", seed=4, anchors=few_anchors)
    with Project.open(source) as project:
        original = GraphStore(project)
        source_entities = original.entity_vectors
        n_entities, n_passages = original.num_entities, len(original.passages)
        run_id = project.last_run("ingest").run_id
    with Project.open(target) as project:
        store = GraphStore(project)
        assert store.num_entities == n_entities == report.counts["entities"]
        assert len(store.passages) == n_passages
        assert len(store.src) == report.counts["relationships"]
        assert store.relationship_vectors.shape == (len(store.src), DIM)
        np.testing.assert_array_equal(store.entity_vectors, source_entities)
        assert len(store.relationship_texts) == len(store.src)
        np.testing.assert_allclose(np.linalg.norm(store.relationship_vectors, axis=1), 1.0, atol=1e-2)
        counts = project.last_run("ingest").counts
        assert counts["perturb_mode"] == mode and counts["perturb_ratio"] == 0.5 and counts["perturb_seed"] == 4
        assert counts["perturb_scope"] == "query" and counts["perturb_affected"] == report.affected
        assert counts["perturbed_from"] == str(source.resolve()) and counts["perturbed_from_run"] == run_id
        assert (target / "kgr.toml").read_text() == (source / "kgr.toml").read_text()
        assert len(project.generations("vectors")) == 1
    if mode == "incomplete":
        assert report.counts["relationships"] == 82 - report.affected
        assert report.encoded == 0


def test_source_project_untouched(source, outdir, few_anchors):
    before = checksums(source)
    perturb(source, outdir(), mode="noise", ratio=0.5, scope="whole", seed=1)
    perturb(source, outdir(), mode="incomplete", ratio=0.5, scope="query", seed=1, anchors=few_anchors)
    assert checksums(source) == before
    assert len(list((source / "vectors").iterdir())) == 1


# -- refusals ---------------------------------------------------------------------------------------------------------
def test_refuses_bad_arguments_and_leaves_no_target(source, outdir, few_anchors):
    occupied = outdir()
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    with pytest.raises(KgrError, match="not empty"):
        perturb(source, occupied, mode="noise", ratio=0.5, scope="whole", seed=1)
    assert [p.name for p in occupied.iterdir()] == ["keep.txt"]
    with pytest.raises(KgrError, match="differ"):
        perturb(source, source, mode="noise", ratio=0.5, scope="whole", seed=1)

    bad = [
        dict(mode="shuffle", ratio=0.5, scope="whole"),
        dict(mode="noise", ratio=0.0, scope="whole"),
        dict(mode="noise", ratio=1.5, scope="whole"),
        dict(mode="noise", ratio=0.5, scope="local"),
        dict(mode="noise", ratio=0.5, scope="query"),
        dict(mode="noise", ratio=0.5, scope="query", anchors=["No Such Entity"]),
    ]
    for kwargs in bad:
        target = outdir()
        with pytest.raises(KgrError):
            perturb(source, target, seed=1, **kwargs)
        assert not target.exists()

    empty = outdir()
    empty.mkdir()  # an existing empty directory is accepted
    perturb(source, empty, mode="incomplete", ratio=0.1, scope="whole", seed=1)
    assert (empty / "kgr.duckdb").exists()


def test_failure_while_writing_removes_the_partial_target(source, outdir, monkeypatch):
    import kgr.perturb as perturb_module

    def boom(*_args, **_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(perturb_module, "_perturbation_table", boom)
    target = outdir()
    with pytest.raises(RuntimeError):
        perturb(source, target, mode="noise", ratio=0.5, scope="whole", seed=1)
    assert not target.exists()


def _triple_sources(root: Path) -> dict[tuple[str, str, str], list[str]]:
    """Each relationship (subject, relation, object) with the titles of its source passages."""
    with Project.open(root) as project:
        rows = project.db.execute(
            "SELECT s.name, r.relation, o.name, p.title FROM relationship_passages rp "
            "JOIN relationships r USING (rid) JOIN entities s ON s.eid = r.src JOIN entities o ON o.eid = r.dst "
            "JOIN passages p USING (pid) ORDER BY rp.rowid").fetchall()
    found: dict[tuple[str, str, str], list[str]] = {}
    for subject, relation, obj, title in rows:
        found.setdefault((subject, relation, obj), []).append(title)
    return found


@pytest.mark.parametrize("mode", ["incomplete", "noise"])
def test_damaged_copy_keeps_provenance(tmp_path, fake_model, mode):
    """An LLM-built graph's triples keep their source passages in the damaged copy (CS-RAG reads them)."""
    openie = Path(__file__).resolve().parent.parent / "fixtures" / "extracted" / "openie_results.json"
    root = tmp_path / "openie"
    with Project.open(root, write=True, create=True) as project:
        run_ingest(project, IngestOptions(paths=[openie]))
    before = _triple_sources(root)
    assert before
    with Project.open(root) as project:
        perturb_project(project, tmp_path / "damaged", mode=mode, ratio=0.5, scope="whole", seed=0)
    after = _triple_sources(tmp_path / "damaged")
    kept = set(before) & set(after)
    assert kept and all(after[t] == before[t] for t in kept)
    assert sum(map(len, after.values())) == (sum(map(len, before.values())) if mode == "noise" else
                                             sum(len(before[t]) for t in after))
