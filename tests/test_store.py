"""`kgr.store.GraphStore` and the encoder settings it uses, on the MetaQA fixture project."""

from __future__ import annotations

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
