"""One reader per input format; each parses a file into a `Batch` of records located by line."""

from __future__ import annotations

import codecs
import csv
import json
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kgr.errors import InputError
from kgr.graph import Passage

# Our field names, which the `columns` option maps to a file's own header names or JSON keys.
FIELDS = ("subject", "relation", "object", "source", "target", "id", "name", "type", "types", "description",
          "sources")

# LightRAG joins merged values with this separator and uses UNKNOWN for an entity type it does not know.
LIGHTRAG_SEP = "<SEP>"
LIGHTRAG_UNKNOWN = "UNKNOWN"
# LightRAG relationships carry no label of their own; this one stands in when `keywords` is empty.
LIGHTRAG_RELATION = "related_to"

# A provenance reference: a passage id or title (str), or the index of one of the batch's own passages (int).
SourceRef = str | int
# Records a batch turns into compact columns at a time (`embedding.chunk_rows` in an ingest).
CHUNK_ROWS = 8192
# Line 0 in a batch's line columns: the record has no line (a JSON element whose start was not noted, a held graph).
NO_LINE = 0


class StringChunks:
    """Strings appended one at a time and held as Arrow string chunks of `chunk_rows` (no Python object each)."""

    def __init__(self, chunk_rows: int = CHUNK_ROWS):
        self.chunk_rows = chunk_rows
        self.chunks: list = []
        self.pending: list[str] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def append(self, text: str) -> None:
        self.pending.append(text)
        self.count += 1
        if len(self.pending) >= self.chunk_rows:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.pending:
            # 64-bit offsets: a file's descriptions together may pass 2 GiB
            self.chunks.append(pa.array(self.pending, type=pa.large_string()))
            self.pending = []

    def array(self):
        """Every string appended, as one pyarrow ChunkedArray."""
        import pyarrow as pa

        self._flush()
        return pa.chunked_array(self.chunks, type=pa.large_string())


@dataclass
class Batch:
    """What one file contributed, as compact columns: entities and edges with their 1-based lines, and passages.

    Entity keys are numbered in `keys` (shared by the batches of one read, so a key is held once) and relation labels
    in `labels`; edges are int32 columns of those numbers, names and descriptions Arrow strings made `chunk_rows` at
    a time, so a read holds no Python object per record."""

    path: Path
    # True when edges name entity ids (source/target records), which must then match declared entities.
    keyed: bool = False
    # (line, passage, the input's own key if it gave one); keys are assigned when batches are merged.
    passages: list[tuple[int | None, Passage, str | None]] = field(default_factory=list)
    # Provenance: index into the edges / entities -> the passages that record was extracted from.
    edge_sources: dict[int, list[SourceRef]] = field(default_factory=dict)
    entity_sources: dict[int, list[SourceRef]] = field(default_factory=dict)
    # Records left out as malformed, each "file:line: what was wrong" (reported, not fatal).
    skipped: list[str] = field(default_factory=list)
    # Entity key -> its number, in order of first reading; the batches of one read share one.
    keys: dict[str, int] = field(default_factory=dict, repr=False)
    chunk_rows: int = CHUNK_ROWS
    # Declared entities: line, key number, name, description, types (a tuple shared by the entities with the same
    # types; the empty tuple when untyped).
    entity_lines: array = field(default_factory=lambda: array("i"), repr=False)
    entity_keys: array = field(default_factory=lambda: array("i"), repr=False)
    entity_names: StringChunks = field(init=False, repr=False)
    entity_descriptions: StringChunks = field(init=False, repr=False)
    entity_types: list[tuple[str, ...]] = field(default_factory=list, repr=False)
    # Edges: line, source and target key numbers, label number (`labels`), description ("" when none was given).
    edge_lines: array = field(default_factory=lambda: array("i"), repr=False)
    edge_heads: array = field(default_factory=lambda: array("i"), repr=False)
    edge_tails: array = field(default_factory=lambda: array("i"), repr=False)
    edge_labels: array = field(default_factory=lambda: array("i"), repr=False)
    edge_descriptions: StringChunks = field(init=False, repr=False)
    labels: dict[str, int] = field(default_factory=dict, repr=False)
    _type_tuples: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.entity_names = StringChunks(self.chunk_rows)
        self.entity_descriptions = StringChunks(self.chunk_rows)
        self.edge_descriptions = StringChunks(self.chunk_rows)

    @property
    def entity_count(self) -> int:
        return len(self.entity_keys)

    @property
    def edge_count(self) -> int:
        return len(self.edge_lines)

    def key_number(self, key: str) -> int:
        """The number of an entity key, numbering it if new."""
        return self.keys.setdefault(key, len(self.keys))

    def add_entity(self, line: int | None, key: str, name: str, types: list[str], description: str) -> None:
        """Append a declared entity."""
        self.entity_lines.append(line or NO_LINE)
        self.entity_keys.append(self.key_number(key))
        self.entity_names.append(name)
        self.entity_descriptions.append(description)
        found = tuple(types)
        self.entity_types.append(self._type_tuples.setdefault(found, found))

    def add_edge(self, line: int | None, source: str, relation: str, target: str, description: str) -> None:
        """Append an edge; its keys and label become numbers, its description joins the pending chunk."""
        self.edge_lines.append(line or NO_LINE)
        self.edge_heads.append(self.key_number(source))
        self.edge_labels.append(self.labels.setdefault(relation, len(self.labels)))
        self.edge_tails.append(self.key_number(target))
        self.edge_descriptions.append(description)

    def release_edges(self) -> None:
        """Drop the edges' key, label and description columns (merged; lines stay for messages)."""
        self.edge_heads, self.edge_tails, self.edge_labels = array("i"), array("i"), array("i")
        self.edge_descriptions = StringChunks(self.chunk_rows)

    def line(self, number: int) -> int | None:
        """A line from a line column (None for NO_LINE)."""
        return number if number != NO_LINE else None


