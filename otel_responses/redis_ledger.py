"""A ledger shared by the processes of a fleet through Redis, so a turn that lands on another worker is still
checked against its parent.

Two tiers: this process's own entries, and those it read from Redis, live in a local ``InMemoryLedger``; Redis is
asked only for what is missing locally, in one round trip per lookup (two for a replay: its item locations, then
the entries they point to). Writes update the local tier at once and leave the call path: a background thread
(``ledger_writer``) drains a bounded queue into Redis with pipelines, every key with a TTL. A read that fails, or
times out (50 ms by default), is counted, marks the call's span ``openai_responses.ledger.unavailable`` and is
answered from local knowledge; Redis is then left alone for a short backoff, so a dead store costs at most one
timeout per backoff. Nothing here ever raises into the app, and ``redis`` is imported only when a client is built
from a URL.

Redis holds only what the in-process ledger holds — ids, enums, flags, counts, the keyed instructions hash and
keyed 64-bit fingerprints — under ``{prefix}:{key id}:``, the key id being that of the fingerprint key: processes
with different keys never see each other's entries, so a rotated key makes old entries invisible (they expire),
never a false signal. Every value is sealed with a MAC under a key derived from the fleet's hash key and checked
against the API's shapes when read (``ledger_codec``): a value that fails is absent, and counted. An entry read from
Redis is marked ``shared``: strict mode never refuses a request on it alone.

In-flight detection (``enter``/``leave``, for ``concurrent_branch`` on requests running at the same moment) stays
local: a shared counter would cost two round trips per call and leak counts when a process dies mid-call. A
second child of one parent is still seen across processes through the parent's continued-marker.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .ledger import DEFAULT_CAPACITY, Entry, InMemoryLedger, Key
from .ledger_codec import (
    DEFAULT_MAX_ENTRY_BYTES,
    FORMAT,
    Codec,
    conversation_key,
    decode_entry,
    encode_entry,
    entry_key,
    is_id,
    location_key,
    marker_key,
)
from .ledger_writer import Writer

if TYPE_CHECKING:
    from .fingerprint import Fingerprinter

__all__ = [
    "COUNTS",
    "DEFAULT_BACKOFF_SECONDS",
    "DEFAULT_MAX_ENTRY_BYTES",
    "DEFAULT_PREFIX",
    "DEFAULT_QUEUE_SIZE",
    "DEFAULT_TIMEOUT_SECONDS",
    "DEFAULT_TTL_SECONDS",
    "FORMAT",
    "INSTALL_HINT",
    "URL_SCHEMES",
    "WRITE_TIMEOUT_SECONDS",
    "RedisLedger",
    "check_url",
    "decode_entry",
    "encode_entry",
]

DEFAULT_PREFIX = "otel-responses"
DEFAULT_TTL_SECONDS = 3600
DEFAULT_TIMEOUT_SECONDS = 0.05
DEFAULT_BACKOFF_SECONDS = 1.0
DEFAULT_QUEUE_SIZE = 10_000
URL_SCHEMES = ("redis", "rediss", "unix")
# What stats() counts: Redis reads made, failed and skipped (backoff); entries written, lost to failed writes,
# dropped (queue full, or too big even without output items), trimmed to the size cap, kept local (a field outside
# what a reader accepts: an id no API makes, say); values read and ignored: undecodable (malformed, oversized, of an
# unknown format, a field outside the rules), forged (a MAC that does not verify: made without the hash key, or
# moved from another key), unsigned (no MAC at all: the previous release's format, or junk, while
# ``accept_unsigned`` is off; still counted during a rolling deploy, it says old writers remain).
COUNTS = (
    "reads",
    "read_failures",
    "reads_skipped",
    "writes",
    "write_failures",
    "dropped",
    "trimmed",
    "local_only",
    "undecodable",
    "forged",
    "unsigned",
)
INSTALL_HINT = "pip install 'otel-responses[redis]'"

# Writes are off the call path: a slower network may take longer than a read may.
WRITE_TIMEOUT_SECONDS = 2.0
_EXIT_FLUSH_SECONDS = 1.0
_MIN_ENTRY_BYTES = 256

_log = logging.getLogger(__name__)
# Per call (thread or asyncio task): a read made for it could not reach Redis.
_UNAVAILABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("otel_responses_ledger_unavailable", default=False)


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

# A record waiting for the writer: the binding it was made under, the entry, its parent.
_Job = tuple[Codec, str, Entry, str | None]


class RedisLedger:
    """The ``Ledger`` protocol over a local ``InMemoryLedger`` and a Redis shared by the fleet.

    ``url`` (``redis://``, ``rediss://`` or ``unix://``; AUTH and TLS as the URL says) or ``client`` (an existing
    ``redis.Redis``; its own timeouts and retries then apply, and ``close()`` leaves it open). Reads time out after
    ``timeout_seconds``; after a failure Redis is not read for ``backoff_seconds``. Every key expires after
    ``ttl_seconds``; an entry is at most ``max_entry_bytes`` (output items past it are dropped). The ledger works
    only once bound to the fleet's fingerprinter (``instrument()`` does it); until then it is local.

    ``accept_unsigned`` (off by default) also reads the previous release's unsigned values (format 2), for a
    rolling deploy whose cross-process checks must not go silent while old writers remain. While it is on, anyone
    who can write to the Redis can forge facts again (a parent stored with ``store=false``, a pending call): turn it
    off once the old writers are gone. Left off, a rolling deploy only makes checks against the old writers'
    responses silent (their values are counted ``unsigned``), never a false signal.
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
        accept_unsigned: bool = False,
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
        if type(accept_unsigned) is not bool:
            raise ValueError("accept_unsigned must be True or False")
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
        self.accept_unsigned = accept_unsigned
        self._local = InMemoryLedger(local_capacity)
        # The namespace and the codec of the bound key, replaced together (a read never pairs one key's namespace
        # with another's MAC); None until bound.
        self._bound: tuple[str, Codec] | None = None
        self._retry_at = 0.0  # monotonic time before which reads do not go to Redis
        self._last_sequence = 0
        self._sequence_lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self._counts_lock = threading.Lock()
        self._writer: Writer[_Job] = Writer(
            self._writer_client,
            self._commands,
            self._bump,
            ttl_seconds=ttl_seconds,
            backoff_seconds=self.backoff_seconds,
            queue_size=queue_size,
        )
        self._closed = False
        _LIVE.add(self)

    # -- setup ---------------------------------------------------------------------------------------------

    def bind(self, fingerprinter: Fingerprinter) -> None:
        """Use the fleet's fingerprint key: entries live under its id, sealed with a key derived from it.
        Rebinding to another key forgets the local tier, whose fingerprints were made with the old one."""
        namespace = f"{self.prefix}:{fingerprinter.key_id()}"
        codec = Codec(
            fingerprinter, accept_unsigned=self.accept_unsigned, max_entry_bytes=self.max_entry_bytes, count=self._bump
        )
        if self._bound is not None and namespace != self._bound[0]:
            self._local = InMemoryLedger(self._local.capacity)
        self._bound = (namespace, codec)

    @property
    def namespace(self) -> str | None:
        """``{prefix}:{key id}``, the start of every key; None until bound."""
        return self._bound[0] if self._bound is not None else None

    def stats(self) -> dict[str, int]:
        """Counts of Redis reads, failures, skipped reads (backoff), writes, dropped, trimmed and local-only
        entries, and of values ignored as undecodable, forged or unsigned (see ``COUNTS``)."""
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

    def _entry(self, codec: Codec, key: str, raw: object, response_id: str | None = None) -> Entry | None:
        """The entry a value read from ``key`` holds, authenticated and checked; one of another response (a bug
        of a writer holding the key: the MAC binds the key name) is counted undecodable."""
        if raw is None:
            return None
        entry = codec.entry(key, raw)
        if entry is not None and response_id is not None and entry.response_id != response_id:
            self._bump("undecodable")
            return None
        return entry

    def get(self, response_id: str) -> Entry | None:
        entry = self._local.get(response_id)
        bound = self._bound
        if entry is not None or bound is None or not is_id(response_id):
            return entry
        namespace, codec = bound
        key = entry_key(namespace, response_id)
        values = self._fetch([key])
        if values is None:
            return None
        entry = self._entry(codec, key, values[0], response_id)
        if entry is not None:
            self._local.cache(entry)
        return entry

    def locate(self, keys: Sequence[Key]) -> list[tuple[Entry, int] | None]:
        """Item ids missing locally, and every text fingerprint (one text may be returned by several responses,
        and the latest of them may be another process's), in one MGET; then the entries they point to in
        another. Of two answers for a key, the newer entry wins, as in one process."""
        found = self._local.locate(keys)
        bound = self._bound
        if bound is None:
            return found
        namespace, codec = bound
        names = [location_key(namespace, key) for key in keys]
        asked = [i for i, key in enumerate(keys) if names[i] is not None and (isinstance(key, int) or found[i] is None)]
        if not asked:
            return found
        values = self._fetch([names[i] or "" for i in asked])
        if values is None:
            return found
        places: dict[int, tuple[str, int]] = {}
        for i, raw in zip(asked, values, strict=True):
            place = codec.location(names[i] or "", raw) if raw is not None else None
            if place is not None:
                places[i] = place
        entries: dict[str, Entry] = {}
        remote: list[str] = []
        for response_id, _ in places.values():
            if response_id in entries or response_id in remote:
                continue
            local = self._local.get(response_id)
            if local is not None:
                entries[response_id] = local
            else:
                remote.append(response_id)
        if remote:
            entry_keys = [entry_key(namespace, response_id) for response_id in remote]
            fetched = self._fetch(entry_keys)
            for response_id, key, raw in zip(remote, entry_keys, fetched or (), strict=False):
                entry = self._entry(codec, key, raw, response_id)
                if entry is not None:
                    self._local.cache(entry)
                    entries[response_id] = entry
        for i, (response_id, index) in places.items():
            entry = entries.get(response_id)
            if entry is None or not self._holds(entry, index, keys[i]):
                continue
            current = found[i]
            if current is None or current[0].sequence < entry.sequence:
                found[i] = (entry, index)
        return found

    @staticmethod
    def _holds(entry: Entry, index: int, key: Key) -> bool:
        """The entry's output ``index`` really is the item ``key`` names (a stale location is not)."""
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
        bound = self._bound
        if bound is None or not is_id(conversation_id):
            return local
        namespace, codec = bound
        key = conversation_key(namespace, conversation_id)
        values = self._fetch([key])
        if values is None:
            return local
        remote = self._entry(codec, key, values[0])
        if remote is not None and remote.conversation_id != conversation_id:
            self._bump("undecodable")
            remote = None
        if remote is None:
            return local
        if local is not None and (local.response_id == remote.response_id or local.sequence > remote.sequence):
            return local
        self._local.cache(remote)
        return remote

    def has_child(self, response_id: str) -> bool:
        if self._local.has_child(response_id):
            return True
        bound = self._bound
        if bound is None or not is_id(response_id):
            return False
        namespace, codec = bound
        key = marker_key(namespace, response_id)
        values = self._fetch([key])
        return values is not None and values[0] is not None and codec.marker(key, values[0])

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
        """Locally now; to Redis from the background writer (encoded and sealed there). A full queue drops the
        write (counted), never blocks the app."""
        self._local.record(entry, parent_id)
        if _UNAVAILABLE.get():
            # A read at the end of a call (the conversation's latest, say) failed after its span began: it must
            # not mark the next call made in this thread or task.
            _UNAVAILABLE.set(False)
        bound = self._bound
        if bound is None or self._closed:
            return
        self._writer.submit((bound[1], bound[0], entry, parent_id))

    def enter(self, key: str) -> bool:
        return self._local.enter(key)

    def leave(self, key: str) -> None:
        self._local.leave(key)

    def _commands(self, batch: list[_Job]) -> tuple[list[tuple[str, bytes]], int]:
        """On the writer thread: the keys and sealed values a batch writes, and how many entries it holds."""
        commands: list[tuple[str, bytes]] = []
        entries = 0
        for codec, namespace, entry, parent_id in batch:
            written = codec.commands(namespace, entry, parent_id)
            if written:
                commands.extend(written)
                entries += 1
        return commands, entries

    # -- lifecycle -----------------------------------------------------------------------------------------

    def _after_fork(self) -> None:
        """In a forked child (a pre-forking server): no writer thread came along, nor may a lock held by one."""
        self._counts_lock = threading.Lock()
        self._sequence_lock = threading.Lock()
        self._writer.after_fork()
        self._retry_at = 0.0

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued write was sent (or failed); False if ``timeout`` ran out first."""
        return self._writer.flush(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flush, stop the writer and close the clients this ledger made; the local tier keeps working."""
        self._writer.close(timeout)
        self._closed = True
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
