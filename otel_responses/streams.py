"""Stream proxies: the app iterates the same events, in the same order, as the same objects; the span
ends exactly once — on the terminal event, an error, close, leaving the context manager, or garbage
collection of an abandoned stream."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any

import wrapt

from . import attributes as a
from .call import Call
from .facts import response_facts, with_stream_items
from .items import ItemMeta, item_meta

if TYPE_CHECKING:
    _Proxy = wrapt.ObjectProxy[Any]
else:  # older wrapt releases cannot be subscripted at run time
    _Proxy = wrapt.ObjectProxy

_log = logging.getLogger(__name__)
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


class StreamObserver:
    """Watches the events of one stream and ends its call once."""

    __slots__ = ("_call", "_first_chunk", "_items", "_lock", "_request_id")

    def __init__(self, call: Call, request_id: str | None) -> None:
        self._call: Call | None = call
        self._request_id = request_id
        self._items: list[ItemMeta] = []
        self._first_chunk = False
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        """The span has ended."""
        return self._call is None

    def _take(self) -> Call | None:
        """The call, exactly once: whoever ends the span first takes it."""
        with self._lock:
            call, self._call = self._call, None
        return call

    def event(self, event: Any) -> None:
        call = self._call
        if call is None:
            return
        try:
            self._observe(call, event)
        except Exception:
            call.telemetry.internal_error("observe_stream_event")

    def _observe(self, call: Call, event: Any) -> None:
        if not self._first_chunk:
            self._first_chunk = True
            call.telemetry.first_chunk(call.span, call.req, call.server, perf_counter() - call.started)
        kind = getattr(event, "type", None)
        if kind == "response.output_item.done":
            self._items.append(item_meta(getattr(event, "item", None), call.settings.fingerprinter))
        elif kind in _TERMINAL:
            self._terminal(getattr(event, "response", None), kind)
        elif kind == "error":
            code = getattr(event, "code", None) or getattr(getattr(event, "error", None), "code", None)
            self.fail_with(code if isinstance(code, str) and code else "error")

    def _terminal(self, response: Any, kind: str) -> None:
        call = self._take()
        if call is None:
            return
        resp = with_stream_items(response_facts(response, call.settings, self._request_id), tuple(self._items))
        error_type = None
        if kind == "response.failed":
            code = getattr(getattr(response, "error", None), "code", None)
            error_type = code if isinstance(code, str) and code else "response_failed"
        call.finish(resp, error_type=error_type)

    def fail_with(self, error_type: str) -> None:
        """An `error` event the SDK yielded rather than raised."""
        call = self._take()
        if call is not None:
            call.finish(None, {a.REQUEST_ID: self._request_id} if self._request_id else None, error_type=error_type)

    def raised(self, exc: BaseException) -> None:
        call = self._take()
        if call is not None:
            call.failed(exc)

    def ended(self, how: str) -> None:
        """No terminal event: the app closed the stream, left its context, or dropped it."""
        call = self._take()
        if call is None:
            return
        extra: dict[str, Any] = {a.STREAM_ENDED: how}
        if self._request_id:
            extra[a.REQUEST_ID] = self._request_id
        call.finish(None, extra)


def _request_id(stream: Any) -> str | None:
    headers = getattr(getattr(stream, "response", None), "headers", None)
    value = headers.get("x-request-id") if headers is not None else None
    return value if isinstance(value, str) else None


def _safely(observe: Callable[[Any], None], event: Any) -> None:
    """The app's events come first: nothing the observer does may reach the app's iteration."""
    try:
        observe(event)
    except Exception as exc:
        _log.debug(
            "otel-responses: observing a stream event failed (%s); the app is unaffected", type(exc).__qualname__
        )


class SyncStreamProxy(_Proxy):
    """A ``Stream`` that reports its events; everything else passes through."""

    def __init__(self, stream: Any, call: Call) -> None:
        super().__init__(stream)
        self._self_observer = StreamObserver(call, _request_id(stream))

    def __iter__(self) -> SyncStreamProxy:
        return self

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
        _safely(observer.event, event)
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
        self._self_observer.ended("abandoned")


class AsyncStreamProxy(_Proxy):
    """An ``AsyncStream`` that reports its events; everything else passes through."""

    def __init__(self, stream: Any, call: Call) -> None:
        super().__init__(stream)
        self._self_observer = StreamObserver(call, _request_id(stream))

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
        _safely(observer.event, event)
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

    def __del__(self) -> None:
        self._self_observer.ended("abandoned")


class PaginatorProxy(_Proxy):
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
                call.failed(exc)
            raise
        if call is not None:
            call.succeeded(page, None)
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
            call.finish(None, {a.STREAM_ENDED: "abandoned"})


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
