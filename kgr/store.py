"""The ingested graph held in memory as numpy arrays, the form retrieval works on."""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from kgr.columns import TextColumn
from kgr.embed import Encoder, PhraseCache, VectorIndex, load_vectors
from kgr.errors import KgrError
from kgr.graph import inverse_base, normalize_name, relation_words
from kgr.lexicon import DATE_SPELLING, NAME_WORD
from kgr.objectstore import ObjectFolder, location
from kgr.project import PHRASES_DIR, Project
from kgr.ranking import top_k


@dataclass(frozen=True)
class MentionMatch:
    """The entities a mention names: exactly (similarity 1), loosely (cosine at least the floor), or none.

    `nearest` and `similarity` are the best-scoring entity and its cosine even when it fell below the floor, so an
    unmatched mention can say what it was not taken for.
    """

    mention: str
    eids: tuple[int, ...]
    exact: bool
    nearest: str
    similarity: float
    floor: float

    @property
    def matched(self) -> bool:
        return bool(self.eids)

    @property
    def warning(self) -> str | None:
        """What a reader of the result must know about this match (None for an exact one)."""
        if self.exact:
            return None
        if self.eids:
            return f"mention {self.mention!r} matched entity {self.nearest!r} loosely (cosine {self.similarity:.2f})"
        if not self.nearest:
            return f"mention {self.mention!r} matches no entity: the graph has none; it anchors nothing"
        return (f"mention {self.mention!r} matches no entity: no name is spelled so, and the nearest,"
                f" {self.nearest!r}, is at cosine {self.similarity:.2f} < anchors.min_similarity {self.floor:g};"
                f" it anchors nothing")


class HalfVectors:
    """A float16 matrix read as the float32 one: rows are gathered, then cast (exactly: every float16 value is a
    float32 value), so what is computed from them (`rows @ question`, `questions @ rows.T`) is what the float32
    matrix's rows give, bit for bit."""

    def __init__(self, matrix: np.ndarray):
        self.matrix = matrix

    @property
    def shape(self) -> tuple[int, ...]:
        return self.matrix.shape

    def __len__(self) -> int:
        return len(self.matrix)

    def __getitem__(self, rows) -> np.ndarray:
        return np.ascontiguousarray(self.matrix[rows], dtype=np.float32)

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        """The whole matrix times `other`, as the float32 matrix gives it (a float32 copy for the call)."""
        return self.matrix.astype(np.float32) @ other


NAMING_SHARE = 0.8  # a relation names a type when this share of its objects are of the type
# Per (type, relation): the relation's distinct objects of the type, kept where they are NAMING_SHARE of all of them.
_NAMING_LABELS = """
WITH objects AS (SELECT DISTINCT relation, dst FROM relationships),
     totals AS (SELECT relation, count(*) AS n FROM objects GROUP BY relation)
SELECT t.type, o.relation
FROM objects o JOIN entity_types t ON t.eid = o.dst JOIN totals USING (relation)
GROUP BY t.type, o.relation, totals.n
HAVING count(*) >= ? * totals.n
ORDER BY t.type, o.relation
"""


def naming_labels(db) -> dict[str, list[str]]:
    """Per type, the relation labels that name its members: those at least `NAMING_SHARE` of whose distinct objects
    are of the type. A relation names its object (`adjacent station` names stations, `country` countries; a
    schema-less graph's station type is otherwise `located_in:subject`, which no word names); its subject has no name
    in the graph, and an `_inverse` twin names nothing (its words are its base relation's, which name the twin's
    subjects: `is_in_country_inverse` runs from a country to a club). `db`: the project's DuckDB connection."""
    named: dict[str, list[str]] = {}
    for type_name, relation in db.execute(_NAMING_LABELS, [NAMING_SHARE]).fetchall():
        if inverse_base(relation_words(relation)) is None:
            named.setdefault(type_name, []).append(relation)
    return named


