"""Call accounting: one `llm_calls` row per backbone call, plus in-memory per-run and per-question totals."""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from dataclasses import astuple, dataclass, field, fields
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import duckdb

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_calls (
    call_id VARCHAR PRIMARY KEY,
    run_id VARCHAR,
    stage VARCHAR,
    question_id VARCHAR,
    purpose VARCHAR,
    model VARCHAR,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    latency_ms DOUBLE,
    cost_usd DOUBLE,
    cost_known BOOLEAN,
    cache_hit BOOLEAN,
    attempts INTEGER,
    fallback BOOLEAN,
    error_kind VARCHAR,
    created_at TIMESTAMP DEFAULT current_timestamp
)
"""


@dataclass
class CallRecord:
    """One backbone call. Cache hits carry the tokens the reply took when made, but cost 0 (nothing was spent)."""

    run_id: str
    stage: str
    question_id: str | None
    purpose: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    cost_known: bool = True
    cache_hit: bool = False
    attempts: int = 0  # HTTP requests sent for this call (0 for a cache hit)
    fallback: bool = False
    error_kind: str | None = None  # exception class, or "invalid_output"
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass
class Usage:
    """Running totals over a set of calls."""

    calls: int = 0
    requests: int = 0
    cache_hits: int = 0
    fallbacks: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def add(self, record: CallRecord) -> None:
        """Count one call."""
        self.calls += 1
        self.requests += record.attempts
        self.cache_hits += record.cache_hit
        self.fallbacks += record.fallback
        self.errors += record.error_kind is not None
        self.prompt_tokens += record.prompt_tokens
        self.completion_tokens += record.completion_tokens
        self.cost_usd += record.cost_usd


_COLUMNS = [f.name for f in fields(CallRecord)]


class CallLog:
    """Records calls to `llm_calls` (when a DuckDB connection is given) and keeps run and per-question totals."""

    def __init__(self, db: "duckdb.DuckDBPyConnection | None", run_id: str | None = None):
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.total = Usage()
        self._per_question: dict[str, Usage] = {}
        self._scopes: dict[str | None, list[Usage]] = {}
        self._lock = threading.Lock()
        self._db = db.cursor() if db is not None else None
        if self._db is not None:
            self._db.execute(_SCHEMA)

    def record(self, record: CallRecord) -> None:
        """Store one call and add it to the totals."""
        with self._lock:
            if self._db is not None:
                self._db.execute(
                    f"INSERT INTO llm_calls ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                    list(astuple(record)),
                )
            self._count(record)

    def mark_fallback(self, record: CallRecord) -> None:
        """Note that the decision this call served ended with the fallback policy."""
        with self._lock:
            record.fallback = True
            if self._db is not None:
                self._db.execute("UPDATE llm_calls SET fallback = true WHERE call_id = ?", [record.call_id])
            for usage in self._usages(record.question_id):
                usage.fallbacks += 1

    def usage(self, question_id: str) -> Usage:
        """A copy of the totals for one question over this run."""
        with self._lock:
            return Usage(**vars(self._per_question.get(str(question_id), Usage())))

    @contextmanager
    def scope(self, question_id: str | None) -> Iterator[Usage]:
        """Yield live totals of the calls made for `question_id` while the block runs."""
        usage = Usage()
        key = None if question_id is None else str(question_id)
        with self._lock:
            self._scopes.setdefault(key, []).append(usage)
        try:
            yield usage
        finally:
            with self._lock:
                self._scopes[key].remove(usage)

    def _usages(self, question_id: str | None) -> list[Usage]:
        """Every total a call for `question_id` counts towards (caller holds the lock)."""
        usages = [self.total, *self._scopes.get(question_id, [])]
        if question_id is not None:
            usages.append(self._per_question.setdefault(question_id, Usage()))
        return usages

    def _count(self, record: CallRecord) -> None:
        for usage in self._usages(record.question_id):
            usage.add(record)
