"""A hostile or broken client or upstream never crashes the proxy, never stalls the other connections, and never
changes what the client receives beyond what the upstream did: each case runs beside a healthy call that must
complete at once, and the proxy serves on afterwards.

Clients: headers sent byte by byte, oversized headers and bodies, a chunked body cut short, a client that leaves
mid-body (not a failure of the proxy: nothing counted), a body that stalls, bodies that are not JSON, a client that
leaves mid-stream. Upstreams: a stream cut mid-event, a body shorter than
its length, an answer that is not HTTP, one that never comes, a refused connection, a decompression bomb, a 200
that is not JSON, an error page.
"""

from __future__ import annotations

import gzip
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest

from otel_responses.emulator import Emulator

from ..support import free_port
from .support import (
    LAST_CHUNK,
    Connection,
    Proxied,
    RawUpstream,
    Request,
    chunk,
    chunked_head,
    proxied,
    raw_exchange,
    raw_post,
    response,
)
from .test_forwarding_changes_nothing import RESPONSE

HEALTHY_WITHIN = 5.0  # seconds: a healthy call beside a hostile peer (it takes milliseconds when nothing stalls)


def healthy(through: Proxied) -> None:
    """A call through the proxy that must complete at once, recorded as any other."""
    started = time.monotonic()
    with through.client(timeout=HEALTHY_WITHIN) as client:
        answer = client.responses.create(model="gpt-5.4", input="Remember this: the marker is OK-1.")
    assert answer.output_text
    assert time.monotonic() - started < HEALTHY_WITHIN


@contextmanager
def hostile_socket(port: int, data: bytes = b"") -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        if data:
            sock.sendall(data)
        yield sock
    finally:
        sock.close()


def _closed_by_peer(sock: socket.socket, within: float) -> bytes:
    """What the proxy sent before it closed the connection; ``TimeoutError`` when it kept it open ``within``
    seconds."""
    sock.settimeout(within)
    parts = []
    try:
        while part := sock.recv(65536):
            parts.append(part)
    except ConnectionResetError:
        pass
    return b"".join(parts)


# -- hostile clients --------------------------------------------------------------------------------------------


def test_headers_sent_byte_by_byte_stall_only_their_own_connection(emulator: Emulator) -> None:
    with proxied(emulator.base_url, idle_timeout=1.0) as through:
        with hostile_socket(through.proxy.port, b"POST /v1/responses HTTP/1.1\r\nHo") as slow:
            for _ in range(3):
                slow.sendall(b"s")
                healthy(through)
            closed = _closed_by_peer(slow, within=10)  # the head never completes: the idle deadline closes it
            assert closed == b""  # closed without an answer: a head that never came has nothing to answer
        healthy(through)


@pytest.mark.parametrize(
    "head",
    [
        "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Huge: " + "a" * 100_000 + "\r\n\r\n",
        "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + "".join(f"X-H{n}: v\r\n" for n in range(500)) + "\r\n",
        "GET /" + "a" * 100_000 + " HTTP/1.1\r\nHost: x\r\n\r\n",
    ],
    ids=["long-field", "many-fields", "long-line"],
)
def test_oversized_headers_are_refused_without_reaching_the_upstream(head: str) -> None:
    def script(request: Request, connection: Connection) -> bool:
        connection.send(response(200, b"{}"))
        return True

    with RawUpstream(script) as upstream, proxied(upstream.base_url) as through:
        answer = raw_exchange(through.proxy.port, head.encode())
        assert answer.split(b" ", 2)[1] in (b"400", b"431")
        assert upstream.connections == 0
        assert through.spans() == []


def test_an_oversized_body_is_refused_before_it_goes_upstream(emulator: Emulator) -> None:
    with proxied(emulator.base_url, max_body_bytes=10_000) as through:
        before = len(emulator.requests)
        declared = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n" + b"x" * 20_000
        assert raw_exchange(through.proxy.port, declared).startswith(b"HTTP/1.1 413 ")
        chunked = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        chunked += chunk(b"x" * 6000) * 3 + LAST_CHUNK
        answer = raw_exchange(through.proxy.port, chunked)
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert b'"code": "request_too_large"' in answer
        with through.client() as client, pytest.raises(openai.APIStatusError) as refused:
            client.responses.create(model="gpt-5.4", input="x" * 20_000)
        assert refused.value.status_code == 413
        assert len(emulator.requests) == before
        healthy(through)


