"""`kgr.store.GraphStore` and the encoder settings it uses, on the MetaQA fixture project."""

from __future__ import annotations

import math

import pytest

from kgr.config import load_config
from kgr.embed import Encoder, project_encoder
from kgr.errors import KgrError
from kgr.project import Project
from kgr.store import GraphStore


def test_a_store_shares_a_given_encoder_and_refuses_another_model(metaqa_project):
    with Project.open(metaqa_project) as project:
        own = GraphStore(project)
        shared = Encoder(own.model_name)
        assert GraphStore(project, encoder=shared).encoder is shared
        assert own.encoder is not shared and own.encoder.model_name == own.model_name
        with pytest.raises(KgrError, match="vectors were made with"):
            GraphStore(project, encoder=Encoder("/nowhere/other-model"))


def test_embedding_threads_reach_the_encoder_but_not_the_ingest_fingerprint(metaqa_project):
    torch = pytest.importorskip("torch")
    with Project.open(metaqa_project) as project:
        before = project.config_fingerprint("ingest")
        project.config = load_config(metaqa_project, {"embedding.threads": 1})
        assert project.config_fingerprint("ingest") == before  # a speed setting: the ingest stays up to date
        encoder = GraphStore(project).encoder
    assert encoder.threads == 1 and project_encoder(project.config).threads == 1
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        encoder.encode_query("warm up")  # loads the model, which applies the setting
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_embedding_precision_reaches_the_encoder_but_not_the_ingest_fingerprint(metaqa_project):
    with Project.open(metaqa_project) as project:
        before = project.config_fingerprint("ingest")
        project.config = load_config(metaqa_project, {"embedding.precision": "float32"})
        assert project.config_fingerprint("ingest") == before  # stored vectors stay valid under either precision
        encoder = GraphStore(project).encoder
        encoder.encode_query("warm up")
    assert encoder.precision == "float32" and project_encoder(project.config).precision == "float32"
    assert str(next(encoder.model.parameters()).dtype) == "torch.float32"


def test_a_mention_matches_exactly_loosely_above_the_floor_or_not_at_all(metaqa_project):
    with Project.open(metaqa_project) as project:
        store = GraphStore(project)
        exact = store.match_mention("tania  RAYMONDE", 0.85)
        assert exact.exact and [store.names[e] for e in exact.eids] == ["Tania Raymonde"] and exact.warning is None
        loose = store.match_mention("Ulrich Muhe", 0.85)  # the graph spells it with an umlaut
        assert not loose.exact and [store.names[e] for e in loose.eids] == ["Ulrich Mühe"]
        assert loose.warning == f"mention 'Ulrich Muhe' matched entity 'Ulrich Mühe' loosely (cosine {loose.similarity:.2f})"
        absent = store.match_mention("Zebra Motors", 0.85)
        assert absent.eids == () and absent.similarity < 0.85 and absent.nearest
        assert absent.warning.startswith("mention 'Zebra Motors' matches no entity: no name is spelled so, and the"
                                         f" nearest, {absent.nearest!r}, is at cosine")
        assert store.match_mention("Ulrich Muhe", 1.01).eids == ()  # above any cosine: only exact names match


@pytest.fixture(scope="module")
def harbours(tmp_path_factory):
    """A graph whose passages all mention "harbour" while one names "Kelda Sound"."""
    import json

    from kgr.ingest.stage import IngestOptions, run_ingest

    root = tmp_path_factory.mktemp("harbours")
    (root / "triples.jsonl").write_text(json.dumps({"subject": "Kelda Sound", "relation": "is a", "object": "harbour"})
                                        + "\n", encoding="utf-8")
    texts = {f"Port {n}": f"Port {n} is a harbour on the {side} coast." for n, side in
             zip("ABCDEFG", ["north", "south", "east", "west", "north", "south", "east"])}
    texts["Kelda Sound"] = "Kelda Sound is a harbour in the far west, sheltered by cliffs."
    (root / "corpus.json").write_text(json.dumps([{"title": t, "text": x} for t, x in texts.items()]),
                                      encoding="utf-8")
    with Project.open(root / "project", write=True, create=True) as project:
        run_ingest(project, IngestOptions([root / "triples.jsonl"], passages=[root / "corpus.json"]))
    with Project.open(root / "project") as project:
        yield GraphStore(project)


def test_a_name_in_every_passage_is_less_specific_than_one_in_a_single_passage(harbours):
    assert harbours.specificity("harbour") == pytest.approx(0.0)  # in all 8 passages: log(9/9)
    assert harbours.specificity("KELDA  sound") == pytest.approx(math.log(9 / 2) / math.log(9))
    assert harbours.specificity("Sound Kelda") == pytest.approx(1.0)  # whole words in order, not a bag of words
    assert harbours.specificity("Port") > harbours.specificity("harbour")  # 7 of 8


