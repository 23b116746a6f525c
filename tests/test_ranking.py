"""The ranking helpers of kgr.ranking."""

from __future__ import annotations

import numpy as np

from kgr.ranking import named_types


def test_a_word_names_the_types_near_its_best_only_when_the_rest_trail_it():
    centroids = np.eye(3, dtype=np.float32)  # three types along three axes
    words = np.array([[0.9, 0.1, 0.0],    # clearly the first type
                      [0.6, 0.55, 0.0],   # the first two within the margin, the third far behind: both named
                      [0.5, 0.45, 0.4]],  # near every type alike: names none
                     dtype=np.float32)
    named = named_types(words, centroids, margin=0.1, clarity=0.15)
    assert named.tolist() == [[True, False, False], [True, True, False], [False, False, False]]
    # a single type has no runner-up to trail it: nothing is named against nothing
    assert not named_types(words[:1], centroids[:1], 0.1, 0.15).any()
