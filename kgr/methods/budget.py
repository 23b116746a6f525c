"""Pack ranked evidence paths into a token budget, counting each triple and entity note once."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Sequence

from kgr.store import GraphStore


@lru_cache(maxsize=4)
def token_counter(encoding: str = "o200k_base") -> Callable[[str], int]:
    """A fast offline token counter (tiktoken with LiteLLM's bundled encodings)."""
    from kgr.backbone import count_tokens

    return lambda text: count_tokens(text, encoding=encoding)


@dataclass
class Packed:
    """The context handed to the LLM, and what made it in or was cut."""

    context: str
    tokens: int
    kept_paths: list[int] = field(default_factory=list)  # indices into the ranked path list
    cut_paths: list[int] = field(default_factory=list)
    rids: list[int] = field(default_factory=list)  # triples in the context, in order
    eids: list[int] = field(default_factory=list)  # entities in the context, in rank order
    pids: list[int] = field(default_factory=list)  # passages in the context


def triple_line(store: GraphStore, rid: int) -> str:
    subject, relation, obj = store.triple(rid)
    return f"({subject}; {relation}; {obj})"


def entity_line(store: GraphStore, eid: int) -> str:
    description = store.descriptions[eid]
    return f"{store.names[eid]}: {description}" if description else store.names[eid]


def pack_paths(
    store: GraphStore,
    paths: Sequence[Sequence[int]],
    budget: int,
    count: Callable[[str], int],
    endpoints: Sequence[Sequence[int]] | None = None,
    passages: Sequence[int] = (),
) -> Packed:
    """Add paths (each a sequence of relationship ids) in rank order while their new lines fit the budget.

    A triple or entity description already in the context costs nothing again, so a path that only
    extends an included one pays for its new hop alone. A path that does not fit is skipped and later,
    smaller ones may still fit. `endpoints` lists each path's entities in path order (for rank order).
    An empty path with `endpoints` [eid] packs that entity alone as a line (its name, with its description).
    """
    lines: list[str] = []
    seen_rids: set[int] = set()
    seen_eids: set[int] = set()
    packed = Packed(context="", tokens=0)
    for index, path in enumerate(paths):
        new_lines: list[str] = []
        new_rids = [rid for rid in dict.fromkeys(path) if rid not in seen_rids]
        entities = list(endpoints[index]) if endpoints else [
            e for rid in path for e in (int(store.src[rid]), int(store.dst[rid]))
        ]
        new_eids = [e for e in dict.fromkeys(entities) if e not in seen_eids]
        new_lines.extend(triple_line(store, rid) for rid in new_rids)
        # A path without relationships is a bare entity: its line carries the name even without a description.
        new_lines.extend(entity_line(store, e) for e in new_eids if store.descriptions[e] or not path)
        cost = sum(count(line) + 1 for line in new_lines)
        if packed.tokens + cost > budget:
            packed.cut_paths.append(index)
            continue
        packed.tokens += cost
        packed.kept_paths.append(index)
        lines.extend(new_lines)
        seen_rids.update(new_rids)
        seen_eids.update(new_eids)
        packed.rids.extend(new_rids)
        packed.eids.extend(new_eids)
    for pid in passages:
        title, text = store.passages[pid]
        line = f"[{title}] {text}"
        cost = count(line) + 1
        if packed.tokens + cost <= budget:
            packed.tokens += cost
            packed.pids.append(pid)
            lines.append(line)
    packed.context = "\n".join(lines)
    return packed
