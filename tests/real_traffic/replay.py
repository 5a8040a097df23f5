"""Replay recorded Responses API traffic through the real ``openai`` client.

A loopback HTTP server (stdlib ``http.server`` on 127.0.0.1, a free port) answers each request with the next
recorded response, in recorded order; the client is ``openai.OpenAI(base_url=..., api_key="replay",
max_retries=0)``, so it works whatever HTTP library the installed SDK uses (``httpx2`` for 3.x, ``httpx`` for
1.x). Each recorded request is made as the SDK call an app would make (``responses.create`` and so on), so the
instrumentation's wrappers see it.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import openai

from ..servers import QuietHTTPServer

CASSETTES = Path(__file__).parent / "cassettes"


def load(path: Path) -> Any:
    return json.loads(path.read_text())


# -- the server ---------------------------------------------------------------------------------------------


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, str]
    body: Any


class RecordedServer:
    """Serves ``calls`` in order; a request that does not match the next recorded one (method and path) is
    answered with a 418 and noted in ``mismatches``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.index = 0
        self.received: list[Received] = []
        self.mismatches: list[str] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                owner.serve(self)

            do_GET = do_POST = do_DELETE = do_PATCH = _serve

        self._httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def load(self, calls: list[dict[str, Any]]) -> None:
        """Serve these recorded calls next, from the first."""
        with self._lock:
            self.calls, self.index, self.received, self.mismatches = calls, 0, [], []

    def __enter__(self) -> RecordedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        url = urlsplit(handler.path)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with self._lock:
            index = self.index
            self.index += 1
            self.received.append(Received(handler.command, url.path, dict(parse_qsl(url.query)), body))
            call = self.calls[index] if index < len(self.calls) else None
            if call is None or (call["method"], call["path"]) != (handler.command, url.path):
                want = "nothing" if call is None else f"{call['method']} {call['path']}"
                self.mismatches.append(f"request {index + 1}: got {handler.command} {url.path}, recorded {want}")
                self._send(handler, 418, "application/json", b'{"error": {"message": "not recorded"}}', None)
                return
        headers = call["response_headers"]
        if "response_sse" in call:
            payload = call["response_sse"].encode("utf-8")
            content_type = headers.get("content-type", "text/event-stream")
        else:
            payload = b"" if call["response_body"] is None else json.dumps(call["response_body"]).encode("utf-8")
            content_type = headers.get("content-type", "application/json")
        self._send(handler, call["status"], content_type, payload, headers.get("x-request-id"))

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, content_type: str, payload: bytes, request_id: str | None
    ) -> None:
        handler.send_response(status)
        handler.send_header("content-type", content_type)
        handler.send_header("content-length", str(len(payload)))
        if request_id:
            handler.send_header("x-request-id", request_id)
        handler.end_headers()
        handler.wfile.write(payload)


# -- the app's calls ----------------------------------------------------------------------------------------


class Unsupported(Exception):
    """The installed SDK has no method for this recorded request (e.g. ``compact`` before 2.9.0)."""


def _method(client: openai.OpenAI, dotted: str) -> Callable[..., Any]:
    target: Any = client
    for part in dotted.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise Unsupported(f"client.{dotted}")
    return target  # type: ignore[no-any-return]


def _kwargs(method: Callable[..., Any], body: dict[str, Any] | None) -> dict[str, Any]:
    """Body keys the method's signature names are passed as they are; the others through ``extra_body``."""
    known = set(inspect.signature(method).parameters)
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in (body or {}).items():
        (kwargs if key in known else extra)[key] = value
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _query(method: Callable[..., Any], query: dict[str, str]) -> dict[str, Any]:
    known = set(inspect.signature(method).parameters)
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in query.items():
        typed: Any = value
        if key == "stream":
            typed = value == "true"
        elif key in ("starting_after", "limit"):
            typed = int(value)
        elif key == "include[]" or key == "include":
            key, typed = "include", [value]
        (kwargs if key in known else extra)[key] = typed
    if extra:
        kwargs["extra_query"] = extra
    return kwargs


