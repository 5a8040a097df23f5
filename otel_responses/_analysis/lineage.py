"""Where a call sits in its conversation: its turn, the lineage it belongs to, and the span of the turn it
continues, so that every turn of one conversation can be found and followed across traces.

A turn is 1 for a first call (one that continues nothing) and the parent's turn + 1 for a call that continues a
response the ledger knows: the parent of a chained call, the latest earlier response a replay carries, the previous
turn of a conversation. The lineage id is the conversation's id in ``conversation`` mode, else the id of the first
response of the chain or replay (a replay of the app's messages alone continues the turn they were given to, see
``Analysis.continued``). When the parent is unknown (evicted, made by another process the ledger cannot
reach, another key) the turn is unknown too: never a false 1 that would start a new lineage.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..attributes import OPERATION_CHAT, OPERATION_COMPACT
from ..ledger import Entry
from .analysis import Analysis
from .facts import CLIENT_REPLAY, CONVERSATION, SERVER_CHAIN, SINGLE_TURN, RequestFacts

# Turn-depth buckets for metrics: few enough to keep series low, split where context trouble changes (truncation
# and compaction live deep).
_DEPTHS = ((1, "1"), (4, "2-4"), (16, "5-16"))
DEEPEST = "17+"
DEPTHS = (*(name for _, name in _DEPTHS), DEEPEST)

SpanIds = tuple[int, int]  # (trace id, span id)


@dataclass(slots=True)
class Lineage:
    """A call's place in its conversation; ``own``: its span's ids, once the span exists."""

    turn: int | None = None
    lineage_id: str | None = None
    continues: SpanIds | None = None  # the span of the turn this call continues, when known
    own: SpanIds | None = None

    def depth(self) -> str | None:
        """The turn-depth bucket (``1``, ``2-4``, ``5-16``, ``17+``); None when the turn is unknown."""
        turn = self.turn
        if turn is None:
            return None
        for limit, name in _DEPTHS:
            if turn <= limit:
                return name
        return DEEPEST

    def of_response(self, response_id: str) -> str | None:
        """The lineage id of the response this call made: a first turn starts a lineage named by its response."""
        if self.lineage_id is not None:
            return self.lineage_id
        return response_id if self.turn == 1 else None


def _span_of(entry: Entry) -> SpanIds | None:
    if entry.trace_id is None or entry.span_id is None:
        return None
    return entry.trace_id, entry.span_id


def _after(parent: Entry | None, lineage_id: str | None) -> Lineage:
    """The turn after ``parent``; unknown (the lineage id kept, if given) when the parent or its turn is."""
    if parent is None or parent.turn is None:
        return Lineage(None, lineage_id)
    return Lineage(parent.turn + 1, lineage_id or parent.lineage_id, _span_of(parent))


def lineage_of(req: RequestFacts, an: Analysis) -> Lineage:
    """The place of a model call (``create``, ``parse``, ``stream``, a WebSocket turn, ``compact``) in its lineage;
    other operations have none."""
    if req.operation not in (OPERATION_CHAT, OPERATION_COMPACT) or req.target_response_id is not None:
        return Lineage()
    mode = req.state_mode
    if mode == SINGLE_TURN:
        return Lineage(1)
    if mode == CONVERSATION:
        return _after(an.parent, req.conversation_id)
    if mode == CLIENT_REPLAY and an.parent is None:
        return _after(an.continued, None)  # a replay of the messages alone still continues its turn (or nothing)
    if mode in (SERVER_CHAIN, CLIENT_REPLAY):
        return _after(an.parent, None)
    return Lineage()  # conflict: the API refuses it
