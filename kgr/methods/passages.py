"""Passage ranking DotRAG and CS-RAG share: a passage's dense score plus its bounded graph evidence."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from kgr.ranking import top_k


def bounded_evidence(total: float) -> float:
    """A passage's summed graph evidence in [0, 1): 1 - exp(-total), as the sum itself near 0 and never at a cap,
    so passages with much evidence still rank by how much (a cap at 1 tied them, leaving the dense score to decide)."""
    return 1.0 - math.exp(-total)


def fuse_passages(dense: np.ndarray, evidence: Mapping[int, float], first: int, top: int,
                  weight: float) -> tuple[list[int], dict[int, tuple[float, float]]]:
    """The `top` passages by dense score + `weight` x graph evidence among the dense `first` and every passage
    with evidence, best first; also {pid: (dense, fused)} of those."""
    pool = list(dict.fromkeys([*top_k(dense, first).tolist(), *evidence]))
    fused = np.array([dense[p] + weight * evidence.get(p, 0.0) for p in pool])
    order = [pool[j] for j in top_k(fused, top).tolist()]
    return order, {p: (float(dense[p]), float(dense[p] + weight * evidence.get(p, 0.0))) for p in order}
