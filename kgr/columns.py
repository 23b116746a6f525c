"""Arrow string columns read as sequences of Python strings, made only for the rows asked for."""

from __future__ import annotations

from collections.abc import Iterator, Sequence


class TextColumn(Sequence):
    """A string column read as a sequence of Python strings: an index, a slice or a `take` makes only the strings
    asked for, a pass over all of them a piece at a time.

    Millions of texts held this way cost their bytes: the 4.87M relationship texts of 10x bench/scale.py held 1.5 GiB
    as a list of strings in a retrieval process, 1.0 GiB read from DuckDB as this (0.42 GiB the texts, the rest
    DuckDB's cache of what it read)."""

    READ_ROWS = 65_536  # rows made strings at a time by a pass over every text

    def __init__(self, array):
        self.array = array  # a pyarrow Array or ChunkedArray (chunks as read: combining them would copy them all)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.array))
            if step != 1:
                raise ValueError("a TextColumn slices with step 1 only")
            return self.array.slice(start, max(stop - start, 0)).to_pylist()
        return self.array[index].as_py()

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self.array), self.READ_ROWS):
            yield from self.array.slice(start, self.READ_ROWS).to_pylist()

    def take(self, rows: Sequence[int]) -> list[str]:
        """The strings of `rows` (ids), in that order."""
        import pyarrow as pa

        return self.array.take(pa.array(rows, type=pa.int64())).to_pylist()
