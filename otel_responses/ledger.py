"""A bounded memory of recent responses: the only state shared between calls.

Entries hold metadata and keyed fingerprints only. A response this process has not seen (evicted, or
created elsewhere) is simply absent, and every check that needs it stays silent rather than guess.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .items import NOT_BY_CALL, CallKey, ItemMeta, pending_calls

if TYPE_CHECKING:
    from .fingerprint import Fingerprinter

DEFAULT_CAPACITY = 4096
# Memory per entry is bounded whatever the history length: only this many output items are kept.
MAX_OUTPUT_ITEMS = 32

# An item is located by its id, a call also by its type and call_id, an assistant message replayed as text by its
# text fingerprint.
Key = str | int | CallKey
# The last few app messages of a request are remembered (keyed fingerprints): enough to tell a turn re-sent beside
# `previous_response_id` from a user who types the same word twice.
MAX_INPUT_MESSAGES = 4


@dataclass(frozen=True, slots=True)
class Entry:
    """What is remembered of one response."""

    response_id: str
    sequence: int
    store: bool
    instructions_hash: str | None
    conversation_id: str | None
    outputs: tuple[ItemMeta, ...]
    input_app_messages: int  # distinct app messages in the input after its latest compaction item (all, if none)
    input_compactions: int
    parent_id: str | None = None  # the response this one continued, when known
    input_messages: tuple[int, ...] = ()  # fingerprints of the input's last app messages, oldest first
    copies: tuple[tuple[int, int], ...] = ()  # (output index, shape) of other copies of an opaque payload seen
    # Read from a shared store rather than recorded by this process: another writer may have put it there, so strict
    # mode never refuses a request on it (signals built on it are still recorded).
    shared: bool = False
    # Where the response sits in its conversation (see ``lineage``): its turn (1 for a first one), the lineage's id,
    # and the trace and span ids of the span that made it (so a later turn, here or in another process, links to it).
    turn: int | None = None
    lineage_id: str | None = None
    trace_id: int | None = None
    span_id: int | None = None

    @property
    def pending_calls(self) -> tuple[str, ...]:
        """call_ids of the calls the app must answer next turn."""
        return pending_calls(self.outputs)

    def shapes(self, index: int) -> list[int]:
        """Every shape seen of output ``index``'s opaque payload."""
        first = self.outputs[index].shape
        return [s for s in (first, *(shape for i, shape in self.copies if i == index)) if s is not None]


def location_keys(meta: ItemMeta) -> list[Key]:
    """The keys an output item is found by: its id, its call (type and call_id), its text."""
    keys: list[Key] = []
    if meta.id is not None:
        keys.append(meta.id)
    if meta.call_id is not None and meta.type not in NOT_BY_CALL:
        keys.append((meta.type, meta.call_id))
    if meta.role == "assistant" and meta.fingerprint is not None:
        keys.append(meta.fingerprint)
    return keys


class LedgerView(Protocol):
    """What the checks may read."""

    def get(self, response_id: str) -> Entry | None: ...

    def locate(self, keys: Sequence[Key]) -> list[tuple[Entry, int] | None]:
        """For each key, the entry and output index it belongs to, or None."""
        ...

    def latest_in_conversation(self, conversation_id: str) -> Entry | None: ...

    def has_child(self, response_id: str) -> bool: ...


class Ledger(LedgerView, Protocol):
    """What the wrappers write; a shared store (Redis, say) may implement it too."""

    def record(self, entry: Entry, parent_id: str | None) -> None: ...

    def next_sequence(self) -> int: ...

    def enter(self, key: str) -> bool:
        """Mark a request in flight on ``key``; True if another one already was."""
        ...

    def leave(self, key: str) -> None: ...

    def unavailable(self) -> bool:
        """True when a read made for the current call could not reach a shared store (the checks then used
        what this process knows); reading it resets it. Always False for a ledger with no remote part."""
        ...


# Every method a ledger must have: a custom one missing one would fail on its first call, inside the instrumentation,
# where the failure is swallowed and the call goes unrecorded. Read from the protocol, so the two never drift.
LEDGER_METHODS: tuple[str, ...] = tuple(sorted(name for name in dir(Ledger) if not name.startswith("_")))


class SharedLedger(Ledger, Protocol):
    """A ledger shared by several processes. ``bind`` gives it the fleet's fingerprinter before any call: it
    namespaces the store by the key's id, so processes with different keys never compare fingerprints."""

    def bind(self, fingerprinter: Fingerprinter) -> None: ...


