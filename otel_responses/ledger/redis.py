"""A ledger shared by the processes of a fleet through Redis, so a turn that lands on another worker is still
checked against its parent.

Two tiers: this process's own entries, and those it read from Redis, live in a local ``InMemoryLedger``; Redis is
asked only for what is missing locally, in one round trip per lookup (two for a replay: its item locations, then
the entries they point to). Writes update the local tier at once and leave the call path: a background thread
(``_writer``) drains a bounded queue into Redis with pipelines, every key with a TTL. A read that fails, or
times out (50 ms by default), is counted, marks the call's span ``openai_responses.ledger.unavailable`` and is
answered from local knowledge; Redis is then left alone for a short backoff, so a dead store costs at most one
timeout per backoff. Nothing here ever raises into the app, and ``redis`` is imported only when a client is built
from a URL.

A Redis Cluster (several seed URLs, a URL carrying ``?cluster=true``, or ``cluster=True``) is used through redis-py's
``RedisCluster``, built on first use (it asks for the topology as it is made), with no retries of its own: a node lost
or failing over is Redis unavailable, as above, until the topology is refreshed. Several seed nodes (full URLs,
comma-separated) are all handed to redis-py as ``startup_nodes``: a worker started after one of them died still
reaches the cluster through another. Keys carry a hash tag per response, conversation or item (``_codec``), one
layout on a single node and on a cluster; a replay's lookup of many keys fans out one ``MGET`` per slot in one
pipeline.

Redis holds only what the in-process ledger holds — ids, enums, flags, counts, the keyed instructions hash and
keyed 64-bit fingerprints — under ``{prefix}:{key id}:``, the key id being that of the fingerprint key: processes
with different keys never see each other's entries, so a rotated key makes old entries invisible (they expire),
never a false signal. Every value is sealed with a MAC under a key derived from the fleet's hash key and checked
against the API's shapes when read (``_codec``): a value that fails is absent, and counted. An entry read from
Redis is marked ``shared``: strict mode never refuses a request on it alone.

In-flight detection (``enter``/``leave``, for ``concurrent_branch`` on requests running at the same moment) stays
local: a shared counter would cost two round trips per call and leak counts when a process dies mid-call. A
second child of one parent is still seen across processes through the parent's continued-marker.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..version import install_hint
from . import (
    DEFAULT_CAPACITY,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TTL_SECONDS,
    WHOLE_ENTRY,
    Entry,
    InMemoryLedger,
    Key,
    LedgerView,
    Place,
)
from ._codec import (
    DEFAULT_MAX_ENTRY_BYTES,
    Codec,
    Location,
    conversation_key,
    entry_key,
    is_id,
    location_key,
    marker_key,
    marker_of,
)
from ._writer import Writer

if TYPE_CHECKING:
    from .._fingerprint import Fingerprinter
    from ._async import AsyncReader

__all__ = [
    "COUNTS",
    "DEFAULT_BACKOFF_SECONDS",
    "DEFAULT_MAX_ENTRY_BYTES",
    "DEFAULT_PREFIX",
    "DEFAULT_QUEUE_SIZE",
    "DEFAULT_TIMEOUT_SECONDS",
    "DEFAULT_TTL_SECONDS",
    "RedisLedger",
    "RedisURLError",
]

DEFAULT_PREFIX = "otel-responses"
DEFAULT_BACKOFF_SECONDS = 1.0
DEFAULT_QUEUE_SIZE = 10_000
URL_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_URL_SCHEMES = ("redis", "rediss")
# What stats() counts: Redis reads made, failed and skipped (backoff); entries written, lost to failed writes,
# dropped (queue full, or too big even without output items), trimmed to the size cap, kept local (a field outside
# what a reader accepts: an id no API makes, say); values read and ignored: undecodable (no sealed value of this
# format, malformed, oversized, a field outside the rules), forged (a MAC that does not verify: made without the hash
# key, or moved from another key).
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
)

# Writes are off the call path: a slower network may take longer than a read may.
WRITE_TIMEOUT_SECONDS = 2.0
_EXIT_FLUSH_SECONDS = 1.0
_MIN_ENTRY_BYTES = 256

_log = logging.getLogger(__name__)


def _import_redis() -> Any:
    try:
        import redis
    except ImportError as exc:
        raise ImportError(f"the Redis ledger needs the redis package: {install_hint('redis')}") from exc
    return redis


def _build(urls: tuple[str, ...], cluster: bool, timeout_seconds: float) -> Any:
    """A client with ``timeout_seconds`` on every socket operation and no retry (a retry would multiply the worst
    case). A cluster client asks a node for the topology as it is built (an error if none answers), so it is built
    only when first used; its own retries after a moved slot or a lost node are off too: a failed read is answered
    from local knowledge and Redis is asked again after the backoff, by then with a refreshed topology. Every seed
    URL of a cluster is a startup node (the first gives the connection options: they are the same in all)."""
    redis = _import_redis()
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    options: dict[str, Any] = {
        "socket_timeout": timeout_seconds,
        "socket_connect_timeout": timeout_seconds,
        "retry": Retry(NoBackoff(), 0),
    }
    if not cluster:
        return redis.Redis.from_url(urls[0], **options)
    from redis.cluster import ClusterNode, RedisCluster

    seeds = [ClusterNode(host, port) for host, port in seed_nodes(urls)]  # type: ignore[no-untyped-call]
    return RedisCluster.from_url(urls[0], startup_nodes=seeds, **options)


class _NotReady(TimeoutError):
    """The client a read needs is still being built by another thread (a cluster client reads the topology first):
    the read is skipped, Redis is not in the backoff (it has not failed)."""


class _Client:
    """A Redis client made on first use (under a lock, by one thread); a failed build is tried again on next use."""

    def __init__(
        self, urls: tuple[str, ...], cluster: bool, timeout_seconds: float, failed: Callable[[Exception], None]
    ) -> None:
        self._urls = urls
        self._cluster = cluster
        self._timeout = timeout_seconds
        self._failed = failed  # told of a build that failed
        self._client: Any = None
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        """The client; built here if nobody has yet. While another thread builds it (``warm``), waits at most the
        timeout, then raises ``_NotReady``: the build is slow, Redis has not failed."""
        client = self._client
        if client is not None:
            return client
        if not self._lock.acquire(timeout=self._timeout):
            raise _NotReady("the Redis client is still being built")
        try:
            return self._built()
        finally:
            self._lock.release()

    def wait(self, timeout_seconds: float) -> bool:
        """Whether the client is built, building it here if nobody has yet, waiting at most ``timeout_seconds`` for
        a build under way; a failed build is False (and tried again on next use)."""
        if self._client is not None:
            return True
        if not self._lock.acquire(timeout=timeout_seconds):
            return False
        try:
            self._built()
        except Exception:
            return False
        finally:
            self._lock.release()
        return True

    def _built(self) -> Any:
        """The client, built now if it is not yet (the caller holds the lock); a failure is told, then raised."""
        if self._client is None:
            try:
                self._client = _build(self._urls, self._cluster, self._timeout)
            except Exception as error:
                self._failed(error)
                raise
        return self._client

    def warm(self) -> None:
        """Build the client off the call path (a cluster client reads the topology as it is built: several round
        trips); a failure is left for the first read to meet."""

        def build() -> None:
            with contextlib.suppress(Exception):
                self()

        threading.Thread(target=build, name="otel-responses-ledger-connect", daemon=True).start()

    def after_fork(self) -> None:
        self._lock = threading.Lock()

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if self._cluster:
                client.close()
            else:
                client.connection_pool.disconnect()
        except Exception:
            _log.debug("otel-responses: closing a shared ledger connection failed")


class RedisURLError(ValueError):
    """A ledger URL (or a list of seed URLs) this package cannot use; the message never repeats a URL."""


def check_url(url: object, *, cluster: bool = False) -> str:
    """The URL if its scheme is one Redis clients take (a cluster: ``redis://`` or ``rediss://`` naming any node,
    database 0); the message never repeats the URL (it may hold a password)."""
    if not isinstance(url, str) or url.split("://", 1)[0].lower() not in URL_SCHEMES or "://" not in url:
        raise RedisURLError("the Redis ledger URL must start with redis://, rediss:// or unix://")
    if cluster:
        scheme, rest = url.split("://", 1)
        if scheme.lower() not in CLUSTER_URL_SCHEMES:
            raise RedisURLError("a Redis Cluster ledger URL must start with redis:// or rediss://")
        path = rest.split("?", 1)[0].split("/", 1)[1] if "/" in rest.split("?", 1)[0] else ""
        if path not in ("", "0"):
            raise RedisURLError("a Redis Cluster has only database 0")
    return url


# Seed nodes of a cluster: full URLs separated by commas. Only a comma followed by a URL scheme separates two, so a
# comma inside a URL (a password may hold one) stays in it, and a URL that worked alone still does.
_SEPARATOR = re.compile(r"\s*,\s*(?=(?:rediss?|unix)://)", re.IGNORECASE)
# The query parameter that says a single URL names a node of a Redis Cluster (several seed URLs say it already);
# taken off the URL before redis-py reads it.
CLUSTER_PARAMETER = "cluster"


def split_urls(value: object) -> tuple[object, ...]:
    """The URLs ``value`` names: a string of comma-separated URLs, or a list or tuple of them; anything else is one
    value, left for ``check_url`` to refuse."""
    if isinstance(value, str):
        return tuple(_SEPARATOR.split(value))
    if isinstance(value, (list, tuple)) and value:
        return tuple(value)
    return (value,)


def _unmarked(url: object) -> tuple[object, bool | None]:
    """``url`` without its ``cluster=true`` (or ``false``) query parameter, and what that said (None: nothing)."""
    if not isinstance(url, str):
        return url, None
    head, question, query = url.partition("?")
    if not question:
        return url, None
    said: bool | None = None
    kept = []
    for parameter in query.split("&"):
        name, _, value = parameter.partition("=")
        if name.lower() == CLUSTER_PARAMETER and value.lower() in ("true", "false"):
            said = value.lower() == "true"
        else:
            kept.append(parameter)
    return (f"{head}?{'&'.join(kept)}" if kept else head), said


def check_urls(value: object, *, cluster: bool = False) -> tuple[tuple[str, ...], bool]:
    """Every URL of ``value`` (see ``split_urls``), each checked as ``check_url`` does, and whether they name a Redis
    Cluster: ``cluster``, several seed URLs, or a URL carrying ``?cluster=true`` (taken off it). A message names a URL
    by its place (``seed URL 2 of 3``), never by its text."""
    read = [_unmarked(url) for url in split_urls(value)]
    cluster = cluster or len(read) > 1 or any(said for _, said in read)
    checked = []
    for place, (url, _) in enumerate(read, 1):
        try:
            checked.append(check_url(url, cluster=cluster))
        except ValueError as exc:
            raise RedisURLError(f"seed URL {place} of {len(read)}: {exc}" if len(read) > 1 else str(exc)) from None
    return tuple(checked), cluster


def _same_options(urls: tuple[str, ...]) -> None:
    """Every URL parses, and the seeds of a cluster differ only in host and port: redis-py connects to every node
    (the seeds and those it discovers) with one set of options, those of the first URL; a seed with another
    password or TLS setting would silently be used with the first's. Messages never repeat a URL."""
    parse = _import_redis().connection.parse_url
    first: dict[str, Any] | None = None
    for place, url in enumerate(urls, 1):
        where = f"seed URL {place} of {len(urls)}" if len(urls) > 1 else "the URL"
        try:
            parsed = parse(url)
        except ValueError:
            raise RedisURLError(f"{where} is not a Redis URL the redis package can use") from None
        if len(urls) > 1 and not parsed.get("host"):
            raise RedisURLError(f"{where} names no host")
        options = {k: v for k, v in parsed.items() if k not in ("host", "port", "db")}
        if first is None:
            first = options
        elif options != first:
            raise RedisURLError(
                f"seed URL {place} of {len(urls)} differs from the first in more than host and port: the seeds of a "
                "Redis Cluster share one user, password, TLS setting and options (every node is reached with them)"
            )


