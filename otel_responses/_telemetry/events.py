"""The GenAI conventions' log events of a call, so that backends reading the conventions show what went wrong:
one ``gen_ai.evaluation.result`` per signal and one ``gen_ai.client.operation.exception`` for a call that failed.

They go through the OpenTelemetry Logs API, as opentelemetry-util-genai emits its events: ``Logger.emit`` of a
``LogRecord`` with ``event_name``, in the context of the call's span (so each record carries its trace and span
ids), before the span ends. Metadata only, as on the span: the catalogue's words, severities, ids, the signal's
detail (capped like the span event's), and an exception's class, never its message or stacktrace.

What it saves: a call that raises no signal and does not fail builds nothing here (one test in ``Telemetry.end``).
With no ``LoggerProvider`` configured the logger is the API's no-op one; ``Logger.enabled()`` (OpenTelemetry API
1.41 and later) answers false, so no record is built either. Older APIs have no ``enabled()``: the record is
built and dropped, a few microseconds per signal, and only on a call that raised one.
"""

from __future__ import annotations

from collections.abc import Callable
from time import time_ns
from typing import TYPE_CHECKING

from opentelemetry._logs import Logger, LogRecord, SeverityNumber
from opentelemetry.util.types import AttributeValue

from .. import attributes as a
from ..signals import ERROR, INFO, WARNING, Signal
from .bounds import cap, cap_attributes
from .recorded import response_id_of

if TYPE_CHECKING:
    from .recorded import Outcome
    from .recorded import Recorded as Call

Attributes = dict[str, AttributeValue]

# The severity of a signal's record, so that a log view colours it as the catalogue grades it.
_SEVERITY: dict[str, tuple[SeverityNumber, str]] = {
    ERROR: (SeverityNumber.ERROR, "ERROR"),
    WARNING: (SeverityNumber.WARN, "WARN"),
    INFO: (SeverityNumber.INFO, "INFO"),
}


def explanation(signal: Signal) -> str:
    """The catalogue's meaning of the signal and its fix, in one sentence pair (the variant's, where the signal's
    detail names one)."""
    return f"{signal.meaning}. Fix: {signal.fix}."


def exception_type(exc: BaseException) -> str:
    """The exception's class, qualified by its module as the SDK's ``record_exception`` writes it
    (``openai.BadRequestError``; a built-in's bare name)."""
    kind = type(exc)
    module = kind.__module__
    return f"{module}.{kind.__qualname__}" if module and module != "builtins" else kind.__qualname__


class Events:
    """The log events of one ``instrument()``, through its logger."""

    def __init__(self, logger: Logger) -> None:
        self._logger = logger
        enabled = getattr(logger, "enabled", None)
        self._enabled: Callable[..., bool] | None = enabled if callable(enabled) else None

    def emit(self, call: Call, outcome: Outcome, error_type: str | None) -> None:
        """The call's events: one per signal, and one for its failure (``error_type``: the span's ``error.type``).
        Call only when there is one to emit."""
        if call.signals and self._wanted(a.GEN_AI_EVALUATION_RESULT_EVENT):
            response_id = response_id_of(call, outcome)
            for signal in call.signals:
                number, text = _SEVERITY[signal.severity]
                attrs: Attributes = {
                    **cap_attributes(signal.detail),  # the span event's detail keys, capped as they are there
                    a.GEN_AI_EVALUATION_NAME: signal.name,
                    a.GEN_AI_EVALUATION_SCORE_LABEL: signal.severity,
                    a.GEN_AI_EVALUATION_EXPLANATION: explanation(signal),
                }
                if response_id is not None:
                    attrs[a.GEN_AI_RESPONSE_ID] = response_id
                self._emit(a.GEN_AI_EVALUATION_RESULT_EVENT, number, text, attrs, call)
        if error_type is not None and self._wanted(a.GEN_AI_CLIENT_OPERATION_EXCEPTION_EVENT):
            exc = outcome.exception
            kind = cap(exception_type(exc)) if exc is not None else error_type
            self._emit(
                a.GEN_AI_CLIENT_OPERATION_EXCEPTION_EVENT, SeverityNumber.WARN, "WARN", {a.EXCEPTION_TYPE: kind}, call
            )

    def _wanted(self, event_name: str) -> bool:
        """Whether the logger would take a record of ``event_name`` (always, with an API too old to say)."""
        enabled = self._enabled
        return True if enabled is None else bool(enabled(event_name=event_name))

    def _emit(self, name: str, number: SeverityNumber, text: str, attrs: Attributes, call: Call) -> None:
        record = LogRecord(
            timestamp=time_ns(),
            context=call.context,
            severity_number=number,
            severity_text=text,
            attributes=attrs,
            event_name=name,
        )
        self._logger.emit(record)
