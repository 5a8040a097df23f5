"""One HTTP request through the proxy: read whole (within the limit), handed to the analysis when the operation
table knows its path (as the upstream reads it: ``routing``), refused in strict mode before anything goes upstream,
then forwarded to the one upstream and relayed back as it arrives — the same status, headers (less hop-by-hop) and
bytes; a stream chunk by chunk, never buffered; a compressed body as it came. What the client receives is what the
upstream sent: an upstream that cuts its body cuts the client's too.

The relay never waits for the analysis (it runs elsewhere: ``analyst``), except for strict mode's verdict. A body
past the analysis bound, or one the analysis is too far behind to take, is forwarded unrecorded and counted.

The destination is never the request's to choose: not its ``Host``, an absolute URI on its request line,
``Forwarded`` or ``X-Forwarded-Host`` (those go upstream as headers, unread), nor ``CONNECT`` (refused).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from aiohttp import ClientError, ClientPayloadError, ClientResponse, ClientSession, StreamReader, web
from aiohttp.http import HttpProcessingError
from opentelemetry import propagate
from yarl import URL

from . import errors, unrecorded
from .headers import caller, client_response, upstream_request
from .routing import route_of
from .settings import ProxySettings

if TYPE_CHECKING:
    from multidict import CIMultiDictProxy

    from .channel import Channel

_JSON = {"Content-Type": "application/json"}
# What the analysis reads of an answer's head.
_ANSWER_HEADERS = ("content-type", "content-encoding", "x-request-id")


class TooLarge(Exception):
    """The request body passes the limit."""


def answer(status: int, message: str, type_: str, code: str | None = None) -> web.Response:
    """The proxy's own answer, in the API's error shape."""
    return web.Response(status=status, body=errors.body(message, type_, code), headers=_JSON)


def read_headers(headers: CIMultiDictProxy[str], names: frozenset[str]) -> list[tuple[str, str]]:
    """The request headers the analysis reads (``names``: the content coding and the trace context's) and whom the
    call is made as (``headers.caller``: a credential by its digest only): the rest never leave the relay."""
    read = [(str(name), value) for name, value in headers.items() if name.lower() in names]  # no `istr`: marshal
    return read + caller(headers)


class Tapped:
    """The relay's handle on one call it handed to the analysis: what the upstream answered, chunk by chunk, and
    how the call ended, each sent as it happens."""

    __slots__ = ("_channel", "_id")

    def __init__(self, channel: Channel, call_id: int) -> None:
        self._channel = channel
        self._id = call_id

    def answered(self, status: int, headers: CIMultiDictProxy[str]) -> None:
        read = [(name, value) for name in _ANSWER_HEADERS if (value := headers.get(name)) is not None]
        self._channel.send(("answered", self._id, status, read))

    def chunk(self, data: bytes) -> None:
        self._channel.send(("chunk", self._id, data))

    def finished(self) -> None:
        self._channel.send(("finished", self._id))

    def failed(self, exc: BaseException) -> None:
        self._channel.send(("failed", self._id, type(exc).__qualname__))

    def abandoned(self, exc: BaseException) -> None:
        self._channel.send(("abandoned", self._id))

    def unreachable(self, timed_out: bool) -> None:
        self._channel.send(("unreachable", self._id, timed_out))


async def read_body(request: web.BaseRequest, limit: int, idle: float) -> bytes:
    """The request body, whole: ``TooLarge`` past ``limit`` bytes (a declared length is refused before it is read),
    ``asyncio.TimeoutError`` when the client sends nothing for ``idle`` seconds."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise TooLarge
    parts: list[bytes] = []
    size = 0
    content = request.content
    while True:
        chunk = await asyncio.wait_for(content.readany(), idle)
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > limit:
            raise TooLarge
        parts.append(chunk)


class Forwarder:
    """What every request is forwarded with: the settings, the pooled upstream session (its timeouts are every
    request's), the session WebSocket handshakes go through (``websockets``: one that follows no redirect), and the
    channel to the analysis (None: the proxy only forwards) with whether strict mode waits for its verdicts."""

    def __init__(
        self,
        settings: ProxySettings,
        session: ClientSession,
        channel: Channel | None,
        strict: bool = False,
        websockets: ClientSession | None = None,
    ) -> None:
        self.settings = settings
        self.session = session
        self.websockets = session if websockets is None else websockets
        self.channel = channel if settings.record else None
        self.strict = strict
        # The content coding and the trace context's headers (those of the propagators configured): all the
        # analysis reads of a request's head.
        self.read_headers = frozenset({"content-encoding"} | {f.lower() for f in propagate.get_global_textmap().fields})

    def url(self, rel: URL) -> URL:
        """The upstream URL of a request: the upstream's origin, the request's path and query as sent."""
        upstream = self.settings.upstream
        return URL.build(
            scheme=upstream.scheme,
            host=upstream.host,
            port=upstream.port,
            path=rel.raw_path,
            query_string=rel.raw_query_string,
            encoded=True,
        )

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        settings = self.settings
        if request.method == "CONNECT":
            return answer(405, "This proxy forwards to its configured upstream only.", "invalid_request_error")
        rel = request.rel_url
        if not rel.raw_path.startswith("/"):
            return answer(400, "The request target must be a path.", "invalid_request_error")
        try:
            body = await read_body(request, settings.max_body_bytes, settings.idle_timeout)
        except TooLarge:
            refused = answer(
                413,
                f"The request body passes this proxy's limit of {settings.max_body_bytes} bytes.",
                "invalid_request_error",
                "request_too_large",
            )
        except asyncio.TimeoutError:
            refused = answer(408, "The request body did not arrive in time.", "invalid_request_error")
        except (ConnectionError, HttpProcessingError, ClientPayloadError):
            # The client left mid-body (or cut it short): nobody to answer, nothing forwarded, nothing of ours failed.
            _cut(request)
            return web.Response(status=400)
        else:
            tapped = await self._tap(request, rel, body)
            if isinstance(tapped, web.Response):
                return tapped
            try:
                return await self._relay(request, rel, body, tapped)
            except BaseException as exc:  # cancelled at the end of a stop's grace, or a bug: the call ends with it
                if tapped is not None:
                    tapped.failed(exc)
                raise
        # The connection closes after the answer: what is left of the body is read for a moment and dropped (so the
        # client reads the answer, not a reset), never forwarded.
        refused.force_close()
        return refused

    async def _tap(self, request: web.BaseRequest, rel: URL, body: bytes) -> Tapped | web.Response | None:
        """The call handed to the analysis when the operation table knows it (None for any other request, and when
        not recording); in strict mode, its refusal (a response to answer with) when the verdict is one."""
        channel = self.channel
        if channel is None:
            return None
        settings = self.settings
        found = route_of(request.method, rel.raw_path, rel.query, settings.upstream.root)
        if found is None:
            return None
        strict = self.strict
        if not strict:
            reason = None
            if len(body) > settings.max_analysed_bytes:
                reason = unrecorded.TOO_LARGE
            elif channel.behind():
                reason = unrecorded.ANALYSIS_BEHIND
            if reason is not None:
                channel.send(("unrecorded", 0, reason))
                return None
        call_id = channel.next_id()
        message = (
            "begin",
            call_id,
            request.method,
            rel.raw_path,
            [(str(name), value) for name, value in rel.query.items()],
            read_headers(request.headers, self.read_headers),
            body if found.body else b"",
            strict,
        )
        if not strict:
            channel.send(message)
            return Tapped(channel, call_id)
        refusal = await channel.ask(message)
        if refusal is not None:
            return web.Response(status=400, body=refusal, headers=_JSON)
        return Tapped(channel, call_id)

    async def _relay(
        self, request: web.BaseRequest, rel: URL, body: bytes, exchange: Tapped | None
    ) -> web.StreamResponse:
        try:
            upstream = await self.session.request(
                request.method,
                self.url(rel),
                headers=upstream_request(request.headers.items()),
                data=body if body or request.method not in ("GET", "HEAD", "DELETE", "OPTIONS") else None,
                allow_redirects=False,  # the connect and read timeouts are the session's
            )
        except asyncio.TimeoutError:
            if exchange is not None:
                exchange.unreachable(True)
            return answer(504, "The upstream did not answer in time.", "server_error", "upstream_timeout")
        except (ClientError, OSError, ValueError):
            if exchange is not None:
                exchange.unreachable(False)
            return answer(502, "The upstream could not be reached.", "server_error", "upstream_unreachable")
        try:
            return await self._respond(request, upstream, exchange)
        finally:
            upstream.release()

    async def _respond(
        self, request: web.BaseRequest, upstream: ClientResponse, exchange: Tapped | None
    ) -> web.StreamResponse:
        headers = upstream.headers
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=client_response(headers.items())
        )
        if exchange is not None:
            exchange.answered(upstream.status, headers)
        try:
            await response.prepare(request)
            await _relay_body(request, upstream.content, response, exchange, self.settings.idle_timeout)
        except ConnectionError as exc:  # the client left (or stopped reading): the rest of the body is not read
            if exchange is not None:
                exchange.abandoned(exc)
        return response


