"""The proxy forwards to its one upstream only: no part of a request chooses another destination — not its ``Host``,
an absolute URI on its request line, ``Forwarded`` or ``X-Forwarded-Host``, a path that looks like an authority,
nor ``CONNECT``, nor a redirect (of an HTTP answer or of a WebSocket handshake). A second server stands where each
request tries to go, and must never hear from the proxy. The upstream it is given is checked before it starts: plain
``http`` only to loopback unless allowed, no credentials in the URL."""

from __future__ import annotations

import base64
import os
import socket

import pytest

from otel_responses.proxy.settings import ProxySettings, ProxySettingsError, listen_of, upstream_of

from .support import Connection, RawUpstream, Request, proxied, raw_exchange, response


def _ok(request: Request, connection: Connection) -> bool:
    connection.send(response(200, b'{"object": "list", "data": []}', {"content-type": "application/json"}))
    return True


@pytest.mark.parametrize(
    "head",
    [
        "GET http://127.0.0.1:{evil}/v1/models HTTP/1.1\r\nHost: 127.0.0.1:{evil}\r\n",
        "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{evil}\r\n",
        "GET /v1/models HTTP/1.1\r\nHost: x\r\nForwarded: host=127.0.0.1:{evil};proto=http\r\n",
        "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Forwarded-Host: 127.0.0.1:{evil}\r\nX-Forwarded-Proto: http\r\n",
        "GET //127.0.0.1:{evil}/v1/models HTTP/1.1\r\nHost: x\r\n",
    ],
    ids=["absolute-uri", "host", "forwarded", "x-forwarded-host", "authority-like-path"],
)
def test_no_part_of_a_request_chooses_its_destination(head: str) -> None:
    with RawUpstream(_ok) as evil, RawUpstream(_ok) as upstream, proxied(upstream.base_url) as through:
        request = head.format(evil=evil.port) + "Connection: close\r\n\r\n"
        answer = raw_exchange(through.proxy.port, request.encode())
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert len(upstream.received) == 1
        assert upstream.received[0].target.endswith("/v1/models")
        assert upstream.received[0].header("host") == f"127.0.0.1:{upstream.port}"
        assert evil.received == []
        assert evil.connections == 0


def test_connect_is_refused_and_reaches_nobody() -> None:
    with RawUpstream(_ok) as evil, RawUpstream(_ok) as upstream, proxied(upstream.base_url) as through:
        request = f"CONNECT 127.0.0.1:{evil.port} HTTP/1.1\r\nHost: 127.0.0.1:{evil.port}\r\nConnection: close\r\n\r\n"
        answer = raw_exchange(through.proxy.port, request.encode())
        assert answer.startswith(b"HTTP/1.1 405 ")
        assert b'"type": "invalid_request_error"' in answer
        assert (evil.connections, upstream.connections) == (0, 0)


@pytest.mark.parametrize(
    ("url", "allow_http", "origin", "root"),
    [
        ("https://api.openai.com/v1", False, "https://api.openai.com", "/v1"),
        ("https://res.openai.azure.com/openai/v1/", False, "https://res.openai.azure.com", "/openai/v1"),
        ("http://127.0.0.1:8080/v1", False, "http://127.0.0.1:8080", "/v1"),
        ("http://[::1]:8080", False, "http://[::1]:8080", ""),
        ("http://localhost:9/v1", False, "http://localhost:9", "/v1"),
        ("http://gateway.internal/v1", True, "http://gateway.internal", "/v1"),
    ],
)
def test_an_upstream_is_an_https_origin_or_plain_http_where_allowed(
    url: str, allow_http: bool, origin: str, root: str
) -> None:
    upstream = upstream_of(url, allow_http)
    assert (upstream.origin, upstream.root) == (origin, root)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://gateway.internal/v1", "plain http"),  # the near miss of the last row above: not allowed
        ("http://10.0.0.8/v1", "plain http"),
        ("ftp://api.openai.com/v1", "http(s) URL"),
        ("https://user:pass@api.openai.com/v1", "credentials"),
        ("https://api.openai.com/v1?key=sk", "no query"),
        ("api.openai.com/v1", "http(s) URL"),
        ("https://api.openai.com:99999/v1", "not a URL"),
    ],
)
def test_an_upstream_it_will_not_use_is_refused_before_it_starts(url: str, said: str) -> None:
    with pytest.raises(ProxySettingsError, match=said.replace("(", r"\(").replace(")", r"\)")):
        upstream_of(url)


def test_it_listens_on_loopback_unless_told_otherwise() -> None:
    default = ProxySettings(upstream_of("https://api.openai.com/v1"))
    assert (default.host, default.port, default.loopback_only) == ("127.0.0.1", 8787, True)
    assert ProxySettings(default.upstream, *listen_of("[::1]:0")).loopback_only
    assert not ProxySettings(default.upstream, *listen_of("0.0.0.0:8787")).loopback_only
    for bad in ("8787", ":8787", "127.0.0.1:http", "127.0.0.1:70000"):
        with pytest.raises(ProxySettingsError, match="--listen"):
            listen_of(bad)


def _upgrade(path: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\napi-key: sk-SENTINEL\r\nOpenAI-Project: proj_x\r\n\r\n"
    ).encode()


@pytest.mark.parametrize(
    ("status", "location"),
    [
        (307, "http://127.0.0.1:{evil}/v1/responses"),
        (308, "http://127.0.0.1:{evil}/v1/responses"),
        (301, "http://127.0.0.1:{evil}/v1/responses"),
        (302, "//127.0.0.1:{evil}/v1/responses"),
        (307, "/v1/elsewhere"),  # the near miss: the same upstream, still not followed
    ],
)
def test_a_websocket_handshake_never_follows_a_redirect(status: int, location: str) -> None:
    where = location.format(evil="{evil}")

    def redirect(request: Request, connection: Connection) -> bool:
        connection.send(response(status, b"", {"location": where.format(evil=evil.port)}, "Redirect"))
        return False

    with RawUpstream(_ok) as evil, RawUpstream(redirect) as upstream, proxied(upstream.base_url) as through:
        with socket.create_connection(("127.0.0.1", through.proxy.port), timeout=10) as sock:
            sock.sendall(_upgrade("/v1/responses"))
            answer = b""
            while b"\r\n\r\n" not in answer and (part := sock.recv(65536)):
                answer += part
        head = answer.partition(b"\r\n\r\n")[0].decode().lower()
        assert head.startswith(f"http/1.1 {status} ")
        assert f"location: {where.format(evil=evil.port)}" in head.split("\r\n")
        assert [r.target for r in upstream.received] == ["/v1/responses"]
        assert upstream.received[0].header("api-key") == "sk-SENTINEL"  # the one upstream: forwarded as sent
        assert (evil.connections, evil.received) == (0, [])
