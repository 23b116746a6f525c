"""The ingest stage: read a graph (and passages), embed it, and commit it to the project in one step."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Mapping, Sequence

from kgr.columns import TextColumn
from kgr.embed import (CHUNK_ROWS, ComposedVectors, EmbeddingCheckpoint, Encoder, LocalEngine, PhraseCache,
                       build_vector_index, load_vectors, missing_parts, project_encoder, reusable_vectors, text_hash,
                       write_meta, write_vector_table)
from kgr.errors import InputError, KgrError, UsageError
from kgr.graph import Graph, Passage, default_description, relation_words
from kgr.ingest.compact import CompactGraph
from kgr.project import PHRASES_DIR, VECTORS_DIR, Project, file_fingerprint, fingerprint

if TYPE_CHECKING:
    import numpy as np

    from kgr.ingest.readers import Batch

ProgressFactory = Callable[[str, int], Callable[[int], None]]

# One row per ingest the current graph was built from (one, or more after `--append`), written with the graph.
INPUTS_TABLE = "ingest_inputs"
MODES = ("replace", "append")


class IngestRefused(UsageError):
    """An ingest that cannot run as asked (it would replace or double the graph unasked); nothing is written."""


def ingest_mode(replace: bool, append: bool) -> str | None:
    """The `mode` of `run_ingest` the --replace / --append flags ask for."""
    if replace and append:
        raise IngestRefused("--replace and --append exclude each other; give one")
    return "replace" if replace else "append" if append else None


@dataclass
class IngestOptions:
    """What to read: graph files, optional passages and type schema, and reader options."""

    paths: list[Path]
    fmt: str | None = None
    passages: list[Path] = field(default_factory=list)
    schema: Path | None = None
    columns: dict[str, str] | None = None
    delimiter: str | None = None

    def fingerprint(self) -> str:
        from kgr.ingest.extracted import graphrag_tables, is_graphrag

        files = []
        for path in [*self.paths, *self.passages, *([self.schema] if self.schema else [])]:
            if is_graphrag(Path(path)) and path in self.paths:
                files.extend(graphrag_tables(Path(path)).values())
            elif Path(path).is_file():
                files.append(path)
            else:
                raise InputError(path, "no such file" if not Path(path).is_dir() else
                                 "a folder, but not a GraphRAG output folder (entities.parquet, relationships.parquet)")
        return fingerprint([file_fingerprint([Path(p) for p in files]), self.fmt, self.columns, self.delimiter,
                            [p.name for p in self.passages], self.schema is not None])

    def files(self) -> list[str]:
        """The graph and passage files as given, for messages and the inputs table."""
        return [str(p) for p in [*self.paths, *self.passages]]

    def command_args(self, mode: str | None = None,
                     settings: Mapping[str, Any] | None = None) -> list[tuple[str, bool]]:
        """The `kgr ingest` arguments after the directory that read these inputs, each (text, whether it is a path)."""
        args: list[tuple[str, bool]] = [(str(path), True) for path in self.paths]
        for path in self.passages:
            args += [("--passages", False), (str(path), True)]
        if self.schema is not None:
            args += [("--schema", False), (str(self.schema), True)]
        if self.fmt is not None:
            args += [("--format", False), (self.fmt, False)]
        for field_name, header in (self.columns or {}).items():
            args += [("--column", False), (f"{field_name}={header}", False)]
        if self.delimiter is not None:
            args += [("--delimiter", False), (self.delimiter, False)]
        if mode is not None:
            args.append((f"--{mode}", False))
        for key, value in (settings or {}).items():
            args += [("--set", False), (f"{key}={value}", False)]
        return args


@dataclass
class HeldInput:
    """One ingest the project's current graph was built from."""

    fingerprint: str
    files: list[str]
    schema: str


def combined_fingerprint(parts: Sequence[str]) -> str:
    """The input fingerprint of a graph built by these ingests: a single ingest's own, else a hash of them all."""
    return parts[0] if len(parts) == 1 else fingerprint(["append", *parts])


def held_inputs(project: Project) -> list[HeldInput] | None:
    """The ingests the current graph was built from, oldest first; None when none ran or none were recorded
    (a graph from an older kgr or from `kgr perturb`): then only its manifest fingerprint is known."""
    run = project.last_run("ingest")
    if run is None or not project.has_table(INPUTS_TABLE):
        return None
    rows = project.db.execute(f"SELECT fingerprint, files, schema FROM {INPUTS_TABLE} ORDER BY part").fetchall()
    parts = [HeldInput(fp, json.loads(files), schema) for fp, files, schema in rows]
    # A table left from a graph this one replaced without recording its inputs does not describe this graph.
    if not parts or combined_fingerprint([p.fingerprint for p in parts]) != run.input_fingerprint:
        return None
    return parts


