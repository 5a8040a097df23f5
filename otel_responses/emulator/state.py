"""Server-side state: stored responses, their items, conversations, and deterministic ids.

Everything the real API would persist lives here, behind one re-entrant lock, because the
HTTP server handles requests on several threads and a create must read and write atomically.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

from .items import Item


@dataclass(frozen=True)
class Caller:
    """Who a request comes from, as the API scopes payloads: the organization (`OpenAI-Organization`, else the key's
    own) and the project (`OpenAI-Project`), and the end user the request names (`safety_identifier`, else `user`)."""

    organization: str
    project: str | None = None
    end_user: str | None = None

    def crosses(self, other: Caller) -> bool:
        """A payload made for this caller replayed by ``other`` crosses an organization: another one, or another
        project where both name one."""
        if self.organization != other.organization:
            return True
        return self.project is not None and other.project is not None and self.project != other.project


@dataclass(frozen=True)
class Minted:
    """What a reasoning item (or a compaction item) was made for: its model, its caller, and a digest of the items
    before it (`rendering.prefix_digest`). Sealed into its `encrypted_content`, kept beside a stored one."""

    model: str
    caller: Caller
    prefix: str = ""


@dataclass
class Entry:
    """One item of a context; `notes` holds a reasoning item's private notes, never sent as-is; `minted`, what the
    reasoning was made for; `compacted`, the id of the replayed compaction item it was read from."""

    item: Item
    notes: str | None = None
    minted: Minted | None = None
    compacted: str | None = None


@dataclass
class Pending:
    """A `background: true` response not finished yet: what it will be once its polls have run out.

    The model ran when the response was created (so it answered from the context of that moment);
    `body`/`output` are the finished response, `conversation_items` what it then adds to its conversation.
    """

    body: dict[str, Any]
    output: list[Entry]
    polls_left: int
    conversation_id: str | None = None
    conversation_items: list[Entry] = field(default_factory=list)


@dataclass
class StoredResponse:
    """A `store=true` response: what it was sent, what it produced, and its public body."""

    id: str
    body: dict[str, Any]
    input: list[Entry]
    output: list[Entry]
    previous_response_id: str | None
    pending: Pending | None = None
    caller: Caller | None = None  # whose it is: another organization cannot continue it


@dataclass
class Conversation:
    """A durable conversation: items accumulate across the responses created in it."""

    id: str
    created_at: int
    metadata: dict[str, Any]
    items: list[Entry] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        """The public `conversation` object."""
        return {
            "id": self.id,
            "object": "conversation",
            "created_at": self.created_at,
            "metadata": self.metadata,
        }


class ConnectionCache:
    """WebSocket mode's connection-local memory: the most recent response made on one connection, with the
    whole context it ends (so it can be continued even when it was not stored). Used by one thread only."""

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.last_entries: list[Entry] = []

    def remember(self, response_id: str, entries: list[Entry]) -> None:
        """Keep `response_id` (and only it) as the connection's most recent response."""
        self.last_id, self.last_entries = response_id, entries

    def forget(self) -> None:
        """Evict the cached response (a failed turn does, like the API)."""
        self.last_id, self.last_entries = None, []


class IdFactory:
    """Ids like `resp_<hex>` derived from the seed and a per-prefix counter, so runs are reproducible."""

    def __init__(self, seed: str) -> None:
        self._seed = seed
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def new(self, prefix: str) -> str:
        """The next id for `prefix`."""
        with self._lock:
            counter = self._counters.get(prefix, 0) + 1
            self._counters[prefix] = counter
        digest = hashlib.sha256(f"{self._seed}|{prefix}|{counter}".encode()).hexdigest()
        return f"{prefix}_{digest[:32]}"

    def reset(self) -> None:
        """Start every counter again, so a reset emulator replays the same ids."""
        with self._lock:
            self._counters.clear()


