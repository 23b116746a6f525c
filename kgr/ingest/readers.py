"""One reader per input format; each parses a file into a `Batch` of records located by line."""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from kgr.errors import InputError
from kgr.graph import Entity, Passage

# Our field names, which the `columns` option maps to a file's own header names or JSON keys.
FIELDS = ("subject", "relation", "object", "source", "target", "id", "name", "type", "types", "description",
          "sources")

# LightRAG joins merged values with this separator and uses UNKNOWN for an entity type it does not know.
LIGHTRAG_SEP = "<SEP>"
LIGHTRAG_UNKNOWN = "UNKNOWN"
# LightRAG relationships carry no label of their own; this one stands in when `keywords` is empty.
LIGHTRAG_RELATION = "related_to"

Edge = tuple[int, str, str, str, str]  # (line, source key, relation, target key, description)
# A provenance reference: a passage id or title (str), or the index of one of the batch's own passages (int).
SourceRef = str | int


@dataclass
class Batch:
    """What one file contributed: entities and edges with their 1-based lines, and passages."""

    path: Path
    entities: list[tuple[int, Entity]] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    # True when edges name entity ids (source/target records), which must then match declared entities.
    keyed: bool = False
    # (line, passage, the input's own key if it gave one); keys are assigned when batches are merged.
    passages: list[tuple[int | None, Passage, str | None]] = field(default_factory=list)
    # Provenance: index into `edges` / `entities` -> the passages that record was extracted from.
    edge_sources: dict[int, list[SourceRef]] = field(default_factory=dict)
    entity_sources: dict[int, list[SourceRef]] = field(default_factory=dict)
    # Records left out as malformed, each "file:line: what was wrong" (reported, not fatal).
    skipped: list[str] = field(default_factory=list)
    # One string object per distinct key and label among the edges (`add_edge`), not one per line.
    _strings: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def add_edge(self, line: int | None, source: str, relation: str, target: str, description: str) -> None:
        """Append an edge; its keys and label share the string objects of earlier edges that named them."""
        strings = self._strings
        self.edges.append((line, strings.setdefault(source, source), strings.setdefault(relation, relation),
                           strings.setdefault(target, target), description))


