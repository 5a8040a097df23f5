"""litellm's gateway relaying a Responses WebSocket session (its proxy's ``/v1/responses`` WebSocket route, to a
provider with WebSocket mode of its own): one span per ``response.create`` it forwards, ended by that response's
terminal event, as in-process WebSocket mode is recorded (``_patching/websocket.py``, whose lane routing it uses,
the relay standing for the connection).

The relay (``ResponsesWebSocketStreaming``) calls none of litellm's public functions, so no seam of ``litellm.py``
sees it; its own steps are the seams. It forwards one client frame at a time:

- ``BaseLLMHTTPHandler.async_responses_websocket`` runs the session: where the upstream is (``api_base``);
- ``_forward_guarded_frame`` takes one client frame through the relay: a call begun but never sent (the frame
  refused by the gateway's admission, or failing first) is dropped at its end;
- ``_guard_frame`` returns the frame after the gateway's guardrails, with the ids the client holds (litellm's
  encoded response ids, the layer the HTTP route's spans read too): the request is read and checked here; strict
  mode's refusal is answered as litellm answers a guardrail's (an ``error`` event, the frame dropped, the socket
  left open);
- ``_record_client_frame`` is the frame (rewritten for the upstream: ids decoded, the model enforced) about to
  leave: the span opens;
- ``_record_backend_event`` sees each upstream event as the client will (ids encoded again): routed to its call;
- ``_log_open_turns`` runs when the upstream side ends: a call without a terminal event ends ``closed``.

A provider without WebSocket mode is relayed by ``ManagedResponsesWebSocketHandler`` through ``litellm.aresponses``,
whose seams (``litellm.py``) record each turn already. Releases without the route have none of these methods: no
seam is patched.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from .._calls.call import Call, Endpoint
from .._calls.observer import OBSERVED_EVENTS, Fields
from .._calls.operations import OPERATIONS
from .._calls.runtime import Runtime
from .._patching.hooks import Seam, Wrapper
from .._patching.providers import provider_of_litellm, server_of
from .._patching.websocket import closed, exempt, raw_create_fields, received, refusal_event, track
from .._patching.wrappers import Switch
from .._telemetry.recorded import NOTHING_READ

_log = logging.getLogger(__name__)
_HANDLERS = "litellm.llms.custom_httpx.llm_http_handler"
_RELAY_MODULE = "litellm.responses.streaming_iterator"
_RELAY = "ResponsesWebSocketStreaming"
_FRAME = "_otel_responses_frame"  # on the relay: the frame's call and its body, until its forward returns
_API_BASE_POSITION = 4  # async_responses_websocket(self, model, websocket, logging_obj, config, api_base, ...)
# Marks of the events an observer reads (the others are not parsed: one substring test each), and of a lane.
_MARKS = (*sorted(OBSERVED_EVENTS - {"error"}), '"type":"error"', '"type": "error"', '"stream_id"')
_UNREAD = Fields()  # an event not parsed: it counts as a chunk of the default lane

_API_BASE: ContextVar[str | None] = ContextVar("otel_responses_litellm_websocket_api_base", default=None)
_FORWARDING: ContextVar[bool] = ContextVar("otel_responses_litellm_websocket_forwarding", default=False)


def session(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``async_responses_websocket``: the session's upstream, for the calls its relay makes (a coroutine function:
    the variable is set while it runs)."""

    async def run() -> Any:
        api_base = kwargs.get("api_base", args[_API_BASE_POSITION] if len(args) > _API_BASE_POSITION else None)
        token = _API_BASE.set(api_base if isinstance(api_base, str) else None)
        try:
            return await wrapped(*args, **kwargs)
        finally:
            _API_BASE.reset(token)

    return run()


