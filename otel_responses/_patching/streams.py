"""Stream proxies: the app iterates the same events (or bytes), in the same order, as the same objects; the span
ends exactly once — on the terminal event, an error, close, leaving the context manager, or garbage
collection of an abandoned stream.

Three shapes of streamed body, one observer each:

- a ``Stream`` / ``AsyncStream`` of events (``create(stream=True)``, ``responses.stream()``): the stream proxies here;
- a raw response carrying the body (``with_raw_response`` / ``with_streaming_response`` with ``stream=True``): the
  raw-response proxies of ``raw_streams.py``;
- WebSocket mode (``websocket.py``), which routes received events to observers itself.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeVar

import wrapt

from .. import attributes as a
from .._analysis.facts import ResponseFacts, response_facts, with_stream_items
from .._fingerprint import Fingerprinter
from .._items import OPAQUE_FIELDS, ItemMeta, item_meta
from .._telemetry.recorded import Outcome
from .._telemetry.telemetry import Attributes
from .call import Call

if TYPE_CHECKING:
    Proxy = wrapt.ObjectProxy[Any]
else:  # older wrapt releases cannot be subscripted at run time
    Proxy = wrapt.ObjectProxy

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
# The events an observer reads; a raw body's other events are not even parsed.
OBSERVED_EVENTS = frozenset({"response.output_item.done", "error", *TERMINAL_EVENTS})


class Fields(dict[str, Any]):
    """A JSON object read by attribute, as the facts read the SDK's models (a missing field: AttributeError).

    A nested plain dict (a body ``json.loads`` parsed) is read the same way, wrapped when it is read rather than
    converted ahead: a long body costs one parse in C and a shallow copy of each object the facts read."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return Fields(value) if type(value) is dict else value

    @staticmethod
    def read(value: Any) -> Any:
        """A parsed JSON value readable by attribute: an object as ``Fields``, anything else as it is."""
        return Fields(value) if type(value) is dict else value


def as_fields(value: Any) -> Any:
    """JSON-shaped data (dicts, lists) readable by attribute, recursively."""
    if isinstance(value, dict):
        return Fields((key, as_fields(item)) for key, item in value.items())
    if isinstance(value, list):
        return [as_fields(item) for item in value]
    return value


class StreamObserver:
    """Watches the events of one stream and ends its call once.

    Whatever holds the body (a stream proxy, a raw response proxy, an iterator over its bytes) holds the
    observer too; when the last holder is garbage collected before the stream ended, the span ends
    ``abandoned``.
    """

    __slots__ = ("_call", "_chunk_attrs", "_first_chunk", "_holders", "_items", "_last_chunk", "_lock", "_request_id")

    def __init__(self, call: Call, request_id: str | None) -> None:
        self._call: Call | None = call
        self._request_id = request_id
        self._items: list[Any] = []  # the items of `output_item.done` events
        self._first_chunk = False
        self._chunk_attrs: Attributes | None = None  # set on the first chunk when chunk timing is on
        self._last_chunk = 0.0
        self._lock = threading.Lock()
        self._holders: list[None] = []  # one entry per live holder; list append/pop are atomic

    @property
    def done(self) -> bool:
        """The span has ended."""
        return self._call is None

    def hold(self) -> None:
        """One more object carries the body."""
        self._holders.append(None)

    def release(self) -> None:
        """A holder was garbage collected: the last one ends an unfinished stream as abandoned."""
        with contextlib.suppress(IndexError):
            self._holders.pop()
        if not self._holders:
            self.ended("abandoned")

    def internal_error(self, step: str) -> None:
        """Count a swallowed failure while the call is open, else only log it. Call from an ``except`` block."""
        call = self._call
        if call is not None:
            call.telemetry.internal_error(step)
        else:
            _log.debug("otel-responses: %s failed (%s); the app is unaffected", step, type(sys.exc_info()[1]).__name__)

    def discard(self) -> None:
        """The call was ended elsewhere (a WebSocket frame that never left): nothing more to observe."""
        self._take()

    def _take(self) -> Call | None:
        """The call, exactly once: whoever ends the span first takes it."""
        with self._lock:
            call, self._call = self._call, None
        return call

    def event(self, event: Any) -> None:
        """One event the app received. Runs once per event (a delta, mostly): the common case is a clock check
        and one set lookup, in this one frame."""
        call = self._call
        if call is None:
            return
        try:
            if self._chunk_attrs is not None or not self._first_chunk:
                self._chunk(call)
            if type(event) is dict:  # a stream parsed `to=Stream[dict]` (or object): read it as the SDK's models are
                event = as_fields(event) if event.get("type") in OBSERVED_EVENTS else Fields(type=event.get("type"))
            kind = getattr(event, "type", None)
            if kind in OBSERVED_EVENTS:
                self._observe(event, kind)
        except Exception:
            call.telemetry.internal_error("observe_stream_event")

    def _chunk(self, call: Call) -> None:
        """The first chunk's time; with chunk timing on, each later chunk's time since the previous one's end."""
        now = perf_counter()
        chunk_attrs = self._chunk_attrs
        if chunk_attrs is not None:
            call.telemetry.next_chunk(now - self._last_chunk, chunk_attrs, call.context)
        else:
            self._first_chunk = True
            call.chunk(now)  # recorded when the call ends
            self._chunk_attrs = call.telemetry.chunk_attributes(call)
        self._last_chunk = now

    def _observe(self, event: Any, kind: str) -> None:
        if kind == "response.output_item.done":
            # The item itself, read at the end only if needed (see `streamed_items`): the app holds it anyway.
            self._items.append(getattr(event, "item", None))
        elif kind in TERMINAL_EVENTS:
            self._terminal(getattr(event, "response", None), kind)
        else:  # error
            code = getattr(event, "code", None) or getattr(getattr(event, "error", None), "code", None)
            self.fail_with(code if isinstance(code, str) and code else "error")

    def _terminal(self, response: Any, kind: str) -> None:
        call = self._take()
        if call is None:
            return
        resp = response_facts(response, call.settings, self._request_id)
        if self._items:
            resp = with_stream_items(resp, streamed_items(self._items, resp, call.settings.fingerprinter))
        error_type = None
        if kind == "response.failed":
            code = getattr(getattr(response, "error", None), "code", None)
            error_type = code if isinstance(code, str) and code else "response_failed"
        call.end(Outcome(resp, error_type))

    def fail_with(self, error_type: str) -> None:
        """An `error` event the SDK yielded rather than raised."""
        call = self._take()
        if call is not None:
            call.end(Outcome(None, error_type, extra={a.REQUEST_ID: self._request_id} if self._request_id else None))

    def raised(self, exc: BaseException) -> None:
        call = self._take()
        if call is not None:
            call.raised(exc)

    def ended(self, how: str) -> None:
        """No terminal event: the app closed the stream, left its context, or dropped it."""
        call = self._take()
        if call is None:
            return
        extra: dict[str, Any] = {a.STREAM_ENDED: how}
        if self._request_id:
            extra[a.REQUEST_ID] = self._request_id
        call.end(Outcome(extra=extra))


