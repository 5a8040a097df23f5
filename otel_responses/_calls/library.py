"""One library call between the function the app called (the outer seam) and the places inside the library that only
a request really going out reaches (the inner observers).

The outer seam makes a :class:`LibraryCall` and puts it in ``LIBRARY_CALL`` for the duration of the call; the inner
observers find it there (a copied context, as litellm's executor and lm15's worker threads use, holds the same
object) and tell it what they see. It drives a :class:`~.call.Call`: begun when the request is known (facts,
analysis, strict mode), opened (the span) when the request leaves, ended with what the app gets. A call that never
sent (a cache hit, a mock answer) leaves nothing. Every method swallows its own failures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any

from .._analysis.facts import ResponseFacts
from .._telemetry.recorded import NOTHING_READ, Outcome
from ..attributes import STREAM_ENDED
from ..signals import ContextLossError
from .call import Call, Endpoint
from .observer import StreamObserver
from .operations import Operation
from .runtime import Runtime

Reader = Callable[[Any], "tuple[Any, str | None]"]  # a result -> (the response to read, its request id)
StreamProxy = Callable[[Any, Call], Any]  # a library's event iterator and its call -> what the app iterates

# A library's call (litellm, DSPy) in progress in this context: while it is, the SDK wrappers record nothing, so a
# library that reaches the Responses API through the `openai` SDK is recorded once, at its own seam.
LIBRARY_CALL: ContextVar[object | None] = ContextVar("otel_responses_library_call", default=None)


class LibraryCall:
    """One library call; see the module docstring."""

    __slots__ = (
        "args",
        "attempt_failed",
        "call",
        "endpoint",
        "kwargs",
        "observer",
        "op",
        "request_id",
        "route",
        "runtime",
    )

    def __init__(self, runtime: Runtime, op: Operation) -> None:
        self.runtime = runtime
        self.op = op
        self.call: Call | None = None
        self.observer: StreamObserver | None = None
        self.attempt_failed: BaseException | None = None  # what ended an attempt the library may retry
        self.args: tuple[Any, ...] = ()
        self.kwargs: Mapping[str, Any] = {}
        self.endpoint: tuple[Endpoint, frozenset[str]] | None = None
        self.request_id: str | None = None  # the reply's, when an inner observer saw it
        self.route: tuple[Endpoint | None, frozenset[str] | None, str | None] = (None, None, None)

    @property
    def started(self) -> bool:
        """The request is known: prepared, opened or being streamed."""
        return self.call is not None

    # -- the outer seam ------------------------------------------------------------------------------------------

    def enter(self) -> Token[object | None]:
        return LIBRARY_CALL.set(self)

    @staticmethod
    def leave(token: Token[object | None]) -> None:
        LIBRARY_CALL.reset(token)

    # -- the request ---------------------------------------------------------------------------------------------

    def prepare(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], endpoint: Endpoint, dropped: frozenset[str]
    ) -> None:
        """The request as the app's layer has it: facts, the analysis against the ledger and the request checks."""
        self.args, self.kwargs, self.endpoint = args, kwargs, (endpoint, dropped)
        self.call = Call.begin(self.runtime, self.op, args, kwargs, endpoint, dropped=dropped, opens=False)

    async def aprepare(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], endpoint: Endpoint, dropped: frozenset[str]
    ) -> None:
        """:meth:`prepare` in a coroutine: with a shared ledger that reads asynchronously, its reads awaited first."""
        self.args, self.kwargs, self.endpoint = args, kwargs, (endpoint, dropped)
        self.call = await Call.begin_async(self.runtime, self.op, args, kwargs, endpoint, dropped=dropped, opens=False)

    def refusal(self) -> ContextLossError | None:
        """Strict mode's refusal of the prepared request, before the library does anything: the span is opened and
        ended with it, as for the SDK."""
        call = self.call
        if call is None or not call.refuses or not call.open():
            return None
        return call.refusal()

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
        the attempt before it ends with what ended it, and the retry is a call of its own."""
        try:
            call = self.call
            if call is not None and call.opened:
                failure, self.attempt_failed = self.attempt_failed, None
                if failure is not None:
                    call.raised(failure)
                else:
                    call.end(NOTHING_READ)
                call = self.call = self._retry(call)
            if call is None or call.done:
                return
            endpoint, dropped, model = self.route
            if endpoint is not None:
                call.server, call.req.provider = endpoint
            if model:
                call.req.model = model
            if dropped is not None and dropped != call.dropped:
                call.dropped = dropped
                call.signals = [s for s in call.signals if s.name not in dropped]
            call.open()
        except Exception:
            self.runtime.telemetry.internal_error("start_call")

    def _retry(self, previous: Call) -> Call | None:
        """The retry's call: the same request, read through the same ledger view (an awaited call's reads were made,
        and the retry's are the same)."""
        assert self.endpoint is not None  # a call was begun: prepared
        endpoint, dropped = self.endpoint
        return Call.begin(
            self.runtime, self.op, self.args, self.kwargs, endpoint, dropped=dropped, opens=False, view=previous.ledger
        )

    def note_failure(self, exc: BaseException) -> None:
        """The request that left failed inside the library (which may retry it, or map the error for the app)."""
        self.attempt_failed = exc

    # -- the end -------------------------------------------------------------------------------------------------

    def returned(self, result: Any, read: Reader, stream_proxy: StreamProxy | None = None) -> Any:
        """The outer seam returned ``result``: read it (``read`` gives the response and its request id) and end the
        call, or, for a stream, hand the app what ``stream_proxy`` makes of it, whose end ends the call. Returns what
        the app gets."""
        call = self.call
        if call is None or call.done:
            return result
        if not call.opened:  # never sent: answered without a request
            call.end(NOTHING_READ)
            return result
        if call.req.stream and stream_proxy is not None:
            return call.stream(result, stream_proxy)
        facts: ResponseFacts | None = None
        try:
            response, request_id = read(result)
            facts = self.op.read(response, call.settings, request_id)
        except Exception:
            self.runtime.telemetry.internal_error("read_response")
        call.end(Outcome(facts))
        return result

    def failed(self, exc: BaseException) -> None:
        """The outer seam raised ``exc`` (what the app sees)."""
        call = self.call
        if call is None:
            return
        if call.opened:
            call.raised(exc)
        else:
            call.end(NOTHING_READ)

    # -- streams observed from inside (DSPy's provider parses the SSE events itself) -----------------------------

    def stream_event(self, event: Any) -> None:
        """One event of the opened call's stream, as the library received it (the observer guards itself)."""
        observer = self.observer
        if observer is None:
            call = self.call
            if call is None or not call.opened:
                return
            observer = self.observer = StreamObserver(call, self.request_id)
        observer.event(event)

    def stream_over(self, how: str) -> None:
        """The library's stream ended (``exhausted``, ``closed``): a call without a terminal event ends so."""
        if self.observer is not None:
            self.observer.ended(how)
            return
        call = self.call
        if call is not None:
            call.end(Outcome(extra={STREAM_ENDED: how}) if call.opened else NOTHING_READ)

    def stream_failed(self, exc: BaseException) -> None:
        """The library's stream raised ``exc`` (an HTTP error before any event, or mid-stream)."""
        self.failed(exc)


def current() -> LibraryCall | None:
    """The library call in progress in this context, if any."""
    pending = LIBRARY_CALL.get()
    return pending if isinstance(pending, LibraryCall) else None