def test_a_chunked_body_cut_short_never_reaches_the_upstream(emulator: Emulator) -> None:
    with proxied(emulator.base_url) as through:
        before = len(emulator.requests)
        head = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        with hostile_socket(through.proxy.port, head + chunk(b'{"model": "gpt-5.4", "inp')):
            healthy(through)
        healthy(through)
        time.sleep(0.1)
        assert len(emulator.requests) == before + 2  # the two healthy calls only
        assert len(through.spans()) == 2


_CHUNKED = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    ("data", "reset", "answered"),
    [
        (b'POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"model"', False, b""),
        (b'POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"model"', True, b""),
        (_CHUNKED + chunk(b'{"model": "gpt-5.4", "inp'), False, b""),
        (_CHUNKED + chunk(b'{"model": "gpt-5.4", "inp'), True, b""),
        (_CHUNKED + chunk(b'{"m') + b"zz\r\nxx\r\n", False, b"HTTP/1.0 400 "),  # the near miss: it stays to read
    ],
    ids=["length-closed", "length-reset", "chunked-closed", "chunked-reset", "bad-chunk-stays"],
)
def test_a_client_that_leaves_mid_body_is_closed_quietly(
    emulator: Emulator, data: bytes, reset: bool, answered: bytes
) -> None:
    with proxied(emulator.base_url) as through:
        before = len(emulator.requests)
        sock = socket.create_connection(("127.0.0.1", through.proxy.port), timeout=10)
        sock.sendall(data)
        if answered:
            assert _closed_by_peer(sock, within=10).startswith(answered)
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        time.sleep(0.2)  # the proxy reads the end of the connection
        healthy(through)
        spans = through.wait_for_spans(1)
        counted = through.captured.metric_points("openai_responses.instrumentation.errors")
        assert len(emulator.requests) == before + 1  # the healthy call only
    assert len(spans) == 1
    assert counted == []


def test_a_body_that_stalls_is_answered_408_and_never_reaches_the_upstream(emulator: Emulator) -> None:
    with proxied(emulator.base_url, idle_timeout=0.5) as through:
        before = len(emulator.requests)
        head = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
        with hostile_socket(through.proxy.port, head) as stalled:
            healthy(through)
            assert _closed_by_peer(stalled, within=10).startswith(b"HTTP/1.1 408 ")
        assert len(emulator.requests) == before + 1


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"model": "gpt-5.4", "input": ', "application/json"),
        (b"model=gpt-5.4&input=hi", "application/x-www-form-urlencoded"),
        (b"[1, 2]", "application/json"),
        (b"\xff\xfe\x00", "application/json"),
    ],
    ids=["truncated-json", "form", "json-array", "not-utf8"],
)
def test_a_body_that_is_not_a_json_object_is_forwarded_and_answered_by_the_upstream(
    emulator: Emulator, body: bytes, content_type: str
) -> None:
    with proxied(emulator.base_url) as through:
        answer = raw_exchange(through.proxy.port, raw_post(body, content_type))
        assert emulator.requests[-1].path == "/v1/responses"
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["type"] == "invalid_request_error"
        assert through.spans() == []  # not a request the instrumentation can read: forwarded unrecorded
        healthy(through)


def test_a_client_that_leaves_mid_stream_ends_its_span_closed() -> None:
    left = threading.Event()
    first, delta, _ = _stream_events()

    def script(request: Request, connection: Connection) -> bool:
        connection.send(chunked_head(200, {"content-type": "text/event-stream"}) + chunk(first))
        left.wait(10)
        for _ in range(50):  # the proxy's writes to the client that left fail: it stops there
            connection.send(chunk(delta))
            time.sleep(0.01)
        return False

    with RawUpstream(_healthy_or(script)) as upstream, proxied(upstream.base_url) as through:
        with through.client() as client:
            stream = client.responses.create(model="gpt-5.4", input="hi", stream=True)
            assert next(iter(stream)).type == "response.created"
            stream.close()
        left.set()
        (span,) = through.wait_for_spans(1)
        healthy(through)
    attributes = dict(span.attributes or {})
    assert attributes["openai_responses.stream.ended"] == "closed"
    assert "error.type" not in attributes