def read_text(path: Path) -> str:
    """Return a file's text, rejecting a missing, unreadable, non-UTF-8 or empty file."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise _open_error(path, e) from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_utf8(path, data[e.start], data.count(b"\n", 0, e.start) + 1) from None
    if not text.strip():
        raise _empty_file(path, bool(data))
    return text


def _open_error(path: Path, error: OSError) -> InputError:
    """The one-line error of a file that cannot be opened."""
    if isinstance(error, FileNotFoundError):
        return InputError(path, "no such file")
    return InputError(path, f"cannot read the file: {error.strerror}")


def _not_utf8(path: Path, byte: int, line: int) -> InputError:
    """The error of a file whose line `line` holds the invalid UTF-8 byte `byte`."""
    return InputError(path, f"not UTF-8 text (invalid byte 0x{byte:02x})", line)


def _empty_file(path: Path, has_bytes: bool) -> InputError:
    """The error of a file without a record: line 1 is where one was expected; the message says which kind of empty
    it is."""
    return InputError(path, "empty file (only blank lines)" if has_bytes else "empty file (0 bytes)", 1)


def _utf8_error(path: Path) -> InputError:
    """The error `read_text` gives a file that is not UTF-8, found by decoding it line by line (a newline byte never
    falls inside a UTF-8 sequence, so the first bad line holds the whole file's first bad byte)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return _not_utf8(path, raw[e.start], number)
    raise AssertionError(f"{path} decoded line by line")  # only called after a decode failed


def read_head(path: Path, lines: int = 3) -> str:
    """The text of a file up to its `lines`-th non-blank line (enough to tell its format), rejecting a missing,
    unreadable or empty file and bad UTF-8 within it as `read_text` does."""
    head: list[str] = []
    found = 0
    try:
        with open(path, encoding="utf-8-sig", newline="\n") as handle:
            for line in handle:
                head.append(line)
                found += bool(line.strip())
                if found >= lines:
                    break
    except OSError as e:
        raise _open_error(path, e) from None
    except UnicodeDecodeError:
        raise _utf8_error(path) from None
    if not found:
        raise _empty_file(path, bool(head))
    return "".join(head)


def stream_lines(path: Path, newline: str = "\n") -> Iterator[str]:
    """A file's lines as they are read (a whole file is never held). With `newline` "\\n" they come as the text's
    `split("\\n")` does, without the newline; with "" as `csv` reads a file (line ends kept)."""
    try:
        with open(path, encoding="utf-8-sig", newline=newline) as handle:
            if newline:
                for line in handle:
                    yield line[:-1] if line.endswith("\n") else line
            else:
                yield from handle
    except UnicodeDecodeError:
        raise _utf8_error(path) from None
    except OSError as e:
        raise _open_error(path, e) from None


def require_records(batch: Batch, line: int, what: str) -> Batch:
    """Return the batch, refusing one that holds no entity, edge or passage (`what` says what the file had)."""
    if not (batch.entity_count or batch.edge_count or batch.passages):
        raise InputError(batch.path, f"no records: {what}", line)
    return batch


def read_triples(batch: Batch, lines: Iterable[str], delimiter: str = "|") -> Batch:
    """Read header-less `subject|relation|object` lines (MetaQA's kb.txt); names are the entity keys."""
    path = batch.path
    append = batch.add_edge
    for number, line in enumerate(lines, 1):
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


def read_table(batch: Batch, lines: Iterable[str], delimiter: str, columns: dict[str, str] | None = None) -> Batch:
    """Read a CSV/TSV file with a header (`lines` with their ends, as `stream_lines(path, "")` gives them); rows are
    triples, relationships or entities by their columns."""
    path = batch.path
    columns = _check_columns(path, columns)
    reader = csv.reader(lines, delimiter=delimiter)
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
        batch.keyed = kind == "relationship"
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
        index = batch.entity_count if kind == "entity" else batch.edge_count
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
        batch.add_entity(line, key or name, name or key, types,
                         _scalar(record.get("description"), "description", path, line))
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


def read_jsonl(batch: Batch, lines: Iterable[str], columns: dict[str, str] | None = None) -> Batch:
    """Read JSON Lines of triple, relationship or entity records (each line may be any of them)."""
    path = batch.path
    columns = _check_columns(path, columns)
    for number, line in enumerate(lines, 1):
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


def read_json(batch: Batch, text: str, columns: dict[str, str] | None = None) -> Batch:
    """Read a JSON array of triple, relationship or entity records."""
    path = batch.path
    columns = _check_columns(path, columns)
    document, lines = load_json(path, text)
    if not isinstance(document, list):
        raise InputError(path, "expected a JSON array of records", 1)
    for record in document:
        _add_json_record(batch, record, columns, path, lines.get(id(record)))
    return require_records(batch, 1, "an empty JSON array")


def read_lightrag(batch: Batch, text: str) -> Batch:
    """Read LightRAG's custom-KG JSON (`insert_custom_kg` input): entities, relationships and chunks.

    As in LightRAG, entity names are the keys and a relationship may name an entity that is not listed
    (it is then created). Relationship `keywords` become the relation label; chunks become passages."""
    path = batch.path
    document, lines = load_json(path, text)
    if not isinstance(document, dict) or not {"entities", "relationships", "chunks"} & set(document):
        raise InputError(path, "expected a LightRAG custom KG: an object with entities, relationships "
                               "and/or chunks", 1)
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
            table[batch.entity_count if section == "entities" else batch.edge_count] = refs
    if section == "entities":
        name = _scalar(item["entity_name"], "entity_name", path, line)
        types = [t for t in _types(item.get("entity_type"), path, line, LIGHTRAG_SEP)
                 if t.upper() != LIGHTRAG_UNKNOWN]
        batch.add_entity(line, name, name, types, description)
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
