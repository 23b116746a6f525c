"""What every retrieval method shares: the run context (graph, map, backbone) and the method interface."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, Protocol

from kgr.config import Config
from kgr.lexicon import MENTION
from kgr.project import Project
from kgr.store import GraphStore

if TYPE_CHECKING:
    from kgr.backbone import LLMClient
    from kgr.methods.records import RetrievalRecord
    from kgr.reach import ReachMap

POLICIES = ("offline", "random")
TIMED_STAGES = ("plan", "retrieve")  # stages whose questions are timed: their context is warmed when made


@dataclass
class Query:
    """A question to retrieve for; `[...]` in the text marks an entity mention."""

    id: str
    text: str

    @property
    def plain(self) -> str:
        """The text without mention brackets."""
        return " ".join(MENTION.sub(r"\1", self.text).split())

    @property
    def mentions(self) -> list[str]:
        return [m.strip() for m in MENTION.findall(self.text)]


@dataclass
class RunContext:
    """Everything a method needs for a batch of questions, loaded once (not counted in per-question latency)."""

    project: Project
    config: Config
    store: GraphStore
    stage: str
    use_cache: bool = True
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    matrices: tuple[str, ...] | None = None  # the vector tables whose matrices are held (None: all)

    def __post_init__(self) -> None:
        if self.stage in TIMED_STAGES:
            self.warm()

    def warm(self) -> None:
        """Load what the first question would otherwise load on its clock: vectors, encoder, token counter."""
        from kgr.methods.budget import token_counter

        self.store.warm(self.matrices)
        token_counter(self.config.budget.encoding)("warm up")  # tiktoken reads its encoding on first use (~0.9 s)

    @property
    def backbone(self) -> str:
        """The configured backbone: `offline`, `random`, or a LiteLLM model string."""
        return self.config.backbone.model or "offline"

    @cached_property
    def client(self) -> "LLMClient | None":
        """The LLM client, or None when decisions come from the offline or random policy."""
        if self.backbone in POLICIES:
            return None
        from kgr.backbone import LLMClient

        return LLMClient(self.config.backbone, db=self.project.db if self.project.writable else None,
                         use_cache=self.use_cache, run_id=self.run_id)

    @cached_property
    def reach_dir(self):
        """The current reachability map's folder (refusing a missing or stale map)."""
        return self.project.artifact("reach", "map")

    def open_reach(self) -> "ReachMap":
        """A map handle of one's own: lookups share scratch arrays, so each thread needs its own."""
        from kgr.reach import ReachMap

        return ReachMap.open(self.reach_dir)

    @cached_property
    def overview(self) -> str:
        """The stored graph overview text, or empty when `kgr overview` has not run."""
        if not self.project.has_table("overview"):
            return ""
        row = self.project.db.execute("SELECT text FROM overview WHERE kind = 'graph'").fetchone()
        return row[0] if row else ""

    def take_warnings(self, question_id: str) -> list[str]:
        """The backbone fallbacks of one question not yet put in a plan or record (each is returned once)."""
        from kgr.backbone.decide import take_fallbacks

        return take_fallbacks(self.client, question_id)

    def usage(self, question_id: str) -> dict[str, float]:
        """Backbone calls, tokens and cost spent on one question so far."""
        if self.client is None:
            return {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        usage = self.client.log.usage(question_id)
        return {"llm_calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens, "cost_usd": usage.cost_usd}


class Method(Protocol):
    """A retrieval method: built once per run, then asked one question at a time."""

    name: ClassVar[str]
    needs_reach: ClassVar[bool]

    def __init__(self, context: RunContext): ...

    def retrieve(self, query: Query) -> "RetrievalRecord": ...


class Stopwatch:
    """Milliseconds spent per named step of one question."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.steps: dict[str, float] = {}
        self._last = self.started

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.steps[name] = round(self.steps.get(name, 0.0) + (now - self._last) * 1000, 3)
        self._last = now

    @property
    def total_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)


class WarningTally:
    """Counts a batch's records that carry unmatched mentions, empty results or other warnings (call it with each)."""

    def __init__(self) -> None:
        self.records = self.unmatched = self.empty = self.warned = 0

    def __call__(self, record: "RetrievalRecord") -> None:
        from kgr.methods.records import EMPTY_RESULT

        self.records += 1
        self.unmatched += bool(record.unmatched_mentions)
        self.empty += record.is_empty
        other = [w for w in record.warnings if not w.startswith(EMPTY_RESULT)]
        self.warned += bool(other) and not record.unmatched_mentions

    @property
    def summary(self) -> str | None:
        """One line for the end of a batch, or None when no record has a warning."""
        parts = []
        if self.unmatched:
            parts.append(f"{self.unmatched} of {self.records} questions had unmatched mentions")
        if self.empty:
            parts.append(f"{self.empty} of {self.records} questions had empty results (no path or passage)")
        if self.warned:
            parts.append(f"{self.warned} of {self.records} {'other ' if self.unmatched else ''}questions had"
                         f" warnings (loose anchors or fallback decisions)")
        return "; ".join(parts) + "; see the records' warnings" if parts else None
