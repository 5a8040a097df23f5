"""Settings from ``instrument(**config)`` keywords, falling back to environment variables: one option table
(``OPTIONS``) that the keyword checks, the environment reading and the documentation all read.

A keyword with a value the instrumentation cannot use raises ``ConfigError`` naming the keyword: the app's own code
passed it. An environment variable with such a value logs a warning naming the variable and the value used instead,
and instrumentation goes on, as OpenTelemetry's own settings do: under ``opentelemetry-instrument`` one mistyped
variable must not stop this instrumentation, nor the ones loaded after it. No message ever repeats a value that may
hold a secret (a hash key, a Redis URL with its password).
"""

from __future__ import annotations

import difflib
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ._analysis.facts import InstructionsVersion
from ._fingerprint import Fingerprinter, key_from_text
from ._telemetry.signal_log import DEFAULT as DEFAULT_LOG_SIGNALS
from ._telemetry.signal_log import OFF, parse_level
from .docs_links import page_url
from .ledger import (
    DEFAULT_CAPACITY,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TTL_SECONDS,
    LEDGER_METHODS,
    InMemoryLedger,
    Ledger,
    SharedLedger,
)
from .version import install_hint

__all__ = [
    "ENV_PREFIX",
    "GEN_AI_LATEST_EXPERIMENTAL",
    "KEYWORDS",
    "OPTIONS",
    "ConfigError",
    "Option",
    "Settings",
    "settings_from",
]

if TYPE_CHECKING:
    from ._telemetry.pricing import PriceTable

ENV_PREFIX = "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_"
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
    fingerprinter: Fingerprinter
    strict: bool
    ledger: Ledger
    prices: PriceTable | None = None  # the user's price table: cost is recorded only with one
    chunk_timing: bool = False  # record the time per output chunk (one SDK record per chunk)
    genai_events: bool = True  # gen_ai.evaluation.result per signal, gen_ai.client.operation.exception per failure
    log_signals: str = DEFAULT_LOG_SIGNALS  # the console line's level: off, error, warning, info
    session_id_from_lineage: bool = False  # session.id = the lineage id (baggage's session.id wins)
    latest_semconv: bool = False  # emit the newest GenAI conventions' names (`gen_ai_latest_experimental`)


# -- the option table -----------------------------------------------------------------------------------------

