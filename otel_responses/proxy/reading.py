"""A request body read as the API reads it, or the reason it cannot be: decompressed (bounded) when it came
compressed, parsed as JSON by a parser that cannot hit Python's recursion limit, and kept only when it is a JSON
object.

The parser: orjson (the ``proxy`` extra) reads a body in about half the standard library's time and stops at 1,024
levels of nesting. What it rejects that the standard library takes (``NaN``, a byte order mark, UTF-16, a lone
surrogate) is read again by the standard library, but only when it is nested at most ``FALLBACK_DEPTH`` levels deep:
the standard library's parser takes one level of Python's recursion per level of nesting, and would raise
``RecursionError`` near a thousand. Without orjson, every body takes that path.
"""

from __future__ import annotations

import importlib
import itertools
import json
import re
from collections.abc import Callable
from typing import Any, Final

from . import unrecorded
from .encoding import NotAnalysed, decoder

FALLBACK_DEPTH: Final = 500  # the standard library's parser, at most this deep: half of Python's recursion limit

# Keys the SDK's keywords have and a request body never does (an app's `extra_body` is merged into the body before
# it is sent): read from a body, they would make the facts differ from what the API reads.
_SDK_ONLY = frozenset({"extra_body", "extra_headers", "extra_query", "timeout"})
# A JSON string, written as an unrolled loop (no backtracking): what the depth count skips.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class Unreadable(Exception):
    """The body cannot be read; ``reason`` is one of ``unrecorded.REASONS``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _fast_loads() -> Callable[[bytes | str], Any] | None:
    try:
        module: Any = importlib.import_module("orjson")
    except ImportError:
        return None
    loads: Callable[[bytes | str], Any] = module.loads
    return loads


_loads = _fast_loads()


def depth(data: bytes) -> int:
    """How deeply the JSON in ``data`` nests arrays and objects (brackets inside strings do not count); counted in C
    (a regular expression, ``translate``, ``accumulate``), without recursion."""
    skeleton = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, skeleton)), default=0)


def loads(data: bytes | str) -> Any:
    """The JSON value of ``data``; ``Unreadable`` (``invalid_json`` or ``too_deep``) when it has none this can read
    without hitting the recursion limit."""
    if _loads is not None:
        try:
            return _loads(data)
        except ValueError:  # orjson.JSONDecodeError; read again below
            pass
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if depth(raw) > FALLBACK_DEPTH:
        raise Unreadable(unrecorded.TOO_DEEP)
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise Unreadable(unrecorded.INVALID_JSON) from None


def request_keywords(body: bytes, content_encoding: str | None, limit: int) -> dict[str, Any]:
    """The body as the SDK method's keywords: its JSON object, decompressed first (within ``limit`` bytes) if it came
    compressed; ``Unreadable`` with the reason when it is not one this can read."""
    if content_encoding:
        decode = decoder(content_encoding, limit)
        if decode is None:
            raise Unreadable(unrecorded.UNSUPPORTED_ENCODING)
        try:
            body = decode(body)
        except NotAnalysed as exc:
            if exc.over_limit:
                raise Unreadable(unrecorded.TOO_LARGE) from None
            reason = unrecorded.UNSUPPORTED_ENCODING if exc.unsupported else unrecorded.CORRUPT_ENCODING
            raise Unreadable(reason) from None
    elif len(body) > limit:
        raise Unreadable(unrecorded.TOO_LARGE)
    parsed = loads(body)
    if type(parsed) is not dict:
        raise Unreadable(unrecorded.INVALID_JSON)
    if not _SDK_ONLY.isdisjoint(parsed):
        parsed = {key: value for key, value in parsed.items() if key not in _SDK_ONLY}
    return parsed
