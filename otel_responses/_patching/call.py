"""One instrumented call, as one object: the invocation. It owns everything the call knows — its request facts, its
view of the ledger, the analysis and the request-side signals, its lineage, its span, the span's context and the
token that made it current, its start and duration — and it ends once, with an :class:`Outcome`, handed whole to
``Telemetry.end``.

Wrappers, stream proxies and library seams all drive a :class:`Call`; it knows none of them. Every method swallows
its own failures: the app never sees one.

Two context variables stay, each because nothing else reaches where it is read: ``PARSING`` (the SDK's module-level
``parse_response``, called deep inside ``responses.parse`` with none of our objects in reach, leaves the unparsed
``Response`` with the call being parsed) and ``LIBRARY_CALL`` (a library's outer seam tells the SDK wrappers, far
below it in the same context, that the call is recorded already).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from time import perf_counter
from typing import Any, cast

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span
from opentelemetry.util.types import AttributeValue

from .._analysis.analysis import Analysis, analyse
from .._analysis.checks import (
    Situation,
    accepted_by_api,
    confirmed_by_api,
    confirmed_by_response,
    run_request_checks,
    run_response_checks,
    tool_calls_check,
)
from .._analysis.facts import CLIENT_REPLAY, CONVERSATION, SERVER_CHAIN, Identity, RequestFacts, ResponseFacts
from .._analysis.lineage import Lineage, lineage_of
from .._telemetry.recorded import NO_SERVER, NOTHING_READ, Outcome, Server
from .._telemetry.telemetry import Telemetry
from ..attributes import OPERATION_CHAT, PROVIDER_OPENAI, REQUEST_ID
from ..config import Settings
from ..ledger import AsyncCallLedger, CallLedger, LedgerView
from ..signals import ContextLossError, Signal
from .identity import identity_of
from .operations import Operation
from .providers import provider_of_client

_DEFAULT_PORTS = {"https": 443, "http": 80}
_RAW_HEADER = "X-Stainless-Raw-Response"

# A library's call (litellm, DSPy) in progress in this context: while it is, the SDK wrappers record nothing, so a
# library that reaches the Responses API through the `openai` SDK is recorded once, at its own seam.
LIBRARY_CALL: ContextVar[object | None] = ContextVar("otel_responses_library_call", default=None)

# The call whose SDK is turning a `Response` into a `ParsedResponse` (`responses.parse`): the patched
# `parse_response` keeps the `Response` there when that fails, so what the API said is still recorded.
PARSING: ContextVar[Call | None] = ContextVar("otel_responses_parsing", default=None)

Endpoint = tuple[Server, str]  # the server and the GenAI provider name
_last_endpoint: tuple[object, object, Endpoint] = (None, None, (NO_SERVER, PROVIDER_OPENAI))


def _endpoint(instance: Any) -> Endpoint:
    """Host and port of the client's base URL, and the provider it reaches (Azure OpenAI by the client's class or
    its host). The last answer is kept by the URL object's and the client class's identity (the client's own, the
    same call after call; setting ``client.base_url`` replaces it): parsing is not free."""
    global _last_endpoint
    client = getattr(instance, "_client", None)
    url = getattr(client, "base_url", None)
    kind = type(client)
    last = _last_endpoint
    if url is last[0] and kind is last[1] and url is not None:
        return last[2]
    host = getattr(url, "host", None)
    if not isinstance(host, str) or not host:
        return NO_SERVER, provider_of_client(kind, None)
    port = getattr(url, "port", None)
    if not isinstance(port, int):
        port = _DEFAULT_PORTS.get(getattr(url, "scheme", ""))
    endpoint: Endpoint = (Server(host, port), provider_of_client(kind, host))
    _last_endpoint = (url, kind, endpoint)
    return endpoint


def raw_request_id(result: Any) -> str | None:
    """The ``x-request-id`` of a raw response (``LegacyAPIResponse`` or ``APIResponse``)."""
    request_id = getattr(result, "request_id", None)
    return request_id if isinstance(request_id, str) else None


def raw_mode(kwargs: Mapping[str, Any]) -> str | None:
    """``"true"`` for with_raw_response, ``"stream"`` for with_streaming_response, else None. The app's headers
    mapping is its own object: read under the call's guard, like every other argument."""
    headers = kwargs.get("extra_headers")
    if type(headers) is not dict:  # the SDK's own raw-response header comes in a plain dict
        return None
    mode = headers.get(_RAW_HEADER)
    return mode if isinstance(mode, str) else None