Parse = Callable[[Any, bool], Any]  # (a keyword's value or a variable's text, whether it is the text) -> the setting


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its keyword, how a value is read (a ``ValueError`` says why one cannot be used), its default,
    and, for the documentation, what it means and what an unusable environment value gives instead."""

    name: str
    parse: Parse
    default: Any
    meaning: str
    default_text: str  # the default, as the documentation says it
    fallback: str = ""  # what an unusable environment value gives; empty: the default
    env: bool = True  # has an environment variable (a ledger object can only be passed in code)
    keyword: bool = True  # an ``instrument()`` keyword; else read from the environment only (code has a better way)
    secret: bool = False  # its value is never repeated in a message
    env_name: str = ""  # a variable the OpenTelemetry ecosystem names, instead of this package's prefix

    @property
    def variable(self) -> str | None:
        if not self.env:
            return None
        return self.env_name or ENV_PREFIX + self.name.upper()

    @property
    def instead(self) -> str:
        """What an unusable environment value is replaced with, in words."""
        return self.fallback or f"the default ({self.default_text})"


def _flag(value: Any, text: bool) -> bool:
    """A keyword: True or False. A variable: ``true`` or ``false``, any case (the OpenTelemetry convention)."""
    if not text:
        if isinstance(value, bool):
            return value
        raise ValueError(f"must be True or False, got {type(value).__name__}")
    word = str(value).strip().lower()
    if word not in ("true", "false"):
        raise ValueError("must be true or false")
    return word == "true"


def _positive_int(value: Any, text: bool) -> int:
    if isinstance(value, (bool, float)):
        raise ValueError("must be a positive integer")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError("must be a positive integer") from None
    if number < 1:
        raise ValueError("must be a positive integer")
    return number


def _seconds(value: Any, text: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("must be a positive number of seconds")
    try:
        number = float(value)
    except ValueError:
        raise ValueError("must be a positive number of seconds") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError("must be a positive number of seconds")
    return number


def _version(value: Any, text: bool) -> InstructionsVersion:
    if isinstance(value, str) or (not text and callable(value)):
        return cast("InstructionsVersion", value)
    raise ValueError("must be a string or a callable")


def _key(value: Any, text: bool) -> bytes:
    if isinstance(value, str):
        return key_from_text(value) if value else b""
    if isinstance(value, bytes):
        return value
    raise ValueError("must be str or bytes")


def _anything(value: Any, text: bool) -> Any:
    return value


def _ledger_object(value: Any, text: bool) -> Ledger | None:
    if value is None:
        return None
    missing = [name for name in LEDGER_METHODS if not callable(getattr(value, name, None))]
    if missing:
        raise ValueError(f"must implement otel_responses.ledger.Ledger: no {', '.join(missing)}")
    return cast("Ledger", value)


def _log_level(value: Any, text: bool) -> str:
    return parse_level(value)


#: The GenAI value of ``OTEL_SEMCONV_STABILITY_OPT_IN``: emit the newest experimental conventions, not the old ones.
GEN_AI_LATEST_EXPERIMENTAL = "gen_ai_latest_experimental"


def _opt_in(value: Any, text: bool) -> frozenset[str]:
    """``OTEL_SEMCONV_STABILITY_OPT_IN`` as ``opentelemetry-instrumentation`` reads it (its ``_semconv`` module,
    private, so reimplemented): comma-separated values, each stripped; values for other instrumentations (``http``,
    ``database``) and unknown ones are kept and ignored here."""
    return frozenset(part.strip() for part in str(value).split(","))


def _prices(value: Any, text: bool) -> PriceTable | None:
    """A price table; the pricing code is loaded only when one is given."""
    from ._telemetry.pricing import PriceError, load_prices

    try:
        return load_prices(value)
    except PriceError as exc:
        raise ValueError(str(exc)) from None


OPTIONS: tuple[Option, ...] = (
    Option(
        "zdr",
        _flag,
        False,
        "the organisation runs under zero data retention (recorded as `openai_responses.zdr`)",
        "`false`",
    ),
    Option(
        "instructions_version",
        _version,
        None,
        "a string, or (keyword only) a callable `f(instructions: str | None) -> str | None`, recorded as "
        "`openai_responses.instructions.version`",
        "none",
    ),
    Option(
        "hash_key",
        _key,
        b"",
        "key of the instructions hash and the in-memory fingerprints; give every process of a fleet the same key to "
        "make hashes comparable across processes (required with a shared ledger)",
        "random per process",
        secret=True,
    ),
    Option(
        "strict",
        _flag,
        False,
        "refuse requests that would lose context, before they are sent (strict mode)",
        "`false`",
    ),
    Option(
        "ledger",
        _ledger_object,
        None,
        "any object implementing `otel_responses.ledger.Ledger`, such as an `otel_responses.ledger.redis.RedisLedger`",
        "an `InMemoryLedger`",
        env=False,
    ),
    Option(
        "ledger_capacity",
        _positive_int,
        DEFAULT_CAPACITY,
        "how many recent responses the ledger remembers (with a shared ledger: in this process)",
        f"`{DEFAULT_CAPACITY}`",
    ),
    Option(
        "ledger_url",
        _anything,  # checked with the cluster setting, when the ledger is built
        None,
        "a `redis://` or `rediss://` URL: share the ledger with the other processes of a fleet (needs `hash_key` and "
        "the `redis` extra); a Redis Cluster: any node's URL with `?cluster=true`, or several seed nodes' full URLs "
        "separated by commas (the keyword: also a list)",
        "none: in-process",
        fallback="the in-process ledger",
        secret=True,
    ),
    Option(
        "ledger_ttl",
        _positive_int,
        DEFAULT_TTL_SECONDS,
        "seconds an entry of the shared ledger lives (in code: `RedisLedger(url, ttl_seconds=...)` as `ledger`)",
        f"`{DEFAULT_TTL_SECONDS}`",
        keyword=False,
    ),
    Option(
        "ledger_timeout",
        _seconds,
        DEFAULT_TIMEOUT_SECONDS,
        "seconds a read of the shared ledger may take before the call goes on without it (in code: "
        "`RedisLedger(url, timeout_seconds=...)` as `ledger`)",
        f"`{DEFAULT_TIMEOUT_SECONDS}`",
        keyword=False,
    ),
    Option(
        "prices",
        _prices,
        None,
        "a price table (a mapping, or the path of a JSON or TOML file; the variable: a path): records cost",
        "none: no cost recorded",
        fallback="no price table",
    ),
    Option(
        "chunk_timing",
        _flag,
        False,
        "record the time per output chunk (`gen_ai.client.operation.time_per_output_chunk`; in the latest dialect "
        "`gen_ai.client.inference.time_per_output_chunk`), one histogram record per streamed chunk",
        "`false`",
    ),
    Option(
        "genai_events",
        _flag,
        True,
        "emit each signal as a `gen_ai.evaluation.result` log event and each failed call as a "
        "`gen_ai.client.operation.exception` one, through the OpenTelemetry Logs API (no record is built without "
        "a logger provider)",
        "`true`",
    ),
    Option(
        "log_signals",
        _log_level,
        DEFAULT_LOG_SIGNALS,
        "log one line per signal at or above this severity through the `otel_responses` logger: `off`, `error`, "
        "`warning` or `info`; once per signal per process (`info`: once per signal and lineage), at most 10 lines "
        "a minute; `off` by default under `OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED=true` with "
        "`genai_events` on",
        f"`{DEFAULT_LOG_SIGNALS}`",
    ),
    Option(
        "session_id_from_lineage",
        _flag,
        False,
        "set `session.id` to the lineage id on every span of a lineage, so that backends group a conversation "
        "as one session; a `session.id` in OpenTelemetry baggage wins",
        "`false`",
    ),
    Option(
        "semconv_opt_in",
        _opt_in,
        frozenset(),
        "which GenAI conventions to emit, comma-separated as OpenTelemetry's instrumentations read it: "
        f"`{GEN_AI_LATEST_EXPERIMENTAL}` for the newest names ([dialects](records.md#dialects)); any other value is "
        "ignored",
        "none: the default dialect",
        env_name="OTEL_SEMCONV_STABILITY_OPT_IN",
        keyword=False,
    ),
)
BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
#: The keywords ``instrument()`` takes.
KEYWORDS: tuple[str, ...] = tuple(option.name for option in OPTIONS if option.keyword)
# Names that are not settings, and what does their job: said instead of a near name when one is given.
_ELSEWHERE = {
    "max_item_types": "item-type lists on a span are bounded at 128 types",
    "ledger_cluster": "a Redis Cluster is read from ledger_url (any node's URL with ?cluster=true, or several seed "
    "URLs)",
    "ledger_ttl": "pass ledger=RedisLedger(url, ttl_seconds=...), or set OTEL_INSTRUMENTATION_OPENAI_RESPONSES_"
    "LEDGER_TTL",
    "ledger_timeout": "pass ledger=RedisLedger(url, timeout_seconds=...), or set OTEL_INSTRUMENTATION_OPENAI_RESPONSES_"
    "LEDGER_TIMEOUT",
    "semconv_opt_in": f"set OTEL_SEMCONV_STABILITY_OPT_IN={GEN_AI_LATEST_EXPERIMENTAL}, as for OpenTelemetry's "
    "other instrumentations",
    "ledger_accept_unsigned": "a shared ledger reads only values sealed with the fleet's hash_key",
}


def unknown_keyword(name: str, known: Iterable[str] = KEYWORDS) -> str:
    """How a keyword that is not one of ``known`` is named in an error: with what does its job, or the nearest one."""
    if name in _ELSEWHERE:
        return f"{name} ({_ELSEWHERE[name]})"
    near = nearest(name, known)
    return f"{name} (did you mean {near}?)" if near else name


# Read when what they name is built (the URL is checked with the cluster setting; a price table is a file).
_READ_AS_BUILT = frozenset({"ledger_url", "prices"})


class _Values:
    """The settings of one ``instrument()``: keywords first, then variables; where each came from."""

    def __init__(self, config: Mapping[str, Any], environ: Mapping[str, str]) -> None:
        unknown = sorted(set(config) - set(KEYWORDS))
        if unknown:
            raise ConfigError(f"unknown instrument() option(s): {', '.join(map(unknown_keyword, unknown))}")
        self._config = config
        self._environ = environ
        self._read: dict[str, Any] = {}  # each setting read once: an unusable variable is said once

    def given(self, name: str) -> bool:
        """The keyword or the variable was set (to anything)."""
        option = BY_NAME[name]
        variable = option.variable
        return name in self._config or (variable is not None and self._environ.get(variable, "").strip() != "")

    def from_keyword(self, name: str) -> bool:
        return name in self._config

    def get(self, name: str) -> Any:
        if name in self._read:
            return self._read[name]
        value = self._read[name] = self._get(name)
        return value

    def _get(self, name: str) -> Any:
        option = BY_NAME[name]
        if name in self._config:
            value = self._config[name]
            try:
                return option.parse(value, False)
            except ValueError as exc:
                raise ConfigError(_message(option, exc, value)) from None
        variable = option.variable
        text = self._environ.get(variable, "") if variable is not None else ""
        if not text.strip():
            return option.default
        try:
            return option.parse(text, True)
        except ValueError as exc:
            self.warn(name, _message(option, exc, None))
            return option.default

    def warn(self, name: str, why: str) -> None:
        """A variable's value cannot be used: say so, naming the variable and what is used instead."""
        option = BY_NAME[name]
        _log.warning("otel-responses: %s: %s; using %s instead", option.variable, why, option.instead)


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a mistyped one (``stirct``: ``strict``), or None when none is close."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def warn_unknown_variables(environ: Mapping[str, str]) -> None:
    """One warning for each variable under ``ENV_PREFIX`` that is no setting (a typo would otherwise be ignored
    without a word), naming the nearest known one. Its value is never repeated (it may be a secret)."""
    known = {option.name.upper(): option.variable for option in OPTIONS if option.variable is not None}
    variables = set(known.values())  # a setting the ecosystem names (OTEL_SEMCONV_STABILITY_OPT_IN) has no prefix
    for variable in sorted(environ):
        if not variable.startswith(ENV_PREFIX) or variable in variables:
            continue
        name = variable[len(ENV_PREFIX) :]
        near = nearest(name, known)
        if name.lower() in _ELSEWHERE and name.lower() not in BY_NAME:
            hint = _ELSEWHERE[name.lower()]
        elif near:
            hint = f"did you mean {known[near]}?"
        else:
            hint = f"the settings are listed at {page_url('configuration')}"
        _log.warning("otel-responses: %s is not a setting of this package (%s); it is ignored", variable, hint)


