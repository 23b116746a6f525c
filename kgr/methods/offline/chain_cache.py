"""The offline policy's speed machinery: chains as arrays of step numbers, and the memos that spare recomputing them.

None of it decides anything (kgr.methods.offline.policy states the score and its terms): a scorer reads the same
numbers whether they were just computed or taken from a memo.

- `StepNumbers`: every step (relation, type) a chain has taken, numbered on first sight, so that chains are rows of
  int64 step ids (padded with -1) that numpy scores many at a time.
- `CompiledGroups`: each group of same-length chains' out-and-back steps and prior, memoized whole.
- `tail_rows`: the continuations of up to `depth` steps from a type along a schema, built once per memo.
- `fanned`, `stacked`: the rows a trajectory's chains and a review's candidates are scored as.
- `RecentScorers`: the last few question-and-anchor scorers (a question's ranking, confidence check and reviews all
  ask for the same one).
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Hashable, Iterable, TypeVar

import numpy as np

Step = tuple[str, str]  # (relation, type)

# Compiled chain groups memoized (CompiledGroups): groups of at most 1,000 chains, 200,000 chains in all before the
# memo starts afresh (tens of MB at most)
GROUP_CHAINS, CHAINS_KEPT = 1000, 200_000
RECENT_SCORERS = 8  # a question's anchors (rarely more than 3)


class StepNumbers:
    """Steps (relation, type) numbered on first sight, each with its relation's and its target type's number."""

    def __init__(self) -> None:
        self._ids: dict[Step, int] = {}
        self.steps: list[Step] = []  # per step id, the step
        self.relation: list[int] = []  # per step id, its relation's number
        self.type: list[int] = []  # per step id, its target type's number
        self.relation_numbers: dict[str, int] = {}
        self.type_names: list[str] = []  # per type number, the type
        self._type_numbers: dict[str, int] = {}

    def id(self, step: Step) -> int:
        """The number of a step (relation, type), given on first sight."""
        found = self._ids.get(step)
        if found is None:
            found = self._ids[step] = len(self.steps)
            self.steps.append(step)
            self.relation.append(self.relation_numbers.setdefault(step[0], len(self.relation_numbers)))
            self.type.append(self.type_number(step[1]))
        return found

    def type_number(self, type_name: str) -> int:
        """The number of a type, given on first sight."""
        found = self._type_numbers.get(type_name)
        if found is None:
            found = self._type_numbers[type_name] = len(self.type_names)
            self.type_names.append(type_name)
        return found

    def rows(self, chains: Iterable[tuple[Step, ...]]) -> tuple[np.ndarray, np.ndarray]:
        """Chains as rows of step ids padded with -1, and their lengths."""
        chains = list(chains)
        lengths = np.fromiter(map(len, chains), dtype=np.int64, count=len(chains))
        rows = np.full((len(chains), int(lengths.max(initial=0))), -1, dtype=np.int64)
        for row, chain in zip(rows, chains):
            row[:len(chain)] = [self.id(step) for step in chain]
        return rows, lengths


Compiled = tuple[np.ndarray, np.ndarray]  # per chain of a group: its out-and-back steps, its prior


class CompiledGroups:
    """`compile(ids, anchor_types)` of groups of same-length chains, the last few groups memoized whole.

    On a schema-sized graph the same groups come back question after question; an open vocabulary brings thousands
    of new chains per question, which a memo per chain would cost as much to look up as to compile."""

    def __init__(self, compile: Callable[[np.ndarray, tuple[str, ...]], Compiled]):
        self._compile = compile
        self._groups: dict[tuple, Compiled] = {}
        self._memoized = 0  # chains in _groups

    def get(self, ids: np.ndarray, anchor_types: list[str]) -> Compiled:
        memo = len(ids) <= GROUP_CHAINS
        key = (ids.shape, ids.tobytes(), tuple(anchor_types)) if memo else None
        found = self._groups.get(key) if memo else None
        if found is None:
            found = self._compile(ids, tuple(anchor_types))
            if memo:
                self._memoized += len(ids)
                if self._memoized > CHAINS_KEPT:
                    self._groups.clear()  # starts afresh (one atomic step: questions may run concurrently)
                    self._memoized = len(ids)
                self._groups[key] = found
        return found


TailMemo = dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]


def tail_rows(type_name: str, depth: int, schema: dict[str, list[Step]], memo: TailMemo,
              numbers: StepNumbers) -> tuple[np.ndarray, np.ndarray]:
    """All continuations of up to `depth` steps from a type along the schema, the empty one first, as rows of step ids
    padded with -1 to `depth` and their lengths; built once per memo (every trajectory into the type extends the same
    tails)."""
    key = (type_name, depth)
    found = memo.get(key)
    if found is None:
        rows, lengths = np.full((1, depth), -1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        steps = schema.get(type_name, []) if depth > 0 else []
        if steps:
            tails = [tail_rows(next_type, depth - 1, schema, memo, numbers) for _, next_type in steps]
            first = np.repeat(np.array([numbers.id(step) for step in steps], dtype=np.int64),
                              [len(below) for below, _ in tails])
            rows = np.vstack([rows, np.hstack([first[:, None], np.vstack([below for below, _ in tails])])])
            lengths = np.concatenate([lengths] + [below_lengths + 1 for _, below_lengths in tails])
        found = memo[key] = (rows, lengths)
    return found


def fanned(prefix: list[int], firsts: list[int], tails: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Chains that take the `prefix` steps, then one of the `firsts`, then each tail (rows of step ids padded with -1,
    and lengths); ordered first step by first step, as a loop over them and then over the tails would list them."""
    rows, lengths = tails
    width = len(prefix) + 1
    out = np.empty((len(firsts), len(rows), width + rows.shape[1]), dtype=np.int64)  # first step x tail x step
    out[:, :, :len(prefix)] = prefix
    out[:, :, len(prefix)] = np.array(firsts, dtype=np.int64)[:, None]
    out[:, :, width:] = rows
    out_lengths = np.empty((len(firsts), len(rows)), dtype=np.int64)
    out_lengths[:] = lengths + width
    return out.reshape(-1, out.shape[2]), out_lengths.ravel()


def stacked(blocks: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of chain rows as one matrix, padded with -1 to the widest, and their lengths (in block order)."""
    width = max((rows.shape[1] for rows, _ in blocks), default=0)
    out = np.full((sum(len(rows) for rows, _ in blocks), width), -1, dtype=np.int64)
    start = 0
    for rows, _ in blocks:
        out[start:start + len(rows), :rows.shape[1]] = rows
        start += len(rows)
    return out, np.concatenate([lengths for _, lengths in blocks]) if blocks else np.zeros(0, dtype=np.int64)


T = TypeVar("T")


class RecentScorers(Generic[T]):
    """The last `size` scorers built, by key, the oldest forgotten first (questions may run in threads)."""

    def __init__(self, size: int = RECENT_SCORERS):
        self.size = size
        self._kept: dict[Hashable, T] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The scorer kept under `key`, else `build()`'s, kept."""
        scorer = self._kept.get(key)
        if scorer is None:
            scorer = build()
            with self._lock:
                self._kept[key] = scorer
                while len(self._kept) > self.size:
                    del self._kept[next(iter(self._kept))]  # the oldest
        return scorer

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
