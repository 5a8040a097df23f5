"""The HTTP servers tests stand up on 127.0.0.1 (a scripted API, a recorded one, a collector, a chat stub): handler
threads that never hold the process up, and quiet about a client that goes away mid-answer, as the emulator is.

A client that resets or abandons its connection (it timed out, closed a stream early, or its test ended) makes the
handler's write fail with a broken pipe; ``socketserver`` would print that traceback on standard error, where it
lands after a passing run's summary and reads as a failure. Any other error in a handler keeps its traceback.
Every HTTP server of the tests is one of these (tests/project/test_servers.py holds it).
"""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any, Final

# What a client going away looks like to the handler writing to it.
CLIENT_GONE: Final = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], CLIENT_GONE):
            return
        super().handle_error(request, client_address)