def _continued(req: RequestFacts, an: Analysis) -> str | None:
    """The parent a turn continues whose continued-marker its check reads (a second child is ``concurrent_branch``):
    a chained or replayed turn's, once the parent is known."""
    if req.operation != OPERATION_CHAT or an.parent is None:
        return None
    return an.parent.response_id if req.state_mode in (SERVER_CHAIN, CLIENT_REPLAY) else None


def _flight_key(req: RequestFacts, an: Analysis) -> str | None:
    """What two requests at once would both be continuing: a parent response or a conversation."""
    if req.state_mode == CONVERSATION and req.conversation_id is not None:
        return "c:" + req.conversation_id
    if req.state_mode in (SERVER_CHAIN, CLIENT_REPLAY) and an.parent is not None:
        return "r:" + an.parent.response_id
    if req.state_mode == SERVER_CHAIN and req.previous_response_id is not None:
        return "r:" + req.previous_response_id
    return None


def _answer(exc: BaseException | None) -> str | None:
    """The message of the API's error (the SDK's, and its body's): read only to tell which refusal it is, never
    recorded (it may echo payload)."""
    if exc is None:
        return None
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, Mapping) else None
    parts = [text for text in (message, getattr(exc, "message", None)) if isinstance(text, str)]
    return " ".join(parts) or None


@contextmanager
def parsing(call: Call) -> Iterator[None]:
    """While the SDK parses this call's response, a failure to parse keeps the unparsed ``Response``."""
    token = PARSING.set(call)
    try:
        yield
    finally:
        PARSING.reset(token)


