"""The one :class:`~otel_responses._calls.runtime.Runtime` (settings, ledger, telemetry) that every instrumentor of the
process uses.

Why one: a conversation may go through two paths (DSPy falls back to litellm call by call; an app mixes the SDK and
litellm) and its turns must meet in one ledger; two meters would also register every instrument twice. The first
``instrument()`` builds it from its keywords; the others join it and may not bring options of their own (they
would silently not apply); the last ``uninstrument()`` lets it go.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from .._calls.runtime import Runtime, runtime_for
from ..config import ConfigError, check_keywords

_PROVIDERS = ("tracer_provider", "meter_provider", "logger_provider")
# Passed by some distros to every instrumentor, or read by BaseInstrumentor itself: not options of ours.
_OTHER_PROVIDERS = ("event_logger_provider", "skip_dep_check")
_lock = threading.Lock()
_runtime: Runtime | None = None
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


def acquire(user: str, kwargs: Mapping[str, Any]) -> Runtime:
    """The shared runtime for ``user`` (an instrumentor's name): built from ``kwargs`` by the first user, joined by
    the others (a later user passing options gets ``ConfigError``)."""
    global _runtime
    options = _options(kwargs)
    with _lock:
        if _runtime is not None:
            if options:
                raise ConfigError(
                    f"otel-responses is already instrumented (by {', '.join(sorted(_users))}) with its settings; "
                    f"give options ({', '.join(sorted(options))}) to the first instrument() call only"
                )
            _users.add(user)
            return _runtime
        _runtime = runtime_for(
            options, kwargs.get("tracer_provider"), kwargs.get("meter_provider"), kwargs.get("logger_provider")
        )
        _users.add(user)
        return _runtime


def release(user: str) -> None:
    """``user`` no longer instruments; the last one lets the runtime go (the next ``instrument()`` builds anew)."""
    global _runtime
    with _lock:
        _users.discard(user)
        if not _users:
            _runtime = None
