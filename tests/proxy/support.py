"""What the proxy's tests share: a proxy in this process (its own event loop thread, its own in-memory telemetry), a
scripted upstream that writes raw HTTP (so it can lie, stall or cut anywhere), and a raw client socket. Nothing here
is a test."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import openai

from otel_responses.proxy import ThreadedProxy
from otel_responses.testing import CapturedTelemetry

KEY = "proxy-tests-hash-key-0123456789abcdef"  # one hash key: instructions hashes compare across telemetries


@dataclass
class Proxied:
    """A running proxy and what it recorded."""

    proxy: ThreadedProxy
    captured: CapturedTelemetry

    @property
    def base_url(self) -> str:
        return self.proxy.base_url

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"

    def client(self, **kwargs: Any) -> openai.OpenAI:
        options: dict[str, Any] = {"base_url": self.base_url, "api_key": "proxy-test-key", "max_retries": 0}
        return openai.OpenAI(**{**options, **kwargs})

    def async_client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        options: dict[str, Any] = {"base_url": self.base_url, "api_key": "proxy-test-key", "max_retries": 0}
        return openai.AsyncOpenAI(**{**options, **kwargs})

    def spans(self) -> list[Any]:
        return self.captured.spans()

    def wait_for_spans(self, count: int, timeout: float = 10.0) -> list[Any]:
        """The proxy ends a span on its own thread: at least ``count`` of them, once they ended."""
        deadline = time.monotonic() + timeout
        while len(self.captured.spans()) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.captured.spans()


@contextlib.contextmanager
def proxied(upstream: str, options: dict[str, Any] | None = None, **settings: Any) -> Iterator[Proxied]:
    """A proxy to ``upstream`` on a free loopback port, recording into fresh in-memory providers; ``options``: the
    instrumentation's (``strict``, ``ledger_url``, ...); ``settings``: the proxy's own."""
    captured = CapturedTelemetry.new()
    options = {"hash_key": KEY, **(options or {}), **settings}
    with ThreadedProxy(
        upstream,
        tracer_provider=captured.tracer_provider,
        meter_provider=captured.meter_provider,
        logger_provider=captured.logger_provider,
        **options,
    ) as proxy:
        yield Proxied(proxy, captured)


# -- an upstream that writes raw HTTP ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request as the upstream read it: its head as sent and its body."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


class Connection:
    """The upstream's side of one connection, for a script to answer on."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(data)

    def cut(self) -> None:
        """Close at once (an RST when data is unread): a body cut where it stands."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


Script = Callable[[Request, Connection], bool]  # answers; True keeps the connection for the next request


def response(status: int, body: bytes = b"", headers: dict[str, str] | None = None, reason: str = "OK") -> bytes:
    """A whole HTTP/1.1 response with a Content-Length."""
    head = [f"HTTP/1.1 {status} {reason}"]
    for name, value in {"content-length": str(len(body)), **(headers or {})}.items():
        head.append(f"{name}: {value}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked_head(status: int = 200, headers: dict[str, str] | None = None) -> bytes:
    head = [f"HTTP/1.1 {status} OK", "transfer-encoding: chunked"]
    head += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


LAST_CHUNK = b"0\r\n\r\n"


@dataclass
class RawUpstream:
    """An HTTP/1.1 server on 127.0.0.1 whose answers a script writes byte by byte. ``received`` lists every request
    read, ``connections`` counts the connections accepted."""

    script: Script
    received: list[Request] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop accepting, then close. The accepting thread is woken (``shutdown`` ends a blocked ``accept``) and
        joined before the listener's descriptor is closed: closed first, its number could be reused by the next
        test's server while the thread was about to accept on it, and that test's connections would land here."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(30)
        reader = sock.makefile("rb")
        connection = Connection(sock)
        try:
            while True:
                request = _read_request(reader)
                if request is None:
                    return
                self.received.append(request)
                if not self.script(request, connection):
                    return
        except OSError:
            return
        finally:
            connection.cut()


def _read_request(reader: Any) -> Request | None:
    line = reader.readline()
    if not line:
        return None
    method, target, _ = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: list[tuple[str, str]] = []
    while True:
        line = reader.readline().decode("latin-1").rstrip("\r\n")
        if not line:
            break
        name, _, value = line.partition(":")
        headers.append((name, value.strip()))
    length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
    body = reader.read(length) if length else b""
    return Request(method, target, tuple(headers), body)


def raw_post(body: bytes, content_type: str = "application/json", extra: str = "") -> bytes:
    """A whole ``POST /v1/responses`` as a client writes it, closing the connection after its answer; ``extra``:
    more header lines (each ending in CRLF)."""
    head = f"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n{extra}"
    return f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body


def raw_exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` to 127.0.0.1:``port`` on a fresh connection and read until it closes or ``timeout`` passes
    (its requests say ``Connection: close``; a half-close would end the connection before any answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        parts = []
        with contextlib.suppress(OSError):
            while True:
                part = sock.recv(65536)
                if not part:
                    break
                parts.append(part)
        return b"".join(parts)