def _names(files: Sequence[str]) -> str:
    """File names for a message."""
    return ", ".join(Path(f).name for f in files) or "no files"


def _decide(project: Project, options: IngestOptions, input_fp: str, mode: str | None,
            force: bool) -> tuple[str, list[HeldInput]]:
    """What this ingest does: "skip", "replace" (or a first ingest) or "append"; and the inputs already held.

    The same inputs are those whose fingerprint (the files' names and contents, the reader options and whether a
    schema was given) the current graph was built from; inputs appended earlier count as held too."""
    run = project.last_run("ingest")
    if run is None:
        return "replace", []
    held = held_inputs(project)
    held_fps = [p.fingerprint for p in held] if held else [run.input_fingerprint]
    current = project.is_current("ingest", input_fp)
    if mode == "replace" or (mode is None and input_fp == run.input_fingerprint):
        return ("skip" if current and not force else "replace"), held or []
    if input_fp in held_fps:
        # Part of an appended graph: already in it. Redoing it alone would drop the other parts.
        if not force and project.config_fingerprint("ingest") == run.config_fingerprint:
            return "skip", held or []
        raise IngestRefused(f"{project.root}: the inputs given ({_names(options.files())}) are already part of its "
                            f"graph, built from {_names([f for p in held or [] for f in p.files])}; use --replace "
                            f"to rebuild the graph from the inputs given alone")
    if mode == "append":
        if held is None:
            raise IngestRefused(f"{project.root}: its graph records no inputs to append to (made by `kgr perturb` or "
                                f"an older kgr); use --replace, or ingest all the files at once")
        schemas = sorted({p.schema for p in held if p.schema})
        if schemas and options.schema is None:
            raise IngestRefused(f"{project.root}: its entities were typed by the schema {', '.join(schemas)}; "
                                f"give --schema for the appended files too")
        return "append", held
    holds = f"from {_names([f for p in held for f in p.files])}" if held else "from other inputs"
    counts = run.counts
    raise IngestRefused(
        f"{project.root}: already holds a graph {holds} ({counts.get('relationships', 0):,} relationships, "
        f"{counts.get('entities', 0):,} entities) and the inputs given ({_names(options.files())}) differ: add "
        f"--replace to replace the graph with them or --append to add them to it")


def held_graph(project: Project, chunk_rows: int = CHUNK_ROWS) -> Batch:
    """The project's current graph as a batch to merge appended files into (read `chunk_rows` rows at a time).

    Descriptions kgr generated are left empty, so they are generated again for the merged names and an appended
    copy of an edge is recognised as the same edge."""
    from kgr.ingest.readers import Batch

    db = project.db
    batch = Batch(project.db_path, chunk_rows=chunk_rows)
    types: dict[int, list[str]] = {}
    for eid, type_name in db.execute("SELECT eid, type FROM entity_types ORDER BY rowid").fetchall():
        types.setdefault(eid, []).append(type_name)
    keys: list[str] = []
    names: list[str] = []
    for rows in _fetch_chunks(db.execute("SELECT eid, key, name, description FROM entities ORDER BY eid"),
                              chunk_rows):
        for eid, key, name, description in rows:
            batch.add_entity(None, key, name, types.get(eid, []), description)
            keys.append(key)
            names.append(name)
    for rows in _fetch_chunks(db.execute("SELECT src, dst, relation, description FROM relationships ORDER BY rid"),
                              chunk_rows):
        for src, dst, relation, description in rows:
            generated = description == default_description(names[src], relation, names[dst])
            batch.add_edge(None, keys[src], relation, keys[dst], "" if generated else description)
    batch.passages = [(None, Passage(key="", title=title, text=text), key) for key, title, text in
                      db.execute("SELECT key, title, text FROM passages ORDER BY pid").fetchall()]
    # Provenance, when the graph records it: passage ids are the base batch's own passage positions.
    for table, column, sources in (("relationship_passages", "rid", "edge_sources"),
                                   ("entity_source_passages", "eid", "entity_sources")):
        if project.has_table(table):
            found: dict[int, list[int]] = {}
            for index, pid in db.execute(f"SELECT {column}, pid FROM {table} ORDER BY rowid").fetchall():
                found.setdefault(index, []).append(pid)
            setattr(batch, sources, found)
    return batch


def _fetch_chunks(cursor, rows: int):
    """A query's result `rows` rows at a time."""
    while True:
        chunk = cursor.fetchmany(rows)
        if not chunk:
            return
        yield chunk