def seed_nodes(urls: Sequence[str]) -> list[tuple[str, int]]:
    """The host and port of every seed URL after the first (redis-py takes the first from the URL itself)."""
    parse = _import_redis().connection.parse_url
    nodes = []
    for url in urls[1:]:
        options = parse(url)
        nodes.append((str(options["host"]), int(options.get("port", 6379))))
    return nodes


# -- the ledger ----------------------------------------------------------------------------------------------

# A record waiting for the writer: the binding it was made under, the entry, its parent.
_Job = tuple[Codec, str, Entry, str | None]


class RedisLedger:
    """The ``Ledger`` protocol over a local ``InMemoryLedger`` and a Redis shared by the fleet.

    ``url`` (``redis://``, ``rediss://`` or ``unix://``; AUTH and TLS as the URL says; a Redis Cluster as any of its
    nodes with ``?cluster=true`` or ``cluster=True``, or as several seed nodes: comma-separated URLs in one string, or
    a list of them, that differ only in host and port) or ``client`` (an existing ``redis.Redis`` or
    ``redis.cluster.RedisCluster``; its own timeouts and retries then apply, and ``close()`` leaves it open). Reads
    time out after ``timeout_seconds``; after a failure Redis is not read for ``backoff_seconds``. Every key expires
    after ``ttl_seconds``; an entry is at most ``max_entry_bytes`` (output items past it are dropped). The ledger works
    only once bound to the fleet's fingerprinter (``instrument()`` does it); until then it is local.
    """

    def __init__(
        self,
        url: str | Sequence[str] | None = None,
        *,
        client: Any = None,
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        prefix: str = DEFAULT_PREFIX,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        local_capacity: int = DEFAULT_CAPACITY,
        backoff_seconds: float = DEFAULT_BACKOFF_SECONDS,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        cluster: bool = False,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("give RedisLedger either a url or a client")
        if type(ttl_seconds) is not int or ttl_seconds < 1:
            raise ValueError("ttl_seconds must be a positive integer")
        if not isinstance(timeout_seconds, (int, float)) or not math.isfinite(timeout_seconds) or timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be a positive number")
        if not isinstance(backoff_seconds, (int, float)) or not math.isfinite(backoff_seconds) or backoff_seconds < 0:
            raise ValueError("backoff_seconds must be a number, at least 0")
        if not isinstance(prefix, str) or not prefix or any(c.isspace() or c in "{}" for c in prefix):
            raise ValueError("prefix must be a non-empty string without spaces or braces")
        if type(max_entry_bytes) is not int or max_entry_bytes < _MIN_ENTRY_BYTES:
            raise ValueError(f"max_entry_bytes must be an integer of at least {_MIN_ENTRY_BYTES}")
        if type(queue_size) is not int or queue_size < 1:
            raise ValueError("queue_size must be a positive integer")
        if type(cluster) is not bool:
            raise ValueError("cluster must be True or False")
        self._owned: tuple[_Client, _Client] | None = None
        # The URLs the clients are made from (empty around the app's own client), for a reader of its own (the
        # asynchronous reads); they may hold a password: never logged nor put in a message.
        self.urls: tuple[str, ...] = ()
        if client is None:
            valid, cluster = check_urls(url, cluster=cluster)
            self.urls = valid
            _same_options(valid)  # a missing package or a bad URL: an error now, not later
            reader = _Client(valid, cluster, float(timeout_seconds), self.unreachable)
            writer = _Client(valid, cluster, max(WRITE_TIMEOUT_SECONDS, float(timeout_seconds)), self.unreachable)
            self._owned = (reader, writer)
            self._reader: Any = reader
            self._writer_client: Any = writer
        else:
            cluster = callable(getattr(client, "mget_nonatomic", None))  # a redis.cluster.RedisCluster

            def given() -> Any:
                return client

            self._reader = self._writer_client = given
        self.cluster = cluster
        self.ttl_seconds = ttl_seconds
        self.timeout_seconds = float(timeout_seconds)
        self.backoff_seconds = float(backoff_seconds)
        self.prefix = prefix
        self.max_entry_bytes = max_entry_bytes
        self.queue_size = queue_size
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
        self._told = False  # whether a cluster whose topology could not be read was logged
        self._async: AsyncReader | None = None  # the asynchronous reader (``_async``), made on first use
        _LIVE.add(self)

    # -- setup ---------------------------------------------------------------------------------------------

    @property
    def url(self) -> str | None:
        """The first of ``urls`` (the one seed of most setups), None around the app's own client."""
        return self.urls[0] if self.urls else None

    def bind(self, fingerprinter: Fingerprinter) -> None:
        """Use the fleet's fingerprint key: entries live under its id, sealed with a key derived from it.
        Rebinding to another key forgets the local tier, whose fingerprints were made with the old one."""
        namespace = f"{self.prefix}:{fingerprinter.key_id()}"
        codec = Codec(fingerprinter, max_entry_bytes=self.max_entry_bytes, count=self._bump)
        if self._bound is not None and namespace != self._bound[0]:
            self._local = InMemoryLedger(self._local.capacity)
        first = self._bound is None
        self._bound = (namespace, codec)
        if first and self.cluster and self._owned is not None and not self._closed:
            self._owned[0].warm()  # the cluster's topology is read now, not on the first call that needs Redis

    @property
    def namespace(self) -> str | None:
        """``{prefix}:{key id}``, the start of every key; None until bound."""
        return self._bound[0] if self._bound is not None else None

    # -- read accounting, shared by the synchronous reads and an asynchronous reader -------------------------------

    def read_allowed(self, view: View) -> bool:
        """Whether Redis may be asked now: not closed, not in the backoff after a failure (a read skipped then is
        counted and marks ``view``, the call's, unavailable)."""
        if self._closed:
            return False
        if time.monotonic() < self._retry_at:
            self._bump("reads_skipped")
            view.unavailable = True
            return False
        return True

    def read_skipped(self, view: View) -> None:
        """A read not made because the client is still being built: counted as skipped, the call's view marked, no
        backoff (reads go to Redis as soon as the client is there)."""
        self._bump("reads_skipped")
        view.unavailable = True

    def read_failed(self, error: BaseException, view: View) -> None:
        """A read failed: Redis is left alone for the backoff, the failure counted, the call's view marked."""
        self._retry_at = time.monotonic() + self.backoff_seconds
        self._bump("read_failures")
        view.unavailable = True
        _log.debug("otel-responses: shared ledger read failed (%s); using local knowledge", type(error).__name__)

    def read_done(self, values: object, asked: int) -> list[Any] | None:
        """Count a read that answered: its values, or None (counted undecodable) when it did not answer one value per
        key."""
        self._bump("reads")
        if not isinstance(values, list) or len(values) != asked:
            self._bump("undecodable")
            return None
        return values

    def unreachable(self, error: BaseException) -> None:
        """A client of a cluster could not be built (no seed node gave the topology): said once per ledger, at
        warning level, else a worker whose only seed died stays unable to read the cluster, every call marked
        ``ledger.unavailable``, and nothing says why. Neither the URLs (they may hold a password) nor the error's
        message (it names nodes) is logged: how many seeds were given, and the error's type."""
        if not self.cluster or self._told or self._closed:
            return
        self._told = True
        _log.warning(
            "otel-responses: the Redis Cluster ledger could not read the cluster's topology from its seed nodes (%d "
            "given; %s): its checks use this process's knowledge until a seed answers. Several seed nodes can be "
            "given in ledger_url, comma-separated.",
            len(self.urls),
            type(error).__name__,
        )

    def stats(self) -> dict[str, int]:
        """Counts of Redis reads, failures, skipped reads (in the backoff, or while the client was being built),
        writes, dropped, trimmed and local-only entries, and of values ignored as undecodable or forged (see
        ``COUNTS``)."""
        with self._counts_lock:
            return dict(self._counts)

    def _bump(self, name: str, by: int = 1) -> None:
        with self._counts_lock:
            self._counts[name] += by

    # -- reads ---------------------------------------------------------------------------------------------

    def _fetch(self, keys: list[str], view: View) -> list[Any] | None:
        """The values of ``keys``, or None when Redis cannot be asked (then ``view``, the call's, is marked
        unavailable). Every read of Redis goes through here: an async call's view answers from what its awaited reads
        found instead (``View.found``), which is how ``prefetch`` learns what the call reads. One round trip on a
        single node; on a cluster, keys of one slot share an ``MGET`` and the ``MGET``s go out in one pipeline (one
        round trip per node), each socket operation bounded by the read timeout. A cluster client is built here on
        first use: a failure then is a failed read."""
        if view.awaited is not None:
            return view.found(keys)
        if not self.read_allowed(view):
            return None
        try:
            client = self._reader()
            values = client.mget_nonatomic(keys) if self.cluster else client.mget(keys)
        except _NotReady:
            self.read_skipped(view)
            return None
        except Exception as error:  # refused, timed out, AUTH, READONLY...: never the app's problem
            self.read_failed(error, view)
            return None
        return self.read_done(values, len(keys))

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

    # The reads of one call go through its view (``for_call``); these, outside any call, through a view of their own.

    def get(self, response_id: str) -> Entry | None:
        return self._get(response_id, View(self))

    def places(self, keys: Sequence[Key]) -> list[tuple[Place, ...]]:
        return self._places(keys, View(self))

    def latest_in_conversation(self, conversation_id: str) -> Entry | None:
        return self._latest_in_conversation(conversation_id, View(self))

    def has_child(self, response_id: str) -> bool:
        return self._has_child(response_id, View(self))

    def for_call(self) -> View:
        return View(self)

    def _get(self, response_id: str, view: View) -> Entry | None:
        entry = self._local.get(response_id)
        bound = self._bound
        if entry is not None or bound is None or not is_id(response_id):
            return entry
        namespace, codec = bound
        key = entry_key(namespace, response_id)
        values = self._fetch([key], view)
        if values is None:
            return None
        entry = self._entry(codec, key, values[0], response_id)
        if entry is not None:
            self._local.cache(entry)
        return entry

    def _places(self, keys: Sequence[Key], view: View) -> list[tuple[Place, ...]]:
        """Item keys unknown locally, and every text fingerprint (one text may be returned by several responses, and
        the latest of them may be another process's), in one MGET; then the entries they point to in another. What
        Redis names joins what this process holds (a key naming two responses is ambiguous wherever they were
        made)."""
        found = self._local.places(keys)
        bound = self._bound
        if bound is None:
            return found
        namespace, codec = bound
        names = [location_key(namespace, key) for key in keys]
        asked = [i for i, key in enumerate(keys) if names[i] is not None and (isinstance(key, int) or not found[i])]
        if not asked:
            return found
        values = self._fetch([names[i] or "" for i in asked], view)
        if values is None:
            return found
        located: dict[int, Location] = {}
        for i, raw in zip(asked, values, strict=True):
            place = codec.location(names[i] or "", raw) if raw is not None else None
            if place is not None:
                located[i] = place
        entries: dict[str, Entry] = {}
        remote: list[str] = []
        for response_id, _ in located.values():
            if response_id in entries or response_id in remote:
                continue
            local = self._local.get(response_id)
            if local is not None:
                entries[response_id] = local
            else:
                remote.append(response_id)
        if remote:
            entry_keys = [entry_key(namespace, response_id) for response_id in remote]
            fetched = self._fetch(entry_keys, view)
            for response_id, key, raw in zip(remote, entry_keys, fetched or (), strict=False):
                entry = self._entry(codec, key, raw, response_id)
                if entry is not None:
                    self._local.cache(entry)
                    entries[response_id] = entry
        for i, (response_id, indexes) in located.items():
            entry = entries.get(response_id)
            if entry is None or entry.written_by_app:
                continue
            current = found[i]
            known = {place[1] for place in current if place[0].response_id == response_id}
            extra = tuple(
                (entry, index) for index in indexes if index not in known and self._holds(entry, index, keys[i])
            )
            if extra:
                found[i] = current + extra
        return found

    @staticmethod
    def _holds(entry: Entry, index: int, key: Key) -> bool:
        """The entry's output ``index`` really is the item ``key`` names (a stale location is not); or, for the
        messages it was given, the entry itself (``Entry.given_messages``, at its first output)."""
        if index >= len(entry.outputs):
            return False
        meta = entry.outputs[index]
        if isinstance(key, int):
            if index == WHOLE_ENTRY and entry.given_messages == key:
                return True
            return meta.role == "assistant" and meta.fingerprint == key
        if isinstance(key, tuple):
            return (meta.type, meta.call_id) == key
        return meta.id == key

    def _latest_in_conversation(self, conversation_id: str, view: View) -> Entry | None:
        """Always asks Redis (when it can): another worker may have written a later turn, and an older local
        entry standing in for it would raise false signals (its tool calls look unanswered)."""
        local = self._local.latest_in_conversation(conversation_id)
        bound = self._bound
        if bound is None or not is_id(conversation_id):
            return local
        namespace, codec = bound
        key = conversation_key(namespace, conversation_id)
        values = self._fetch([key], view)
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

    def _has_child(self, response_id: str, view: View) -> bool:
        if self._local.has_child(response_id):
            return True
        bound = self._bound
        if bound is None or not is_id(response_id):
            return False
        namespace, codec = bound
        key = marker_key(namespace, response_id)
        values = self._fetch([key], view)
        return values is not None and values[0] is not None and codec.marker(key, values[0])

    # -- asynchronous reads ----------------------------------------------------------------------------------

    async def prefetch(self, reads: Callable[[LedgerView], object], view: View) -> None:
        """Run ``reads`` (a call's own reads) against ``view`` until they ask Redis for nothing it has not read: each
        time, the keys they asked first are read, awaited (never on the event loop), with the continued-marker of each
        entry among them (same slot: a call that reads a parent asks next whether it was continued). A failed or
        skipped read ends it, ``view`` marked; what was not read is then absent. The asynchronous reader, and
        ``redis.asyncio``, are loaded on first use."""
        reader = self.async_reader()
        awaited = view.awaited = {}
        if reader is None:
            return
        for _ in range(_MAX_ROUNDS):
            view.probing = True
            try:
                reads(view)
                return
            except Unread as unread:
                asked = [*unread.keys, *filter(None, map(marker_of, unread.keys))]
                keys = [key for key in dict.fromkeys(asked) if key not in awaited]
            finally:
                view.probing = False
            values = await reader.read(self, view, keys)
            if values is None:
                return
            awaited.update(zip(keys, values, strict=True))

    def async_reader(self) -> AsyncReader | None:
        """The asynchronous reader of this ledger (``_async.AsyncReader``), made on first use; None around
        the app's own client."""
        reader = self._async
        if reader is None and self.urls:  # around the app's own client, its settings are not ours to copy
            from ._async import AsyncReader

            seeds = seed_nodes(self.urls) if self.cluster else []
            reader = self._async = AsyncReader(self.urls, self.cluster, self.timeout_seconds, seeds)
        return reader

    @property
    def reads_asynchronously(self) -> bool:
        """An async app's calls await this ledger's reads (``prefetch``) rather than block its event loop."""
        if not self.urls:
            return False
        try:
            import redis.asyncio  # noqa: F401
        except ImportError:
            return False
        return True

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
        for client in self._owned or ():
            client.after_fork()
        if self._async is not None:
            self._async.after_fork()
        self._retry_at = 0.0

    def warm_up(self, timeout: float = 5.0) -> bool:
        """Build the client reads use now, on this thread, waiting at most ``timeout`` for a build under way; True
        once it is built (around the app's own client, at once). A cluster client reads the topology first, over
        several round trips; until then a call's reads are skipped (the span says the ledger was unavailable),
        since a call never waits past the read timeout. A worker whose first calls must see the fleet's responses
        calls this at startup."""
        return self._owned is None or self._owned[0].wait(timeout)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued write was sent (or failed); False if ``timeout`` ran out first."""
        return self._writer.flush(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flush, stop the writer and close the clients this ledger made; the local tier keeps working."""
        self._writer.close(timeout)
        self._closed = True
        if self._owned is not None:
            for client in self._owned:
                client.close()
        _LIVE.discard(self)


class Unread(Exception):
    """A read of keys an awaited call has not read yet, met while its reads are being found (``View.probing``)."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(f"{len(keys)} keys not read yet")
        self.keys = keys


# Rounds of an async call's reads (``RedisLedger.prefetch``): each depends on what the previous found (a parent,
# then its ancestors; an item's location, then its entry). Past this, what is left unread is absent.
_MAX_ROUNDS = 32


class View:
    """The shared ledger as one call sees it (``RedisLedger.for_call``): whether a read made for this call could not
    reach Redis (``unavailable``, this call's alone). For an async call, ``awaited`` holds the values its reads found
    (``prefetch``): reads are answered from them, never from Redis (a key not read is absent), and while those reads
    are being found (``probing``) a key not read yet raises ``Unread``. Writes go to the ledger."""

    __slots__ = ("_ledger", "awaited", "probing", "unavailable")

    def __init__(self, ledger: RedisLedger) -> None:
        self._ledger = ledger
        self.awaited: dict[str, Any] | None = None
        self.probing = False
        self.unavailable = False

    def found(self, keys: list[str]) -> list[Any]:
        """The values the awaited reads found for ``keys``."""
        awaited = self.awaited or {}
        if self.probing:
            unread = [key for key in keys if key not in awaited]
            if unread:
                raise Unread(unread)
        return [awaited.get(key) for key in keys]

    def get(self, response_id: str) -> Entry | None:
        return self._ledger._get(response_id, self)

    def places(self, keys: Sequence[Key]) -> list[tuple[Place, ...]]:
        return self._ledger._places(keys, self)

    def latest_in_conversation(self, conversation_id: str) -> Entry | None:
        return self._ledger._latest_in_conversation(conversation_id, self)

    def has_child(self, response_id: str) -> bool:
        return self._ledger._has_child(response_id, self)

    def record(self, entry: Entry, parent_id: str | None) -> None:
        self._ledger.record(entry, parent_id)

    def next_sequence(self) -> int:
        return self._ledger.next_sequence()

    def enter(self, key: str) -> bool:
        return self._ledger.enter(key)

    def leave(self, key: str) -> None:
        self._ledger.leave(key)

    async def prefetch(self, reads: Callable[[LedgerView], object]) -> None:
        """This call's reads, awaited (see ``RedisLedger.prefetch``)."""
        await self._ledger.prefetch(reads, self)


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
