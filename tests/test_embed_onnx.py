"""The encoder's backends (`embedding.backend`, `embedding.quantize`): the ONNX export agrees with torch, is cached
whole, and a project's vectors are only ever queried and reused by the backend that made them; texts longer than the
model's window are counted at ingest (that part needs no ONNX Runtime)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from kgr import api
from kgr.embed import Encoder, reusable_vectors, write_meta
from kgr.errors import KgrError
from kgr.project import Project, fingerprint
from kgr.store import GraphStore

needs_onnxruntime = pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None,
                                       reason="onnxruntime is not installed (pip install 'kgr[onnx]')")

TEXTS = ["Blade Runner", "who directed the movies written by [Gary David Goldberg]",
         "Ridley Scott directed Blade Runner", "Lothair II was the king of Lotharingia from 855 until his death. "
         "He was the second son of Emperor Lothair I and Ermengarde of Tours."]
KB = ('{"subject": "Ada Lovelace", "relation": "worked_with", "object": "Charles Babbage"}\n'
      '{"subject": "Charles Babbage", "relation": "designed", "object": "Analytical Engine"}\n')


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    """One export cache for the module (an export takes seconds), set as KGR_CACHE_DIR."""
    folder = tmp_path_factory.mktemp("kgr-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KGR_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="module")
def torch_vectors():
    return Encoder(precision="float32").encode(TEXTS)


@needs_onnxruntime
def test_onnx_float32_vectors_are_torchs_within_rounding(onnx_cache, torch_vectors):
    vectors = Encoder(backend="onnx").encode(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == torch_vectors.shape
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (vectors * torch_vectors).sum(axis=1).min() >= 0.999


@needs_onnxruntime
def test_int8_weights_keep_vectors_near_float32s(onnx_cache, torch_vectors):
    encoder = Encoder(backend="onnx", quantize="int8")
    cosines = (encoder.encode(TEXTS) * torch_vectors).sum(axis=1)
    # int8 rounding of every weight matrix: ~0.99 measured (docs/benchmarks.md); far from 1, far above unrelated texts
    assert cosines.min() >= 0.97 and encoder.vectors_kind == "onnx-int8"
    # one text alone, as a question encodes it, lands near its batch vector too
    alone = encoder.encode([TEXTS[1]])[0]
    assert float(alone @ torch_vectors[1]) >= 0.97


@needs_onnxruntime
def test_an_export_is_cached_whole_and_reused(onnx_cache):
    Encoder(backend="onnx", quantize="int8").encode(TEXTS[:1])
    files = sorted(p for p in (onnx_cache / "onnx").rglob("*") if p.is_file())
    assert files and all(p.name == "model.onnx" for p in files)  # no temporary file left behind
    stamps = {p: p.stat().st_mtime_ns for p in files}
    Encoder(backend="onnx", quantize="int8").encode(TEXTS[:1])
    assert {p: p.stat().st_mtime_ns for p in files} == stamps
    assert sorted(p for p in (onnx_cache / "onnx").rglob("*") if p.is_file()) == files


def test_settings_that_cannot_run_together_are_refused():
    with pytest.raises(KgrError, match="needs embedding.backend"):
        Encoder(quantize="int8")
    with pytest.raises(KgrError, match="float32"):
        Encoder(backend="onnx", precision="bfloat16")


def test_a_missing_onnxruntime_says_how_to_install_it(monkeypatch):
    from kgr.embed_onnx import require_onnxruntime

    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)
    with pytest.raises(KgrError, match=r"kgr\[onnx\]"):
        require_onnxruntime()


def test_the_backend_is_part_of_the_ingest_settings_and_torch_leaves_old_projects_current(tmp_path):
    fingerprints = {}
    for backend, quantize in (("torch", "none"), ("onnx", "none"), ("onnx", "int8")):
        root = tmp_path / f"{backend}-{quantize}"
        Project.init(root, {"embedding.backend": backend, "embedding.quantize": quantize})
        with Project.open(root) as project:
            fingerprints[backend, quantize] = project.config_fingerprint("ingest")
            if backend == "torch":
                before = {name: {k: v for k, v in project.config.section(name).items()
                                 if k not in ("threads", "precision", "engine", "chunk_rows", "compose_relationships",
                                              "index_min_rows", "backend", "quantize")}
                          for name in ("embedding", "types")}
                assert fingerprints[backend, quantize] == fingerprint(before)
    assert len(set(fingerprints.values())) == 3  # a changed backend makes the ingest run again


def test_vectors_of_another_backend_are_not_reused(tmp_path):
    folder = tmp_path / "gen"
    folder.mkdir()
    write_meta(folder, "m", 4, "onnx-int8")
    assert json.loads((folder / "meta.json").read_text())["backend"] == "onnx-int8"
    assert reusable_vectors([folder], "m", "torch") == {}
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "meta.json").write_text(json.dumps({"model": "m", "dimension": 4, "dtype": "float16"}))
    assert reusable_vectors([legacy], "m", "onnx") == {}  # folders from before backends are torch's


@needs_onnxruntime
def test_a_project_is_queried_with_the_backend_that_embedded_it(onnx_cache, tmp_path):
    graph = tmp_path / "kb.jsonl"
    graph.write_text(KB, encoding="utf-8")
    root = tmp_path / "project"
    report = api.ingest(root, graph, settings={"embedding.backend": "onnx", "embedding.quantize": "int8"})
    assert report.encoded == 5  # 3 entities + 2 relationships
    with Project.open(root, write=True) as project:
        assert project.last_run("ingest").counts["embedding_backend"] == "onnx-int8"
        project.config.embedding.backend, project.config.embedding.quantize = "torch", "none"
        store = GraphStore(project)
        assert store.encoder.vectors_kind == "onnx-int8"  # the recorded kind, not today's settings
        with pytest.raises(KgrError, match="onnx-int8"):
            GraphStore(project, encoder=Encoder())
    # an ingest with torch encodes every text again: no onnx vector is reused
    again = api.ingest(root, graph, settings={"embedding.backend": "torch", "embedding.quantize": "none"})
    assert again.encoded == 5 and not again.skipped


def test_texts_longer_than_the_window_are_counted_and_warned_about(tmp_path, run_kgr):
    encoder = Encoder(precision="float32")
    long_text = " ".join(["lotharingia"] * 300)
    assert encoder.truncated(["short", long_text, "word " * 250]) == 1  # 250 words + 2 special tokens fit in 256
    graph = tmp_path / "kb.jsonl"
    graph.write_text(KB + json.dumps({"subject": "Ada Lovelace", "relation": "wrote", "object": "Notes",
                                      "description": long_text}) + "\n", encoding="utf-8")
    done = run_kgr("ingest", str(tmp_path / "project"), str(graph))
    assert done.exit_code == 0, done.stderr
    assert "1 text longer than the embedding model's window" in done.stderr
    with Project.open(tmp_path / "project") as project:
        assert project.last_run("ingest").counts["truncated_texts"] == 1



@needs_onnxruntime
@pytest.mark.parametrize("vnni", [True, False])
def test_int8_weights_use_seven_bits_on_a_cpu_without_int8_dot_products(monkeypatch, tmp_path, vnni):
    import onnxruntime.quantization

    from kgr import embed_onnx

    calls = []
    monkeypatch.setattr(embed_onnx, "int8_dot_products", lambda: vnni)
    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", lambda *args, **kwargs: calls.append(kwargs))
    embed_onnx.quantize_int8(tmp_path / "in.onnx", tmp_path / "out.onnx")
    assert calls == [{"weight_type": onnxruntime.quantization.QuantType.QInt8, "per_channel": True,
                      "reduce_range": not vnni}]