@dataclass
class IngestReport:
    """What an ingest run did, with timings split into reading, embedding and writing."""

    skipped: bool
    counts: dict[str, int]
    seconds: dict[str, float]
    encoded: int = 0
    # Malformed input records left out, each "file:line: what was wrong".
    skipped_records: list[str] = field(default_factory=list)
    # Names shared by entities of different types (kept apart, as two people of one name are), each
    # "'name' (types / types)"; their count is `counts["names_with_several_types"]`.
    names_with_several_types: list[str] = field(default_factory=list)


def entity_text(name: str, description: str) -> str:
    """The text embedded for an entity."""
    return f"{name}. {description}" if description else name


def run_ingest(
    project: Project,
    options: IngestOptions,
    *,
    force: bool = False,
    mode: str | None = None,
    progress: ProgressFactory | None = None,
    settings: Mapping[str, Any] | None = None,
) -> IngestReport:
    """Read, type, embed and store the graph; skip when the same inputs and config are already ingested.

    Other inputs than the graph's are refused (IngestRefused) unless `mode` is "replace" (the graph is replaced)
    or "append" (their records are added to the graph; texts already embedded are reused). The inputs, `mode` and
    `settings` (the command's config overrides) are recorded while the ingest runs, so that after a kill a later
    command names the command that resumes it."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    started = time.time()
    if project.config.embedding.engine == "ray":
        from kgr.embed_ray import require_ray

        require_ray()  # before any work: a missing extra is reported at once
    part_fp = options.fingerprint()
    action, held = _decide(project, options, part_fp, mode, force)
    if action == "skip":
        return IngestReport(skipped=True, counts=project.last_run("ingest").counts, seconds={})
    project.mark_ingest_started(options.command_args(mode, settings))
    try:
        report = _read_and_store(project, options, action, held, part_fp, started, progress)
    except KgrError:
        project.clear_ingest_started()  # refused: rerunning the same command would not resume anything
        raise
    project.clear_ingest_started()
    return report


def _read_and_store(project: Project, options: IngestOptions, action: str, held: list[HeldInput], part_fp: str,
                    started: float, progress: ProgressFactory | None) -> IngestReport:
    """The body of an ingest that runs: read and type the inputs, then embed and commit them (`store_graph`)."""
    from kgr.ingest.sources import passage_links, read_compact

    parts = [*held, HeldInput(part_fp, options.files(), Path(options.schema).name if options.schema else "")]
    if action != "append":
        parts = parts[-1:]
    input_fp = combined_fingerprint([p.fingerprint for p in parts])
    chunk_rows = project.config.embedding.chunk_rows
    graph = read_compact(
        options.paths, fmt=options.fmt, passages=options.passages, schema=options.schema,
        columns=options.columns, delimiter=options.delimiter,
        base=held_graph(project, chunk_rows) if action == "append" else None, chunk_rows=chunk_rows,
    )
    tables = graph_columns(graph, passage_links(TextColumn(graph.names), graph.passages))
    coarse = coarse_typed_entities(graph, project.config.types.max_inferred)
    skipped_records, role_types = graph.skipped, len(graph.inferred_types)
    # an appended graph keeps its held entities' types, so inference over it finds the held kind relations no more
    held_kinds = project.last_run("ingest").counts.get("kind_relations", []) if action == "append" else []
    kinds = sorted(set(graph.kind_relations) | set(held_kinds))
    # The read graph is dropped before the encoder loads and the vectors are written: from here the graph is its
    # Arrow columns, and texts become Python strings a chunk at a time.
    del graph
    release_arrow_memory()
    read_s = time.time() - started
    skipped = {"skipped_records": len(skipped_records)} if skipped_records else None
    inputs = {"part": list(range(len(parts))), "fingerprint": [p.fingerprint for p in parts],
              "files": [json.dumps(p.files) for p in parts], "schema": [p.schema for p in parts]}
    typing = {"coarse_typed": len(coarse), "role_types": role_types} if coarse else {}
    if kinds:
        typing["kind_relations"] = kinds  # their objects name their subjects' types (`store.naming_classes`)
    report = store_graph(project, tables, started=started, input_fingerprint=input_fp, progress=progress,
                         counts_extra={**(skipped or {}), **typing}, extra_tables={INPUTS_TABLE: (inputs, {"part"})},
                         coarse_entities=coarse)
    report.seconds = {"read": round(read_s, 3), **report.seconds}
    report.counts.update({**(skipped or {}), **typing})
    report.skipped_records = skipped_records
    return report


def release_arrow_memory() -> None:
    """Hand the pages Arrow's allocator kept from freed arrays back to the system, so the encoder, LanceDB and DuckDB
    (their own allocators) can have them (1x names graph: ~25 MiB once the read graph is dropped)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def ingest_engine(config, encoder: Encoder):
    """Where an ingest encodes its texts (`embedding.engine`): in this process with `encoder`, or on Ray's workers."""
    if config.embedding.engine == "ray":
        from kgr.embed_ray import RayEngine

        return RayEngine(config, encoder)
    return LocalEngine(encoder)