def read_text(path: Path) -> str:
    """Return a file's text, rejecting a missing, unreadable, non-UTF-8 or empty file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except OSError as e:
        raise InputError(path, f"cannot read the file: {e.strerror}") from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(path, f"not UTF-8 text (invalid byte 0x{data[e.start]:02x})", line) from None
    if not text.strip():
        # Line 1 is where a record was expected; the message says which kind of empty it is.
        raise InputError(path, "empty file (0 bytes)" if not data else "empty file (only blank lines)", 1)
    return text


def require_records(batch: Batch, line: int, what: str) -> Batch:
    """Return the batch, refusing one that holds no entity, edge or passage (`what` says what the file had)."""
    if not (batch.entities or batch.edges or batch.passages):
        raise InputError(batch.path, f"no records: {what}", line)
    return batch


def read_triples(path: Path, text: str, delimiter: str = "|") -> Batch:
    """Read header-less `subject|relation|object` lines (MetaQA's kb.txt); names are the entity keys."""
    batch = Batch(path)
    append = batch.add_edge
    for number, line in enumerate(text.split("\n"), 1):
        parts = line.split(delimiter)
        if len(parts) != 3:
            if not line.strip():
                continue
            raise InputError(path, f"expected subject{delimiter}relation{delimiter}object, "
                                   f"found {len(parts)} field(s)", number)
        subject, relation, obj = parts[0].strip(), parts[1].strip(), parts[2].strip()
        if not (subject and relation and obj):
            raise InputError(path, "empty subject, relation or object", number)
        append(number, subject, relation, obj, "")
    return batch


def _check_columns(path: Path, columns: dict[str, str] | None) -> dict[str, str]:
    """Validate the `columns` option's field names; return it as a dict."""
    columns = dict(columns or {})
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise InputError(path, f"columns option names unknown field(s) {', '.join(unknown)}; "
                               f"known fields: {', '.join(FIELDS)}")
    return columns


def read_table(path: Path, text: str, delimiter: str, columns: dict[str, str] | None = None) -> Batch:
    """Read a CSV/TSV file with a header; rows are triples, relationships or entities by their columns."""
    columns = _check_columns(path, columns)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(row for row in reader if any(cell.strip() for cell in row))
        header_line = reader.line_num
        names = [cell.strip() for cell in header]
        lowered = [name.lower() for name in names]
        index: dict[str, int] = {}
        for our in FIELDS:
            theirs = columns.get(our, our)
            if theirs in names:
                index[our] = names.index(theirs)
            elif theirs.lower() in lowered:
                index[our] = lowered.index(theirs.lower())
            elif our in columns:
                raise InputError(path, f"unknown column {theirs!r} (the header has: {', '.join(names)})",
                                 header_line)
        kind = _record_kind(path, set(index), header_line, what="columns")
        _refuse_unknown_columns(path, names, index, header_line)
        batch = Batch(path, keyed=kind == "relationship")
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            line = reader.line_num
            if len(row) != len(names):
                raise InputError(path, f"expected {len(names)} fields as in the header, found {len(row)}", line)
            record = {our: row[i].strip() for our, i in index.items()}
            _add_record(batch, kind, record, path, line, type_separator=";")
    except csv.Error as e:
        raise InputError(path, f"malformed CSV: {e}", reader.line_num) from None
    return require_records(batch, header_line, "a header but no rows")


def _refuse_unknown_columns(path: Path, names: list[str], index: dict[str, int], line: int) -> None:
    """Refuse a header column that maps to none of our fields (it would be dropped without a word)."""
    used = set(index.values())
    unknown = [name for position, name in enumerate(names) if position not in used]
    if unknown:
        listed = ", ".join(repr(name) for name in unknown)
        raise InputError(path, f"unknown column(s) {listed}; known columns: {', '.join(FIELDS)} "
                               f"(map a header to one with --column FIELD=HEADER, or remove the column)", line)


def _record_kind(path: Path, present: set[str], line: int | None, what: str = "fields") -> str:
    """Tell a triple, relationship or entity record from the fields it has."""
    if "subject" in present and "object" in present:
        kind = "triple"
    elif "source" in present and "target" in present:
        kind = "relationship"
    elif "id" in present or "name" in present:
        return "entity"
    else:
        raise InputError(path, f"no known {what}: expected subject/relation/object, source/relation/target "
                               f"or id/name/type/description (the columns option maps other names; header-less "
                               f"triples need the format `triples`)", line)
    if "relation" not in present:
        raise InputError(path, f"no relation among the {what}", line)
    return kind


def _scalar(value: object, name: str, path: Path, line: int | None) -> str:
    """Return a JSON/CSV value as stripped text; numbers are allowed as ids."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise InputError(path, f"field {name!r} must be a string, found {type(value).__name__}", line)


def _types(value: object, path: Path, line: int | None, separator: str | None) -> list[str]:
    """Return the types in a `type`/`types` value (a string, a list, or `separator`-joined)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    found: list[str] = []
    for item in items:
        text = _scalar(item, "types", path, line)
        for part in text.split(separator) if separator else [text]:
            part = part.strip()
            if part and part not in found:
                found.append(part)
    return found


def _source_refs(record: dict, kind: str, path: Path, line: int | None, separator: str | None) -> list[SourceRef]:
    """The passages a record names as its provenance: `sources`, or `source` on a triple or entity record
    (on a relationship record `source` is the edge's head)."""
    refs: list[SourceRef] = []
    for name in ("sources", "source") if kind != "relationship" else ("sources",):
        value = record.get(name)
        for item in value if isinstance(value, list) else [value]:
            text = _scalar(item, name, path, line)
            for part in text.split(separator) if separator else [text]:
                if part.strip() and part.strip() not in refs:
                    refs.append(part.strip())
    return refs


def _add_record(batch: Batch, kind: str, record: dict, path: Path, line: int | None,
                type_separator: str | None = None) -> None:
    """Append one triple, relationship or entity record (fields already under our names) to a batch."""
    refs = _source_refs(record, kind, path, line, type_separator)
    if refs:
        index = len(batch.entities) if kind == "entity" else len(batch.edges)
        (batch.entity_sources if kind == "entity" else batch.edge_sources)[index] = refs
    if kind == "entity":
        key = _scalar(record.get("id"), "id", path, line)
        name = _scalar(record.get("name"), "name", path, line)
        if not (key or name):
            raise InputError(path, "entity has neither id nor name", line)
        types = _types(record.get("type"), path, line, type_separator)
        for extra in _types(record.get("types"), path, line, type_separator):
            if extra not in types:
                types.append(extra)
        entity = Entity(key=key or name, name=name or key, types=types,
                        description=_scalar(record.get("description"), "description", path, line))
        batch.entities.append((line, entity))
        return
    ends = ("subject", "object") if kind == "triple" else ("source", "target")
    source = _scalar(record.get(ends[0]), ends[0], path, line)
    relation = _scalar(record.get("relation"), "relation", path, line)
    target = _scalar(record.get(ends[1]), ends[1], path, line)
    if not (source and relation and target):
        raise InputError(path, f"empty or missing {ends[0]}, relation or {ends[1]}", line)
    description = _scalar(record.get("description"), "description", path, line)
    batch.add_edge(line, source, relation, target, description)


def _rename(record: dict, columns: dict[str, str]) -> dict:
    """View a JSON record under our field names, following the `columns` option."""
    if not columns:
        return record
    return {our: record.get(columns.get(our, our)) for our in FIELDS}


def read_jsonl(path: Path, text: str, columns: dict[str, str] | None = None) -> Batch:
    """Read JSON Lines of triple, relationship or entity records (each line may be any of them)."""
    columns = _check_columns(path, columns)
    batch = Batch(path)
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(path, f"invalid JSON: {e.msg}", number) from None
        _add_json_record(batch, record, columns, path, number)
    return batch


def _add_json_record(batch: Batch, record: object, columns: dict[str, str], path: Path, line: int | None) -> None:
    """Classify one JSON record and add it to the batch."""
    if not isinstance(record, dict):
        raise InputError(path, f"expected a JSON object, found {type(record).__name__}", line)
    record = _rename(record, columns)
    kind = _record_kind(path, {k for k, v in record.items() if v is not None}, line)
    batch.keyed = batch.keyed or kind == "relationship"
    _add_record(batch, kind, record, path, line)


_SPACE = re.compile(r"[ \t\r\n]*")


def load_json(path: Path, text: str) -> tuple[object, dict[int, int]]:
    """Parse a JSON document; also map id() of each object inside a top-level array
    (or an array that is a value of the top-level object) to the line where it starts."""
    decoder = json.JSONDecoder()
    lines: dict[int, int] = {}
    # Newlines are counted incrementally because element offsets only grow.
    counted = [0, 1]

    def line_at(pos: int) -> int:
        """Line number of offset `pos` (offsets must not decrease between calls)."""
        counted[1] += text.count("\n", counted[0], pos)
        counted[0] = pos
        return counted[1]

    def skip(pos: int) -> int:
        """Offset of the first non-whitespace character from `pos`."""
        return _SPACE.match(text, pos).end()

    def expect(pos: int, chars: str) -> str:
        """Return the character at `pos`, which must be one of `chars`."""
        if pos >= len(text) or text[pos] not in chars:
            raise json.JSONDecodeError(f"Expecting one of {' '.join(chars)}", text, pos)
        return text[pos]

    def array(pos: int) -> tuple[list, int]:
        """Parse the array opening at `pos`, noting each object element's line."""
        items: list = []
        pos = skip(pos + 1)
        if text.startswith("]", pos):
            return items, pos + 1
        while True:
            start = line_at(pos)
            item, pos = decoder.raw_decode(text, pos)
            if isinstance(item, dict):
                lines[id(item)] = start
            items.append(item)
            pos = skip(pos)
            if expect(pos, ",]") == "]":
                return items, pos + 1
            pos = skip(pos + 1)

    def value(pos: int, depth: int) -> tuple[object, int]:
        """Parse the value at `pos`; only the top-level object is walked key by key."""
        if text.startswith("[", pos):
            return array(pos)
        if depth == 0 and text.startswith("{", pos):
            result: dict = {}
            pos = skip(pos + 1)
            if text.startswith("}", pos):
                return result, pos + 1
            while True:
                expect(pos, '"')
                key, pos = decoder.raw_decode(text, pos)
                pos = skip(pos)
                expect(pos, ":")
                result[key], pos = value(skip(pos + 1), depth + 1)
                pos = skip(pos)
                if expect(pos, ",}") == "}":
                    return result, pos + 1
                pos = skip(pos + 1)
        return decoder.raw_decode(text, pos)

    try:
        document, end = value(skip(0), 0)
        if skip(end) != len(text):
            raise json.JSONDecodeError("Extra data", text, skip(end))
    except json.JSONDecodeError as e:
        raise InputError(path, f"invalid JSON: {e.msg}", e.lineno) from None
    return document, lines


def read_json(path: Path, text: str, columns: dict[str, str] | None = None) -> Batch:
    """Read a JSON array of triple, relationship or entity records."""
    columns = _check_columns(path, columns)
    document, lines = load_json(path, text)
    if not isinstance(document, list):
        raise InputError(path, "expected a JSON array of records", 1)
    batch = Batch(path)
    for record in document:
        _add_json_record(batch, record, columns, path, lines.get(id(record)))
    return require_records(batch, 1, "an empty JSON array")


def read_lightrag(path: Path, text: str) -> Batch:
    """Read LightRAG's custom-KG JSON (`insert_custom_kg` input): entities, relationships and chunks.

    As in LightRAG, entity names are the keys and a relationship may name an entity that is not listed
    (it is then created). Relationship `keywords` become the relation label; chunks become passages."""
    document, lines = load_json(path, text)
    if not isinstance(document, dict) or not {"entities", "relationships", "chunks"} & set(document):
        raise InputError(path, "expected a LightRAG custom KG: an object with entities, relationships "
                               "and/or chunks", 1)
    batch = Batch(path)
    for section, required in (("entities", ("entity_name",)), ("relationships", ("src_id", "tgt_id")),
                              ("chunks", ("content",))):
        items = document.get(section) or []
        if not isinstance(items, list):
            raise InputError(path, f"{section!r} must be a list", 1)
        for item in items:
            line = lines.get(id(item))
            if not isinstance(item, dict):
                raise InputError(path, f"each of {section!r} must be an object", line)
            missing = [name for name in required if not _scalar(item.get(name), name, path, line)]
            if missing:
                raise InputError(path, f"{section[:-1]} without {', '.join(missing)}", line)
            _add_lightrag_item(batch, section, item, path, line)
    _resolve_chunk_sources(batch)
    return require_records(batch, 1, "empty entities, relationships and chunks")


def _resolve_chunk_sources(batch: Batch) -> None:
    """Point `source_id` references at the file's own chunks that carry that source_id (several may)."""
    chunks: dict[str, list[int]] = {}
    for index, (_, _, key) in enumerate(batch.passages):
        if key is not None:
            chunks.setdefault(key.rsplit("#", 1)[0], []).append(index)
    for table in (batch.entity_sources, batch.edge_sources):
        for index, refs in table.items():
            table[index] = list(dict.fromkeys(r for ref in refs for r in chunks.get(ref, [ref])))


def _add_lightrag_item(batch: Batch, section: str, item: dict, path: Path, line: int | None) -> None:
    """Add one LightRAG entity, relationship or chunk to the batch."""
    description = _scalar(item.get("description"), "description", path, line)
    if section != "chunks":
        refs = [r.strip() for r in _scalar(item.get("source_id"), "source_id", path, line).split(LIGHTRAG_SEP)
                if r.strip() and r.strip().upper() != LIGHTRAG_UNKNOWN]
        if refs:
            table = batch.entity_sources if section == "entities" else batch.edge_sources
            table[len(batch.entities) if section == "entities" else len(batch.edges)] = refs
    if section == "entities":
        name = _scalar(item["entity_name"], "entity_name", path, line)
        types = [t for t in _types(item.get("entity_type"), path, line, LIGHTRAG_SEP)
                 if t.upper() != LIGHTRAG_UNKNOWN]
        batch.entities.append((line, Entity(key=name, name=name, types=types, description=description)))
    elif section == "relationships":
        keywords = _scalar(item.get("keywords"), "keywords", path, line)
        batch.add_edge(line, _scalar(item["src_id"], "src_id", path, line), keywords or LIGHTRAG_RELATION,
                       _scalar(item["tgt_id"], "tgt_id", path, line), description)
    else:
        # Several chunks may share a source_id, so the chunk's position makes the key unique.
        source = _scalar(item.get("source_id"), "source_id", path, line)
        key = f"{source}#{len(batch.passages)}" if source else None
        batch.passages.append((line, Passage(key="", title="", text=item["content"].strip()), key))


def read_passages(path: Path) -> Batch:
    """Read passages `{title, text}` (optional `id`) from a JSON array or JSON Lines file."""
    text = read_text(path)
    batch = Batch(path)
    if text.lstrip().startswith("["):
        document, lines = load_json(path, text)
        records = [(lines.get(id(record)), record) for record in document]
    else:
        records = []
        for number, line in enumerate(text.split("\n"), 1):
            if line.strip():
                try:
                    records.append((number, json.loads(line)))
                except json.JSONDecodeError as e:
                    raise InputError(path, f"invalid JSON: {e.msg}", number) from None
    for line, record in records:
        if not isinstance(record, dict):
            raise InputError(path, f"expected a passage object, found {type(record).__name__}", line)
        body = _scalar(record.get("text", record.get("content")), "text", path, line)
        if not body:
            raise InputError(path, "passage without text", line)
        key = _scalar(record.get("id"), "id", path, line) or None
        passage = Passage(key="", title=_scalar(record.get("title"), "title", path, line), text=body)
        batch.passages.append((line, passage, key))
    return require_records(batch, 1, "no passages")