class InMemoryLedger:
    """At most ``capacity`` entries, oldest evicted first, with an index from item ids and text fingerprints to entries.

    Writes take a lock; reads are single dict lookups, atomic under the interpreter, so a read racing an
    eviction sees the entry or nothing, never a torn one. Safe under threads and asyncio alike.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("ledger capacity must be at least 1")
        self.capacity = capacity
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._locations: dict[Key, tuple[str, int]] = {}
        self._conversations: dict[str, str] = {}
        self._children: set[str] = set()
        self._in_flight: dict[str, int] = {}
        self._sequence = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    # -- reads -----------------------------------------------------------------------------------------

    def get(self, response_id: str) -> Entry | None:
        return self._entries.get(response_id)

    def locate(self, keys: Sequence[Key]) -> list[tuple[Entry, int] | None]:
        found: list[tuple[Entry, int] | None] = []
        locations, entries = self._locations, self._entries
        for key in keys:
            where = locations.get(key)
            entry = entries.get(where[0]) if where is not None else None
            found.append((entry, where[1]) if entry is not None and where is not None else None)
        return found

    def latest_in_conversation(self, conversation_id: str) -> Entry | None:
        response_id = self._conversations.get(conversation_id)
        return self._entries.get(response_id) if response_id is not None else None

    def has_child(self, response_id: str) -> bool:
        return response_id in self._children

    # -- writes ----------------------------------------------------------------------------------------

    def next_sequence(self) -> int:
        with self._lock:
            self._sequence += 1
            return self._sequence

    def record(self, entry: Entry, parent_id: str | None) -> None:
        """Remember a response (replacing an older entry with its id) and evict the oldest past capacity."""
        with self._lock:
            self._store(entry)
            if parent_id is not None and parent_id in self._entries:
                self._children.add(parent_id)
            self._evict()

    def cache(self, entry: Entry) -> None:
        """Remember a response learnt from elsewhere (a shared store). Unlike ``record``, it takes over an item's
        location or its conversation only from an older entry: an old entry read back must not stand in for a
        later one (an assistant text, say, returned by several responses)."""
        with self._lock:
            self._store(entry, newer_only=True)
            self._evict()

    def _store(self, entry: Entry, newer_only: bool = False) -> None:
        if entry.response_id in self._entries:
            self._forget(entry.response_id)
        self._entries[entry.response_id] = entry
        for index, meta in enumerate(entry.outputs):
            for key in location_keys(meta):
                self._index(key, entry, index, newer_only)
        conversation = entry.conversation_id
        if conversation is not None and (not newer_only or self._older(self._conversations.get(conversation), entry)):
            self._conversations[conversation] = entry.response_id

    def _index(self, key: Key, entry: Entry, index: int, newer_only: bool) -> None:
        if not newer_only or self._older(self._locations.get(key, (None,))[0], entry):
            self._locations[key] = (entry.response_id, index)

    def _older(self, response_id: str | None, entry: Entry) -> bool:
        """True when ``response_id`` names no entry, or one not newer than ``entry``."""
        current = self._entries.get(response_id) if response_id is not None else None
        return current is None or current.response_id == entry.response_id or current.sequence <= entry.sequence

    def _evict(self) -> None:
        while len(self._entries) > self.capacity:
            self._forget(next(iter(self._entries)))

    def _forget(self, response_id: str) -> None:
        entry = self._entries.pop(response_id)
        for meta in entry.outputs:
            for key in location_keys(meta):
                if self._locations.get(key, ("",))[0] == response_id:
                    del self._locations[key]
        if entry.conversation_id is not None and self._conversations.get(entry.conversation_id) == response_id:
            del self._conversations[entry.conversation_id]
        self._children.discard(response_id)

    def note_child(self, response_id: str) -> None:
        """Remember that a response held here was continued (learnt from a shared store)."""
        if response_id in self._entries:
            self._children.add(response_id)

    def enter(self, key: str) -> bool:
        with self._lock:
            count = self._in_flight.get(key, 0)
            self._in_flight[key] = count + 1
            return count > 0

    def leave(self, key: str) -> None:
        with self._lock:
            count = self._in_flight.get(key, 0) - 1
            if count > 0:
                self._in_flight[key] = count
            else:
                self._in_flight.pop(key, None)

    def unavailable(self) -> bool:
        return False


def outputs_to_keep(outputs: tuple[ItemMeta, ...]) -> tuple[ItemMeta, ...]:
    """The output items an entry keeps: all of them up to ``MAX_OUTPUT_ITEMS``."""
    return outputs if len(outputs) <= MAX_OUTPUT_ITEMS else outputs[:MAX_OUTPUT_ITEMS]
