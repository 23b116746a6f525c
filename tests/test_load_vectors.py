"""`load_vectors`: a vector table read batch by batch into the matrix whose row i is id i."""

from __future__ import annotations

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from kgr.embed import CHUNK_ROWS, load_vectors
from kgr.errors import KgrError


def write_table(folder, name: str, ids: np.ndarray, vectors: np.ndarray, pieces: int) -> None:
    """A vector table as ingest writes it (id, hash, float16 vector), added in `pieces` appends (Lance fragments)."""
    db = lancedb.connect(str(folder))
    table = None
    for rows in np.array_split(np.arange(len(ids)), pieces):
        batch = pa.table({
            "id": pa.array(ids[rows].astype(np.int32)),
            "hash": pa.array([f"h{i}" for i in ids[rows]]),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors[rows].ravel()), vectors.shape[1]),
        })
        if table is None:
            table = db.create_table(name, data=batch)
        else:
            table.add(batch)


def test_rows_land_at_their_ids_across_batches_and_fragments(tmp_path):
    rows = 2 * CHUNK_ROWS + 123  # several read batches, the last one short
    rng = np.random.default_rng(7)
    stored = rng.standard_normal((rows, 8)).astype(np.float16)
    order = rng.permutation(rows)  # written out of id order, in three fragments
    write_table(tmp_path, "things", order, stored[order], pieces=3)
    half = load_vectors(tmp_path, "things", np.float16)
    assert half.dtype == np.float16 and half.shape == (rows, 8)
    assert np.array_equal(half, stored)
    full = load_vectors(tmp_path, "things")
    assert full.dtype == np.float32 and np.array_equal(full, stored.astype(np.float32))


def test_an_empty_table_is_an_empty_matrix_of_its_dimension(tmp_path):
    lancedb.connect(str(tmp_path)).create_table(
        "things", schema=pa.schema([("id", pa.int32()), ("hash", pa.string()), ("vector", pa.list_(pa.float16(), 8))]))
    assert load_vectors(tmp_path, "things").shape == (0, 8)


@pytest.mark.parametrize("ids, message", [(np.array([0, 1, 1, 3]), "no row for id 2"),
                                          (np.array([0, 1, 2, 9]), "id 9 beyond its 4 rows")])
def test_ids_that_are_not_each_row_once_are_an_error_not_garbage_rows(tmp_path, ids, message):
    write_table(tmp_path, "things", ids, np.ones((4, 8), dtype=np.float16), pieces=1)
    with pytest.raises(KgrError, match=message):
        load_vectors(tmp_path, "things")