class _Stall:
    """Cuts the client's connection once a write to it has waited ``idle`` seconds: a client that stops reading
    would hold the upstream's connection for as long as it liked. One timer per relayed body, re-armed when it fires,
    rather than a timeout per write: a write that does not wait (nearly every one) costs a clock read, where
    ``asyncio.wait_for`` costs a task of its own (8.8 µs here, twice what the proxy adds per streamed event)."""

    def __init__(self, request: web.BaseRequest, idle: float) -> None:
        self._request = request
        self._idle = idle
        self._loop = asyncio.get_running_loop()
        self._since: float | None = None  # when the write in flight began
        self._writer: asyncio.Task[object] | None = None
        self._tripped = False
        self._timer = self._loop.call_later(idle, self._check)

    async def write(self, write: Awaitable[None]) -> None:
        """One write to the client; ``ConnectionError`` when it left, or when it took nothing for ``idle`` seconds
        (the write is then cancelled, as ``wait_for`` would, and the connection cut)."""
        self._since, self._writer = self._loop.time(), asyncio.current_task()
        try:
            await write
        except asyncio.CancelledError:
            if not self._tripped:
                raise
            uncancel = getattr(self._writer, "uncancel", None)  # Python 3.11 and later count cancellations
            if uncancel is not None:
                uncancel()
            raise ConnectionResetError("the client stopped reading") from None
        finally:
            self._since = None

    def stop(self) -> None:
        self._timer.cancel()

    def _check(self) -> None:
        since, now = self._since, self._loop.time()
        if since is not None and now - since >= self._idle and self._writer is not None:
            self._tripped = True
            _cut(self._request)
            self._writer.cancel()
            return
        wait = self._idle if since is None else self._idle - (now - since)
        self._timer = self._loop.call_later(wait, self._check)


