"""The read graph as compact columns (`CompactGraph`): what `merge` makes and the ingest turns into its tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from kgr.graph import Entity, Graph, Passage, Relationship

if TYPE_CHECKING:
    import numpy as np

# The provenance of every edge read without any, shared (`Relationship.sources`).
NO_SOURCES: tuple[int, ...] = ()


@dataclass
class CompactGraph:
    """Entities as Arrow string columns by eid, relationships as int32 columns by rid (ends as eids, labels as
    numbers into `labels`, descriptions as Arrow strings, "" where the input gave none), passages, provenance by id.

    Per relationship it holds 12 bytes of ids and its description (4 bytes and the text); per entity its key, name
    and description (8 bytes and the text each) and a pointer to its types' tuple."""

    keys: object = None  # pyarrow large_string arrays, one row per entity
    names: object = None
    descriptions: object = None
    # The input's types of each entity (entities with the same types may share one tuple; empty when none given).
    types: list[Sequence[str]] = field(default_factory=list)
    src: np.ndarray | None = None
    dst: np.ndarray | None = None
    relation: np.ndarray | None = None
    labels: list[str] = field(default_factory=list)
    edge_descriptions: object = None  # a pyarrow large_string array, one row per relationship
    passages: list[Passage] = field(default_factory=list)
    # Provenance: eid / rid -> indexes into `passages`, for the entities and relationships that have any.
    entity_sources: dict[int, list[int]] = field(default_factory=dict)
    relationship_sources: dict[int, list[int]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    inferred_types: list[str] = field(default_factory=list)
    kind_relations: list[str] = field(default_factory=list)  # the relations stating kinds (`types.infer_types`)
    # Types given by relation roles to the entities the input left untyped (`types.role_types`): (eid, number into
    # role_type_names) pairs, by eid, each entity's in the order its roles first appear.
    role_eids: np.ndarray | None = None
    role_type_numbers: np.ndarray | None = None
    role_type_names: list[str] = field(default_factory=list)

    def __post_init__(self):
        import numpy as np
        import pyarrow as pa

        for name in ("src", "dst", "relation", "role_eids", "role_type_numbers"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(0, dtype=np.int32))
        if self.edge_descriptions is None:
            self.edge_descriptions = pa.array([], type=pa.large_string())
        for name in ("keys", "names", "descriptions"):
            if getattr(self, name) is None:
                setattr(self, name, pa.array([], type=pa.large_string()))

    def __len__(self) -> int:
        return len(self.keys)

    def type_rows(self) -> tuple[list[int], list[str]]:
        """The entity_types rows (eid, type) in eid order: the input's types, else those its roles gave."""
        import numpy as np

        eids = [eid for eid, types in enumerate(self.types) for _ in types]
        names = [t for types in self.types for t in types]
        if not len(self.role_eids):
            return eids, names
        # An entity has input types or role types, never both: a stable sort by eid interleaves the two lists.
        merged_eids = np.concatenate([np.asarray(eids, dtype=np.int64), self.role_eids.astype(np.int64)])
        order = np.argsort(merged_eids, kind="stable")
        role_names = [self.role_type_names[t] for t in self.role_type_numbers.tolist()]
        every = names + role_names
        return merged_eids[order].tolist(), [every[i] for i in order.tolist()]

    def entity_type_lists(self) -> list[list[str]]:
        """Each entity's types (`type_rows` grouped by eid)."""
        found: list[list[str]] = [[] for _ in range(len(self))]
        for eid, name in zip(*self.type_rows()):
            found[eid].append(name)
        return found

    def relationship_labels(self) -> list[str]:
        """Each relationship's label."""
        labels = self.labels
        return [labels[r] for r in self.relation.tolist()]

    def to_graph(self) -> Graph:
        """The graph as objects (`Graph`), for callers that walk it entity by entity."""
        graph = Graph(passages=list(self.passages), skipped=list(self.skipped),
                      inferred_types=list(self.inferred_types), kind_relations=list(self.kind_relations))
        for eid, (key, name, description, types) in enumerate(
                zip(self.keys.to_pylist(), self.names.to_pylist(), self.descriptions.to_pylist(),
                    self.entity_type_lists())):
            graph.entities[key] = Entity(key=key, name=name, types=types, description=description,
                                         sources=list(self.entity_sources.get(eid, [])))
        keys = self.keys.to_pylist()
        for rid, (s, d, label, description) in enumerate(zip(self.src.tolist(), self.dst.tolist(),
                                                             self.relationship_labels(),
                                                             self.edge_descriptions.to_pylist())):
            sources = self.relationship_sources.get(rid)
            graph.relationships.append(Relationship(keys[s], label, keys[d], description,
                                                    list(sources) if sources else NO_SOURCES))
        return graph

    @classmethod
    def from_graph(cls, graph: Graph) -> CompactGraph:
        """The columns of a graph held as objects (`Graph`); relationships naming an unknown key are refused."""
        import numpy as np
        import pyarrow as pa

        eid = {key: index for index, key in enumerate(graph.entities)}
        entities = list(graph.entities.values())
        labels: dict[str, int] = {}
        relationships = graph.relationships
        return cls(
            keys=pa.array([e.key for e in entities], type=pa.large_string()),
            names=pa.array([e.name for e in entities], type=pa.large_string()),
            descriptions=pa.array([e.description for e in entities], type=pa.large_string()),
            types=[tuple(e.types) for e in entities],
            src=np.array([eid[r.source] for r in relationships], dtype=np.int32),
            dst=np.array([eid[r.target] for r in relationships], dtype=np.int32),
            relation=np.array([labels.setdefault(r.relation, len(labels)) for r in relationships], dtype=np.int32),
            labels=list(labels), edge_descriptions=pa.array([r.description for r in relationships],
                                                         type=pa.large_string()),
            passages=list(graph.passages),
            entity_sources={i: list(e.sources) for i, e in enumerate(entities) if e.sources},
            relationship_sources={i: list(r.sources) for i, r in enumerate(relationships) if r.sources},
            skipped=list(graph.skipped), inferred_types=list(graph.inferred_types),
            kind_relations=list(graph.kind_relations),
        )
