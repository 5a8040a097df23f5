"""WebSocket mode through the proxy: a ``GET`` upgraded to a WebSocket is relayed message by message both ways (text,
binary, ping, pong and close, each as it arrives), to the same path on the upstream with the client's headers.

On the Responses API's own socket (``GET /responses``) the relayed connection is, to the instrumentation, what an
SDK connection is: the seam of ``_patching/websocket.py`` sees each frame the client sends (``send_raw``: a
``response.create`` opens a span; strict mode refuses it with the ``error`` event the API itself would send) and
each event the upstream sends (``recv``: it routes the event to its response's span), and the connection's end
(``close``). Any other upgraded path is relayed unrecorded.

A refused upgrade is relayed with the upstream's status and headers; its body is the proxy's own (the WebSocket
client library does not hand the upstream's on); a broken one (a ``101`` with a wrong key) is a gateway's error,
502. A redirect is a refusal too: it is relayed, never followed (the
client's credentials would go to whatever host it names).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
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
from opentelemetry import context as otel_context
from opentelemetry import propagate
from yarl import URL

from .._patching import websocket as seam
from .._patching.paths import is_websocket_path
from .._patching.streams import Fields
from .._patching.wrappers import Switch
from .._telemetry.telemetry import Telemetry
from ..signals import ContextLossError
from . import errors
from .forward import Forwarder, answer
from .headers import PROTOCOL_HEADER, protocols, refused_handshake, upstream_handshake

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


class _Client:
    """What the seam reads of a connection's client: its base URL (each call's server and provider)."""

    def __init__(self, base_url: URL) -> None:
        self.base_url = base_url


class Socket:
    """One relayed connection as the seam sees an SDK connection: its client, and its open responses (kept on it
    by the seam)."""

    def __init__(self, base_url: URL) -> None:
        self._client = _Client(base_url)


class Seam:
    """The seam's wrappers, made once per telemetry: what each relayed frame and event goes through."""

    def __init__(self, telemetry: Telemetry) -> None:
        switch = Switch()
        self.send_raw = seam.async_send_raw_wrapper(switch, telemetry)
        self.recv = seam.async_recv_wrapper(switch, telemetry)
        self.close = seam.async_close_wrapper(switch, telemetry)


async def _event(event: Any) -> Any:
    return event


async def _nothing() -> None:
    return None


async def relay(
    request: web.BaseRequest, forwarder: Forwarder, seams: Seam | None, draining: asyncio.Event
) -> web.StreamResponse:
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
    recording = seams if seams is not None and is_websocket_path(rel.raw_path, settings.upstream.root) else None
    socket = Socket(URL(settings.upstream.url))
    token = otel_context.attach(propagate.extract(request.headers)) if recording is not None else None
    try:
        await _both_ways(client, upstream, socket, recording, draining)
    finally:
        if token is not None:
            otel_context.detach(token)
        if recording is not None:
            with contextlib.suppress(Exception):
                await recording.close(_nothing, socket, (), {})
        await asyncio.gather(_close(client, None, None), _close(upstream, None, None))
    return client


async def _both_ways(
    client: web.WebSocketResponse,
    upstream: ClientWebSocketResponse[Any],
    socket: Socket,
    seams: Seam | None,
    draining: asyncio.Event,
) -> None:
    """Relay until either side closes (the other is closed with the same code), or the proxy drains: once its
    open responses have ended, both sides are told it is going away."""
    tasks = [
        asyncio.ensure_future(_to_upstream(client, upstream, socket, seams)),
        asyncio.ensure_future(_to_client(upstream, client, socket, seams)),
        asyncio.ensure_future(_drained(draining, socket)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _drained(draining: asyncio.Event, socket: Socket) -> None:
    await draining.wait()
    while seam.open_responses(socket):
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
    client: web.WebSocketResponse, upstream: ClientWebSocketResponse[Any], socket: Socket, seams: Seam | None
) -> None:
    """The client's messages, each through the seam's ``send_raw`` when recorded (strict mode may refuse one)."""
    while True:
        message = await client.receive()
        kind = message.type
        if kind in (WSMsgType.TEXT, WSMsgType.BINARY):
            send: Callable[[Any], Awaitable[None]] = (
                upstream.send_str if kind == WSMsgType.TEXT else upstream.send_bytes
            )
            if seams is None:
                await send(message.data)
                continue
            try:
                await seams.send_raw(send, socket, (message.data,), {})
            except ContextLossError as refusal:
                await client.send_str(seam.refusal_event(refusal))
        elif kind == WSMsgType.PING:
            await upstream.ping(message.data)
        elif kind == WSMsgType.PONG:
            await upstream.pong(message.data)
        else:  # CLOSE, CLOSING, CLOSED, ERROR
            await _close_as(upstream, message)
            return


async def _to_client(
    upstream: ClientWebSocketResponse[Any], client: web.WebSocketResponse, socket: Socket, seams: Seam | None
) -> None:
    """The upstream's messages, relayed first, then each event shown to the seam's ``recv`` when recorded."""
    while True:
        message = await upstream.receive()
        kind = message.type
        if kind == WSMsgType.TEXT:
            await client.send_str(message.data)
            if seams is not None:  # before this loop reads the client's next frame (see forward._relay_body)
                await _observe(seams, socket, message.data)
        elif kind == WSMsgType.BINARY:
            await client.send_bytes(message.data)
        elif kind == WSMsgType.PING:
            await client.ping(message.data)
        elif kind == WSMsgType.PONG:
            await client.pong(message.data)
        else:
            await _close_as(client, message)
            return


async def _observe(seams: Seam, socket: Socket, data: str) -> None:
    """One event, parsed as the SDK's ``recv`` parses it, for the seam (which guards itself)."""
    try:
        event = Fields.read(json.loads(data))
    except ValueError:
        return
    await seams.recv(_event, socket, (event,), {})
