"""Entity types: from the input, from a TOML schema of relation roles, inferred from relation roles, or coarse kinds."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kgr.errors import InputError
from kgr.graph import Graph
from kgr.ingest.compact import CompactGraph
from kgr.ingest.readers import read_text
from kgr.lexicon import DATE_SPELLING

ROLES = ("subject", "object")

# A role joins a type group when at least this share of its entities already belongs to the group.
# On MetaQA every movie role is >= 0.96 inside the movie group, while only 0.67 of directors are also
# writers, so 0.8 merges the movie roles and keeps directors, writers and actors apart.
MERGE_SHARE = 0.8
# A relation stating kinds (`instance of`): the other roles of its subjects fall into two groups of at least this share
# of them each, nearly disjoint (`_kind_stating_roles`) ...
KIND_PART = 0.1
# ... and the relation stating their kinds gives each of its objects this many subjects on average at least (a kind has
# members; the years of a `founding date` are no kinds of clubs and leagues).
KIND_MEMBERS = 3

_TOML_WHERE = re.compile(r"\s*\(at line (\d+), column \d+\)$")


@dataclass
class Schema:
    """Types of each relation's subject and object, read from `path`."""

    path: Path
    relations: dict[str, tuple[str, str]]


def load_schema(path: Path) -> Schema:
    """Read a TOML schema: one `[relations.NAME]` table with `subject` and `object` type names each."""
    text = read_text(path)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        where = _TOML_WHERE.search(message)
        raise InputError(path, f"invalid TOML: {_TOML_WHERE.sub('', message)}",
                         int(where.group(1)) if where else None) from None
    unknown = sorted(set(document) - {"relations"})
    if unknown:
        raise InputError(path, f"unknown top-level key(s) {', '.join(unknown)}; expected [relations.NAME] tables")
    tables = document.get("relations")
    if not isinstance(tables, dict) or not tables:
        raise InputError(path, "no [relations.NAME] tables")
    relations: dict[str, tuple[str, str]] = {}
    for name, table in tables.items():
        line = _table_line(text, name)
        if not isinstance(table, dict):
            raise InputError(path, f"relations.{name} must be a table with subject and object", line)
        extra = sorted(set(table) - set(ROLES))
        if extra:
            raise InputError(path, f"relations.{name} has unknown key(s) {', '.join(extra)}; "
                                   f"expected subject and object", line)
        types = tuple(table.get(role) for role in ROLES)
        for role, value in zip(ROLES, types):
            if not isinstance(value, str) or not value.strip():
                raise InputError(path, f"relations.{name} needs a non-empty {role} type", line)
        relations[name] = (types[0].strip(), types[1].strip())
    return Schema(path=path, relations=relations)


def _table_line(text: str, name: str) -> int | None:
    """Find the line of the `[relations.NAME]` header, for error messages (None if written otherwise)."""
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if stripped.startswith("[relations.") and stripped.rstrip("]").split(".", 1)[1].strip("\"' ") == name:
            return number
    return None


def apply_schema(graph: Graph | CompactGraph, schema: Schema) -> None:
    """Type each entity the input left untyped by the roles it plays under the schema."""
    compact = _compact(graph)
    missing = sorted(set(compact.labels) - set(schema.relations))
    if missing:
        raise InputError(schema.path, f"relation(s) missing from the schema: {', '.join(missing)}")
    role_types(compact, {(relation, role): types[i] for relation, types in schema.relations.items()
                         for i, role in enumerate(ROLES)})
    _write_back(graph, compact)


def role_type_name(relation: str, role: str) -> str:
    """Name the type of one relation role, e.g. `directed_by:object`."""
    return f"{relation}:{role}"


