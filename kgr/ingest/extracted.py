"""Readers for knowledge graphs built by LLM extraction tools, keeping which passage each record came from.

- HippoRAG's OpenIE results JSON (`openie_results_ner_*.json`): `{"docs": [...]}`, each doc with `passage` (the
  text, HippoRAG writes it as title + newline + text), `extracted_entities` (strings) and `extracted_triples`
  (`[subject, relation, object]` lists); HippoRAG 1 adds `title`/`text`, HippoRAG 2 an `idx` chunk id. Every doc
  becomes a passage; its entities and triples name it as their source. Malformed triples and entities are left
  out and reported (`Batch.skipped`), as an LLM's output is expected to contain some.
- Microsoft GraphRAG's output folder: `entities.parquet` (`title`, `type`, `description`, `text_unit_ids`),
  `relationships.parquet` (`source`, `target`, `description`, `text_unit_ids`), optional `text_units.parquet`
  (`id`, `text`, `document_ids` or `document_id`) and `documents.parquet` (`id`, `title`) giving the passages'
  titles. GraphRAG relationships have no label, so they get the same stand-in as LightRAG's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kgr.errors import InputError
from kgr.graph import Passage
from kgr.ingest.readers import LIGHTRAG_RELATION, Batch, load_json

# The first key of an OpenIE results document; how `detect_format` tells it from a LightRAG custom KG.
OPENIE_START = re.compile(r'\s*\{\s*"docs"\s*:')

# GraphRAG's table files: current names, then the `create_final_*` names of releases before 1.0.
GRAPHRAG_TABLES = {
    "entities": ("entities.parquet", "create_final_entities.parquet"),
    "relationships": ("relationships.parquet", "create_final_relationships.parquet"),
    "text_units": ("text_units.parquet", "create_final_text_units.parquet"),
    "documents": ("documents.parquet", "create_final_documents.parquet"),
}


def is_openie(text: str) -> bool:
    """True when a JSON document opens with a `docs` key, as HippoRAG's OpenIE results do."""
    return OPENIE_START.match(text) is not None


def read_openie(batch: Batch, text: str) -> Batch:
    """Read HippoRAG OpenIE results: one passage per doc, its entities and triples sourced to it."""
    path = batch.path
    document, lines = load_json(path, text)
    docs = document.get("docs") if isinstance(document, dict) else None
    if not isinstance(docs, list):
        raise InputError(path, "expected HippoRAG OpenIE results: an object whose `docs` is a list", 1)
    for number, doc in enumerate(docs):
        line = lines.get(id(doc))
        where = f"{path}:{line}: docs[{number}]" if line is not None else f"{path}: docs[{number}]"
        passage = doc.get("passage") if isinstance(doc, dict) else None
        if not isinstance(passage, str) or not passage.strip():
            batch.skipped.append(f"{where}: no passage text")
            continue
        local = len(batch.passages)
        key = doc.get("idx")
        batch.passages.append((line, _openie_passage(doc, passage), str(key) if key is not None else None))
        # The doc's entities are its named entities and its triples' ends, each sourced to the doc once.
        named: list[str] = []
        entities = doc.get("extracted_entities") or []
        for k, name in enumerate(entities if isinstance(entities, list) else [entities]):
            if not isinstance(name, str) or not name.strip():
                batch.skipped.append(f"{where}: entity {k}: expected a non-empty string, found {name!r}")
                continue
            named.append(name.strip())
        for k, triple in enumerate(_openie_triples(doc.get("extracted_triples"), where, batch)):
            if not (isinstance(triple, (list, tuple)) and len(triple) == 3
                    and all(isinstance(part, str) and part.strip() for part in triple)):
                batch.skipped.append(f"{where}: triple {k}: expected 3 non-empty strings, found {triple!r}")
                continue
            subject, relation, obj = (part.strip() for part in triple)
            batch.edge_sources[batch.edge_count] = [local]
            batch.add_edge(line, subject, relation, obj, "")
            named += [subject, obj]
        for name in dict.fromkeys(named):
            batch.entity_sources[batch.entity_count] = [local]
            batch.add_entity(line, name, name, [], "")
    return batch


def _openie_passage(doc: dict, passage: str) -> Passage:
    """The doc's passage: its `title`, else the first line of a multi-line passage (HippoRAG's layout)."""
    title = doc.get("title")
    body = doc.get("text")
    if isinstance(title, str) and title.strip():
        title = title.strip()
        if not isinstance(body, str) or not body.strip():
            body = passage[len(title):] if passage.startswith(title + "\n") else passage
    else:
        head, _, rest = passage.strip().partition("\n")
        title, body = (head.strip(), rest) if rest.strip() else ("", passage)
    return Passage(key="", title=title, text=body.strip())


