"""WebSocket mode through the proxy: each message relayed as it came, both ways; on the Responses API's socket each
``response.create`` is recorded as the SDK instrumented in-process records it (span for span, against the same
reset emulator); strict mode refuses with the API's own ``error`` event and sends nothing upstream; other upgraded
paths are relayed unrecorded; a client or an upstream that drops the socket mid-way harms no one else."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web
from openai.resources.responses.responses import Responses

from otel_responses.emulator import Emulator
from otel_responses.testing import capture

from .support import KEY, Connection, RawUpstream, Request, proxied, raw_exchange
from .test_hostile_peers import healthy
from .test_scenarios_through_the_proxy import _record

pytest.importorskip("websockets")  # the emulator's WebSocket mode
# The SDK's own client side (`responses.connect()`) arrived in openai 2.22.0; the other tests speak the protocol
# with the `websockets` client, on every supported SDK.
needs_connect = pytest.mark.skipif(not hasattr(Responses, "connect"), reason="responses.connect() is openai 2.22+")

MODEL = "gpt-5.4"
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


class Socket:
    """WebSocket mode spoken by hand (``websockets``' client): ``response.create`` frames out, events in."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self._socket = connect(url.replace("http://", "ws://") + "/responses", open_timeout=10)

    def create(self, **body: Any) -> None:
        self._socket.send(json.dumps({"type": "response.create", **body}))

    def events(self) -> Iterator[dict[str, Any]]:
        """Until the socket closes."""
        from websockets.exceptions import ConnectionClosed

        while True:
            try:
                yield json.loads(self._socket.recv(timeout=10))
            except ConnectionClosed:
                return

    def until_done(self) -> dict[str, Any]:
        for event in self.events():
            if event.get("type") in TERMINAL:
                return event
        raise AssertionError("the connection closed first")

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> Socket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def until_done(connection: Any) -> Any:
    for event in connection:
        if event.type in TERMINAL:
            return event
    raise AssertionError("the connection closed first")


def socket_session(client: openai.OpenAI) -> list[str]:
    """A chain over one socket, an unstored parent refused by the API, the connection's own unstored response
    continued: the texts the model answered. (A create whose socket the client closes at once is a race through a
    proxy — the upstream may answer it before the close arrives — and has a test of its own.)"""
    unstored = client.responses.create(model=MODEL, input="hi", store=False)
    answers = []
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input="Remember this: the marker is W-1.", instructions="Be brief.")
        first = until_done(connection)
        connection.response.create(model=MODEL, input="What is the marker?", previous_response_id=first.response.id)
        answers.append(until_done(connection).response.output_text)
        connection.response.create(model=MODEL, input="again", previous_response_id=unstored.id)
        answers.append(until_done(connection).type)
        connection.response.create(model=MODEL, input="Remember this: the marker is W-2.", store=False)
        own = until_done(connection)
        connection.response.create(model=MODEL, input="Marker?", previous_response_id=own.response.id)
        answers.append(until_done(connection).response.output_text)
    return answers


@needs_connect
def test_a_socket_session_is_recorded_through_the_proxy_as_in_process() -> None:
    with Emulator() as emulator:
        with capture(hash_key=KEY) as captured, emulator.client() as client:
            direct = socket_session(client)
            theirs = _record(captured.spans())
        emulator.reset()
        with proxied(emulator.base_url) as through, through.client() as client:
            relayed = socket_session(client)
            ours = _record(through.wait_for_spans(len(theirs)))
    assert relayed == direct == ["marker=W-1", "error", "marker=W-2"]
    assert len(ours) == len(theirs) == 6
    # In-process, a socket's spans carry no server address (the SDK's connection does not say where it goes); the
    # proxy knows its upstream. That transport attribute aside, the same record.
    for record in ours[1:]:
        assert record["attributes"].pop("server.address") == "127.0.0.1"
        assert isinstance(record["attributes"].pop("server.port"), int)
    for number, (want, got) in enumerate(zip(theirs, ours, strict=True)):
        assert got == want, f"span {number + 1}"
    assert [r["attributes"]["openai_responses.signals"] for r in ours[1:]] == [
        (),
        ("instructions_dropped",),
        ("unstored_parent",),
        ("reasoning_not_replayable",),  # store=false without encrypted reasoning requested: as in-process
        (),
    ]


