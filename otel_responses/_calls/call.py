"""One instrumented call, as one object: the invocation. It owns everything the call knows — its request facts, its
view of the ledger, the analysis and the request-side signals, its lineage, its span, the span's context and the
token that made it current, its start and duration — and its whole life: :meth:`Call.begin` (or its async twin)
runs the start sequence once (build, the ledger's reads, the request checks, the span, the in-flight record left
again on failure, a failure counted), and :meth:`Call.end` ends it once, however many of its holders end it, with
an :class:`Outcome`: the response checks, the ledger, the tool-call check, then ``Telemetry.end``, which only
writes.

Wrappers, stream observers, library seams and the proxy all drive a :class:`Call`; it knows none of them. Every
method swallows its own failures: the app never sees one.

One context variable stays, because nothing else reaches where it is read: ``PARSING`` (the SDK's module-level
``parse_response``, called deep inside ``responses.parse`` with none of our objects in reach, leaves the unparsed
``Response`` with the call being parsed).
"""

from __future__ import annotations

import threading
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
from .._telemetry.recorded import NOTHING_READ, Outcome, Server
from ..attributes import OPERATION_CHAT, REQUEST_ID
from ..ledger import AsyncCallLedger, CallLedger, LedgerView
from ..signals import ContextLossError, Signal
from .operations import Operation
from .runtime import Runtime

_RAW_HEADER = "X-Stainless-Raw-Response"

# The call whose SDK is turning a `Response` into a `ParsedResponse` (`responses.parse`): the patched
# `parse_response` keeps the `Response` there when that fails, so what the API said is still recorded.
PARSING: ContextVar[Call | None] = ContextVar("otel_responses_parsing", default=None)

