"""The retrieval baselines of the DotRAG paper (BM25 and dense vector similarity search, VSS) and dense passages.

Both score every entity (name + description) and every relationship (its description) against the
question's plain text (mention brackets removed), keep the top `baselines.top_entities` entities and
the top `baselines.top_relationships` relationships, and pack them into the same token budget as DotRAG.

Ranking rule (what `record.entities` and the context order are):
  1. The entity hits and relationship hits are merged into one list by score, best first; on a tie
     an entity hit comes before a relationship hit, then lower rank within its own list first.
     VSS scores are cosines on both sides, so they compare directly. BM25 scores of the two indexes
     are on different scales (different corpora, document lengths and IDF), so each list's scores
     are divided by its own best score before merging (both lists then start at 1.0).
  2. Each relationship hit is a one-hop path `[rid]` with its endpoints (subject, object); each
     entity hit that is not an endpoint of any relationship hit is a bare entity line. They are packed
     in merged order by `pack_paths`, which skips items that no longer fit the budget.
  3. `entities` walks the merged list and takes each entity hit at its own rank and each relationship
     hit's subject then object, keeps those present in the packed context, drops repeats and cuts at
     `baselines.top_entities`, so a record never lists more entities than the entity budget; the
     context itself may name more (the endpoints of late relationships).

Trace: `reached` = every candidate entity (entity hits and all endpoints of relationship hits),
`filtered` = candidates packed but beyond the `top_entities` cut, `cut_by_budget` = candidates that
are not in the context because their items did not fit the token budget.
BM25 hits with a score of 0 (no query term in common) are dropped: they are not matches.

Dense passages (`dpr`) is the floor for every passage number (HippoRAG's tables): the cosine of the question
embedding to each stored passage vector (title + text, embedded at ingest), the top `baselines.top_passages`
packed by the same token budget. Its record lists those passages' titles in `passages` and no entities.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, ClassVar, Union

import numpy as np

from kgr.errors import MissingStageError
from kgr.methods.base import Query, RunContext, Stopwatch
from kgr.methods.budget import pack_paths, token_counter
from kgr.methods.records import RetrievalRecord
from kgr.ranking import top_k

if TYPE_CHECKING:
    from kgr.store import GraphStore


# A table's scores for a question: every row's (indexed by row id), or (ids, scores) of some rows only
Hits = Union[np.ndarray, tuple[np.ndarray, np.ndarray]]


class _Baseline:
    """Shared ranking, packing and record building; subclasses supply the entities' and relationships' `Hits`."""

    name: ClassVar[str] = ""
    needs_reach: ClassVar[bool] = False
    normalize_scores: ClassVar[bool] = False  # divide each hit list by its best score before merging

    def __init__(self, context: RunContext):
        self.context = context
        self.store = context.store
        self.config = context.config
        self.top_entities = int(self.config.baselines.top_entities)
        self.top_relationships = int(self.config.baselines.top_relationships)
        self.budget = int(self.config.budget.tokens)
        self.count = token_counter(self.config.budget.encoding)
        self.count("warm up")  # load the tokenizer's encoding now, outside per-question latency

    # -- to implement ----------------------------------------------------------------------------------------
    def score(self, text: str, watch: Stopwatch) -> tuple[Hits, Hits]:
        """The entities' and the relationships' scores for the question text (`Hits`)."""
        raise NotImplementedError

    def keep(self, scores: np.ndarray) -> np.ndarray:
        """Which of the top hits (their scores) count as retrieved: all, by default."""
        return np.ones(len(scores), dtype=bool)

    # -- shared ----------------------------------------------------------------------------------------------
    def retrieve(self, query: Query) -> RetrievalRecord:
        store = self.store
        watch = Stopwatch()
        entity_hits, relationship_hits = self.score(query.plain, watch)
        eids, entity_scores = self._top(entity_hits, self.top_entities)
        rids, relationship_scores = self._top(relationship_hits, self.top_relationships)
        items = self._merge(eids, entity_scores, rids, relationship_scores)
        watch.lap("rank")

        covered = {int(e) for rid in rids for e in (store.src[rid], store.dst[rid])}
        paths: list[list[int]] = []
        endpoints: list[list[int]] = []
        kinds: list[tuple[str, int, float]] = []
        for kind, index, score in items:
            if kind == "relationship":
                paths.append([index])
                endpoints.append([int(store.src[index]), int(store.dst[index])])
            elif index in covered:
                continue  # it enters the context with its relationship
            else:
                paths.append([])
                endpoints.append([index])
            kinds.append((kind, index, score))
        packed = pack_paths(store, paths, self.budget, self.count, endpoints=endpoints)
        watch.lap("pack")

        record_paths = []
        for position in packed.kept_paths:
            kind, index, score = kinds[position]
            if kind == "relationship":
                subject, relation, obj = store.triple(index)
                record_paths.append({"entities": [subject, obj], "relations": [relation], "directions": ["forward"],
                                     "similarities": [round(score, 6)], "score": round(score, 6)})
        # Rank order: entity hits at their own rank, relationship hits contributing subject then object.
        candidates = list(dict.fromkeys(
            e for kind, index, _ in items
            for e in ((index,) if kind == "entity" else (int(store.src[index]), int(store.dst[index])))
        ))
        packed_set = set(packed.eids)
        names = store.names
        ordered = list(dict.fromkeys(names[e] for e in candidates if e in packed_set))  # names need not be unique
        return RetrievalRecord(
            id=query.id,
            question=query.text,
            method=self.name,
            backbone=self.context.backbone,
            entities=ordered[: self.top_entities],
            paths=record_paths,
            context=packed.context,
            context_tokens=packed.tokens,
            latency_ms=watch.total_ms,
            timings_ms=dict(watch.steps),
            trace={
                "reached": list(dict.fromkeys(names[e] for e in candidates)),
                "filtered": ordered[self.top_entities:],
                "cut_by_budget": [n for n in dict.fromkeys(names[e] for e in candidates if e not in packed_set)
                                  if n not in ordered],
                "entity_hits": len(eids),
                "relationship_hits": len(rids),
                "packed_items": len(packed.kept_paths),
                "cut_items": len(packed.cut_paths),
            },
        )

    def _top(self, hits: Hits, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ids and scores of a table's k best hits that `keep` keeps, best first (ties by lower id)."""
        if isinstance(hits, tuple):  # some rows only (an ANN index's hits, ordered by id among equal scores)
            ids, scores = hits
            order = top_k(scores, k)
            ids, scores = ids[order], scores[order]
        else:
            ids = top_k(hits, k)
            scores = hits[ids]
        kept = self.keep(scores)
        return ids[kept], scores[kept]

    def _merge(self, eids, e_scores, rids, r_scores) -> list[tuple[str, int, float]]:
        """Entity and relationship hits in one list by (normalized) score; entity first on ties."""
        e_scores = np.asarray(e_scores, dtype=np.float64)
        r_scores = np.asarray(r_scores, dtype=np.float64)
        e_keys, r_keys = e_scores, r_scores
        if self.normalize_scores:
            e_keys = e_scores / e_scores.max() if e_scores.size and e_scores.max() > 0 else e_scores
            r_keys = r_scores / r_scores.max() if r_scores.size and r_scores.max() > 0 else r_scores
        merged = [(-float(k), 0, rank, "entity", int(i), float(s))
                  for rank, (i, s, k) in enumerate(zip(eids, e_scores, e_keys))]
        merged += [(-float(k), 1, rank, "relationship", int(i), float(s))
                   for rank, (i, s, k) in enumerate(zip(rids, r_scores, r_keys))]
        merged.sort(key=lambda item: item[:3])
        return [(kind, index, score) for _, _, _, kind, index, score in merged]


