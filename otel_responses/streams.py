"""Stream proxies: the app iterates the same events (or bytes), in the same order, as the same objects; the span
ends exactly once — on the terminal event, an error, close, leaving the context manager, or garbage
collection of an abandoned stream.

Three shapes of streamed body, one observer each:

- a ``Stream`` / ``AsyncStream`` of events (``create(stream=True)``, ``responses.stream()``): the stream proxies;
- a raw response carrying the body (``with_raw_response`` / ``with_streaming_response`` with ``stream=True``): the
  raw-response proxies, which hand out a stream proxy from ``parse()`` and tap ``iter_bytes()`` /
  ``iter_text()`` / ``iter_lines()`` / ``read()`` with the SDK's own SSE decoder, reading the chunks the app
  reads and nothing more;
- WebSocket mode (``websocket.py``), which routes received events to observers itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeVar

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
_T = TypeVar("_T")


class StreamObserver:
    """Watches the events of one stream and ends its call once.

    Whatever holds the body (a stream proxy, a raw response proxy, an iterator over its bytes) holds the
    observer too; when the last holder is garbage collected before the stream ended, the span ends
    ``abandoned``.
    """

    __slots__ = ("_call", "_first_chunk", "_holders", "_items", "_lock", "_request_id")

    def __init__(self, call: Call, request_id: str | None) -> None:
        self._call: Call | None = call
        self._request_id = request_id
        self._items: list[ItemMeta] = []
        self._first_chunk = False
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
        if type(event) is dict:  # a stream parsed `to=Stream[dict]` (or object): read it as the SDK's models are
            event = _as_fields(event) if event.get("type") in _OBSERVED else _Fields(type=event.get("type"))
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


def _request_id(http_response: Any) -> str | None:
    """The ``x-request-id`` header of a stream's HTTP response."""
    headers = getattr(http_response, "headers", None)
    value = headers.get("x-request-id") if headers is not None else None
    return value if isinstance(value, str) else None


def _safely(observe: Callable[[_T], None], event: _T) -> None:
    """The app's events come first: nothing the observer does may reach the app's iteration."""
    try:
        observe(event)
    except Exception as exc:
        _log.debug(
            "otel-responses: observing a stream event failed (%s); the app is unaffected", type(exc).__qualname__
        )


class SyncStreamProxy(_Proxy):
    """A ``Stream`` that reports its events; everything else passes through."""

    def __init__(self, stream: Any, observer: StreamObserver) -> None:
        super().__init__(stream)
        observer.hold()
        self._self_observer = observer

    @classmethod
    def for_call(cls, stream: Any, call: Call) -> SyncStreamProxy:
        """The proxy of a stream the call returned itself (``create(stream=True)``)."""
        return cls(stream, StreamObserver(call, _request_id(getattr(stream, "response", None))))

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
        self._self_observer.release()


class AsyncStreamProxy(_Proxy):
    """An ``AsyncStream`` that reports its events; everything else passes through."""

    def __init__(self, stream: Any, observer: StreamObserver) -> None:
        super().__init__(stream)
        observer.hold()
        self._self_observer = observer

    @classmethod
    def for_call(cls, stream: Any, call: Call) -> AsyncStreamProxy:
        """The proxy of a stream the call returned itself (``await create(stream=True)``)."""
        return cls(stream, StreamObserver(call, _request_id(getattr(stream, "response", None))))

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

    @property
    def aclose(self) -> Callable[[], Awaitable[None]]:
        """``AsyncStream.aclose()`` (newer SDKs; absent, absent here too): it closes the stream, so it ends it."""
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


# -- raw responses carrying a streamed body ---------------------------------------------------------------

