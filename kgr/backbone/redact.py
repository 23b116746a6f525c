"""Scrub API keys and other secrets from any text kgr stores or raises."""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{6,}|\bBearer\s+[A-Za-z0-9._\-]{8,}")
MASK = "[REDACTED]"


def _secret_values() -> list[str]:
    """Values of environment variables whose names suggest a credential, longest first."""
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


def scrub(text: str) -> str:
    """`text` with secret env values and key-like strings (sk-..., Bearer ...) masked."""
    # Read the environment each time: keys may be set after kgr was imported.
    for value in _secret_values():
        text = text.replace(value, MASK)
    return _KEY_LIKE.sub(MASK, text)