def infer_types(graph: Graph | CompactGraph) -> dict[str, list[str]]:
    """Type untyped entities by the relation roles they play; return each type's merged roles.

    Every (relation, role) pair is a candidate type holding the entities seen in that role. Roles are
    visited from the largest entity set to the smallest; a role joins the existing group that already
    holds the largest share of its entities when that share is at least MERGE_SHARE, and otherwise starts
    a new group. So all subject roles of MetaQA (the same movies) become one type, while the objects of
    `directed_by` stay their own type even though many directors also write. Comparing a role with the
    group's union rather than with single roles keeps two large groups from being chained together by
    a small role. A group is named `relation:role` after its first (largest) member, e.g.
    `release_year:subject` for MetaQA's movies and `directed_by:object` for its directors: the name
    says where the type came from, which a guessed noun could not. An entity gets the type of every
    group it plays a role in (a director who also acts gets two types); typed entities are left alone.
    The subject role of a relation stating kinds (`instance of`: `_kind_stating_roles`) groups nothing: it holds
    artworks, people and museums alike, and would make them one type; its subjects take their other roles' types."""
    compact = _compact(graph)
    if all(compact.types):
        return {}
    members: dict[tuple[str, str], list[int]] = {}
    for role, ends in zip(ROLES, (compact.src, compact.dst)):
        # each label's distinct entities in this role, from one sort of (label, eid) pairs
        pairs = np.unique(compact.relation.astype(np.int64) * max(len(compact), 1) + ends)
        labels, eids = np.divmod(pairs, max(len(compact), 1))
        bounds = np.flatnonzero(np.diff(labels)) + 1
        for group in np.split(np.arange(len(pairs)), bounds):
            if len(group):
                members[(compact.labels[int(labels[group[0]])], role)] = eids[group].tolist()
    roles = sorted(members, key=lambda r: (-len(members[r]), r))
    stating: set[tuple[str, str]] = set()  # the subject roles of relations stating kinds (`_kind_stating_roles`)
    while True:
        groups, type_of = _merge_roles(members, [r for r in roles if r not in stating])
        found = _kind_stating_roles(members, groups, compact) - stating
        if not found:
            break
        stating |= found
    covered: set[int] = set()
    if stating:
        # their subjects take the types of their other roles; those playing no other role keep the role's own
        covered = set().union(*(members[r] for r in roles if r not in stating))
        for role in sorted(stating, key=lambda r: (-len(members[r]), r)):
            name, rest = role_type_name(*role), set(members[role]) - covered
            if rest:
                groups.append((name, rest, [name]))
                type_of[role] = name
    role_types(compact, type_of, stating, covered)
    compact.kind_relations = sorted({label for label, _ in stating})
    _write_back(graph, compact)
    return {name: roles for name, _, roles in groups}


Group = tuple[str, set[int], list[str]]  # (type name, entities, member role names)


def _merge_roles(members: dict[tuple[str, str], list[int]], roles: list[tuple[str, str]]
                 ) -> tuple[list[Group], dict[tuple[str, str], str]]:
    """The type groups of `roles` (largest first): each joins the group already holding `MERGE_SHARE` of its
    entities, or starts one."""
    groups: list[Group] = []
    type_of: dict[tuple[str, str], str] = {}
    for role in roles:
        found = members[role]
        best, best_share = None, 0.0
        for group in groups:
            share = len(group[1].intersection(found)) / len(found)
            if share > best_share:
                best, best_share = group, share
        if best is None or best_share < MERGE_SHARE:
            best = (role_type_name(*role), set(), [])
            groups.append(best)
        best[1].update(found)
        best[2].append(role_type_name(*role))
        type_of[role] = best[0]
    return groups, type_of


def _kind_stating_roles(members: dict[tuple[str, str], list[int]], groups: list[Group], graph: CompactGraph
                        ) -> set[tuple[str, str]]:
    """The subject roles of relations that state kinds (`instance of`, `rdf:type`): a group's first role whose other
    roles, grouped without it, fall into at least two groups of `KIND_PART` of its entities each that share at most
    `1 - MERGE_SHARE` of the smaller (artworks, people and museums alike have an `instance of` edge), whose objects
    along it differ (`painting` and `sculpture`, `human`, `museum`), play no other role (kinds, not things: the
    cities that `located in` gives museums are themselves located in countries) and have `KIND_MEMBERS` subjects each
    on average. Grouped by it, the kinds it states would all be one type."""
    stating = set()
    for _, _, names in groups:
        if len(names) < 3:
            continue
        founder, *others = [tuple(name.rsplit(":", 1)) for name in names]
        if founder[1] != "subject":
            continue
        parts, _ = _merge_roles(members, others)
        size = len(members[founder])
        big = sorted((entities for _, entities, _ in parts if len(entities) >= KIND_PART * size), key=len,
                     reverse=True)
        if len(big) < 2 or len(big[0] & big[1]) > (1 - MERGE_SHARE) * len(big[1]):
            continue
        label = graph.labels.index(founder[0])
        edges = np.flatnonzero(graph.relation == label)
        kinds = set(graph.dst[edges].tolist())
        if len(kinds) * KIND_MEMBERS > size or any(
                kinds.intersection(found) for role, found in members.items() if role != (founder[0], "object")):
            continue
        objects = [set(graph.dst[edges][np.isin(graph.src[edges], list(part))].tolist()) for part in big[:2]]
        if not objects[0] & objects[1]:
            stating.add(founder)
    return stating


