"""The analysis side of the proxy: what the relay hands over — each call's request, its answer's head and body
chunks, how it ended; each WebSocket frame and event — recorded through an :class:`~.exchange.Exchange` (HTTP) or
the WebSocket seam, exactly as in-process. Runs where the telemetry lives (a thread of a test's own process, or the
command's worker process), fed by the channel in the order the relay sent, so it never holds the relay up.

Frames (``kind, id, *fields``): ``begin`` (the request; answered with strict mode's refusal, or None, when the relay
waits for it), ``answered``, ``chunk``, ``finished``, ``failed``, ``abandoned``, ``unreachable``; ``ws_open``,
``ws_frame`` (its own id, then the socket's; answered like ``begin``), ``ws_event``, ``ws_close``, ``ws_pending``
(its own id, then the socket's; answered: the responses still open on it); ``unrecorded`` (a call the relay did not
hand over, by reason); ``error`` (a failure of the relay's, by step); ``sync`` (answered once everything before it
is handled).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from multidict import CIMultiDict
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.context import Context
from yarl import URL

from .._analysis.facts import Identity
from .._calls.call import Endpoint
from .._calls.observer import Fields
from .._calls.runtime import Runtime
from .._patching import websocket as seam
from .._patching.identity import IdentifiedClient, identity_from
from .._patching.providers import is_azure_host
from .._patching.wrappers import Switch
from .._telemetry.recorded import Server
from ..attributes import PROVIDER_AZURE_OPENAI, PROVIDER_OPENAI
from ..signals import ContextLossError
from . import errors, unrecorded
from .channel import Message, Reply
from .exchange import Exchange
from .headers import CREDENTIAL_DIGEST, ORGANIZATION_HEADER, PROJECT_HEADER
from .reading import Unreadable, loads, request_keywords
from .routing import route_of
from .settings import ProxySettings

_NOTHING = Reply(None)


def endpoints_of(settings: ProxySettings) -> tuple[Endpoint, Endpoint]:
    """The upstream's server and provider, and the same server as Azure OpenAI (a request in Azure's path shape)."""
    upstream = settings.upstream
    provider = PROVIDER_AZURE_OPENAI if is_azure_host(upstream.host) else PROVIDER_OPENAI
    server = Server(upstream.host, upstream.port)
    return (server, provider), (server, PROVIDER_AZURE_OPENAI)


class Socket:
    """One relayed WebSocket as the seam sees an SDK connection: its client's base URL (each call's server and
    provider) and whom its calls are made as (its handshake's headers), its open responses (kept on it by the seam),
    and the trace context its handshake carried."""

    def __init__(self, base_url: URL, identity: Identity, parent: Context) -> None:
        self._client = IdentifiedClient(base_url, identity)
        self.parent = parent


async def _sent(*args: Any, **kwargs: Any) -> None:
    """The seam's "send": the relay sends the frame itself once the verdict allows it."""


def _failure(name: str) -> BaseException:
    """A failure of the relay's, by its type's name, for the span's ``error.type`` (the exception itself stays on
    the relay's side)."""
    kind = _FAILURES.get(name)
    if kind is None:
        kind = _FAILURES[name] = type(name, (Exception,), {"__qualname__": name})
    return kind()


_FAILURES: dict[str, type[Exception]] = {}


class Recorder:
    """Records what the relay hands over; one per proxy, its frames handled one at a time, in order."""

    def __init__(self, settings: ProxySettings, runtime: Runtime) -> None:
        self.settings = settings
        self.runtime = runtime
        self.telemetry = telemetry = runtime.telemetry
        self.strict = runtime.settings.strict
        self.unrecorded = unrecorded.Unrecorded(telemetry.meter)
        self._endpoints = endpoints_of(settings)
        # Strict mode reads a body up to the body limit (it waits for its verdict); otherwise the analysis bound
        # applies to a decompressed copy too.
        self._limit = (
            settings.max_body_bytes if self.strict else min(settings.max_body_bytes, settings.max_analysed_bytes)
        )
        self._base_url = URL(settings.upstream.url)
        self._fingerprints = runtime.settings.fingerprinter
        switch = Switch()
        self._send = seam.async_send_wrapper(switch, runtime)
        self._calls: dict[int, Exchange] = {}
        self._sockets: dict[int, Socket] = {}
        self._handlers: dict[str, Callable[[Message], Any]] = {
            "answered": self._answered,
            "chunk": self._chunk,
            "finished": self._finished,
            "failed": self._failed,
            "abandoned": self._abandoned,
            "unreachable": self._unreachable,
            "ws_open": self._ws_open,
            "ws_event": self._ws_event,
            "ws_close": self._ws_close,
            "ws_pending": self._ws_pending,
            "unrecorded": self._unrecorded,
            "error": self._error,
            "sync": self._sync,
        }

    # -- dispatch ----------------------------------------------------------------------------------------------------

    def handle(self, message: Message) -> Any:
        """A frame that needs no await; ``NotImplemented`` for one that may (``handle_async``)."""
        handler = self._handlers.get(message[0])
        if handler is None:
            return NotImplemented
        try:
            return handler(message)
        except Exception:
            self.telemetry.internal_error("proxy_analysis")
            return _NOTHING if message[0] in ("ws_pending", "sync") else None

    async def handle_async(self, message: Message) -> Any:
        kind = message[0]
        try:
            if kind == "begin":
                return await self._begin(*message[1:])
            if kind == "ws_frame":
                return await self._ws_frame(*message[1:])
        except Exception:
            self.telemetry.internal_error("proxy_analysis")
            return _NOTHING if message[-1] else None
        return None

    def close(self) -> None:
        """The relay is gone: calls it never ended end now (as when the client left), sockets close."""
        calls, self._calls = self._calls, {}
        for exchange in calls.values():
            exchange.abandoned(ConnectionResetError("the proxy stopped"))
        sockets, self._sockets = self._sockets, {}
        for socket in sockets.values():
            seam.closed(socket)

    def _identity(self, read: CIMultiDict[str]) -> Identity:
        """Whom a call is made as: what its headers name (``headers.caller``) at the one upstream."""
        return identity_from(
            read.get(ORGANIZATION_HEADER),
            read.get(PROJECT_HEADER),
            read.get(CREDENTIAL_DIGEST),
            self.settings.upstream.url,
            self._fingerprints,
        )

    # -- HTTP --------------------------------------------------------------------------------------------------------

    def _refused(self, reason: str, wait: bool) -> Reply | None:
        """A body that cannot be read: counted; in strict mode refused (the relay waits for this answer)."""
        self.unrecorded.count(reason)
        if not wait:
            return None
        if self.strict and reason in unrecorded.REFUSED_IN_STRICT_MODE:
            message = unrecorded.refusal_message(reason)
            return Reply(errors.body(message, "invalid_request_error", errors.UNREADABLE_BODY))
        return _NOTHING

    async def _begin(
        self,
        call_id: int,
        method: str,
        raw_path: str,
        query: list[tuple[str, str]],
        headers: list[tuple[str, str]],
        body: bytes,
        wait: bool,
    ) -> Reply | None:
        settings = self.settings
        found = route_of(method, raw_path, dict(reversed(query)), settings.upstream.root)  # the first of a name
        if found is None:
            return _NOTHING if wait else None
        read = CIMultiDict(headers)
        keywords = None
        if found.body:
            try:
                keywords = request_keywords(body, read.get("content-encoding"), self._limit)
            except Unreadable as exc:
                return self._refused(exc.reason, wait)
        parent = propagate.extract(read)
        endpoint = self._endpoints[1] if found.azure else self._endpoints[0]
        exchange = await Exchange.begin(
            self.runtime, found, keywords, endpoint, self._identity(read), parent, settings.max_body_bytes
        )
        if exchange is None:
            return _NOTHING if wait else None
        refusal = exchange.refusal()
        if refusal is not None:
            return Reply(errors.refusal_body(refusal))
        self._calls[call_id] = exchange
        return _NOTHING if wait else None

    def _answered(self, message: Message) -> None:
        exchange = self._calls.get(message[1])
        if exchange is not None:
            exchange.answered(message[2], CIMultiDict(message[3]))

    def _chunk(self, message: Message) -> None:
        exchange = self._calls.get(message[1])
        if exchange is not None:
            exchange.chunk(message[2])

    def _finished(self, message: Message) -> None:
        exchange = self._calls.pop(message[1], None)
        if exchange is not None:
            exchange.finished()

    def _failed(self, message: Message) -> None:
        exchange = self._calls.pop(message[1], None)
        if exchange is not None:
            exchange.failed(_failure(message[2]))

    def _abandoned(self, message: Message) -> None:
        exchange = self._calls.pop(message[1], None)
        if exchange is not None:
            exchange.abandoned(ConnectionResetError("the client left"))

    def _unreachable(self, message: Message) -> None:
        exchange = self._calls.pop(message[1], None)
        if exchange is not None:
            exchange.unreachable(message[2])

    def _unrecorded(self, message: Message) -> None:
        self.unrecorded.count(message[2])

    def _error(self, message: Message) -> None:
        try:
            raise _failure(message[2])
        except Exception:
            self.telemetry.internal_error(message[3])

    def _sync(self, message: Message) -> Reply:
        return _NOTHING

    # -- WebSocket ---------------------------------------------------------------------------------------------------

    def _ws_open(self, message: Message) -> None:
        read = CIMultiDict(message[2])
        self._sockets[message[1]] = Socket(self._base_url, self._identity(read), propagate.extract(read))

    async def _ws_frame(self, frame_id: int, conn: int, data: str | bytes, wait: bool) -> Reply | None:
        """A frame the client sends: a ``response.create`` opens its call (strict mode may refuse it: the answer is
        the ``error`` event the API itself sends); one that cannot be read is counted, and refused in strict mode."""
        socket = self._sockets.get(conn)
        if socket is None:
            return _NOTHING if wait else None
        try:
            event = loads(data) if len(data) <= self._limit else None
        except Unreadable as exc:
            return self._ws_refused(exc.reason, wait)
        if event is None:
            return self._ws_refused(unrecorded.TOO_LARGE, wait)
        if type(event) is not dict or event.get("type") != "response.create":
            return _NOTHING if wait else None
        token = otel_context.attach(socket.parent)
        try:
            await self._send(_sent, socket, (event,), {})
        except ContextLossError as refusal:
            return Reply(seam.refusal_event(refusal))
        finally:
            otel_context.detach(token)
        return _NOTHING if wait else None

    def _ws_refused(self, reason: str, wait: bool) -> Reply | None:
        self.unrecorded.count(reason)
        if not wait:
            return None
        if self.strict and reason in unrecorded.REFUSED_IN_STRICT_MODE:
            return Reply(errors.unreadable_event(unrecorded.refusal_message(reason)))
        return _NOTHING

    def _ws_event(self, message: Message) -> None:
        socket = self._sockets.get(message[1])
        if socket is None:
            return
        try:
            event = Fields.read(loads(message[2]))
        except Unreadable:
            return
        seam.received(socket, event)

    def _ws_close(self, message: Message) -> None:
        socket = self._sockets.pop(message[1], None)
        if socket is not None:
            seam.closed(socket)

    def _ws_pending(self, message: Message) -> Reply:
        socket = self._sockets.get(message[2])
        return Reply(seam.open_responses(socket) if socket is not None else 0)