class Store:
    """Thread-safe store; callers hold `lock` around multi-step operations."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._responses: dict[str, StoredResponse] = {}
        self._items: dict[str, tuple[Entry, str]] = {}
        self._outputs: dict[str, tuple[list[Entry], int]] = {}  # output item id -> its response's output, its index
        self._conversations: dict[str, Conversation] = {}

    def put_response(self, response: StoredResponse) -> None:
        """Persist a response and make its input and output items resolvable by id."""
        with self.lock:
            self._responses[response.id] = response
            for entry in [*response.input, *response.output]:
                self._register(entry, response.id)
            self._place_outputs(response.output)

    def _place_outputs(self, output: list[Entry]) -> None:
        for index, entry in enumerate(output):
            item_id = entry.item.get("id")
            if isinstance(item_id, str) and item_id:
                self._outputs.setdefault(item_id, (output, index))  # a repeated id: its first position

    def output_place(self, item_id: str) -> tuple[list[Entry], int] | None:
        """The output of the stored response that returned ``item_id``, and its position in it (what the API pairs a
        replayed reasoning item and the item after it by)."""
        with self.lock:
            return self._outputs.get(item_id)

    def get_response(self, response_id: str) -> StoredResponse | None:
        """The stored response, or None (never stored, `store=false`, or deleted)."""
        with self.lock:
            return self._responses.get(response_id)

    def delete_response(self, response_id: str) -> bool:
        """Forget a response and the items only it owned; False when it did not exist."""
        with self.lock:
            response = self._responses.pop(response_id, None)
            if response is None:
                return False
            for item_id in [k for k, (_, owner) in self._items.items() if owner == response_id]:
                del self._items[item_id]
            for item_id in [k for k, (output, _) in self._outputs.items() if output is response.output]:
                del self._outputs[item_id]
            return True

    def get_item(self, item_id: str) -> Entry | None:
        """A persisted item (from a stored response or a conversation) by id."""
        with self.lock:
            found = self._items.get(item_id)
            return found[0] if found else None

    def put_conversation(self, conversation: Conversation) -> None:
        """Persist a new conversation with its seed items."""
        with self.lock:
            self._conversations[conversation.id] = conversation
            for entry in conversation.items:
                self._register(entry, conversation.id)

    def get_conversation(self, conversation_id: str) -> Conversation | None:
        """The conversation, or None."""
        with self.lock:
            return self._conversations.get(conversation_id)

    def delete_conversation(self, conversation_id: str) -> bool:
        """Forget a conversation; False when it did not exist."""
        with self.lock:
            if self._conversations.pop(conversation_id, None) is None:
                return False
            for item_id in [k for k, (_, owner) in self._items.items() if owner == conversation_id]:
                del self._items[item_id]
            return True

    def append_to_conversation(self, conversation_id: str, entries: list[Entry], *, persist: bool) -> None:
        """Add a turn's items to a conversation; `persist` also makes them resolvable by id."""
        with self.lock:
            conversation = self._conversations[conversation_id]
            conversation.items.extend(entries)
            if persist:
                for entry in entries:
                    self._register(entry, conversation_id)

    def finish(self, response: StoredResponse) -> None:
        """Turn a pending background response into its finished self (output items become resolvable)."""
        with self.lock:
            pending = response.pending
            if pending is None:
                return
            response.pending = None
            response.body = pending.body
            response.output = pending.output
            for entry in pending.output:
                self._register(entry, response.id)
            self._place_outputs(pending.output)
            if pending.conversation_id is not None and pending.conversation_id in self._conversations:
                self.append_to_conversation(pending.conversation_id, pending.conversation_items, persist=True)

    def remove_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        """Take one item out of a conversation (and out of the id index); False when it is not there."""
        with self.lock:
            conversation = self._conversations.get(conversation_id)
            if conversation is None:
                return False
            kept = [e for e in conversation.items if e.item.get("id") != item_id]
            if len(kept) == len(conversation.items):
                return False
            conversation.items = kept
            owned = self._items.get(item_id)
            if owned is not None and owned[1] == conversation_id:
                del self._items[item_id]
            return True

    def clear(self) -> None:
        """Drop everything (used by `Emulator.reset`)."""
        with self.lock:
            self._responses.clear()
            self._items.clear()
            self._outputs.clear()
            self._conversations.clear()

    def _register(self, entry: Entry, owner: str) -> None:
        item_id = entry.item.get("id")
        if isinstance(item_id, str) and item_id:
            self._items[item_id] = (entry, owner)
