"""``session.id`` on the spans of a lineage (the ``session_id_from_lineage`` setting), so that backends that group
traces by the general session convention show one conversation as one session.

The value is the lineage id; a ``session.id`` the app put in OpenTelemetry baggage wins (read from the context the
span starts in, which the span's own context keeps). It is set when the span starts, where the lineage is known
then (so samplers see it), else when it ends: a first turn names its lineage only when its response's id comes.
``gen_ai.conversation.id`` is untouched: it stays the API's conversation id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry import baggage
from opentelemetry.context import Context
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from .. import attributes as a
from .bounds import cap
from .recorded import lineage_id_of

if TYPE_CHECKING:
    from .recorded import Outcome
    from .recorded import Recorded as Call


def from_baggage(context: Context | None = None) -> str | None:
    """The app's ``session.id`` in OpenTelemetry baggage (of ``context``, else the current one), capped."""
    value = baggage.get_baggage(a.SESSION_ID, context)
    return cap(value) if isinstance(value, str) and value else None


def at_start(attrs: dict[str, AttributeValue], call: Call) -> None:
    """Into a starting span's attributes: the app's session, else the lineage's when it is known already."""
    session = from_baggage() or (cap(call.lineage.lineage_id) if call.lineage.lineage_id is not None else None)
    if session is not None:
        attrs[a.SESSION_ID] = session


def at_end(span: Span, call: Call, outcome: Outcome) -> None:
    """On a recording span about to end: the session of a first turn, which its response has just named (nothing
    when the start set one)."""
    if call.lineage.lineage_id is not None or from_baggage(call.context) is not None:
        return
    lineage = lineage_id_of(call, outcome)
    if lineage is not None:
        span.set_attribute(a.SESSION_ID, cap(lineage))
