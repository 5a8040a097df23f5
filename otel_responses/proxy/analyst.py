"""Where the proxy's analysis runs, away from the relay's event loop: on a thread of this process (the telemetry is
this process's own: a test's in-memory providers, an app's), or in a worker process of its own (the command: its
exporters live there, and the analysis has a core to itself rather than a share of the relay's GIL). Either way the
relay reaches it through one :class:`~.channel.Channel`, and nothing a client sends waits for it but strict mode's
verdicts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
import subprocess
import sys
import threading
from typing import Any, Protocol

from .._calls.runtime import Runtime
from .channel import Channel, serve
from .recorder import Recorder
from .settings import ProxySettings

# How much the relay may have handed over that the analysis has not yet taken before it hands over no new call
# (each then forwarded and counted, `analysis_behind`; strict mode waits instead): some seconds of calls, and a
# bound on the memory they hold.
HIGH_WATER = 64 * 1024 * 1024
_WORKER = "otel_responses.proxy.worker"


class AnalysisUnavailable(Exception):
    """The analysis could not start; the message says why, ``exit_code`` is the command's."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Analyst(Protocol):
    """What the proxy starts its analysis with, and stops it with once the relay has drained."""

    strict: bool

    async def start(self) -> Channel: ...

    async def stop(self) -> None: ...


class AnalysisThread:
    """The recorder on a thread of this process, on an event loop of its own."""

    def __init__(self, settings: ProxySettings, runtime: Runtime) -> None:
        self.recorder = Recorder(settings, runtime)
        self.strict = self.recorder.strict
        self._thread: threading.Thread | None = None

    async def start(self) -> Channel:
        relay_end, own_end = socket.socketpair()
        recorder = self.recorder

        def run() -> None:
            try:
                asyncio.run(serve(own_end, recorder.handle, recorder.handle_async))
            finally:
                recorder.close()

        self._thread = thread = threading.Thread(target=run, name="otel-responses-proxy-analysis", daemon=True)
        thread.start()
        return await Channel.open(relay_end, HIGH_WATER)

    async def stop(self) -> None:
        thread = self._thread
        if thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 60)


class AnalysisProcess:
    """The recorder in a worker process (``python -m otel_responses.proxy.worker``), its telemetry built there by
    ``factory`` (``module:function``, called with ``options``). It ignores Ctrl-C and SIGTERM: the proxy stops it
    by closing the channel once the relay has drained, and it flushes its exporters before it exits."""

    def __init__(self, settings: ProxySettings, factory: str, options: dict[str, Any]) -> None:
        self._spec = json.dumps({"settings": dataclasses.asdict(settings), "factory": factory, "options": options})
        self._process: subprocess.Popen[bytes] | None = None
        self.strict = False

    async def start(self) -> Channel:
        relay_end, worker_end = socket.socketpair()
        with worker_end:
            fd = worker_end.fileno()
            self._process = subprocess.Popen(
                [sys.executable, "-m", _WORKER, str(fd)], stdin=subprocess.PIPE, pass_fds=(fd,)
            )
        assert self._process.stdin is not None
        self._process.stdin.write(self._spec.encode())
        self._process.stdin.close()
        channel = await Channel.open(relay_end, HIGH_WATER)
        try:
            greeting = await channel.expect(0)
        except ConnectionError:
            greeting = None
        if not isinstance(greeting, list) or len(greeting) != 2:
            await self.stop()
            raise AnalysisUnavailable("the analysis worker did not start", 1)
        error, value = greeting
        if error is not None:
            await self.stop()
            raise AnalysisUnavailable(str(error), int(value))
        self.strict = bool(value)
        return channel

    async def stop(self) -> None:
        process = self._process
        if process is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, process.wait, 60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                process.kill()
            await loop.run_in_executor(None, process.wait)
