"""Structured decisions: render a template, ask for JSON, validate, repair once, else use the offline policy."""

from __future__ import annotations

import json
import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, TypeVar

from kgr.backbone import templates
from kgr.backbone.llm import LLMClient
from kgr.errors import BackboneError

T = TypeVar("T")

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_JSON_FOOTER = "\n\nReply with only one JSON object (no prose, no code fences) that matches this JSON schema:\n"
_VALIDATION_ERRORS = (ValueError, KeyError, TypeError, IndexError)


@dataclass(frozen=True)
class DecisionSpec(Generic[T]):
    """A decision: its name (also its template's, unless `template` is given), reply schema and validator."""

    name: str
    schema: dict[str, Any]
    validate: Callable[[dict[str, Any]], T]
    template: str | None = None


@dataclass(frozen=True)
class Decision(Generic[T]):
    """A decided value and where it came from: "llm", "cache" or "fallback"."""

    value: T
    source: str
    reason: str = ""


# What each client's fallbacks were, per question, until the question's record takes them (`take_fallbacks`).
_FALLBACKS: "weakref.WeakKeyDictionary[LLMClient, dict[str, list[str]]]" = weakref.WeakKeyDictionary()
_FALLBACKS_LOCK = threading.Lock()


def _note_fallback(client: LLMClient, question_id: object, purpose: str, why: str, instead: str) -> None:
    """Keep a one-line account of a fallback for the question's record (stage-level ones have no record)."""
    if question_id is None:
        return
    line = f"the backbone's {purpose} reply was unusable ({why}); {instead}"
    with _FALLBACKS_LOCK:
        _FALLBACKS.setdefault(client, {}).setdefault(str(question_id), []).append(line)


def take_fallbacks(client: LLMClient | None, question_id: object) -> list[str]:
    """The fallback accounts noted for a question since they were last taken (each is returned once)."""
    if client is None:
        return []
    with _FALLBACKS_LOCK:
        return _FALLBACKS.get(client, {}).pop(str(question_id), [])


def parse_json(text: str) -> dict[str, Any]:
    """The JSON object in a reply, tolerating code fences and prose around it."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end < start:
            raise ValueError("the reply contains no JSON object") from None
        try:
            value = json.loads(body[start : end + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"the reply is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError("the reply must be a JSON object")
    return value


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def check_schema(value: Any, schema: Mapping[str, Any], path: str = "reply") -> None:
    """Raise ValueError unless `value` fits the JSON-schema subset kgr uses (type, enum, properties, items, ...)."""
    kind = schema.get("type")
    if kind is not None and not _TYPES[kind](value):
        raise ValueError(f"{path} must be of type {kind}, got {_short(value)}")
    # Compare type as well as value: in Python True == 1 and 1.0 == 1.
    if "enum" in schema and not any(type(value) is type(o) and value == o for o in schema["enum"]):
        raise ValueError(f"{path} is {_short(value)}, which is not one of the offered options {schema['enum']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                raise ValueError(f"{path} lacks the required field {name!r}")
        if schema.get("additionalProperties") is False and set(value) - set(properties):
            raise ValueError(f"{path} has unexpected fields {sorted(set(value) - set(properties))}")
        for name, sub in properties.items():
            if name in value:
                check_schema(value[name], sub, f"{path}.{name}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise ValueError(f"{path} needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ValueError(f"{path} may have at most {schema['maxItems']} items")
        if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) < len(value):
            raise ValueError(f"{path} repeats an item")
        for i, item in enumerate(value):
            check_schema(item, schema.get("items", {}), f"{path}[{i}]")


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def interpret(spec: DecisionSpec[T], text: str) -> T:
    """The validated value of a reply, or ValueError saying what is wrong with it."""
    data = parse_json(text)
    check_schema(data, spec.schema)
    try:
        return spec.validate(data)
    except _VALIDATION_ERRORS as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


def _problem(spec: DecisionSpec[Any], text: str) -> str | None:
    """Why a reply is unusable for `spec`, or None."""
    try:
        interpret(spec, text)
    except ValueError as exc:
        return str(exc)
    return None


def _reason(text: str) -> str:
    """The model's own `reason` field, when it gave one."""
    reason = parse_json(text).get("reason", "")
    return reason if isinstance(reason, str) else ""


