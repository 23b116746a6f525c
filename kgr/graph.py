"""The normalized graph every reader produces and the ingest stage stores."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from dataclasses import dataclass, field


# slots: an ingest holds one object per entity and relationship of the graph while it reads (a dict per object would
# double their size)
@dataclass(slots=True)
class Entity:
    """A node: `key` is the input's id (the name when the input has none)."""

    key: str
    name: str
    types: list[str] = field(default_factory=list)
    description: str = ""
    # Indexes into Graph.passages of the passages the entity was extracted from (its provenance).
    sources: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Relationship:
    """A typed edge between two entity keys."""

    source: str
    relation: str
    target: str
    description: str = ""
    # Indexes into Graph.passages of the passages the edge was extracted from (its provenance); a reader that gives
    # none may share one empty tuple among all edges (one empty list per edge costs 56 bytes).
    sources: list[int] | tuple[int, ...] = field(default_factory=list)


@dataclass(slots=True)
class Passage:
    """A text passage; linked to entities whose name equals its title."""

    key: str
    title: str
    text: str


@dataclass
class Graph:
    """Entities by key (in input order), relationships and passages."""

    entities: dict[str, Entity] = field(default_factory=dict)
    relationships: list[Relationship] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    # Input records left out as malformed, each "file:line: what was wrong" (reported, not fatal).
    skipped: list[str] = field(default_factory=list)
    # Type names kgr inferred from relation roles (not given by the input or a schema).
    inferred_types: list[str] = field(default_factory=list)
    # Relations kgr found stating kinds (`instance of`), whose objects name their subjects' types.
    kind_relations: list[str] = field(default_factory=list)

    def entity(self, key: str, name: str | None = None) -> Entity:
        """Return the entity with this key, creating it (named `name` or the key) if new."""
        found = self.entities.get(key)
        if found is None:
            found = self.entities[key] = Entity(key=key, name=name if name is not None else key)
        return found


_PATH_SEPARATORS = re.compile(r"[/.#:]|_{2,}")  # `__` too: `people__person__place_of_birth` flattens a path


def normalize_name(text: str) -> str:
    """Casefolded, whitespace-collapsed form used wherever names are matched (entities, titles, answers)."""
    return " ".join(str(text).split()).casefold()


@lru_cache(maxsize=1 << 16)  # labels are a bounded set, read for every relationship of a graph
def relation_words(relation: str) -> str:
    """Turn a relation label such as `directed_by` or `hasGenre` into plain words.

    A label written as a path (`/film/film/directed_by`, `people.person.spouse`, `dbo:birthPlace`, a URI,
    `people__person__spouse`) is named by its last segment (an `inverse` segment joins the one before it): the
    segments before it are a namespace that many labels share, and words every label has tell no relation from
    another."""
    if not any(c.isspace() for c in relation):
        segments = [s for s in _PATH_SEPARATORS.split(relation) if s]
        if len(segments) > 1 and segments[-1].lower() == "inverse":  # an inverse twin keeps its property's name
            segments = [*segments[:-2], f"{segments[-2]}_inverse"]
        if len(segments) > 1 and any(c.isalpha() for c in segments[-1]):
            relation = segments[-1]
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", relation)
    return re.sub(r"[_\-./:]+", " ", spaced).strip().lower()


@lru_cache(maxsize=1 << 16)
def subject_kind(relation: str) -> str | None:
    """The words of a Freebase-style label's type segment (`__aviation__pilot__airline`, `film.film.directed_by`,
    `/people/person/spouse`: domain, type, property), which names the kind of its subjects: `pilot`, a pilot's airline,
    not an airline's own (an inverse twin's is its base label's). None for any other label (a URI or CURIE: `:` and `#`
    name a namespace, not a type)."""
    if any(c.isspace() for c in relation) or ":" in relation or "#" in relation:
        return None
    segments = [s for s in _PATH_SEPARATORS.split(relation) if s]
    if len(segments) == 4 and segments[-1].lower() == "inverse":  # the inverse twin of a domain/type/property label
        segments = segments[:-1]
    if len(segments) != 3 or not any(c.isalpha() for c in segments[1]):
        return None
    return relation_words(segments[1])


def typed_labels(relations: Iterable[str]) -> frozenset[str]:
    """The labels whose type segment (`subject_kind`) names their subjects' kind: every Freebase-style label of a graph
    whose labels carry more than one (a segment every label shares is a namespace: `/football/player/...` on a graph
    of clubs, countries and players alike), none otherwise."""
    kinds = {relation: subject_kind(relation) for relation in relations}
    typed = frozenset(relation for relation, kind in kinds.items() if kind)
    return typed if len({kinds[relation] for relation in typed}) > 1 else frozenset()


_INVERSE_TWIN = re.compile(r"(?:^| )inverse$")  # `relation_words` of an `_inverse` twin end on the word


def inverse_base(words: str) -> str | None:
    """The base relation's words of an `_inverse` twin's words (`plays in club inverse` -> `plays in club`), else
    None: the twin runs the base relation backward, so its words name the same link and the twin's subjects."""
    base = _INVERSE_TWIN.sub("", words).strip()
    return base if base != words and base else None


def default_description(source_name: str, relation: str, target_name: str) -> str:
    """A readable sentence for a relationship that came without a description."""
    return f"{source_name} {relation_words(relation)} {target_name}"
