"""`kgr.embed.Encoder` with the packaged model: a question-sized batch takes the direct path and gets the same
vectors as SentenceTransformer.encode; larger batches go through encode itself."""

from __future__ import annotations

import numpy as np

from kgr.embed import SMALL_BATCH, Encoder


def test_small_and_large_batches_give_sentence_transformers_vectors(monkeypatch):
    encoder = Encoder(batch_size=256, threads=1)
    texts = ["who directed [Dark Harbor]", "uncle", "a long passage about harbours " * 60, ""]
    reference = encoder.model.encode(texts, batch_size=256, normalize_embeddings=True, convert_to_numpy=True)
    direct = []
    monkeypatch.setattr(encoder, "_forward", lambda batch, forward=encoder._forward: direct.append(batch) or forward(batch))
    small = encoder.encode(texts)
    assert direct == [texts] and small.dtype == np.float32
    np.testing.assert_allclose(small, reference, atol=1e-6)
    many = [f"text number {i}" for i in range(SMALL_BATCH + 1)]
    large = encoder.encode(many)
    assert direct == [texts]  # more than SMALL_BATCH texts: SentenceTransformer.encode
    np.testing.assert_allclose(np.linalg.norm(large, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(many[:3]), large[:3], atol=1e-6)