async def _relay_body(
    request: web.BaseRequest,
    content: StreamReader,
    response: web.StreamResponse,
    exchange: Tapped | None,
    idle: float,
) -> None:
    """The upstream's body, chunk by chunk as it arrives; a write to a client that left, or that takes nothing of it
    for ``idle`` seconds, raises ``ConnectionError`` (a client that stops reading would hold the upstream's
    connection for as long as it liked).

    Each chunk is observed right after it is relayed, and the call ends right after its last bytes are, before
    anything else runs on this event loop: a client that sends its next turn as soon as it has this answer is read
    only after that, and finds this turn in the ledger. (A write suspends only while a slow client's buffer drains;
    the client's next turn is then still a network round trip away.) Each is a frame handed to the analysis, which
    runs elsewhere: the analysis is never on the relay's path."""
    stall = _Stall(request, idle)
    try:
        await _relay_chunks(request, content, response, exchange, stall)
    finally:
        stall.stop()


async def _relay_chunks(
    request: web.BaseRequest,
    content: StreamReader,
    response: web.StreamResponse,
    exchange: Tapped | None,
    stall: _Stall,
) -> None:
    ended = False
    while True:
        try:
            data = await content.readany()
        except (ClientError, asyncio.TimeoutError, OSError) as exc:
            if exchange is not None:
                exchange.failed(exc)
            _cut(request)
            return
        if not data:
            break
        await stall.write(response.write(data))
        if exchange is not None:
            exchange.chunk(data)
            if content.at_eof():
                ended = True
                exchange.finished()
    if exchange is not None and not ended:
        exchange.finished()
    with contextlib.suppress(ConnectionError):  # the body was whole: the call ended with it
        await stall.write(response.write_eof())


def _cut(request: web.BaseRequest) -> None:
    """Close the client's connection where it stands: the upstream cut its body (the client's is cut after what it
    was sent: no final chunk, no full length), or the client left mid-request."""
    request.protocol.force_close()
    transport = request.transport
    if transport is not None:
        transport.close()