def _opaque_type(item: Any) -> bool:
    """Whether an output item is of a type that carries an opaque payload."""
    kind = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
    return kind in OPAQUE_FIELDS


def streamed_items(items: list[Any], resp: ResponseFacts, fingerprints: Fingerprinter) -> tuple[ItemMeta, ...]:
    """Metadata of a stream's ``output_item.done`` items, read once the stream ended. When the terminal response
    carries its output, only the items with an opaque payload matter (other copies of it: see
    ``facts.with_stream_items``); else all of them stand for the output."""
    if resp.output_items:
        items = [item for item in items if _opaque_type(item)]
    return tuple([item_meta(item, fingerprints) for item in items])


def request_id_of(http_response: Any) -> str | None:
    """The ``x-request-id`` header of a stream's HTTP response."""
    headers = getattr(http_response, "headers", None)
    value = headers.get("x-request-id") if headers is not None else None
    return value if isinstance(value, str) else None


def _unobserved(exc: Exception) -> None:
    """An event the observer failed on, past its own guard: logged (the type only), never raised to the app."""
    _log.debug("otel-responses: observing a stream event failed (%s); the app is unaffected", type(exc).__qualname__)


def tapped(
    chunks: Iterator[_T], feed: Callable[[_T], None] | None, observer: StreamObserver, holder: object = None
) -> Iterator[_T]:
    """The same chunks (events, or a raw body's bytes), each shown to ``feed`` after the SDK produced it; the end of
    the stream ends the span. A generator, resumed once per chunk: cheaper than a method call per chunk. A feed that
    fails is counted and dropped (a raw body's decoding state can no longer be trusted). ``holder``: an object that
    must live as long as the iteration (a ``for`` loop holds only this generator, not the proxy it came from, whose
    collection would end the span as abandoned)."""
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            observer.ended("exhausted")
            return
        except BaseException as exc:
            observer.raised(exc)
            raise
        if feed is not None:
            try:
                feed(chunk)
            except Exception:
                observer.internal_error("observe_raw_stream")
                feed = None
        yield chunk


async def atapped(
    chunks: AsyncIterator[_T], feed: Callable[[_T], None] | None, observer: StreamObserver
) -> AsyncIterator[_T]:
    """The async twin of :func:`tapped`."""
    while True:
        try:
            chunk = await chunks.__anext__()
        except StopAsyncIteration:
            observer.ended("exhausted")
            return
        except BaseException as exc:
            observer.raised(exc)
            raise
        if feed is not None:
            try:
                feed(chunk)
            except Exception:
                observer.internal_error("observe_raw_stream")
                feed = None
        yield chunk