def _long_stream(total: int, freed: threading.Event) -> Any:
    """An upstream stream of about ``total`` bytes of deltas (then its end); ``freed`` is set when the proxy closes
    the connection under it."""
    first, delta, last = _stream_events()
    event = json.loads(delta.partition(b"data: ")[2])
    big = f"event: {event['type']}\ndata: {json.dumps({**event, 'delta': 'x' * 65_000})}\n\n".encode()

    def script(request: Request, connection: Connection) -> bool:
        connection.sock.settimeout(30)
        try:
            connection.sock.sendall(chunked_head(200, {"content-type": "text/event-stream"}) + chunk(first))
            for _ in range(total // len(big)):
                connection.sock.sendall(chunk(big))
            connection.sock.sendall(chunk(last) + LAST_CHUNK)
        except (BrokenPipeError, ConnectionResetError):
            freed.set()
        return False

    return script


def _stream_request_on_a_small_buffer(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: the window stays small
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    body = json.dumps({"model": "gpt-5.4", "input": "hi", "stream": True}).encode()
    sock.sendall(raw_post(body))
    assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")
    return sock


FREED_WITHIN = 6.0  # seconds: the idle timeout (1 s) for the blocked write, and slack for a loaded machine


@pytest.mark.parametrize("pause", [None, 0.2], ids=["stops-reading", "pauses"])
def test_a_client_that_stops_reading_a_stream_frees_the_upstream_within_the_idle_timeout(pause: float | None) -> None:
    freed = threading.Event()
    with (
        RawUpstream(_healthy_or(_long_stream(64 << 20, freed))) as upstream,
        proxied(upstream.base_url, idle_timeout=1.0) as through,
    ):
        sock = _stream_request_on_a_small_buffer(through.proxy.port)
        try:
            if pause is None:  # it reads nothing more
                stopped = time.monotonic()
                assert freed.wait(FREED_WITHIN)
                took = time.monotonic() - stopped
                healthy(through)
                spans = through.wait_for_spans(2)
            else:  # the near miss: a pause shorter than the idle timeout, then it reads on to the end
                time.sleep(pause)
                read = 0
                while part := sock.recv(1 << 20):
                    read += len(part)
                assert read > 60 << 20  # every delta reached it
                spans = through.wait_for_spans(1)
                assert not freed.is_set()
        finally:
            sock.close()
    (streamed,) = [dict(s.attributes or {}) for s in spans if (s.attributes or {}).get("gen_ai.request.stream")]
    if pause is None:
        assert 1.0 <= took < FREED_WITHIN
        assert streamed["openai_responses.stream.ended"] == "closed"
    else:
        assert "openai_responses.stream.ended" not in streamed  # it ended with its last event
        assert streamed["openai_responses.response.status"] == "completed"


# -- hostile upstreams ------------------------------------------------------------------------------------------


def _stream_events() -> list[bytes]:
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {**RESPONSE, "status": "in_progress"}},
        {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "delta": "No"},
        {"type": "response.completed", "sequence_number": 2, "response": RESPONSE},
    ]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def _dechunked(body: bytes) -> tuple[bytes, bool]:
    """The data of a chunked body however it was re-chunked, and whether it ended with its last chunk."""
    data = b""
    while body:
        size_line, found, rest = body.partition(b"\r\n")
        if not found:
            break
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return data, True
        data += rest[:size]
        body = rest[size + 2 :]
    return data, False


def _healthy_or(script: Any) -> Any:
    """An upstream that answers the healthy calls (``input`` mentioning OK-1) itself, and the others with ``script``."""

    def answer(request: Request, connection: Connection) -> bool:
        if b"OK-1" in request.body:
            connection.send(response(200, json.dumps(RESPONSE).encode(), {"content-type": "application/json"}))
            return True
        return bool(script(request, connection))

    return answer


def _stream_cut_mid_event(request: Request, connection: Connection) -> bool:
    first, second, _ = _stream_events()
    connection.send(chunked_head(200, {"content-type": "text/event-stream", "x-request-id": "req_cut"}))
    connection.send(chunk(first) + chunk(second[:25]))
    time.sleep(0.05)
    connection.cut()
    return False