class BM25(_Baseline):
    """Okapi BM25 (bm25s, Lucene variant, k1=1.5, b=0.75) over entity texts and relationship descriptions.

    Text is lowercased, split into words of two or more characters and stripped of English stopwords by
    bm25s's own tokenizer; one index (and vocabulary) per corpus is built when the method is created.
    """

    name = "bm25"
    normalize_scores = True

    @staticmethod
    def held_matrices(store: GraphStore) -> tuple[str, ...]:
        """No matrix: BM25 reads texts only."""
        return ()

    def __init__(self, context: RunContext):
        super().__init__(context)
        store = self.store
        entity_texts = [f"{n} {d}".strip() for n, d in zip(store.names, store.descriptions)]
        self.entities = _BM25Index(entity_texts)
        self.relationships = _BM25Index(store.relationship_texts)

    def score(self, text: str, watch: Stopwatch) -> tuple[Hits, Hits]:
        entity_scores = self.entities.scores(text)
        relationship_scores = self.relationships.scores(text)
        watch.lap("score")
        return entity_scores, relationship_scores

    def keep(self, scores: np.ndarray) -> np.ndarray:
        return scores > 0


class _BM25Index:
    """One bm25s index with its tokenizer (the vocabulary is the corpus's)."""

    def __init__(self, texts: Sequence[str]):
        import bm25s

        self.size = len(texts)
        self.tokenizer = bm25s.tokenization.Tokenizer(lower=True, stopwords="en")
        self.retriever = None
        if texts:
            tokens = self.tokenizer.tokenize(list(texts), return_as="tuple", show_progress=False)
            self.retriever = bm25s.BM25()
            self.retriever.index(tokens, show_progress=False)
        self.empty_id = self.tokenizer.word_to_id.get("")

    def scores(self, text: str) -> np.ndarray:
        if self.retriever is None:
            return np.zeros(0, dtype=np.float32)
        # update_vocab=False: unknown query words are dropped. A query left with none maps to bm25s's empty
        # token, which matches documents without tokens (names like "R"); that is no match, so drop it.
        ids = self.tokenizer.tokenize([text], update_vocab=False, return_as="ids", show_progress=False)[0]
        ids = [i for i in ids if i != self.empty_id]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self.retriever.get_scores_from_ids(ids), dtype=np.float32)