_OBSERVED = frozenset({"response.output_item.done", "error", *_TERMINAL})
_LINE_END = re.compile(rb"\r\n|\r|\n")
# What starts a line of the SSE format; anything else after `iter_lines()` is a piece of the line before it.
_SSE_LINE = re.compile(r"(?:data|event|id|retry)(?::|$)|:")
# `str.splitlines()` (httpx's `iter_lines()`) also splits at these, which JSON strings may hold unescaped;
# which one it was is lost: the pieces are joined with the commonest.
_UNICODE_LINE_BREAK = "\u2028"


class _Fields(dict[str, Any]):
    """A JSON object read by attribute, as the facts read the SDK's models (a missing field: AttributeError)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _as_fields(value: Any) -> Any:
    """JSON-shaped data (dicts, lists) readable by attribute, recursively."""
    if isinstance(value, dict):
        return _Fields((key, _as_fields(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_as_fields(item) for item in value]
    return value


class _ByteLines:
    """Splits a byte stream into lines at CR, LF or CRLF, as the SSE format has it, chunk by chunk."""

    __slots__ = ("_parts", "_skip_lf")

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[:1] == b"\n":  # the LF of a CRLF split across two chunks
                chunk = chunk[1:]
        if _LINE_END.search(chunk) is None:
            if chunk:
                self._parts.append(chunk)
            return []
        lines = _LINE_END.split(chunk)
        if self._parts:
            lines[0] = b"".join(self._parts) + lines[0]
            self._parts.clear()
        rest = lines.pop()
        if rest:
            self._parts.append(rest)
        self._skip_lf = chunk.endswith(b"\r")
        return lines


def _sse_decoder() -> Any:
    """The installed SDK's line-level SSE decoder (``openai._streaming.SSEDecoder.decode``), or None."""
    try:
        from openai._streaming import SSEDecoder

        decoder = SSEDecoder()
    except Exception:
        return None
    return decoder if callable(getattr(decoder, "decode", None)) else None


class _SSETap:
    """The SSE events of a body the app reads as bytes, text or lines, decoded beside it for the observer.

    Only events the observer uses are parsed (output items, terminal events, errors); the others only count as
    the first chunk. A top-level ``error`` key is where the SDK's own stream would have raised ``APIError``: the
    span records that same error.
    """

    __slots__ = ("_decoder", "_held", "_lines", "_observer", "_request")

    def __init__(self, observer: StreamObserver, decoder: Any, request: Any) -> None:
        self._observer = observer
        self._decoder = decoder
        self._request = request
        self._lines = _ByteLines()
        self._held: str | None = None

    def feed_bytes(self, chunk: bytes) -> None:
        for line in self._lines.feed(chunk):
            self._line(line.decode("utf-8", "replace"))

    def feed_text(self, chunk: str) -> None:
        self.feed_bytes(chunk.encode("utf-8"))

    def feed_line(self, line: str) -> None:
        """A line of ``iter_lines()``: held until the next one shows it was not cut at a Unicode line break.

        A piece follows while the held ``data:`` line's JSON object is still open (does not end with ``}``), or
        when it does not start like a line of the SSE format; a run of breaks gives empty pieces."""
        held = self._held
        if held is not None and (
            (held.startswith("data:") and not held.endswith(("}", "]"))) or (line and _SSE_LINE.match(line) is None)
        ):
            self._held = held + _UNICODE_LINE_BREAK + line
            return
        self._held = line or None
        if held is not None:
            self._line(held)
        if not line:
            self._line(line)

    def _line(self, line: str) -> None:
        sse = self._decoder.decode(line)
        if sse is not None:
            self._event(sse.event, sse.data)

    def _event(self, kind: str | None, data: str) -> None:
        if data.startswith("[DONE]"):
            return
        if kind is not None and kind not in _OBSERVED and '"error"' not in data:
            self._observer.event(_Fields(type=kind))
            return
        fields = json.loads(data, object_pairs_hook=_Fields)
        if not isinstance(fields, _Fields):
            return
        error = fields.get("error")
        if error:
            self._observer.raised(_api_error(error, self._request))
        else:
            self._observer.event(fields)


