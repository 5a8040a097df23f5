"""Sync and async wrappers for create/parse: build facts, open the span, call, read the result, emit.

Whatever the instrumentation does, the app gets the same return value and the same exception; a failure
inside the instrumentation is logged at debug level and swallowed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from .facts import RequestFacts, ResponseFacts, request_facts, response_facts
from .telemetry import Server, Telemetry

_log = logging.getLogger(__name__)
_RAW_HEADER = "X-Stainless-Raw-Response"
_DEFAULT_PORTS = {"https": 443, "http": 80}

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


class Switch:
    """Turned off by ``uninstrument()``: raw-response objects built earlier still hold our wrapper."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


def _server(instance: Any) -> Server:
    url = getattr(getattr(instance, "_client", None), "base_url", None)
    host = getattr(url, "host", None)
    if not isinstance(host, str) or not host:
        return None, None
    port = getattr(url, "port", None)
    if not isinstance(port, int):
        port = _DEFAULT_PORTS.get(getattr(url, "scheme", ""))
    return host, port


def _raw_mode(kwargs: Mapping[str, Any]) -> str | None:
    """``"true"`` for with_raw_response, ``"stream"`` for with_streaming_response, else None."""
    headers = kwargs.get("extra_headers")
    if isinstance(headers, Mapping):
        mode = headers.get(_RAW_HEADER)
        return mode if isinstance(mode, str) else None
    return None


def _result_facts(result: Any, raw_mode: str | None) -> ResponseFacts | None:
    """Facts from a parsed response or a raw one; a streaming raw body is left unread for the app."""
    if raw_mode is None:
        return response_facts(result)
    request_id = getattr(result, "request_id", None)
    request_id = request_id if isinstance(request_id, str) else None
    if raw_mode == "stream":
        return ResponseFacts(None, None, None, None, (), 0, False, None, None, None, None, None, None, request_id)
    # LegacyAPIResponse.parse() caches its result: the app's own parse() returns the same object.
    return response_facts(result.parse(), request_id)


class _Call:
    """The instrumentation's part of one call; every method swallows its own failures."""

    __slots__ = ("req", "server", "span", "started", "telemetry", "token")

    def __init__(self, telemetry: Telemetry, operation: str, instance: Any, kwargs: Mapping[str, Any]) -> None:
        self.telemetry = telemetry
        self.server = _server(instance)
        self.req: RequestFacts = request_facts(operation, kwargs, telemetry.settings)
        self.span = telemetry.start(self.req, self.server)
        self.token = otel_context.attach(trace.set_span_in_context(self.span))
        self.started = perf_counter()

    def _detach(self) -> None:
        try:
            otel_context.detach(self.token)
        except Exception:  # pragma: no cover - detach logs and never raises in current SDKs
            _log.debug("context detach failed", exc_info=True)

    def succeeded(self, result: Any, raw_mode: str | None) -> None:
        seconds = perf_counter() - self.started
        self._detach()
        try:
            self.telemetry.succeed(self.span, self.req, _result_facts(result, raw_mode), seconds, self.server)
        except Exception:
            _log.debug("recording a response failed", exc_info=True)
            self.span.end()

    def failed(self, exc: BaseException) -> None:
        seconds = perf_counter() - self.started
        self._detach()
        try:
            self.telemetry.fail(self.span, self.req, exc, seconds, self.server)
        except Exception:
            _log.debug("recording an error failed", exc_info=True)
            self.span.end()


def _begin(
    switch: Switch, telemetry: Telemetry, operation: str, instance: Any, kwargs: Mapping[str, Any]
) -> _Call | None:
    if not switch.on or kwargs.get("stream") is True:  # streams are passed through untouched for now
        return None
    try:
        return _Call(telemetry, operation, instance, kwargs)
    except Exception:
        _log.debug("starting the span failed; the call goes on uninstrumented", exc_info=True)
        return None


def sync_wrapper(switch: Switch, telemetry: Telemetry, operation: str) -> Wrapper:
    """A wrapt wrapper for a synchronous method."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = _begin(switch, telemetry, operation, instance, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            call.failed(exc)
            raise
        call.succeeded(result, _raw_mode(kwargs))
        return result

    return wrapper


def async_wrapper(switch: Switch, telemetry: Telemetry, operation: str) -> Wrapper:
    """A wrapt wrapper for a coroutine method."""

    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        call = _begin(switch, telemetry, operation, instance, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            call.failed(exc)
            raise
        call.succeeded(result, _raw_mode(kwargs))
        return result

    return wrapper
