"""The "random choices" ablation: seeded choices, reproducible per (seed, question id, purpose)."""

from __future__ import annotations

import hashlib
import random
from typing import Sequence, TypeVar

T = TypeVar("T")


class RandomChooser:
    """Random orders, choices and subsets; the same (seed, question id, purpose) always gives the same result.

    Use a distinct purpose for each draw within a question (e.g. "hop2"), since equal purposes give equal draws.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def rng(self, question_id: object = "", purpose: str = "") -> random.Random:
        """A generator seeded from (seed, question id, purpose); stable across processes (no salted hash())."""
        digest = hashlib.sha256(f"{self.seed}\x1f{question_id}\x1f{purpose}".encode("utf-8")).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def order(self, n: int, question_id: object = "", purpose: str = "") -> list[int]:
        """A random permutation of range(n)."""
        indices = list(range(n))
        self.rng(question_id, purpose).shuffle(indices)
        return indices

    def choose(self, options: Sequence[T], question_id: object = "", purpose: str = "") -> T:
        """One of `options`."""
        if not options:
            raise ValueError("cannot choose from no options")
        return options[self.rng(question_id, purpose).randrange(len(options))]

    def subset(self, options: Sequence[T], k: int, question_id: object = "", purpose: str = "") -> list[T]:
        """min(k, len(options)) distinct options, in their original order."""
        picked = sorted(self.rng(question_id, purpose).sample(range(len(options)), min(k, len(options))))
        return [options[i] for i in picked]