# Per (type, class): the classes a relation stating kinds gives its subjects (`instance of` -> `painting`), kept where
# NAMING_SHARE of the class's subjects are of the type.
_NAMING_CLASSES = """
WITH stated AS (SELECT DISTINCT src, dst FROM relationships WHERE list_contains(?, relation)),
     members AS (SELECT dst, count(*) AS n FROM stated GROUP BY dst)
SELECT t.type, e.name
FROM stated s JOIN entity_types t ON t.eid = s.src JOIN members m USING (dst) JOIN entities e ON e.eid = s.dst
GROUP BY t.type, s.dst, e.name, m.n
HAVING count(*) >= ? * m.n
ORDER BY t.type, count(*) DESC, e.name
"""


def naming_classes(db, kind_relations: Sequence[str]) -> dict[str, list[str]]:
    """Per type, the names of the classes its members are stated to be of (most members first): the objects of a
    relation stating kinds (`kind_relations`, found at ingest: `types.infer_types`) at least `NAMING_SHARE` of whose
    subjects are of the type. An artwork type inferred as `completed-in:subject` is nameless to "which sculptures";
    its members' `instance-of` classes (`painting`, `sculpture`) name it."""
    named: dict[str, list[str]] = {}
    if kind_relations:
        for type_name, name in db.execute(_NAMING_CLASSES, [list(kind_relations), NAMING_SHARE]).fetchall():
            named.setdefault(type_name, []).append(name)
    return named


DATE_SAMPLE = 1_000  # members per type whose names `GraphStore.date_types` reads: a share, not a census
CENTROID_CHUNK = 65_536  # member vectors summed at a time by `GraphStore.type_centroids` (100 MB at 384 floats)
# The GraphStore attribute holding each vector table as a matrix.
VECTOR_MATRICES = {"entities": "entity_vectors", "relationships": "relationship_vectors", "passages": "passage_vectors"}


