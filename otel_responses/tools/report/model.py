"""Spans into conversations: grouped by lineage, ordered by turn and span links, with gaps where turns are missing.

A span names its conversation with ``openai_responses.lineage.id``. Spans without one (a conversation's own calls, a
request the API refused before it had an id, a turn whose parent another process made) join the conversation of
what they continue: the conversation id, the response their ``previous_response_id`` names, the span they link to.
A turn missing from the input (sampled out, not exported) is a ``Gap``, so the turns after it keep their numbers.

One lineage id may name several conversations: an emulator's (or a test server's) ids start over on every start, so
two runs of an app appended to one file share them. A lineage with several first turns is split into its runs by
what ties its spans together, each continued turn's link to the span it continues and the trace a span is in; a
call tied to no first turn is placed in the run of the latest first turn before it, and its conversation carries a
note that says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ... import attributes as a
from ...signals import CATALOGUE, ERROR, INFO, LOSS_SEVERITIES, WARNING
from .records import SpanRecord, Value

SEVERITIES: Final = (ERROR, WARNING, INFO)
PREFIX: Final = a.PREFIX
_OWN_EVENT_KEYS: Final = frozenset({a.SIGNAL_NAME, a.SIGNAL_SEVERITY})

# How a conversation is known, for its heading.
LINEAGE: Final = "lineage"  # its lineage id
CONTINUES: Final = "continues"  # only as continuing a response that is not in the input
TRACE: Final = "trace"  # calls tied to no conversation, by trace

# How a call's instructions compare with the conversation's earlier calls.
FIRST, SAME, CHANGED, DROPPED, NONE = "first", "same", "changed", "dropped", "none"


@dataclass(frozen=True, slots=True)
class SignalView:
    """One signal of a call: its name, severity and metadata (keys without the project prefix)."""

    name: str
    severity: str
    detail: tuple[tuple[str, Value], ...] = ()

    @property
    def known(self) -> bool:
        return self.name in CATALOGUE


@dataclass(slots=True)
class Call:
    """One span in its conversation."""

    span: SpanRecord
    turn: int | None
    turn_inferred: bool = False  # the span carries no turn: it is its parent's + 1
    signals: list[SignalView] = field(default_factory=list)
    instructions: str = NONE
    branch: bool = False  # another call of the conversation has the same turn
    link_missing: bool = False  # it links to a span that is not in the input

    @property
    def loses_context(self) -> bool:
        return any(s.severity in LOSS_SEVERITIES for s in self.signals)


@dataclass(frozen=True, slots=True)
class Gap:
    """Turns ``first`` to ``last`` of a conversation are not in the input."""

    first: int
    last: int


@dataclass(slots=True)
class Conversation:
    kind: str
    key: str
    entries: list[Call | Gap]
    label: str | None = None
    run: tuple[int, int] | None = None  # (n, of): one of the runs a lineage id was split into
    note: str | None = None  # what could not be told for sure (calls placed in this run by time)
    calls: list[Call] = field(init=False)
    gaps: list[Gap] = field(init=False)
    signals: list[SignalView] = field(init=False)

    def __post_init__(self) -> None:
        self.calls = [e for e in self.entries if isinstance(e, Call)]
        self.gaps = [e for e in self.entries if isinstance(e, Gap)]
        self.signals = [s for c in self.calls for s in c.signals]

    @property
    def start_ns(self) -> int:
        return min(c.span.start_ns for c in self.calls)

    @property
    def end_ns(self) -> int:
        return max(c.span.end_ns for c in self.calls)

    def values(self, key: str) -> list[str]:
        """The distinct values of a string attribute over the calls, in order of appearance."""
        return list(dict.fromkeys(v for c in self.calls if (v := c.span.text(key)) is not None))

    @property
    def services(self) -> list[str]:
        return list(dict.fromkeys(c.span.service for c in self.calls))

    @property
    def models(self) -> list[str]:
        return self.values(a.GEN_AI_REQUEST_MODEL)

    def count(self, severity: str) -> int:
        return sum(1 for s in self.signals if s.severity == severity)

    @property
    def turns(self) -> int:
        return len({c.turn for c in self.calls if c.turn is not None})

    @property
    def first_loss(self) -> Call | None:
        return next((c for c in self.calls if c.loses_context), None)

    def rank(self) -> tuple[int, ...]:
        """Sort key: most errors first, then warnings, then infos; then the earliest."""
        return (-self.count(ERROR), -self.count(WARNING), -self.count(INFO), self.start_ns)


def signals_of(span: SpanRecord) -> list[SignalView]:
    """The span's signal events, then any name its signal list has that no event carries (an event dropped by a
    span's event limit); severity from the event, else from the catalogue."""
    found: list[SignalView] = []
    for event in span.events:
        if event.name != a.SIGNAL_EVENT:
            continue
        name = event.attributes.get(a.SIGNAL_NAME)
        if not isinstance(name, str) or not name:
            continue
        severity = event.attributes.get(a.SIGNAL_SEVERITY)
        detail = tuple((k.removeprefix(PREFIX), v) for k, v in event.attributes.items() if k not in _OWN_EVENT_KEYS)
        found.append(SignalView(name, severity if isinstance(severity, str) else _severity(name), detail))
    seen = {s.name for s in found}
    found += [SignalView(n, _severity(n)) for n in span.texts(a.SIGNALS) if n not in seen]
    return found