def _api_error(error: Any, request: Any) -> BaseException:
    """The ``APIError`` the SDK's stream raises for an event with an ``error`` key (never raised here)."""
    from openai import APIError

    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message:
        message = "An error occurred during streaming"
    return APIError(message=message, request=request, body=error)


def _tapped(chunks: Iterator[_T], feed: Callable[[_T], None] | None, observer: StreamObserver) -> Iterator[_T]:
    """The same chunks, each shown to the tap after the SDK produced it; the end of the body ends the span.
    A tap that fails is counted and dropped: its decoding state can no longer be trusted."""
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


async def _atapped(
    chunks: AsyncIterator[_T], feed: Callable[[_T], None] | None, observer: StreamObserver
) -> AsyncIterator[_T]:
    """The async twin of :func:`_tapped`."""
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


def _held_by(holder: _T, observer: StreamObserver) -> _T:
    """``holder`` carries the body until it is garbage collected (started or not)."""
    observer.hold()
    weakref.finalize(holder, observer.release)
    return holder


def _read_content(raw: Any) -> bytes | None:
    """The body, when the app has read it whole (never reads it)."""
    try:
        content = raw.http_response.content  # httpx raises ResponseNotRead before the body is read
    except Exception:
        return None
    return content if isinstance(content, bytes) else None


class _RawResponseProxy(_Proxy):
    """A raw response (``LegacyAPIResponse``, ``APIResponse``) carrying a streamed body. ``parse()`` hands out a
    stream proxy sharing this call's observer; everything else passes through."""

    def __init__(self, raw: Any, call: Call) -> None:
        super().__init__(raw)
        observer = StreamObserver(call, _request_id(getattr(raw, "http_response", None)))
        observer.hold()
        self._self_observer = observer
        self._self_streams: list[tuple[Any, Any]] = []

    def _self_adopt(self, parsed: Any) -> Any:
        """The proxy of the stream ``parse()`` returned: the same one each time the SDK returns that stream."""
        try:
            for stream, proxy in self._self_streams:
                if stream is parsed:
                    return proxy
            if hasattr(parsed, "__anext__"):
                proxy = AsyncStreamProxy(parsed, self._self_observer)
            elif hasattr(parsed, "__next__"):
                proxy = SyncStreamProxy(parsed, self._self_observer)
            else:
                return parsed
            self._self_streams.append((parsed, proxy))
            return proxy
        except Exception:
            self._self_observer.internal_error("wrap_raw_stream")
            return parsed

    def _self_tap(self) -> _SSETap | None:
        decoder = _sse_decoder()
        if decoder is None:
            return None
        return _SSETap(self._self_observer, decoder, getattr(self.__wrapped__.http_response, "request", None))

    def _self_feed(self, feed: Callable[[_SSETap, Any], None]) -> Callable[[Any], None] | None:
        """A new tap's ``feed`` (bytes, text or lines) for one reading of the body, or None without a decoder."""
        try:
            tap = self._self_tap()
        except Exception:
            self._self_observer.internal_error("tap_raw_stream")
            return None
        return None if tap is None else partial(feed, tap)

    def _self_read_whole(self, exc: BaseException | None) -> None:
        """After ``read()`` / ``text()`` / ``json()``: the whole body, if it was read, shown to the tap; it ended."""
        observer = self._self_observer
        try:
            content = _read_content(self.__wrapped__)
            if content is not None:
                feed = self._self_feed(_SSETap.feed_bytes)
                if feed is not None:
                    feed(content)
        except Exception:
            observer.internal_error("observe_raw_stream")
            content = b""
        if content is not None:
            observer.ended("exhausted")
        elif exc is not None:
            observer.raised(exc)

    def __del__(self) -> None:
        observer = getattr(self, "_self_observer", None)
        if observer is not None:
            observer.release()


