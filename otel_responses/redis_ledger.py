"""A ledger shared by the processes of a fleet through Redis, so a turn that lands on another worker is still
checked against its parent.

Two tiers: this process's own entries, and those it read from Redis, live in a local ``InMemoryLedger``; Redis is
asked only for what is missing locally, in one round trip per lookup (two for a replay: its item locations, then
the entries they point to). Writes update the local tier at once and leave the call path: a background thread
drains a bounded queue into Redis with pipelines, every key with a TTL. A read that fails, or times out (50 ms by
default), is counted, marks the call's span ``openai_responses.ledger.unavailable`` and is answered from local
knowledge; Redis is then left alone for a short backoff, so a dead store costs at most one timeout per backoff.
Nothing here ever raises into the app, and ``redis`` is imported only when a client is built from a URL.

Redis holds only what the in-process ledger holds — ids, enums, flags, counts, the keyed instructions hash and
keyed 64-bit fingerprints — under ``{prefix}:{key id}:``, the key id being that of the fingerprint key: processes
with different keys never see each other's entries, so a rotated key makes old entries invisible (they expire),
never a false signal.

In-flight detection (``enter``/``leave``, for ``concurrent_branch`` on requests running at the same moment) stays
local: a shared counter would cost two round trips per call and leak counts when a process dies mid-call. A
second child of one parent is still seen across processes through the parent's child marker.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import json
import logging
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .items import ItemMeta
from .ledger import DEFAULT_CAPACITY, MAX_INPUT_MESSAGES, MAX_OUTPUT_ITEMS, Entry, InMemoryLedger, Key, location_keys

if TYPE_CHECKING:
    from .fingerprint import Fingerprinter

DEFAULT_PREFIX = "otel-responses"
DEFAULT_TTL_SECONDS = 3600
DEFAULT_TIMEOUT_SECONDS = 0.05
DEFAULT_MAX_ENTRY_BYTES = 8192
DEFAULT_BACKOFF_SECONDS = 1.0
DEFAULT_QUEUE_SIZE = 10_000
URL_SCHEMES = ("redis", "rediss", "unix")
# What stats() counts: Redis reads made, failed and skipped (backoff); entries written, lost to failed writes,
# dropped (queue full, or too big even without output items), trimmed to the size cap; values that did not decode.
COUNTS = ("reads", "read_failures", "reads_skipped", "writes", "write_failures", "dropped", "trimmed", "undecodable")
INSTALL_HINT = "pip install 'otel-responses[redis]'"

# Writes are off the call path: a slower network may take longer than a read may.
WRITE_TIMEOUT_SECONDS = 2.0
_BATCH = 256  # entries per pipeline
_IDLE_SECONDS = 10.0  # the writer thread ends after this long without work (a new one starts on demand)
_EXIT_FLUSH_SECONDS = 1.0
_MIN_ENTRY_BYTES = 256
_MAX_ID_CHARS = 512  # longer ids (never seen from the API) are kept local rather than made into keys
# Version 2 adds the parent, the last app messages' fingerprints, other copies' payload shapes, and per item whether
# it is a call the app must answer and its payload's shape; version 1 (written by a process of the previous release
# during a rolling deploy) still decodes, those fields taken as unknown.
_FORMAT = 2
_ENTRY_FIELDS = {1: 9, 2: 12}
_META_FIELDS = {1: 7, 2: 9}
_MAX_FINGERPRINT = 2**64 - 1
_MAX_SHAPE = 2**40

_log = logging.getLogger(__name__)
# Per call (thread or asyncio task): a read made for it could not reach Redis.
_UNAVAILABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("otel_responses_ledger_unavailable", default=False)


# -- serialisation -------------------------------------------------------------------------------------------


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def encode_entry(entry: Entry, max_bytes: int) -> tuple[bytes, int] | None:
    """The entry as compact JSON of its fields only, and how many output items it kept: items past
    ``max_bytes`` are dropped (an entry that cannot fit even without them gives None)."""
    head: list[Any] = [
        _FORMAT,
        entry.response_id,
        entry.sequence,
        int(entry.store),
        entry.instructions_hash,
        entry.conversation_id,
        entry.input_app_messages,
        entry.input_compactions,
    ]
    tail: list[Any] = [entry.parent_id, list(entry.input_messages[-MAX_INPUT_MESSAGES:])]
    outputs = [
        [m.type, m.id, m.call_id, m.role, m.phase, int(m.encrypted), m.fingerprint, int(m.awaits), m.shape]
        for m in entry.outputs[:MAX_OUTPUT_ITEMS]
    ]
    copies = [list(copy) for copy in entry.copies[:MAX_OUTPUT_ITEMS]]
    data = _dumps([*head, outputs, *tail, copies])
    if len(data) <= max_bytes:
        return data, len(outputs)
    size = len(_dumps([*head, [], *tail, []]))
    if size > max_bytes:
        return None
    kept = 0
    for output in outputs:
        size += len(_dumps(output)) + (1 if kept else 0)
        if size > max_bytes:
            break
        kept += 1
    return _dumps([*head, outputs[:kept], *tail, []]), kept


def _optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


def _flag(value: object) -> bool:
    return type(value) is int and value in (0, 1)


def _fingerprint(value: object) -> bool:
    return type(value) is int and 0 <= value <= _MAX_FINGERPRINT


def _shape(value: object) -> bool:
    return type(value) is int and 0 <= value < _MAX_SHAPE


def _meta(raw: object, version: int) -> ItemMeta | None:
    if not isinstance(raw, list) or len(raw) != _META_FIELDS[version]:
        return None
    item_type, item_id, call_id, role, phase, encrypted, fingerprint = raw[:7]
    awaits, shape = raw[7:] if version >= 2 else (0, None)
    if not isinstance(item_type, str) or not all(map(_optional_str, (item_id, call_id, role, phase))):
        return None
    if not _flag(encrypted) or not _flag(awaits):
        return None
    if fingerprint is not None and not _fingerprint(fingerprint):
        return None
    if shape is not None and not _shape(shape):
        return None
    if version == 1:
        # Version 1 paired client calls by type alone: the calls it knew then awaited an output.
        awaits = int(item_type in _V1_CALLS and call_id is not None)
    return ItemMeta(item_type, item_id, call_id, role, phase, bool(encrypted), fingerprint, bool(awaits), shape)


_V1_CALLS = frozenset({"function_call", "custom_tool_call", "computer_call", "shell_call", "apply_patch_call"})


def decode_entry(raw: object, max_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> Entry | None:
    """The entry a value holds, or None for anything malformed, foreign or oversized: a bad value is absent."""
    if not isinstance(raw, (bytes, str)) or len(raw) > max(max_bytes, DEFAULT_MAX_ENTRY_BYTES) * 2:
        return None
    try:
        doc = json.loads(raw)
    except Exception:  # not JSON, not UTF-8, or nested past the recursion limit
        return None
    if not isinstance(doc, list) or not doc or type(doc[0]) is not int or doc[0] not in _ENTRY_FIELDS:
        return None
    version = doc[0]
    if len(doc) != _ENTRY_FIELDS[version]:
        return None
    _, response_id, sequence, store, instructions_hash, conversation_id, app_messages, compactions = doc[:8]
    raw_outputs = doc[8]
    parent_id, raw_messages, raw_copies = doc[9:] if version >= 2 else (None, [], [])
    if not _optional_str(parent_id) or not isinstance(raw_messages, list) or not isinstance(raw_copies, list):
        return None
    if len(raw_messages) > MAX_INPUT_MESSAGES or not all(map(_fingerprint, raw_messages)):
        return None
    if len(raw_copies) > MAX_OUTPUT_ITEMS or not all(
        isinstance(c, list) and len(c) == 2 and _count(c[0]) and c[0] < MAX_OUTPUT_ITEMS and _shape(c[1])
        for c in raw_copies
    ):
        return None
    if not isinstance(response_id, str) or not response_id or type(sequence) is not int:
        return None
    if store not in (0, 1) or type(store) is not int:
        return None
    if not _optional_str(instructions_hash) or not _optional_str(conversation_id):
        return None
    if not _count(app_messages) or not _count(compactions):
        return None
    if not isinstance(raw_outputs, list) or len(raw_outputs) > MAX_OUTPUT_ITEMS:
        return None
    outputs = [_meta(item, version) for item in raw_outputs]
    if any(meta is None for meta in outputs):
        return None
    return Entry(
        response_id=response_id,
        sequence=sequence,
        store=bool(store),
        instructions_hash=instructions_hash,
        conversation_id=conversation_id,
        outputs=tuple(meta for meta in outputs if meta is not None),
        input_app_messages=app_messages,
        input_compactions=compactions,
        parent_id=parent_id,
        input_messages=tuple(raw_messages),
        copies=tuple((index, shape) for index, shape in raw_copies),
    )


def _decode_location(raw: object) -> tuple[str, int] | None:
    """``index:response_id`` -> (response id, output index), or None."""
    try:
        text = raw.decode("ascii") if isinstance(raw, bytes) else raw
        if not isinstance(text, str):
            return None
        index, response_id = text.split(":", 1)
        position = int(index)
    except Exception:
        return None
    return (response_id, position) if 0 <= position < MAX_OUTPUT_ITEMS and response_id else None


def _keyable(name: str | None) -> bool:
    return name is not None and 0 < len(name) <= _MAX_ID_CHARS


def _location_key(namespace: str, key: Key) -> str | None:
    """The Redis key locating an output item: by text fingerprint (``f``), by call (``t``: type and call_id), by
    id (``i``); None for a name too long to be a key."""
    if isinstance(key, int):
        return f"{namespace}:f:{key:016x}"
    if isinstance(key, tuple):
        item_type, call_id = key
        return f"{namespace}:t:{item_type}:{call_id}" if _keyable(item_type) and _keyable(call_id) else None
    return f"{namespace}:i:{key}" if _keyable(key) else None


def _clients(url: str, timeout_seconds: float) -> tuple[Any, Any]:
    """A reader with the tight timeout and no retry (a retry would double the worst case), and a writer."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError as exc:
        raise ImportError(f"the Redis ledger needs the redis package: {INSTALL_HINT}") from exc
    reader = redis.Redis.from_url(
        url, socket_timeout=timeout_seconds, socket_connect_timeout=timeout_seconds, retry=Retry(NoBackoff(), 0)
    )
    writer = redis.Redis.from_url(
        url,
        socket_timeout=max(WRITE_TIMEOUT_SECONDS, timeout_seconds),
        socket_connect_timeout=max(WRITE_TIMEOUT_SECONDS, timeout_seconds),
        retry=Retry(NoBackoff(), 0),
    )
    return reader, writer