def _openie_triples(value: object, where: str, batch: Batch) -> list:
    """The doc's triples: a list, or a Python-literal string of one (older HippoRAG files)."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            batch.skipped.append(f"{where}: extracted_triples is not a list literal")
            return []
    if not isinstance(value, list):
        batch.skipped.append(f"{where}: extracted_triples is a {type(value).__name__}, not a list")
        return []
    return value


def graphrag_tables(folder: Path) -> dict[str, Path]:
    """The GraphRAG table files present in an output folder, by table name."""
    found = {}
    for table, names in GRAPHRAG_TABLES.items():
        for name in names:
            if (folder / name).is_file():
                found[table] = folder / name
                break
    return found


def is_graphrag(folder: Path) -> bool:
    """True for a folder holding GraphRAG's entities and relationships tables."""
    return folder.is_dir() and {"entities", "relationships"} <= set(graphrag_tables(folder))


def _rows(path: Path, required: tuple[str, ...], optional: tuple[tuple[str, ...], ...] = ()) -> list[dict]:
    """A parquet table's rows as dicts of the `required` columns and the first present name of each `optional`."""
    import pyarrow.lib
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except (OSError, pyarrow.lib.ArrowException) as exc:
        raise InputError(path, f"not a readable parquet file: {exc}") from None
    columns = []
    for column in required:
        if column not in names:
            raise InputError(path, f"no column {column!r} (the table has: {', '.join(names)})")
        columns.append(column)
    columns += [next(name for name in choices if name in names) for choices in optional
                if any(name in names for name in choices)]
    return pq.read_table(path, columns=columns).to_pylist()


def _text(row: dict, column: str, path: Path, number: int) -> str:
    """A string cell (empty for null), rejecting other kinds."""
    value = row.get(column)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(path, f"row {number}: column {column!r} must be a string, found {type(value).__name__}")
    return value.strip()


def read_graphrag(batch: Batch) -> Batch:
    """Read a GraphRAG output folder (`batch.path`): entities (typed by `type`), relationships and text units as
    passages."""
    folder = batch.path
    tables = graphrag_tables(folder)
    missing = sorted({"entities", "relationships"} - set(tables))
    if missing:
        raise InputError(folder, f"not a GraphRAG output folder: no {' or '.join(missing)} table "
                                 f"({' / '.join(GRAPHRAG_TABLES[missing[0]])})")
    units: dict[str, int] = {}
    if "text_units" in tables:
        titles = {}
        if "documents" in tables:
            titles = {row["id"]: _text(row, "title", tables["documents"], n)
                      for n, row in enumerate(_rows(tables["documents"], ("id", "title")), 1)}
        path = tables["text_units"]
        for n, row in enumerate(_rows(path, ("id", "text"), (("document_ids", "document_id"),)), 1):
            documents = row.get("document_ids", row.get("document_id")) or []
            documents = documents if isinstance(documents, list) else [documents]
            title = next((titles[d] for d in documents if titles.get(d)), "")
            unit = _text(row, "id", path, n)
            units[unit] = len(batch.passages)
            batch.passages.append((n, Passage(key="", title=title, text=_text(row, "text", path, n)), unit))

    def sources(row: dict, path: Path, number: int) -> list[int]:
        """The local passages of a row's text_unit_ids (none without a text_units table)."""
        if not units:
            return []
        found = []
        for unit in row.get("text_unit_ids") or []:
            if unit not in units:
                raise InputError(path, f"row {number}: text unit {unit!r} is not in {tables['text_units'].name}")
            found.append(units[unit])
        return found

    path = tables["entities"]
    for n, row in enumerate(_rows(path, ("description",), (("title", "name"), ("type",), ("text_unit_ids",))), 1):
        name = _text(row, "title", path, n) if "title" in row else _text(row, "name", path, n)
        if not name:
            raise InputError(path, f"row {n}: entity without a title")
        kind = _text(row, "type", path, n)
        found = sources(row, path, n)
        if found:
            batch.entity_sources[batch.entity_count] = found
        batch.add_entity(n, name, name, [kind] if kind else [], _text(row, "description", path, n))
    path = tables["relationships"]
    for n, row in enumerate(_rows(path, ("source", "target", "description"), (("text_unit_ids",),)), 1):
        source, target = _text(row, "source", path, n), _text(row, "target", path, n)
        if not (source and target):
            raise InputError(path, f"row {n}: relationship without source or target")
        found = sources(row, path, n)
        if found:
            batch.edge_sources[batch.edge_count] = found
        batch.add_edge(n, source, LIGHTRAG_RELATION, target, _text(row, "description", path, n))
    return batch
