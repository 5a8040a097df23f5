"""Hostile peers for the adversarial suite (tests/sameness/test_adversarial.py), all on 127.0.0.1 only.

- ``LoopbackAPI``: a real HTTP server the real ``openai`` client talks to over a socket. Every request it gets is
  recorded (method, path, body bytes, headers); each answer comes from a script (a function of the request and
  its index), so runs are deterministic and two runs can be compared byte for byte. Answers may be delayed,
  streamed chunk by chunk, cut (the connection closed mid-body) or lie about their length.
- ``FakeRedis``: a TCP server that speaks garbage RESP, hangs, or closes connections.
- ``Hostile*``: inputs whose dunder methods raise, one-shot iterables, str subclasses that refuse to be used.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from .servers import QuietHTTPServer

# -- a scripted API on a loopback socket -------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    body: bytes
    headers: tuple[tuple[str, str], ...]

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    """What the server answers. ``body`` bytes are sent with a Content-Length; a list of chunks is sent chunked
    (``chunk_delay`` between chunks), and ``cut`` closes the connection after them without the final chunk.
    ``length`` overrides the Content-Length (a body shorter than announced, then the connection closes)."""

    status: int = 200
    body: bytes | list[bytes] = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    cut: bool = False
    length: int | None = None


Script = Callable[[Received, int], Reply]


def json_reply(payload: Any, status: int = 200, **headers: str) -> Reply:
    return Reply(
        status,
        json.dumps(payload).encode(),
        {"content-type": "application/json", "x-request-id": "req_loopback", **headers},
    )


def sse_chunks(events: list[Any]) -> list[bytes]:
    """One SSE message per event: dicts are JSON-encoded, bytes are sent as they are (garbage on purpose)."""
    chunks = []
    for event in events:
        if isinstance(event, bytes):
            chunks.append(event)
        else:
            kind = event.get("type") if isinstance(event, dict) and isinstance(event.get("type"), str) else None
            head = f"event: {kind}\n" if kind else ""
            chunks.append(f"{head}data: {json.dumps(event)}\n\n".encode())
    return chunks


def sse_reply(events: list[Any], cut: bool = False, chunk_delay: float = 0.0) -> Reply:
    return Reply(
        200,
        sse_chunks(events),
        {"content-type": "text/event-stream", "x-request-id": "req_loopback_sse"},
        chunk_delay=chunk_delay,
        cut=cut,
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        received = Received(self.command, self.path, body, tuple((k.lower(), v) for k, v in self.headers.items()))
        api = self.server.api
        with api.lock:
            index = len(api.received)
            api.received.append(received)
        try:
            reply = api.script(received, index)
        except Exception as exc:  # a broken script must show in the test, not hang the client
            reply = json_reply({"error": {"message": f"script failed: {exc!r}", "type": "test", "code": None}}, 599)
        if reply.delay:
            time.sleep(reply.delay)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if isinstance(reply.body, bytes):
            self.send_header("content-length", str(reply.length if reply.length is not None else len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
            if reply.length is not None and reply.length != len(reply.body):
                self._drop()
            return
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for chunk in reply.body:
            if reply.chunk_delay:
                time.sleep(reply.chunk_delay)
            if chunk:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
        if reply.cut:
            self._drop()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    do_GET = do_POST = do_DELETE = _serve  # the stdlib's names


class _Server(QuietHTTPServer):
    api: LoopbackAPI


class LoopbackAPI:
    """A scripted HTTP API on 127.0.0.1; ``received`` lists every request in arrival order."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.005}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def reset(self) -> None:
        with self.lock:
            self.received = []

    def __enter__(self) -> LoopbackAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


# -- a Redis that is not one -------------------------------------------------------------------------------------

# mode -> what is sent back for each chunk the client sends (None: nothing, ever)
FAKE_REDIS_REPLIES: dict[str, bytes | None] = {
    "garbage": b"\x00\xff\xfe not RESP at all \r\n",
    "error": b"-ERR forged failure\r\n",
    "wrong_type": b"+OK\r\n",
    "wrong_count": b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    "forged_entry": b"*1\r\n$15\r\nnot an entry!!!\r\n",
    "huge_bulk": b"*1\r\n$999999999\r\nabc",
    "negative_length": b"*-7\r\n",
    "hang": None,
}


