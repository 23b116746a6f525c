"""The per-question memo of text vectors (TextVectors), over a fake encoder that records its calls."""

from __future__ import annotations

import numpy as np

from kgr.embed import TextVectors


class FakeEncoder:
    """Vectors from a text's length; every encode call's texts are recorded."""

    dimension = 2

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_each_text_is_encoded_once():
    encoder = FakeEncoder()
    vectors = TextVectors(encoder)
    first = vectors(["ab", "abc", "ab"])
    assert first.tolist() == [[2, 1], [3, 1], [2, 1]]
    assert vectors(["abc"]).tolist() == [[3, 1]] and vectors([]).shape == (0, 2)
    assert encoder.calls == [["ab", "abc"]]


def test_expected_texts_ride_along_with_the_next_miss():
    encoder = FakeEncoder()
    vectors = TextVectors(encoder)
    vectors(["a"])
    vectors.expect(["bb", "a", "ccc"])  # "a" is known: not encoded again
    assert len(encoder.calls) == 1  # expecting calls nothing
    vectors(["a"])  # a hit does not encode what is expected either
    assert len(encoder.calls) == 1
    assert vectors(["dddd"]).tolist() == [[4, 1]]
    assert encoder.calls[-1] == ["dddd", "bb", "ccc"]
    assert vectors(["ccc", "bb"]).tolist() == [[3, 1], [2, 1]] and len(encoder.calls) == 2
    vectors(["e"])  # the expectations were spent with the last miss
    assert encoder.calls[-1] == ["e"]
