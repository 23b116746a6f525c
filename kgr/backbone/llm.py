"""LLMClient: LiteLLM calls with caching, retries, a concurrency limit, call/spend caps and accounting."""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from kgr.backbone.accounting import CallLog, CallRecord
from kgr.backbone.cache import CachedReply, ResponseCache, cache_key
from kgr.backbone.redact import scrub
from kgr.backbone.runtime import import_litellm
from kgr.config import BackboneConfig
from kgr.errors import BackboneError

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger("kgr.backbone")

NOT_LLM_MODELS = {"", "offline", "random"}
Check = Callable[[str], "str | None"]  # returns why a reply is unusable, or None when it is fine


@dataclass
class Reply:
    """A reply and how it was obtained; `error` is the check's complaint (None means valid)."""

    text: str
    source: str  # "llm" | "cache"
    key: str
    template: str
    record: CallRecord
    error: str | None = None


def _is_retryable(exc: Exception) -> bool:
    """Timeouts, connection failures, 429 and 5xx are worth retrying; other 4xx are not."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status in (408, 429) or status >= 500
    litellm = import_litellm()
    return isinstance(exc, (litellm.Timeout, litellm.APIConnectionError))


def _error(message: str, kind: str) -> BackboneError:
    """A secret-free BackboneError carrying the `kind` recorded in llm_calls.error_kind."""
    error = BackboneError(scrub(message))
    error.kind = kind
    return error


def endpoint_label(api_base: str) -> str:
    """Where requests go, fit to print: backbone.api_base without user, password, query or fragment."""
    if not api_base.strip():
        return "the provider's default endpoint"
    parts = urlsplit(api_base.strip())
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is not a number: print the address up to its query, scrubbed
        parts = None
    if parts is None or not parts.scheme or not parts.hostname:
        return scrub(api_base.strip().split("?", 1)[0].rsplit("@", 1)[-1])
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return scrub(f"{parts.scheme}://{host}{port}{parts.path}")


def _failure(model: str, api_base: str, purpose: str, exc: Exception, attempts: int) -> BackboneError:
    """A one-line BackboneError naming the model and the endpoint of a failed call."""
    detail = (str(exc).strip().splitlines() or [""])[0][:300]
    kind = type(exc).__name__
    where = f"{endpoint_label(api_base)} (backbone.api_base)" if api_base.strip() else endpoint_label(api_base)
    message = f"{model} at {where} failed for {purpose} after {attempts} attempt(s): {kind}: {detail}"
    return _error(message, kind)


class _Caps:
    """Per-run caps on requests and spend, checked (and reserved) before each request is sent."""

    def __init__(self, max_calls: int, max_cost: float):
        self.max_calls, self.max_cost = max_calls, max_cost
        self.requests, self.spent, self.reserved = 0, 0.0, 0.0
        self._lock = threading.Lock()

    def reserve(self, worst_cost: float | None, model: str) -> None:
        """Claim one request costing at most `worst_cost`, or raise BackboneError if that could break a cap."""
        with self._lock:
            if self.max_calls and self.requests >= self.max_calls:
                message = f"backbone call cap reached: {self.max_calls} requests this run (backbone.max_calls)"
                raise _error(message, "cap")
            if self.max_cost:
                if worst_cost is None:
                    message = f"backbone.max_cost is set but the price of {model} is unknown; add it to backbone.prices"
                    raise _error(message, "cap")
                if self.spent + self.reserved + worst_cost > self.max_cost:
                    raise _error(
                        f"backbone spend cap: ${self.spent:.4f} of ${self.max_cost:.4f} spent and the next call could"
                        f" cost ${worst_cost:.4f} (backbone.max_cost)",
                        "cap",
                    )
            self.requests += 1
            self.reserved += worst_cost or 0.0

    def settle(self, worst_cost: float | None, actual: float) -> None:
        """Replace a reservation by what the request really cost."""
        with self._lock:
            self.reserved -= worst_cost or 0.0
            self.spent += actual


class LLMClient:
    """Calls one LiteLLM model; API keys are read from the environment by LiteLLM and never stored by kgr."""

    def __init__(
        self,
        config: BackboneConfig,
        db: "duckdb.DuckDBPyConnection | None" = None,
        use_cache: bool = True,
        *,
        run_id: str | None = None,
        retry_base: float = 0.5,
        retry_max: float = 20.0,
    ):
        if config.model.strip().lower() in NOT_LLM_MODELS:
            raise BackboneError(f"backbone.model is {config.model!r}, which is a policy, not an LLM")
        self.config = config
        self.model = config.model
        self.cache = ResponseCache(db) if db is not None and use_cache and config.cache else None
        self.log = CallLog(db, run_id)
        self.retry_base, self.retry_max = retry_base, retry_max
        self._gate = threading.Semaphore(max(1, config.concurrency))
        self._caps = _Caps(config.max_calls, config.max_cost)

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        purpose: str,
        stage: str,
        question_id: object = None,
        template: str = "",
        json_mode: bool = False,
        check: Check | None = None,
    ) -> Reply:
        """One chat completion, from the cache when possible; valid replies (per `check`) are cached."""
        params = self._params(json_mode)
        key = cache_key(self.model, messages, params, template)
        qid = None if question_id is None else str(question_id)
        record = CallRecord(self.log.run_id, stage, qid, purpose, self.model)
        hit = self.cache.get(key) if self.cache else None
        # A cached reply that today's check rejects (e.g. a changed validator) is treated as a miss.
        if hit is not None and (check is None or check(hit.text) is None):
            record.cache_hit = True
            record.prompt_tokens, record.completion_tokens = hit.prompt_tokens, hit.completion_tokens
            self.log.record(record)
            return Reply(hit.text, "cache", key, template, record)

        started = time.monotonic()
        try:
            response = self._request(messages, params, record)
        except BackboneError as exc:
            record.latency_ms = (time.monotonic() - started) * 1000
            record.error_kind = getattr(exc, "kind", None)
            if record.attempts:  # a cap refusal sent nothing, so there is no call to record
                self.log.record(record)
            raise
        record.latency_ms = (time.monotonic() - started) * 1000
        text = response.choices[0].message.content or ""
        error = check(text) if check else None
        record.error_kind = "invalid_output" if error else None
        self.log.record(record)
        reply = Reply(text, "llm", key, template, record, error)
        if error is None:
            self.remember(reply)
        return reply

    def remember(self, reply: Reply, key: str | None = None) -> None:
        """Cache a valid reply (under `key` instead of its own, to let a repaired answer serve the original prompt)."""
        if self.cache is not None:
            usage = CachedReply(reply.text, reply.record.prompt_tokens, reply.record.completion_tokens)
            self.cache.put(key or reply.key, self.model, reply.template, usage)

    def _params(self, json_mode: bool) -> dict[str, Any]:
        """The request parameters that affect the output (and so belong in the cache key)."""
        params: dict[str, Any] = {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if json_mode and _supports_json_mode(self.model):
            params["response_format"] = {"type": "json_object"}
        return params

    def _request(self, messages: list[dict[str, str]], params: dict[str, Any], record: CallRecord) -> Any:
        """Send the request, retrying transient failures with jittered exponential backoff."""
        litellm = import_litellm()
        worst = self._worst_cost(messages) if self._caps.max_cost else 0.0
        for attempt in range(1, self.config.max_retries + 2):
            self._caps.reserve(worst, self.model)
            record.attempts = attempt
            try:
                with self._gate:
                    response = litellm.completion(
                        model=self.model,
                        messages=messages,
                        api_base=self.config.api_base or None,
                        timeout=self.config.timeout,
                        num_retries=0,  # retries are ours, so caps and accounting see every request
                        drop_params=True,  # a provider that rejects e.g. temperature still answers
                        **params,
                    )
            except Exception as exc:  # LiteLLM maps every provider error onto its exception classes
                self._caps.settle(worst, 0.0)
                if not _is_retryable(exc) or attempt > self.config.max_retries:
                    raise _failure(self.model, self.config.api_base, record.purpose, exc, attempt) from None
                delay = min(self.retry_max, self.retry_base * 2 ** (attempt - 1))
                log.info("retrying %s after %s", self.model, scrub(type(exc).__name__))
                time.sleep(delay / 2 + random.uniform(0, delay / 2))
                continue
            self._account(response, messages, record)
            self._caps.settle(worst, record.cost_usd)
            return response

    def _account(self, response: Any, messages: list[dict[str, str]], record: CallRecord) -> None:
        """Fill tokens and cost from the reply's usage, pricing by LiteLLM and then by backbone.prices."""
        litellm = import_litellm()
        usage = getattr(response, "usage", None)
        if usage is not None:
            record.prompt_tokens = int(usage.prompt_tokens or 0)
            record.completion_tokens = int(usage.completion_tokens or 0)
        else:  # a server that reports no usage: count as LiteLLM would
            record.prompt_tokens = litellm.token_counter(model=self.model, messages=messages)
            record.completion_tokens = litellm.token_counter(
                model=self.model, text=response.choices[0].message.content or ""
            )
        try:
            record.cost_usd = float(litellm.completion_cost(completion_response=response))
            record.cost_known = True
            return
        except Exception:  # LiteLLM raises for models missing from its price map
            pass
        cost = self._table_cost(record.prompt_tokens, record.completion_tokens)
        record.cost_usd, record.cost_known = (cost, True) if cost is not None else (0.0, False)

    def _table_cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Cost from backbone.prices (USD per 1M tokens), keyed by the model string or its name without provider."""
        prices = self.config.prices.get(self.model) or self.config.prices.get(self.model.split("/", 1)[-1])
        if not prices:
            return None
        return (prompt_tokens * prices.get("input", 0.0) + completion_tokens * prices.get("output", 0.0)) / 1e6

    def _worst_cost(self, messages: list[dict[str, str]]) -> float | None:
        """The most one request could cost: its prompt plus a full max_tokens reply (None when unpriced)."""
        litellm = import_litellm()
        prompt_tokens = litellm.token_counter(model=self.model, messages=messages)
        try:
            return float(sum(litellm.cost_per_token(
                model=self.model, prompt_tokens=prompt_tokens, completion_tokens=self.config.max_tokens
            )))
        except Exception:  # not in LiteLLM's price map
            return self._table_cost(prompt_tokens, self.config.max_tokens)


@functools.cache
def _supports_json_mode(model: str) -> bool:
    """Whether LiteLLM says `model` accepts response_format (JSON mode)."""
    try:
        return "response_format" in (import_litellm().get_supported_openai_params(model=model) or [])
    except Exception:  # an unknown provider: just rely on the prompt asking for JSON
        return False
