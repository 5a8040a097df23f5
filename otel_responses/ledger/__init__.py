"""A bounded memory of recent responses: the only state shared between calls.

Entries hold metadata and keyed fingerprints only. A response this process has not seen (evicted, or
created elsewhere) is simply absent, and every check that needs it stays silent rather than guess.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

from .._items import NOT_BY_CALL, CallKey, ItemMeta, pending_calls

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_TIMEOUT_SECONDS",
    "DEFAULT_TTL_SECONDS",
    "AsyncCallLedger",
    "CallLedger",
    "Entry",
    "GivenOutput",
    "InMemoryLedger",
    "Key",
    "Ledger",
    "LedgerView",
    "LedgerWrites",
    "Place",
    "SharedLedger",
]

if TYPE_CHECKING:
    from .._fingerprint import Fingerprinter

DEFAULT_CAPACITY = 4096
# A shared ledger's entries expire after an hour: long enough for the turns of a conversation to reach other
# workers (a user's think time, tool runs, a background response polled to its end), short enough that Redis
# holds about an hour of traffic (an entry and its keys take well under 1 KB). A chain continued after that is
# not checked against its parent: a missed signal, never a false one.
DEFAULT_TTL_SECONDS = 3600
# Reads of a shared ledger sit on the call path: 50 ms is generous for a Redis in the same network (a loopback
# read takes about 0.1 ms) and bounds what a stalled Redis can add to a call.
DEFAULT_TIMEOUT_SECONDS = 0.05
# Memory per entry is bounded whatever the history length: only this many output items are kept.
MAX_OUTPUT_ITEMS = 32
# A key may name items of several responses (a short answer many conversations got, a call id a compatible server
# reuses) or several positions of one (an id a server repeats): at most this many places are kept per key, the
# newest. A key with two or more responses is ambiguous whatever their number, so the cap loses nothing the analysis
# reads.
MAX_PLACES = 8

# An item is located by its id, a call also by its type and call_id, an assistant message by its text fingerprint.
Key = str | int | CallKey
# The last few app messages of a request are remembered (keyed fingerprints): enough to tell a turn re-sent beside
# `previous_response_id` from a user who types the same word twice.
MAX_INPUT_MESSAGES = 4
# The server-side state a response ends is remembered by the call_ids it holds: the newest this many calls, and as many
# answered ones (32 calls of 30 characters, the API's, are about 1 KB of a shared entry).
MAX_HELD_CALLS = 32
# The tool outputs a replay gave are remembered for the newest this many (about 60 bytes each in a shared entry).
MAX_GIVEN_OUTPUTS = 16


class GivenOutput(NamedTuple):
    """A tool output a request was given, as first sent under its call_id: its text's length and keyed fingerprint
    (never the text). ``local``: Python's own hash of the text, this process's only (never written to a shared
    ledger): the same string object replayed turn after turn is recognised without hashing its text again."""

    call_id: str
    length: int
    fingerprint: int
    local: int | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """What is remembered of one response (or of items the app wrote to a conversation itself).

    Every field but the id has a default that says nothing: a stored response of no conversation, without
    instructions, outputs or input, in no known lineage. A shared value leaves out a field at its default, and a
    reader gives a field it finds no key for its default (``_codec.FIELDS``), so a field added here with such a
    default (and its row there) is read as nothing by the processes that do not know it yet."""

    response_id: str
    sequence: int = 0  # orders entries (a conversation's latest turn): 0 is older than any recorded one
    store: bool = True
    instructions_hash: str | None = None
    conversation_id: str | None = None
    outputs: tuple[ItemMeta, ...] = ()
    input_app_messages: int = 0  # distinct app messages in the input after its latest compaction item (all, if none)
    input_compactions: int = 0
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
    # The app deleted the response: it can be neither retrieved nor continued, and that is no storage mistake.
    deleted: bool = False
    # Items the app wrote into a conversation itself (`conversations.items.create`), not a response: they answer
    # conversation-mode questions (its latest turn, the calls still pending in it), never where a replayed item came
    # from, so their keys are not indexed.
    written_by_app: bool = False
    # The latest turn of this lineage (this response's or an ancestor's) that sent `instructions`: its response id and
    # turn, carried forward turn after turn, so every later turn without them is seen with no walk up the chain.
    instructed_id: str | None = None
    instructed_turn: int | None = None
    # The server-side state this response ends holds a system or developer message (sent once as an input item of a
    # chain or a conversation, it stays in the context): later turns continuing that state need no instructions.
    system_in_state: bool = False
    # The calls that state holds, carried forward from the parent (the chain's, the conversation's latest turn) turn
    # after turn, as ``instructed_id`` is: the call_ids of its calls and of those it holds an output for, the newest
    # ``MAX_HELD_CALLS`` of each. ``held_partial``: the state may hold others (older ones dropped, left out of a shared
    # value, or a parent whose state was not known), so a call_id in neither tuple proves nothing.
    held_calls: tuple[str, ...] = ()
    held_outputs: tuple[str, ...] = ()
    held_partial: bool = True
    # The tool outputs (text only) the request that produced this response was given, the newest
    # ``MAX_GIVEN_OUTPUTS``, each as first sent under its call_id: a later replay's copy is compared with them.
    given_outputs: tuple[GivenOutput, ...] = ()
    # Distinct system and developer messages with text in the input after its latest compaction item (counted in
    # ``input_app_messages`` too): a replay must keep as many, whatever their text (an empty one counts as none).
    input_system_messages: int = 0
    # Every app message the request was given, in order, folded into one keyed fingerprint (``_fingerprint.
    # next_in_sequence``): kept when its input held app messages only and the response completed with a message or
    # reasoning. It is also a key of the entry (``entry_keys``): a replay made of those messages and one new user
    # message continues this response without carrying any of its output (only the user's messages kept).
    given_messages: int | None = None
    # The model the request named and the one the response says answered (what its payloads were minted for), and
    # the effective `reasoning.context` the response returned.
    model: str | None = None
    resolved_model: str | None = None
    reasoning_context: str | None = None
    # The response's usage, for `history_truncated` read from numbers: its input and output tokens; the reasoning
    # tokens of every response of the state it ends (None when that state is not known from its start) and of those
    # of its own turn (since the latest user message); a keyed fingerprint of its tool definitions (kept only under
    # `truncation: "auto"`, where it is compared).
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_held: int | None = None
    reasoning_turn: int = 0
    tools_fingerprint: int | None = None
    # Whom the request was made as (keyed fingerprints of 32 bits, never exported; None where it did not say): the
    # organization and project its payloads were minted for, its credential and its endpoint.
    organization: int | None = None
    project: int | None = None
    credential: int | None = None
    endpoint: int | None = None

    @property
    def pending_calls(self) -> tuple[str, ...]:
        """call_ids of the calls the app must answer next turn."""
        return pending_calls(self.outputs)

    def shapes(self, index: int) -> list[int]:
        """Every shape seen of output ``index``'s opaque payload, and of every other position with its id (a server
        that repeats an id within one response: a replayed copy may be any of them)."""
        outputs = self.outputs
        item_id = outputs[index].id
        indexes = [index] if item_id is None else [i for i, m in enumerate(outputs) if m.id == item_id]
        shapes = [s for i in indexes if (s := outputs[i].shape) is not None]
        if self.copies:
            shapes.extend(shape for i, shape in self.copies if i in indexes)
        return shapes

    def last_instructed(self) -> tuple[str, int | None] | None:
        """The latest turn of this lineage, up to this one, that sent instructions: (response id, turn). Items the app
        wrote are no turn: they carry the latest turn's."""
        if self.instructions_hash is not None and not self.written_by_app:
            return self.response_id, self.turn
        if self.instructed_id is not None:
            return self.instructed_id, self.instructed_turn
        return None