def _message(option: Option, why: ValueError, value: object) -> str:
    """Why a value of ``option`` cannot be used, naming the option; a keyword's plain value is shown unless secret."""
    text = str(why)
    message = text if text.startswith(option.name) else f"{option.name} {text}"
    plain = isinstance(value, (str, int, float)) and not isinstance(value, bool)
    if plain and not option.secret and not text.endswith(type(value).__name__):
        message += f", got {value!r}"
    return message


def check_keywords(config: Mapping[str, Any]) -> None:
    """``ConfigError`` for an unknown keyword or one whose value cannot be used, before anything is built (an
    ``instrument()`` whose dependencies are missing checks its keywords all the same)."""
    values = _Values(config, {})
    if config.get("ledger") is not None and config.get("ledger_url") is not None:
        raise ConfigError("give either ledger or ledger_url, not both")
    for name in config:
        if name not in ("ledger_url", "prices"):  # checked as what they name is read or built
            values.get(name)


# -- the settings ---------------------------------------------------------------------------------------------


def settings_from(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    """Keywords win over environment variables; an unknown keyword or an unusable one is an error, an unusable
    variable a warning (see the module's docstring)."""
    check_keywords(config)  # every keyword, even one only a shared ledger would read
    environ = os.environ if environ is None else environ
    warn_unknown_variables(environ)
    values = _Values(config, environ)
    for option in OPTIONS:  # every variable checked, even one only a shared ledger would read
        if option.variable is not None and option.name not in _READ_AS_BUILT:
            values.get(option.name)
    zdr = values.get("zdr")
    version = values.get("instructions_version")
    key = values.get("hash_key")
    strict = values.get("strict")
    chunk_timing = values.get("chunk_timing")
    latest_semconv = GEN_AI_LATEST_EXPERIMENTAL in values.get("semconv_opt_in")
    prices = values.get("prices")  # before a ledger is built: a bad table leaves nothing behind
    ledger = values.get("ledger")
    if ledger is not None:
        shared = callable(getattr(ledger, "bind", None))
        if shared and not key:
            raise ConfigError(_HASH_KEY_HINT)
    else:
        ledger, shared = _ledger(values, key)
    fingerprinter = Fingerprinter(key or None)
    if shared:
        cast("SharedLedger", ledger).bind(fingerprinter)  # the shared store is namespaced by this key's id
    genai_events = values.get("genai_events")
    return Settings(
        zdr,
        version,
        fingerprinter,
        strict,
        ledger,
        prices,
        chunk_timing,
        genai_events=genai_events,
        log_signals=_log_signals(values, genai_events, environ),
        session_id_from_lineage=values.get("session_id_from_lineage"),
        latest_semconv=latest_semconv,
    )


# Set by opentelemetry-instrument's users: the SDK's handler on the root logger turns every Python log record into an
# OpenTelemetry one.
LOGGING_AUTO_INSTRUMENTATION = "OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED"


def _log_signals(values: _Values, genai_events: bool, environ: Mapping[str, str]) -> str:
    """``log_signals``; left unset, ``off`` where the SDK turns log records into OpenTelemetry ones while the events
    are on: each line would reach the backend as a second record of what its event already says."""
    level: str = values.get("log_signals")
    if values.given("log_signals") or not genai_events:
        return level
    auto = environ.get(LOGGING_AUTO_INSTRUMENTATION, "").strip().lower() == "true"
    return OFF if auto else level


def _ledger(values: _Values, key: bytes) -> tuple[Ledger, bool]:
    """The ledger the settings name, and whether it is shared: in-process, or a ``RedisLedger`` for ``ledger_url``
    (a Redis Cluster when the URL says so). A URL from the environment that cannot be used is a warning and the
    in-process ledger; from a keyword, an error. The URL is checked before the hash key it needs, and both
    mistakes are said at once. Errors never repeat a URL (it may hold a password)."""
    capacity = values.get("ledger_capacity")
    url = values.get("ledger_url")
    if url is None or (isinstance(url, str) and not url.strip()):
        return InMemoryLedger(capacity), False
    keyword = values.from_keyword("ledger_url")
    mistakes: list[str] = []
    try:
        _check_url(values, url)
    except ConfigError as exc:
        mistakes.append(str(exc))
    if not key:
        mistakes.append(_HASH_KEY_HINT)
    try:
        if mistakes:
            raise ConfigError("; and ".join(mistakes))
        return _redis_ledger(values, url, capacity), True
    except ConfigError as exc:
        if keyword:
            raise
        values.warn("ledger_url", str(exc))
        return InMemoryLedger(capacity), False


def _check_url(values: _Values, url: object) -> tuple[tuple[str, ...], bool]:
    """The seed URLs of ``url`` (one or several, comma-separated or, as a keyword, a list) and whether they name a
    Redis Cluster, or ``ConfigError``."""
    from .ledger.redis import check_urls

    try:
        return check_urls(url)
    except ValueError as exc:
        raise ConfigError(f"ledger_url: {exc}") from None


def _redis_ledger(values: _Values, url: object, capacity: int) -> Ledger:
    """A ``RedisLedger`` for ``url``, checked already (``_check_url``)."""
    from .ledger.redis import RedisLedger, RedisURLError

    valid, cluster = _check_url(values, url)
    ttl, timeout = values.get("ledger_ttl"), values.get("ledger_timeout")
    try:
        return RedisLedger(
            valid,
            ttl_seconds=ttl,
            timeout_seconds=timeout,
            local_capacity=capacity,
            cluster=cluster,
        )
    except ImportError:
        raise ConfigError(f"ledger_url needs the redis package: {install_hint('redis')}") from None
    except RedisURLError as exc:
        raise ConfigError(f"ledger_url: {exc}") from None
    except ValueError:
        raise ConfigError("ledger_url is not a Redis URL the redis package can use") from None
