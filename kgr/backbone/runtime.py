"""Lazy access to LiteLLM and offline token counting (importing litellm costs seconds, so only on first use)."""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from types import ModuleType

DEFAULT_ENCODING = "o200k_base"


@functools.cache
def import_litellm() -> ModuleType:
    """Import litellm once, configured to stay offline and quiet."""
    # Without this LiteLLM fetches its model price map from the network at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # its "Give Feedback" banners go to stdout on every error
    return litellm


def _bundled_tokenizers() -> Path | None:
    """LiteLLM's bundled tiktoken files (cl100k, o200k, p50k), found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


@functools.cache
def _encoding(name: str):
    """A tiktoken encoding loaded from LiteLLM's bundled files, so no download is ever attempted."""
    folder = _bundled_tokenizers()
    if folder is not None and "CUSTOM_TIKTOKEN_CACHE_DIR" not in os.environ:
        # The same value litellm itself sets on import; tiktoken reads it when loading an encoding.
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    import tiktoken

    return tiktoken.get_encoding(name)


def count_tokens(text: str, model: str | None = None, encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens in `text`: with tiktoken `encoding`, or LiteLLM's tokenizer for `model` when one is given."""
    if model:
        return int(import_litellm().token_counter(model=model, text=text))
    return len(_encoding(encoding).encode(text, disallowed_special=()))
