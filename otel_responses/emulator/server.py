"""HTTP transport: routing, JSON and error bodies, Server-Sent Events, request ids.

Standard library only. HTTP/1.1 with exact Content-Length (and chunked encoding for streams)
so the openai client's connection pool can keep connections alive.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from . import sse, websocket
from .config import EmulatorConfig
from .errors import ApiError, bad_request, not_found
from .recording import RecordedRequest, RequestLog
from .service import Service
from .state import Caller

Query = dict[str, list[str]]
Handler = Callable[[Service, "re.Match[str]", Query, Any, Caller], dict[str, Any]]


def _flat(query: Query) -> dict[str, str]:
    """Single-valued view of a query (last value wins)."""
    return {key: values[-1] for key, values in query.items() if values}


def _include(query: Query) -> list[str]:
    """`include` values, in either the `include[]=` (SDK) or the `include=` form."""
    return [*query.get("include[]", []), *query.get("include", [])]


def _redact(name: str, value: str) -> str:
    """Keep only the scheme of credentials, so the request log never holds an API key."""
    if name.lower() in ("authorization", "api-key", "openai-api-key"):
        return value.split(" ", 1)[0] + " <redacted>" if " " in value else "<redacted>"
    return value


def caller_of(headers: Iterable[tuple[str, str]], config: EmulatorConfig) -> Caller:
    """The organization and project a request's headers name (`OpenAI-Organization`, `OpenAI-Project`); when it names
    no organization, its key's (`EmulatorConfig.key_organizations`, else `EmulatorConfig.organization`)."""
    lowered = {key.lower(): value for key, value in headers}
    key = lowered.get("authorization", "").removeprefix("Bearer ")
    organization = lowered.get("openai-organization") or config.key_organizations.get(key) or config.organization
    return Caller(organization, lowered.get("openai-project") or None)


def _body(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad_request("Expected a JSON object as the request body.")
    return body


_RETRIEVE = re.compile(r"/v1/responses/([^/]+)")
# Azure OpenAI's shapes of the same API: the v1 API (`/openai/v1/...`), the dated one (`/openai/...?api-version=`)
# and a deployment's (`/openai/deployments/<name>/...`). They reach the same routes as `/v1/...`.
_AZURE_PATH = re.compile(r"/openai(?:/deployments/[^/]+)?(?:/v1)?(/.*)?")


def _route_path(path: str) -> str:
    """The `/v1/...` route of a request path (Azure-shaped paths included)."""
    azure = _AZURE_PATH.fullmatch(path)
    return "/v1" + (azure[1] or "") if azure else path


ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
    ("POST", re.compile(r"/v1/responses"), lambda s, m, q, b, c: s.create_response(_body(b), caller=c)),
    ("POST", re.compile(r"/v1/responses/compact"), lambda s, m, q, b, c: s.compact_response(_body(b), c)),
    ("POST", re.compile(r"/v1/responses/input_tokens"), lambda s, m, q, b, c: s.count_input_tokens(_body(b), c)),
    ("POST", re.compile(r"/v1/responses/([^/]+)/cancel"), lambda s, m, q, b, c: s.cancel_response(m[1])),
    ("GET", re.compile(r"/v1/responses/([^/]+)"), lambda s, m, q, b, c: s.retrieve_response(m[1], _include(q))),
    ("DELETE", re.compile(r"/v1/responses/([^/]+)"), lambda s, m, q, b, c: s.delete_response(m[1])),
    (
        "GET",
        re.compile(r"/v1/responses/([^/]+)/input_items"),
        lambda s, m, q, b, c: s.list_input_items(m[1], _flat(q), _include(q)),
    ),
    ("POST", re.compile(r"/v1/conversations"), lambda s, m, q, b, c: s.create_conversation(_body(b or {}))),
    ("GET", re.compile(r"/v1/conversations/([^/]+)"), lambda s, m, q, b, c: s.retrieve_conversation(m[1])),
    ("POST", re.compile(r"/v1/conversations/([^/]+)"), lambda s, m, q, b, c: s.update_conversation(m[1], _body(b))),
    ("DELETE", re.compile(r"/v1/conversations/([^/]+)"), lambda s, m, q, b, c: s.delete_conversation(m[1])),
    (
        "GET",
        re.compile(r"/v1/conversations/([^/]+)/items"),
        lambda s, m, q, b, c: s.list_conversation_items(m[1], _flat(q), _include(q)),
    ),
    (
        "POST",
        re.compile(r"/v1/conversations/([^/]+)/items"),
        lambda s, m, q, b, c: s.add_conversation_items(m[1], _body(b), _include(q)),
    ),
    (
        "GET",
        re.compile(r"/v1/conversations/([^/]+)/items/([^/]+)"),
        lambda s, m, q, b, c: s.retrieve_conversation_item(m[1], m[2], _include(q)),
    ),
    (
        "DELETE",
        re.compile(r"/v1/conversations/([^/]+)/items/([^/]+)"),
        lambda s, m, q, b, c: s.delete_conversation_item(m[1], m[2]),
    ),
]


