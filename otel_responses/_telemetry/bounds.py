"""Bounds on the strings this package exports: lengths on spans, validated values on metrics.

Model names, ids, codes and item types come from the app or the server: nothing bounds their length or how many
distinct ones there are. Two rules, applied in ``telemetry`` (the only module that writes telemetry):

- **Span strings** (attribute values, list entries, event attributes, the span name, the status description)
  are cut to ``MAX_LENGTH`` characters (256) when longer, as the OpenTelemetry SDK's own
  ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` truncation does (off by default). Real values are far shorter: response,
  conversation and item ids are about 50 characters, request ids 36, model names and Azure deployment names at
  most 64; 256 leaves room for any real one. Text is kept as sent (a span is one call: it is the place to see
  what an app really sent), only shorter.
- **Metric attribute values** that come from outside (``gen_ai.request.model``, ``gen_ai.response.model``,
  ``error.type``, ``server.address``) must fit a pattern, else they are recorded as ``_OTHER`` (the semantic
  conventions' value for "outside the known set"). A metric series lives as long as the process: a value that
  is too long, or carries spaces or control characters, is a bug or an attack, not a model.

The number of series is left to the OpenTelemetry SDK's per-instrument cardinality limit (2000 attribute sets by
default, then one ``otel.metric.overflow=true`` series): no first-come list of "known" models here would let a
model deployed later in a long-lived process through. What this module keeps is a bounded cache of model names
already checked (emptied when full), so the check costs one dictionary lookup on the hot path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from opentelemetry.util.types import AttributeValue

# Span strings: longest value kept, in characters.
MAX_LENGTH: Final = 256
# Longest list of free-form strings put on a span (the request's `include` values; item type lists have their own
# bound, below). The API knows fewer than ten `include` values.
MAX_LIST: Final = 64
# Longest item-type list put on a span: a longer one keeps how the history starts and how it ends (`bounded_types`).
MAX_ITEM_TYPES: Final = 128

OTHER: Final = "_OTHER"

# Model names as providers spell them: `gpt-5.4`, `gpt-4o-2024-08-06`, `ft:gpt-4o-mini:org:name:id`,
# `openai/gpt-oss-120b`, `us.anthropic.claude-3-5-sonnet-20241022-v2:0`, `hf.co/org/Model-GGUF:Q4_K_M`,
# `gemini-1.5-pro@001`, Azure deployment names (letters, digits, `-`, `_`, `.`; at most 64).
MAX_MODEL: Final = 128
MODEL_PATTERN: Final = re.compile(r"[A-Za-z0-9._:/@+-]{1,128}")
# Error codes (`previous_response_not_found`, `server_error`) and exception class names (`BadRequestError`,
# `APIError`, nested qualnames `Outer.Inner`).
MAX_CODE: Final = 64
CODE_PATTERN: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# Host names (DNS: 253 characters), IPv4 and IPv6 addresses (with a zone: `fe80::1%eth0`).
MAX_HOST: Final = 253
HOST_PATTERN: Final = re.compile(r"[A-Za-z0-9._:%\[\]-]{1,253}")

_CACHE_SIZE: Final = 1024  # distinct model (or host) names remembered as checked; emptied when full


def cap(value: str) -> str:
    """``value``, cut to ``MAX_LENGTH`` characters; the same object when it is short enough."""
    return value if len(value) <= MAX_LENGTH else value[:MAX_LENGTH]


def cap_all(values: list[str]) -> list[str]:
    """Every string of ``values`` capped; the same list when none is too long (the usual case: one C-level
    pass, no copy of the list; for a short list, one join is the cheapest proof that no entry is long)."""
    if not values or (len(values) <= 16 and len("".join(values)) <= MAX_LENGTH) or max(map(len, values)) <= MAX_LENGTH:
        return values
    return [v if len(v) <= MAX_LENGTH else v[:MAX_LENGTH] for v in values]


def cap_list(values: Sequence[str]) -> list[str]:
    """A list of free-form strings for a span: at most ``MAX_LIST`` of them, each capped."""
    return cap_all(list(values[:MAX_LIST]))


def cap_value(value: AttributeValue) -> AttributeValue:
    """An attribute value with its strings capped (a string, or a sequence of them); others unchanged."""
    if isinstance(value, str):
        return value if len(value) <= MAX_LENGTH else value[:MAX_LENGTH]
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):  # attribute lists are homogeneous
        strings: Sequence[str] = value
        if max(map(len, strings)) <= MAX_LENGTH:
            return value
        return [v if len(v) <= MAX_LENGTH else v[:MAX_LENGTH] for v in strings]
    return value


def cap_attributes(attributes: Mapping[str, AttributeValue]) -> Mapping[str, AttributeValue]:
    """``attributes`` with every string value capped; the same mapping when nothing is too long."""
    for value in attributes.values():
        if cap_value(value) is not value:
            return {key: cap_value(value) for key, value in attributes.items()}
    return attributes


class _Checked:
    """A bounded memo of names already checked against a pattern: name -> the name itself, or ``OTHER``.

    Only names short enough to pass are looked up (a longer one is ``OTHER`` at once, without hashing it) or
    kept, so the memo holds at most ``_CACHE_SIZE`` names of at most ``longest`` characters. Emptied when full,
    never closed to new names: a name first seen late is checked like any other. Safe under threads: a lost
    insertion or a clear between two lookups only costs a new check."""

    __slots__ = ("_known", "_longest", "_pattern")

    def __init__(self, pattern: re.Pattern[str], longest: int) -> None:
        self._pattern = pattern
        self._longest = longest
        self._known: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if len(name) > self._longest:
            return OTHER
        known = self._known.get(name)
        if known is None:
            known = name if self._pattern.fullmatch(name) else OTHER
            if len(self._known) >= _CACHE_SIZE:
                self._known.clear()
            self._known[name] = known
        return known

    def __len__(self) -> int:
        return len(self._known)


_models = _Checked(MODEL_PATTERN, MAX_MODEL)
_hosts = _Checked(HOST_PATTERN, MAX_HOST)


def metric_model(name: str | None) -> str | None:
    """A model name fit for a metric attribute: itself when it looks like one, else ``OTHER``."""
    return None if name is None else _models(name)


def metric_host(host: str | None) -> str | None:
    """A server host name or address fit for a metric attribute, else ``OTHER``."""
    return None if host is None else _hosts(host)


def metric_code(code: str) -> str:
    """An error code or exception class name fit for ``error.type`` on a metric, else ``OTHER``. Errors are
    rare: checked each time, no memo."""
    return code if len(code) <= MAX_CODE and CODE_PATTERN.fullmatch(code) else OTHER
