"""Deterministic token accounting: plausible numbers that depend only on the texts involved."""

from __future__ import annotations

from typing import Any

ITEM_OVERHEAD = 4
"""Tokens charged per context item for its role/type framing."""

REASONING_BASE = 8
"""Tokens every reasoning pass costs on top of its notes, so reasoning_tokens is always > 0."""


def count(text: str) -> int:
    """Roughly one token per four characters, rounded up."""
    return (len(text) + 3) // 4


def item_tokens(text: str) -> int:
    """Tokens of one context item whose plain text is `text`."""
    return count(text) + ITEM_OVERHEAD


def reasoning_tokens(notes: str) -> int:
    """Tokens spent thinking the given private notes."""
    return count(notes) + REASONING_BASE


def usage(input_tokens: int, cached_tokens: int, output_tokens: int, reasoning: int) -> dict[str, Any]:
    """The `usage` object of a response, as `openai.types.responses.ResponseUsage` expects it."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }
