"""WebSocket mode through the proxy: a ``GET`` upgraded to a WebSocket is relayed message by message both ways (text,
binary, ping, pong and close, each as it arrives), to the same path on the upstream with the client's headers.

On the Responses API's own socket (``GET /responses``, its path read as the upstream reads it) the relayed connection
is handed to the analysis (``recorder``), which is, to the instrumentation, what an SDK connection is: each frame
the client sends (a ``response.create`` opens a span; strict mode refuses it with the ``error`` event the API itself
would send, and a frame it cannot read with one of the proxy's own), each event the upstream sends (routed to its
response's span) and the connection's end. Any other upgraded path is relayed unrecorded.

A refused upgrade is relayed with the upstream's status and headers; its body is the proxy's own (the WebSocket
client library does not hand the upstream's on); a broken one (a ``101`` with a wrong key) is a gateway's error,
502. A redirect is a refusal too: it is relayed, never followed (the
client's credentials would go to whatever host it names).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import (
    ClientError,
    ClientSession,
    ClientWebSocketResponse,
    ClientWSTimeout,
    TraceConfig,
    TraceRequestRedirectParams,
    WSMessage,
    WSMsgType,
    WSServerHandshakeError,
    web,
)

from . import errors, unrecorded
from .channel import Channel
from .forward import Forwarder, answer, read_headers
from .headers import PROTOCOL_HEADER, protocols, refused_handshake, upstream_handshake
from .routing import is_responses_socket

AnySocket = web.WebSocketResponse | ClientWebSocketResponse[Any]
_NORMAL = 1000
_GOING_AWAY = 1001
_CLOSE_TIMEOUT = 2.0  # how long a close waits for the peer's own close frame (one that never sends it holds nothing)


async def _refuse_redirect(session: ClientSession, context: Any, params: TraceRequestRedirectParams) -> None:
    """aiohttp's ``ws_connect`` follows redirects and has no option not to: a redirect it is about to follow ends
    the handshake as a refusal of the upgrade, with the redirect's status and headers."""
    redirect = params.response
    redirect.close()
    raise WSServerHandshakeError(
        redirect.request_info,
        (),
        message="Redirect not followed",
        status=redirect.status,
        headers=redirect.headers,
    )


def no_redirects() -> TraceConfig:
    """What the handshakes' session is made with so that no handshake follows a redirect (``ws_connect`` has no
    ``allow_redirects``; the HTTP requests say ``allow_redirects=False`` themselves and go through a session without
    it, since a trace config costs every request its hooks)."""
    config = TraceConfig()
    config.on_request_redirect.append(_refuse_redirect)
    return config


def is_upgrade(request: web.BaseRequest) -> bool:
    return request.method == "GET" and request.headers.get("Upgrade", "").lower() == "websocket"


class _Recorded:
    """A relayed socket as the analysis knows it: its id on the channel, and what the relay asks of it."""

    def __init__(self, channel: Channel, conn: int, strict: bool, bound: int) -> None:
        self.channel = channel
        self.conn = conn
        self.strict = strict
        self.bound = bound  # the analysis bound (strict mode reads every frame)

    async def allowed(self, data: str | bytes) -> str | None:
        """A frame the client sends, handed over before it goes upstream; strict mode's refusal (an ``error`` event
        to send the client instead), or None to forward it."""
        channel = self.channel
        if self.strict:
            return await channel.ask(("ws_frame", channel.next_id(), self.conn, data, True))  # type: ignore[no-any-return]
        if len(data) > self.bound:
            channel.send(("unrecorded", 0, unrecorded.TOO_LARGE))
        elif channel.behind():
            channel.send(("unrecorded", 0, unrecorded.ANALYSIS_BEHIND))
        else:
            channel.send(("ws_frame", channel.next_id(), self.conn, data, False))
        return None

    def event(self, data: str) -> None:
        self.channel.send(("ws_event", self.conn, data))

    async def pending(self) -> int:
        channel = self.channel
        return int(await channel.ask(("ws_pending", channel.next_id(), self.conn)) or 0)


async def relay(request: web.BaseRequest, forwarder: Forwarder, draining: asyncio.Event) -> web.StreamResponse:
    """The upgrade: upstream first (its answer decides the client's), then both directions until either closes."""
    settings = forwarder.settings
    rel = request.rel_url
    asked = protocols(request.headers.get(PROTOCOL_HEADER))
    if not web.WebSocketResponse(protocols=asked).can_prepare(request).ok:  # before anything goes upstream
        return answer(400, "The request is not a valid WebSocket handshake.", "invalid_request_error")
    try:
        upstream = await forwarder.websockets.ws_connect(
            forwarder.url(rel),
            headers=upstream_handshake(request.headers.items()),
            protocols=asked,
            autoclose=False,
            autoping=False,
            max_msg_size=settings.max_body_bytes,
            timeout=ClientWSTimeout(ws_receive=None, ws_close=_CLOSE_TIMEOUT),
        )
    except WSServerHandshakeError as refused:
        if refused.status < 200:  # a 101 with a wrong key or without its Upgrade: not a status to relay
            return answer(
                502, "The upstream's WebSocket handshake was invalid.", "server_error", "upstream_unreachable"
            )
        message = f"The upstream refused the WebSocket upgrade (status {refused.status})."
        response = web.Response(status=refused.status, body=errors.body(message, "invalid_request_error"))
        response.headers.extend(refused_handshake((refused.headers or {}).items()))
        response.content_type = "application/json"
        return response
    except asyncio.TimeoutError:
        return answer(504, "The upstream did not answer in time.", "server_error", "upstream_timeout")
    except (ClientError, OSError, ValueError):
        return answer(502, "The upstream could not be reached.", "server_error", "upstream_unreachable")
    chosen = upstream.protocol
    client = web.WebSocketResponse(
        protocols=(chosen,) if chosen else (),
        autoclose=False,
        autoping=False,
        max_msg_size=settings.max_body_bytes,
        timeout=_CLOSE_TIMEOUT,
        compress=False,  # no permessage-deflate on either hop: each message is relayed as it came
    )
    try:
        await client.prepare(request)
    except Exception:
        await upstream.close()
        raise
    channel = forwarder.channel
    recording = None
    if channel is not None and is_responses_socket(rel.raw_path, settings.upstream.root):
        recording = _Recorded(channel, channel.next_id(), forwarder.strict, settings.max_analysed_bytes)
        channel.send(("ws_open", recording.conn, read_headers(request.headers, forwarder.read_headers)))
    try:
        await _both_ways(client, upstream, recording, draining)
    finally:
        if recording is not None:
            recording.channel.send(("ws_close", recording.conn))
        await asyncio.gather(_close(client, None, None), _close(upstream, None, None))
    return client


async def _both_ways(
    client: web.WebSocketResponse,
    upstream: ClientWebSocketResponse[Any],
    recording: _Recorded | None,
    draining: asyncio.Event,
) -> None:
    """Relay until either side closes (the other is closed with the same code), or the proxy drains: once its
    open responses have ended, both sides are told it is going away."""
    tasks = [
        asyncio.ensure_future(_to_upstream(client, upstream, recording)),
        asyncio.ensure_future(_to_client(upstream, client, recording)),
        asyncio.ensure_future(_drained(draining, recording)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _drained(draining: asyncio.Event, recording: _Recorded | None) -> None:
    await draining.wait()
    while recording is not None:
        try:
            if not await recording.pending():
                return
        except ConnectionError:  # the analysis is gone: nothing to wait for
            return
        await asyncio.sleep(0.05)


async def _close(target: AnySocket, code: int | None, reason: str | None) -> None:
    with contextlib.suppress(Exception):
        await target.close(code=code or _GOING_AWAY, message=(reason or "").encode())


async def _close_as(target: AnySocket, message: WSMessage) -> None:
    """Close ``target`` as the peer closed its side: a close frame's code and reason; a close frame without a code
    (aiohttp reads it as 0, and always writes a code) as a normal closure, since the code for "none given", 1005,
    may not be sent; going away when the peer's side ended without a close frame (an error, a dropped connection)."""
    if message.type == WSMsgType.CLOSE:
        await _close(target, message.data or _NORMAL, message.extra)
    else:
        await _close(target, None, None)


async def _to_upstream(
    client: web.WebSocketResponse, upstream: ClientWebSocketResponse[Any], recording: _Recorded | None
) -> None:
    """The client's messages, each handed to the analysis first when recorded (strict mode may refuse one)."""
    while True:
        message = await client.receive()
        kind = message.type
        if kind in (WSMsgType.TEXT, WSMsgType.BINARY):
            send: Callable[[Any], Awaitable[None]] = (
                upstream.send_str if kind == WSMsgType.TEXT else upstream.send_bytes
            )
            if recording is not None:
                refusal = await recording.allowed(message.data)
                if refusal is not None:
                    await client.send_str(refusal)
                    continue
            await send(message.data)
        elif kind == WSMsgType.PING:
            await upstream.ping(message.data)
        elif kind == WSMsgType.PONG:
            await upstream.pong(message.data)
        else:  # CLOSE, CLOSING, CLOSED, ERROR
            await _close_as(upstream, message)
            return


async def _to_client(
    upstream: ClientWebSocketResponse[Any], client: web.WebSocketResponse, recording: _Recorded | None
) -> None:
    """The upstream's messages, relayed first, then each event handed to the analysis when recorded."""
    while True:
        message = await upstream.receive()
        kind = message.type
        if kind == WSMsgType.TEXT:
            await client.send_str(message.data)
            if recording is not None:  # before this loop reads the upstream's next event (see forward._relay_body)
                recording.event(message.data)
        elif kind == WSMsgType.BINARY:
            await client.send_bytes(message.data)
        elif kind == WSMsgType.PING:
            await client.ping(message.data)
        elif kind == WSMsgType.PONG:
            await client.pong(message.data)
        else:
            await _close_as(client, message)
            return
