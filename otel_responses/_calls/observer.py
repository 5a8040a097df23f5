"""The events of one streamed response, as any front end receives them (an SDK stream, a raw body's SSE decoded
beside the app, a WebSocket's frames, a library's parsed events, a proxy's relayed bytes): each watched for what the
call's end needs, the terminal one ending the call. JSON read by attribute (``Fields``) as the facts read the SDK's
models, so one reader serves parsed bodies and models alike.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from time import perf_counter
from typing import Any

from .. import attributes as a
from .._analysis.facts import ResponseFacts, response_facts, with_stream_items
from .._fingerprint import Fingerprinter
from .._items import OPAQUE_FIELDS, ItemMeta, item_meta
from .._telemetry.metrics import Attributes
from .._telemetry.recorded import Outcome
from .call import Call

_log = logging.getLogger(__name__)
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
# The events an observer reads; a raw body's other events are not even parsed.
OBSERVED_EVENTS = frozenset({"response.output_item.done", "error", *TERMINAL_EVENTS})


class Fields(dict[str, Any]):
    """A JSON object read by attribute, as the facts read the SDK's models (a missing field: AttributeError).

    A nested plain dict (a body ``json.loads`` parsed) is read the same way, wrapped when it is read rather than
    converted ahead: a long body costs one parse in C and a shallow copy of each object the facts read."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return Fields(value) if type(value) is dict else value

    @staticmethod
    def read(value: Any) -> Any:
        """A parsed JSON value readable by attribute: an object as ``Fields``, anything else as it is."""
        return Fields(value) if type(value) is dict else value


def as_fields(value: Any) -> Any:
    """JSON-shaped data (dicts, lists) readable by attribute, recursively."""
    if isinstance(value, dict):
        return Fields((key, as_fields(item)) for key, item in value.items())
    if isinstance(value, list):
        return [as_fields(item) for item in value]
    return value


class StreamObserver:
    """Watches the events of one stream and ends its call (which ends once, whoever ends it first).

    Whatever holds the body (a stream proxy, a raw response proxy, an iterator over its bytes) holds the
    observer too; when the last holder is garbage collected before the stream ended, the span ends
    ``abandoned``.
    """

    __slots__ = ("_call", "_chunk_attrs", "_first_chunk", "_holders", "_items", "_last_chunk", "_request_id")

    def __init__(self, call: Call, request_id: str | None) -> None:
        self._call = call
        self._request_id = request_id
        self._items: list[Any] = []  # the items of `output_item.done` events
        self._first_chunk = False
        self._chunk_attrs: Attributes | None = None  # set on the first chunk when chunk timing is on
        self._last_chunk = 0.0
        self._holders: list[None] = []  # one entry per live holder; list append/pop are atomic

    @property
    def done(self) -> bool:
        """The call has ended."""
        return self._call.done

    def hold(self) -> None:
        """One more object carries the body."""
        self._holders.append(None)

    def release(self) -> None:
        """A holder was garbage collected: the last one ends an unfinished stream as abandoned."""
        with contextlib.suppress(IndexError):
            self._holders.pop()
        if not self._holders:
            self.ended("abandoned")

    def internal_error(self, step: str) -> None:
        """Count a swallowed failure while the call is open, else only log it. Call from an ``except`` block."""
        call = self._call
        if not call.done:
            call.telemetry.internal_error(step)
        else:
            _log.debug("otel-responses: %s failed (%s); the app is unaffected", step, type(sys.exc_info()[1]).__name__)

    def event(self, event: Any) -> None:
        """One event the app received. Runs once per event (a delta, mostly): the common case is a clock check
        and one set lookup, in this one frame."""
        call = self._call
        if call.done:
            return
        try:
            if self._chunk_attrs is not None or not self._first_chunk:
                self._chunk(call)
            if type(event) is dict:  # a stream parsed `to=Stream[dict]` (or object): read it as the SDK's models are
                event = as_fields(event) if event.get("type") in OBSERVED_EVENTS else Fields(type=event.get("type"))
            kind = getattr(event, "type", None)
            if kind in OBSERVED_EVENTS:
                self._observe(call, event, kind)
        except Exception:
            call.telemetry.internal_error("observe_stream_event")

    def _chunk(self, call: Call) -> None:
        """The first chunk's time; with chunk timing on, each later chunk's time since the previous one's end."""
        now = perf_counter()
        chunk_attrs = self._chunk_attrs
        if chunk_attrs is not None:
            call.telemetry.next_chunk(now - self._last_chunk, chunk_attrs, call.context)
        else:
            self._first_chunk = True
            call.chunk(now)  # recorded when the call ends
            self._chunk_attrs = call.telemetry.chunk_attributes(call)
        self._last_chunk = now

    def _observe(self, call: Call, event: Any, kind: str) -> None:
        if kind == "response.output_item.done":
            # The item itself, read at the end only if needed (see `streamed_items`): the app holds it anyway.
            self._items.append(getattr(event, "item", None))
        elif kind in TERMINAL_EVENTS:
            self._terminal(call, getattr(event, "response", None), kind)
        else:  # error
            code = getattr(event, "code", None) or getattr(getattr(event, "error", None), "code", None)
            self.fail_with(code if isinstance(code, str) and code else "error")

    def _terminal(self, call: Call, response: Any, kind: str) -> None:
        resp = response_facts(response, call.settings, self._request_id)
        if self._items:
            resp = with_stream_items(resp, streamed_items(self._items, resp, call.settings.fingerprinter))
        error_type = None
        if kind == "response.failed":
            code = getattr(getattr(response, "error", None), "code", None)
            error_type = code if isinstance(code, str) and code else "response_failed"
        call.end(Outcome(resp, error_type))

    def fail_with(self, error_type: str) -> None:
        """An `error` event the SDK yielded rather than raised."""
        self._call.end(Outcome(None, error_type, extra={a.REQUEST_ID: self._request_id} if self._request_id else None))

    def raised(self, exc: BaseException) -> None:
        self._call.raised(exc)

    def ended(self, how: str) -> None:
        """No terminal event: the app closed the stream, left its context, or dropped it."""
        if self._call.done:
            return
        extra: dict[str, Any] = {a.STREAM_ENDED: how}
        if self._request_id:
            extra[a.REQUEST_ID] = self._request_id
        self._call.end(Outcome(extra=extra))


def _opaque_type(item: Any) -> bool:
    """Whether an output item is of a type that carries an opaque payload."""
    kind = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
    return kind in OPAQUE_FIELDS


def streamed_items(items: list[Any], resp: ResponseFacts, fingerprints: Fingerprinter) -> tuple[ItemMeta, ...]:
    """Metadata of a stream's ``output_item.done`` items, read once the stream ended. When the terminal response
    carries its output, only the items with an opaque payload matter (other copies of it: see
    ``facts.with_stream_items``); else all of them stand for the output."""
    if resp.output_items:
        items = [item for item in items if _opaque_type(item)]
    return tuple([item_meta(item, fingerprints) for item in items])
