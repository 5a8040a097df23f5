"""What the upstream reads, the proxy reads too, or counts: a path is routed as the upstream reads it (percent-decoded
once, one canonical form), over HTTP and WebSocket; a body the proxy cannot read (a coding it cannot undo, JSON it
cannot parse, nesting past its parser) goes upstream unchanged and is counted by reason in
``openai_responses.proxy.unrecorded`` — and in strict mode is refused with the proxy's own code, never forwarded
unchecked. The parser cannot hit Python's recursion limit. A rejected ``--upstream`` is never echoed with its
credentials."""

from __future__ import annotations

import gzip
import importlib.util
import json
from typing import Any

import pytest

from otel_responses.proxy.reading import FALLBACK_DEPTH, Unreadable, depth, loads, request_keywords
from otel_responses.proxy.routing import canonical_path, is_responses_socket, route_of
from otel_responses.proxy.settings import ProxySettingsError, upstream_of

from .support import Connection, Proxied, RawUpstream, Request, proxied, raw_exchange, response

RESPONSE = {
    "id": "resp_read_1",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "model": "gpt-5.4",
    "output": [],
    "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
}
BODY = b'{"model": "gpt-5.4", "input": "hi"}'
# orjson (the `proxy` extra) reads 1,024 levels; without it the standard library's parser reads FALLBACK_DEPTH.
ORJSON = importlib.util.find_spec("orjson") is not None
UNREADABLE = "openai_responses.proxy.unrecorded"


def _nested(levels: int) -> bytes:
    """A create whose ``metadata`` holds a value nested ``levels`` deep (the whole body one level more)."""
    return b'{"model": "gpt-5.4", "input": "hi", "metadata": {"x": ' + b"[" * levels + b"]" * levels + b"}}"


# -- the path as the upstream reads it ---------------------------------------------------------------------------

PATHS = [
    ("/v1/responses", "/v1/responses"),
    ("/v1/%72esponses", "/v1/responses"),
    ("/v1/responses%2F", "/v1/responses"),
    ("/v1//responses/", "/v1/responses"),
    ("/v1/x/../responses", "/v1/responses"),
    ("/v1/./responses", "/v1/responses"),
    ("/v1/%2572esponses", "/v1/%72esponses"),  # the near miss: decoded once, as the upstream decodes it
    ("/v1/responses/resp%5F1", "/v1/responses/resp_1"),
]


@pytest.mark.parametrize(("raw", "canonical"), PATHS)
def test_a_path_has_one_canonical_form(raw: str, canonical: str) -> None:
    assert canonical_path(raw) == canonical


ROUTES = [
    (("POST", "/v1/%72esponses"), ("chat", ())),
    (("POST", "/v1/responses%2F"), ("chat", ())),
    (("POST", "/v1/%72esponses/compact"), ("compact_response", ())),
    (("GET", "/v1/responses/resp%5F1"), ("fetch_response", ("resp_1",))),
    (("GET", "/v1/responses/a%2525b"), ("fetch_response", ("a%25b",))),  # an id decoded once, never twice
    (("DELETE", "/v1/conversations/conv%5F1"), ("delete_conversation", ("conv_1",))),
    (("POST", "/v1/%2572esponses"), None),  # the near miss: the upstream reads `%72esponses`, no route
    (("POST", "/v1/respons"), None),
    (("GET", "/v1/%6Dodels"), None),  # a known path of another API: forwarded unrecorded, not counted
]


@pytest.mark.parametrize(("request_line", "expected"), ROUTES)
def test_a_request_is_routed_on_the_path_the_upstream_reads(
    request_line: tuple[str, str], expected: tuple[str, tuple[str, ...]] | None
) -> None:
    found = route_of(*request_line, {}, "/v1")
    assert (None if found is None else (found.operation.name, found.args)) == expected


@pytest.mark.parametrize(
    ("raw", "socket"), [("/v1/%72esponses", True), ("/v1/responses/", True), ("/v1/%72ealtime", False)]
)
def test_a_websocket_is_the_responses_socket_however_its_path_is_spelt(raw: str, socket: bool) -> None:
    assert is_responses_socket(raw, "/v1") is socket


# -- a body the proxy reads, or the reason it cannot -------------------------------------------------------------