def store_graph(
    project: Project,
    tables: Mapping[str, Mapping[str, Any]],
    *,
    started: float,
    input_fingerprint: str,
    counts_extra: Mapping[str, Any] | None = None,
    extra_tables: Mapping[str, tuple[Mapping[str, list], Collection[str]]] | None = None,
    reuse_dirs: Sequence[Path] | None = None,
    encoder: Encoder | None = None,
    progress: ProgressFactory | None = None,
    coarse_entities: Sequence[int] = (),
) -> IngestReport:
    """Embed the graph tables into a new vectors generation, then commit tables and the ingest manifest row at once.

    `tables` are `graph_columns(...)` (or `graph_tables(...)`) columns. `extra_tables` maps a further table's name to
    (columns, the names of its integer columns); it is written in the same transaction. Vectors are reused by text
    hash from `reuse_dirs` (default: this project's other vector generations, complete or interrupted) and from the
    embedding checkpoint an interrupted run left, which this run extends as it encodes and removes once it commits.
    Texts are read from the columns, encoded and written `embedding.chunk_rows` rows at a time. `encoder` defaults
    to the configured embedding model; `counts_extra` is added to the manifest counts. Generations other than the new
    one are removed after the commit, so a killed run leaves the previous state current. The entities listed in
    `coarse_entities` are retyped by coarse kinds from their vectors (`retype_coarse`) before the tables are written.
    """
    embed_started = time.time()
    tables = arrow_tables(tables)
    chunk_rows = project.config.embedding.chunk_rows
    gen = project.new_generation(VECTORS_DIR)
    if encoder is None:
        encoder = project_encoder(project.config)
    write_meta(gen, encoder.model_name, encoder.dimension, encoder.vectors_kind)
    if reuse_dirs is None:
        reuse_dirs = [g for g in project.generations(VECTORS_DIR) if g != gen]
    reuse = reusable_vectors(list(reuse_dirs), encoder.model_name, encoder.vectors_kind)
    checkpoint = EmbeddingCheckpoint(project.root, encoder.model_name, encoder.vectors_kind)
    reuse.update(checkpoint.load())
    encoded = 0
    texts_of = {
        "entities": TextColumn(tables["entities"]["text"]),
        "relationships": TextColumn(tables["relationships"]["description"]),
        "passages": TextColumn(passage_texts(tables["passages"])),
    }
    engine = ingest_engine(project.config, encoder)
    # description-less relationships composed from their parts' vectors (the entity table's, written first) are
    # left out of the parts encoded
    composed = ComposedVectors.pending(plain_relationships(tables, chunk_rows)) \
        if project.config.embedding.compose_relationships else None
    parts_of = {name: missing_parts(texts, reuse, engine.part_size, composed if name == "relationships" else None,
                                    chunk_rows)
                for name, texts in texts_of.items()}
    # one stream of every table's parts (an engine that starts workers starts them once); a part's texts are read
    # from the columns when the engine asks for them
    stream = engine.encode_parts(PartTexts([(texts_of[name], part) for name, parts in parts_of.items()
                                            for part in parts]))
    try:
        for name, texts in texts_of.items():
            if name == "relationships" and composed is not None:
                composed = composed_relationships(tables, composed.rows, gen, encoder, reuse)
            tick = progress(f"embedding {name}", len(texts)) if progress and len(texts) else None
            encoded += write_vector_table(gen, name, texts, encoder.dimension, reuse, parts_of[name], stream, tick,
                                          checkpoint, composed if name == "relationships" else None, chunk_rows)
    finally:
        stream.close()  # an engine's workers stop here, also when a table fails
    if coarse_entities:
        tables["entity_types"] = arrow_columns(retype_coarse(tables, gen, encoder, coarse_entities))
    embed_s = time.time() - embed_started
    index_s = build_indexes(gen, tables, project.config.embedding.index_min_rows)

    write_started = time.time()
    counts = {name: len(next(iter(columns.values()))) for name, columns in tables.items()}
    counts["types"] = len(tables["entity_types"]["type"].unique())
    if composed is not None:
        counts["composed_relationships"] = len(composed)
    # texts longer than the model's window: their vectors stand for their beginning only
    truncated = sum(encoder.truncated(texts) for texts in texts_of.values())
    if truncated:
        counts["truncated_texts"] = truncated
    several_types = names_with_several_types(tables, chunk_rows)
    release_arrow_memory()  # its grouping's pages, before DuckDB (its own allocator) writes the tables
    if several_types:
        counts["names_with_several_types"] = len(several_types)
    with project.transaction() as db:
        for name, columns in tables.items():
            write_table(db, name, columns, chunk_rows=chunk_rows)
        for name, (columns, int_columns) in (extra_tables or {}).items():
            write_table(db, name, columns, int_columns, chunk_rows)
        project.record_stage(
            "ingest", started=started, input_fingerprint=input_fingerprint, upstream={},
            counts={**counts, "embedding_model": encoder.model_name, "embedding_backend": encoder.vectors_kind,
                    "dimension": encoder.dimension,
                    **(counts_extra or {})},
            artifacts={"vectors": gen},
        )
    project.prune_generations(VECTORS_DIR, keep=gen)
    PhraseCache(project.root / PHRASES_DIR, encoder).clear()  # made for the graph just replaced
    checkpoint.clear()
    write_s = time.time() - write_started
    return IngestReport(
        skipped=False, counts=counts, encoded=encoded, names_with_several_types=several_types,
        seconds={"embed": round(embed_s, 3), **({"index": round(index_s, 3)} if index_s else {}),
                 "write": round(write_s, 3),
                 "encoder": round(engine.encode_seconds, 3), "total": round(time.time() - started, 3)},
    )


