"""The graph-side index DotRAG and CS-RAG share: incidence lists, entity-name lookups (`find_names`), relation-label
vectors, the label succession (`follows`) and the passage walk from anchors (`passage_walk`, `walk_evidence`).

Built once per store (`plan_index`) and shared by every method instance over it.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections import Counter
from functools import cached_property
from itertools import islice
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from kgr.embed import TextVectors
from kgr.graph import inverse_base, normalize_name, relation_words
from kgr.lexicon import CHUNK, NON_WORD, PARENTHESIS, WORD, bounded, content_tokens
from kgr.methods.direction import links_siblings
from kgr.methods.offline.decisions import AnchorOption, Policy
from kgr.ranking import top_k
from kgr.reach import csr_entries
from kgr.store import GraphStore, MentionMatch

if TYPE_CHECKING:
    from kgr.config import CsragConfig

class PlanIndex:
    """Incidence lists, name lookups and relation-label vectors of one store (built once, shared)."""

    def __init__(self, store: GraphStore):
        self.store = store
        n = store.num_entities
        src, dst = store.src.astype(np.int64), store.dst.astype(np.int64)
        rids = np.arange(src.size, dtype=np.int64)
        loop = src == dst
        ends = np.concatenate([src, dst[~loop]])
        others = np.concatenate([dst, src[~loop]])
        edge = np.concatenate([rids, rids[~loop]])
        order = np.argsort(ends, kind="stable")
        self.inc_rid = edge[order]
        self.inc_far = others[order]
        self.indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(ends, minlength=n), out=self.indptr[1:])
        self.label_words = [relation_words(label) or label for label in store.relation_labels]
        # which labels a hop's words name word for word: label rows by content word, and each label's word count
        label_tokens = [content_tokens(words) for words in self.label_words]
        rows_by_token: dict[str, list[int]] = {}
        for row, words in enumerate(label_tokens):
            for word in words:
                rows_by_token.setdefault(word, []).append(row)
        self._label_rows_by_token = {word: np.array(rows) for word, rows in rows_by_token.items()}
        self._label_token_counts = np.array([len(words) for words in label_tokens], dtype=np.int64)
        self.max_name_chars = max((len(name) for name in store.names), default=0)
        self._label_vectors: np.ndarray | None = None
        self._label_rows: dict[str, np.ndarray] = {}  # per label words, the labels that have them (`label_rows`)
        self._token_index: dict[str, list[int]] | None = None
        self._follows: dict[tuple[int, float], tuple[np.ndarray, np.ndarray]] = {}  # by (min edges, min share)
        self._follows_rows: dict[tuple[int, float], Any] = {}
        self._titles: dict[str, list[int]] | None = None
        self._name_prefixes: frozenset[str] | None = None
        self._walk = None
        self._lock = threading.Lock()

    def word_vectors(self, words: Sequence[str], text: str, vectors: TextVectors) -> dict[str, np.ndarray]:
        """The vectors of single `words`, those the question's `vectors` lacks encoded in one call with `text` (not
        remembered across questions: what rides with what would then depend on the questions before)."""
        return dict(zip(words, vectors([text, *words])[1:]))

    def called(self, eids) -> list[str]:
        """The words of the relation labels `eids` are objects of, anywhere in the graph, and the names of the classes
        a relation stating kinds gives them (`GraphStore.type_naming_classes`), sorted: what the graph calls them
        (`adjacent station`, `Restaurant`); an `_inverse` twin calls its base relation's subjects nothing."""
        eids = np.asarray(eids, dtype=np.int64)
        indptr, relations = self._objects_of
        entries, _ = csr_entries(indptr, eids)
        called = {self._plain_labels[r] for r in np.unique(relations[entries]).tolist()} - {""}
        indptr, classes = self._classes_of
        entries, _ = csr_entries(indptr, eids)
        names = self.store.names
        return sorted(called | {names[c] for c in np.unique(classes[entries]).tolist()})

    @cached_property
    def _objects_of(self) -> tuple[np.ndarray, np.ndarray]:
        """Per entity, the distinct relations it is an object of (a CSR: row pointers, relation ids)."""
        store = self.store
        labels = max(len(store.relation_labels), 1)
        # one sort of (object, relation) pairs as single keys: a 1-d sort, not a row sort of a pairs matrix
        keys = np.unique(store.dst.astype(np.int64) * labels + store.relation_ids.astype(np.int64))
        objects, relations = np.divmod(keys, labels)
        indptr = np.zeros(store.num_entities + 1, dtype=np.int64)
        np.cumsum(np.bincount(objects, minlength=store.num_entities), out=indptr[1:])
        return indptr, relations

    @cached_property
    def _classes_of(self) -> tuple[np.ndarray, np.ndarray]:
        """Per entity, the classes a relation stating kinds gives it (a CSR: row pointers, class eids)."""
        store = self.store
        kinds = set(store.kind_relations)
        stating = [i for i, label in enumerate(store.relation_labels) if label in kinds]
        edges = np.flatnonzero(np.isin(store.relation_ids, stating))
        keys = np.unique(store.src[edges].astype(np.int64) * max(store.num_entities, 1) + store.dst[edges])
        subjects, classes = np.divmod(keys, max(store.num_entities, 1))
        indptr = np.zeros(store.num_entities + 1, dtype=np.int64)
        np.cumsum(np.bincount(subjects, minlength=store.num_entities), out=indptr[1:])
        return indptr, classes

    @cached_property
    def _plain_labels(self) -> list[str]:
        """Each relation label's words, "" for an `_inverse` twin."""
        return ["" if inverse_base(words) else words for words in self.label_words]

    @cached_property
    def links_siblings(self) -> bool:
        """Whether no relation label names siblings, so that a question's sibling is a parent's child
        (`kgr.methods.direction.links_siblings`; once per store, not per question)."""
        return links_siblings(self.store.relation_labels)

    def label_rows(self, words: str) -> np.ndarray:
        """Per label, whether its words are `words` (a constraint names its relation by them)."""
        rows = self._label_rows.get(words)
        if rows is None:
            rows = self._label_rows[words] = np.array([w == words for w in self.label_words], dtype=bool)
        return rows

    def labels_named_by(self, words: set[str]) -> np.ndarray:
        """Per label, whether `words` hold every content word of it (a label with none is named by nothing)."""
        hits = np.zeros(self._label_token_counts.size, dtype=np.int64)
        for word in words:
            rows = self._label_rows_by_token.get(word)
            if rows is not None:
                hits[rows] += 1
        return (hits == self._label_token_counts) & (self._label_token_counts > 0)

    def warm(self, settings: "CsragConfig", walk: bool) -> None:
        """Build every per-store structure now (label vectors: seconds on an open vocabulary), so that the first
        question does not pay for them on its clock; `walk`: also the passage walk's matrix."""
        self.follows_rows(settings.follow_min_edges, settings.follow_min_share)
        _ = self.label_vectors, self.token_index, self.titles, self.name_prefixes, self._objects_of
        if walk:
            self.warm_passage_ranking()

    def warm_passage_ranking(self) -> None:
        """Build what ranking passages from anchors reads: the walk's matrix and the store's specificity postings
        (the walk's seeds are weighted by their names' specificity)."""
        _ = self.walk_matrix
        self.store.warm_specificity()

    @property
    def label_vectors(self) -> np.ndarray:
        """Unit vectors of the relation labels in plain words, embedded once per store (kept in the project's phrase
        cache for the next run)."""
        with self._lock:
            if self._label_vectors is None:
                self._label_vectors = self.store.phrases.vectors(self.label_words, "list", self.store.encoder.encode)
        return self._label_vectors

    def follows(self, min_edges: int, min_share: float) -> tuple[np.ndarray, np.ndarray]:
        """labels x labels, once per store and rule: whether a walk that reached the tails (first matrix) or the
        heads (second) of one label's edges can go on in the same direction along another somewhere in the graph
        (a father's father, a film's director's birthplace; not from a date to whoever else was born on it): along
        at least `min_edges` of its edges and `min_share` of them (`csrag.follow_min_edges`, `follow_min_share`)."""
        rule = (min_edges, min_share)
        with self._lock:
            if rule not in self._follows:
                self._follows[rule] = _label_follows(self.store, min_edges, min_share)
            return self._follows[rule]

    def follows_rows(self, min_edges: int, min_share: float):
        """`follows(...)[0]` as a CSR matrix (its rows are short: few labels follow any one)."""
        follows = self.follows(min_edges, min_share)[0]  # outside the lock: `follows` takes it
        rule = (min_edges, min_share)
        with self._lock:
            if rule not in self._follows_rows:
                from scipy.sparse import csr_matrix

                self._follows_rows[rule] = csr_matrix(follows)
            return self._follows_rows[rule]

    @property
    def token_index(self) -> dict[str, list[int]]:
        with self._lock:
            if self._token_index is None:
                index: dict[str, list[int]] = {}
                for eid, name in enumerate(self.store.names):
                    for token in content_tokens(name):
                        index.setdefault(token, []).append(eid)
                self._token_index = index
        return self._token_index

    @property
    def titles(self) -> dict[str, list[int]]:
        """Passage ids by normalized title without its parenthesis ("Inherent Vice (film)" -> "inherent vice");
        exact titles are linked to entities at ingest (`store.entity_passages`)."""
        with self._lock:
            if self._titles is None:
                titles: dict[str, list[int]] = {}
                for pid, (title, _) in enumerate(self.store.passages):
                    key = normalize_name(PARENTHESIS.sub("", title))
                    if key:
                        titles.setdefault(key, []).append(pid)
                self._titles = titles
        return self._titles

    @property
    def walk_matrix(self):
        """Column-stochastic transitions over the entities, then the passages: relationships (either way) and each
        entity's links to its passages (provenance and titles), every edge alike; built once per store."""
        with self._lock:
            if self._walk is None:
                from scipy.sparse import coo_matrix, diags

                store = self.store
                n, size = store.num_entities, store.num_entities + len(store.passages)
                pairs = [(store.src.astype(np.int64), store.dst.astype(np.int64))]
                for links in (store.entity_source_passages, store.entity_passages):
                    pairs.append((np.array([e for e, pids in links.items() for _ in pids], dtype=np.int64),
                                  np.array([p for pids in links.values() for p in pids], dtype=np.int64) + n))
                ends = np.concatenate([np.concatenate([a, b]) for a, b in pairs])
                starts = np.concatenate([np.concatenate([b, a]) for a, b in pairs])
                adjacency = coo_matrix((np.ones(ends.size), (ends, starts)), shape=(size, size)).tocsr()
                adjacency.data[:] = 1.0  # a pair linked twice (two triples, a title and a provenance) is one edge
                degree = np.asarray(adjacency.sum(axis=0)).ravel()
                self._walk = (adjacency @ diags(1.0 / np.maximum(degree, 1.0))).tocsr()
        return self._walk

    def passage_walk(self, seeds: dict[int, float], damping: float, iterations: int) -> np.ndarray:
        """Each passage's personalized PageRank mass for a walk that goes on with probability `damping` and else
        restarts at `seeds` (entity -> weight), as HippoRAG ranks passages, after `iterations` power iterations;
        zeros when no seed has weight."""
        walk = self.walk_matrix
        restart = np.zeros(walk.shape[0])
        for e, weight in seeds.items():
            restart[e] += weight
        if restart.sum() <= 0:
            return np.zeros(len(self.store.passages))
        restart /= restart.sum()
        mass = restart.copy()
        for _ in range(iterations):
            mass = (1 - damping) * restart + damping * (walk @ mass)
        return mass[self.store.num_entities:]

    def walk_evidence(self, seeds: dict[int, float], settings: "CsragConfig") -> dict[int, float]:
        """`csrag.walk_evidence` x each passage's share of the walk from `seeds` (its mass / the top passage's), for
        the passages whose share exceeds `walk_floor`; {} at weight 0."""
        weight = settings.walk_evidence
        mass = self.passage_walk(seeds, settings.walk_damping, settings.walk_iterations) if weight > 0 else np.zeros(0)
        if not mass.size or mass.max() <= 0:
            return {}
        mass /= mass.max()
        return {p: weight * float(mass[p]) for p in np.flatnonzero(mass > settings.walk_floor).tolist()}

    def passages_about(self, eids) -> list[int]:
        """The passages linked to `eids` or titled with their names (a parenthesis after the title allowed)."""
        linked, names = self.store.entity_passages, self.store.names
        found = [p for e in eids for p in [*linked.get(e, []), *self.titles.get(normalize_name(names[e]), [])]]
        return list(dict.fromkeys(found))

    def incident(self, eids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rids, near, far) of every relationship touching `eids`, either direction."""
        parts = [(self.inc_rid[self.indptr[e]:self.indptr[e + 1]], np.full(self.indptr[e + 1] - self.indptr[e], e),
                  self.inc_far[self.indptr[e]:self.indptr[e + 1]]) for e in dict.fromkeys(int(x) for x in eids)]
        if not parts:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]

    def edges_within(self, eids, hops: int, limit: int | None = None
                     ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], bool]:
        """(rids, near, far) of every relationship with an end at most `hops` - 1 hops from `eids` (a breadth-first
        walk, either direction), near being the end nearer them; each relationship once, from its first reached end.
        With a `limit` the walk stops once it holds that many (the nearest first; a frontier entity's edges come
        whole), and says whether it stopped short."""
        frontier = list(dict.fromkeys(int(e) for e in eids))
        seen, found, total, short = set(frontier), [], 0, False
        for _ in range(hops):
            if not frontier:
                break
            if limit is not None:  # the frontier entities whose edges still fit, in order (a hub's all at once)
                ids = np.asarray(frontier, dtype=np.int64)
                degrees = self.indptr[ids + 1] - self.indptr[ids]
                fits = np.cumsum(degrees) - degrees < limit - total
                short = short or not fits.all()
                frontier = ids[fits].tolist()
                if not frontier:
                    break
            rids, near, far = self.incident(frontier)
            found.append((rids, near, far))
            total += len(rids)
            frontier = [e for e in dict.fromkeys(far.tolist()) if e not in seen]
            seen.update(frontier)
        if not found:
            empty = np.empty(0, dtype=np.int64)
            return (empty, empty, empty), short
        rids, near, far = (np.concatenate(column) for column in zip(*found))
        first = np.sort(np.unique(rids, return_index=True)[1])
        return (rids[first], near[first], far[first]), short

    @property
    def name_prefixes(self) -> frozenset[str]:
        """Every start of a normalized entity name that ends where the name has a non-word character next ("new" and
        "new york" of "new york city"): the only places a span of a text can end and still grow into a name."""
        with self._lock:
            if self._name_prefixes is None:
                self._name_prefixes = frozenset(name[:m.start()] for name in self.store.name_index
                                                for m in NON_WORD.finditer(name) if m.start())
        return self._name_prefixes

    def find_names(self, text: str) -> list[tuple[int, int, str]]:
        """Entity names occurring in `text` as whole words: longest non-overlapping (start, end, name) in order."""
        pieces = [*WORD.finditer(text), *CHUNK.finditer(text)]
        starts = sorted({m.start() for m in pieces})
        ends = sorted({m.end() for m in pieces})
        found = []
        names, prefixes = self.store.name_index, self.name_prefixes
        for s in starts:
            for e in islice(ends, bisect.bisect_right(ends, s), None):
                if e - s > self.max_name_chars:
                    break
                key = normalize_name(text[s:e])
                if key in names and content_tokens(key) and bounded(text, s, e):
                    found.append((s, e, self.store.names[names[key][0]]))
                # a longer span's key is this one's and then a non-word character (a span ends where a word or a
                # chunk does): a name it could be has this key among its prefixes
                if key not in prefixes:
                    break
        chosen: list[tuple[int, int, str]] = []
        for s, e, name in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
            if all(e <= cs or s >= ce for cs, ce, _ in chosen):
                chosen.append((s, e, name))
        return sorted(chosen)

    def match_anchors(self, mention: str, k: int, floor: float) -> MentionMatch:
        """Up to k entities a mention names: exact name matches when there are any, else those at least `floor`
        alike it (cosine), else none (see GraphStore.match_mention)."""
        return self.store.match_mention(mention, floor, k)

    def best_covered(self, text: str, min_coverage: float) -> int | None:
        """The entity whose name tokens `text` covers best (at least `min_coverage` of them, two tokens shared when
        the name has several), for questions naming no entity exactly."""
        words = content_tokens(text)
        counts: Counter[int] = Counter()
        for token in words:
            for eid in self.token_index.get(token, ()):
                counts[eid] += 1
        best, best_key = None, None
        for eid, shared in counts.items():
            size = len(content_tokens(self.store.names[eid])) or 1
            key = (shared / size, shared, -eid)
            if shared / size >= min_coverage and (size == 1 or shared >= 2) and (best_key is None or key > best_key):
                best, best_key = eid, key
        return best


def _label_follows(store: GraphStore, min_edges: int, min_share: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.sparse import csr_matrix

    labels, n = len(store.relation_labels), store.num_entities
    ones = np.ones(store.src.size, dtype=np.int64)
    heads = csr_matrix((ones, (store.src, store.relation_ids)), shape=(n, labels))
    tails = csr_matrix((ones, (store.dst, store.relation_ids)), shape=(n, labels))
    edges = np.bincount(store.relation_ids, minlength=labels)[:, None]

    def often(arrived, leaving) -> np.ndarray:
        # edges of a label whose far end has an edge of the other label: one stray edge (a place with a spouse)
        # is noise, not a way the graph goes on
        count = (arrived.T @ (leaving > 0).astype(np.int64)).toarray()
        return (count >= min_edges) & (count >= min_share * edges)

    return often(tails, heads), often(heads, tails)


_INDEXES: "weakref.WeakKeyDictionary[GraphStore, PlanIndex]" = weakref.WeakKeyDictionary()
_INDEX_LOCK = threading.Lock()


def plan_index(store: GraphStore) -> PlanIndex:
    """The store's shared PlanIndex."""
    with _INDEX_LOCK:
        index = _INDEXES.get(store)
        if index is None:
            index = _INDEXES[store] = PlanIndex(store)
        return index