BODIES = [
    (BODY, None, "read"),
    (b'{"model": "gpt-5.4", "input": "hi", "temperature": NaN}', None, "read"),  # orjson's rejection, read again
    (b'\xef\xbb\xbf{"model": "gpt-5.4"}', None, "read"),  # a byte order mark: the standard library reads it
    ('{"model": "gpt-5.4"}'.encode("utf-16"), None, "read"),
    (_nested(1_000), None, "read"),  # the issue's ~1,000 deep: orjson reads 1,024 levels without recursion
    (_nested(1_100), None, "too_deep"),
    (_nested(FALLBACK_DEPTH - 5)[:-1] + b', "t": NaN}', None, "read"),  # the fallback, under its bound
    (_nested(FALLBACK_DEPTH + 5)[:-1] + b', "t": NaN}', None, "too_deep"),  # the fallback, past its bound
    (BODY, "gzip", "corrupt_encoding"),  # plain JSON said to be gzip
    (gzip.compress(BODY), "gzip", "read"),  # the near miss: really gzip
    (BODY, "x-unknown", "unsupported_encoding"),
    (BODY, "br", "unsupported_encoding"),  # no Brotli module in the test venvs
    (BODY, "identity, x-foo", "unsupported_encoding"),
    (BODY, "identity", "read"),  # the near miss: identity alone changes nothing
    (b'{"model": "gpt-5.4"', None, "invalid_json"),
    (b"[]", None, "invalid_json"),
    (b'{"model": "\xff"}', None, "invalid_json"),
    (gzip.compress(b" " * 20_000 + BODY), "gzip", "too_large"),  # decompressed past the bound
    (b" " * 20_000 + BODY, None, "too_large"),  # as sent
]


@pytest.mark.parametrize(("body", "encoding", "expected"), BODIES)
def test_a_body_is_read_or_says_why_not(body: bytes, encoding: str | None, expected: str) -> None:
    pytest.importorskip("orjson")
    if encoding == "br":
        assert not any(_importable(name) for name in ("brotli", "brotlicffi"))
    try:
        request_keywords(body, encoding, 10_000)
        found = "read"
    except Unreadable as unreadable:
        found = unreadable.reason
    assert found == expected