class DescribedColumn:
    """The relationships' description column, made when rows are asked for: the input's description, else
    `default_description` of the ends' names and the label. Read as an Arrow string array is (`len`, `slice`,
    `take`, an index, `to_pylist`), so the largest column of a names-only graph is never held whole (10x: ~440 MiB)."""

    def __init__(self, raw, names, labels: Sequence[str], src, dst, relation):
        """`raw`: the input's descriptions ("" where none), an Arrow array (not chunked: a take from a chunked one
        would combine its chunks each time); `names`: the entities' names by eid; the rest as `CompactGraph`'s."""
        self.raw, self.names, self.labels = raw, names, labels
        self.src, self.dst, self.relation = src, dst, relation

    @property
    def type(self):
        import pyarrow as pa

        return pa.large_string()

    def __len__(self) -> int:
        return len(self.src)

    def _made(self, texts: list[str], src, dst, relation):
        """The descriptions of rows whose given texts and ids these are, as a large_string array."""
        import pyarrow as pa

        heads = self.names.take(pa.array(src)).to_pylist()
        tails = self.names.take(pa.array(dst)).to_pylist()
        labels = self.labels
        return pa.array([text or default_description(head, labels[r], tail)
                         for text, head, r, tail in zip(texts, heads, relation.tolist(), tails)],
                        type=pa.large_string())

    def slice(self, start: int, length: int | None = None):
        """Rows start..start+length as an Arrow array."""
        stop = len(self) if length is None else min(start + length, len(self))
        start = min(start, stop)
        return self._made(self.raw.slice(start, stop - start).to_pylist(), self.src[start:stop], self.dst[start:stop],
                          self.relation[start:stop])

    def take(self, indices):
        """The rows `indices` as an Arrow array."""
        import numpy as np
        import pyarrow as pa

        rows = np.asarray(indices.to_numpy() if isinstance(indices, pa.Array) else indices, dtype=np.int64)
        return self._made(self.raw.take(pa.array(rows)).to_pylist(), self.src[rows], self.dst[rows],
                          self.relation[rows])

    def __getitem__(self, index: int):
        return self.slice(index, 1)[0]

    def to_pylist(self) -> list[str]:
        return self.slice(0).to_pylist()


class PartTexts(SequenceABC):
    """The texts of each part an engine encodes, made from their column when the part is asked for."""

    def __init__(self, parts: Sequence[tuple[TextColumn, Sequence[int]]]):
        self.parts = parts

    def __len__(self) -> int:
        return len(self.parts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.parts)))]
        column, rows = self.parts[index]
        return column.take(rows)