def test_strict_mode_refuses_a_create_on_the_socket_with_the_apis_error_event() -> None:
    with Emulator() as emulator, proxied(emulator.base_url, {"strict": True}) as through:
        with Socket(through.base_url) as socket:
            socket.create(model=MODEL, input="hi", conversation="conv_x", previous_response_id="resp_x")
            refused = socket.until_done()
            socket.create(model=MODEL, input="Remember this: the marker is W-9.")
            fine = socket.until_done()
        sent = [r for r in emulator.requests if r.method == "WEBSOCKET"]
        spans = through.wait_for_spans(2)
    assert refused["type"] == "error"
    assert (refused["status"], refused["error"]["code"]) == (400, "state_mode_conflict")
    assert "Fix:" in refused["error"]["message"]
    assert fine["type"] == "response.completed"
    assert [r.body["input"] for r in sent] == ["Remember this: the marker is W-9."]  # the refused one never left
    assert [dict(s.attributes or {})["openai_responses.signals"] for s in spans] == [("state_mode_conflict",), ()]
    assert dict(spans[0].attributes or {})["error.type"] == "ContextLossError"


@contextmanager
def echo_upstream() -> Iterator[str]:
    """An upstream WebSocket at /v1/realtime that echoes every message (and answers pings): a path the package
    does not know."""
    loop = asyncio.new_event_loop()

    async def echo(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("realtime",))
        await ws.prepare(request)
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str(message.data)
            elif message.type == aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(message.data)
        return ws

    app = web.Application()
    app.router.add_get("/v1/realtime", echo)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def test_another_upgraded_path_is_relayed_message_by_message_unrecorded() -> None:
    async def talk(url: str) -> list[Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, protocols=("realtime",), autoping=False) as ws,
        ):
            await ws.send_str('{"type": "session.update", "x": "\\u00e9"}')
            text = await ws.receive()
            await ws.send_bytes(b"\x00\x01binary")
            binary = await ws.receive()
            await ws.ping(b"are you there")  # the upstream's own pong comes back through the proxy
            pong = await ws.receive()
            await ws.close()
            return [ws.protocol, text.data, binary.data, (pong.type, pong.data)]

    with echo_upstream() as upstream, proxied(upstream) as through:
        got = asyncio.run(talk(through.origin + "/v1/realtime"))
        assert through.spans() == []
    text = '{"type": "session.update", "x": "\\u00e9"}'
    assert got == ["realtime", text, b"\x00\x01binary", (aiohttp.WSMsgType.PONG, b"are you there")]


