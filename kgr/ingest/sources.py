"""The ingest entry point: read input files of any supported format into one normalized `Graph`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from kgr.errors import InputError
from kgr.graph import Entity, Graph, Relationship, default_description, normalize_name
from kgr.ingest import extracted, readers
from kgr.ingest.formats import FORMATS
from kgr.ingest.types import assign_types, load_schema

# The provenance of every edge read without any, shared (`Relationship.sources`).
NO_SOURCES: tuple[int, ...] = ()
# Header names that mark the first line of a delimited text file as a header rather than a triple.
_HEADER_WORDS = frozenset(readers.FIELDS)


def read_graph(paths: list[Path], *, fmt: str | None = None, passages: Iterable[Path] = (),
               schema: Path | None = None, columns: dict[str, str] | None = None,
               delimiter: str | None = None, base: readers.Batch | None = None) -> Graph:
    """Read graph files (and passage files) into one typed Graph; `fmt=None` detects each file's format.

    `base` (a project's current graph, for `kgr ingest --append`) is merged in first, as if it were the first file."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError(paths[0] if paths else "-", f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    # The schema is checked before the (possibly large) inputs are read so a typo fails fast.
    loaded_schema = load_schema(Path(schema)) if schema is not None else None
    batches = [read_file(Path(path), fmt=fmt, columns=columns, delimiter=delimiter) for path in paths]
    batches += [readers.read_passages(Path(path)) for path in passages]
    graph = merge(([base] if base is not None else []) + batches)
    graph.inferred_types = assign_types(graph, loaded_schema)
    return graph


def read_file(path: Path, *, fmt: str | None = None, columns: dict[str, str] | None = None,
              delimiter: str | None = None) -> readers.Batch:
    """Read one graph file in the given or detected format (a GraphRAG output folder is one input too)."""
    if fmt == "graphrag" or (fmt is None and path.is_dir()):
        return extracted.read_graphrag(path)
    text = readers.read_text(path)
    fmt, delimiter = detect_format(path, text, fmt, delimiter, header=bool(columns))
    if fmt == "triples":
        if columns:
            raise InputError(path, "the columns option needs a file with a header row")
        return readers.read_triples(path, text, delimiter)
    if fmt in ("csv", "tsv"):
        return readers.read_table(path, text, delimiter, columns)
    if fmt == "jsonl":
        return readers.read_jsonl(path, text, columns)
    if fmt == "json":
        return readers.read_json(path, text, columns)
    if fmt == "openie":
        return extracted.read_openie(path, text)
    return readers.read_lightrag(path, text)


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


def merge(batches: list[readers.Batch]) -> Graph:
    """Combine batches into a Graph: declared entities first, then edges, then passages.

    A repeated entity id must agree on name, (non-empty) description and (non-empty) types. When any
    entity file was given, relationship records (source/target) must name declared ids; triples and
    LightRAG relationships create the entities they name. Exact duplicate edges are kept once."""
    graph = Graph()
    entities = graph.entities
    declared_at: dict[str, tuple[Path, int | None]] = {}
    for batch in batches:
        for line, entity in batch.entities:
            _declare(entities, declared_at, entity, batch.path, line)
    seen: dict[tuple[str, str, str, str], int] = {}
    relationships = graph.relationships
    # Each edge holds its entities' own key strings and one string per label, not the copies each input line made:
    # a large graph's edges then cost their object and its four pointers.
    labels: dict[str, str] = {}
    for batch in batches:
        strict = batch.keyed and bool(declared_at)
        for line, source, relation, target, description in batch.edges:
            ends = []
            for key in (source, target):
                entity = entities.get(key)
                if entity is None:
                    if strict:
                        raise InputError(batch.path, f"relationship names unknown entity id {key!r}", line)
                    # Inlined Graph.entity(): this loop runs once per triple of large KBs.
                    entity = entities[key] = Entity(key=key, name=key)
                ends.append(entity.key)
            edge = (ends[0], labels.setdefault(relation, relation), ends[1], description)
            if edge not in seen:
                seen[edge] = len(relationships)
                relationships.append(Relationship(*edge, NO_SOURCES))
    keys: dict[str, tuple[Path, int | None]] = {}
    offsets: list[int] = []
    for batch in batches:
        offsets.append(len(graph.passages))
        for line, passage, key in batch.passages:
            passage.key = key if key is not None else str(len(graph.passages))
            if passage.key in keys:
                where = _where(*keys[passage.key])
                raise InputError(batch.path, f"passage id {passage.key!r} repeats (first at {where})", line)
            keys[passage.key] = (batch.path, line)
            graph.passages.append(passage)
    _attach_sources(graph, batches, offsets, seen)
    for batch in batches:
        graph.skipped.extend(batch.skipped)
    return graph


def _attach_sources(graph: Graph, batches: list[readers.Batch], offsets: list[int],
                    edge_index: dict[tuple[str, str, str, str], int]) -> None:
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

    for batch, offset in zip(batches, offsets):
        for index, refs in batch.entity_sources.items():
            line, entity = batch.entities[index]
            target = graph.entities[entity.key].sources
            target.extend(p for ref in refs for p in resolve(ref, offset, batch.path, line) if p not in target)
        for index, refs in batch.edge_sources.items():
            line, source, relation, target_key, description = batch.edges[index]
            relationship = graph.relationships[edge_index[(source, relation, target_key, description)]]
            target = relationship.sources = list(relationship.sources)
            target.extend(p for ref in refs for p in resolve(ref, offset, batch.path, line) if p not in target)


def _declare(entities: dict[str, Entity], declared_at: dict[str, tuple[Path, int | None]], entity: Entity,
             path: Path, line: int | None) -> None:
    """Add a declared entity, or fold it into an earlier declaration of the same id if they agree."""
    old = entities.get(entity.key)
    if old is None:
        entities[entity.key] = entity
        declared_at[entity.key] = (path, line)
        return
    if old.name != entity.name or (old.description and entity.description
                                   and old.description != entity.description):
        first = _where(*declared_at[entity.key])
        raise InputError(path, f"entity id {entity.key!r} repeats with different content (first at {first})",
                         line)
    if old.types and entity.types and set(old.types) != set(entity.types):
        # Uniting them would silently give the entity a type one of the records denies it.
        first = _where(*declared_at[entity.key])
        raise InputError(path, f"entity {entity.key!r} repeats with type(s) {', '.join(entity.types)} but "
                               f"{first} gives {', '.join(old.types)}; list all its types in one record", line)
    old.description = old.description or entity.description
    old.types.extend(t for t in entity.types if t not in old.types)


def _where(path: Path, line: int | None) -> str:
    """Format a file position for messages."""
    return f"{path}:{line}" if line is not None else str(path)


def link_passages(graph: Graph) -> list[tuple[str, int]]:
    """Pair each passage with the entities named like its title: (entity key, passage index) pairs."""
    by_name: dict[str, list[str]] = {}
    for key, entity in graph.entities.items():
        by_name.setdefault(normalize_name(entity.name), []).append(key)
    links: list[tuple[str, int]] = []
    for index, passage in enumerate(graph.passages):
        title = normalize_name(passage.title)
        if title:
            links.extend((key, index) for key in by_name.get(title, ()))
    return links


def fill_descriptions(graph: Graph) -> None:
    """Give every relationship without a description a readable default sentence."""
    entities = graph.entities
    for rel in graph.relationships:
        if not rel.description:
            rel.description = default_description(entities[rel.source].name, rel.relation,
                                                   entities[rel.target].name)

