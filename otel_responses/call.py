"""The instrumentation's part of one call: request facts, the request-side checks against the ledger, the span
and its context, then the response side (checks, the ledger, telemetry) once the result, the stream's end or the
error is known.

Wrappers and stream proxies both drive a :class:`Call`; it knows neither of them, so neither imports the other.
Every method swallows its own failures: the app never sees one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from time import perf_counter
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context

from .analysis import Analysis, analyse
from .attributes import OPERATION_CHAT, PROVIDER_OPENAI
from .checks import (
    Situation,
    accepted_by_api,
    confirmed_by_api,
    run_request_checks,
    run_response_checks,
    tool_calls_check,
)
from .facts import CLIENT_REPLAY, CONVERSATION, SERVER_CHAIN, RequestFacts, ResponseFacts
from .lineage import lineage_of
from .operations import Operation
from .providers import provider_of_client
from .signals import ContextLossError, Signal
from .telemetry import Server, Telemetry

_DEFAULT_PORTS = {"https": 443, "http": 80}
_RAW_HEADER = "X-Stainless-Raw-Response"

# A library's call (litellm, DSPy) in progress in this context: while it is, the SDK wrappers record nothing, so a
# library that reaches the Responses API through the `openai` SDK is recorded once, at its own seam.
LIBRARY_CALL: ContextVar[object | None] = ContextVar("otel_responses_library_call", default=None)

# The call whose SDK is turning a `Response` into a `ParsedResponse` (`responses.parse`): the patched
# `parse_response` keeps the `Response` there when that fails, so what the API said is still recorded.
PARSING: ContextVar[Call | None] = ContextVar("otel_responses_parsing", default=None)

Endpoint = tuple[Server, str]  # the server and the GenAI provider name
_last_endpoint: tuple[object, object, Endpoint] = (None, None, ((None, None), PROVIDER_OPENAI))


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
        return (None, None), provider_of_client(kind, None)
    port = getattr(url, "port", None)
    if not isinstance(port, int):
        port = _DEFAULT_PORTS.get(getattr(url, "scheme", ""))
    endpoint: Endpoint = ((host, port), provider_of_client(kind, host))
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


def _flight_key(req: RequestFacts, an: Analysis) -> str | None:
    """What two requests at once would both be continuing: a parent response or a conversation."""
    if req.state_mode == CONVERSATION and req.conversation_id is not None:
        return "c:" + req.conversation_id
    if req.state_mode in (SERVER_CHAIN, CLIENT_REPLAY) and an.parent is not None:
        return "r:" + an.parent.response_id
    if req.state_mode == SERVER_CHAIN and req.previous_response_id is not None:
        return "r:" + req.previous_response_id
    return None


@contextmanager
def parsing(call: Call) -> Iterator[None]:
    """While the SDK parses this call's response, a failure to parse keeps the unparsed ``Response``."""
    token = PARSING.set(call)
    try:
        yield
    finally:
        PARSING.reset(token)


