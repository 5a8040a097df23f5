"""What crosses the proxy is what was sent: the request's method, path, query, body bytes and end-to-end headers reach
the upstream unchanged (hop-by-hop ones stay on their hop), and the upstream's status, reason, headers and body
bytes reach the client unchanged — a compressed body as it came (a decompressed copy is what gets analysed), a
stream event by event as it arrives. Endpoints the package does not know pass through unrecorded; redirects are
relayed, never followed; upstream connections are reused."""

from __future__ import annotations

import gzip
import json
import threading
from typing import Any

from .support import (
    LAST_CHUNK,
    Connection,
    RawUpstream,
    Request,
    chunk,
    chunked_head,
    proxied,
    raw_exchange,
    raw_post,
    response,
)

RESPONSE: dict[str, Any] = {
    "id": "resp_raw_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-5.4",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Noted.", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
}


def _split(raw: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = [(name, value.strip()) for name, _, value in (line.partition(":") for line in lines[1:])]
    return lines[0], headers, body


def _named(headers: list[tuple[str, str]] | tuple[tuple[str, str], ...], name: str) -> list[str]:
    return [value for key, value in headers if key.lower() == name.lower()]


def _dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return out
        out += rest[:size]
        body = rest[size + 2 :]
    raise AssertionError("the chunked body did not end")


def test_the_request_reaches_the_upstream_as_sent_less_its_hop_by_hop_headers() -> None:
    def script(request: Request, connection: Connection) -> bool:
        connection.send(response(200, b"{}", {"content-type": "application/json"}))
        return True

    body = b'{"model" :  "gpt-5.4",\n "input": "caf\\u00e9"}'
    head = (
        "POST /v1/things/a%2Fb/c?x=1&x=2&y=%20z HTTP/1.1\r\n"
        "Host: evil.example\r\n"
        "Authorization: Bearer sk-secret\r\n"
        "OpenAI-Organization: org-1\r\n"
        "OpenAI-Project: proj_1\r\n"
        "api-key: azure-key\r\n"
        "X-Dup: one\r\n"
        "X-Dup: two\r\n"
        "Connection: close, X-Hop\r\n"
        "X-Hop: only-this-hop\r\n"
        "Keep-Alive: timeout=5\r\n"
        "TE: trailers\r\n"
        "Proxy-Authorization: Basic cHJveHk6c2VjcmV0\r\n"
        "Forwarded: host=evil.example\r\n"
        "X-Forwarded-Host: evil.example\r\n"
        "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    with RawUpstream(script) as upstream, proxied(upstream.base_url) as through:
        raw = raw_exchange(through.proxy.port, head.encode() + body)
        assert raw.startswith(b"HTTP/1.1 200 OK\r\n")
        (got,) = upstream.received
    assert (got.method, got.target, got.body) == ("POST", "/v1/things/a%2Fb/c?x=1&x=2&y=%20z", body)
    names = [name.lower() for name, _ in got.headers]
    sent_end_to_end = [
        "authorization",
        "openai-organization",
        "openai-project",
        "api-key",
        "x-dup",
        "x-dup",
        "forwarded",
        "x-forwarded-host",
        "traceparent",
        "content-type",
    ]
    assert [name for name in names if name not in ("host", "content-length")] == sent_end_to_end
    assert _named(got.headers, "host") == [f"127.0.0.1:{upstream.port}"]
    assert _named(got.headers, "content-length") == [str(len(body))]
    assert _named(got.headers, "x-dup") == ["one", "two"]
    assert _named(got.headers, "authorization") == ["Bearer sk-secret"]


def test_the_answer_reaches_the_client_as_the_upstream_sent_it() -> None:
    payload = b'{"id": "resp_x",   "object": "response", "note": "\xe2\x82\xac"}'

    def script(request: Request, connection: Connection) -> bool:
        headers = {
            "content-type": "application/json; charset=utf-8",
            "x-request-id": "req_raw",
            "set-cookie": "a=1",
            "Connection": "X-Resp-Hop",
            "X-Resp-Hop": "no",
            "keep-alive": "timeout=5",
            "openai-processing-ms": "12",
            "date": "Tue, 01 Jan 2030 00:00:00 GMT",
            "server": "raw-upstream",
        }
        raw = response(418, payload, headers, reason="Short And Stout")
        raw = raw.replace(b"set-cookie: a=1\r\n", b"set-cookie: a=1\r\nset-cookie: b=2\r\n")
        connection.send(raw)
        return True

    request = b"GET /v1/teapot HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with RawUpstream(script) as upstream, proxied(upstream.base_url) as through:
        status, headers, body = _split(raw_exchange(through.proxy.port, request))
        assert through.spans() == []  # an endpoint the package does not know: forwarded, not recorded
    assert status == "HTTP/1.1 418 Short And Stout"
    assert body == payload
    assert _named(headers, "set-cookie") == ["a=1", "b=2"]
    assert _named(headers, "x-request-id") == ["req_raw"]
    assert _named(headers, "openai-processing-ms") == ["12"]
    assert _named(headers, "date") == ["Tue, 01 Jan 2030 00:00:00 GMT"]
    assert _named(headers, "server") == ["raw-upstream"]
    assert _named(headers, "content-length") == [str(len(payload))]
    assert _named(headers, "x-resp-hop") == []
    assert _named(headers, "keep-alive") == []


def test_a_compressed_answer_is_relayed_as_it_came_and_a_decompressed_copy_is_analysed() -> None:
    packed = gzip.compress(json.dumps(RESPONSE).encode())

    def script(request: Request, connection: Connection) -> bool:
        headers = {"content-type": "application/json", "content-encoding": "gzip", "x-request-id": "req_gz"}
        connection.send(response(200, packed, headers))
        return True

    body = json.dumps({"model": "gpt-5.4", "input": "Remember this: the marker is GZ-1."}).encode()
    with RawUpstream(script) as upstream, proxied(upstream.base_url) as through:
        answer = raw_exchange(through.proxy.port, raw_post(body, extra="Accept-Encoding: gzip\r\n"))
        status, headers, got = _split(answer)
        (span,) = through.wait_for_spans(1)
    assert (status, got) == ("HTTP/1.1 200 OK", packed)
    assert _named(headers, "content-encoding") == ["gzip"]
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.response.id"] == "resp_raw_1"
    assert attributes["openai_responses.request_id"] == "req_gz"
    assert attributes["openai_responses.output.item_types"] == ("message",)
    assert attributes["gen_ai.usage.output_tokens"] == 2


def test_a_compressed_stream_is_relayed_as_it_came_and_observed() -> None:
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {**RESPONSE, "status": "in_progress"}},
        {"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": RESPONSE["output"][0]},
        {"type": "response.completed", "sequence_number": 2, "response": RESPONSE},
    ]
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    packed = gzip.compress(text)

    def script(request: Request, connection: Connection) -> bool:
        headers = {"content-type": "text/event-stream", "content-encoding": "gzip", "x-request-id": "req_gzs"}
        connection.send(chunked_head(200, headers))
        for start in range(0, len(packed), 17):  # split anywhere, mid-event and mid-gzip-block
            connection.send(chunk(packed[start : start + 17]))
        connection.send(LAST_CHUNK)
        return True

    body = json.dumps({"model": "gpt-5.4", "input": "hi", "stream": True}).encode()
    with RawUpstream(script) as upstream, proxied(upstream.base_url) as through:
        _, _, got = _split(raw_exchange(through.proxy.port, raw_post(body)))
        (span,) = through.wait_for_spans(1)
    assert _dechunk(got) == packed
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.response.id"] == "resp_raw_1"
    assert attributes["openai_responses.request_id"] == "req_gzs"
    assert "openai_responses.stream.ended" not in attributes