def test_a_stream_cut_mid_event_reaches_the_client_cut_at_the_same_byte() -> None:
    first, second, _ = _stream_events()
    body = json.dumps({"model": "gpt-5.4", "input": "hi", "stream": True}).encode()
    request = raw_post(body)
    with RawUpstream(_healthy_or(_stream_cut_mid_event)) as upstream, proxied(upstream.base_url) as through:
        answer = raw_exchange(through.proxy.port, request)
        (span,) = through.wait_for_spans(1)
        healthy(through)
    data, whole = _dechunked(answer.partition(b"\r\n\r\n")[2])
    assert (data, whole) == (first + second[:25], False)  # the same bytes, and no final chunk: the client sees the cut
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == "ClientPayloadError"
    assert "gen_ai.response.id" not in attributes


def test_the_sdk_sees_a_cut_stream_through_the_proxy_as_it_would_directly() -> None:
    with RawUpstream(_healthy_or(_stream_cut_mid_event)) as upstream, proxied(upstream.base_url) as through:
        errors = []
        for base_url in (upstream.base_url, through.base_url):
            with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
                seen = []
                try:
                    for event in client.responses.create(model="gpt-5.4", input="hi", stream=True):
                        seen.append(event.type)
                except Exception as exc:
                    errors.append((seen, type(exc).__name__))
        healthy(through)
    assert errors[0] == errors[1]
    assert errors[0][0] == ["response.created"]


def test_a_body_shorter_than_its_length_reaches_the_client_as_short() -> None:
    payload = json.dumps(RESPONSE).encode()

    def short(request: Request, connection: Connection) -> bool:
        connection.send(
            response(200, payload, {"content-type": "application/json"}).replace(
                f"content-length: {len(payload)}".encode(), f"content-length: {len(payload) + 50}".encode()
            )
        )
        time.sleep(0.05)
        connection.cut()
        return False

    request = b"GET /v1/responses/resp_1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with RawUpstream(_healthy_or(short)) as upstream, proxied(upstream.base_url) as through:
        answer = raw_exchange(through.proxy.port, request)
        (span,) = through.wait_for_spans(1)
        healthy(through)
    head, _, relayed = answer.partition(b"\r\n\r\n")
    assert f"Content-Length: {len(payload) + 50}".lower().encode() in head.lower()
    assert relayed == payload
    assert "error.type" in dict(span.attributes or {})


def _not_http(request: Request, connection: Connection) -> bool:
    connection.send(b"SSH-2.0-OpenSSH\r\n\r\n")
    return False


def _never_answers(request: Request, connection: Connection) -> bool:
    time.sleep(3)
    return False


@pytest.mark.parametrize(
    ("script", "status", "error_type"),
    [(_not_http, 502, "APIConnectionError"), (_never_answers, 504, "APITimeoutError")],
    ids=["not-http", "never-answers"],
)
def test_an_upstream_that_does_not_answer_http_gets_the_client_a_gateway_error(
    script: Any, status: int, error_type: str
) -> None:
    with RawUpstream(_healthy_or(script)) as upstream, proxied(upstream.base_url, read_timeout=0.5) as through:
        with through.client() as client, pytest.raises(openai.APIStatusError) as failed:
            client.responses.create(model="gpt-5.4", input="hi")
        (span,) = through.wait_for_spans(1)
        healthy(through)
    assert failed.value.status_code == status
    assert dict(span.attributes or {})["error.type"] == error_type


def test_a_refused_connection_gets_the_client_a_502_and_the_span_the_sdks_error() -> None:
    with proxied(f"http://127.0.0.1:{free_port()}/v1") as through:
        with through.client() as client, pytest.raises(openai.APIStatusError) as failed:
            client.responses.create(model="gpt-5.4", input="hi")
        (span,) = through.wait_for_spans(1)
    assert failed.value.status_code == 502
    assert failed.value.code == "upstream_unreachable"
    assert dict(span.attributes or {})["error.type"] == "APIConnectionError"


def test_a_decompression_bomb_is_relayed_as_it_came_and_not_analysed() -> None:
    bomb = gzip.compress(b'{"id": "resp_bomb", "output": [], "pad": "' + b"0" * 20_000_000 + b'"}')

    def script(request: Request, connection: Connection) -> bool:
        connection.send(response(200, bomb, {"content-type": "application/json", "content-encoding": "gzip"}))
        return True

    request = b"GET /v1/responses/resp_bomb HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
    with RawUpstream(_healthy_or(script)) as upstream, proxied(upstream.base_url, max_body_bytes=1_000_000) as through:
        answer = raw_exchange(through.proxy.port, request)
        (span,) = through.wait_for_spans(1)
        healthy(through)
    assert answer.partition(b"\r\n\r\n")[2] == bomb
    attributes = dict(span.attributes or {})
    assert "error.type" not in attributes


