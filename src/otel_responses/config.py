"""Settings from ``instrument(**config)`` keywords, falling back to environment variables."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .fingerprint import Fingerprinter, key_from_text
from .ledger import DEFAULT_CAPACITY, InMemoryLedger, Ledger

ENV_PREFIX = "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_"
DEFAULT_MAX_ITEM_TYPES = 128

InstructionsVersion = str | Callable[[str | None], str | None] | None

_log = logging.getLogger(__name__)
_TRUE = frozenset({"1", "true", "yes", "on"})


class ConfigError(ValueError):
    """A setting has a value the instrumentation cannot use."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the wrappers need to know; built once per ``instrument()``."""

    zdr: bool
    instructions_version: InstructionsVersion
    max_item_types: int
    fingerprinter: Fingerprinter
    strict: bool
    ledger: Ledger


def _env(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(ENV_PREFIX + name)
    return value if value not in (None, "") else None


def _as_bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in _TRUE
    raise ConfigError(f"{name} must be a bool, got {type(value).__name__}")


def _as_positive_int(name: str, value: object) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}") from None
    if number < 1:
        raise ConfigError(f"{name} must be a positive integer, got {number}")
    return number


def settings_from(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    """Keywords win over environment variables; unknown keywords are an error, not silently ignored."""
    env = os.environ if environ is None else environ
    known = {"zdr", "instructions_version", "max_item_types", "hash_key", "strict", "ledger", "ledger_capacity"}
    unknown = set(config) - known
    if unknown:
        raise ConfigError(f"unknown instrument() option(s): {', '.join(sorted(unknown))}")

    zdr = _as_bool("zdr", config.get("zdr", _env("ZDR", env) or False))
    version = config.get("instructions_version", _env("INSTRUCTIONS_VERSION", env))
    if version is not None and not (isinstance(version, str) or callable(version)):
        raise ConfigError("instructions_version must be a string or a callable")
    max_types = _as_positive_int(
        "max_item_types", config.get("max_item_types", _env("MAX_ITEM_TYPES", env) or DEFAULT_MAX_ITEM_TYPES)
    )
    raw_key = config.get("hash_key", _env("HASH_KEY", env))
    if raw_key is not None and not isinstance(raw_key, (str, bytes)):
        raise ConfigError("hash_key must be str or bytes")
    key = key_from_text(raw_key) if isinstance(raw_key, str) else raw_key
    strict = _as_bool("strict", config.get("strict", _env("STRICT", env) or False))
    ledger = config.get("ledger")
    if ledger is None:
        capacity = _as_positive_int(
            "ledger_capacity", config.get("ledger_capacity", _env("LEDGER_CAPACITY", env) or DEFAULT_CAPACITY)
        )
        ledger = InMemoryLedger(capacity)
    elif not all(callable(getattr(ledger, name, None)) for name in ("get", "locate", "record", "enter", "leave", "unavailable")):
        raise ConfigError("ledger must implement otel_responses.ledger.Ledger")
    return Settings(zdr, version, max_types, Fingerprinter(key), strict, ledger)


def resolve_version(version: InstructionsVersion, instructions: str | None) -> str | None:
    """The configured instructions version; a failing resolver yields none rather than an error."""
    if version is None or isinstance(version, str):
        return version
    try:
        resolved = version(instructions)
    except Exception:  # a user callback must not break the app's call
        _log.debug("otel-responses: the instructions_version resolver failed; no version recorded")
        return None
    return resolved if isinstance(resolved, str) else None