class SyncStreamProxy(Proxy):
    """A ``Stream`` that reports its events; everything else passes through."""

    def __init__(self, stream: Any, observer: StreamObserver) -> None:
        super().__init__(stream)
        observer.hold()
        self._self_observer = observer

    @classmethod
    def for_call(cls, stream: Any, call: Call) -> SyncStreamProxy:
        """The proxy of a stream the call returned itself (``create(stream=True)``)."""
        return cls(stream, StreamObserver(call, request_id_of(getattr(stream, "response", None))))

    def __iter__(self) -> Iterator[Any]:
        """A ``for`` loop over the stream goes through :func:`tapped`; ``next()`` on the proxy itself through
        ``__next__``. Both read the same underlying stream."""
        observer = self._self_observer
        return tapped(self.__wrapped__, observer.event, observer, self)

    def __next__(self) -> Any:
        observer = self._self_observer
        try:
            event = self.__wrapped__.__next__()
        except StopIteration:
            observer.ended("exhausted")
            raise
        except BaseException as exc:
            observer.raised(exc)
            raise
        try:
            observer.event(event)
        except Exception as exc:  # the observer guards itself; this is the last line that keeps the app's iteration
            _unobserved(exc)
        return event

    def __enter__(self) -> SyncStreamProxy:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_observer.ended("closed")

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_observer.ended("closed")

    def __del__(self) -> None:
        self._self_observer.release()


class AsyncStreamProxy(Proxy):
    """An ``AsyncStream`` that reports its events; everything else passes through."""

    def __init__(self, stream: Any, observer: StreamObserver) -> None:
        super().__init__(stream)
        observer.hold()
        self._self_observer = observer

    @classmethod
    def for_call(cls, stream: Any, call: Call) -> AsyncStreamProxy:
        """The proxy of a stream the call returned itself (``await create(stream=True)``)."""
        return cls(stream, StreamObserver(call, request_id_of(getattr(stream, "response", None))))

    def __aiter__(self) -> AsyncStreamProxy:
        return self

    async def __anext__(self) -> Any:
        observer = self._self_observer
        try:
            event = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            observer.ended("exhausted")
            raise
        except BaseException as exc:
            observer.raised(exc)
            raise
        try:
            observer.event(event)
        except Exception as exc:  # see SyncStreamProxy.__next__
            _unobserved(exc)
        return event

    async def __aenter__(self) -> AsyncStreamProxy:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_observer.ended("closed")

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_observer.ended("closed")

    @property
    def aclose(self) -> Callable[[], Awaitable[None]]:
        """``AsyncStream.aclose()`` (where the SDK has it; absent there, absent here): it closes the stream, so it ends
        it."""
        inner = self.__wrapped__.aclose
        observer = self._self_observer

        async def aclose() -> None:
            try:
                await inner()
            finally:
                observer.ended("closed")

        return aclose

    def __del__(self) -> None:
        self._self_observer.release()


class PaginatorProxy(Proxy):
    """An ``AsyncPaginator`` whose first page request ends the call's span."""

    def __init__(self, paginator: Any, call: Call) -> None:
        super().__init__(paginator)
        self._self_call: Call | None = call

    async def _self_first_page(self) -> Any:
        call, self._self_call = self._self_call, None
        try:
            page = await self.__wrapped__
        except BaseException as exc:
            if call is not None:
                call.raised(exc)
            raise
        if call is not None:
            call.returned(page)
        return page

    def __await__(self) -> Any:
        return self._self_first_page().__await__()

    async def _self_items(self) -> Any:
        page = await self
        async for item in page:
            yield item

    def __aiter__(self) -> Any:
        return self._self_items()

    def __del__(self) -> None:
        call, self._self_call = self._self_call, None
        if call is not None:  # never awaited nor iterated: nothing was requested
            call.end(Outcome(extra={a.STREAM_ENDED: "abandoned"}))


def _end_raw(raw: object) -> None:
    if isinstance(raw, (SyncStreamProxy, AsyncStreamProxy)):
        raw._self_observer.ended("closed")


def end_with_helper_close(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """``ResponseStream.close()`` closes the HTTP response, not our proxy: end the span there too."""
    try:
        return wrapped(*args, **kwargs)
    finally:
        _end_raw(getattr(instance, "_raw_stream", None))


async def end_with_async_helper_close(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """The async twin of :func:`end_with_helper_close`."""
    try:
        return await wrapped(*args, **kwargs)
    finally:
        _end_raw(getattr(instance, "_raw_stream", None))