@pytest.mark.parametrize(
    ("status", "body", "content_type", "error_type"),
    [
        (200, b"<html>maintenance</html>", "text/html", "JSONDecodeError"),
        (500, b"<html>oops</html>", "text/html", "InternalServerError"),
        (
            429,
            b'{"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}',
            "application/json",
            "RateLimitError",
        ),
    ],
    ids=["ok-not-json", "error-page", "rate-limited"],
)
def test_what_the_upstream_answers_is_relayed_and_recorded_as_the_sdk_would_raise_it(
    status: int, body: bytes, content_type: str, error_type: str
) -> None:
    def script(request: Request, connection: Connection) -> bool:
        connection.send(response(status, body, {"content-type": content_type, "x-request-id": "req_odd"}))
        return True

    request = b"GET /v1/responses/resp_1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with RawUpstream(_healthy_or(script)) as upstream, proxied(upstream.base_url) as through:
        answer = raw_exchange(through.proxy.port, request)
        (span,) = through.wait_for_spans(1)
        healthy(through)
    assert answer.startswith(f"HTTP/1.1 {status} ".encode())
    assert answer.partition(b"\r\n\r\n")[2] == body
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == error_type
    assert attributes["openai_responses.request_id"] == "req_odd"


def test_many_hostile_peers_at_once_leave_the_proxy_serving(emulator: Emulator) -> None:
    with proxied(emulator.base_url, idle_timeout=2.0, max_body_bytes=100_000) as through:
        sockets = [hostile_socket(through.proxy.port, b"GET /v1/models HTTP/1.1\r\nHo") for _ in range(50)]
        opened = [each.__enter__() for each in sockets]
        try:
            threads = [threading.Thread(target=healthy, args=(through,)) for _ in range(5)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(20)
            assert not any(thread.is_alive() for thread in threads)
        finally:
            for sock in opened:
                sock.close()
        healthy(through)


def test_a_failure_inside_the_proxy_is_a_502_counted_and_ends_its_call(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_responses.proxy.forward import Forwarder

    relay = Forwarder._relay
    failures = iter([RuntimeError("a bug")])

    async def failing_once(self: Forwarder, *args: Any) -> Any:
        for failure in failures:
            raise failure
        return await relay(self, *args)

    monkeypatch.setattr(Forwarder, "_relay", failing_once)
    with proxied(emulator.base_url) as through:
        with through.client() as client, pytest.raises(openai.APIStatusError) as failed:
            client.responses.create(model="gpt-5.4", input="hi")
        healthy(through)
        failed_span, _ = through.wait_for_spans(2)
        counted = through.captured.metric_points("openai_responses.instrumentation.errors")
    assert (failed.value.status_code, failed.value.code) == (502, "proxy_error")
    assert dict(failed_span.attributes or {})["error.type"] == "RuntimeError"
    assert [dict(p.attributes or {}).get("openai_responses.instrumentation.step") for p in counted] == [
        "forward_request"
    ]


def test_a_failure_starting_a_streams_observer_still_ends_its_call(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_responses._calls.observer import StreamObserver as observer
    from otel_responses.proxy import exchange

    failures = iter([RuntimeError("a bug")])

    def failing_once(*args: Any) -> Any:
        for failure in failures:
            raise failure
        return observer(*args)

    monkeypatch.setattr(exchange, "StreamObserver", failing_once)
    with proxied(emulator.base_url) as through:
        with through.client() as client:
            events = [e.type for e in client.responses.create(model="gpt-5.4", input="hi", stream=True)]
            again = [e.type for e in client.responses.create(model="gpt-5.4", input="hi", stream=True)]
        spans = through.wait_for_spans(2)
        counted = through.captured.metric_points("openai_responses.instrumentation.errors")
    assert events == again  # the client's stream is relayed whole either way
    assert events[-1] == "response.completed"
    assert len(spans) == 2  # the unobserved one ended too
    unobserved = dict(spans[0].attributes or {})
    assert "error.type" not in unobserved
    assert unobserved["openai_responses.signals"] == ()  # what it could not read raises nothing
    assert [dict(p.attributes or {}).get("openai_responses.instrumentation.step") for p in counted] == ["read_response"]