def _importable(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def test_nesting_is_measured_without_recursion_and_past_strings() -> None:
    assert depth(b'{"a": "[[[[{{{{", "b": [[1]], "c": "\\"]]"}') == 3
    assert depth(b"[" * 100_000 + b"]" * 100_000) == 100_000  # far past any recursion limit, counted in C
    with pytest.raises(Unreadable) as deep:
        loads(b"[" * 100_000 + b"]" * 100_000)
    assert deep.value.reason == "too_deep"


# -- through the proxy: forwarded and counted, or refused in strict mode -----------------------------------------


def _answering(received: list[Request]) -> Any:
    def script(request: Request, connection: Connection) -> bool:
        received.append(request)
        connection.send(response(200, json.dumps(RESPONSE).encode(), {"content-type": "application/json"}))
        return True

    return script


def _post(through: Proxied, body: bytes, path: str = "/v1/responses", encoding: str | None = None) -> bytes:
    coding = f"Content-Encoding: {encoding}\r\n" if encoding else ""
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{coding}"
    request = f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
    return raw_exchange(through.proxy.port, request)


def _counted(through: Proxied) -> tuple[dict[str, int], dict[str, int]]:
    """The count of unrecorded calls, as the proxy keeps it and as its metric says."""
    tally = through.proxy.unrecorded()
    points = through.captured.metric_points(UNREADABLE)
    return tally, {p.attributes["openai_responses.proxy.reason"]: p.value for p in points}


SHAPES = [
    ("/v1/%72esponses", BODY, None, None),
    ("/v1/responses%2F", BODY, None, None),
    ("/v1/responses", BODY, "gzip", "corrupt_encoding"),
    ("/v1/responses", BODY, "x-unknown", "unsupported_encoding"),
    ("/v1/responses", BODY, "br", "unsupported_encoding"),
    ("/v1/responses", BODY, "identity, x-foo", "unsupported_encoding"),
    ("/v1/responses", _nested(1_000), None, None if ORJSON else "too_deep"),
    ("/v1/responses", _nested(1_100), None, "too_deep"),
    ("/v1/responses", b'{"model": "gpt-5.4", "input": ', None, "invalid_json"),
]
SHAPE_IDS = ["r-escaped", "slash-escaped", "gzip-label", "x-unknown", "br", "identity-x-foo", "deep-1000", "deep-1100"]


@pytest.mark.parametrize(("path", "body", "encoding", "reason"), SHAPES, ids=[*SHAPE_IDS, "cut"])
def test_each_shape_is_recorded_or_forwarded_and_counted(
    path: str, body: bytes, encoding: str | None, reason: str | None
) -> None:
    received: list[Request] = []
    with RawUpstream(_answering(received)) as upstream, proxied(upstream.base_url) as through:
        answer = _post(through, body, path, encoding)
        through.proxy.settle()
        spans = through.spans()
        counted = _counted(through)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert [(r.target, r.body) for r in received] == [(path, body)]  # forwarded as sent
    if reason is None:
        assert [s.name for s in spans] == ["chat gpt-5.4"]
        assert counted == ({}, {})
    else:
        assert spans == []
        assert counted == ({reason: 1}, {reason: 1})


@pytest.mark.parametrize(("path", "body", "encoding", "reason"), SHAPES, ids=[*SHAPE_IDS, "cut"])
def test_strict_mode_checks_each_shape_it_can_read_and_refuses_the_others(
    path: str, body: bytes, encoding: str | None, reason: str | None
) -> None:
    received: list[Request] = []
    with RawUpstream(_answering(received)) as upstream, proxied(upstream.base_url, {"strict": True}) as through:
        answer = _post(through, body, path, encoding)
        # the same shape with a conflict the request itself proves: refused, whatever its spelling
        conflict = json.loads(BODY) | {"conversation": "conv_1", "previous_response_id": "resp_1"}
        refused = _post(through, json.dumps(conflict).encode(), path) if reason is None else b""
        through.proxy.settle()
        counted = _counted(through)
    if reason is None:
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert refused.startswith(b"HTTP/1.1 400 ")
        assert json.loads(refused.partition(b"\r\n\r\n")[2])["error"]["code"] == "state_mode_conflict"
        assert len(received) == 1
        assert counted == ({}, {})
        return
    assert answer.startswith(b"HTTP/1.1 400 ")
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "proxy_unreadable_body"
    assert "could not read this request's body" in error["message"]
    assert received == []  # never forwarded unchecked
    assert counted == ({reason: 1}, {reason: 1})


def test_a_known_path_of_another_api_is_neither_recorded_nor_counted() -> None:
    received: list[Request] = []
    with RawUpstream(_answering(received)) as upstream, proxied(upstream.base_url, {"strict": True}) as through:
        answer = _post(through, b"not json", "/v1/chat/completions")
        through.proxy.settle()
        assert (through.spans(), _counted(through)) == ([], ({}, {}))
    assert answer.startswith(b"HTTP/1.1 200 ")


# -- WebSocket -----------------------------------------------------------------------------------------------------


def _socket(url: str) -> Any:
    from websockets.sync.client import connect

    return connect(url.replace("http://", "ws://"), open_timeout=10)


def _until_done(socket: Any) -> dict[str, Any]:
    """The terminal event; ``{"type": "closed"}`` when the upstream closed the socket first."""
    from websockets.exceptions import ConnectionClosed

    while True:
        try:
            event: dict[str, Any] = json.loads(socket.recv(timeout=10))
        except ConnectionClosed:
            return {"type": "closed"}
        if event.get("type") in ("response.completed", "response.failed", "error"):
            return event


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_a_socket_to_an_escaped_path_is_recorded_and_checked(strict: bool) -> None:
    pytest.importorskip("websockets")
    from otel_responses.emulator import Emulator

    with Emulator() as emulator, proxied(emulator.base_url, {"strict": strict}) as through:
        with _socket(through.origin + "/v1/%72esponses") as socket:
            socket.send(json.dumps({"type": "response.create", "model": "gpt-5.4", "input": "Remember: W-7."}))
            first = _until_done(socket)
            socket.send(
                json.dumps(
                    {
                        "type": "response.create",
                        "model": "gpt-5.4",
                        "input": "x",
                        "conversation": "conv_1",
                        "previous_response_id": "resp_1",
                    }
                )
            )
            second = _until_done(socket)
        spans = through.wait_for_spans(2)
        through.proxy.settle()
        counted = _counted(through)
    assert first["type"] == "response.completed"
    assert second["type"] == "error"  # the API refuses it too; strict mode refuses it before it leaves
    assert (second["error"]["code"] == "state_mode_conflict") is strict
    assert [dict(s.attributes or {})["openai_responses.signals"] for s in spans] == [(), ("state_mode_conflict",)]
    assert counted == ({}, {})


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ('{"type": "response.create", "model": "gpt-5.4", "input": ', "invalid_json"),
        (
            '{"type": "response.create", "model": "gpt-5.4", "metadata": {"x": ' + "[" * 1_100 + "]" * 1_100 + "}}",
            "too_deep",
        ),
    ],
    ids=["cut", "deep"],
)
def test_a_frame_the_proxy_cannot_read_is_counted_and_refused_in_strict_mode(
    strict: bool, frame: str, reason: str
) -> None:
    pytest.importorskip("websockets")
    from otel_responses.emulator import Emulator

    with Emulator() as emulator, proxied(emulator.base_url, {"strict": strict}) as through:
        with _socket(through.base_url + "/responses") as socket:
            socket.send(frame)
            answered = _until_done(socket)
        sent = [r for r in emulator.requests if r.method == "WEBSOCKET"]
        through.proxy.settle()
        counted = _counted(through)
    if strict:
        assert (answered["type"], answered["error"]["code"]) == ("error", "proxy_unreadable_body")
        assert sent == []  # never forwarded unchecked
    else:  # the upstream's own answer: an error event, or (the emulator's parser past its recursion limit) a close
        assert answered["type"] in ("error", "closed")
        assert answered.get("error", {}).get("code") != "proxy_unreadable_body"
    assert counted == ({reason: 1}, {reason: 1})