Place = tuple[Entry, int]  # an entry and the index of one of its output items
NOWHERE: tuple[Place, ...] = ()
# The place a key of the entry itself names (``Entry.given_messages``): its first output item.
WHOLE_ENTRY = 0


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


def deleted_item_id(conversation_id: str, item_id: str) -> str:
    """The name of the entry that says the app deleted ``item_id`` from a conversation (it holds it no more: sent
    again under that id, it is no duplicate)."""
    return f"conversation-item-deleted:{conversation_id}:{item_id}"


def items_deleted_id(conversation_id: str) -> str:
    """The name of the entry that says the app deleted items from a conversation after its latest response (its
    ``parent_id``): that state holds fewer tokens than the response's numbers say."""
    return f"conversation-items-deleted:{conversation_id}"


def entry_keys(entry: Entry) -> list[tuple[Key, int]]:
    """Every key an entry is found by, with the index of the output item it names: its output items' keys
    (``location_keys``), and the fingerprint of the messages it was given (``Entry.given_messages``). None for items
    the app wrote (``Entry.written_by_app``)."""
    if entry.written_by_app:
        return []
    keys = [(key, index) for index, meta in enumerate(entry.outputs) for key in location_keys(meta)]
    if entry.given_messages is not None and entry.outputs:
        keys.append((entry.given_messages, WHOLE_ENTRY))
    return keys


class LedgerView(Protocol):
    """What the checks may read."""

    def get(self, response_id: str) -> Entry | None: ...

    def places(self, keys: Sequence[Key]) -> list[tuple[Place, ...]]:
        """For each key, every place it names in the entries held (an item's positions in order; at most
        ``MAX_PLACES``), or an empty tuple. Entries the app wrote itself are never places."""
        ...

    def latest_in_conversation(self, conversation_id: str) -> Entry | None: ...

    def has_child(self, response_id: str) -> bool: ...


class LedgerWrites(Protocol):
    """What a call's end writes."""

    def record(self, entry: Entry, parent_id: str | None) -> None: ...

    def next_sequence(self) -> int: ...

    def enter(self, key: str) -> bool:
        """Mark a request in flight on ``key``; True if another one already was."""
        ...

    def leave(self, key: str) -> None: ...


class CallLedger(LedgerView, LedgerWrites, Protocol):
    """The ledger as one call reads and writes it (``Ledger.for_call``)."""

    @property
    def unavailable(self) -> bool:
        """A read made for this call could not reach a shared store: its checks used what this process knows."""
        ...