def passage_texts(passages: Mapping[str, Any]):
    """The text embedded for each passage, "title. text", as an Arrow column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    title, text = arrow_column(passages["title"], False), arrow_column(passages["text"], False)
    return pc.binary_join_element_wise(title, text, pa.scalar(". ", title.type))


def build_indexes(gen: Path, tables: Mapping[str, Mapping[str, Any]], min_rows: int) -> float:
    """Give each vector table of at least `min_rows` rows (0: none) its ANN index; return the seconds spent."""
    sizes = {"entities": len(tables["entities"]["eid"]), "relationships": len(tables["relationships"]["rid"]),
             "passages": len(tables["passages"]["pid"])}
    built = [build_vector_index(gen, name) for name, rows in sizes.items() if min_rows and rows >= min_rows]
    return sum(params["seconds"] for params in built)


def plain_relationships(tables: Mapping[str, Mapping[str, Any]], chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
    """The ids of the relationships without a description of their own: their text is `default_description`'s."""
    import numpy as np

    columns = arrow_tables({"entities": tables["entities"], "relationships": tables["relationships"]})
    names, relationships = columns["entities"]["name"], columns["relationships"]
    found = []
    for start in range(0, len(relationships["rid"]), chunk_rows):
        subjects, relations, objects, texts = (
            names.take(relationships["src"].slice(start, chunk_rows)).to_pylist(),
            relationships["relation"].slice(start, chunk_rows).to_pylist(),
            names.take(relationships["dst"].slice(start, chunk_rows)).to_pylist(),
            relationships["description"].slice(start, chunk_rows).to_pylist())
        found.append(start + np.flatnonzero([text == default_description(s, r, d)
                                             for s, r, d, text in zip(subjects, relations, objects, texts)]))
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def composed_relationships(tables: Mapping[str, Mapping[str, Any]], rows: Sequence[int] | np.ndarray, gen: Path,
                           encoder: Encoder, reuse: Mapping[str, np.ndarray]) -> ComposedVectors:
    """The vectors of the relationships `rows` (`plain_relationships`), composed from the vectors of their subject's
    name, relation words and object's name.

    Entity vectors are read from `gen` (written just before) where an entity's text is its name; other names (of
    described entities) and the relation words are encoded, once per distinct string."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = arrow_tables(tables)
    names, entity_texts = tables["entities"]["name"].to_pylist(), tables["entities"]["text"].to_pylist()
    relationships = tables["relationships"]
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return ComposedVectors.pending([])
    # labels numbered in order of first use (Arrow's dictionary encoding keeps it)
    encoded_labels = pc.dictionary_encode(relationships["relation"].take(pa.array(rows)))
    labels = encoded_labels.dictionary.to_pylist()
    words = [relation_words(label) for label in labels]
    src = np.asarray(relationships["src"], dtype=np.int64)[rows]
    dst = np.asarray(relationships["dst"], dtype=np.int64)[rows]
    label = np.asarray(encoded_labels.indices, dtype=np.int64)
    # parts: every entity's name (rows 0..n-1), then the distinct relation words
    part_vectors = np.concatenate([load_vectors(gen, "entities", np.float16),
                                   encoder.encode(words).astype(np.float16)])
    used = np.unique(np.concatenate([src, dst]))
    renamed = [int(e) for e in used if entity_texts[e] != names[e]]
    if renamed:
        distinct = list(dict.fromkeys(names[e] for e in renamed))
        fresh = [n for n in distinct if text_hash(n) not in reuse]
        found = dict(zip(fresh, encoder.encode(fresh)))
        part_vectors[renamed] = [found[names[e]] if names[e] in found else reuse[text_hash(names[e])]
                                 for e in renamed]
    weights = np.zeros(len(part_vectors), dtype=np.float32)
    weights[used] = encoder.token_counts([names[e] for e in used])
    weights[len(names):] = encoder.token_counts(words)
    parts = np.stack([src, label + len(names), dst], axis=1)
    return ComposedVectors(np.asarray(rows), parts, part_vectors, np.maximum(weights, 1))


def names_with_several_types(tables: Mapping[str, Mapping[str, Any]], chunk_rows: int = CHUNK_ROWS) -> list[str]:
    """The names (whitespace collapsed) that entities of different types share, each "'name' (types / types)".

    Inputs that key entities by id may give one name to several of them; kgr keeps them apart, which is right for
    two people of one name and wrong for one entity typed twice, so an ingest reports them. Each entity's sorted types
    become one number and the names are grouped by Arrow, so only the names reported are held as Python objects."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = arrow_tables({"entities": tables["entities"], "entity_types": tables["entity_types"]})
    entities, typed = tables["entities"], tables["entity_types"]
    eids = np.asarray(entities["eid"], dtype=np.int64)
    # each entity's sorted type names as one number: 0 untyped, else one per distinct sorted tuple
    encoded = pc.dictionary_encode(typed["type"])
    type_names = encoded.dictionary.to_pylist()
    rank = np.empty(len(type_names), dtype=np.int64)
    rank[sorted(range(len(type_names)), key=type_names.__getitem__)] = np.arange(len(type_names))
    by_rank = sorted(type_names)
    type_eids = np.asarray(typed["eid"], dtype=np.int64)
    ranks = rank[np.asarray(encoded.indices, dtype=np.int64)]
    order = np.lexsort((ranks, type_eids))
    type_eids, ranks = type_eids[order], ranks[order]
    signature = np.zeros(int(max(eids.max(initial=-1), type_eids.max(initial=-1))) + 1, dtype=np.int64)
    kinds: dict[tuple[str, ...], int] = {(): 0}
    starts = np.flatnonzero(np.diff(type_eids, prepend=-1)) if len(type_eids) else np.zeros(0, dtype=np.int64)
    for eid, first, last in zip(type_eids[starts].tolist(), starts.tolist(), [*starts[1:].tolist(), len(ranks)]):
        signature[eid] = kinds.setdefault(tuple(by_rank[r] for r in ranks[first:last].tolist()), len(kinds))
    of_entity = signature[eids]
    del type_eids, ranks, order, signature

    def collapsed(start: int, stop: int) -> list[str]:
        return [" ".join(name.split()) for name in entities["name"].slice(start, stop - start).to_pylist()]

    names = built_strings(len(eids), collapsed, chunk_rows)
    counted = pa.table({"name": names, "kind": of_entity}).group_by("name", use_threads=False).aggregate(
        [("kind", "count_distinct")])
    several = set(counted.filter(pc.greater(counted["kind_count_distinct"], 1))["name"].to_pylist())
    if not several:
        return []
    tuples = list(kinds)
    shared: dict[str, set[tuple[str, ...]]] = {}  # in order of each name's first entity
    for start in range(0, len(eids), chunk_rows):
        for name, kind in zip(names.slice(start, chunk_rows).to_pylist(), of_entity[start:start + chunk_rows].tolist()):
            if name in several:
                shared.setdefault(name, set()).add(tuples[kind])
    return [f"{name!r} ({' / '.join(', '.join(each) or 'untyped' for each in sorted(found))})"
            for name, found in shared.items()]


