"""The one :class:`Telemetry` (settings, ledger, tracer, instruments) that every instrumentor of the process uses.

Why one: a conversation may go through two paths (DSPy falls back to litellm call by call; an app mixes the SDK and
litellm) and its turns must meet in one ledger; two meters would also register every instrument twice. The first
``instrument()`` builds it from its keywords; the others join it and may not bring options of their own (they
would silently not apply); the last ``uninstrument()`` lets it go.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from .._telemetry.telemetry import Telemetry
from ..config import ConfigError, check_keywords, settings_from
from ..version import __version__

_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
_PROVIDERS = ("tracer_provider", "meter_provider", "logger_provider")
# Passed by some distros to every instrumentor, or read by BaseInstrumentor itself: not options of ours.
_OTHER_PROVIDERS = ("event_logger_provider", "skip_dep_check")
_SCOPE = "otel_responses.instrumentor"  # the instrumentation scope of every span, metric and log event

_lock = threading.Lock()
_telemetry: Telemetry | None = None
_users: set[str] = set()


def _options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k not in _PROVIDERS and k not in _OTHER_PROVIDERS}


def check(kwargs: Mapping[str, Any]) -> None:
    """``ConfigError`` for an unknown or unusable option among ``instrument()``'s keywords, checked before the
    instrumented library is looked for: a typo is an error whether or not the library is installed."""
    check_keywords(_options(kwargs))


class CheckedInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """A ``BaseInstrumentor`` whose ``instrument()`` checks its keywords first (the base looks for the library
    before anything else and, missing, returns quietly: a typo would go unseen). Never instantiated itself: the
    base keeps one instance per class in a class attribute its subclasses would inherit."""

    def instrument(self, **kwargs: Any) -> Any:
        check(kwargs)
        return super().instrument(**kwargs)

    def uninstrument(self, **kwargs: Any) -> Any:
        """Restore what ``instrument()`` patched; a second call does nothing and says nothing (the base would log
        a warning for it)."""
        if not self.is_instrumented_by_opentelemetry:
            return None
        return super().uninstrument(**kwargs)


def acquire(user: str, kwargs: Mapping[str, Any]) -> Telemetry:
    """The shared telemetry for ``user`` (an instrumentor's name): built from ``kwargs`` by the first user, joined by
    the others (a later user passing options gets ``ConfigError``)."""
    global _telemetry
    options = _options(kwargs)
    with _lock:
        if _telemetry is not None:
            if options:
                raise ConfigError(
                    f"otel-responses is already instrumented (by {', '.join(sorted(_users))}) with its settings; "
                    f"give options ({', '.join(sorted(options))}) to the first instrument() call only"
                )
            _users.add(user)
            return _telemetry
        _telemetry = telemetry_for(
            options, kwargs.get("tracer_provider"), kwargs.get("meter_provider"), kwargs.get("logger_provider")
        )
        _users.add(user)
        return _telemetry


def telemetry_for(
    options: Mapping[str, Any], tracer_provider: Any = None, meter_provider: Any = None, logger_provider: Any = None
) -> Telemetry:
    """A telemetry of its own (not the process's shared one), under the instrumentors' scope: for a front end that
    records calls it does not make itself (the proxy), whose spans, metrics and log events must read as the SDK's
    do. The providers: the global ones when None."""
    settings = settings_from(options)
    tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider, schema_url=_SCHEMA_URL)
    meter = metrics.get_meter(_SCOPE, __version__, meter_provider, schema_url=_SCHEMA_URL)
    logger = _logs.get_logger(_SCOPE, __version__, logger_provider, schema_url=_SCHEMA_URL)
    return Telemetry(tracer, meter, settings, logger)


def release(user: str) -> None:
    """``user`` no longer instruments; the last one lets the telemetry go (the next ``instrument()`` builds anew)."""
    global _telemetry
    with _lock:
        _users.discard(user)
        if not _users:
            _telemetry = None