async def forward(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``_forward_guarded_frame``: one frame's way through the relay. A failure ends the frame's call; a call begun
    but not sent is dropped from the in-flight record."""
    token = _FORWARDING.set(True)
    try:
        return await wrapped(*args, **kwargs)
    except BaseException as exc:
        held = _held(instance)
        if held is not None:
            held[0].raised(exc)
        raise
    finally:
        _FORWARDING.reset(token)
        held = _held(instance, take=True)
        if held is not None and not held[0].opened:
            held[0].end(NOTHING_READ)


def guard(switch: Switch, runtime: Runtime) -> Wrapper:
    """``_guard_frame``: the guarded ``response.create`` is read and checked; strict mode refuses it here."""

    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        guarded = await wrapped(*args, **kwargs)
        if guarded is None or not _FORWARDING.get() or not switch.enabled():
            return guarded
        checked = await _checked(runtime, instance, getattr(guarded, "frame", None))
        if checked is None:
            return guarded
        call = checked[0]
        if not call.refuses:
            if not _hold(instance, checked):
                call.end(NOTHING_READ)  # a relay that takes no attribute: the frame goes on unrecorded
            return guarded
        refusal = call.refusal() if call.open() else None
        if refusal is None:  # the span or the refusal could not be made (counted): the frame goes on unrecorded
            call.end(NOTHING_READ)
            return guarded
        with contextlib.suppress(Exception):
            await instance.websocket.send_text(refusal_event(refusal))
        return None  # litellm drops a refused frame and goes on with the next

    return wrapper


def record(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``_record_client_frame``: the checked frame leaves now; its span opens and waits on its lane for the events."""
    held = _held(instance)
    if held is not None and not held[0].opened:
        call, fields = held
        if call.open() and track(call, instance, fields) is None:
            call.end(NOTHING_READ)
    return wrapped(*args, **kwargs)


def backend_event(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``_record_backend_event``: an upstream event, as the client gets it, routed to its call."""
    result = wrapped(*args, **kwargs)
    try:
        received(instance, event_of(args[0] if args else kwargs.get("event")))
    except Exception:
        _log.debug("otel-responses: observing a relayed WebSocket event failed; the gateway is unaffected")
    return result


def upstream_ended(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``_log_open_turns``: the upstream side of the relay ended."""
    try:
        return wrapped(*args, **kwargs)
    finally:
        closed(instance)


def event_of(frame: Any) -> Any:
    """A relayed event as the observer reads it: parsed when it is one the observer reads or names a lane, else a
    stand-in that only counts as a chunk."""
    if isinstance(frame, (bytes, bytearray)):
        frame = bytes(frame).decode("utf-8", "replace")
    if not isinstance(frame, str) or not any(mark in frame for mark in _MARKS):
        return _UNREAD
    try:
        event = json.loads(frame, object_pairs_hook=Fields)
    except ValueError:
        return _UNREAD
    return event if isinstance(event, Fields) else _UNREAD


def request_of(frame: Any) -> dict[str, Any] | None:
    """The request of a ``response.create`` frame: its fields, or those of its nested ``response`` object (a shape
    litellm accepts too, with the frame's other fields beside it); None for another frame."""
    fields = raw_create_fields(frame)
    if fields is None:
        return None
    nested = fields.pop("response", None)
    return {**fields, **nested} if isinstance(nested, Mapping) else fields


async def _checked(runtime: Runtime, relay: Any, frame: Any) -> tuple[Call, dict[str, Any]] | None:
    """The frame's call, begun (its reads awaited, checked, not yet opened), with the body read; None for a frame
    that is no ``response.create``, or (counted) one that could not be read."""
    try:
        fields = request_of(frame)
        if fields is None:
            return None
        model = getattr(relay, "authorized_model", None)
        if isinstance(model, str) and model:  # the relay sends every frame with the session's model
            fields["model"] = model
        skipped, endpoint = exempt(relay, fields), _endpoint(relay)
    except Exception:
        runtime.telemetry.internal_error("start_call")
        return None
    call = await Call.begin_async(runtime, OPERATIONS["chat"], (), fields, endpoint, exempt=skipped, opens=False)
    return None if call is None else (call, fields)


def _endpoint(relay: Any) -> Endpoint:
    server = server_of(_API_BASE.get())
    provider = getattr(relay, "custom_llm_provider", None)
    return server, provider_of_litellm(provider if isinstance(provider, str) else None, server.address)


def _hold(relay: Any, checked: tuple[Call, dict[str, Any]]) -> bool:
    """Hold the frame's call on the relay until its forward returns; False for a relay that takes no attribute."""
    if not hasattr(relay, "__dict__"):
        return False
    relay.__dict__[_FRAME] = checked
    return True


def _held(relay: Any, take: bool = False) -> tuple[Call, dict[str, Any]] | None:
    """The frame's call the relay holds (``take``: taken off it), if any."""
    attributes = getattr(relay, "__dict__", None)
    if attributes is None:
        return None
    held: tuple[Call, dict[str, Any]] | None = attributes.pop(_FRAME, None) if take else attributes.get(_FRAME)
    return held


def seams(switch: Switch, runtime: Runtime) -> list[Seam]:
    return [
        Seam(_HANDLERS, "BaseLLMHTTPHandler", "async_responses_websocket", session),
        Seam(_RELAY_MODULE, _RELAY, "_forward_guarded_frame", forward),
        Seam(_RELAY_MODULE, _RELAY, "_guard_frame", guard(switch, runtime)),
        Seam(_RELAY_MODULE, _RELAY, "_record_client_frame", record),
        Seam(_RELAY_MODULE, _RELAY, "_record_backend_event", backend_event),
        Seam(_RELAY_MODULE, _RELAY, "_log_open_turns", upstream_ended),
    ]
