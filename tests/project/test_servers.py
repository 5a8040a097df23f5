"""The tests' HTTP servers say nothing when a client goes away mid-answer (a passing run prints no broken-pipe
traceback), still report any other handler error, and are the only kind of HTTP server the tests stand up."""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..servers import QuietHTTPServer

TESTS = Path(__file__).parents[1]


class _Slow(BaseHTTPRequestHandler):
    """Answers with a body far larger than a socket buffer, in pieces, or fails on a path of its own."""

    done: ClassVar[threading.Event]

    def do_GET(self) -> None:
        try:
            if self.path == "/mistake":
                raise RuntimeError("a handler's own mistake")
            self.send_response(200)
            self.send_header("Content-Length", str(64 * 2**20))
            self.end_headers()
            for _ in range(1024):
                self.wfile.write(b"x" * 2**16)
                time.sleep(0.001)
        finally:
            _Slow.done.set()

    def log_message(self, *args: Any) -> None:
        pass


def _ask(port: int, path: str, reset: bool) -> None:
    """Send a request; with ``reset``, go away at once (a reset, as a client that timed out or ended does)."""
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        if reset:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            client.recv(1)


@pytest.mark.parametrize(("path", "said"), [("/", False), ("/mistake", True)], ids=["client gone", "handler error"])
def test_a_client_gone_mid_answer_is_said_nothing_of_and_a_handler_error_is(
    path: str, said: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    _Slow.done = threading.Event()
    server = QuietHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        _ask(server.server_address[1], path, reset=not said)
        assert _Slow.done.wait(30)
        time.sleep(0.05)  # handle_error runs after the handler returns
    finally:
        server.shutdown()
        server.server_close()
    err = capfd.readouterr().err
    if said:
        assert "Exception occurred during processing of request from" in err
        assert "RuntimeError: a handler's own mistake" in err
    else:
        assert err == ""


def test_every_http_server_of_the_tests_is_a_quiet_one() -> None:
    """A server class of its own would print the traceback again: the tests build theirs from ``servers``."""
    found = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("*.py"))
        if path.name not in ("servers.py", "test_servers.py")
        and re.search(r"\b(?:Threading)?HTTPServer\b", path.read_text(encoding="utf-8"))
    ]
    assert found == []
