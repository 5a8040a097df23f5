"""WebSocket mode (``client.responses.connect()``): one span per ``response.create`` sent on the socket, however
it is sent — ``connection.response.create(...)``, ``connection.send({...})``, or a frame the app serialised itself
with ``connection.send_raw(...)`` — ended by that response's terminal event (or an error, or the connection
closing).

A connection answers the responses of one lane (the request's ``stream_id``; the default lane has none) one at a
time, in order, and tags each event with its lane: a FIFO of open calls per lane routes each received event to its
call. The public helpers (``track``, ``received``, ``closed``, ``exempt``) serve any object that stands for one
connection: litellm's gateway relay uses them too (``integrations/_litellm_websocket.py``).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from .._calls.call import Call
from .._calls.observer import TERMINAL_EVENTS, StreamObserver
from .._calls.operations import OPERATIONS
from .._calls.runtime import Runtime
from .._telemetry.recorded import NOTHING_READ
from ..signals import ContextLossError
from .wrappers import Method, Switch, Wrapper, await_through, call_through

_log = logging.getLogger(__name__)
_PENDING = "_otel_responses_pending"  # on the connection: lane (stream_id) -> open calls, oldest first
_LATEST = "_otel_responses_latest"  # on the connection: lane -> its latest response id
_CREATE = "response.create"
# The API keeps a connection's latest response in memory: it can be continued even when unstored.
_OWN_LATEST_EXEMPT = frozenset({"unstored_parent"})
# Set while one of our wrappers sends: `response.create()` sends through `send()`, which may go through
# `send_raw()`; the outermost one is the call.
_SENDING: ContextVar[bool] = ContextVar("otel_responses_websocket_sending", default=False)

Fields = Callable[[tuple[Any, ...], dict[str, Any]], "dict[str, Any] | None"]


def _lanes(connection: Any) -> dict[str | None, deque[StreamObserver]]:
    lanes: dict[str | None, deque[StreamObserver]] | None = getattr(connection, _PENDING, None)
    if lanes is None:
        lanes = {}
        setattr(connection, _PENDING, lanes)
    return lanes


def create_fields(event: Any) -> dict[str, Any] | None:
    """The body of a ``response.create`` client event (a dict, or the SDK's model), else None."""
    if isinstance(event, Mapping):
        return {k: v for k, v in event.items() if k != "type"} if event.get("type") == _CREATE else None
    if getattr(event, "type", None) != _CREATE:
        return None
    names = getattr(event, "model_fields_set", None)
    return {k: getattr(event, k) for k in names if k != "type"} if names is not None else None


def raw_create_fields(data: Any) -> dict[str, Any] | None:
    """The body of a ``response.create`` frame the app serialised itself; other frames are not parsed."""
    if isinstance(data, (bytes, bytearray)):
        if b'"response.create"' not in data:
            return None
    elif not isinstance(data, str) or '"response.create"' not in data:
        return None
    return create_fields(json.loads(data))


def exempt(connection: Any, fields: Mapping[str, Any]) -> frozenset[str]:
    """What a ``response.create`` on this connection may not raise: continuing its own latest response, which the
    API keeps in memory, is no unstored parent."""
    latest: dict[str | None, str] = getattr(connection, _LATEST, None) or {}
    previous = fields.get("previous_response_id")
    return _OWN_LATEST_EXEMPT if isinstance(previous, str) and previous in latest.values() else frozenset()


def track(call: Call, connection: Any, fields: Mapping[str, Any]) -> StreamObserver | None:
    """Queue the call on its lane before the frame leaves: its first events may arrive before ``send`` returns."""
    try:
        stream_id = fields.get("stream_id")
        lane = stream_id if isinstance(stream_id, str) else None
        observer = StreamObserver(call, None)
        _lanes(connection).setdefault(lane, deque()).append(observer)
    except Exception:
        call.telemetry.internal_error("track_websocket_response")
        return None
    return observer


def _sent(call: Call, observer: StreamObserver | None) -> None:
    """The frame left: the span's context ends here; an untracked call ends now (no event will reach it)."""
    call.detach()
    if observer is None:
        call.end(NOTHING_READ)


def received(connection: Any, event: Any) -> None:
    """Route an event to the oldest open response of its lane."""
    try:
        lanes: dict[str | None, deque[StreamObserver]] | None = getattr(connection, _PENDING, None)
        if not lanes:
            return
        lane = getattr(event, "stream_id", None)
        queue = lanes.get(lane if isinstance(lane, str) else None)
        while queue and queue[0].done:  # a call that failed before its frame left
            queue.popleft()
        if not queue:
            return
        observer = queue[0]
        observer.event(event)
        if getattr(event, "type", None) in TERMINAL_EVENTS:
            latest: dict[str | None, str] = getattr(connection, _LATEST, None) or {}
            response_id = getattr(getattr(event, "response", None), "id", None)
            if isinstance(response_id, str):
                latest[lane if isinstance(lane, str) else None] = response_id
                setattr(connection, _LATEST, latest)
        if observer.done:
            queue.popleft()
    except Exception:
        _log.debug("otel-responses: observing a WebSocket event failed; the app is unaffected")


def refusal_event(error: ContextLossError) -> str:
    """Strict mode's refusal as WebSocket mode says an error, for a front end that relays the socket itself: the
    ``error`` event the API sends instead of a status, the signal as its code and the meaning and fix as its message."""
    inner = {"message": str(error), "type": "invalid_request_error", "param": None, "code": error.signal}
    return json.dumps({"type": "error", "status": 400, "error": inner})


def open_responses(connection: Any) -> int:
    """How many ``response.create`` sent on the connection still await their terminal event: a front end that
    relays the frames itself (the proxy) closes a connection it is draining once there are none."""
    lanes: dict[str | None, deque[StreamObserver]] | None = getattr(connection, _PENDING, None)
    return sum(1 for queue in (lanes or {}).values() for observer in queue if not observer.done)


def closed(connection: Any) -> None:
    lanes: dict[str | None, deque[StreamObserver]] | None = getattr(connection, _PENDING, None)
    for queue in (lanes or {}).values():
        while queue:
            queue.popleft().ended("closed")


def _fields_of(runtime: Runtime, read: Fields, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response.create`` body being sent, or None (another event, or a frame that cannot be read)."""
    if _SENDING.get():
        return None
    try:
        return read(args, kwargs)
    except Exception:
        runtime.telemetry.internal_error("read_websocket_frame")
        return None


def _sync_sender(switch: Switch, runtime: Runtime, read: Fields, connection_of: Callable[[Any], Any]) -> Wrapper:
    """A wrapper of a synchronous send: a ``response.create`` opens a span; the events will end it."""
    method = Method(switch, runtime, OPERATIONS["chat"])

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        fields = _fields_of(runtime, read, args, kwargs) if switch.active() else None
        call = None if fields is None else method.begin(instance, (), fields, exempt(connection_of(instance), fields))
        token = _SENDING.set(True)
        try:
            if fields is None or call is None:
                return wrapped(*args, **kwargs)
            observer = track(call, connection_of(instance), fields)
            result = call_through(call, wrapped, args, kwargs)  # a failure ends the call: its observer is done
        finally:
            _SENDING.reset(token)
        _sent(call, observer)
        return result

    return wrapper


def _async_sender(switch: Switch, runtime: Runtime, read: Fields, connection_of: Callable[[Any], Any]) -> Wrapper:
    """The coroutine twin of :func:`_sync_sender`."""
    method = Method(switch, runtime, OPERATIONS["chat"])

    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        fields = _fields_of(runtime, read, args, kwargs) if switch.active() else None
        skipped = exempt(connection_of(instance), fields) if fields is not None else frozenset()
        call = None if fields is None else await method.begin_async(instance, (), fields, skipped)
        token = _SENDING.set(True)
        try:
            if fields is None or call is None:
                return await wrapped(*args, **kwargs)
            observer = track(call, connection_of(instance), fields)
            result = await await_through(call, wrapped, args, kwargs)  # a failure ends the call (see above)
        finally:
            _SENDING.reset(token)
        _sent(call, observer)
        return result

    return wrapper


def _created(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``connection.response.create(**body)``: the keywords are the body."""
    return kwargs


def _event(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    return create_fields(args[0] if args else kwargs.get("event"))


def _frame(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    return raw_create_fields(args[0] if args else kwargs.get("data"))


def _resource_connection(instance: Any) -> Any:
    return getattr(instance, "_connection", instance)


def _itself(instance: Any) -> Any:
    return instance


def create_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    """``connection.response.create(...)`` (sync): open the span; the events will end it."""
    return _sync_sender(switch, runtime, _created, _resource_connection)


def async_create_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    """``await connection.response.create(...)`` (async)."""
    return _async_sender(switch, runtime, _created, _resource_connection)


def send_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    """``connection.send({"type": "response.create", ...})`` (sync)."""
    return _sync_sender(switch, runtime, _event, _itself)


def async_send_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    """``await connection.send({"type": "response.create", ...})`` (async)."""
    return _async_sender(switch, runtime, _event, _itself)


def send_raw_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    """``connection.send_raw(frame)`` (sync): a ``response.create`` frame the app serialised itself."""
    return _sync_sender(switch, runtime, _frame, _itself)


def async_send_raw_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    """``await connection.send_raw(frame)`` (async)."""
    return _async_sender(switch, runtime, _frame, _itself)


def recv_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        event = wrapped(*args, **kwargs)
        received(instance, event)
        return event

    return wrapper


def async_recv_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        event = await wrapped(*args, **kwargs)
        received(instance, event)
        return event

    return wrapper


def close_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return wrapped(*args, **kwargs)
        finally:
            closed(instance)

    return wrapper


def async_close_wrapper(switch: Switch, runtime: Runtime) -> Wrapper:
    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return await wrapped(*args, **kwargs)
        finally:
            closed(instance)

    return wrapper
