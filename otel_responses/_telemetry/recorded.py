"""What telemetry reads of a call, and how a call ended: the one shape both sides agree on, so telemetry depends on
no wrapper (a :class:`~otel_responses._calls.call.Call` is a ``Recorded``, and tests may record plain ones)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol

from opentelemetry.context import Context
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from .._analysis.analysis import Analysis
from .._analysis.facts import RequestFacts, ResponseFacts
from .._analysis.lineage import Lineage
from ..ledger import CallLedger
from ..signals import Signal
from .bounds import cap


class Server(NamedTuple):
    """Where a call went: the host and port of the client's base URL (``server.address``, ``server.port``)."""

    address: str | None
    port: int | None


NO_SERVER = Server(None, None)


class Outcome(NamedTuple):
    """How a call ended, handed whole to ``Telemetry.end``: what the API answered (when it was read), or the exception
    the call raised, and what only the end knows."""

    response: ResponseFacts | None = None
    # A response that arrived but failed (a stream's `response.failed`, an `error` event: the server's code), or
    # whose parsing failed (the exception's class name).
    error_type: str | None = None
    exception: BaseException | None = None  # the call raised, with no answer read
    extra: Mapping[str, AttributeValue] | None = None  # a stream's end, the request id of a body left unread


NOTHING_READ = Outcome()


class Recorded(Protocol):
    """A call as telemetry reads it: its request, where it went, its ledger view (was a shared read out of reach?),
    its lineage, signals and tool-call check; the span and context telemetry gives it; its times."""

    req: RequestFacts
    analysis: Analysis
    server: Server
    ledger: CallLedger
    lineage: Lineage
    signals: list[Signal]
    tool_check: str | None  # `openai_responses.tool_calls.check`, known when the call ends
    span: Span
    context: Context | None
    duration: float
    first_chunk: float | None

    @property
    def records_usage(self) -> bool:
        """The call consumes tokens: token usage is recorded."""
        ...


def response_id_of(call: Recorded, outcome: Outcome) -> str | None:
    """The response a call's signals are about: the one it made, else the one it read (``retrieve``); capped, as
    the span's ``gen_ai.response.id``."""
    resp = outcome.response
    if resp is not None and resp.response_id is not None:
        return cap(resp.response_id)
    target = call.req.target_response_id
    return cap(target) if target is not None else None


def lineage_id_of(call: Recorded, outcome: Outcome) -> str | None:
    """The call's lineage id; a first turn's is the id of the response it made (known only at its end)."""
    lineage = call.lineage
    if lineage.lineage_id is not None:
        return lineage.lineage_id
    resp = outcome.response
    return lineage.of_response(resp.response_id) if resp is not None and resp.response_id is not None else None