def coarse_typed_entities(graph: CompactGraph, max_inferred: int) -> list[int]:
    """The entity ids to type by coarse kinds: those typed only by inference, when inference gave too many types."""
    if len(graph.inferred_types) <= max_inferred:
        return []
    inferred = set(graph.inferred_types)
    # role types are all inferred ones (typing by a schema infers none): only the input's types can fall outside
    return [eid for eid, types in enumerate(graph.types) if set(types) <= inferred]


def retype_coarse(tables: Mapping[str, Mapping[str, Any]], gen: Path, encoder: Encoder,
                  eids: Sequence[int]) -> dict[str, list]:
    """The entity_types columns with `eids` given one coarse kind each, from the vectors just written to `gen`."""
    import numpy as np

    from kgr.ingest.types import COARSE_KINDS, coarse_kinds

    tables = arrow_tables(tables)
    relationships = tables["relationships"]
    kinds = coarse_kinds(
        tables["entities"]["name"].to_pylist(), load_vectors(gen, "entities"),
        np.asarray(relationships["src"], dtype=np.int64), np.asarray(relationships["dst"], dtype=np.int64),
        load_vectors(gen, "relationships"), np.asarray(encoder.encode(list(COARSE_KINDS.values())), dtype=np.float32),
    )
    retyped = set(eids)
    types = tables["entity_types"]
    kept = [(e, t) for e, t in zip(types["eid"].to_pylist(), types["type"].to_pylist()) if e not in retyped]
    rows = sorted(kept + [(e, kinds[e]) for e in eids], key=lambda row: row[0])
    return {"eid": [e for e, _ in rows], "type": [t for _, t in rows]}


def graph_columns(graph: Graph | CompactGraph, links: Sequence[tuple[int | str, int]],
                  chunk_rows: int = CHUNK_ROWS) -> dict[str, dict[str, Any]]:
    """Arrow columns for every graph table, with dense integer ids; a relationship without a description gets
    `default_description`'s sentence (made `chunk_rows` rows at a time).

    `links` pairs entities (eids; keys for a `Graph`) with passage indexes. A Graph of objects is first turned into
    its columns (`CompactGraph.from_graph`)."""
    import numpy as np
    import pyarrow as pa

    if isinstance(graph, Graph):
        eid = {key: index for index, key in enumerate(graph.entities)}
        links = [(eid[key], pid) for key, pid in links]
        graph = CompactGraph.from_graph(graph)

    def ids(count: int):
        return arrow_column(np.arange(count, dtype=np.int32), integer=True)

    def ints(values: Iterable[int]):
        return arrow_column(list(values), integer=True)

    def strings(values: Iterable[str]):
        return arrow_column(list(values), integer=False)

    def embedded(start: int, stop: int) -> list[str]:
        """Entities' texts."""
        return [entity_text(name, description) for name, description in
                zip(graph.names.slice(start, stop - start).to_pylist(),
                    graph.descriptions.slice(start, stop - start).to_pylist())]

    type_eids, type_names = graph.type_rows()
    relationship_sources = sorted(graph.relationship_sources.items())
    entity_sources = sorted(graph.entity_sources.items())
    return {
        "entities": {
            "eid": ids(len(graph)), "key": graph.keys, "name": graph.names, "description": graph.descriptions,
            "text": built_strings(len(graph), embedded, chunk_rows),
        },
        "entity_types": {"eid": ints(type_eids), "type": strings(type_names)},
        "relationships": {
            # the int32 id columns are shared with the read graph, not copied
            "rid": ids(len(graph.src)), "src": arrow_column(graph.src, integer=True),
            "dst": arrow_column(graph.dst, integer=True),
            "relation": pa.array(graph.labels, type=pa.large_string()).take(pa.array(graph.relation)),
            "description": DescribedColumn(graph.edge_descriptions, graph.names, graph.labels, graph.src,
                                           graph.dst, graph.relation),
        },
        "passages": {
            "pid": ids(len(graph.passages)), "key": strings(p.key for p in graph.passages),
            "title": strings(p.title for p in graph.passages), "text": strings(p.text for p in graph.passages),
        },
        "entity_passages": {"eid": ints(eid for eid, _ in links), "pid": ints(pid for _, pid in links)},
        # Provenance: the passages each relationship and entity was extracted from.
        "relationship_passages": {
            "rid": ints(rid for rid, sources in relationship_sources for _ in sources),
            "pid": ints(pid for _, sources in relationship_sources for pid in sources),
        },
        "entity_source_passages": {
            "eid": ints(eid for eid, sources in entity_sources for _ in sources),
            "pid": ints(pid for _, sources in entity_sources for pid in sources),
        },
    }