def test_no_compression_is_negotiated_with_a_client_that_offers_it() -> None:
    async def offered(url: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as session, session.ws_connect(url, compress=15) as ws:
            await ws.send_str("x" * 1000)
            echoed = await ws.receive()
            return ws.compress, echoed.data

    with echo_upstream() as upstream, proxied(upstream) as through:
        direct = asyncio.run(offered(upstream.removesuffix("/v1") + "/v1/realtime"))
        relayed = asyncio.run(offered(through.origin + "/v1/realtime"))
    assert direct == (15, "x" * 1000)  # the near miss: a server that accepts the offer negotiates it
    assert relayed == (0, "x" * 1000)


def _handshake(port: int, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101 ")
    return sock


def test_a_client_that_drops_the_socket_mid_frame_ends_its_call_and_harms_no_one() -> None:
    with Emulator() as emulator, proxied(emulator.base_url) as through:
        sock = _handshake(through.proxy.port, "/v1/responses")
        frame = b'{"type": "response.create", "model": "gpt-5.4", "input": "hi"}'
        masked = bytes([0x81, 0x80 | 126]) + len(frame).to_bytes(2, "big") + b"\x00\x00\x00\x00"
        sock.sendall(masked + frame[:10])  # a frame cut in its payload
        sock.close()
        healthy(through)
        sock = _handshake(through.proxy.port, "/v1/responses")
        sock.sendall(masked + frame)  # a whole create, then the socket dropped before its answer
        sock.close()
        spans = through.wait_for_spans(2)
        healthy(through)
    assert len(spans) == 2  # the healthy call, and the whole create: the cut frame never was a call
    dropped = next(s for s in spans if "openai_responses.stream.ended" in (s.attributes or {}))
    assert dict(dropped.attributes or {})["openai_responses.stream.ended"] == "closed"


def test_an_upgrade_the_upstream_refuses_is_answered_with_its_status_and_headers() -> None:
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET /v1/nowhere HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with Emulator() as emulator, proxied(emulator.base_url) as through:
        with socket.create_connection(("127.0.0.1", through.proxy.port), timeout=10) as sock:
            sock.sendall(request.encode())
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(65536)
        healthy(through)
    head = answer.partition(b"\r\n\r\n")[0].decode().lower()
    assert head.startswith("http/1.1 404 ")
    assert "x-request-id: req_" in head  # the upstream's own headers


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: not-the-key\r\n\r\n",
            502,
        ),
        ("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n", 502),  # no Upgrade header
        ("HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\nX-Why: old\r\n\r\n", 426),  # the near miss
    ],
    ids=["wrong-key", "no-upgrade", "refused"],
)
def test_a_broken_upstream_handshake_is_a_gateway_error_and_a_refusal_keeps_its_status(head: str, status: int) -> None:
    def script(request: Request, connection: Connection) -> bool:
        connection.send(head.encode())
        return False

    with (
        RawUpstream(script) as upstream,
        proxied(upstream.base_url) as through,
        socket.create_connection(("127.0.0.1", through.proxy.port), timeout=10) as sock,
    ):
        sock.sendall(_upgrade_request("/v1/responses"))
        answer = _closed_by_peer_or_head(sock)
    first = answer.split(b"\r\n", 1)[0]
    assert first.split(b" ", 2)[1] == str(status).encode()
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert body["error"]["type"] == ("server_error" if status == 502 else "invalid_request_error")


def _upgrade_request(path: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


def _closed_by_peer_or_head(sock: socket.socket) -> bytes:
    """The proxy's answer: its head and the body its Content-Length gives."""
    answer = b""
    while b"\r\n\r\n" not in answer and (part := sock.recv(65536)):
        answer += part
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )
    while len(body) < length and (part := sock.recv(65536)):
        body += part
    return head + b"\r\n\r\n" + body


def test_a_stop_closes_an_idle_socket_going_away_and_lets_an_open_response_finish_first() -> None:
    with Emulator() as emulator, proxied(emulator.base_url, grace=20) as through:
        idle = _handshake(through.proxy.port, "/v1/responses")
        with Socket(through.base_url) as socket:
            socket.create(model=MODEL, input="Remember this: the marker is W-5.")
            started = time.monotonic()
            stopper = threading.Thread(target=through.proxy.stop)
            stopper.start()
            done = socket.until_done()  # the response in flight finishes after the stop began
            stopper.join(30)
            took = time.monotonic() - started
        idle.settimeout(5)
        close = idle.recv(16)
    assert done["type"] == "response.completed"
    assert took < 10  # not the grace period: the sockets closed once their responses had ended
    assert close[:1] == b"\x88"  # a close frame
    assert int.from_bytes(close[2:4], "big") == 1001  # going away


def test_a_broken_handshake_is_refused_before_anything_goes_upstream() -> None:
    with Emulator() as emulator, proxied(emulator.base_url) as through:
        before = len(emulator.requests)
        request = b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: close\r\n\r\n"
        answer = raw_exchange(through.proxy.port, request)
        assert len(emulator.requests) == before
        healthy(through)
    assert answer.startswith(b"HTTP/1.1 400 ")