def test_a_stream_is_relayed_event_by_event_as_it_arrives() -> None:
    """The upstream sends its second event only once the client has read the first: a proxy that waited for more
    would never deliver it."""
    first_read = threading.Event()
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {**RESPONSE, "status": "in_progress"}},
        {"type": "response.completed", "sequence_number": 1, "response": RESPONSE},
    ]
    frames = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]

    def script(request: Request, connection: Connection) -> bool:
        connection.send(chunked_head(200, {"content-type": "text/event-stream"}))
        connection.send(chunk(frames[0]))
        assert first_read.wait(10), "the first event never reached the client"
        connection.send(chunk(frames[1]) + LAST_CHUNK)
        return True

    with RawUpstream(script) as upstream, proxied(upstream.base_url) as through, through.client() as client:
        stream = client.responses.create(model="gpt-5.4", input="hi", stream=True)
        seen = []
        for event in stream:
            seen.append(event.type)
            first_read.set()
        (span,) = through.wait_for_spans(1)
    assert seen == ["response.created", "response.completed"]
    assert dict(span.attributes or {})["gen_ai.response.id"] == "resp_raw_1"


def test_unknown_endpoints_pass_through_unrecorded_and_connections_upstream_are_reused() -> None:
    def script(request: Request, connection: Connection) -> bool:
        connection.send(
            response(200, json.dumps({"object": "list", "data": []}).encode(), {"content-type": "application/json"})
        )
        return True

    with RawUpstream(script) as upstream, proxied(upstream.base_url) as through, through.client() as client:
        for _ in range(10):
            client.models.list()
        client.post("/chat/completions", body={"model": "m", "messages": []}, cast_to=object)
        assert through.spans() == []
    assert [r.target for r in upstream.received] == ["/v1/models"] * 10 + ["/v1/chat/completions"]
    assert upstream.connections == 1


