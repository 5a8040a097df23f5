"""DSPy: every Responses API call ``dspy.LM(..., model_type="responses")`` makes, as one span with the SDK's contract.

DSPy 3.4 posts through its vendored lm15 (``dspy._vendor.lm15``, a standard-library transport, not the PyPI
``lm15``): the seams are its OpenAI Responses provider. ``complete`` and ``stream`` (and the async mirror's) are the
outer seams; inside them the provider builds the body (``_payload``: the call is checked and opened there, as that
is where the request exists), parses the reply (``parse_response``: its request id) and each SSE event
(``parse_stream_events``). DSPy is the app's layer here: it builds the request and parses the response, nothing
rewrites in between. DSPy before 3.4, and 3.4 with ``engine="litellm"`` (or a setting only litellm carries), call
``litellm.responses()``: the litellm instrumentor records those, and this one has nothing to patch. The design, at
length: https://otel-responses.github.io/otel-responses/integrations-design/ (the documentation's "Design: litellm,
DSPy and Azure").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from typing import Any

from .. import attributes as a
from .._calls.library import LibraryCall, current
from .._calls.observer import OBSERVED_EVENTS, as_fields
from .._calls.operations import OPERATIONS
from .._calls.runtime import Runtime
from .._patching import shared as _shared
from .._patching.hooks import Hooks, Seam, Wrapper
from .._patching.providers import is_azure_host, server_of
from .._patching.wrappers import Switch

__all__ = ["DSPyResponsesInstrumentor"]

_instruments = ("dspy >= 3.0.2",)
_USER = "DSPyResponsesInstrumentor"
_PROVIDERS = "dspy._vendor.lm15.providers"
_OPENAI = "dspy._vendor.lm15.providers.openai"
_ASYNC = "dspy._vendor.lm15.providers.async_base"
_CHAT = OPERATIONS["chat"]
_NOTHING: frozenset[str] = frozenset()


def _planning() -> bool:
    """lm15 is planning (``plan()`` builds a request and discards it)."""
    try:
        from dspy._vendor.lm15.adaptation import is_planning  # type: ignore[import-not-found]
    except ImportError:
        return False
    return bool(is_planning())


def _read(result: Any, pending: LibraryCall) -> tuple[Any, str | None]:
    """An lm15 ``Response``: its ``provider_data`` is the reply's JSON body, read as the SDK's models are."""
    return as_fields(getattr(result, "provider_data", None)), pending.request_id


def complete(switch: Switch, runtime: Runtime) -> Wrapper:
    """``OpenAILM.complete``: the call ends with the ``Response`` the provider returns or what it raises."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not switch.enabled():
            return wrapped(*args, **kwargs)
        pending = LibraryCall(runtime, _CHAT)
        token = pending.enter()
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            pending.failed(exc)
            raise
        finally:
            pending.leave(token)
        return pending.returned(result, lambda r: _read(r, pending))

    return wrapper


def acomplete(switch: Switch, runtime: Runtime) -> Wrapper:
    """``AsyncOpenAILM.complete``, the coroutine twin of :func:`complete`."""

    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not switch.enabled():
            return await wrapped(*args, **kwargs)
        pending = LibraryCall(runtime, _CHAT)
        token = pending.enter()
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            pending.failed(exc)
            raise
        finally:
            pending.leave(token)
        return pending.returned(result, lambda r: _read(r, pending))

    return wrapper


def _events(events: Iterator[Any], pending: LibraryCall) -> Iterator[Any]:
    """The provider's stream, each step run with the pending call current (the provider builds the request on the
    first one and parses SSE events on each); its end ends the call."""
    try:
        while True:
            token = pending.enter()
            try:
                event = next(events)
            except StopIteration:
                pending.stream_over("exhausted")
                return
            except BaseException as exc:
                pending.stream_failed(exc)
                raise
            finally:
                pending.leave(token)
            yield event
    finally:
        try:
            getattr(events, "close", lambda: None)()
        finally:
            pending.stream_over("closed")


async def _aevents(events: AsyncIterator[Any], pending: LibraryCall) -> AsyncIterator[Any]:
    """The async twin of :func:`_events`."""
    try:
        while True:
            token = pending.enter()
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                pending.stream_over("exhausted")
                return
            except BaseException as exc:
                pending.stream_failed(exc)
                raise
            finally:
                pending.leave(token)
            yield event
    finally:
        try:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            pending.stream_over("closed")


