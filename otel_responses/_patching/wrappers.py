"""Sync and async wrappers: begin a :class:`~otel_responses._calls.call.Call` (facts, checks against the ledger, the
span), call, then hand it the result, the stream or the error.

Whatever the instrumentation does, the app gets the same return value and the same exception; a failure
inside the instrumentation is logged at debug level and swallowed. The one deliberate exception is strict
mode, which refuses a request that would lose context before it is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from .._analysis.facts import Identity
from .._calls.call import PARSING, Call, Endpoint
from .._calls.library import LIBRARY_CALL
from .._calls.operations import Operation
from .._calls.runtime import Runtime
from .._telemetry.recorded import NO_SERVER, NOTHING_READ, Server
from ..attributes import PROVIDER_OPENAI
from .identity import identity_of
from .providers import provider_of_client
from .raw_streams import AsyncRawStreamProxy, LegacyRawStreamProxy, RawStreamProxy
from .streams import AsyncStreamProxy, PaginatorProxy, SyncStreamProxy

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

_DEFAULT_PORTS = {"https": 443, "http": 80}
_last_endpoint: tuple[object, object, Endpoint] = (None, None, (NO_SERVER, PROVIDER_OPENAI))


def endpoint_of(instance: Any) -> Endpoint:
    """Host and port of an SDK resource's client's base URL, and the provider it reaches (Azure OpenAI by the client's
    class or its host). The last answer is kept by the URL object's and the client class's identity (the client's
    own, the same call after call; setting ``client.base_url`` replaces it): parsing is not free."""
    global _last_endpoint
    client = getattr(instance, "_client", None)
    url = getattr(client, "base_url", None)
    kind = type(client)
    last = _last_endpoint
    if url is last[0] and kind is last[1] and url is not None:
        return last[2]
    host = getattr(url, "host", None)
    if not isinstance(host, str) or not host:
        return NO_SERVER, provider_of_client(kind, None)
    port = getattr(url, "port", None)
    if not isinstance(port, int):
        port = _DEFAULT_PORTS.get(getattr(url, "scheme", ""))
    endpoint: Endpoint = (Server(host, port), provider_of_client(kind, host))
    _last_endpoint = (url, kind, endpoint)
    return endpoint


class Switch:
    """Turned off by ``uninstrument()``: raw-response objects built earlier still hold our wrapper."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True

    def active(self) -> bool:
        """On, not suppressed by ``opentelemetry.instrumentation.utils.suppress_instrumentation()`` (an exporter
        or another instrumentation calling the SDK on its own behalf), and not inside a library's call that its own
        seam records (``call.LIBRARY_CALL``: one span per request, whatever path it takes)."""
        return self.on and is_instrumentation_enabled() and LIBRARY_CALL.get() is None

    def enabled(self) -> bool:
        """On and not suppressed: what a library's own seam asks (it records the call whatever it goes through)."""
        return self.on and is_instrumentation_enabled()


def stream_proxy(raw_mode: str | None, is_async: bool) -> Callable[[Any, Call], Any]:
    """What wraps a streamed result: the ``Stream`` itself, or the raw response the app reads it from."""
    if raw_mode is None:
        return AsyncStreamProxy.for_call if is_async else SyncStreamProxy.for_call
    if raw_mode == "true":  # LegacyAPIResponse, sync parse() for both clients
        return LegacyRawStreamProxy
    return AsyncRawStreamProxy if is_async else RawStreamProxy