def test_a_redirect_is_relayed_never_followed() -> None:
    evil_calls: list[Request] = []

    def evil(request: Request, connection: Connection) -> bool:
        evil_calls.append(request)
        connection.send(response(200, b"{}"))
        return False

    with RawUpstream(evil) as elsewhere:

        def script(request: Request, connection: Connection) -> bool:
            connection.send(
                response(307, b"", {"location": f"http://127.0.0.1:{elsewhere.port}/v1/r"}, "Temporary Redirect")
            )
            return True

        with RawUpstream(script) as upstream, proxied(upstream.base_url) as through:
            status, headers, _ = _split(
                raw_exchange(through.proxy.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            )
    assert status == "HTTP/1.1 307 Temporary Redirect"
    assert _named(headers, "location") == [f"http://127.0.0.1:{elsewhere.port}/v1/r"]
    assert evil_calls == []


def test_trace_headers_make_the_span_a_child_of_the_apps_span_and_go_upstream_unchanged() -> None:
    def script(request: Request, connection: Connection) -> bool:
        connection.send(response(200, json.dumps(RESPONSE).encode(), {"content-type": "application/json"}))
        return True

    trace = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=opaque",
        "baggage": "tenant=acme",
    }
    with RawUpstream(script) as upstream, proxied(upstream.base_url) as through:
        with through.client(default_headers=trace) as client:
            client.responses.create(model="gpt-5.4", input="hi")
        with through.client() as client:
            client.responses.create(model="gpt-5.4", input="hi")
        child, root = through.wait_for_spans(2)
    assert child.parent is not None
    assert (child.parent.trace_id, child.parent.span_id) == (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)
    assert child.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert list(child.context.trace_state.items()) == [("vendor", "opaque")]  # propagated, as W3C has it
    assert root.parent is None
    assert list(root.context.trace_state.items()) == []
    first = upstream.received[0]
    assert [_named(first.headers, name) for name in trace] == [[value] for value in trace.values()]
    assert all(not _named(upstream.received[1].headers, name) for name in trace)