def _severity(name: str) -> str:
    kind = CATALOGUE.get(name)
    return kind.severity if kind is not None else "unknown"


class _Index:
    """Where each span belongs: its conversation key and turn, resolved through what it continues."""

    def __init__(self, spans: list[SpanRecord]) -> None:
        self.by_span = {(s.trace_id, s.span_id): s for s in spans}
        self.producers: dict[str, SpanRecord] = {}
        for span in spans:
            response = span.text(a.GEN_AI_RESPONSE_ID)
            if response is not None and span.text(a.GEN_AI_OPERATION_NAME) == a.OPERATION_CHAT:
                self.producers.setdefault(response, span)
        self._keys: dict[int, tuple[str, str]] = {}
        self._turns: dict[int, tuple[int | None, bool]] = {}

    def parents(self, span: SpanRecord) -> list[SpanRecord]:
        """The spans this one continues: the maker of its previous response, the spans it links to."""
        found = []
        previous = span.text(a.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID)
        if previous is not None and (maker := self.producers.get(previous)) is not None and maker is not span:
            found.append(maker)
        found += [p for link in span.links if (p := self.by_span.get(link)) is not None and p is not span]
        return found

    def key(self, span: SpanRecord, depth: int = 0) -> tuple[str, str]:
        known = self._keys.get(id(span))
        if known is not None:
            return known
        lineage = span.text(a.LINEAGE_ID) or span.text(a.GEN_AI_CONVERSATION_ID)
        if lineage is not None:
            key = (LINEAGE, lineage)
        elif depth < 64 and (parents := self.parents(span)):
            key = self.key(parents[0], depth + 1)
        elif (previous := span.text(a.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID)) is not None:
            key = (CONTINUES, previous)
        elif (target := span.text(a.GEN_AI_RESPONSE_ID)) is not None and target in self.producers and depth < 64:
            key = self.key(self.producers[target], depth + 1)  # a retrieve, a delete: of a turn in the input
        elif target is not None and span.text(a.GEN_AI_OPERATION_NAME) == a.OPERATION_CHAT:
            key = (LINEAGE, target)
        else:
            key = (TRACE, span.trace_id)
        self._keys[id(span)] = key
        return key

    def turn(self, span: SpanRecord, depth: int = 0) -> tuple[int | None, bool]:
        """The span's turn, and whether it was inferred (its parent's + 1) rather than carried."""
        known = self._turns.get(id(span))
        if known is not None:
            return known
        carried = span.number(a.TURN)
        result: tuple[int | None, bool] = (carried, False) if carried is not None and carried > 0 else (None, False)
        if result[0] is None and depth < 64 and span.text(a.GEN_AI_OPERATION_NAME) == a.OPERATION_CHAT:
            for parent in self.parents(span):
                parent_turn = self.turn(parent, depth + 1)[0]
                if parent_turn is not None:
                    result = (parent_turn + 1, True)
                    break
        self._turns[id(span)] = result
        return result