class AsyncCallLedger(CallLedger, Protocol):
    """The view of a ledger that reads a shared store asynchronously (its ledger says ``reads_asynchronously``): an
    async call awaits its reads of the store first, then reads what they found."""

    async def prefetch(self, reads: Callable[[LedgerView], object]) -> None:
        """Await what ``reads`` (the call's own reads: its analysis) asks of the shared store, never on the event loop;
        from then on this view answers from what those reads found and what this process holds."""
        ...


class Ledger(LedgerView, LedgerWrites, Protocol):
    """What the instrumentation reads and writes; a shared store (Redis, say) may implement it too."""

    def for_call(self) -> CallLedger:
        """The ledger for one call: its reads tell that call (and only it) whether a shared store was out of reach. A
        ledger with no remote part may return itself."""
        ...


# Every method a ledger must have: a custom one missing one would fail on its first call, inside the instrumentation,
# where the failure is swallowed and the call goes unrecorded. Read from the protocol, so the two never drift.
LEDGER_METHODS: tuple[str, ...] = tuple(sorted(name for name in dir(Ledger) if not name.startswith("_")))


class SharedLedger(Ledger, Protocol):
    """A ledger shared by several processes. ``bind`` gives it the fleet's fingerprinter before any call: it
    namespaces the store by the key's id, so processes with different keys never compare fingerprints."""

    def bind(self, fingerprinter: Fingerprinter) -> None: ...


class InMemoryLedger:
    """At most ``capacity`` entries, oldest evicted first, with an index from item keys to their places.

    Writes take a lock; reads are dict lookups and reads of immutable tuples, atomic under the interpreter, so a read
    racing an eviction sees the entry or nothing, never a torn one. Safe under threads and asyncio alike.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("ledger capacity must be at least 1")
        self.capacity = capacity
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        # Key -> (response id, output index) of each place, oldest first; a tuple replaced whole on every write.
        self._locations: dict[Key, tuple[tuple[str, int], ...]] = {}
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

    def places(self, keys: Sequence[Key]) -> list[tuple[Place, ...]]:
        found: list[tuple[Place, ...]] = []
        append, locate, entries = found.append, self._locations.get, self._entries.get
        for key in keys:
            where = locate(key)
            if where is None:
                append(NOWHERE)
            elif len(where) == 1:  # the usual case: one item of one response
                response_id, index = where[0]
                entry = entries(response_id)
                append(((entry, index),) if entry is not None else NOWHERE)
            else:
                append(tuple([(e, i) for response_id, i in where if (e := entries(response_id)) is not None]))
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
        """Remember a response learnt from elsewhere (a shared store). Unlike ``record``, it takes over its
        conversation only from an older entry: an old entry read back must not stand in for a later turn."""
        with self._lock:
            self._store(entry, newer_only=True)
            self._evict()

    def _store(self, entry: Entry, newer_only: bool = False) -> None:
        response_id = entry.response_id
        if response_id in self._entries:
            self._forget(response_id)
        self._entries[response_id] = entry
        for key, index in entry_keys(entry):
            self._index(key, response_id, index)
        conversation = entry.conversation_id
        if conversation is not None and (not newer_only or self._older(self._conversations.get(conversation), entry)):
            self._conversations[conversation] = response_id

    def _index(self, key: Key, response_id: str, index: int) -> None:
        locations = self._locations
        where = locations.get(key)
        if where is None:
            locations[key] = ((response_id, index),)
        elif len(where) < MAX_PLACES:
            locations[key] = (*where, (response_id, index))
        else:  # the first-indexed place goes (the oldest, but for an older entry read back from a shared store)
            locations[key] = (*where[1:], (response_id, index))

    def _older(self, response_id: str | None, entry: Entry) -> bool:
        """True when ``response_id`` names no entry, or one not newer than ``entry``."""
        current = self._entries.get(response_id) if response_id is not None else None
        return current is None or current.response_id == entry.response_id or current.sequence <= entry.sequence

    def _evict(self) -> None:
        while len(self._entries) > self.capacity:
            self._forget(next(iter(self._entries)))

    def _forget(self, response_id: str) -> None:
        entry = self._entries.pop(response_id)
        locations = self._locations
        for key, _ in entry_keys(entry):
            where = locations.get(key)
            if where is None:
                continue
            if len(where) == 1:
                if where[0][0] == response_id:
                    del locations[key]
                continue
            kept = tuple([place for place in where if place[0] != response_id])
            if len(kept) == len(where):
                continue
            if kept:
                locations[key] = kept
            else:
                del locations[key]
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

    # -- one call's view: this ledger itself, nothing of it can be out of reach ----------------------------------

    unavailable: Final = False

    def for_call(self) -> InMemoryLedger:
        return self


def outputs_to_keep(outputs: tuple[ItemMeta, ...]) -> tuple[ItemMeta, ...]:
    """The output items an entry keeps: all of them up to ``MAX_OUTPUT_ITEMS``."""
    return outputs if len(outputs) <= MAX_OUTPUT_ITEMS else outputs[:MAX_OUTPUT_ITEMS]
