"""The LLM backbone: LiteLLM client, response cache, call accounting, prompt templates, structured decisions.

Nothing here imports litellm until a call needs it (`import_litellm`), so importing kgr stays fast.
"""

from kgr.backbone.accounting import CallLog, CallRecord, Usage
from kgr.backbone.cache import ResponseCache, cache_key
from kgr.backbone.decide import Decision, DecisionSpec, check_schema, choice_spec, complete_text, decide, parse_json
from kgr.backbone.llm import LLMClient, Reply
from kgr.backbone.redact import scrub
from kgr.backbone.runtime import count_tokens, import_litellm
from kgr.backbone.templates import Template, load as load_template

__all__ = [
    "CallLog",
    "CallRecord",
    "Decision",
    "DecisionSpec",
    "LLMClient",
    "Reply",
    "ResponseCache",
    "Template",
    "Usage",
    "cache_key",
    "check_schema",
    "choice_spec",
    "complete_text",
    "count_tokens",
    "decide",
    "import_litellm",
    "load_template",
    "parse_json",
    "scrub",
]
