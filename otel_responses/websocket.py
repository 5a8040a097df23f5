"""WebSocket mode (``client.responses.connect()``): one span per ``response.create`` sent on the socket,
ended by that response's terminal event (or an error, or the connection closing).

Responses on one connection are answered one at a time, in order, so a FIFO of open calls per connection
routes each received event to its call.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from .operations import OPERATIONS
from .streams import StreamObserver
from .telemetry import Telemetry
from .wrappers import Switch, Wrapper, await_through, begin, call_through

_log = logging.getLogger(__name__)
_PENDING = "_otel_responses_pending"
_LAST = "_otel_responses_last_response"
# The API keeps a connection's latest response in memory: it can be continued even when unstored.
_OWN_LATEST_EXEMPT = frozenset({"unstored_parent"})


def _pending(connection: Any) -> deque[StreamObserver]:
    queue: deque[StreamObserver] | None = getattr(connection, _PENDING, None)
    if queue is None:
        queue = deque()
        setattr(connection, _PENDING, queue)
    return queue


def _start(switch: Switch, telemetry: Telemetry, instance: Any, kwargs: dict[str, Any]) -> Any:
    connection = getattr(instance, "_connection", None)
    own_latest = kwargs.get("previous_response_id") is not None and kwargs.get("previous_response_id") == getattr(
        connection, _LAST, None
    )
    return begin(
        switch, telemetry, OPERATIONS["chat"], instance, (), kwargs, _OWN_LATEST_EXEMPT if own_latest else frozenset()
    )


def _sent(call: Any, instance: Any) -> None:
    call.detach()
    try:
        _pending(getattr(instance, "_connection", instance)).append(StreamObserver(call, None))
    except Exception:
        call.telemetry.internal_error("track_websocket_response")
        call.finish(None)


def _received(connection: Any, event: Any) -> None:
    """Route an event to the oldest open response of the connection."""
    try:
        queue: deque[StreamObserver] | None = getattr(connection, _PENDING, None)
        if not queue:
            return
        observer = queue[0]
        observer.event(event)
        kind = getattr(event, "type", None)
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            response_id = getattr(getattr(event, "response", None), "id", None)
            setattr(connection, _LAST, response_id)
        if observer.done:
            queue.popleft()
    except Exception:
        _log.debug("otel-responses: observing a WebSocket event failed; the app is unaffected")


def _closed(connection: Any) -> None:
    queue: deque[StreamObserver] | None = getattr(connection, _PENDING, None)
    while queue:
        queue.popleft().ended("closed")


def create_wrapper(switch: Switch, telemetry: Telemetry) -> Wrapper:
    """``connection.response.create(...)`` (sync): open the span; the events will end it."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = _start(switch, telemetry, instance, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        result = call_through(call, wrapped, args, kwargs)
        _sent(call, instance)
        return result

    return wrapper


def async_create_wrapper(switch: Switch, telemetry: Telemetry) -> Wrapper:
    """``await connection.response.create(...)`` (async)."""

    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = _start(switch, telemetry, instance, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        result = await await_through(call, wrapped, args, kwargs)
        _sent(call, instance)
        return result

    return wrapper


def recv_wrapper(switch: Switch, telemetry: Telemetry) -> Wrapper:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        event = wrapped(*args, **kwargs)
        _received(instance, event)
        return event

    return wrapper


def async_recv_wrapper(switch: Switch, telemetry: Telemetry) -> Wrapper:
    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        event = await wrapped(*args, **kwargs)
        _received(instance, event)
        return event

    return wrapper


def close_wrapper(switch: Switch, telemetry: Telemetry) -> Wrapper:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return wrapped(*args, **kwargs)
        finally:
            _closed(instance)

    return wrapper


def async_close_wrapper(switch: Switch, telemetry: Telemetry) -> Wrapper:
    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return await wrapped(*args, **kwargs)
        finally:
            _closed(instance)

    return wrapper
