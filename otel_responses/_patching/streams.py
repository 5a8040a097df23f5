"""Stream proxies: the app iterates the same events (or bytes), in the same order, as the same objects; the call
ends on the terminal event, an error, close, leaving the context manager, or garbage collection of an abandoned
stream (whichever comes first: a call ends once).

Three shapes of streamed body, one observer (``_calls.observer``) each:

- a ``Stream`` / ``AsyncStream`` of events (``create(stream=True)``, ``responses.stream()``): the stream proxies here;
- a raw response carrying the body (``with_raw_response`` / ``with_streaming_response`` with ``stream=True``): the
  raw-response proxies of ``raw_streams.py``;
- WebSocket mode (``websocket.py``), which routes received events to observers itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import wrapt

from .. import attributes as a
from .._calls.call import Call
from .._calls.observer import StreamObserver
from .._telemetry.recorded import Outcome

if TYPE_CHECKING:
    Proxy = wrapt.ObjectProxy[Any]
else:  # older wrapt releases cannot be subscripted at run time
    Proxy = wrapt.ObjectProxy

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


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
        self._self_call = call

    async def _self_first_page(self) -> Any:
        call = self._self_call
        try:
            page = await self.__wrapped__
        except BaseException as exc:
            call.raised(exc)
            raise
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
        # Never awaited nor iterated (nothing was requested), else ended already: ending again does nothing.
        self._self_call.end(Outcome(extra={a.STREAM_ENDED: "abandoned"}))


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