def stream(switch: Switch, runtime: Runtime) -> Wrapper:
    """``OpenAILM.stream`` (a generator) and ``AsyncOpenAILM.stream`` (an async one): the same events, observed."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        events = wrapped(*args, **kwargs)
        if not switch.enabled():
            return events
        pending = LibraryCall(runtime, _CHAT)
        if hasattr(events, "__anext__"):
            return _aevents(events, pending)
        return _events(events, pending)

    return wrapper


def payload(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``OpenAILM._payload(request, stream)``: the body the provider sends. The pending call is checked against it
    and opened; strict mode refuses here, before anything is sent."""
    body = wrapped(*args, **kwargs)
    pending = current()
    if pending is None or pending.started or type(body) is not dict or _planning():
        return body
    base_url = getattr(instance, "base_url", None)
    server = server_of(base_url if isinstance(base_url, str) else None)
    door = getattr(instance, "provider", None)  # lm15's provider: "openai", "azure" (its Azure door), "openai-codex"
    azure = (isinstance(door, str) and door.startswith("azure")) or is_azure_host(server.address)
    provider = a.PROVIDER_AZURE_OPENAI if azure else a.PROVIDER_OPENAI
    pending.prepare((), body, (server, provider), _NOTHING)
    refusal = pending.refusal()
    if refusal is not None:
        raise refusal
    pending.sent()
    return body


def parse_response(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``OpenAILM.parse_response(request, response)``: the reply's ``x-request-id``, kept for the call's end."""
    result = wrapped(*args, **kwargs)
    pending = current()
    if pending is not None:
        http: Any = args[1] if len(args) > 1 else kwargs.get("response")
        try:
            request_id = http.header("x-request-id")
        except Exception:
            request_id = None
        pending.request_id = request_id if isinstance(request_id, str) else None
    return result


def parse_stream_events(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``OpenAILM.parse_stream_events(request, raw_event)``: each SSE event as received, shown to the call's stream
    observer (only the events it reads are decoded: ``raw_event.event`` names them)."""
    pending = current()
    if pending is not None:
        raw = args[1] if len(args) > 1 else kwargs.get("raw_event")
        pending.stream_event(_event_of(raw))
    return wrapped(*args, **kwargs)


def _event_of(raw: Any) -> Any:
    """An SSE event as the stream observer reads it: decoded when it is one it observes, else just its type."""
    name = getattr(raw, "event", None)
    data = getattr(raw, "data", None)
    if name is not None and name not in OBSERVED_EVENTS:
        return {"type": name}
    if not isinstance(data, str) or not data or data == "[DONE]":
        return {"type": name}
    try:
        event = json.loads(data)
    except ValueError:
        return {"type": name}
    return event if isinstance(event, dict) else {"type": name}


def _seams(switch: Switch, runtime: Runtime) -> list[Seam]:
    return [
        Seam(_OPENAI, "OpenAILM", "complete", complete(switch, runtime)),
        Seam(_OPENAI, "OpenAILM", "stream", stream(switch, runtime)),
        Seam(_OPENAI, "OpenAILM", "_payload", payload),
        Seam(_OPENAI, "OpenAILM", "parse_response", parse_response),
        Seam(_OPENAI, "OpenAILM", "parse_stream_events", parse_stream_events),
        Seam(_ASYNC, "AsyncOpenAILM", "complete", acomplete(switch, runtime)),
        Seam(_ASYNC, "AsyncOpenAILM", "stream", stream(switch, runtime)),
    ]


class DSPyResponsesInstrumentor(_shared.CheckedInstrumentor):
    """Instruments DSPy's Responses API calls through its vendored lm15 (DSPy 3.4 and later; earlier releases and
    ``engine="litellm"`` go through litellm, which :class:`~otel_responses.integrations.litellm.
    LiteLLMResponsesInstrumentor` records). Shares the settings and the ledger of the other instrumentors; DSPy is
    patched when the app imports it, never imported here."""

    _switch: Switch | None = None
    _hooks: Hooks | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        runtime = _shared.acquire(_USER, kwargs)
        switch = Switch()
        hooks = Hooks(_PROVIDERS, lambda: _seams(switch, runtime))
        self._switch, self._hooks = switch, hooks
        hooks.start()

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._switch is not None:
            self._switch.on = False
        if self._hooks is not None:
            self._hooks.stop()
        self._switch = self._hooks = None
        _shared.release(_USER)