def check_url(url: object) -> str:
    """The URL if its scheme is one Redis clients take; the message never repeats the URL (it may hold a
    password)."""
    if not isinstance(url, str) or url.split("://", 1)[0].lower() not in URL_SCHEMES or "://" not in url:
        raise ValueError("the Redis ledger URL must start with redis://, rediss:// or unix://")
    return url


# -- the ledger ----------------------------------------------------------------------------------------------

_Job = tuple[str, Entry, str | None]


class RedisLedger:
    """The ``Ledger`` protocol over a local ``InMemoryLedger`` and a Redis shared by the fleet.

    ``url`` (``redis://``, ``rediss://`` or ``unix://``; AUTH and TLS as the URL says) or ``client`` (an existing
    ``redis.Redis``; its own timeouts and retries then apply, and ``close()`` leaves it open). Reads time out after
    ``timeout_seconds``; after a failure Redis is not read for ``backoff_seconds``. Every key expires after
    ``ttl_seconds``; an entry is at most ``max_entry_bytes`` (output items past it are dropped). The ledger works
    only once bound to the fleet's fingerprinter (``instrument()`` does it); until then it is local.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        prefix: str = DEFAULT_PREFIX,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        local_capacity: int = DEFAULT_CAPACITY,
        backoff_seconds: float = DEFAULT_BACKOFF_SECONDS,
        queue_size: int = DEFAULT_QUEUE_SIZE,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("give RedisLedger either a url or a client")
        if type(ttl_seconds) is not int or ttl_seconds < 1:
            raise ValueError("ttl_seconds must be a positive integer")
        if not isinstance(timeout_seconds, (int, float)) or not math.isfinite(timeout_seconds) or timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be a positive number")
        if not isinstance(backoff_seconds, (int, float)) or not math.isfinite(backoff_seconds) or backoff_seconds < 0:
            raise ValueError("backoff_seconds must be a number, at least 0")
        if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
            raise ValueError("prefix must be a non-empty string without spaces")
        if type(max_entry_bytes) is not int or max_entry_bytes < _MIN_ENTRY_BYTES:
            raise ValueError(f"max_entry_bytes must be an integer of at least {_MIN_ENTRY_BYTES}")
        if type(queue_size) is not int or queue_size < 1:
            raise ValueError("queue_size must be a positive integer")
        if client is None:
            self._reader, self._writer_client = _clients(check_url(url), float(timeout_seconds))
            self._owns_clients = True
        else:
            self._reader = self._writer_client = client
            self._owns_clients = False
        self.ttl_seconds = ttl_seconds
        self.timeout_seconds = float(timeout_seconds)
        self.backoff_seconds = float(backoff_seconds)
        self.prefix = prefix
        self.max_entry_bytes = max_entry_bytes
        self.queue_size = queue_size
        self._local = InMemoryLedger(local_capacity)
        self._namespace: str | None = None
        self._retry_at = 0.0  # monotonic time before which reads do not go to Redis
        self._last_sequence = 0
        self._sequence_lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self._counts_lock = threading.Lock()
        self._jobs: deque[_Job] = deque()
        self._pending = 0  # queued or being written
        self._cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._closed = False
        _LIVE.add(self)

    # -- setup ---------------------------------------------------------------------------------------------

    def bind(self, fingerprinter: Fingerprinter) -> None:
        """Use the fleet's fingerprint key: entries live under its id. Rebinding to another key forgets the
        local tier, whose fingerprints were made with the old one."""
        namespace = f"{self.prefix}:{fingerprinter.key_id()}"
        if self._namespace is not None and namespace != self._namespace:
            self._local = InMemoryLedger(self._local.capacity)
        self._namespace = namespace

    @property
    def namespace(self) -> str | None:
        """``{prefix}:{key id}``, the start of every key; None until bound."""
        return self._namespace

    def stats(self) -> dict[str, int]:
        """Counts of Redis reads, failures, skipped reads (backoff), writes, dropped and trimmed entries."""
        with self._counts_lock:
            return dict(self._counts)

    def _bump(self, name: str, by: int = 1) -> None:
        with self._counts_lock:
            self._counts[name] += by

    # -- reads ---------------------------------------------------------------------------------------------

    def _fetch(self, keys: list[str]) -> list[Any] | None:
        """The values of ``keys`` in one round trip, or None when Redis cannot be asked (then the call is
        marked unavailable)."""
        if self._closed:
            return None
        if time.monotonic() < self._retry_at:
            self._bump("reads_skipped")
            _UNAVAILABLE.set(True)
            return None
        try:
            values = self._reader.mget(keys)
        except Exception as error:  # refused, timed out, AUTH, READONLY...: never the app's problem
            self._retry_at = time.monotonic() + self.backoff_seconds
            self._bump("read_failures")
            _UNAVAILABLE.set(True)
            _log.debug("otel-responses: shared ledger read failed (%s); using local knowledge", type(error).__name__)
            return None
        self._bump("reads")
        if not isinstance(values, list) or len(values) != len(keys):
            self._bump("undecodable")
            return None
        return values

    def _decode(self, raw: object, response_id: str | None = None) -> Entry | None:
        if raw is None:
            return None
        entry = decode_entry(raw, self.max_entry_bytes)
        if entry is None or (response_id is not None and entry.response_id != response_id):
            self._bump("undecodable")
            return None
        return entry

    def get(self, response_id: str) -> Entry | None:
        entry = self._local.get(response_id)
        namespace = self._namespace
        if entry is not None or namespace is None or not _keyable(response_id):
            return entry
        values = self._fetch([f"{namespace}:r:{response_id}"])
        if values is None:
            return None
        entry = self._decode(values[0], response_id)
        if entry is not None:
            self._local.cache(entry)
        return entry

    def locate(self, keys: Sequence[Key]) -> list[tuple[Entry, int] | None]:
        """Item ids missing locally, and every text fingerprint (one text may be returned by several responses,
        and the latest of them may be another process's), in one MGET; then the entries they point to in
        another. Of two answers for a key, the newer entry wins, as in one process."""
        found = self._local.locate(keys)
        namespace = self._namespace
        if namespace is None:
            return found
        names = [_location_key(namespace, key) for key in keys]
        asked = [i for i, key in enumerate(keys) if names[i] is not None and (isinstance(key, int) or found[i] is None)]
        if not asked:
            return found
        values = self._fetch([names[i] or "" for i in asked])
        if values is None:
            return found
        places = {i: _decode_location(raw) for i, raw in zip(asked, values, strict=True) if raw is not None}
        entries: dict[str, Entry] = {}
        remote: list[str] = []
        for place in places.values():
            if place is None or place[0] in entries or place[0] in remote:
                continue
            local = self._local.get(place[0])
            if local is not None:
                entries[place[0]] = local
            elif _keyable(place[0]):
                remote.append(place[0])
        if remote:
            fetched = self._fetch([f"{namespace}:r:{response_id}" for response_id in remote])
            for response_id, raw in zip(remote, fetched or (), strict=False):
                entry = self._decode(raw, response_id)
                if entry is not None:
                    self._local.cache(entry)
                    entries[response_id] = entry
        for i, place in places.items():
            if place is None:
                self._bump("undecodable")
                continue
            entry = entries.get(place[0])
            if entry is None or not self._holds(entry, place[1], keys[i]):
                continue
            current = found[i]
            if current is None or current[0].sequence < entry.sequence:
                found[i] = (entry, place[1])
        return found

    @staticmethod
    def _holds(entry: Entry, index: int, key: Key) -> bool:
        """The entry's output ``index`` really is the item ``key`` names (a stale or foreign location is not)."""
        if index >= len(entry.outputs):
            return False
        meta = entry.outputs[index]
        if isinstance(key, int):
            return meta.role == "assistant" and meta.fingerprint == key
        if isinstance(key, tuple):
            return (meta.type, meta.call_id) == key
        return meta.id == key

    def latest_in_conversation(self, conversation_id: str) -> Entry | None:
        """Always asks Redis (when it can): another worker may have written a later turn, and an older local
        entry standing in for it would raise false signals (its tool calls look unanswered)."""
        local = self._local.latest_in_conversation(conversation_id)
        namespace = self._namespace
        if namespace is None or not _keyable(conversation_id):
            return local
        values = self._fetch([f"{namespace}:c:{conversation_id}"])
        if values is None:
            return local
        remote = self._decode(values[0])
        if remote is None or remote.conversation_id != conversation_id:
            return local
        if local is not None and (local.response_id == remote.response_id or local.sequence > remote.sequence):
            return local
        self._local.cache(remote)
        return remote

    def has_child(self, response_id: str) -> bool:
        if self._local.has_child(response_id):
            return True
        namespace = self._namespace
        if namespace is None or not _keyable(response_id):
            return False
        values = self._fetch([f"{namespace}:k:{response_id}"])
        return values is not None and values[0] is not None

    def unavailable(self) -> bool:
        if _UNAVAILABLE.get():
            _UNAVAILABLE.set(False)
            return True
        return False

    # -- writes --------------------------------------------------------------------------------------------

    def next_sequence(self) -> int:
        """Wall-clock nanoseconds, strictly increasing here: orders entries across processes (as far as their
        clocks agree) without asking Redis."""
        with self._sequence_lock:
            self._last_sequence = max(self._last_sequence + 1, time.time_ns())
            return self._last_sequence

    def record(self, entry: Entry, parent_id: str | None) -> None:
        """Locally now; to Redis from the background writer. A full queue drops the write (counted), never
        blocks the app."""
        self._local.record(entry, parent_id)
        if _UNAVAILABLE.get():
            # A read at the end of a call (the conversation's latest, say) failed after its span began: it must
            # not mark the next call made in this thread or task.
            _UNAVAILABLE.set(False)
        namespace = self._namespace
        if namespace is None or self._closed:
            return
        with self._cond:
            if self._pending >= self.queue_size:
                self._bump("dropped")
                return
            self._jobs.append((namespace, entry, parent_id))
            self._pending += 1
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name="otel-responses-ledger", daemon=True)
                self._writer.start()
            self._cond.notify()

    def enter(self, key: str) -> bool:
        return self._local.enter(key)

    def leave(self, key: str) -> None:
        self._local.leave(key)

    def _run(self) -> None:
        """The writer thread: batches of queued entries, one pipeline each, a failed one retried once after the
        backoff (a restarted Redis is reconnected to); ends when idle or closed."""
        while True:
            with self._cond:
                if not self._jobs:
                    self._cond.wait(_IDLE_SECONDS)
                if not self._jobs:
                    self._writer = None
                    self._cond.notify_all()
                    return
                batch = [self._jobs.popleft() for _ in range(min(len(self._jobs), _BATCH))]
            commands, entries = self._commands(batch)
            failed = False
            for _attempt in range(2):
                try:
                    if commands:
                        self._send(commands)
                    failed = False
                    break
                except Exception as error:  # Redis down or refusing: never the app's problem
                    failed = True
                    _log.debug("otel-responses: shared ledger write failed (%s)", type(error).__name__)
                    self._pause()
            self._bump("write_failures" if failed else "writes", entries)
            with self._cond:
                self._pending -= len(batch)
                self._cond.notify_all()

    def _pause(self) -> None:
        """Wait out the backoff (close() ends it early)."""
        resume = time.monotonic() + self.backoff_seconds
        with self._cond:
            while not self._closed and (left := resume - time.monotonic()) > 0:
                self._cond.wait(left)

    def _commands(self, batch: list[_Job]) -> tuple[list[tuple[str, bytes]], int]:
        """The keys and values a batch writes, and how many entries it holds: each entry, the locations of its
        output items (by id, by call, and by text fingerprint for assistant messages), its conversation's latest
        entry, and its parent's child marker."""
        commands: list[tuple[str, bytes]] = []
        entries = 0
        for namespace, entry, parent_id in batch:
            response_id = entry.response_id
            encoded = encode_entry(entry, self.max_entry_bytes) if _keyable(response_id) else None
            if encoded is None:
                self._bump("dropped")
                continue
            data, kept = encoded
            if kept < len(entry.outputs):
                self._bump("trimmed")
            commands.append((f"{namespace}:r:{response_id}", data))
            for index, meta in enumerate(entry.outputs[:kept]):
                place = f"{index}:{response_id}".encode()
                for key in location_keys(meta):
                    name = _location_key(namespace, key)
                    if name is not None:
                        commands.append((name, place))
            if _keyable(entry.conversation_id):
                commands.append((f"{namespace}:c:{entry.conversation_id}", data))
            if _keyable(parent_id):
                commands.append((f"{namespace}:k:{parent_id}", b"1"))
            entries += 1
        return commands, entries

    def _send(self, commands: list[tuple[str, bytes]]) -> None:
        """One pipelined round trip (no MULTI: the keys are independent); every key expires."""
        pipe = self._writer_client.pipeline(transaction=False)
        for key, value in commands:
            pipe.set(key, value, ex=self.ttl_seconds)
        pipe.execute()

    # -- lifecycle -----------------------------------------------------------------------------------------

    def _after_fork(self) -> None:
        """In a forked child (a pre-forking server): no writer thread came along, nor may a lock held by one."""
        self._cond = threading.Condition()
        self._counts_lock = threading.Lock()
        self._sequence_lock = threading.Lock()
        self._jobs.clear()
        self._pending = 0
        self._writer = None
        self._retry_at = 0.0

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued write was sent (or failed); False if ``timeout`` ran out first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Flush, stop the writer and close the clients this ledger made; the local tier keeps working."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            writer = self._writer
            self._cond.notify_all()
        if writer is not None:
            writer.join(timeout)
        if self._owns_clients:
            for client in {id(self._reader): self._reader, id(self._writer_client): self._writer_client}.values():
                try:
                    client.connection_pool.disconnect()
                except Exception:
                    _log.debug("otel-responses: closing a shared ledger connection failed")
        _LIVE.discard(self)


_LIVE: weakref.WeakSet[RedisLedger] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for ledger in list(_LIVE):
        ledger._after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _flush_at_exit() -> None:
    """A short-lived process hands its last entries to Redis before it goes (briefly: exit must not hang)."""
    for ledger in list(_LIVE):
        with contextlib.suppress(Exception):
            ledger.flush(_EXIT_FLUSH_SECONDS)
