"""Response cache in the project's DuckDB (`llm_cache`): only replies that passed validation are stored."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kgr.backbone.redact import scrub

if TYPE_CHECKING:
    import duckdb

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key VARCHAR PRIMARY KEY,
    model VARCHAR,
    template VARCHAR,
    response VARCHAR,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    created_at TIMESTAMP DEFAULT current_timestamp
)
"""


def cache_key(model: str, messages: list[dict[str, str]], params: dict[str, Any], template: str) -> str:
    """A stable hash of everything that determines a reply: model, messages, output parameters, template version."""
    blob = json.dumps({"model": model, "messages": messages, "params": params, "template": template}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedReply:
    """A stored reply with the usage it cost when it was made."""

    text: str
    prompt_tokens: int
    completion_tokens: int


class ResponseCache:
    """Read and write `llm_cache` through a private cursor, serialized so a thread pool can share it."""

    def __init__(self, db: "duckdb.DuckDBPyConnection"):
        self._db = db.cursor()  # a cursor is DuckDB's per-user handle; the lock serializes our threads on it
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute(_SCHEMA)

    def get(self, key: str) -> CachedReply | None:
        """The stored reply for `key`, if any."""
        with self._lock:
            row = self._db.execute(
                "SELECT response, prompt_tokens, completion_tokens FROM llm_cache WHERE key = ?", [key]
            ).fetchone()
        return CachedReply(*row) if row else None

    def put(self, key: str, model: str, template: str, reply: CachedReply) -> None:
        """Store a validated reply (replacing any older one under the same key)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO llm_cache (key, model, template, response, prompt_tokens, completion_tokens)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [key, model, template, scrub(reply.text), reply.prompt_tokens, reply.completion_tokens],
            )