@contextmanager
def upstream_that_drops_its_socket() -> Iterator[str]:
    """An upstream socket at /v1/responses that answers a create with its first event, then drops the connection
    (no close frame): a WebSocket cut mid-response."""
    loop = asyncio.new_event_loop()

    async def drop(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                created = {"type": "response.created", "response": {"id": "resp_cut", "status": "in_progress"}}
                await ws.send_str(json.dumps(created))
                assert request.transport is not None
                request.transport.abort()
                break
        return ws

    app = web.Application()
    app.router.add_get("/v1/responses", drop)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def test_an_upstream_that_drops_its_socket_mid_response_ends_the_call_and_the_clients_socket() -> None:
    with upstream_that_drops_its_socket() as upstream, proxied(upstream) as through:
        with Socket(through.base_url) as socket:
            socket.create(model=MODEL, input="hi")
            seen = [event["type"] for event in socket.events()]  # they end: the proxy closed the socket, going away
        (span,) = through.wait_for_spans(1)
    assert seen == ["response.created"]
    assert dict(span.attributes or {})["openai_responses.stream.ended"] == "closed"


def _accepting(then: bytes, heard: list[bytes]) -> Any:
    """An upstream that accepts the upgrade by hand, sends ``then`` (raw frames), and keeps what it hears next."""

    def script(request: Request, connection: Connection) -> bool:
        key = request.header("sec-websocket-key") or ""
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        connection.send(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
            + then
        )
        connection.sock.settimeout(5)
        with contextlib.suppress(OSError):
            heard.append(connection.sock.recv(1024))
        return False

    return script


_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


@pytest.mark.parametrize(
    ("frame", "code", "reason"),
    [
        (b"\x88\x00", 1000, ""),  # a close frame without a code: a normal closure, not "going away"
        (b"\x88\x09" + (4000).to_bytes(2, "big") + b"bye-now", 4000, "bye-now"),  # the near miss: code and reason
        (b"\x83\x00", 1001, ""),  # a frame of an unknown opcode: the upstream's side broke, going away
    ],
    ids=["no-code", "code-and-reason", "broken-frame"],
)
def test_an_upstream_close_reaches_the_client_with_its_code(frame: bytes, code: int, reason: str) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    heard: list[bytes] = []
    with RawUpstream(_accepting(frame, heard)) as upstream, proxied(upstream.base_url) as through:
        with (
            connect(through.base_url.replace("http://", "ws://") + "/responses", open_timeout=10) as ws,
            pytest.raises(ConnectionClosed) as closed,
        ):
            ws.recv(timeout=10)
        received = closed.value.rcvd
    assert received is not None
    assert (received.code, received.reason) == (code, reason)


@pytest.mark.parametrize(
    ("close", "code", "reason"),
    [
        ((None, ""), 1000, b""),  # no code (websockets sends an empty close frame): a normal closure upstream
        ((4001, "done"), 4001, b"done"),  # the near miss: the client's code and reason, as sent
    ],
    ids=["no-code", "code-and-reason"],
)
def test_a_client_close_reaches_the_upstream_with_its_code(
    close: tuple[int | None, str], code: int, reason: bytes
) -> None:
    from websockets.sync.client import connect

    heard: list[bytes] = []
    with RawUpstream(_accepting(b"", heard)) as upstream, proxied(upstream.base_url) as through:
        with connect(through.base_url.replace("http://", "ws://") + "/responses", open_timeout=10) as ws:
            ws.close(*close)  # type: ignore[arg-type]  # websockets sends no payload for a code of None
        deadline = time.monotonic() + 10
        while not heard and time.monotonic() < deadline:
            time.sleep(0.01)
    frame = heard[0]
    assert frame[0] == 0x88  # a close frame, masked by the proxy's client side
    length = frame[1] & 0x7F
    mask, payload = frame[2:6], frame[6 : 6 + length]
    unmasked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert (int.from_bytes(unmasked[:2], "big"), unmasked[2:]) == (code, reason)