def test_a_types_centroid_is_its_members_normalized_mean_vector(metaqa_project):
    import numpy as np

    with Project.open(metaqa_project) as project:
        store = GraphStore(project)
        centroids = store.type_centroids
        assert centroids.shape == (len(store.type_names), store.entity_vectors.shape[1])
        for t, name in enumerate(store.type_names):
            members = [e for e in range(store.num_entities) if name in store.types_of(e)]
            mean = store.entity_vectors[members].astype(np.float64).mean(axis=0)
            # float32 sums in another order: equal to rounding, and of unit length
            assert np.allclose(centroids[t], mean / np.linalg.norm(mean), atol=1e-5), name
            assert abs(float(np.linalg.norm(centroids[t])) - 1.0) < 1e-5


@pytest.fixture(scope="module")
def rail(tmp_path_factory):
    """A schema-less rail graph: stations on a line, adjacent to each other, in towns of one country."""
    from kgr.ingest.stage import IngestOptions, run_ingest

    root = tmp_path_factory.mktemp("rail")
    rows = ["Kannenfeld|connecting line|Rhine Line", "Voltamatte|connecting line|Rhine Line",
            "Wiesenplatz|connecting line|Rhine Line", "Kannenfeld|adjacent station|Voltamatte",
            "Voltamatte|adjacent station|Wiesenplatz", "Rhine Line|terminus|Wiesenplatz",
            "Kannenfeld|located in|Basel", "Voltamatte|located in|Basel", "Wiesenplatz|located in|Riehen",
            "Basel|country|Switzerland", "Riehen|country|Switzerland", "Rhine Line|operator|Regio Rail",
            "Switzerland|country_inverse|Basel", "Switzerland|country_inverse|Riehen"]
    (root / "kb.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with Project.open(root / "project", write=True, create=True) as project:
        run_ingest(project, IngestOptions([root / "kb.txt"]))
    with Project.open(root / "project") as project:
        yield GraphStore(project)


@pytest.mark.parametrize("graph", ["rail", "metaqa"])
def test_a_relation_names_the_type_most_of_its_objects_have(graph, rail, metaqa_project):
    from kgr.store import NAMING_SHARE

    def brute_force(store):
        naming = [[] for _ in store.type_names]
        for label in store.relation_labels:
            if label.endswith("_inverse"):  # its words name its subjects
                continue
            objects = {int(store.dst[r]) for r in range(len(store.dst)) if store.relation_of(r) == label}
            for t, name in enumerate(store.type_names):
                if sum(name in store.types_of(e) for e in objects) >= NAMING_SHARE * len(objects):
                    naming[t].append(label)
        return naming

    if graph == "rail":
        store = rail
        labels = dict(zip(store.type_names, store.type_naming_labels))
        stations = {t for e in ("Kannenfeld", "Voltamatte", "Wiesenplatz")
                    for t in store.types_of(store.names.index(e))}
        # the stations' type is named by the labels whose objects are stations, never by the line's or town's
        assert {r for t in stations for r in labels[t]} >= {"adjacent station", "terminus"}
        assert "connecting line" in labels[store.types_of(store.names.index("Rhine Line"))[0]]
        # `country_inverse` runs from a country to its towns: its words ("country") must not name the towns
        assert not any("country_inverse" in rs for rs in store.type_naming_labels)
        assert any("country" in rs for rs in store.type_naming_labels)
        assert store.type_naming_labels == brute_force(store)
    else:
        with Project.open(metaqa_project) as project:
            store = GraphStore(project)
            assert store.type_naming_labels == brute_force(store)


def test_relationship_texts_read_as_the_table_holds_them_by_index_slice_and_pass(metaqa_project, monkeypatch):
    from kgr.columns import TextColumn

    with Project.open(metaqa_project) as project:
        stored = [r[0] for r in project.db.execute("SELECT description FROM relationships ORDER BY rid").fetchall()]
        texts = GraphStore(project).relationship_texts
    assert isinstance(texts, TextColumn) and len(texts) == len(stored) > 3
    assert texts[0] == stored[0] and texts[-1] == stored[-1] and texts[len(stored) // 2] == stored[len(stored) // 2]
    assert texts[1:4] == stored[1:4] and all(isinstance(t, str) for t in texts[1:4])
    monkeypatch.setattr(TextColumn, "READ_ROWS", 3)  # a pass reads in pieces: their seams lose or repeat nothing
    assert list(texts) == stored
    with pytest.raises(IndexError):
        texts[len(stored)]


def test_date_types_are_the_types_whose_members_spell_dates(metaqa_project):
    with Project.open(metaqa_project) as project:
        store = GraphStore(project)
        dated = [name for name, spelled in zip(store.type_names, store.date_types) if spelled]
        # years ("1994"); not the movies, though a few of them are named so ("2010")
        assert dated == ["year"]