class _FakeRedisHandler(socketserver.BaseRequestHandler):
    server: _FakeRedisServer

    def handle(self) -> None:
        fake = self.server.fake
        fake.connections += 1
        sock = self.request
        sock.settimeout(0.05)
        if fake.mode == "close":
            sock.close()
            return
        while not fake.stopping.is_set():
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            fake.chunks += 1
            answer = FAKE_REDIS_REPLIES[fake.mode]
            if answer is not None:
                try:
                    sock.sendall(answer)
                except OSError:
                    return


class _FakeRedisServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeRedis


class FakeRedis:
    """A TCP server on 127.0.0.1 that answers Redis clients with ``mode`` (see ``FAKE_REDIS_REPLIES``, or
    ``close``: every connection closed at once)."""

    def __init__(self, mode: str) -> None:
        if mode != "close" and mode not in FAKE_REDIS_REPLIES:
            raise ValueError(mode)
        self.mode = mode
        self.connections = 0  # proves the ledger really tried it
        self.chunks = 0  # what the client sent
        self.stopping = threading.Event()
        self._server = _FakeRedisServer(("127.0.0.1", 0), _FakeRedisHandler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.005}, daemon=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self._server.server_address[1]}/0"

    def __enter__(self) -> FakeRedis:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


# -- hostile inputs ----------------------------------------------------------------------------------------------


class Hostile(Exception):
    """Raised by the hostile inputs below; the app's own error."""


class OneShotList(list):  # type: ignore[type-arg]
    """A list whose iteration yields its items the first time only (a generator-backed list)."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.iterations = 0

    def __iter__(self) -> Iterator[Any]:
        self.iterations += 1
        if self.iterations > 1:
            return iter(())
        return super().__iter__()


class HeadersGetRaises(Mapping[str, str]):
    """Headers that work as the SDK reads them (iteration, ``[]``, ``items()``) but whose ``get`` raises."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: str, default: Any = None) -> Any:
        raise Hostile("headers.get refused")


class HeadersGetitemRaises(HeadersGetRaises):
    """``[]`` (and so the inherited ``get``) raises; iteration works."""

    def __getitem__(self, key: str) -> str:
        raise Hostile("headers[key] refused")

    def get(self, key: str, default: Any = None) -> Any:
        return Mapping.get(self, key, default)


class HeadersIterRaises(HeadersGetRaises):
    """Iteration raises; ``[]`` and ``get`` work."""

    def __iter__(self) -> Iterator[str]:
        raise Hostile("iterating headers refused")

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)


class RaisingGetattr:
    """An input item the SDK cannot serialise: every attribute lookup raises."""

    def __getattr__(self, name: str) -> Any:
        raise Hostile(f"no attribute {name} for you")


class RaisingDunders(dict):  # type: ignore[type-arg]
    """A dict item whose ``get``, ``__eq__`` and ``__hash__`` raise; ``items()`` and ``[]`` work (how the SDK
    serialises a mapping)."""

    def get(self, key: Any, default: Any = None) -> Any:
        raise Hostile("dict.get refused")

    def __eq__(self, other: object) -> bool:
        raise Hostile("== refused")

    def __hash__(self) -> int:  # type: ignore[override]  # a dict's hash is None: this one raises instead
        raise Hostile("hash refused")


class PrickleStr(str):
    """A str subclass whose methods (beyond what JSON encoding uses) raise."""

    __slots__ = ()

    def __hash__(self) -> int:
        raise Hostile("hash of a str refused")

    def __eq__(self, other: object) -> bool:
        raise Hostile("== of a str refused")

    def __format__(self, spec: str) -> str:
        raise Hostile("format of a str refused")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise Hostile("encode refused")

    def lower(self) -> str:
        raise Hostile("lower refused")

    def strip(self, *args: Any) -> str:
        raise Hostile("strip refused")

    def startswith(self, *args: Any) -> bool:
        raise Hostile("startswith refused")

    def split(self, *args: Any, **kwargs: Any) -> list[str]:
        raise Hostile("split refused")
