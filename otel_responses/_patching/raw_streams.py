"""Raw responses carrying a streamed body (``with_raw_response`` / ``with_streaming_response`` with
``stream=True``): proxies that hand out a stream proxy from ``parse()`` and tap ``iter_bytes()`` / ``iter_text()`` /
``iter_lines()`` / ``read()`` with the SDK's own SSE decoder, reading the chunks the app reads and nothing more. The
app gets the same objects and bytes; the events it would have parsed reach the call's ``StreamObserver``.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import partial
from typing import Any, TypeVar

from .._calls.call import Call
from .._calls.observer import OBSERVED_EVENTS, Fields, StreamObserver
from .streams import AsyncStreamProxy, Proxy, SyncStreamProxy, atapped, request_id_of, tapped

_T = TypeVar("_T")

_LINE_END = re.compile(rb"\r\n|\r|\n")
# What starts a line of the SSE format; anything else after `iter_lines()` is a piece of the line before it.
_SSE_LINE = re.compile(r"(?:data|event|id|retry)(?::|$)|:")
# `str.splitlines()` (httpx's `iter_lines()`) also splits at these, which JSON strings may hold unescaped;
# which one it was is lost: the pieces are joined with the commonest.
_UNICODE_LINE_BREAK = "\u2028"


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
        if kind is not None and kind not in OBSERVED_EVENTS and '"error"' not in data:
            self._observer.event(Fields(type=kind))
            return
        parsed = json.loads(data)
        if type(parsed) is not dict:
            return
        fields = Fields(parsed)
        error = fields.get("error")
        if error:
            self._observer.raised(_api_error(error, self._request))
        else:
            self._observer.event(fields)


def sse_feed(observer: StreamObserver, request: Any = None) -> Callable[[bytes], None] | None:
    """What a front end that relays a streamed body's bytes itself (the proxy) shows each chunk to: the SSE events,
    decoded beside it for ``observer``; None without the SDK's decoder."""
    decoder = _sse_decoder()
    return None if decoder is None else _SSETap(observer, decoder, request).feed_bytes


def _api_error(error: Any, request: Any) -> BaseException:
    """The ``APIError`` the SDK's stream raises for an event with an ``error`` key (never raised here)."""
    from openai import APIError

    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message:
        message = "An error occurred during streaming"
    return APIError(message=message, request=request, body=error)


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


class _RawResponseProxy(Proxy):
    """A raw response (``LegacyAPIResponse``, ``APIResponse``) carrying a streamed body. ``parse()`` hands out a
    stream proxy sharing this call's observer; everything else passes through."""

    def __init__(self, raw: Any, call: Call) -> None:
        super().__init__(raw)
        observer = StreamObserver(call, request_id_of(getattr(raw, "http_response", None)))
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
            return _held_by(tapped(chunks, self._self_feed(feed), observer), observer)
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
            return _held_by(atapped(chunks, self._self_feed(feed), observer), observer)
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