# -- the analysis bound ---------------------------------------------------------------------------------------------


def _replay(items: int) -> bytes:
    turns = [
        {"type": "message", "role": "user", "content": f"Turn {n}: look it up."}
        if n % 2 == 0
        else {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n:06d}",
            "content": [{"type": "output_text", "text": "Done. " * 60}],
        }
        for n in range(items)
    ]
    return json.dumps({"model": "gpt-5.4", "input": turns, "store": False}).encode()


def test_a_long_sessions_replay_stays_recorded_and_a_body_past_the_bound_is_counted() -> None:
    long_session = _replay(16_000)  # several MB: a long coding agent's session replayed whole
    assert 4_000_000 < len(long_session) < 16 * 1024 * 1024
    received: list[Request] = []
    with RawUpstream(_answering(received)) as upstream:
        with proxied(upstream.base_url) as through:
            assert _post(through, long_session).startswith(b"HTTP/1.1 200 ")
            through.proxy.settle()
            recorded = [dict(s.attributes or {})["openai_responses.input.item_count"] for s in through.spans()]
            assert (recorded, _counted(through)) == ([16_000], ({}, {}))
        with proxied(upstream.base_url, max_analysed_bytes=1_000_000) as through:  # a bound under it
            assert _post(through, long_session).startswith(b"HTTP/1.1 200 ")
            through.proxy.settle()
            assert (through.spans(), _counted(through)) == ([], ({"too_large": 1}, {"too_large": 1}))
        with proxied(upstream.base_url, {"strict": True}, max_analysed_bytes=1_000_000) as through:
            assert _post(through, long_session).startswith(b"HTTP/1.1 200 ")  # strict mode waits for its verdict
            through.proxy.settle()
            assert (len(through.spans()), _counted(through)) == (1, ({}, {}))
    assert len(received) == 3


# -- a rejected --upstream ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "http://user:SECRET@127.0.0.1:99999/v1",
            "--upstream is not a URL (its host or port cannot be read): http://***@127.0.0.1:99999/v1",
        ),
        ("ftp://user:SECRET@127.0.0.1/v1", "--upstream must be an http(s) URL, got ftp://***@127.0.0.1/v1"),
        ("http://[::1:SECRET]/v1", "--upstream is not a URL (its host or port cannot be read): http://***/v1"),
        ("user:SECRET@example.com", "--upstream must be an http(s) URL, got ***"),
        (
            "ftp://example.com/v1?key=SECRET#SECRET",
            "--upstream must be an http(s) URL, got ftp://example.com/v1?***#***",
        ),
        ("http://user:SECRET@127.0.0.1:8080/v1", "--upstream must not carry credentials: clients send their own keys"),
    ],
    ids=["bad-port", "ftp", "bad-ipv6", "no-scheme", "query", "credentials"],
)
def test_a_rejected_upstream_is_never_echoed_with_its_secret(url: str, said: str) -> None:
    with pytest.raises(ProxySettingsError) as rejected:
        upstream_of(url)
    assert str(rejected.value) == said
    assert "SECRET" not in str(rejected.value)


# -- order across the split ------------------------------------------------------------------------------------------


def test_turns_sent_back_to_back_are_recorded_in_order_each_after_its_parents_entry() -> None:
    """The analysis runs apart from the relay, fed in the order the relay sent: each turn's end is handed over
    before the client's next turn is read, so every turn finds its parent in the ledger (its turn number, its
    signal) however fast the client sends it."""
    from otel_responses.emulator import Emulator

    with Emulator() as emulator, proxied(emulator.base_url) as through, through.client() as client:
        previous = client.responses.create(model="gpt-5.4", instructions="Be brief.", input="The marker is O-1.")
        for _ in range(19):
            previous = client.responses.create(model="gpt-5.4", input="And?", previous_response_id=previous.id)
        through.proxy.settle()
        attributes = [dict(s.attributes or {}) for s in through.spans()]
    assert [a["openai_responses.turn"] for a in attributes] == list(range(1, 21))
    assert [a["openai_responses.signals"] for a in attributes] == [(), *[("instructions_dropped",)] * 19]