class Call:
    """The instrumentation's part of one call; every method swallows its own failures.

    Built from the request (facts only), then checked against the ledger (``check``), opened (``open``: the span),
    and ended once (``end``). ``start`` is the two steps a wrapper takes together."""

    __slots__ = (
        "analysed",
        "analysis",
        "context",
        "dropped",
        "duration",
        "exempt",
        "first_chunk",
        "flight",
        "ledger",
        "lineage",
        "op",
        "raw_mode",
        "req",
        "server",
        "settings",
        "signals",
        "span",
        "started",
        "telemetry",
        "token",
        "unparsed",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        op: Operation,
        instance: Any,
        args: tuple[Any, ...],
        kwargs: Any,
        exempt: frozenset[str] = frozenset(),
        endpoint: Endpoint | None = None,
        dropped: frozenset[str] = frozenset(),
        identity: Identity | None = None,
    ) -> None:
        """The request's facts. ``exempt``: signals this call may not raise (a WebSocket connection's own latest
        response may be continued unstored); ``endpoint``: the server and provider when the caller knows them (a
        library's call has no SDK resource ``instance``); ``dropped``: signals whose premise this call's server does
        not share (a bridged provider), never raised on it; ``identity``: whom the call is made as, when read
        without a client (the proxy reads the request's headers)."""
        self.telemetry = telemetry
        # Telemetry reads only its own few settings (``Recording``); the shared one is built with them all.
        self.settings = settings = cast("Settings", telemetry.settings)
        self.ledger: CallLedger = settings.ledger.for_call()
        self.op = op
        self.exempt = exempt
        self.dropped = dropped
        self.server, provider = endpoint if endpoint is not None else _endpoint(instance)
        self.raw_mode = raw_mode(kwargs)
        self.req = op.facts(args, kwargs, settings)
        self.req.provider = provider
        if identity is not None:
            self.req.identity = identity
        elif instance is not None:
            self.req.identity = identity_of(instance, kwargs, settings.fingerprinter)
        self.analysis = Analysis()
        self.analysed = False  # ``analysis`` is the request's against the ledger (made by ``reads``, or ``check``)
        self.signals: list[Signal] = []
        self.lineage = Lineage()
        self.flight: str | None = None
        self.span: Span = INVALID_SPAN
        self.context: Context | None = None
        self.token: Token[Context] | None = None
        self.started = 0.0
        self.duration = 0.0
        self.first_chunk: float | None = None  # a stream's time to its first chunk, once it came
        self.unparsed: object = None  # the `Response` the SDK failed to parse, if it did

    # -- the beginning --------------------------------------------------------------------------------------------

    def reads(self, ledger: LedgerView) -> None:
        """Every read this call makes of the ledger, as ``check`` makes them: its analysis, and whether the parent it
        continues was continued already. Once they run through, ``check`` takes the analysis they made."""
        analysis = analyse(self.req, ledger)
        continued = _continued(self.req, analysis)
        if continued is not None:
            ledger.has_child(continued)
        self.analysis, self.analysed = analysis, True

    async def await_reads(self) -> None:
        """For a ledger that reads a shared store asynchronously: this call's reads of it (``reads``, run until they
        ask for nothing unread), awaited, never run on the event loop; from here on the call's view answers from what
        they found. A failure of the reads marks the call (its span says the ledger was unavailable); a bug is
        counted, and the analysis goes on."""
        ledger = self.settings.ledger
        if getattr(ledger, "reads_asynchronously", False) is not True:
            return
        try:
            await cast("AsyncCallLedger", self.ledger).prefetch(self.reads)
        except Exception:
            self.telemetry.internal_error("ledger_prefetch")

    def start(self) -> None:
        """``check`` and ``open`` together; a failure here is the maker's to swallow."""
        self.check()
        try:
            self.open()
        except BaseException:  # a span processor or sampler raising: the in-flight record must not outlive us
            self.discard()
            raise

    def check(self) -> None:
        """The analysis against the ledger and the request checks, without a span: a library's call is checked when
        the app makes it (strict mode refuses then) and opened when its request really leaves."""
        req, ledger = self.req, self.ledger
        analysis = self.analysis if self.analysed else analyse(req, ledger)
        self.analysis, self.analysed = analysis, True
        req.texts = None  # the app's input is read no more
        self.flight = flight = _flight_key(req, analysis) if self.op.name == OPERATION_CHAT else None
        concurrent = ledger.enter(flight) if flight is not None else False
        try:
            continued = _continued(req, analysis)
            if continued is not None:
                concurrent = concurrent or ledger.has_child(continued)
            signals = run_request_checks(req, analysis, Situation(self.settings.zdr, concurrent))
            skipped = self.exempt | self.dropped
            self.signals = [s for s in signals if s.name not in skipped] if skipped else signals
            self.lineage = lineage_of(req, analysis)
        except BaseException:
            self.discard()
            raise

    def open(self, attach: bool = True) -> None:
        """The span, and (``attach``) its context made current: not when a library opens it deep in its own frames,
        possibly under a copy of the app's context that the call's end would not detach from."""
        self.telemetry.start(self)
        own = self.span.get_span_context()
        if own.is_valid:
            self.lineage.own = (own.trace_id, own.span_id)
        if attach and self.context is not None:
            self.token = otel_context.attach(self.context)
        self.started = perf_counter()

    def discard(self) -> None:
        """A checked call that never opened (its library answered from a cache): leave its in-flight record."""
        flight, self.flight = self.flight, None
        if flight is not None:
            self.ledger.leave(flight)

    @property
    def records_usage(self) -> bool:
        return self.op.records_usage

    def tool_check(self, resp: ResponseFacts | None = None) -> str | None:
        """``openai_responses.tool_calls.check``; None for a call that carries no state (not a model call)."""
        return tool_calls_check(self.analysis, self.signals, resp) if self.req.state_mode is not None else None

    def refusal(self) -> ContextLossError | None:
        """In strict mode, the error to raise instead of sending; the span is ended with it."""
        try:
            blocking = [s for s in self.signals if s.refusable] if self.settings.strict else []
            error = ContextLossError(blocking) if blocking else None
        except Exception:
            self.telemetry.internal_error("strict_check")
            return None
        if error is not None:
            self.raised(error)
        return error

    # -- the middle -------------------------------------------------------------------------------------------------

    def detach(self) -> None:
        """Leave the span's context: the call has returned to the app (a stream may still be running)."""
        if self.token is None:
            return
        try:
            otel_context.detach(self.token)
        except Exception:
            self.telemetry.internal_error("detach_context")
        self.token = None

    def stream(self, result: Any, proxy: Callable[[Any, Call], Any]) -> Any:
        """Hand the app a proxy of its stream (or of the raw response carrying it); the span ends with the
        stream, not now."""
        self.detach()
        try:
            return proxy(result, self)
        except Exception:
            self.telemetry.internal_error("wrap_stream")
            self.end(NOTHING_READ)
            return result

    def chunk(self, now: float) -> None:
        """The first chunk of a stream arrived at ``now`` (``perf_counter``): recorded when the call ends."""
        self.first_chunk = now - self.started

    # -- the end ----------------------------------------------------------------------------------------------------

    def returned(self, result: Any) -> None:
        """The call returned ``result``: read it, then end."""
        error_type = None
        try:
            resp = self._read(result)
        except Exception as exc:
            resp = self._unparsed_facts(result if self.raw_mode is not None else None)
            if resp is None:
                self.telemetry.internal_error("read_response")
            else:  # the SDK cannot parse what the API said: the app's own parse() raises the same
                error_type = type(exc).__qualname__
        extra: dict[str, AttributeValue] | None = None
        if resp is None and self.raw_mode is not None:
            try:
                request_id = raw_request_id(result)
                extra = {REQUEST_ID: request_id} if request_id is not None else None
            except Exception:
                self.telemetry.internal_error("read_raw_response")
        self.end(Outcome(resp, error_type, extra=extra))

    def _read(self, result: Any) -> ResponseFacts | None:
        """Facts from a parsed result or a raw one; a streaming raw body is left unread for the app."""
        raw_mode = self.raw_mode
        if raw_mode is None:
            return self.op.read(result, self.settings, None)
        if raw_mode == "stream":
            return None
        # LegacyAPIResponse.parse() caches its result: the app's own parse() returns the same object.
        with parsing(self):
            parsed = result.parse()
        return self.op.read(parsed, self.settings, raw_request_id(result))

    def _unparsed_facts(self, raw: Any = None) -> ResponseFacts | None:
        """Facts of the ``Response`` the SDK failed to parse (kept by the patched ``parse_response``), once.

        Its ``x-request-id`` is known only from a raw response: the SDK adds it to the parsed result."""
        unparsed, self.unparsed = self.unparsed, None
        if unparsed is None:
            return None
        try:
            return self.op.read(unparsed, self.settings, raw_request_id(raw) if raw is not None else None)
        except Exception:
            self.telemetry.internal_error("read_unparsed_response")
            return None

    def raised(self, exc: BaseException) -> None:
        """The call raised. When the API answered and only the SDK's parsing of the answer failed, the answer
        is recorded (and remembered) all the same, with the parsing error's type."""
        resp = self._unparsed_facts()
        if resp is not None:
            self.end(Outcome(resp, error_type=type(exc).__qualname__))
        else:
            self.end(Outcome(exception=exc))

    def end(self, outcome: Outcome) -> None:
        """The one end of a call: the response checks, the ledger, then telemetry (which ends the span)."""
        self.duration = perf_counter() - self.started
        self.detach()
        if self.flight is not None:
            try:
                self.ledger.leave(self.flight)
            except Exception:
                self.telemetry.internal_error("ledger_leave")
        try:
            resp, exc = outcome.response, outcome.exception
            code = getattr(exc, "code", None) if exc is not None else outcome.error_type
            if code is not None:  # the API's refusal, or the code of a stream's error event
                self.signals = confirmed_by_api(self.signals, code, _answer(exc), self.analysis.crossed)
            if resp is not None:
                if outcome.error_type is None and resp.response_id is not None:
                    self.signals = accepted_by_api(self.signals)
                if resp.has_output:
                    found = run_response_checks(self.req, self.analysis, resp, Situation(self.settings.zdr, False))
                    self.signals += [s for s in found if s.name not in self.dropped] if self.dropped else found
                    if resp.withheld and "encrypted_content_foreign" not in self.dropped:
                        self.signals = confirmed_by_response(self.signals, resp, self.analysis.crossed)
                if self.op.remember is not None:
                    self.op.remember(self, resp)
            self.telemetry.end(self, outcome)
        except Exception:
            self.telemetry.internal_error("record_response" if outcome.exception is None else "record_error")
            self._end_span()

    def _end_span(self) -> None:
        """After a failure while recording: end the span unless that failure came from ending it (a span processor's
        ``on_end`` raising), which must not end it twice."""
        try:
            if self.span.is_recording():
                self.span.end()
        except Exception:
            self.telemetry.internal_error("end_span")
