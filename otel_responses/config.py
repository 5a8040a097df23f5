"""Settings from ``instrument(**config)`` keywords, falling back to environment variables."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ._analysis.facts import InstructionsVersion
from ._fingerprint import Fingerprinter, key_from_text
from ._telemetry.pricing import PriceError, PriceTable, load_prices
from .ledger import DEFAULT_CAPACITY, LEDGER_METHODS, InMemoryLedger, Ledger, SharedLedger, adapt

ENV_PREFIX = "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_"
DEFAULT_MAX_ITEM_TYPES = 128
# A shared ledger's entries expire after an hour: long enough for the turns of a conversation to reach other
# workers (a user's think time, tool runs, a background response polled to its end), short enough that Redis
# holds about an hour of traffic (an entry and its keys take well under 1 KB). A chain continued after that is
# not checked against its parent: a missed signal, never a false one.
DEFAULT_LEDGER_TTL = 3600
# Reads sit on the call path: 50 ms is generous for a Redis in the same network (a loopback read takes about
# 0.1 ms) and bounds what a stalled Redis can add to a call.
DEFAULT_LEDGER_TIMEOUT = 0.05
_HASH_KEY_HINT = (
    "a shared ledger needs the same hash_key in every process (a per-process random key would make fingerprints and "
    "instructions hashes never match across processes): set hash_key=... or OTEL_INSTRUMENTATION_OPENAI_RESPONSES_"
    "HASH_KEY to one long random secret for the whole fleet, e.g. the output of "
    "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
)


_log = logging.getLogger(__name__)


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
    prices: PriceTable | None = None  # the user's price table: cost is recorded only with one
    chunk_timing: bool = False  # record gen_ai.client.operation.time_per_output_chunk (one SDK record per chunk)


def _env(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(ENV_PREFIX + name)
    return value if value not in (None, "") else None


def _bool_setting(config: Mapping[str, Any], name: str, environ: Mapping[str, str]) -> bool:
    """A keyword must be a bool. An environment variable follows the OpenTelemetry specification for booleans:
    only ``true`` (any case) is true; a value other than ``true``, ``false`` or empty is false, with a warning that
    names the variable."""
    if name in config:
        value = config[name]
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be True or False, got {type(value).__name__}")
        return value
    variable = ENV_PREFIX + name.upper()
    text = environ.get(variable, "").strip().lower()
    if text not in ("", "true", "false"):
        _log.warning("otel-responses: %s must be true or false; its value is taken as false", variable)
    return text == "true"


def _as_positive_int(name: str, value: object) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}") from None
    if number < 1:
        raise ConfigError(f"{name} must be a positive integer, got {number}")
    return number


def _as_seconds(name: str, value: object) -> float:
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError
        number = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
    return number


def _redis_ledger(url: object, ttl: int, timeout: float, capacity: int, accept_unsigned: bool, cluster: bool) -> Ledger:
    """A ``RedisLedger`` for ``ledger_url`` (a Redis Cluster with ``ledger_cluster``: one or several seed nodes,
    comma-separated or, as a keyword, a list); errors never repeat a URL (it may hold a password)."""
    from .ledger.redis import RedisLedger, RedisURLError, check_urls

    try:
        valid = check_urls(url, cluster=cluster)
    except ValueError as exc:
        raise ConfigError(f"ledger_url: {exc}") from None
    try:
        return RedisLedger(
            valid,
            ttl_seconds=ttl,
            timeout_seconds=timeout,
            local_capacity=capacity,
            accept_unsigned=accept_unsigned,
            cluster=cluster,
        )
    except ImportError:
        raise ConfigError("ledger_url needs the redis package: pip install 'otel-responses[redis]'") from None
    except RedisURLError as exc:
        raise ConfigError(f"ledger_url: {exc}") from None
    except ValueError:
        raise ConfigError("ledger_url is not a Redis URL the redis package can use") from None


def settings_from(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    """Keywords win over environment variables; unknown keywords are an error, not silently ignored."""
    env = os.environ if environ is None else environ
    known = {
        "zdr",
        "instructions_version",
        "max_item_types",
        "hash_key",
        "strict",
        "ledger",
        "ledger_capacity",
        "ledger_url",
        "ledger_ttl",
        "ledger_timeout",
        "ledger_accept_unsigned",
        "ledger_cluster",
        "prices",
        "chunk_timing",
    }
    unknown = set(config) - known
    if unknown:
        raise ConfigError(f"unknown instrument() option(s): {', '.join(sorted(unknown))}")

    zdr = _bool_setting(config, "zdr", env)
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
    strict = _bool_setting(config, "strict", env)
    metering = _metering_settings(config, env)  # before a ledger is built: a bad table leaves nothing behind
    ledger = config.get("ledger")
    url = config.get("ledger_url", _env("LEDGER_URL", env))
    ttl = _as_positive_int("ledger_ttl", config.get("ledger_ttl", _env("LEDGER_TTL", env) or DEFAULT_LEDGER_TTL))
    timeout = _as_seconds(
        "ledger_timeout", config.get("ledger_timeout", _env("LEDGER_TIMEOUT", env) or DEFAULT_LEDGER_TIMEOUT)
    )
    if ledger is not None and config.get("ledger_url") is not None:
        raise ConfigError("give either ledger or ledger_url, not both")
    shared = callable(getattr(ledger, "bind", None)) if ledger is not None else url is not None
    if shared and not raw_key:
        raise ConfigError(_HASH_KEY_HINT)
    if ledger is None:
        capacity = _as_positive_int(
            "ledger_capacity", config.get("ledger_capacity", _env("LEDGER_CAPACITY", env) or DEFAULT_CAPACITY)
        )
        accept_unsigned = _bool_setting(config, "ledger_accept_unsigned", env)
        cluster = _bool_setting(config, "ledger_cluster", env)
        ledger = (
            InMemoryLedger(capacity)
            if url is None
            else _redis_ledger(url, ttl, timeout, capacity, accept_unsigned, cluster)
        )
    else:
        ledger = adapt(ledger)  # a ledger written for the previous protocol, for one release
        missing = [name for name in LEDGER_METHODS if not callable(getattr(ledger, name, None))]
        if missing:
            raise ConfigError(f"ledger must implement otel_responses.ledger.Ledger: no {', '.join(missing)}")
    fingerprinter = Fingerprinter(key)
    if shared:
        cast("SharedLedger", ledger).bind(fingerprinter)  # the shared store is namespaced by this key's id
    return Settings(zdr, version, max_types, fingerprinter, strict, ledger, *metering)


def _metering_settings(config: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[PriceTable | None, bool]:
    """``prices`` (a mapping or a file path; the environment variable: a file path) and ``chunk_timing``."""
    raw = config.get("prices", _env("PRICES", environ))
    try:
        prices = None if raw is None else load_prices(raw)
    except PriceError as exc:
        raise ConfigError(str(exc)) from None
    return prices, _bool_setting(config, "chunk_timing", environ)