class GraphStore:
    """Entities, types, relationships, passages and their vectors, indexed by dense ids."""

    def __init__(self, project: Project, encoder: Encoder | None = None):
        """`encoder` shares an already loaded model (it must be the one the vectors were made with)."""
        started = time.perf_counter()
        self.root = project.root
        run = project.require("ingest")
        db = project.db
        self.vectors_dir: Path | ObjectFolder = location(project.root, run.artifacts["vectors"])
        if isinstance(self.vectors_dir, ObjectFolder):
            self.vectors_dir.check()  # an unreachable store fails here in one line, not amid a question
        self.model_name: str = run.counts.get("embedding_model", project.config.embedding.model)
        self.kind_relations: list[str] = run.counts.get("kind_relations", [])  # `types.infer_types`
        # the backend and quantization that made the vectors (`Encoder.vectors_kind`; projects from before: torch)
        self.vectors_kind: str = run.counts.get("embedding_backend", "torch")
        if encoder is not None and encoder.model_name != self.model_name:
            raise KgrError(f"{project.root}: vectors were made with {self.model_name!r}, not {encoder.model_name!r}")
        if encoder is not None and encoder.vectors_kind != self.vectors_kind:
            raise KgrError(f"{project.root}: vectors were made by a {self.vectors_kind} encoder, not "
                           f"{encoder.vectors_kind}")
        self._encoder = encoder
        self._embedding = project.config.embedding
        self.names: list[str] = [r[0] for r in db.execute("SELECT name FROM entities ORDER BY eid").fetchall()]
        type_rows = db.execute("SELECT eid, type FROM entity_types ORDER BY eid, type").fetchall()
        self.type_names: list[str] = sorted({t for _, t in type_rows})
        type_index = {name: i for i, name in enumerate(self.type_names)}
        type_eids = np.fromiter((e for e, _ in type_rows), dtype=np.int64, count=len(type_rows))
        self.type_ids = np.fromiter((type_index[t] for _, t in type_rows), dtype=np.int32, count=len(type_rows))
        self.type_indptr = np.zeros(len(self.names) + 1, dtype=np.int64)
        np.add.at(self.type_indptr, type_eids + 1, 1)
        np.cumsum(self.type_indptr, out=self.type_indptr)
        rel = db.execute("SELECT src, dst, relation FROM relationships ORDER BY rid").fetchnumpy()
        self.src = np.asarray(rel["src"], dtype=np.int32)
        self.dst = np.asarray(rel["dst"], dtype=np.int32)
        self.relation_labels: list[str] = sorted(set(rel["relation"].tolist())) if len(self.src) else []
        label_index = {label: i for i, label in enumerate(self.relation_labels)}
        self.relation_ids = np.fromiter((label_index[r] for r in rel["relation"]), dtype=np.int32, count=len(self.src))
        self._db = db
        self._vector_indexes: dict[str, VectorIndex | None] = {}
        self.load_seconds = time.perf_counter() - started

    @cached_property
    def relationship_texts(self) -> TextColumn:
        """Relationship texts by rid, held as one Arrow string column (read from DuckDB without a Python string each)."""
        return self._text_column("SELECT description FROM relationships ORDER BY rid")

    def _text_column(self, query: str) -> TextColumn:
        return TextColumn(self._db.sql(query).to_arrow_table().column(0))

    @cached_property
    def entity_vectors(self) -> np.ndarray:
        return self._matrix("entities")

    @cached_property
    def relationship_vectors(self) -> np.ndarray:
        return self._matrix("relationships")

    @cached_property
    def passage_vectors(self) -> np.ndarray:
        return self._matrix("passages")

    def _matrix(self, table: str) -> np.ndarray | HalfVectors:
        """A vector table as a float32 matrix, or as `HalfVectors` (float16 as stored: half the memory) when the table
        has an ANN index: searches of a whole indexed table go through the index (`nearest`), and its matrix serves
        the rows of neighbourhoods."""
        if self._vector_index(table) is None:
            return load_vectors(self.vectors_dir, table)
        return HalfVectors(load_vectors(self.vectors_dir, table, np.float16))

    def nearest(self, table: str, vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the k rows of a vector table ("entities", "relationships", "passages") most like `vector`, best
        first, and their cosines: through the table's ANN index where ingest built one (`embedding.index_min_rows`),
        else by an exact scan."""
        index = self._vector_index(table)
        if index is not None:
            return index.search(vector, k)
        scores = getattr(self, VECTOR_MATRICES[table]) @ vector
        ids = top_k(scores, k)
        return ids, scores[ids]

    def has_index(self, table: str) -> bool:
        """Whether searches of `table` go through an ANN index (`nearest`)."""
        return self._vector_index(table) is not None

    def _vector_index(self, table: str) -> VectorIndex | None:
        if table not in self._vector_indexes:
            self._vector_indexes[table] = VectorIndex.open(self.vectors_dir, table)
        return self._vector_indexes[table]

    @cached_property
    def passages(self) -> list[tuple[str, str]]:
        return [(t, x) for t, x in self._db.execute("SELECT title, text FROM passages ORDER BY pid").fetchall()]

    @cached_property
    def entity_passages(self) -> dict[int, list[int]]:
        return self._links("entity_passages", "eid")

    def _links(self, table: str, column: str) -> dict[int, list[int]]:
        """`column` id -> passage ids from a link table (provenance tables are absent from older projects)."""
        present = self._db.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                                   [table]).fetchone()[0]
        linked: dict[int, list[int]] = {}
        if present:
            for key, pid in self._db.execute(f"SELECT {column}, pid FROM {table} ORDER BY {column}, pid").fetchall():
                linked.setdefault(key, []).append(pid)
        return linked

    @cached_property
    def relationship_passages(self) -> dict[int, list[int]]:
        """Provenance: rid -> the passages the relationship was extracted from."""
        return self._links("relationship_passages", "rid")

    @cached_property
    def entity_source_passages(self) -> dict[int, list[int]]:
        """Provenance: eid -> the passages the entity was extracted from (title links are `entity_passages`)."""
        return self._links("entity_source_passages", "eid")

    @cached_property
    def encoder(self) -> Encoder:
        if self._encoder is not None:
            return self._encoder
        # queried as they were made: the backend and quantization the ingest recorded, whatever the settings say now
        backend, _, quantize = self.vectors_kind.partition("-")
        precision = self._embedding.precision if backend == "torch" else "float32"
        return Encoder(self.model_name, self._embedding.batch_size, self._embedding.threads, precision, backend,
                       quantize or "none")

    @cached_property
    def phrases(self) -> PhraseCache:
        """The project's phrase cache for this store's encoder: vectors of long lists of the graph's phrases."""
        return PhraseCache(self.root / PHRASES_DIR, self.encoder)

    @cached_property
    def name_index(self) -> dict[str, list[int]]:
        """Normalized name to entity ids (names need not be unique)."""
        index: dict[str, list[int]] = {}
        for eid, name in enumerate(self.names):
            index.setdefault(normalize_name(name), []).append(eid)
        return index

    def find(self, name: str) -> list[int]:
        """Entities named `name`: exact spellings if any, else case- and space-insensitive matches."""
        matches = self.name_index.get(normalize_name(name), [])
        return [e for e in matches if self.names[e] == name] or matches

    def match_mention(self, mention: str, floor: float, k: int = 1) -> MentionMatch:
        """The entities `mention` names: exact spellings (see `find`), else up to k whose vectors are at least
        `floor` alike the mention's (cosine), else none; never the nearest look-alikes below the floor."""
        exact = self.find(mention)
        if exact:
            return MentionMatch(mention, tuple(exact), True, self.names[exact[0]], 1.0, floor)
        if not self.num_entities or k <= 0:
            return MentionMatch(mention, (), False, "", 0.0, floor)

        best, similarities = self.nearest("entities", self.encoder.encode_query(mention), k)
        kept = tuple(int(e) for e, similarity in zip(best, similarities) if similarity >= floor)
        return MentionMatch(mention, kept, False, self.names[int(best[0])], float(similarities[0]), floor)

    @cached_property
    def _word_postings(self) -> tuple[list[str], dict[str, list[int]]]:
        """The texts a name's specificity is counted over, as padded lowercase word strings (the passages, else the
        relationship texts: where names occur in this graph), and word -> ids of the texts holding it."""
        texts = self.passages if self.passages else [(text,) for text in self.relationship_texts]
        padded, postings = [], {}
        for i, parts in enumerate(texts):
            words = [NAME_WORD.findall(part.casefold()) for part in parts]
            padded.append(f" {' | '.join(' '.join(w) for w in words)} ")  # no phrase runs from a title into its text
            for word in {w for part in words for w in part}:
                postings.setdefault(word, []).append(i)
        return padded, postings

    def warm_specificity(self) -> None:
        """Build the word postings `specificity` counts over now (a pass over every passage or relationship text)."""
        _ = self._word_postings

    def specificity(self, name: str) -> float:
        """How specific a name is in this graph, in [0, 1]: its inverse document frequency over the passages (else the
        relationship texts), log((N + 1) / (df + 1)) / log(N + 1), df the texts holding the name as whole words.

        An LLM-built graph has entities for common words ("country", "first"); found as spans in a question they
        look like anchors, but their passages and edges say nothing about it. A name in one passage of 1,890 scores
        0.91, "country" (199 passages) 0.30.
        """
        padded, postings = self._word_postings
        words = NAME_WORD.findall(name.casefold())
        if not words or not padded:
            return 1.0
        lists = sorted((postings.get(w, []) for w in set(words)), key=len)
        phrase = f" {' '.join(words)} "
        df = sum(1 for i in lists[0] if phrase in padded[i]) if lists[0] else 0
        return math.log((len(padded) + 1) / (df + 1)) / math.log(len(padded) + 1)

    @property
    def num_entities(self) -> int:
        return len(self.names)

    def types_of(self, eid: int) -> list[str]:
        return [self.type_names[t] for t in self.type_ids[self.type_indptr[eid]:self.type_indptr[eid + 1]]]

    @cached_property
    def type_centroids(self) -> np.ndarray:
        """Per type (in `type_names` order), the normalized mean of its members' entity vectors: what a type looks like
        to the encoder, which a question word can match where the type's name says nothing (a schema-less
        `located_in:object` holding countries is 0.81 from "country", its cities' type 0.57)."""
        centroids = np.zeros((len(self.type_names), self.entity_vectors.shape[1]), dtype=np.float32)
        for t, rows in self._type_members():
            for first in range(0, len(rows), CENTROID_CHUNK):  # a bounded copy of the members' vectors at a time
                centroids[t] += self.entity_vectors[rows[first:first + CENTROID_CHUNK]].sum(axis=0)
        norms = np.linalg.norm(centroids, axis=1, keepdims=True)
        return centroids / np.where(norms > 0, norms, 1.0)

    @cached_property
    def date_types(self) -> np.ndarray:
        """Per type (in `type_names` order), whether `NAMING_SHARE` of its members' names spell a date
        (`lexicon.DATE_SPELLING`; of `DATE_SAMPLE` evenly spaced members at most): what "when" asks for, which no
        encoder reads off "1887" or a label (`completed-in`)."""
        dated = np.zeros(len(self.type_names), dtype=bool)
        for t, rows in self._type_members():
            sample = rows[np.linspace(0, len(rows) - 1, min(len(rows), DATE_SAMPLE)).astype(np.int64)]
            spelled = sum(1 for eid in sample.tolist() if DATE_SPELLING.match(" ".join(self.names[eid].split())))
            dated[t] = spelled >= NAMING_SHARE * len(sample)
        return dated

    def _type_members(self) -> Iterator[tuple[int, np.ndarray]]:
        """Each type number with members, and its members' eids."""
        members = np.repeat(np.arange(len(self.names)), np.diff(self.type_indptr))
        order = np.argsort(self.type_ids, kind="stable")
        counts = np.bincount(self.type_ids, minlength=len(self.type_names))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        for t in np.flatnonzero(counts).tolist():
            yield t, members[order[starts[t]:starts[t] + counts[t]]]

    @cached_property
    def type_naming_labels(self) -> list[list[str]]:
        """Per type (in `type_names` order), the relation labels that name its members (`naming_labels`)."""
        named = naming_labels(self._db)
        return [named.get(t, []) for t in self.type_names]

    @cached_property
    def type_naming_classes(self) -> list[list[str]]:
        """Per type (in `type_names` order), the names of the classes its members are stated to be of
        (`naming_classes`)."""
        named = naming_classes(self._db, self.kind_relations)
        return [named.get(t, []) for t in self.type_names]

    def relation_of(self, rid: int) -> str:
        return self.relation_labels[self.relation_ids[rid]]

    def triple(self, rid: int) -> tuple[str, str, str]:
        return self.names[self.src[rid]], self.relation_of(rid), self.names[self.dst[rid]]

    def direction(self, rid: int, start: int) -> str:
        """How a walk from entity `start` takes relationship `rid`: "forward" (subject to object) or "backward"."""
        return "forward" if int(self.src[rid]) == start else "backward"

    @cached_property
    def descriptions(self) -> TextColumn:
        """Entity descriptions by eid, read when first asked for (the reach stage never reads them: on a described
        graph they are most of the entity table)."""
        return self._text_column("SELECT description FROM entities ORDER BY eid")

    def warm(self, matrices: Collection[str] | None = None) -> None:
        """Load everything retrieval touches, so per-question latency excludes initialization; of the vector tables,
        only the matrices of `matrices` (None: every table's; a method searching a table through its ANN index alone
        needs none: the 10x relationships' is 3.5 GiB)."""
        tables = [t for t in VECTOR_MATRICES if t != "passages" or self.passages]
        for table in tables if matrices is None else [t for t in tables if t in matrices]:
            getattr(self, VECTOR_MATRICES[table])
        _ = self.relationship_texts, self.name_index
        _ = self.descriptions  # the packed context's entity lines
        if self.passages:
            _ = self.entity_passages, self.relationship_passages, self.entity_source_passages
        self.encoder.encode_query("warm up")

    def adjacency(self) -> dict[int, list[tuple[int, int]]]:
        """Undirected neighbour lists as eid -> [(neighbour, rid)] (for small graphs, tests and gold sets)."""
        neighbours: dict[int, list[tuple[int, int]]] = {}
        for rid, (u, v) in enumerate(zip(self.src.tolist(), self.dst.tolist())):
            neighbours.setdefault(u, []).append((v, rid))
            if u != v:
                neighbours.setdefault(v, []).append((u, rid))
        return neighbours
