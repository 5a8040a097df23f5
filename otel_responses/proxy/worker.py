"""The proxy's analysis worker process: ``python -m otel_responses.proxy.worker FD``, its spec (the proxy's settings,
the telemetry factory and its options, as JSON) on standard input, the channel to the relay on descriptor ``FD``.

It builds its telemetry (its exporters live here), greets the relay with ``[None, strict]`` (or ``[message, exit
code]`` when the telemetry cannot be built, and exits), records what the relay hands over until the relay closes
the channel, then flushes its exporters and exits. Ctrl-C and SIGTERM are the relay's to act on: a terminal's Ctrl-C
reaches the whole process group, and this process must outlive the relay's drain to record it.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from .analyst import AnalysisUnavailable
from .channel import REPLY, frame, serve
from .settings import ProxySettings, Upstream

# Builds the runtime from the command's options; ``AnalysisUnavailable`` when it cannot (a port in use), said by the
# relay, which exits with its code.
Factory = Callable[[dict[str, Any]], tuple[Any, Callable[[], None]]]


def settings_of(spec: dict[str, Any]) -> ProxySettings:
    values = dict(spec)
    return ProxySettings(upstream=Upstream(**values.pop("upstream")), **values)


def tune_collector() -> None:
    """What is alive once a proxy process has started (the modules of the SDK, OpenTelemetry, aiohttp) is never
    garbage: frozen, a full collection does not walk it. And the young generation is collected less often: a parsed
    body is thousands of containers alive at once, which the default threshold (700) collects again and again for
    nothing (measured by the collector's callbacks in the analysis of 60 replays of 1 MB: 76-91 ms of 690-820 ms of
    CPU in some 860 collections by default, none with these thresholds; of 2,000 replays of 10 KB, 30 ms of 1,000)."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def main(argv: list[str]) -> int:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    channel = socket.socket(fileno=int(argv[0]))
    spec = json.loads(sys.stdin.read())
    settings = settings_of(spec["settings"])
    module, _, name = spec["factory"].partition(":")
    factory: Factory = getattr(importlib.import_module(module), name)
    try:
        runtime, close = factory(spec["options"])
    except AnalysisUnavailable as error:
        channel.sendall(b"".join(frame((REPLY, 0, [str(error), error.exit_code]))))
        channel.close()
        return 1
    from .recorder import Recorder

    recorder = Recorder(settings, runtime)
    tune_collector()
    try:
        asyncio.run(serve(channel, recorder.handle, recorder.handle_async, [None, recorder.strict]))
    finally:
        recorder.close()
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