def sdk_call(client: openai.OpenAI, call: dict[str, Any]) -> tuple[str, Callable[[], Any]]:
    """(kind, thunk): the SDK call an app makes for this recorded request; the thunk returns the result."""
    method, path, body, query = call["method"], call["path"], call["request_body"], call["query"]
    parts = path.strip("/").split("/")[1:]  # after "v1"
    if parts[0] == "responses":
        if len(parts) == 1 and method == "POST":
            create = _method(client, "responses.create")
            return "create", lambda: create(**_kwargs(create, body))
        if parts[1:] == ["compact"]:
            compact = _method(client, "responses.compact")
            return "compact", lambda: compact(**_kwargs(compact, body))
        if parts[1:] == ["input_tokens"]:
            count = _method(client, "responses.input_tokens.count")
            return "input_tokens", lambda: count(**_kwargs(count, body))
        response_id = parts[1]
        if len(parts) == 2 and method == "GET":
            retrieve = _method(client, "responses.retrieve")
            return "retrieve", lambda: retrieve(response_id, **_query(retrieve, query))
        if len(parts) == 2 and method == "DELETE":
            delete = _method(client, "responses.delete")
            return "delete", lambda: delete(response_id)
        if parts[2:] == ["cancel"]:
            cancel = _method(client, "responses.cancel")
            return "cancel", lambda: cancel(response_id)
        if parts[2:] == ["input_items"]:
            listing = _method(client, "responses.input_items.list")
            return "input_items", lambda: listing(response_id, **_query(listing, query))
    if parts[0] == "conversations":
        if len(parts) == 1:
            create = _method(client, "conversations.create")
            return "conversation_create", lambda: create(**_kwargs(create, body))
        conversation_id = parts[1]
        if len(parts) == 2:
            name = {"GET": "retrieve", "POST": "update", "DELETE": "delete"}[method]
            verb = _method(client, f"conversations.{name}")
            if name == "update":
                return "conversation_update", lambda: verb(conversation_id, **_kwargs(verb, body))
            return f"conversation_{name}", lambda: verb(conversation_id)
        if parts[2] == "items" and len(parts) == 3:
            if method == "GET":
                listing = _method(client, "conversations.items.list")
                return "conversation_items", lambda: listing(conversation_id, **_query(listing, query))
            create = _method(client, "conversations.items.create")
            return "conversation_items_create", lambda: create(conversation_id, **_kwargs(create, body))
        if parts[2] == "items" and len(parts) == 4:
            name = {"GET": "retrieve", "DELETE": "delete"}[method]
            verb = _method(client, f"conversations.items.{name}")
            return f"conversation_item_{name}", lambda: verb(parts[3], conversation_id=conversation_id)
    raise Unsupported(f"{method} {path}")


def _seen(result: Any) -> Any:
    """What the app sees of a result: ``model_dump()`` of a model, each event of a stream, the page's items."""
    if isinstance(result, (openai.Stream,)):
        return {"stream": [event.model_dump(warnings=False) for event in result]}
    data = getattr(result, "data", None)
    if isinstance(data, list) and hasattr(result, "has_more"):  # a cursor page: this page only (no new request)
        return {"page": [item.model_dump(warnings=False) for item in data], "has_more": result.has_more}
    if hasattr(result, "model_dump"):
        return {"type": type(result).__name__, "result": result.model_dump(warnings=False)}
    return {"value": result}


@dataclass
class CallOutcome:
    kind: str
    seen: Any
    spans: list[Any] = field(default_factory=list)


@dataclass
class Replay:
    outcomes: list[CallOutcome]
    received: list[Received]
    mismatches: list[str]


def calls_needed(cassette: dict[str, Any]) -> list[str]:
    """The SDK methods this cassette needs that the installed SDK lacks (empty when it can be replayed)."""
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="replay", max_retries=0)
    missing = []
    try:
        for call in cassette["calls"]:
            try:
                sdk_call(client, call)
            except Unsupported as exc:
                missing.append(str(exc))
    finally:
        client.close()
    return missing


class Replayer:
    """One recorded-answer server and one client for it (a client costs ~40 ms to build: its TLS context), for
    any number of cassettes replayed one after the other."""

    def __init__(self) -> None:
        self.server = RecordedServer().__enter__()
        self.client = openai.OpenAI(base_url=self.server.base_url, api_key="replay", max_retries=0)

    def close(self) -> None:
        self.client.close()
        self.server.__exit__(None, None, None)

    def replay(self, cassette: dict[str, Any], spans_since: Callable[[], list[Any]] | None = None) -> Replay:
        """Make every recorded call, in order, against the server serving the recorded answers.

        ``spans_since``, when given, is called after each call and returns the spans finished during it."""
        outcomes: list[CallOutcome] = []
        self.server.load(cassette["calls"])
        for call in cassette["calls"]:
            kind, thunk = sdk_call(self.client, call)
            if call["method"] == "POST" and (call["request_body"] or {}).get("stream") is True:
                kind += "/stream"
            if call["query"].get("stream") == "true":
                kind += "/stream"
            try:
                seen = _seen(thunk())
            except openai.APIStatusError as exc:
                seen = {"error": type(exc).__name__, "status": exc.status_code, "body": exc.body}
            outcomes.append(CallOutcome(kind, seen, spans_since() if spans_since else []))
        return Replay(outcomes, list(self.server.received), list(self.server.mismatches))


def all_cassettes() -> Iterator[Path]:
    yield from sorted(CASSETTES.rglob("*.json"))