# A neighbourhood's dense search (`most_like`) scores at most this many relationships, the nearest the anchors first:
# three hops from a paper through a field of study reach most of the 10x scale graph (millions of relationships, 2-5 s
# a question gathering their vectors), while the evidence a fill is for lies near the anchors. No dev suite graph
# comes near it.
NEIGHBOURHOOD_ROWS = 200_000


def to_named_kind(policy: Policy, store: GraphStore, question: str, anchor: int,
                  edges: tuple[np.ndarray, np.ndarray, np.ndarray]
                  ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], str | None]:
    """The `edges` (rids, near, far) whose far end is of the one type the question's answer-kind words name
    (`Policy.named_kind`, read from `anchor`'s mention), and that type; all of them and None when the words name no
    one type, or no edge reaches it."""
    kind = policy.named_kind(question, AnchorOption(store.names[anchor], store.types_of(anchor), True),
                             store.type_names)
    if kind is None:
        return edges, None
    rids, near, far = edges
    reaches = of_type(store, far, kind)
    if not reaches.any():
        return edges, None
    return (rids[reaches], near[reaches], far[reaches]), store.type_names[kind]


def of_type(store: GraphStore, eids: np.ndarray, type_id: int) -> np.ndarray:
    """Per entity of `eids`, whether `type_id` is one of its types."""
    entries, counts = csr_entries(store.type_indptr, eids)  # every (entity, one of its types)
    typed = np.zeros(len(eids), dtype=bool)
    np.logical_or.at(typed, np.repeat(np.arange(len(eids)), counts), store.type_ids[entries] == type_id)
    return typed


def most_like(relationship_vectors: np.ndarray, question: np.ndarray, edges: tuple[np.ndarray, np.ndarray, np.ndarray],
              taken: Iterable[int], k: int, limit: int = NEIGHBOURHOOD_ROWS
              ) -> tuple[list[tuple[int, int, int, float]], bool]:
    """(rid, near, far, cosine) of the `k` relationships of `edges` (each once: its first occurrence) outside `taken`
    most like the question, best first: a dense search of a neighbourhood, over its first `limit` relationships; and
    whether some went unscored."""
    rids, near, far = edges
    first = np.sort(np.unique(rids, return_index=True)[1])
    rids, near, far = rids[first], near[first], far[first]
    fresh = ~np.isin(rids, np.asarray(list(taken), dtype=np.int64))
    rids, near, far = rids[fresh], near[fresh], far[fresh]
    cut = len(rids) > limit
    rids, near, far = rids[:limit], near[:limit], far[:limit]
    sims = relationship_vectors[rids] @ question
    return [(int(rids[i]), int(near[i]), int(far[i]), float(sims[i])) for i in top_k(sims, k)], cut