def conversations(spans: Iterable[SpanRecord], labels: Mapping[str, str] | None = None) -> list[Conversation]:
    """The conversations of ``spans``, the one that lost most context first; ``labels`` names some by key."""
    unique = list({(s.trace_id, s.span_id): s for s in spans}.values())
    index = _Index(unique)
    groups: dict[tuple[str, str], list[Call]] = {}
    for span in unique:
        turn, inferred = index.turn(span)
        call = Call(span, turn, inferred, signals_of(span))
        call.link_missing = any(link not in index.by_span for link in span.links)
        groups.setdefault(index.key(span), []).append(call)
    found = []
    for (kind, key), calls in groups.items():
        runs = _runs(calls) if kind == LINEAGE else [(calls, None)]
        for number, (run, note) in enumerate(runs, 1):
            of = (number, len(runs)) if len(runs) > 1 else None
            found.append(Conversation(kind, key, _timeline(run), (labels or {}).get(key), of, note))
    found.sort(key=Conversation.rank)
    return found


def _runs(calls: list[Call]) -> list[tuple[list[Call], str | None]]:
    """The runs of one lineage id, earliest first, each with a note when some of its calls were placed by time (no
    link nor trace ties them to a first turn); the lineage whole when it has one first turn, or when its first
    turns cannot be told apart."""
    firsts = [c for c in calls if c.turn == 1 and not c.turn_inferred]
    if len(firsts) < 2:
        return [(calls, None)]
    place = {(c.span.trace_id, c.span.span_id): i for i, c in enumerate(calls)}
    parent = list(range(len(calls)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_trace: dict[str, int] = {}
    for i, call in enumerate(calls):
        tied = [place[link] for link in call.span.links if link in place]
        tied.append(by_trace.setdefault(call.span.trace_id, i))
        for j in tied:
            parent[root(i)] = root(j)
    parts: dict[int, list[Call]] = {}
    for i, call in enumerate(calls):
        parts.setdefault(root(i), []).append(call)
    started = [p for p in parts.values() if any(c in firsts for c in p)]
    if len(started) < 2 or any(sum(1 for c in p if c in firsts) > 1 for p in started):
        return [(calls, None)]  # nothing tells the first turns apart: one conversation, its turns branches
    started.sort(key=lambda p: min(c.span.start_ns for c in p))
    placed: dict[int, int] = {}
    for loose in (p for p in parts.values() if not any(c in firsts for c in p)):
        begins = min(c.span.start_ns for c in loose)
        before = [n for n, p in enumerate(started) if min(c.span.start_ns for c in p) <= begins]
        target = before[-1] if before else 0
        started[target] = started[target] + loose
        placed[target] = placed.get(target, 0) + len(loose)
    return [(run, _placed_note(placed[n], len(started)) if n in placed else None) for n, run in enumerate(started)]


def _placed_note(count: int, runs: int) -> str:
    calls, link = ("1 call", "links") if count == 1 else (f"{count} calls", "link")
    return (
        f"{calls} of this lineage id (shared by {runs} runs: the server's ids repeat) {link} to no turn in the "
        "input: placed in this run by time"
    )


def _timeline(calls: list[Call]) -> list[Call | Gap]:
    """Calls with a turn by turn (then start time); the others merged in by start time; gaps between turns."""
    turned = sorted((c for c in calls if c.turn is not None), key=lambda c: (c.turn, c.span.start_ns, c.span.span_id))
    loose = sorted((c for c in calls if c.turn is None), key=lambda c: (c.span.start_ns, c.span.span_id))
    counts: dict[int | None, int] = {}
    for call in turned:
        counts[call.turn] = counts.get(call.turn, 0) + 1
    entries: list[Call | Gap] = []
    previous = 0
    i = 0
    for call in turned:
        while i < len(loose) and loose[i].span.start_ns < call.span.start_ns:
            entries.append(loose[i])
            i += 1
        turn = call.turn or 0
        if turn > previous + 1:
            entries.append(Gap(previous + 1, turn - 1))
        previous = max(previous, turn)
        call.branch = counts[call.turn] > 1
        entries.append(call)
    entries += loose[i:]
    _mark_instructions(entries)
    return entries


def _mark_instructions(entries: list[Call | Gap]) -> None:
    """Mark each request's instructions hash against the conversation's latest earlier one."""
    latest: str | None = None
    for call in entries:
        if not isinstance(call, Call) or call.span.text(a.STATE_MODE) is None:
            continue  # not a request that carries instructions (a retrieve, a conversation's own call)
        current = call.span.text(a.INSTRUCTIONS_HASH)
        if current is None:
            call.instructions = DROPPED if latest is not None else NONE
        elif latest is None:
            call.instructions = FIRST
        else:
            call.instructions = SAME if current == latest else CHANGED
        if current is not None:
            latest = current