class Call:
    """The instrumentation's part of one call; every method swallows its own failures."""

    __slots__ = (
        "analysis",
        "dropped",
        "first_chunk",
        "flight",
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
        deferred: bool = False,
        endpoint: Endpoint | None = None,
        dropped: frozenset[str] = frozenset(),
    ) -> None:
        """``endpoint``: the server and provider when the caller knows them (a library's call has no SDK resource
        ``instance``); ``dropped``: signals whose premise this call's server does not share (a bridged provider),
        never raised on it."""
        self.token: Token[Context] | None = None
        self.flight: str | None = None
        self.dropped = dropped
        self.unparsed: object = None  # the `Response` the SDK failed to parse, if it did
        self.first_chunk: float | None = None  # a stream's time to its first chunk, once it came
        self.telemetry = telemetry
        self.settings = telemetry.settings
        self.op = op
        self.server, provider = endpoint if endpoint is not None else _endpoint(instance)
        self.raw_mode = raw_mode(kwargs)
        self.req = op.facts(args, kwargs, self.settings)
        self.req.provider = provider
        if not deferred:
            self.start(exempt)

    def start(self, exempt: frozenset[str] = frozenset()) -> None:
        """The analysis against the ledger, the request checks, the span and its context. Run by the constructor,
        or, for a call built ``deferred`` (only its facts: an async wrapper awaits the shared ledger's reads in
        between), by its maker; a failure here is the maker's to swallow, as the constructor's is."""
        self.check(exempt)
        try:
            self.open()
        except BaseException:  # a span processor or sampler raising: the in-flight record must not outlive us
            self.discard()
            raise

    def check(self, exempt: frozenset[str] = frozenset()) -> None:
        """The analysis against the ledger and the request checks, without a span: a library's call is checked
        when the app makes it (strict mode refuses then) and opened when its request really leaves (``open``)."""
        req, ledger = self.req, self.settings.ledger
        self.analysis = analysis = analyse(req, ledger)
        req.texts = None  # the app's input is read no more
        self.flight = flight = _flight_key(req, analysis) if self.op.name == OPERATION_CHAT else None
        concurrent = ledger.enter(flight) if flight is not None else False
        try:
            if flight is not None and analysis.parent is not None and req.state_mode != CONVERSATION:
                concurrent = concurrent or ledger.has_child(analysis.parent.response_id)
            signals = run_request_checks(req, analysis, Situation(self.settings.zdr, concurrent))
            skipped = exempt | self.dropped
            self.signals: list[Signal] = [s for s in signals if s.name not in skipped] if skipped else signals
            self.lineage = lineage_of(req, analysis)
        except BaseException:
            self.discard()
            raise

    def open(self, attach: bool = True) -> None:
        """The span, and (``attach``) its context made current: not when a library opens it deep in its own frames,
        possibly under a copy of the app's context that the call's end would not detach from."""
        lineage = self.lineage
        self.span = span = self.telemetry.start(self.req, self.server, self.settings.ledger.unavailable(), lineage)
        own = span.get_span_context()
        if own.is_valid:
            lineage.own = (own.trace_id, own.span_id)
        if attach:
            self.token = otel_context.attach(trace.set_span_in_context(span))
        self.started = perf_counter()

    def discard(self) -> None:
        """A checked call that never opened (its library answered from a cache): leave its in-flight record."""
        flight, self.flight = self.flight, None
        if flight is not None:
            self.settings.ledger.leave(flight)

    def _tool_check(self, resp: ResponseFacts | None = None) -> str | None:
        return tool_calls_check(self.analysis, self.signals, resp) if self.req.state_mode is not None else None

    def detach(self) -> None:
        """Leave the span's context: the call has returned to the app (a stream may still be running)."""
        if self.token is None:
            return
        try:
            otel_context.detach(self.token)
        except Exception:
            self.telemetry.internal_error("detach_context")
        self.token = None

    def _close(self) -> float:
        seconds = perf_counter() - self.started
        self.detach()
        if self.flight is not None:
            try:
                self.settings.ledger.leave(self.flight)
            except Exception:
                self.telemetry.internal_error("ledger_leave")
        return seconds

    def refusal(self) -> ContextLossError | None:
        """In strict mode, the error to raise instead of sending; the span is ended with it."""
        try:
            blocking = [s for s in self.signals if s.refusable] if self.settings.strict else []
            error = ContextLossError(blocking) if blocking else None
        except Exception:
            self.telemetry.internal_error("strict_check")
            return None
        if error is not None:
            self.failed(error)
        return error

    def stream(self, result: Any, proxy: Callable[[Any, Call], Any]) -> Any:
        """Hand the app a proxy of its stream (or of the raw response carrying it); the span ends with the
        stream, not now."""
        self.detach()
        try:
            return proxy(result, self)
        except Exception:
            self.telemetry.internal_error("wrap_stream")
            self.finish(None)
            return result

    def succeeded(self, result: Any, raw_mode: str | None) -> None:
        """The call returned: read its result, then record it."""
        error_type = None
        try:
            resp = self._read(result, raw_mode)
        except Exception as exc:
            resp = self._unparsed_facts(result if raw_mode is not None else None)
            if resp is None:
                self.telemetry.internal_error("read_response")
            else:  # the SDK cannot parse what the API said: the app's own parse() raises the same
                error_type = type(exc).__qualname__
        if resp is None and raw_mode is not None:
            try:
                self.telemetry.tag_request_id(self.span, raw_request_id(result))
            except Exception:
                self.telemetry.internal_error("read_raw_response")
        self.finish(resp, error_type=error_type)

    def _read(self, result: Any, raw_mode: str | None) -> ResponseFacts | None:
        """Facts from a parsed result or a raw one; a streaming raw body is left unread for the app."""
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

    def finish(
        self, resp: ResponseFacts | None, extra: Mapping[str, Any] | None = None, error_type: str | None = None
    ) -> None:
        """Check the response, remember it, record everything and end the span."""
        seconds = self._close()
        try:
            if error_type is not None:  # an error event of a stream or a socket carries the API's code
                self.signals = confirmed_by_api(self.signals, error_type)
            if resp is not None:
                if error_type is None and resp.response_id is not None:
                    self.signals = accepted_by_api(self.signals)
                if resp.has_output:
                    found = run_response_checks(self.req, resp, Situation(self.settings.zdr, False))
                    self.signals += [s for s in found if s.name not in self.dropped] if self.dropped else found
                if self.op.remember is not None:
                    self.op.remember(self.settings.ledger, self.req, self.analysis, resp, self.settings, self.lineage)
            if extra:
                self.telemetry.annotate(self.span, extra)
            self.telemetry.succeed(
                self.span,
                self.req,
                resp,
                seconds,
                self.server,
                self.signals,
                self._tool_check(resp),
                error_type,
                self.op.records_usage,
                self.lineage,
                self.first_chunk,
            )
        except Exception:
            self.telemetry.internal_error("record_response")
            self._end_span()

    def _end_span(self) -> None:
        """After a failure while recording: end the span unless that failure came from ending it (a span processor's
        ``on_end`` raising), which must not end it twice."""
        try:
            if self.span.is_recording():
                self.span.end()
        except Exception:
            self.telemetry.internal_error("end_span")

    def failed(self, exc: BaseException) -> None:
        """The call raised. When the API answered and only the SDK's parsing of the answer failed, the answer
        is recorded (and remembered) all the same, with the parsing error's type."""
        resp = self._unparsed_facts()
        if resp is not None:
            self.finish(resp, error_type=type(exc).__qualname__)
            return
        seconds = self._close()
        try:
            self.signals = confirmed_by_api(self.signals, getattr(exc, "code", None))
            self.telemetry.fail(
                self.span,
                self.req,
                exc,
                seconds,
                self.server,
                self.signals,
                self._tool_check(),
                self.lineage,
                self.first_chunk,
            )
        except Exception:
            self.telemetry.internal_error("record_error")
            self._end_span()
