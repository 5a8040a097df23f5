"""Telemetry of a call, from the call itself: the only module that starts and ends spans and records metrics.

``Telemetry.start(call)`` opens the call's span; ``Telemetry.end(call, outcome)`` records its metrics (``metrics``)
and, when the span records, its response side and signal events (``spans``); a call that raised a signal or failed
is also heard (``events``: the GenAI conventions' log events; ``signal_log``: a line for a person), then the span
ends. A call is handed whole: what either side needs is read from it, never unpacked for it. No payload reaches here.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry._logs import Logger, get_logger
from opentelemetry.context import Context
from opentelemetry.metrics import Meter
from opentelemetry.trace import SpanKind, Tracer

from .. import attributes as a
from .._analysis.facts import effective_store
from ..signals import LOSS_SEVERITIES
from ..version import __version__
from . import sessions, spans
from .events import Events
from .metrics import Attributes, Metrics
from .recording import Recording
from .signal_log import SignalLog

if TYPE_CHECKING:
    from .recorded import Outcome
    from .recorded import Recorded as Call

__all__ = ["Attributes", "Telemetry"]

_log = logging.getLogger(__name__)


class Telemetry:
    """The tracer, the instruments and the settings of one ``instrument()``."""

    def __init__(self, tracer: Tracer, meter: Meter, settings: Recording, logger: Logger | None = None) -> None:
        """``logger``: where the log events go (by default the global logger provider's, a no-op one until an SDK's
        is set)."""
        self.tracer = tracer
        self.meter = meter  # for a front end's instruments of its own (the proxy's count of unrecorded calls)
        self.settings = settings
        self.metrics = Metrics(meter, settings)
        self.events = Events(logger or get_logger(__name__, __version__)) if settings.genai_events else None
        signal_log = SignalLog(settings.log_signals)
        self.signal_log = signal_log if signal_log.on else None
        self.sessions = settings.session_id_from_lineage

    def start(self, call: Call) -> None:
        """Open the call's CLIENT span with every request-side attribute, so samplers see them (they are built before
        the span exists, whether it will record or not), and make it the call's context."""
        attrs, links = spans.request_attributes(call, self.settings.zdr)
        if self.sessions:
            sessions.at_start(attrs, call)
        span = self.tracer.start_span(spans.name_of(call), kind=SpanKind.CLIENT, attributes=attrs, links=links)
        call.span = span
        call.context = trace.set_span_in_context(span)

    def end(self, call: Call, outcome: Outcome) -> None:
        """Record the call, then end its span. A span that does not record (sampled out) gets nothing more built:
        its metrics are recorded all the same."""
        signals = call.signals
        context_loss = any(s.severity in LOSS_SEVERITIES for s in signals) if signals else False
        store = effective_store(call.req, outcome.response)
        error_type = spans.error_type_of(outcome)
        self.metrics.record(call, outcome, error_type, context_loss, store)
        span = call.span
        if span.is_recording():
            spans.finish(span, call, outcome, context_loss, store)
            if self.sessions:
                sessions.at_end(span, call, outcome)
        if signals or error_type is not None:
            self._heard(call, outcome, error_type)
        span.end()

    def _heard(self, call: Call, outcome: Outcome, error_type: str | None) -> None:
        """The log events of a call that raised a signal or failed, and the console lines of its signals; a failure
        of either is swallowed here, so that the span still ends."""
        try:
            if self.events is not None:
                self.events.emit(call, outcome, error_type)
        except Exception:
            self.internal_error("emit_events")
        try:
            if self.signal_log is not None and call.signals:
                self.signal_log.record(call, outcome)
        except Exception:
            self.internal_error("log_signals")

    def chunk_attributes(self, call: Call) -> Attributes | None:
        """The attributes of a stream's chunk timings, or None when chunk timing is off (see ``Metrics``)."""
        return self.metrics.chunk_attributes(call)

    def next_chunk(self, seconds: float, attrs: Attributes, context: Context | None) -> None:
        """A chunk after the first arrived, ``seconds`` after the previous one."""
        self.metrics.next_chunk(seconds, attrs, context)

    def internal_error(self, step: str) -> None:
        """Count and log (at debug, without the message, which may echo payload) a swallowed failure.

        Call from an ``except`` block."""
        exc = sys.exc_info()[1]
        where = ""
        tb = exc.__traceback__ if exc is not None else None
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f" at {tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
        _log.debug("otel-responses: %s failed (%s%s); the app is unaffected", step, type(exc).__qualname__, where)
        try:
            self.metrics.internal_errors.add(1, {a.INSTRUMENTATION_STEP: step})
        except Exception as error:  # the metrics SDK itself failing (or a step that is no string): said, at debug
            _log.debug("otel-responses: counting the failure of %s failed too (%s)", step, type(error).__qualname__)
