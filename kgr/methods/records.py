"""The per-question retrieval record every method writes (JSONL and the `records` table)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

RECORD_SCHEMA_VERSION = 1
# How the warning of a record with no path and no passage begins (`kgr.methods.runner.finish_record` adds it).
EMPTY_RESULT = "empty result"


@dataclass
class RetrievalRecord:
    """One question's retrieval; the field names are a stable interface for scripts."""

    id: str
    question: str
    method: str
    backbone: str
    anchors: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)  # retrieved entity names in rank order (anchors excluded)
    paths: list[dict[str, Any]] = field(default_factory=list)  # {entities, relations, similarities, score, ...}
    context: str = ""
    context_tokens: int = 0
    passages: list[str] | None = None  # titles of passages in the context; None for methods that retrieve none
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    timings_ms: dict[str, float] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)  # method-specific detail (plans, hops, pools, decisions)
    # Mentions in the question that matched no entity above the anchor floor (not replaced by look-alikes).
    unmatched_mentions: list[str] = field(default_factory=list)
    # One line per guess the result rests on: a loose anchor match, a fallback decision, a substituted default.
    warnings: list[str] = field(default_factory=list)
    schema_version: int = RECORD_SCHEMA_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, default=_plain)

    @property
    def is_empty(self) -> bool:
        """True when the record holds no path and no passage: nothing was retrieved."""
        return not self.paths and not self.passages


def empty_result_warning(reason: str | None) -> str:
    """The warning of a record with no path and no passage, with why when it is known."""
    return f"{EMPTY_RESULT}: no path or passage matched the question" + (f" ({reason})" if reason else "")


def same_question(stored: object, text: str) -> bool:
    """Tell whether a stored record's question text is this question's (whitespace differences aside)."""
    return isinstance(stored, str) and " ".join(stored.split()) == " ".join(text.split())


def _plain(value: Any) -> Any:
    """Make numpy scalars and sets JSON-able."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"not JSON-able: {type(value).__name__}")


def write_jsonl(path: Path, records: Iterable[RetrievalRecord]) -> int:
    """Write records to a JSONL file atomically; return how many."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with open(tmp, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(record.to_json() + "\n")
            count += 1
    tmp.replace(path)
    return count


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records from a JSONL file as dicts."""
    from kgr.errors import InputError

    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(path, f"not a JSON record ({exc.msg})", number) from None
    return rows