def role_types(graph: CompactGraph, type_of: dict[tuple[str, str], str],
               stating: set[tuple[str, str]] = frozenset(), covered: set[int] = frozenset()) -> None:
    """Give each entity the input left untyped the type of every (relation, role) it plays (`type_of`), in the order
    its roles first appear (by rid, a subject before an object), each once (`CompactGraph.role_eids`); the subject
    role of a relation stating kinds (`stating`) only to the entities that play no other role (not in `covered`)."""
    untyped = np.array([not types for types in graph.types], dtype=bool)
    # a role without a type (a relation stating kinds whose subjects all play other roles) types no entity
    names = list(dict.fromkeys(type_of[(label, role)] for label in graph.labels for role in ROLES
                               if (label, role) in type_of))
    number = {name: index for index, name in enumerate(names)}
    covered_eids = np.fromiter(covered, dtype=np.int64, count=len(covered))
    found = []  # (eids, type numbers, when) of the roles untyped entities play, subjects then objects
    for position, (role, ends) in enumerate(zip(ROLES, (graph.src, graph.dst))):
        rows = np.flatnonzero(untyped[ends]) if untyped.any() else np.zeros(0, dtype=np.int64)
        stating_labels = [i for i, label in enumerate(graph.labels) if (label, role) in stating]
        if stating_labels:
            rows = rows[~(np.isin(graph.relation[rows], stating_labels) & np.isin(ends[rows], covered_eids))]
        by_label = np.array([number.get(type_of.get((label, role)), -1) for label in graph.labels], dtype=np.int32)
        rows = rows[by_label[graph.relation[rows]] >= 0]
        found.append((ends[rows], by_label[graph.relation[rows]], 2 * rows + position))
    eids, kinds, when = (np.concatenate([part[i] for part in found]) for i in range(3))
    order = np.lexsort((when, kinds, eids))  # each (entity, type)'s first appearance leads its run
    eids, kinds, when = eids[order], kinds[order], when[order]
    first = np.ones(len(eids), dtype=bool)
    first[1:] = (eids[1:] != eids[:-1]) | (kinds[1:] != kinds[:-1])
    eids, kinds, when = eids[first], kinds[first], when[first]
    order = np.lexsort((when, eids))
    graph.role_eids = eids[order].astype(np.int32)
    graph.role_type_numbers = kinds[order].astype(np.int32)
    graph.role_type_names = names


def _compact(graph: Graph | CompactGraph) -> CompactGraph:
    """The graph as columns (a Graph of objects is converted)."""
    return graph if isinstance(graph, CompactGraph) else CompactGraph.from_graph(graph)


def _write_back(graph: Graph | CompactGraph, compact: CompactGraph) -> None:
    """Give a Graph of objects the types its columns were given (a CompactGraph holds them already)."""
    if compact is graph:
        return
    graph.kind_relations = list(compact.kind_relations)
    for entity, types in zip(graph.entities.values(), compact.entity_type_lists()):
        if not entity.types:
            entity.types.extend(types)


def assign_types(graph: Graph | CompactGraph, schema: Schema | None = None) -> list[str]:
    """Type the entities the input left untyped: by the schema when given, else by inference; return inferred names."""
    if schema is not None:
        apply_schema(graph, schema)
        return []
    return list(infer_types(graph))


# Generic kinds of things, for a graph whose relation roles do not merge into a readable type set (an LLM-built KG
# with thousands of relation phrasings gives one role type per phrasing). Each kind is described in words, so an
# entity's name and the texts of its relationships can be compared with it by embedding. The kinds are the usual
# coarse entity classes of NER and knowledge bases, not any dataset's vocabulary.
COARSE_KINDS = {
    "person": "a person, someone's name",
    "organization": "an organization: a company, band, team, party or institution",
    "place": "a place: a city, country, region, river or building",
    "date": "a date, a year or a time",
    "number": "a number, an amount or a quantity",
    "work": "a creative work: a book, film, song, album, show or painting",
    "event": "an event: a war, battle, election, festival or competition",
    "concept": "a concept, a field, a language, a title or an award",
}
# a numeral, maybe a scale word, maybe one lower-case unit or noun ("35", "3%", "1,700 fellows", "1.2 billion
# people"); not "1009 Drayton Road" or "1987 World Championships", which name things
_NUMBER = re.compile(r"^[-+]?\d[\d.,]*\s*(?:%|percent)?(?:\s+(?:thousand|million|billion))?(?:\s+[a-z]+)?$")


def coarse_kinds(names: list[str], entity_vectors: np.ndarray, src: np.ndarray, dst: np.ndarray,
                 relationship_vectors: np.ndarray, kind_vectors: np.ndarray) -> list[str]:
    """One coarse kind per entity: date or number by its spelling, else the kind most like its name and edges.

    An entity's score for a kind is its name's cosine to the kind's description plus the mean cosine of its
    relationships' texts ("Pyar Ka Bandhan directed by ..." reads as a work although the name alone does not).
    `kind_vectors` are the normalized vectors of COARSE_KINDS' descriptions, in order."""
    scores = entity_vectors @ kind_vectors.T
    per_edge = relationship_vectors @ kind_vectors.T
    edge_sum = np.zeros_like(scores)
    np.add.at(edge_sum, src, per_edge)
    np.add.at(edge_sum, dst, per_edge)
    degree = np.bincount(np.concatenate([src, dst]), minlength=len(names)).astype(np.float32)
    scores = scores + edge_sum / np.maximum(degree, 1.0)[:, None]
    kinds = list(COARSE_KINDS)
    chosen = [kinds[i] for i in scores.argmax(axis=1)]
    for index, name in enumerate(names):
        text = " ".join(name.split())
        if DATE_SPELLING.match(text):
            chosen[index] = "date"
        elif _NUMBER.match(text):
            chosen[index] = "number"
    return chosen
