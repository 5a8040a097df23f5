"""A minimal Chat Completions server on 127.0.0.1, for the providers litellm bridges to (no Responses API there).

Test support only (the project's emulator is the Responses API's): it answers from the messages it receives with the
support conversation's rules, so a lost piece of context shows in the answer:

- the last message is a `tool` result -> "Tool <name> returned <result>.";
- a function tool is offered and its name is in the last user message -> a tool call;
- a `?` in the last user message -> "marker=<M>; tool=<result>; code_word=unknown" from every message received;
- else "Noted marker <M>." (or "Noted.").
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

from ..servers import QuietHTTPServer

_MARKER = re.compile(r"marker is ([A-Za-z0-9-]+)", re.IGNORECASE)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for one request."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    tools = [t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    if last.get("role") == "tool":
        names = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or []]
        return {
            "role": "assistant",
            "content": f"Tool {names[-1] if names else 'tool'} returned {_text(last.get('content'))}.",
        }
    current = _text(last.get("content"))
    for name in tools:
        if name and name in current:
            call = {"id": f"call_{len(messages)}", "type": "function", "function": {"name": name, "arguments": "{}"}}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
    markers = [
        m[1] for msg in messages if msg.get("role") == "user" for m in _MARKER.finditer(_text(msg.get("content")))
    ]
    if "?" in current:
        results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
        marker, tool = markers[-1] if markers else "unknown", results[-1] if results else "unknown"
        return {"role": "assistant", "content": f"marker={marker}; tool={tool}; code_word=unknown"}
    return {"role": "assistant", "content": f"Noted marker {markers[-1]}." if markers else "Noted."}


class ChatStub:
    """Serves `POST /v1/chat/completions` from a daemon thread; use as a context manager. `requests` keeps each
    request body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                stub.requests.append(body)
                message = answer(body)
                reply = {
                    "id": f"chatcmpl-{len(stub.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChatStub:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