def built_strings(count: int, make: Callable[[int, int], list[str]], chunk_rows: int = CHUNK_ROWS):
    """A large_string column of `count` rows whose rows start..stop are `make(start, stop)`, made twice a chunk at a
    time (their lengths, then their bytes into the column's one buffer): chunks combined would hold it twice."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = np.zeros(count + 1, dtype=np.int64)
    for start in range(0, count, chunk_rows):
        lengths = pc.binary_length(pa.array(make(start, min(start + chunk_rows, count)), type=pa.large_string()))
        offsets[start + 1:start + 1 + len(lengths)] = lengths.to_numpy()
    np.cumsum(offsets, out=offsets)
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    for start in range(0, count, chunk_rows):
        made = pa.array(make(start, min(start + chunk_rows, count)), type=pa.large_string())
        ends = np.frombuffer(made.buffers()[1], dtype=np.int64)[made.offset:made.offset + len(made) + 1]
        size = int(ends[-1] - ends[0])
        data[offsets[start]:offsets[start] + size] = np.frombuffer(made.buffers()[2] or b"", dtype=np.uint8,
                                                                   count=size, offset=int(ends[0]))
    return pa.LargeStringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data))


def graph_tables(graph: Graph, links: list[tuple[str, int]]) -> dict[str, dict[str, list]]:
    """Column lists for every graph table (`graph_columns` as Python lists)."""
    return {name: {column: values.to_pylist() for column, values in columns.items()}
            for name, columns in graph_columns(graph, links).items()}


# The integer columns of the graph tables; every other column is a string.
GRAPH_INT_COLUMNS = frozenset({"eid", "rid", "pid", "src", "dst"})


def arrow_column(values, integer: bool):
    """One column as an Arrow array: INTEGER columns int32, the rest strings (64-bit offsets: a column of long texts
    may pass 2 GiB); an Arrow array (or a `DescribedColumn`, made when read) is kept as it is."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, (pa.Array, DescribedColumn)):
        return values
    return pa.array(values, type=pa.int32() if integer else pa.large_string())


def arrow_columns(columns: Mapping[str, Any], int_columns: Collection[str] = GRAPH_INT_COLUMNS) -> dict[str, Any]:
    """A table's columns (lists or Arrow arrays) as Arrow arrays (`arrow_column`)."""
    return {name: arrow_column(values, name in int_columns) for name, values in columns.items()}


def arrow_tables(tables: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Graph tables (`graph_columns` or `graph_tables`) as Arrow columns."""
    return {name: arrow_columns(columns) for name, columns in tables.items()}


def write_table(db, name: str, columns: Mapping[str, Any], int_columns: Collection[str] = GRAPH_INT_COLUMNS,
                chunk_rows: int = CHUNK_ROWS) -> None:
    """Create or replace a DuckDB table from columns (lists, Arrow arrays or a `DescribedColumn`) in one bulk Arrow
    insert, streamed to DuckDB `chunk_rows` rows at a time (a column made on demand is made a chunk at a time):
    `int_columns` as INTEGER, the rest as VARCHAR."""
    import pyarrow as pa

    columns = arrow_columns(columns, int_columns)
    count = len(next(iter(columns.values())))
    schema = pa.schema([(column, values.type) for column, values in columns.items()])
    chunks = (pa.record_batch([values.slice(start, chunk_rows) for values in columns.values()], schema=schema)
              for start in range(0, count, chunk_rows))
    db.register("_incoming", pa.RecordBatchReader.from_batches(schema, chunks))
    try:
        db.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _incoming")
    finally:
        db.unregister("_incoming")
