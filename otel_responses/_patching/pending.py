"""One library call between the function the app called (the outer seam) and the places inside the library that only
a request really going out reaches (the inner observers).

The outer seam makes a :class:`Pending` and puts it in ``call.LIBRARY_CALL`` for the duration of the call; the inner
observers find it there (a copied context, as litellm's executor and lm15's worker threads use, holds the same
object) and tell it what they see. It drives the generic :class:`~otel_responses._patching.call.Call`: checked when
the request is known (facts, analysis, strict mode), opened (the span) when the request leaves, ended with what the
app gets.
A call that never sent (a cache hit, a mock answer) leaves nothing. Every method swallows its own failures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import Token
from typing import Any

from .._analysis.facts import ResponseFacts
from .._telemetry.recorded import NOTHING_READ, Outcome
from .._telemetry.telemetry import Telemetry
from ..attributes import STREAM_ENDED
from ..signals import ContextLossError
from .call import LIBRARY_CALL, Call, Endpoint
from .operations import Operation
from .streams import AsyncStreamProxy, StreamObserver, SyncStreamProxy

Reader = Callable[[Any], "tuple[Any, str | None]"]  # a result -> (the response to read, its request id)


class Pending:
    """One library call; see the module docstring."""

    __slots__ = (
        "args",
        "attempt_failed",
        "call",
        "dropped",
        "endpoint",
        "kwargs",
        "observer",
        "op",
        "opened",
        "request_id",
        "route",
        "telemetry",
    )

    def __init__(self, telemetry: Telemetry, op: Operation) -> None:
        self.telemetry = telemetry
        self.op = op
        self.call: Call | None = None
        self.opened = False
        self.observer: StreamObserver | None = None
        self.attempt_failed: BaseException | None = None  # what ended an attempt the library may retry
        self.args: tuple[Any, ...] = ()
        self.kwargs: Mapping[str, Any] = {}
        self.endpoint: Endpoint | None = None
        self.dropped: frozenset[str] = frozenset()
        self.request_id: str | None = None  # the reply's, when an inner observer saw it
        self.route: tuple[Endpoint | None, frozenset[str] | None, str | None] = (None, None, None)

    @property
    def started(self) -> bool:
        """The request is known: prepared, opened or being streamed."""
        return self.call is not None or self.opened or self.observer is not None

    # -- the outer seam ------------------------------------------------------------------------------------------

    def enter(self) -> Token[object | None]:
        return LIBRARY_CALL.set(self)

    @staticmethod
    def leave(token: Token[object | None]) -> None:
        LIBRARY_CALL.reset(token)

    # -- the request ---------------------------------------------------------------------------------------------

    def _build(self) -> Call | None:
        try:
            call = Call(
                self.telemetry, self.op, None, self.args, self.kwargs, endpoint=self.endpoint, dropped=self.dropped
            )
        except Exception:
            self.telemetry.internal_error("start_call")
            return None
        return call

    def prepare(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], endpoint: Endpoint, dropped: frozenset[str]
    ) -> None:
        """The request as the app's layer has it: facts, the analysis against the ledger and the request checks."""
        self.args, self.kwargs, self.endpoint, self.dropped = args, kwargs, endpoint, dropped
        call = self._build()
        if call is None:
            return
        try:
            call.check()
        except Exception:
            self.telemetry.internal_error("start_call")
            return
        self.call = call

    async def aprepare(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], endpoint: Endpoint, dropped: frozenset[str]
    ) -> None:
        """:meth:`prepare` in a coroutine: with a shared ledger that reads asynchronously, its reads awaited first
        (as ``wrappers.Method.begin_async`` does), then the analysis answered from what it holds."""
        self.args, self.kwargs, self.endpoint, self.dropped = args, kwargs, endpoint, dropped
        call = self._build()
        if call is None:
            return
        await call.await_reads()
        try:
            call.check()
        except Exception:
            self.telemetry.internal_error("start_call")
            return
        self.call = call

    def refusal(self) -> ContextLossError | None:
        """Strict mode's refusal of the prepared request, before the library does anything: the span is opened and
        ended with it, as for the SDK."""
        call = self.call
        if call is None or not call.settings.strict or not any(s.refusable for s in call.signals):
            return None
        if not self._open(call):
            return None
        self.call = None
        return call.refusal()

    def _open(self, call: Call) -> bool:
        try:
            call.open(attach=False)
        except Exception:
            self.telemetry.internal_error("start_call")
            call.discard()
            self.call = None
            return False
        return True

    # -- the inner observers --------------------------------------------------------------------------------------

    def routed(
        self, endpoint: Endpoint | None = None, dropped: frozenset[str] | None = None, model: str | None = None
    ) -> None:
        """Where the request will go, as the library's handler knows it better than the app's arguments: the
        provider it reaches, whether it bridges (``dropped``), the model or deployment without a routing prefix
        (litellm's ``azure/<deployment>`` becomes ``<deployment>``). Kept for :meth:`sent`."""
        self.route = (endpoint, dropped, model)

    def sent(self) -> None:
        """A request leaves now: the call opens. A second request under one outer call is the library retrying:
        the attempt before it ends with what ended it."""
        try:
            failure, self.attempt_failed = self.attempt_failed, None
            if self.opened:
                previous = self.call
                if previous is not None:
                    if failure is not None:
                        previous.raised(failure)
                    else:
                        previous.end(NOTHING_READ)
                self.opened = False
                self.call = self._build()
                if self.call is None:
                    return
                if previous is not None:
                    self.call.ledger = previous.ledger  # an awaited call's reads were made: the retry's are the same
                self.call.check()
            call = self.call
            if call is None:
                return
            endpoint, dropped, model = self.route
            if endpoint is not None:
                call.server, call.req.provider = endpoint
            if model:
                call.req.model = model
            if dropped is not None and dropped != call.dropped:
                call.dropped = dropped
                call.signals = [s for s in call.signals if s.name not in dropped]
            self.opened = self._open(call)
        except Exception:
            self.telemetry.internal_error("start_call")

    def note_failure(self, exc: BaseException) -> None:
        """The request that left failed inside the library (which may retry it, or map the error for the app)."""
        self.attempt_failed = exc

    # -- the end -------------------------------------------------------------------------------------------------

    def _take(self) -> Call | None:
        call, self.call = self.call, None
        if call is None:
            return None
        if not self.opened:  # never sent: answered without a request
            try:
                call.discard()
            except Exception:
                self.telemetry.internal_error("ledger_leave")
            return None
        return call

    def returned(self, result: Any, read: Reader) -> Any:
        """The outer seam returned ``result``: read it (``read`` gives the response and its request id) and end the
        call, or, for a stream, hand the app the proxy whose end ends it. Returns what the app gets."""
        call = self._take()
        if call is None:
            return result
        if call.req.stream:
            return call.stream(result, _stream_proxy(result))
        facts: ResponseFacts | None = None
        try:
            response, request_id = read(result)
            facts = self.op.read(response, call.settings, request_id)
        except Exception:
            self.telemetry.internal_error("read_response")
        call.end(Outcome(facts))
        return result

    def failed(self, exc: BaseException) -> None:
        """The outer seam raised ``exc`` (what the app sees)."""
        call = self._take()
        if call is not None:
            call.raised(exc)

    # -- streams observed from inside (DSPy's provider parses the SSE events itself) -----------------------------

    def stream_event(self, event: Any) -> None:
        """One event of the opened call's stream, as the library received it (the observer guards itself)."""
        observer = self.observer
        if observer is None:
            call = self.call
            if call is None or not self.opened:
                return
            self.call = None
            observer = self.observer = StreamObserver(call, self.request_id)
        observer.event(event)

    def stream_over(self, how: str) -> None:
        """The library's stream ended (``exhausted``, ``closed``): a call without a terminal event ends so."""
        observer = self.observer
        if observer is not None:
            observer.ended(how)
            return
        call = self._take()
        if call is not None:
            call.end(Outcome(extra={STREAM_ENDED: how}))

    def stream_failed(self, exc: BaseException) -> None:
        """The library's stream raised ``exc`` (an HTTP error before any event, or mid-stream)."""
        if self.observer is not None:
            self.observer.raised(exc)
        else:
            self.failed(exc)


def _stream_proxy(result: Any) -> Callable[[Any, Call], Any]:
    """The proxy for a library's event iterator: its events are the SDK's shape (``type``, ``item``, ``response``)."""
    return AsyncStreamProxy.for_call if hasattr(result, "__anext__") else SyncStreamProxy.for_call


def current() -> Pending | None:
    """The library call in progress in this context, if any."""
    pending = LIBRARY_CALL.get()
    return pending if isinstance(pending, Pending) else None