def decide(
    client: LLMClient | None,
    spec: DecisionSpec[T],
    variables: Mapping[str, object],
    fallback: Callable[[], T],
    *,
    stage: str,
    question_id: object = None,
) -> Decision[T]:
    """Ask the backbone for `spec`; one repair on an invalid reply, then `fallback()` (recorded as such)."""
    if client is None:
        return Decision(fallback(), "fallback", "no LLM backbone")
    system, template = templates.load("system"), templates.load(spec.template or spec.name)
    schema = json.dumps(spec.schema)
    messages = [
        {"role": "system", "content": system.render()},
        {"role": "user", "content": template.render(**variables) + _JSON_FOOTER + schema},
    ]
    ident = f"{system.ident}+{template.ident}"
    call = dict(stage=stage, question_id=question_id, json_mode=True, check=lambda text: _problem(spec, text))
    first = client.complete(messages, purpose=spec.name, template=ident, **call)
    if first.error is None:
        return Decision(interpret(spec, first.text), first.source, _reason(first.text))

    repair = templates.load("repair")
    retry = messages + [
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": repair.render(error=first.error, schema=schema)},
    ]
    second = client.complete(retry, purpose=f"{spec.name}:repair", template=f"{ident}+{repair.ident}", **call)
    if second.error is None:
        # The repaired answer is this prompt's valid answer, so a rerun gets it straight from the cache.
        client.remember(second, key=first.key)
        return Decision(interpret(spec, second.text), second.source, _reason(second.text))
    client.log.mark_fallback(second.record)
    _note_fallback(client, question_id, spec.name, f"invalid after one repair: {second.error}",
                   "the offline policy decided instead")
    return Decision(fallback(), "fallback", f"invalid reply after one repair: {second.error}")


def complete_text(
    client: LLMClient | None,
    template_name: str,
    variables: Mapping[str, object],
    *,
    purpose: str,
    stage: str,
    question_id: object = None,
    fallback: Callable[[], str] | None = None,
) -> Decision[str]:
    """Free text (a summary, a synthesis) from a template; an empty reply uses `fallback()` or raises."""
    if client is None:
        if fallback is None:
            raise BackboneError(f"{purpose} needs an LLM backbone (backbone.model)")
        return Decision(fallback(), "fallback", "no LLM backbone")
    system, template = templates.load("system"), templates.load(template_name)
    messages = [
        {"role": "system", "content": system.render()},
        {"role": "user", "content": template.render(**variables)},
    ]
    reply = client.complete(
        messages,
        purpose=purpose,
        stage=stage,
        question_id=question_id,
        template=f"{system.ident}+{template.ident}",
        check=lambda text: None if text.strip() else "the reply is empty",
    )
    if reply.error is None:
        return Decision(reply.text.strip(), reply.source)
    if fallback is None:
        raise BackboneError(f"{client.model} returned an empty reply for {purpose}")
    client.log.mark_fallback(reply.record)
    _note_fallback(client, question_id, purpose, reply.error, "the offline text was used instead")
    return Decision(fallback(), "fallback", reply.error)


def choice_spec(name: str, n_options: int, *, many: bool = False, max_items: int | None = None) -> DecisionSpec[Any]:
    """A decision picking one (`choice`) or several (`choices`) of `n_options` offered options by index."""
    if n_options < 1:
        raise ValueError(f"{name}: a choice needs at least one option")
    index = {"type": "integer", "enum": list(range(n_options))}
    reason = {"type": "string"}
    if not many:
        schema = {"type": "object", "properties": {"choice": index, "reason": reason}, "required": ["choice"]}
        return DecisionSpec(name, schema, lambda data: data["choice"])
    items: dict[str, Any] = {"type": "array", "items": index, "uniqueItems": True, "minItems": 1}
    if max_items is not None:
        items["maxItems"] = max_items
    schema = {"type": "object", "properties": {"choices": items, "reason": reason}, "required": ["choices"]}
    return DecisionSpec(name, schema, lambda data: list(data["choices"]))
