"""One forwarded request as the instrumentation records it: the :class:`~otel_responses._calls.call.Call` the SDK
wrapper would have made for the same call, fed what the proxy relays. No second parser and no second rule: the
request body is the mapping ``request_facts`` reads (the SDK's keywords are the body's keys), a JSON response is
read through ``Fields`` as the SDK's models are, a stream through the raw SSE observer, and the upstream's errors
become the SDK's exceptions.

Every method swallows its own failures (counted, as in-process): nothing here changes what the client receives.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.context import Context

from .._analysis.facts import Identity
from .._calls.call import Call, Endpoint
from .._calls.observer import Fields, StreamObserver
from .._calls.paths import Route
from .._calls.runtime import Runtime
from .._patching.raw_streams import sse_feed
from .._telemetry.recorded import NOTHING_READ, Outcome
from ..attributes import REQUEST_ID
from ..signals import ContextLossError
from .encoding import NotAnalysed, decoder
from .errors import connection_error, status_error


def _is_event_stream(headers: Mapping[str, str]) -> bool:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower() == "text/event-stream"


class Exchange:
    """The call of one forwarded request: opened before the request goes upstream (strict mode refuses there), fed
    the response's head and body chunks as they are relayed, and ended by what ends the body."""

    __slots__ = (
        "_call",
        "_chunks",
        "_collect",
        "_decode",
        "_feed",
        "_limit",
        "_observer",
        "_reads",
        "_request_id",
        "_size",
        "_status",
        "_telemetry",
    )

    def __init__(self, call: Call, limit: int, reads: bool = True) -> None:
        self._call = call
        self._reads = reads  # the operation reads its answer: else only an error's body is
        self._telemetry = call.telemetry
        self._limit = limit
        self._status = 0
        self._request_id: str | None = None
        self._observer: StreamObserver | None = None
        self._feed: Callable[[bytes], None] | None = None
        self._decode: Callable[[bytes], bytes] | None = None
        self._collect = False
        self._chunks: list[bytes] = []
        self._size = 0

    @classmethod
    async def begin(
        cls,
        runtime: Runtime,
        route: Route,
        keywords: Mapping[str, Any] | None,
        endpoint: Endpoint,
        identity: Identity,
        parent: Context,
        limit: int,
    ) -> Exchange | None:
        """The call, made as ``identity``, begun (a shared ledger's reads awaited first) and its span opened as a
        child of the client's own span (``parent``: the context its trace headers carry); None when it cannot be
        recorded (counted): the request is forwarded all the same."""
        kwargs: Mapping[str, Any] = route.kwargs
        if keywords is not None:
            kwargs = {**keywords, **route.kwargs} if route.kwargs else keywords
        call = await Call.begin_async(
            runtime, route.operation, route.args, kwargs, endpoint, identity=identity, opens=False
        )
        if call is None or not call.open(parent=parent):
            return None
        return cls(call, limit, route.reads)

    def refusal(self) -> ContextLossError | None:
        """Strict mode's refusal (the span ends with it), to answer instead of forwarding; None to forward."""
        return self._call.refusal()

    # -- the answer ------------------------------------------------------------------------------------------------

    def unreachable(self, timed_out: bool) -> None:
        """The upstream could not be reached, or did not answer in time."""
        self._call.raised(connection_error(timed_out))

    def answered(self, status: int, headers: Mapping[str, str]) -> None:
        """The response's head: a stream of events is observed as it is relayed, anything else collected (within the
        limit) and read at its end."""
        call = self._call
        if call.done:
            return
        try:
            self._status = status
            request_id = headers.get("x-request-id")
            self._request_id = request_id
            self._decode = decoder(headers.get("content-encoding"), self._limit)
            if 200 <= status < 300 and _is_event_stream(headers):
                self._observer = StreamObserver(call, request_id)
                self._feed = sse_feed(self._observer) if self._decode is not None else None
            else:
                self._collect = self._decode is not None and (self._reads or not 200 <= status < 300)
        except Exception:
            self._telemetry.internal_error("read_response")

    def chunk(self, data: bytes) -> None:
        """A chunk of the body, as relayed (compressed, if it came so)."""
        feed = self._feed
        if feed is not None:
            try:
                decode = self._decode
                feed(decode(data) if decode is not None else data)
            except NotAnalysed:
                self._feed = None  # the rest of the stream is relayed, not observed
            except Exception:
                self._feed = None
                self._telemetry.internal_error("observe_raw_stream")
        elif self._collect:
            self._size += len(data)
            if self._size > self._limit:
                self._collect = False
                self._chunks.clear()
            else:
                self._chunks.append(data)

    def finished(self) -> None:
        """The body ended as the upstream sent it: the call ends with what it said."""
        observer = self._observer
        if observer is not None:
            observer.ended("exhausted")
            return
        call = self._call
        if call.done:
            return
        try:
            self._read(call)
        except Exception:
            self._telemetry.internal_error("read_response")
            call.end(NOTHING_READ)

    def _read(self, call: Call) -> None:
        status, request_id = self._status, self._request_id
        parsed: Any = None
        readable = self._collect
        if readable:
            data = b"".join(self._chunks)
            self._chunks.clear()
            decode = self._decode
            try:
                text = decode(data) if decode is not None else data
                parsed = json.loads(text) if text.strip() else None
            except NotAnalysed:
                readable = False
            except ValueError as exc:
                if status < 400:  # the SDK fails to parse it too
                    extra = {REQUEST_ID: request_id} if request_id is not None else None
                    call.end(Outcome(None, type(exc).__qualname__, extra=extra))
                    return
        if status >= 400 or status < 200:
            call.raised(status_error(status, parsed if readable else None, request_id))
        elif not readable and self._reads:
            call.end(NOTHING_READ)
        else:
            result = Fields.read(parsed)
            if isinstance(result, Fields) and request_id is not None:
                result["_request_id"] = request_id  # as the SDK sets it on the models it returns
            call.returned(result)

    def failed(self, exc: BaseException) -> None:
        """The upstream failed mid-body (a cut connection, a timeout): the client saw the same cut."""
        self._call.raised(exc)

    def abandoned(self, exc: BaseException) -> None:
        """The client went away before the body ended: a stream ends ``closed``, as when an app closes one."""
        observer = self._observer
        if observer is not None:
            observer.ended("closed")
        else:
            self._call.raised(exc)
