"""Ranking helpers every layer uses: the top k of a score array, overall or per group."""

from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first (ties broken by lower index)."""
    if k <= 0 or scores.size == 0:
        return np.empty(0, dtype=np.int64)
    if k < scores.size:
        candidates = np.argpartition(-scores, k - 1)[:k]
    else:
        candidates = np.arange(scores.size)
    return candidates[np.lexsort((candidates, -scores[candidates]))]


def top_k_per_group(scores: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores within each group, all of them best first (ties broken by lower index)."""
    if k <= 0 or scores.size == 0:
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((np.arange(scores.size), -scores, groups))  # by group, best first within each
    grouped = groups[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    rank = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
    chosen = order[rank < k]
    return chosen[np.lexsort((chosen, -scores[chosen]))]


def named_types(word_vectors: np.ndarray, centroids: np.ndarray, margin: float, clarity: float) -> np.ndarray:
    """Per word (rows) and type (columns), whether the word names the type: the type's centroid is within `margin` of
    the word's best type (cosine) and every other type trails that best by `clarity` (a word near many types alike,
    "who" to people and occupations, names none)."""
    return named_by_similarity(word_vectors @ centroids.T, margin, clarity)


def named_by_similarity(sims: np.ndarray, margin: float, clarity: float) -> np.ndarray:
    """`named_types` over given word x type similarities."""
    best = sims.max(axis=1, keepdims=True)
    named = sims >= best - margin
    runner_up = np.where(named, -np.inf, sims).max(axis=1, keepdims=True)
    return named & np.isfinite(runner_up) & (best - runner_up >= clarity)