class VSS(_Baseline):
    """Cosine similarity of the question embedding to the stored entity and relationship vectors."""

    name = "vss"

    @staticmethod
    def held_matrices(store: GraphStore) -> tuple[str, ...]:
        """The tables VSS scans: those without an ANN index (an indexed one is searched through it alone)."""
        return tuple(table for table in ("entities", "relationships") if not store.has_index(table))

    def __init__(self, context: RunContext):
        super().__init__(context)
        store = self.store
        # a table with an ANN index is searched through it for the top hits alone; others are scanned
        self.indexed = {table: store.has_index(table) for table in ("entities", "relationships")}
        self.entity_vectors = None if self.indexed["entities"] else store.entity_vectors
        self.relationship_vectors = None if self.indexed["relationships"] else store.relationship_vectors
        # with both tables indexed, the entities' search runs in a thread beside the relationships'
        self._beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgr-vss") \
            if all(self.indexed.values()) else None
        # load the model now, not inside the first question's latency, and each ANN index with one search (the first
        # search through the 10x relationships' index took 15.7 s)
        warm = store.encoder.encode_query("warm up").astype(np.float32, copy=False)
        for table in (table for table, indexed in self.indexed.items() if indexed):
            store.nearest(table, warm, 1)

    def score(self, text: str, watch: Stopwatch) -> tuple[Hits, Hits]:
        vector = self.store.encoder.encode_query(text).astype(np.float32, copy=False)
        watch.lap("encode")
        entities = self._search("entities", vector)  # first: it may run beside the relationships' search
        relationships = self._search("relationships", vector)
        if isinstance(entities, Future):
            entities = entities.result()
        watch.lap("score")
        return entities, relationships

    def _search(self, table: str, vector: np.ndarray) -> Hits | Future:
        """One table's scores: an indexed table's hits alone (a score per row of 4.87M rows cost 17 ms a question),
        else a score per row. With both tables indexed the entities' search runs beside the relationships' (the two
        index searches of the 10x graph took 86-92 ms one after the other, 77 ms side by side)."""
        vectors, top = ((self.entity_vectors, self.top_entities) if table == "entities"
                        else (self.relationship_vectors, self.top_relationships))
        if not self.indexed[table]:
            return vectors @ vector if len(vectors) else np.zeros(0, np.float32)
        if table == "entities" and self._beside is not None:
            return self._beside.submit(self.store.nearest, table, vector, top)
        return self.store.nearest(table, vector, top)


class DensePassages:
    """Dense passage retrieval: the passages whose vectors are nearest the question's, packed by the token budget."""

    name: ClassVar[str] = "dpr"
    needs_reach: ClassVar[bool] = False

    @staticmethod
    def held_matrices(store: GraphStore) -> tuple[str, ...]:
        """The passages' matrix, unless they are searched through their ANN index."""
        return () if store.has_index("passages") else ("passages",)

    @staticmethod
    def check_store(project, store) -> None:
        """Refuse a project without passages (MissingStageError, exit 4), naming how to add them."""
        if not store.passages:
            raise MissingStageError(f"{project.root}: method dpr needs passages and the project has none; "
                                    "ingest them with `kgr ingest DIR FILE... --passages CORPUS`")

    def __init__(self, context: RunContext):
        self.context = context
        self.store = context.store
        self.check_store(context.project, self.store)
        self.top_passages = int(context.config.baselines.top_passages)
        self.budget = int(context.config.budget.tokens)
        self.count = token_counter(context.config.budget.encoding)
        self.count("warm up")  # load the tokenizer's encoding now, outside per-question latency
        self.store.encoder.encode_query("warm up")  # load the model now, not inside the first question's latency

    def retrieve(self, query: Query) -> RetrievalRecord:
        store = self.store
        watch = Stopwatch()
        vector = store.encoder.encode_query(query.plain).astype(np.float32, copy=False)
        watch.lap("encode")
        found, similarities = self.store.nearest("passages", vector, self.top_passages)
        pids = found.tolist()
        scores = dict(zip(pids, similarities.tolist()))
        watch.lap("score")
        packed = pack_paths(store, [], self.budget, self.count, passages=pids)
        watch.lap("pack")
        kept = set(packed.pids)
        return RetrievalRecord(
            id=query.id,
            question=query.text,
            method=self.name,
            backbone=self.context.backbone,
            context=packed.context,
            context_tokens=packed.tokens,
            passages=[store.passages[p][0] for p in packed.pids],
            latency_ms=watch.total_ms,
            timings_ms=dict(watch.steps),
            trace={
                "passages": [{"pid": p, "title": store.passages[p][0], "score": round(float(scores[p]), 4)}
                             for p in pids],
                "cut_by_budget": [store.passages[p][0] for p in pids if p not in kept],
            },
        )