class EmulatorHTTPServer(ThreadingHTTPServer):
    """A threaded loopback server that owns the service, the request log and the request-id sequence."""

    daemon_threads = True
    # Many clients connect at once in load tests; the default backlog of 5 resets connections.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], service: Service, log: RequestLog, *, verbose: bool = False) -> None:
        self.service = service
        self.log = log
        self.verbose = verbose
        self._connections_lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without `HTTPServer`'s reverse-DNS lookup of the host, which can stall for seconds."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that resets or abandons its connection is routine (a timeout, a test that ends, Ctrl-C): say
        nothing. Any other error in a handler is still reported with its traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)

    def next_request_id(self) -> str:
        """`req_<hex>`, deterministic in the order requests arrive (restarted by `reset`)."""
        return self.service.ids.new("req")

    def track(self, connection: socket.socket, open_: bool) -> None:
        """Remember open client connections so `close_connections` can end idle keep-alives."""
        with self._connections_lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def close_connections(self) -> None:
        """Shut down every open connection, unblocking handler threads waiting on keep-alive."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """Routes one request to the service and writes JSON, SSE or an API error."""

    protocol_version = "HTTP/1.1"
    server_version = "otel-responses-emulator"
    timeout = 120.0
    disable_nagle_algorithm = True  # headers and body are separate writes; avoid 40 ms delayed-ACK stalls

    def setup(self) -> None:
        super().setup()
        self._emulator().track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._emulator().track(self.connection, False)

    def _emulator(self) -> EmulatorHTTPServer:
        assert isinstance(self.server, EmulatorHTTPServer)
        return self.server

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def log_message(self, format: str, *args: Any) -> None:
        if self._emulator().verbose:
            sys.stderr.write(f"emulator: {format % args}\n")

    def _read_raw_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self) -> None:
        server = self._emulator()
        request_id = server.next_request_id()
        split = urlsplit(self.path)
        sent_path = unquote(split.path).rstrip("/") or "/"
        path = _route_path(sent_path)
        query = parse_qs(split.query)
        if self.command == "GET" and path == "/v1/responses" and self._wants_websocket():
            self._serve_websocket(request_id, path, query)
            return
        raw = self._read_raw_body()
        body: Any = None
        invalid_json = False
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError:
                invalid_json = True
        headers = {key.lower(): _redact(key, value) for key, value in self.headers.items()}
        server.log.append(RecordedRequest(self.command, sent_path, body, query, headers))
        try:
            self._authorize(server.service.config.api_key)
            if invalid_json:
                raise bad_request("We could not parse the JSON body of your request.")
            caller = caller_of(self.headers.items(), server.service.config)
            result = self._route(server.service, path, query, body, caller)
            streaming = isinstance(body, dict) and body.get("stream") is True
            resuming = self.command == "GET" and _RETRIEVE.fullmatch(path) and _flat(query).get("stream") == "true"
            if self.command == "POST" and path == "/v1/responses" and streaming:
                self._send_stream(request_id, result, sse.fault(body))
            elif resuming:  # retrieve with `stream=true`: replay the events, after `starting_after` if given
                after = _flat(query).get("starting_after", "")
                self._send_stream(request_id, result, None, int(after) if after.isdigit() else -1)
            else:
                self._send_json(200, result, request_id)
        except ApiError as error:
            self._send_json(error.status, error.body(), request_id)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away mid-answer (e.g. closed a stream early)
        except Exception as error:  # an emulator bug must still answer in the API's shape
            failure = ApiError(500, f"The emulator failed: {error!r}", type_="server_error")
            self._send_json(500, failure.body(), request_id)

    def _wants_websocket(self) -> bool:
        return "websocket" in self.headers.get("Upgrade", "").lower()

    def _serve_websocket(self, request_id: str, path: str, query: Query) -> None:
        """WebSocket mode: this connection leaves HTTP for good (see `websocket`)."""
        server = self._emulator()
        headers = {key.lower(): _redact(key, value) for key, value in self.headers.items()}
        server.log.append(RecordedRequest(self.command, path, None, query, headers))
        self.close_connection = True
        if not websocket.available():
            failure = ApiError(501, websocket.MISSING_LIBRARY, type_="server_error", code="websocket_unavailable")
            self._send_json(501, failure.body(), request_id)
            return
        handshake = f"{self.requestline}\r\n".encode("latin-1", errors="replace") + b"".join(
            f"{key}: {value}\r\n".encode("latin-1", errors="replace") for key, value in self.headers.items()
        )
        self.connection.settimeout(None)  # idle sockets are normal here; `stop()` shuts them down

        def read() -> bytes:
            try:
                return self.rfile.read1(65536)
            except OSError:
                return b""

        def record(event: Any) -> None:
            server.log.append(RecordedRequest("WEBSOCKET", path, event, query, headers))

        session = websocket.Session(server.service, caller_of(self.headers.items(), server.service.config))
        websocket.serve(self.connection, read, handshake + b"\r\n", session, request_id, record)

    def _authorize(self, expected: str | None) -> None:
        """The API's 401 for a key other than the configured one (no check when none is configured)."""
        if expected is not None and self.headers.get("Authorization", "") != f"Bearer {expected}":
            raise ApiError(401, "Incorrect API key provided.", code="invalid_api_key")

    def _route(self, service: Service, path: str, query: Query, body: Any, caller: Caller) -> dict[str, Any]:
        for method, pattern, handler in ROUTES:
            match = pattern.fullmatch(path)
            if match and method == self.command:
                return handler(service, match, query, body, caller)
        raise not_found(f"Invalid URL ({self.command} {path})")

    def _send_json(self, status: int, payload: dict[str, Any], request_id: str) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", request_id)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_stream(
        self, request_id: str, response: dict[str, Any], fault: str | None = None, starting_after: int = -1
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", request_id)
        self.end_headers()
        for name, data in sse.events(response, fault, self._emulator().service.reseal):
            if data["sequence_number"] <= starting_after:
                continue
            frame = sse.encode(name, data)
            self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
