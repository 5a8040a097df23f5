"""Sync and async wrappers: start a :class:`~otel_responses.call.Call` (facts, checks against the ledger, the
span), call, then hand it the result, the stream or the error.

Whatever the instrumentation does, the app gets the same return value and the same exception; a failure
inside the instrumentation is logged at debug level and swallowed. The one deliberate exception is strict
mode, which refuses a request that would lose context before it is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .call import Call
from .operations import Operation
from .streams import AsyncStreamProxy, PaginatorProxy, SyncStreamProxy
from .telemetry import Telemetry

_RAW_HEADER = "X-Stainless-Raw-Response"

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


class Switch:
    """Turned off by ``uninstrument()``: raw-response objects built earlier still hold our wrapper."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


def _raw_mode(kwargs: Mapping[str, Any]) -> str | None:
    """``"true"`` for with_raw_response, ``"stream"`` for with_streaming_response, else None."""
    headers = kwargs.get("extra_headers")
    if isinstance(headers, Mapping):
        mode = headers.get(_RAW_HEADER)
        return mode if isinstance(mode, str) else None
    return None


def begin(
    switch: Switch,
    telemetry: Telemetry,
    op: Operation,
    instance: Any,
    args: tuple[Any, ...],
    kwargs: Any,
    exempt: frozenset[str] = frozenset(),
) -> Call | None:
    if not switch.on or (kwargs.get("stream") is True and _raw_mode(kwargs) is not None):
        return None  # a raw streamed body is parsed by the app into a stream we never see
    try:
        return Call(telemetry, op, instance, args, kwargs, exempt)
    except Exception:
        telemetry.internal_error("start_call")
        return None


def call_through(call: Call, wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Strict mode's refusal, then the wrapped call; a failure is recorded and re-raised unchanged."""
    refusal = call.refusal()
    if refusal is not None:
        raise refusal
    try:
        return wrapped(*args, **kwargs)
    except BaseException as exc:
        call.failed(exc)
        raise


async def await_through(
    call: Call, wrapped: Callable[..., Awaitable[Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """The coroutine twin of :func:`call_through`."""
    refusal = call.refusal()
    if refusal is not None:
        raise refusal
    try:
        return await wrapped(*args, **kwargs)
    except BaseException as exc:
        call.failed(exc)
        raise


def sync_wrapper(switch: Switch, telemetry: Telemetry, op: Operation) -> Wrapper:
    """A wrapt wrapper for a synchronous method."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = begin(switch, telemetry, op, instance, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        result = call_through(call, wrapped, args, kwargs)
        if call.req.stream:
            return call.stream(result, SyncStreamProxy)
        call.succeeded(result, _raw_mode(kwargs))
        return result

    return wrapper


def async_wrapper(switch: Switch, telemetry: Telemetry, op: Operation) -> Wrapper:
    """A wrapt wrapper for a coroutine method."""

    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        call = begin(switch, telemetry, op, instance, args, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        result = await await_through(call, wrapped, args, kwargs)
        if call.req.stream:
            return call.stream(result, AsyncStreamProxy)
        call.succeeded(result, _raw_mode(kwargs))
        return result

    return wrapper


def paginator_wrapper(switch: Switch, telemetry: Telemetry, op: Operation) -> Wrapper:
    """A wrapt wrapper for an async ``list``: a plain method returning a paginator that requests when
    awaited or iterated; the span covers that first request."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = begin(switch, telemetry, op, instance, args, kwargs)
        paginator = wrapped(*args, **kwargs)
        if call is None:
            return paginator
        call.detach()
        try:
            return PaginatorProxy(paginator, call)
        except Exception:
            telemetry.internal_error("wrap_paginator")
            call.finish(None)
            return paginator

    return wrapper
