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
