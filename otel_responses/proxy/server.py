"""The proxy's server: aiohttp's low-level server in front, one pooled client session to the upstream behind, on one
event loop: the relay. The analysis runs away from it (``analyst``: a thread of this process, or a worker process),
fed through one channel. A stop is graceful: no new connection is taken, idle ones are closed, in-flight requests,
streams and WebSocket responses get the grace period to finish, and what is still running then is cut; then the
analysis finishes what it was handed.

Limits that keep one client from hurting the others: the request head's line and field sizes and header count
(aiohttp's, answered 400), a body limit (413), a deadline for a connection that is idle or whose request never
arrives, a deadline between the chunks of a request body (408), connect and read timeouts upstream (504). Nothing is
logged per request (no access log): a path, a query or a header is the client's. aiohttp's server logs a request it
cannot parse with the offending line (a malformed ``Authorization`` header: the key itself), so the server is given
a logger of its own that says nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from types import TracebackType
from typing import Any

from aiohttp import ClientSession, ClientTimeout, DummyCookieJar, TCPConnector, web

from .._calls.runtime import Runtime, runtime_for
from ..config import KEYWORDS, ConfigError, unknown_keyword
from .analyst import AnalysisThread, Analyst
from .channel import Channel, Message
from .forward import Forwarder, answer
from .settings import LIMITS, ProxySettings, upstream_of
from .websocket import is_upgrade, no_redirects, relay

_log = logging.getLogger(__name__)
# Headers aiohttp's client would add when the client sent none: the request goes upstream with the client's only.
_NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
# After refusing a body (413, 408), how long what is left of it is read and dropped before the connection closes: a
# client that sends on past the refusal still reads the answer rather than a reset.
_LINGERING = 1.0
# ThreadedProxy's keywords that are the proxy's own settings, not the instrumentation's.
_OWN_OPTIONS = frozenset({"host", "allow_http", "record", *LIMITS})


def _silent_logger() -> logging.Logger:
    """The low-level server's logger: outside the logging hierarchy (no handler configured elsewhere, the root's, a
    test's or OpenTelemetry's, reaches it), disabled, and with a handler of its own so that Python's last-resort
    handler does not print to standard error either."""
    logger = logging.Logger("otel_responses.proxy.aiohttp_server")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    logger.disabled = True
    return logger


class Proxy:
    """The proxy on the running event loop: :meth:`start`, then :meth:`stop`. ``runtime``: where its calls are
    recorded, by an analysis on a thread of this process; ``analyst``: another place for the analysis (the command's
    worker process); neither, or ``settings.record`` off: it only forwards."""

    def __init__(self, settings: ProxySettings, runtime: Runtime | None = None, analyst: Analyst | None = None) -> None:
        self.settings = settings
        if analyst is None and runtime is not None and settings.record:
            analyst = AnalysisThread(settings, runtime)
        self.analyst = analyst if settings.record else None
        self.channel: Channel | None = None
        self._runner: web.ServerRunner | None = None
        self._sessions: tuple[ClientSession, ...] = ()  # the pooled one, the handshakes' one
        self._forwarder: Forwarder | None = None
        self._draining = asyncio.Event()
        self.port = 0

    @property
    def strict(self) -> bool:
        """Strict mode: a request waits for the analysis's verdict."""
        return self.analyst is not None and self.analyst.strict

    @property
    def base_url(self) -> str:
        """What a client takes as its base URL: this proxy's origin and the upstream's API root
        (``http://127.0.0.1:8787/v1``)."""
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}{self.settings.upstream.root}"

    async def start(self) -> None:
        """Start the analysis (``AnalysisUnavailable`` when it cannot), listen (``OSError`` when the address cannot
        be had) and open the pooled upstream session."""
        settings = self.settings
        if self.analyst is not None:
            self.channel = await self.analyst.start()
        try:
            await self._listen(settings)
        except BaseException:
            await self._stop_analysis()
            raise

    async def _listen(self, settings: ProxySettings) -> None:
        session, websockets = (
            ClientSession(
                connector=TCPConnector(limit=0, keepalive_timeout=30),
                cookie_jar=DummyCookieJar(),  # a cookie of one client's response is never sent with another's request
                auto_decompress=False,
                skip_auto_headers=_NO_AUTO_HEADERS,
                timeout=ClientTimeout(total=None, connect=settings.connect_timeout, sock_read=settings.read_timeout),
                trust_env=False,
                trace_configs=trace_configs,
            )
            for trace_configs in (None, [no_redirects()])
        )
        self._forwarder = Forwarder(settings, session, self.channel, self.strict, websockets)
        self._sessions = (session, websockets)
        low_level = web.Server(
            self._handle,
            access_log=None,
            logger=_silent_logger(),
            keepalive_timeout=settings.idle_timeout,
            lingering_time=_LINGERING,
            auto_decompress=False,
        )
        runner = web.ServerRunner(low_level, shutdown_timeout=settings.grace, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, settings.host, settings.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            await session.close()
            await websockets.close()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        forwarder = self._forwarder
        assert forwarder is not None
        try:
            if is_upgrade(request):
                return await relay(request, forwarder, self._draining)
            return await forwarder.handle(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of ours: the client gets a gateway's error, the proxy goes on (counted)
            if self.channel is not None and not self.channel.closed:
                self.channel.send(("error", 0, type(exc).__qualname__, "forward_request"))
            else:
                _log.debug("otel-responses proxy: forwarding failed (%s)", type(exc).__qualname__)
            return answer(502, "The proxy failed to forward the request.", "server_error", "proxy_error")

    async def stop(self) -> None:
        """Stop taking connections, let in-flight requests and streams finish within the grace period, then close."""
        self._draining.set()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        sessions, self._sessions = self._sessions, ()
        for session in sessions:
            await session.close()
        await self._stop_analysis()

    async def _stop_analysis(self) -> None:
        """The channel closed once everything is handed over, and the analysis waited for: every call it was handed
        is recorded when this returns."""
        channel, self.channel = self.channel, None
        if channel is not None:
            await channel.close()
        if self.analyst is not None:
            await self.analyst.stop()

    async def ask(self, message: Message) -> object:
        """A question to the analysis (``sync``: answered once everything sent before it is handled)."""
        channel = self.channel
        if channel is None:
            return None
        return await channel.ask(message)


class ThreadedProxy:
    """The proxy on an event loop of its own, in a daemon thread, its analysis on another thread of this process: for
    tests, benchmarks and apps that are not asynchronous. A context manager; :meth:`start` returns once it listens.

    ``upstream``: the one URL it forwards to (plain ``http`` only to a loopback host, unless ``allow_http=True``);
    ``port``: where it listens on loopback (0: a free one, read back from :attr:`port`). The providers: where its calls
    are recorded (the global ones when None). ``options``: the instrumentation's, as ``instrument()`` takes them (then
    the environment), and the proxy's own limits (``host``, ``max_body_bytes``, ``max_analysed_bytes``,
    ``connect_timeout``, ``read_timeout``, ``idle_timeout``, ``grace``; ``record=False`` only forwards)."""

    def __init__(
        self,
        upstream: str,
        *,
        port: int = 0,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        logger_provider: Any = None,
        **options: Any,
    ) -> None:
        own = {name: options.pop(name) for name in list(options) if name in _OWN_OPTIONS}
        unknown = sorted(set(options) - set(KEYWORDS))
        if unknown:
            known = (*KEYWORDS, *_OWN_OPTIONS)
            hints = [unknown_keyword(name, known) for name in unknown]
            raise ConfigError(f"unknown ThreadedProxy option(s): {', '.join(hints)}")
        settings = ProxySettings(upstream_of(upstream, own.pop("allow_http", False)), port=port, **own)
        runtime = runtime_for(options, tracer_provider, meter_provider, logger_provider) if settings.record else None
        self.proxy = Proxy(settings, runtime)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return self.proxy.base_url

    @property
    def port(self) -> int:
        return self.proxy.port

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until the analysis has handled everything the relay handed it so far: every call whose answer the
        client has read is then recorded (its span ended, its ledger entry written)."""
        proxy, loop = self.proxy, self._loop
        if loop is None or proxy.channel is None:
            return

        async def sync() -> object:
            channel = proxy.channel
            return None if channel is None else await proxy.ask(("sync", channel.next_id()))

        asyncio.run_coroutine_threadsafe(sync(), loop).result(timeout)

    def unrecorded(self) -> dict[str, int]:
        """The calls this proxy forwarded unrecorded (or refused in strict mode) because it could not read their
        body or would not analyse it, by reason (``openai_responses.proxy.unrecorded``); settled first."""
        self.settle()
        analyst = self.proxy.analyst
        return analyst.recorder.unrecorded.tally() if isinstance(analyst, AnalysisThread) else {}

    def start(self) -> ThreadedProxy:
        loop = asyncio.new_event_loop()
        started: list[BaseException | None] = []
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.proxy.start())
            except BaseException as exc:
                started.append(exc)
                ready.set()
                loop.close()
                return
            started.append(None)
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        thread = threading.Thread(target=run, name="otel-responses-proxy", daemon=True)
        thread.start()
        ready.wait()
        if started[0] is not None:
            thread.join()
            raise started[0]
        self._loop, self._thread = loop, thread
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.proxy.stop(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=self.proxy.settings.grace + 10)

    def __enter__(self) -> ThreadedProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