class Method:
    """One wrapped method's share of an ``instrument()``: its switch, its runtime and the operation it performs.
    Each invocation of the method begins a :class:`Call` through it."""

    __slots__ = ("op", "runtime", "switch")

    def __init__(self, switch: Switch, runtime: Runtime, op: Operation) -> None:
        self.switch = switch
        self.runtime = runtime
        self.op = op

    def begin(
        self, instance: Any, args: tuple[Any, ...], kwargs: Any, exempt: frozenset[str] = frozenset()
    ) -> Call | None:
        """A begun call (checked against the ledger, its span open and current); None when the instrumentation is
        off, or (counted) when the call could not be begun: the app's call then goes on unrecorded."""
        if not self.switch.active():
            return None
        read = self._read(instance, kwargs)
        if read is None:
            return None
        return Call.begin(self.runtime, self.op, args, kwargs, read[0], exempt=exempt, identity=read[1])

    async def begin_async(
        self, instance: Any, args: tuple[Any, ...], kwargs: Any, exempt: frozenset[str] = frozenset()
    ) -> Call | None:
        """:meth:`begin` in a coroutine (see ``Call.begin_async``)."""
        if not self.switch.active():
            return None
        read = self._read(instance, kwargs)
        if read is None:
            return None
        return await Call.begin_async(self.runtime, self.op, args, kwargs, read[0], exempt=exempt, identity=read[1])

    def _read(self, instance: Any, kwargs: Any) -> tuple[Endpoint, Identity | None] | None:
        """What the SDK resource's client says of the call: the endpoint it reaches and whom it is made as; None
        (counted) when it cannot be read."""
        try:
            return endpoint_of(instance), identity_of(instance, kwargs, self.runtime.settings.fingerprinter)
        except Exception:
            self.runtime.telemetry.internal_error("start_call")
            return None


def call_through(call: Call, wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Strict mode's refusal, then the wrapped call; a failure is recorded and re-raised unchanged."""
    refusal = call.refusal()
    if refusal is not None:
        raise refusal
    try:
        return wrapped(*args, **kwargs)
    except BaseException as exc:
        call.raised(exc)
        raise


def parse_through(call: Call, wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """:func:`call_through` for ``responses.parse``: while it runs, the SDK's failure to parse the API's answer
    leaves the answer with the call (see :func:`keep_unparsed`)."""
    token = PARSING.set(call)
    try:
        return call_through(call, wrapped, args, kwargs)
    finally:
        PARSING.reset(token)


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
        call.raised(exc)
        raise


async def await_parse_through(
    call: Call, wrapped: Callable[..., Awaitable[Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """The coroutine twin of :func:`parse_through`."""
    token = PARSING.set(call)
    try:
        return await await_through(call, wrapped, args, kwargs)
    finally:
        PARSING.reset(token)


def sync_wrapper(method: Method, parses: bool = False) -> Wrapper:
    """A wrapt wrapper for a synchronous method; ``parses``: the method parses the response (``parse``)."""
    through = parse_through if parses else call_through

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = method.begin(instance, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        result = through(call, wrapped, args, kwargs)
        if call.req.stream:
            return call.stream(result, stream_proxy(call.raw_mode, False))
        call.returned(result)
        return result

    return wrapper


def async_wrapper(method: Method, parses: bool = False) -> Wrapper:
    """A wrapt wrapper for a coroutine method; ``parses`` as for :func:`sync_wrapper`."""
    through = await_parse_through if parses else await_through

    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        call = await method.begin_async(instance, args, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        result = await through(call, wrapped, args, kwargs)
        if call.req.stream:
            return call.stream(result, stream_proxy(call.raw_mode, True))
        call.returned(result)
        return result

    return wrapper


def paginator_wrapper(method: Method) -> Wrapper:
    """A wrapt wrapper for an async ``list``: a plain method returning a paginator that requests when
    awaited or iterated; the span covers that first request."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = method.begin(instance, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        try:
            paginator = wrapped(*args, **kwargs)
        except BaseException as exc:  # an argument the SDK rejects: the span ends with it, its context is left
            call.raised(exc)
            raise
        call.detach()
        try:
            return PaginatorProxy(paginator, call)
        except Exception:
            method.runtime.telemetry.internal_error("wrap_paginator")
            call.end(NOTHING_READ)
            return paginator

    return wrapper


def keep_unparsed(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The SDK's module-level ``parse_response`` (``responses.parse``'s post-parser: ``Response`` to
    ``ParsedResponse``). When it fails for a call being parsed (the model's JSON does not fit ``text_format``, or
    was cut short), the call keeps the ``Response``: the API answered, and the answer is recorded and remembered.
    The exception passes unchanged."""
    call = PARSING.get()
    if call is None:
        return wrapped(*args, **kwargs)
    try:
        return wrapped(*args, **kwargs)
    except Exception:
        call.unparsed = kwargs.get("response")
        raise
