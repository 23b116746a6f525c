"""The ingest entry point: read input files of any supported format into one `CompactGraph` (or `Graph`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from kgr.errors import InputError
from kgr.graph import Graph, default_description, normalize_name
from kgr.ingest import extracted, readers
from kgr.ingest.compact import CompactGraph
from kgr.ingest.formats import FORMATS
from kgr.ingest.types import assign_types, load_schema
# Header names that mark the first line of a delimited text file as a header rather than a triple.
_HEADER_WORDS = frozenset(readers.FIELDS)


def read_graph(paths: list[Path], *, fmt: str | None = None, passages: Iterable[Path] = (),
               schema: Path | None = None, columns: dict[str, str] | None = None,
               delimiter: str | None = None, base: readers.Batch | None = None) -> Graph:
    """Read graph files (and passage files) into one typed Graph of objects (`read_compact`'s graph as `Graph`)."""
    return read_compact(paths, fmt=fmt, passages=passages, schema=schema, columns=columns, delimiter=delimiter,
                        base=base).to_graph()


def read_compact(paths: list[Path], *, fmt: str | None = None, passages: Iterable[Path] = (),
                 schema: Path | None = None, columns: dict[str, str] | None = None,
                 delimiter: str | None = None, base: readers.Batch | None = None,
                 chunk_rows: int = readers.CHUNK_ROWS) -> CompactGraph:
    """Read graph files (and passage files) into one typed CompactGraph; `fmt=None` detects each file's format.

    Line-based files (triples, CSV/TSV, JSON Lines) are read line by line into compact columns, `chunk_rows` records
    at a time. `base` (a project's current graph, for `kgr ingest --append`) is merged in first, as if it were the
    first file."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError(paths[0] if paths else "-", f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    # The schema is checked before the (possibly large) inputs are read so a typo fails fast.
    loaded_schema = load_schema(Path(schema)) if schema is not None else None
    keys: dict[str, int] = base.keys if base is not None else {}  # one numbering of entity keys for every batch
    batches = [read_file(Path(path), fmt=fmt, columns=columns, delimiter=delimiter, keys=keys, chunk_rows=chunk_rows)
               for path in paths]
    batches += [readers.read_passages(Path(path)) for path in passages]
    graph = merge(([base] if base is not None else []) + batches)
    del batches
    graph.inferred_types = assign_types(graph, loaded_schema)
    return graph


def read_file(path: Path, *, fmt: str | None = None, columns: dict[str, str] | None = None,
              delimiter: str | None = None, keys: dict[str, int] | None = None,
              chunk_rows: int = readers.CHUNK_ROWS) -> readers.Batch:
    """Read one graph file in the given or detected format (a GraphRAG output folder is one input too); `keys` is
    the entity key numbering to extend (`Batch.keys`)."""
    batch = readers.Batch(path, keys={} if keys is None else keys, chunk_rows=chunk_rows)
    if fmt == "graphrag" or (fmt is None and path.is_dir()):
        return extracted.read_graphrag(batch)
    fmt, delimiter = detect_format(path, readers.read_head(path), fmt, delimiter, header=bool(columns))
    if fmt == "triples":
        if columns:
            raise InputError(path, "the columns option needs a file with a header row")
        return readers.read_triples(batch, readers.stream_lines(path), delimiter)
    if fmt in ("csv", "tsv"):
        return readers.read_table(batch, readers.stream_lines(path, newline=""), delimiter, columns)
    if fmt == "jsonl":
        return readers.read_jsonl(batch, readers.stream_lines(path), columns)
    # A JSON document is parsed whole.
    text = readers.read_text(path)
    if fmt == "json":
        return readers.read_json(batch, text, columns)
    if fmt == "openie":
        return extracted.read_openie(batch, text)
    return readers.read_lightrag(batch, text)


def detect_format(path: Path, text: str, fmt: str | None, delimiter: str | None,
                  header: bool = False) -> tuple[str, str]:
    """Return (format, delimiter): from `fmt` if given, else from the extension, else from the content.

    `.jsonl`/`.ndjson` are JSON Lines and `.csv`/`.tsv` tables with a header (header-less ones need
    `fmt="triples"`, as a first row of unknown names could be either). Other files are judged by content:
    `[` opens a record array, `{` a LightRAG document unless the first line is a whole record (JSON
    Lines); otherwise a first line naming two known columns is a header, else the lines are triples."""
    suffix = path.suffix.lower()
    if fmt in ("csv", "tsv") or (fmt is None and suffix in (".csv", ".tsv")):
        kind = fmt or suffix[1:]
        return kind, delimiter or ("\t" if kind == "tsv" else ",")
    first = next(line.strip() for line in text.split("\n") if line.strip())
    if fmt is None and suffix in (".jsonl", ".ndjson"):
        fmt = "jsonl"
    if fmt is None and first[0] in "[{":
        fmt = "json" if first[0] == "[" else "openie" if extracted.is_openie(text) else _json_object_format(first)
    if fmt is not None:
        return fmt, delimiter or "|"
    if delimiter is None:
        delimiter = next((d for d in ("|", "\t", ",") if d in first), None)
        if delimiter is None:
            raise InputError(path, "cannot tell the format (no |, tab or comma in the first line); "
                                   "give the format explicitly", 1)
    names = {cell.strip().lower() for cell in first.split(delimiter)}
    # Two known names, because a lone word like `type` could be a relation in a first triple.
    if header or len(names & _HEADER_WORDS) >= 2:
        return ("tsv" if delimiter == "\t" else "csv"), delimiter
    return "triples", delimiter


def _json_object_format(first_line: str) -> str:
    """Tell JSON Lines from a LightRAG document by whether the first line is a complete ordinary record."""
    try:
        record = json.loads(first_line)
    except json.JSONDecodeError:
        return "lightrag"
    if isinstance(record, dict) and not {"entities", "relationships", "chunks"} & set(record):
        return "jsonl"
    return "lightrag"


def merge(batches: list[readers.Batch]) -> CompactGraph:
    """Combine batches into a CompactGraph: declared entities first, then those edges create (in order of first
    appearance), then edges, then passages.

    A repeated entity id must agree on name, (non-empty) description and (non-empty) types. When any
    entity file was given, relationship records (source/target) must name declared ids; triples and
    LightRAG relationships create the entities they name. Exact duplicate edges are kept once. The batches' edge
    columns are released as they are merged."""
    import numpy as np
    import pyarrow as pa

    graph = CompactGraph()
    # Every batch's key numbers in one numbering (a read's batches share theirs; a held graph's has its own).
    vocabulary = batches[0].keys if batches else {}
    key_maps = [_key_map(vocabulary, batch.keys) for batch in batches]
    key_list = list(vocabulary)
    eid_of = np.full(len(key_list), -1, dtype=np.int32)
    names, descriptions, declared_kids = _declare(graph, batches, key_maps, eid_of, key_list)
    created: list[np.ndarray] = []
    count = len(declared_kids)
    labels: dict[str, int] = {}
    columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    chunks = []
    for batch, key_map in zip(batches, key_maps):
        if not batch.edge_count:
            continue
        heads, tails = _kids(batch.edge_heads, key_map), _kids(batch.edge_tails, key_map)
        ends = np.empty(2 * len(heads), dtype=np.int32)  # each edge's source, then its target: creation order
        ends[0::2], ends[1::2] = heads, tails
        unknown = eid_of[ends] < 0
        if unknown.any():
            if batch.keyed and len(declared_kids):
                at = int(np.argmax(unknown))
                raise InputError(batch.path, f"relationship names unknown entity id {key_list[ends[at]]!r}",
                                 batch.line(batch.edge_lines[at // 2]))
            new = ends[unknown]
            _, first = np.unique(new, return_index=True)
            new = new[np.sort(first)]
            eid_of[new] = np.arange(count, count + len(new), dtype=np.int32)
            count += len(new)
            created.append(new)
        del ends, unknown
        label_map = np.array([labels.setdefault(label, len(labels)) for label in batch.labels], dtype=np.int32)
        columns.append((eid_of[heads], label_map[_kids(batch.edge_labels, None)], eid_of[tails]))
        chunks.extend(batch.edge_descriptions.array().chunks)
        del heads, tails
        batch.release_edges()
    if len(columns) == 1:  # one file's edges: no copy
        src, relation, dst = columns[0]
    else:
        src, relation, dst = (np.concatenate([c[i] for c in columns]) if columns else np.zeros(0, dtype=np.int32)
                              for i in range(3))
    del columns
    # one array: taking rows of a chunked one (the duplicates' descriptions) would combine its chunks at each take
    edge_descriptions = pa.chunked_array(chunks, type=pa.large_string()).combine_chunks()
    del chunks
    representative = _dedupe_edges(src, relation, dst, edge_descriptions)
    rid_of_row = None  # row -> rid; None: every row is its own relationship
    if representative is not None:
        kept = representative == np.arange(len(src))
        rid_of_row = (np.cumsum(kept) - 1)[representative]
        kept = np.flatnonzero(kept)
        src, relation, dst = src[kept], relation[kept], dst[kept]
        edge_descriptions = edge_descriptions.take(pa.array(kept))
    graph.src, graph.relation, graph.dst, graph.edge_descriptions = src, relation, dst, edge_descriptions
    graph.labels = list(labels)
    del src, relation, dst, edge_descriptions
    kid_of_eid = np.concatenate([declared_kids, *created]) if created else declared_kids
    graph.keys = pa.array(key_list, type=pa.large_string()).take(pa.array(kid_of_eid))
    graph.names = pa.concat_arrays([names, graph.keys.slice(len(declared_kids))])
    graph.descriptions = pa.concat_arrays([descriptions, pa.repeat(pa.scalar("", pa.large_string()),
                                                                   len(graph.keys) - len(declared_kids))])
    graph.types.extend([()] * (len(graph.keys) - len(declared_kids)))
    passage_keys: dict[str, tuple[Path, int | None]] = {}
    offsets: list[int] = []
    for batch in batches:
        offsets.append(len(graph.passages))
        for line, passage, key in batch.passages:
            passage.key = key if key is not None else str(len(graph.passages))
            if passage.key in passage_keys:
                where = _where(*passage_keys[passage.key])
                raise InputError(batch.path, f"passage id {passage.key!r} repeats (first at {where})", line)
            passage_keys[passage.key] = (batch.path, line)
            graph.passages.append(passage)
    _attach_sources(graph, batches, offsets, key_maps, eid_of, rid_of_row)
    for batch in batches:
        graph.skipped.extend(batch.skipped)
    return graph


def _key_map(vocabulary: dict[str, int], keys: dict[str, int]):
    """Each of a batch's key numbers in the merge's numbering (`vocabulary`, extended by keys it lacks); None when
    the batch numbers its keys in `vocabulary` itself."""
    import numpy as np

    if keys is vocabulary:
        return None
    return np.array([vocabulary.setdefault(key, len(vocabulary)) for key in keys], dtype=np.int32)


def _kids(column, key_map):
    """A batch's int32 key (or label) column as a numpy array, in the merge's numbering (`_key_map`)."""
    import numpy as np

    numbers = np.frombuffer(column, dtype=np.int32) if len(column) else np.zeros(0, dtype=np.int32)
    return numbers if key_map is None else key_map[numbers]


def _declare(graph: CompactGraph, batches: list[readers.Batch], key_maps, eid_of, key_list: list[str]):
    """Number the declared entities (eids in order of first declaration) and fold each repeat into its first
    declaration if they agree; return their names and descriptions (Arrow) and key numbers, by eid."""
    import numpy as np
    import pyarrow as pa

    kids = [_kids(batch.entity_keys, key_map) for batch, key_map in zip(batches, key_maps)]
    every = np.concatenate(kids) if kids else np.zeros(0, dtype=np.int32)
    starts = np.cumsum([0] + [len(k) for k in kids])
    _, first = np.unique(every, return_index=True)
    first.sort()
    eid_of[every[first]] = np.arange(len(first), dtype=np.int32)
    names = pa.chunked_array([c for b in batches for c in b.entity_names.array().chunks], type=pa.large_string())
    descriptions = pa.chunked_array([c for b in batches for c in b.entity_descriptions.array().chunks],
                                    type=pa.large_string())
    types = [t for batch in batches for t in batch.entity_types]
    graph.types = [types[row] for row in first.tolist()]
    declared_names = names.take(pa.array(first)).combine_chunks()
    declared_descriptions = descriptions.take(pa.array(first)).combine_chunks()

    def where(row: int) -> tuple[readers.Batch, int | None]:
        """The batch and line of a declaration, by its row among every batch's."""
        index = int(np.searchsorted(starts, row, side="right")) - 1
        batch = batches[index]
        return batch, batch.line(batch.entity_lines[row - int(starts[index])])

    repeats = np.ones(len(every), dtype=bool)
    repeats[first] = False
    filled: dict[int, str] = {}  # eid -> a description a repeat gave an entity declared without one
    for row in np.flatnonzero(repeats).tolist():
        kid = int(every[row])
        eid = int(eid_of[kid])
        batch, line = where(row)
        first_batch, first_line = where(int(first[eid]))
        name, description, new_types = names[row].as_py(), descriptions[row].as_py(), types[row]
        old_description = filled.get(eid, declared_descriptions[eid].as_py())
        old_types = graph.types[eid]
        if declared_names[eid].as_py() != name or (old_description and description
                                                   and old_description != description):
            raise InputError(batch.path, f"entity id {key_list[kid]!r} repeats with different content (first at "
                                         f"{_where(first_batch.path, first_line)})", line)
        if old_types and new_types and set(old_types) != set(new_types):
            # Uniting them would silently give the entity a type one of the records denies it.
            raise InputError(batch.path, f"entity {key_list[kid]!r} repeats with type(s) {', '.join(new_types)} but "
                                         f"{_where(first_batch.path, first_line)} gives {', '.join(old_types)}; list "
                                         f"all its types in one record", line)
        if not old_description and description:
            filled[eid] = description
        if not old_types and new_types:
            graph.types[eid] = new_types
    if filled:
        texts = declared_descriptions.to_pylist()
        for eid, description in filled.items():
            texts[eid] = description
        declared_descriptions = pa.array(texts, type=pa.large_string())
    return declared_names, declared_descriptions, every[first]


def _dedupe_edges(src, relation, dst, descriptions):
    """The row each edge row repeats (itself for the first of each set of exact duplicates), or None when no row
    repeats another; found by sorting the ids, rows of equal ends and label compared by description among
    themselves."""
    import numpy as np

    count = len(src)
    if count < 2:
        return None
    order = np.lexsort((dst, relation, src))  # stable: equal edges stay in row order
    same = np.ones(count - 1, dtype=bool)
    for column in (src, relation, dst):
        ordered = column[order]
        same &= ordered[1:] == ordered[:-1]
        del ordered
    if not same.any():
        return None
    representative = np.arange(count, dtype=np.int64)
    starts = np.flatnonzero(~np.concatenate([[False], same]))
    sizes = np.diff(np.append(starts, count))
    for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
        rows = order[start:start + size].tolist()
        first: dict[str, int] = {}
        for row, text in zip(rows, descriptions.take(rows).to_pylist()):
            representative[row] = first.setdefault(text, row)
    if (representative == np.arange(count)).all():
        return None
    return representative


def _attach_sources(graph: CompactGraph, batches: list[readers.Batch], offsets: list[int], key_maps, eid_of,
                    rid_of_row) -> None:
    """Resolve each record's provenance references to passage indexes: a batch's own passage, else a passage id,
    else every passage with that title; a reference naming no passage is bad input."""
    by_key = {p.key: index for index, p in enumerate(graph.passages)}
    by_title: dict[str, list[int]] = {}
    for index, passage in enumerate(graph.passages):
        by_title.setdefault(normalize_name(passage.title), []).append(index)

    def resolve(ref: readers.SourceRef, offset: int, path: Path, line: int | None) -> list[int]:
        if isinstance(ref, int):
            return [offset + ref]
        if ref in by_key:
            return [by_key[ref]]
        found = by_title.get(normalize_name(ref))
        if not found:
            hint = "" if graph.passages else " (no passages were given: add them with --passages)"
            raise InputError(path, f"source {ref!r} names no passage id or title{hint}", line)
        return found

    row_offset = 0
    for batch, offset, key_map in zip(batches, offsets, key_maps):
        for index, refs in batch.entity_sources.items():
            line = batch.line(batch.entity_lines[index])
            kid = batch.entity_keys[index] if key_map is None else key_map[batch.entity_keys[index]]
            target = graph.entity_sources.setdefault(int(eid_of[kid]), [])
            target.extend(p for ref in refs for p in resolve(ref, offset, batch.path, line) if p not in target)
        for index, refs in batch.edge_sources.items():
            line = batch.line(batch.edge_lines[index])
            row = row_offset + index
            target = graph.relationship_sources.setdefault(int(rid_of_row[row]) if rid_of_row is not None else row,
                                                           [])
            target.extend(p for ref in refs for p in resolve(ref, offset, batch.path, line) if p not in target)
        row_offset += batch.edge_count
    for sources in (graph.entity_sources, graph.relationship_sources):
        for index in [i for i, found in sources.items() if not found]:
            del sources[index]


def _where(path: Path, line: int | None) -> str:
    """Format a file position for messages."""
    return f"{path}:{line}" if line is not None else str(path)


def link_passages(graph: Graph) -> list[tuple[str, int]]:
    """Pair each passage with the entities named like its title: (entity key, passage index) pairs (an ingest's
    `CompactGraph` pairs eids: `passage_links`)."""
    keys = list(graph.entities)
    return [(keys[eid], pid) for eid, pid in
            passage_links([entity.name for entity in graph.entities.values()], graph.passages)]


def passage_links(names: Iterable[str], passages: list) -> list[tuple[int, int]]:
    """Pair each passage with the entities (by eid) whose name is its title, normalized: (eid, passage index)."""
    titles = {normalize_name(passage.title) for passage in passages} - {""}
    by_name: dict[str, list[int]] = {}
    if titles:  # only the names some title matches are held
        for eid, name in enumerate(names):
            normal = normalize_name(name)
            if normal in titles:
                by_name.setdefault(normal, []).append(eid)
    links: list[tuple[int, int]] = []
    for index, passage in enumerate(passages):
        title = normalize_name(passage.title)
        if title:
            links.extend((eid, index) for eid in by_name.get(title, ()))
    return links


def fill_descriptions(graph: Graph) -> None:
    """Give every relationship without a description a readable default sentence."""
    entities = graph.entities
    for rel in graph.relationships:
        if not rel.description:
            rel.description = default_description(entities[rel.source].name, rel.relation,
                                                   entities[rel.target].name)