class LegacyRawStreamProxy(_RawResponseProxy):
    """``with_raw_response.create(stream=True)``: a ``LegacyAPIResponse`` whose (sync) ``parse()`` returns the
    ``Stream`` or ``AsyncStream``. It has no close: dropping it with nothing parsed ends the span."""

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_adopt(self.__wrapped__.parse(*args, **kwargs))


class RawStreamProxy(_RawResponseProxy):
    """``with_streaming_response.create(stream=True)`` (sync): an ``APIResponse`` the app parses into a
    ``Stream``, iterates as bytes, text or lines, reads whole, or closes."""

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_adopt(self.__wrapped__.parse(*args, **kwargs))

    def iter_bytes(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        return self._self_iter(self.__wrapped__.iter_bytes(*args, **kwargs), _SSETap.feed_bytes)

    def iter_text(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        return self._self_iter(self.__wrapped__.iter_text(*args, **kwargs), _SSETap.feed_text)

    def iter_lines(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        return self._self_iter(self.__wrapped__.iter_lines(*args, **kwargs), _SSETap.feed_line)

    def _self_iter(self, chunks: Iterator[_T], feed: Callable[[_SSETap, _T], None]) -> Iterator[_T]:
        observer = self._self_observer
        try:
            return _held_by(_tapped(chunks, self._self_feed(feed), observer), observer)
        except Exception:
            observer.internal_error("tap_raw_stream")
            return chunks

    def read(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_whole(self.__wrapped__.read, args, kwargs)

    def text(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_whole(self.__wrapped__.text, args, kwargs)

    def json(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_whole(self.__wrapped__.json, args, kwargs)

    def _self_whole(self, reader: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            result = reader(*args, **kwargs)
        except BaseException as exc:
            self._self_read_whole(exc)
            raise
        self._self_read_whole(None)
        return result

    def close(self, *args: Any, **kwargs: Any) -> None:
        try:
            self.__wrapped__.close(*args, **kwargs)
        finally:
            self._self_observer.ended("closed")


class AsyncRawStreamProxy(_RawResponseProxy):
    """``with_streaming_response.create(stream=True)`` (async): an ``AsyncAPIResponse``; the async twin of
    :class:`RawStreamProxy`."""

    async def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_adopt(await self.__wrapped__.parse(*args, **kwargs))

    def iter_bytes(self, *args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
        return self._self_iter(self.__wrapped__.iter_bytes(*args, **kwargs), _SSETap.feed_bytes)

    def iter_text(self, *args: Any, **kwargs: Any) -> AsyncIterator[str]:
        return self._self_iter(self.__wrapped__.iter_text(*args, **kwargs), _SSETap.feed_text)

    def iter_lines(self, *args: Any, **kwargs: Any) -> AsyncIterator[str]:
        return self._self_iter(self.__wrapped__.iter_lines(*args, **kwargs), _SSETap.feed_line)

    def _self_iter(self, chunks: AsyncIterator[_T], feed: Callable[[_SSETap, _T], None]) -> AsyncIterator[_T]:
        observer = self._self_observer
        try:
            return _held_by(_atapped(chunks, self._self_feed(feed), observer), observer)
        except Exception:
            observer.internal_error("tap_raw_stream")
            return chunks

    async def read(self, *args: Any, **kwargs: Any) -> Any:
        return await self._self_whole(self.__wrapped__.read, args, kwargs)

    async def text(self, *args: Any, **kwargs: Any) -> Any:
        return await self._self_whole(self.__wrapped__.text, args, kwargs)

    async def json(self, *args: Any, **kwargs: Any) -> Any:
        return await self._self_whole(self.__wrapped__.json, args, kwargs)

    async def _self_whole(
        self, reader: Callable[..., Awaitable[Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            result = await reader(*args, **kwargs)
        except BaseException as exc:
            self._self_read_whole(exc)
            raise
        self._self_read_whole(None)
        return result

    async def close(self, *args: Any, **kwargs: Any) -> None:
        try:
            await self.__wrapped__.close(*args, **kwargs)
        finally:
            self._self_observer.ended("closed")


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
