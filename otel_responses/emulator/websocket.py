"""WebSocket mode of the Responses API (`client.responses.connect()`), served from the HTTP server's own port.

A `GET /v1/responses` carrying `Upgrade: websocket` is handed here with its socket. The framing is the
`websockets` library's Sans-I/O `ServerProtocol` (an optional dependency: without it the upgrade is
answered 501); this module only moves bytes between it and the socket and speaks the API:

- the client sends `response.create` events (the create body plus `type`, optionally `stream_id`) and
  gets back the same events as an SSE stream, one JSON text frame each, ending with
  `response.completed` (or `.incomplete` / `.failed`); one response at a time per connection;
- errors come back as an `error` event `{"type": "error", "status": N, "error": {type, code, message,
  param}}`, the connection stays open;
- `generate: false` is a warm-up: the request state is prepared and the model is not run, a completed
  response with no output comes back, and later turns continue it with `previous_response_id`;
- the connection remembers its most recent response (even a `store: false` one) so it can be
  continued with `previous_response_id`; any other parent must be stored, as over HTTP; an error
  evicts the remembered response;
- `response.steer` is answered `response.steer.failed`: emulated responses finish before the next
  client event is read, so there is never an active response to steer.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import sse
from .errors import ApiError, bad_request
from .service import Service
from .state import Caller, ConnectionCache

if TYPE_CHECKING:
    from websockets.server import ServerProtocol

MISSING_LIBRARY = (
    "WebSocket mode needs the optional 'websockets' package (pip install 'websockets>=13,<16') "
    "in the emulator's environment."
)
_CREATE_DROPPED = ("type", "stream", "stream_id", "stream_options", "generate")

Events = list[dict[str, Any]]


def available() -> bool:
    """Whether the optional `websockets` library can be imported."""
    try:
        import websockets.server  # noqa: F401
    except ImportError:
        return False
    return True


def error_event(error: ApiError, stream_id: str | None = None) -> dict[str, Any]:
    """The `error` event WebSocket mode sends instead of an HTTP error status."""
    event: dict[str, Any] = {"type": "error", "status": error.status, "error": error.body()["error"]}
    if stream_id is not None:
        event["stream_id"] = stream_id
    return event


class Session:
    """The API side of one WebSocket connection: client events in, server events out (no I/O)."""

    def __init__(self, service: Service, caller: Caller | None = None) -> None:
        self.service = service
        self.cache = ConnectionCache()
        self.caller = caller  # the organization and project the upgrade request's headers name

    def handle(self, text: str) -> Events:
        """The server events answering one client event (a text message)."""
        try:
            event = json.loads(text)
        except ValueError:
            return [error_event(bad_request("We could not parse the JSON body of your request."))]
        if not isinstance(event, dict):
            return [error_event(bad_request("Expected a JSON object as the event."))]
        stream_id = event.get("stream_id") if isinstance(event.get("stream_id"), str) else None
        try:
            if event.get("type") == "response.create":
                return self._create(event, stream_id)
            if event.get("type") == "response.steer":
                return [self._steer_failed(event)]
            raise bad_request(
                f"Invalid value: '{event.get('type')}'. Supported values are: 'response.create' and 'response.steer'.",
                param="type",
                code="invalid_value",
            )
        except ApiError as error:
            self.cache.forget()
            return [error_event(error, stream_id)]
        except Exception as error:  # an emulator bug must still answer in the API's shape
            self.cache.forget()
            return [error_event(ApiError(500, f"The emulator failed: {error!r}", type_="server_error"), stream_id)]

    def _create(self, event: dict[str, Any], stream_id: str | None) -> Events:
        if event.get("background") is True:
            raise bad_request("Background mode is not supported over WebSocket.", param="background")
        generate = event.get("generate")
        if generate is not None and not isinstance(generate, bool):
            raise bad_request("Invalid type for 'generate': expected a boolean.", param="generate")
        body = {key: value for key, value in event.items() if key not in _CREATE_DROPPED}
        response = self.service.create_response(body, self.cache, generate=generate is not False, caller=self.caller)
        extra = {"stream_id": stream_id} if stream_id is not None else {}
        return [{**data, **extra} for _, data in sse.events(response, reseal=self.service.reseal)]

    def _steer_failed(self, event: dict[str, Any]) -> dict[str, Any]:
        previous = event.get("previous_response_id")
        finished = isinstance(previous, str) and previous == self.cache.last_id
        code = "response_already_completed" if finished else "response_not_found"
        message = (
            "The response completed and is no longer accepting steering input."
            if finished
            else "The target response is not available on this connection."
        )
        return {
            "type": "response.steer.failed",
            "sequence_number": 0,
            "error": {"code": code, "message": message, "type": "invalid_request_error"},
            "steer": {"input": event.get("input"), "previous_response_id": previous},
        }


def serve(
    sock: socket.socket,
    read: Callable[[], bytes],
    handshake: bytes,
    session: Session,
    request_id: str,
    on_message: Callable[[Any], None],
) -> None:
    """Speak WebSocket on `sock` until it closes: `handshake` is the upgrade request's raw bytes (already
    read from the socket), `read` returns the next bytes from the client (b"" at EOF), `on_message` sees
    every parsed client event (for the request log)."""
    from websockets.frames import Frame, Opcode
    from websockets.http11 import Request
    from websockets.protocol import State
    from websockets.server import ServerProtocol

    protocol = ServerProtocol(max_size=None)
    protocol.receive_data(handshake)
    requests = [event for event in protocol.events_received() if isinstance(event, Request)]
    if not requests:
        _flush(sock, protocol)
        return
    response = protocol.accept(requests[0])
    response.headers["x-request-id"] = request_id
    protocol.send_response(response)
    if not _flush(sock, protocol) or response.status_code != 101:
        return
    fragments: list[bytes] = []
    while protocol.state is not State.CLOSED:
        data = read()
        if data:
            protocol.receive_data(data)
        else:
            protocol.receive_eof()
        for frame in protocol.events_received():
            if not isinstance(frame, Frame) or frame.opcode not in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                continue  # pings are answered and closes completed by the protocol itself
            fragments.append(bytes(frame.data))
            if not frame.fin:
                continue
            text = b"".join(fragments).decode("utf-8", errors="replace")
            fragments.clear()
            with contextlib.suppress(ValueError):
                on_message(json.loads(text))
            for event in session.handle(text):
                protocol.send_text(json.dumps(event, separators=(",", ":")).encode())
        if not _flush(sock, protocol) or not data:
            break


def _flush(sock: socket.socket, protocol: ServerProtocol) -> bool:
    """Write what the protocol has queued; False once the connection is (half-)closed or gone."""
    try:
        for chunk in protocol.data_to_send():
            if chunk:
                sock.sendall(chunk)
            else:  # SEND_EOF: half-close, then let the client finish closing
                sock.shutdown(socket.SHUT_WR)
    except OSError:
        return False
    return True