Endpoint = tuple[Server, str]  # the server and the GenAI provider name


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

    Begun once (:meth:`begin`, :meth:`begin_async`): built from the request (facts only), checked against the ledger,
    and opened (the span), now or (a library's call, the proxy's WebSocket frames) when its request really leaves
    (:meth:`open`). Ended once (:meth:`end`, or :meth:`returned` / :meth:`raised`, which read what ended it): whoever
    ends it first ends it, the others do nothing. A call ended before it opened only leaves its in-flight record."""

    __slots__ = (
        "_ending",
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
        "opened",
        "raw_mode",
        "req",
        "runtime",
        "server",
        "settings",
        "signals",
        "span",
        "started",
        "telemetry",
        "token",
        "tool_check",
        "unparsed",
    )

    def __init__(
        self,
        runtime: Runtime,
        op: Operation,
        args: tuple[Any, ...],
        kwargs: Any,
        endpoint: Endpoint,
        exempt: frozenset[str] = frozenset(),
        dropped: frozenset[str] = frozenset(),
        identity: Identity | None = None,
    ) -> None:
        """The request's facts. ``endpoint``: the server and provider the call reaches; ``exempt``: signals this call
        may not raise (a WebSocket connection's own latest response may be continued unstored); ``dropped``: signals
        whose premise this call's server does not share (a bridged provider), never raised on it; ``identity``: whom
        the call is made as, when its front end can tell (an SDK client, a proxied request's headers)."""
        self.runtime = runtime
        self.telemetry = runtime.telemetry
        self.settings = settings = runtime.settings
        self.ledger: CallLedger = settings.ledger.for_call()
        self.op = op
        self.exempt = exempt
        self.dropped = dropped
        self.server, provider = endpoint
        self.raw_mode = raw_mode(kwargs)
        self.req = op.facts(args, kwargs, settings)
        self.req.provider = provider
        if identity is not None:
            self.req.identity = identity
        self.analysis = Analysis()
        self.analysed = False  # ``analysis`` is the request's against the ledger (made by ``reads``, or the check)
        self.signals: list[Signal] = []
        self.tool_check: str | None = None
        self.lineage = Lineage()
        self.flight: str | None = None
        self.opened = False
        self._ending = threading.Lock()  # taken, never released, by the first end: the others then do nothing
        self.span: Span = INVALID_SPAN
        self.context: Context | None = None
        self.token: Token[Context] | None = None
        self.started = 0.0
        self.duration = 0.0
        self.first_chunk: float | None = None  # a stream's time to its first chunk, once it came
        self.unparsed: object = None  # the `Response` the SDK failed to parse, if it did

    # -- the beginning --------------------------------------------------------------------------------------------

    @classmethod
    def begin(
        cls,
        runtime: Runtime,
        op: Operation,
        args: tuple[Any, ...],
        kwargs: Any,
        endpoint: Endpoint,
        *,
        exempt: frozenset[str] = frozenset(),
        dropped: frozenset[str] = frozenset(),
        identity: Identity | None = None,
        opens: bool = True,
        attach: bool = True,
        view: CallLedger | None = None,
    ) -> Call | None:
        """The start sequence, once: the call built, checked against the ledger (strict mode's refusal is known
        then) and, with ``opens``, opened (``attach``: its span's context made current). None, counted, when any step
        failed: the app's call goes on unrecorded, and no in-flight record is left behind. ``view``: the ledger view
        to read through (a library's retry reads what its first attempt read); ``identity``: whom the call is made as,
        when its front end can tell."""
        call = cls._built(runtime, op, args, kwargs, endpoint, exempt, dropped, identity)
        if call is None:
            return None
        if view is not None:
            call.ledger = view
        return call._started(opens, attach)

    @classmethod
    async def begin_async(
        cls,
        runtime: Runtime,
        op: Operation,
        args: tuple[Any, ...],
        kwargs: Any,
        endpoint: Endpoint,
        *,
        exempt: frozenset[str] = frozenset(),
        dropped: frozenset[str] = frozenset(),
        identity: Identity | None = None,
        opens: bool = True,
        attach: bool = True,
    ) -> Call | None:
        """:meth:`begin` in a coroutine: a shared ledger's reads for the call are awaited first (never run on the
        event loop), and the check then reads what they found."""
        call = cls._built(runtime, op, args, kwargs, endpoint, exempt, dropped, identity)
        if call is None:
            return None
        await call._await_reads()
        return call._started(opens, attach)

    @classmethod
    def _built(
        cls,
        runtime: Runtime,
        op: Operation,
        args: tuple[Any, ...],
        kwargs: Any,
        endpoint: Endpoint,
        exempt: frozenset[str],
        dropped: frozenset[str],
        identity: Identity | None,
    ) -> Call | None:
        try:
            return cls(runtime, op, args, kwargs, endpoint, exempt, dropped, identity)
        except Exception:
            runtime.telemetry.internal_error("start_call")
            return None

    def _started(self, opens: bool, attach: bool) -> Call | None:
        try:
            self._check()
            if opens and not self.open(attach):
                return None
        except Exception:
            self.telemetry.internal_error("start_call")
            self._discard()
            return None
        return self

    def reads(self, ledger: LedgerView) -> None:
        """Every read this call makes of the ledger, as its check makes them: its analysis, and whether the parent it
        continues was continued already. Once they run through, the check takes the analysis they made."""
        analysis = analyse(self.req, ledger)
        continued = _continued(self.req, analysis)
        if continued is not None:
            ledger.has_child(continued)
        self.analysis, self.analysed = analysis, True

    async def _await_reads(self) -> None:
        """For a ledger that reads a shared store asynchronously: this call's reads of it (``reads``, run until they
        ask for nothing unread), awaited, never run on the event loop; from here on the call's view answers from what
        they found. A failure of the reads marks the call (its span says the ledger was unavailable); a bug is
        counted, and the analysis goes on."""
        if getattr(self.runtime.ledger, "reads_asynchronously", False) is not True:
            return
        try:
            await cast("AsyncCallLedger", self.ledger).prefetch(self.reads)
        except Exception:
            self.telemetry.internal_error("ledger_prefetch")

    def _check(self) -> None:
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
            self._discard()
            raise

    def open(self, attach: bool = False, parent: Context | None = None) -> bool:
        """The span, once (a call open already stays so), and (``attach``) its context made current: not when a
        library opens it deep in its own frames, possibly under a copy of the app's context that the call's end would
        not detach from. ``parent``: the context the span starts in, when not the current one (the trace a proxy's
        client sent). False, counted, when the span could not be opened: the call is then over, its in-flight record
        left."""
        if self.opened:
            return True
        token = otel_context.attach(parent) if parent is not None else None
        try:
            self.telemetry.start(self)
        except Exception:
            self.telemetry.internal_error("start_call")
            self._discard()
            return False
        except BaseException:  # a span processor or sampler raising: the in-flight record must not outlive us
            self._discard()
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
        self.opened = True
        own = self.span.get_span_context()
        if own.is_valid:
            self.lineage.own = (own.trace_id, own.span_id)
        if attach and self.context is not None:
            self.token = otel_context.attach(self.context)
        self.started = perf_counter()
        return True

    @property
    def records_usage(self) -> bool:
        return self.op.records_usage

    @property
    def done(self) -> bool:
        """The call has ended (or was left unopened): nothing more is recorded for it."""
        return self._ending.locked()

    @property
    def refuses(self) -> bool:
        """Strict mode would refuse the request (see :meth:`refusal`)."""
        return self.settings.strict and any(s.refusable for s in self.signals)

    def refusal(self) -> ContextLossError | None:
        """In strict mode, the error to raise instead of sending; the call ends with it."""
        try:
            error = ContextLossError([s for s in self.signals if s.refusable]) if self.refuses else None
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
        if self.done:
            return
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
        if self.done:
            return
        resp = self._unparsed_facts()
        if resp is not None:
            self.end(Outcome(resp, error_type=type(exc).__qualname__))
        else:
            self.end(Outcome(exception=exc))

    def end(self, outcome: Outcome) -> None:
        """The one end of a call, run by whoever ends it first: the response checks, the ledger and the tool-call
        check, then telemetry (which ends the span). A call that never opened (its library answered from a cache, its
        frame never left) only leaves its in-flight record."""
        if not self._ending.acquire(blocking=False):
            return
        self.duration = perf_counter() - self.started
        self.detach()
        self._leave()
        if not self.opened:
            return
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
            if self.req.state_mode is not None:  # a call that carries no state (not a model call) has no tool check
                self.tool_check = tool_calls_check(self.analysis, self.signals, resp)
            self.telemetry.end(self, outcome)
        except Exception:
            self.telemetry.internal_error("record_response" if outcome.exception is None else "record_error")
            self._end_span()

    def _discard(self) -> None:
        """Over without a span: its in-flight record left, and nothing more recorded."""
        if self._ending.acquire(blocking=False):
            self._leave()

    def _leave(self) -> None:
        flight, self.flight = self.flight, None
        if flight is not None:
            try:
                self.ledger.leave(flight)
            except Exception:
                self.telemetry.internal_error("ledger_leave")

    def _end_span(self) -> None:
        """After a failure while recording: end the span unless that failure came from ending it (a span processor's
        ``on_end`` raising), which must not end it twice."""
        try:
            if self.span.is_recording():
                self.span.end()
        except Exception:
            self.telemetry.internal_error("end_span")
