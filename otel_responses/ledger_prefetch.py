"""Awaited reads of the shared ledger, for asyncio callers (issue 16).

A ``RedisLedger`` reads Redis synchronously: in an asyncio app that read would run on the event loop, and every
coroutine would wait for it (up to the read timeout when Redis is slow). The async wrappers instead ask this module
first: from the request's facts it collects the keys the analysis will need (the parent's entry and its
continued-marker for ``previous_response_id``, the conversation's latest entry for ``conversation``, the item
locations of a replay and then the entries they point to: the same round trips as the synchronous path), awaits
them with ``redis.asyncio`` (``redis.asyncio.cluster.RedisCluster`` for a cluster ledger, with the ledger's seed
nodes), each round trip bounded by the ledger's read timeout, decodes what was found with the bound ``Codec`` and
caches it in the local tier. The analysis then runs synchronously under ``LOCAL_ONLY``: it never touches Redis.

Failures follow the synchronous path's rules: a round trip that fails or times out is counted (``read_failures``),
marks the call ``openai_responses.ledger.unavailable`` and leaves Redis alone for the ledger's backoff; one skipped
for the backoff is counted ``reads_skipped`` and marks the call too. Local-only in the async path: the ancestors of
a chained parent beyond the parent itself (``context_duplicated`` follows parent ids up to 16 back: only those this
process knows count). Still read synchronously: the first request of an async ``list`` paginator (the paginator is
built by a plain method, before anything can be awaited).

Async clients belong to one event loop: there is one per ledger and running loop, closed when the loop shuts its
async generators down (``asyncio.run`` does), dropped when the loop is found closed, and never carried into a forked
child; a cluster client reads the topology on a loop's first read, bounded by ``CLUSTER_SETUP_SECONDS``. A ledger
this module cannot read asynchronously (the in-memory one, a custom one, a ``RedisLedger`` built around a client
the app made) takes the synchronous path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import weakref
from collections.abc import AsyncGenerator, Awaitable, Sequence
from typing import Any

from .attributes import OPERATION_CHAT
from .facts import CLIENT_REPLAY, CONVERSATION, SERVER_CHAIN, RequestFacts
from .ledger import Key
from .ledger_codec import Codec, Location, conversation_key, entry_key, is_id, location_key, marker_key
from .redis_ledger import LOCAL_ONLY, RedisLedger, seed_nodes

__all__ = ["LOCAL_ONLY", "AsyncReader", "reader_for"]

_log = logging.getLogger(__name__)
# How long a cluster client may take to read the topology, on the first read of each event loop.
CLUSTER_SETUP_SECONDS = 1.0
# Conversations API operations that write items: remembered against the conversation's latest entry.
_CONVERSATION_WRITES = frozenset({"create_conversation_items"})


async def _bounded(pending: Awaitable[Any], seconds: float) -> Any:
    """``pending``'s result, or TimeoutError after ``seconds`` (the command is cancelled: redis-py drops the
    connection it was using)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await pending
    return await asyncio.wait_for(pending, seconds)


def _build(urls: tuple[str, ...], cluster: bool, timeout_seconds: float) -> Any:
    """An asyncio client with the read timeout on every socket operation and no retry, like the ledger's reader; a
    cluster's with every seed URL as a startup node, as the ledger's own client has."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    options: dict[str, Any] = {
        "socket_timeout": timeout_seconds,
        "socket_connect_timeout": timeout_seconds,
        "retry": Retry(NoBackoff(), 0),
    }
    if cluster:
        from redis.asyncio.cluster import ClusterNode, RedisCluster

        seeds = [ClusterNode(host, port) for host, port in seed_nodes(urls)]
        return RedisCluster.from_url(urls[0], startup_nodes=seeds, **options)
    from redis.asyncio import Redis

    return Redis.from_url(urls[0], **options)


class _LoopClient:
    """The client of one event loop, and the async generator that closes it when the loop shuts down."""

    __slots__ = ("client", "closer", "dropped", "pid")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.pid = os.getpid()
        self.dropped = False
        self.closer: AsyncGenerator[None, None] | None = None

    def drop(self) -> None:
        """Forget the client without the loop (closed, or left behind in the parent of a fork): the closer ends
        at once, without awaiting anything, so no finaliser needs the loop later."""
        self.dropped = True
        closer, self.closer = self.closer, None
        if closer is None:
            return
        step = closer.aclose().__await__()
        try:
            step.send(None)
        except StopIteration:
            pass
        except Exception:
            _log.debug("otel-responses: dropping an async ledger client failed")


async def _closer(owner: AsyncReader, loop: asyncio.AbstractEventLoop, held: _LoopClient) -> AsyncGenerator[None, None]:
    """Started on the client's loop, which then finalises it at ``shutdown_asyncgens`` (``asyncio.run`` ends with
    it): the client is closed while its loop still runs."""
    try:
        yield
    finally:
        if owner._clients.get(loop) is held:
            del owner._clients[loop]
        if not held.dropped:
            held.dropped = True
            try:
                await held.client.aclose()
            except Exception:
                _log.debug("otel-responses: closing an async ledger client failed")


class AsyncReader:
    """The asynchronous reads of one ``RedisLedger``: one client per running event loop."""

    def __init__(self, urls: tuple[str, ...], cluster: bool, timeout_seconds: float) -> None:
        self.urls = urls
        self.cluster = cluster
        self.timeout_seconds = timeout_seconds
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient] = weakref.WeakKeyDictionary()

    async def _client(self, ledger: RedisLedger) -> Any:
        loop = asyncio.get_running_loop()
        held = self._clients.get(loop)
        if held is not None and held.pid == os.getpid() and not held.dropped:
            return held.client
        self._sweep()
        client = _build(self.urls, self.cluster, self.timeout_seconds)
        if self.cluster:
            # The topology is read once per loop, over several round trips (about 60 ms on loopback): bounded on
            # its own, the loop free meanwhile; a failure drops the client and is a failed read.
            try:
                await _bounded(client.initialize(), max(self.timeout_seconds, CLUSTER_SETUP_SECONDS))
            except BaseException as error:
                with contextlib.suppress(Exception):
                    await client.aclose()
                if isinstance(error, Exception):
                    ledger.unreachable(error)
                raise
        held = _LoopClient(client)
        self._clients[loop] = held
        closer = _closer(self, loop, held)
        await closer.__anext__()  # registered with the loop's async generator hooks from here on
        held.closer = closer
        return held.client

    def _sweep(self) -> None:
        """Drop the clients of closed loops (a loop closed without ``shutdown_asyncgens``) and those made before a
        fork."""
        pid = os.getpid()
        for loop, held in list(self._clients.items()):
            if loop.is_closed() or held.pid != pid or held.dropped:
                self._clients.pop(loop, None)
                held.drop()

    def after_fork(self) -> None:
        """In a forked child: the parent's connections are not ours to use, nor to close. Closing one would also
        unregister its socket from the epoll instance the child shares with the parent's loop, so the clients are
        kept, unused, for the child's lifetime (the parent's, never garbage-collected here)."""
        for held in list(self._clients.values()):
            held.drop()
            _LEFT_BEHIND.append(held.client)
        self._clients.clear()

    def clients(self) -> int:
        """How many loops hold a client (for tests)."""
        return len(self._clients)

    # -- one round trip --------------------------------------------------------------------------------------

    async def _mget(self, ledger: RedisLedger, keys: list[str]) -> list[Any] | None:
        """The values of ``keys``, awaited, with ``RedisLedger._fetch``'s rules: skipped during the backoff, a
        failure starts one; both mark the current call unavailable."""
        if not ledger.read_allowed():
            return None
        try:
            client = await self._client(ledger)
            pending = client.mget_nonatomic(keys) if self.cluster else client.mget(keys)
            values = await _bounded(pending, self.timeout_seconds)
        except Exception as error:  # refused, timed out, AUTH, a topology that cannot be read...
            ledger.read_failed(error)
            return None
        return ledger.read_done(values, len(keys))

    # -- what a call needs -----------------------------------------------------------------------------------

    async def prefetch(self, ledger: object, req: RequestFacts) -> None:
        """Read what the analysis of ``req`` will ask the ledger and is not known here, and cache it in the local
        tier. Call it with ``LOCAL_ONLY`` set: the local lookups deciding what to ask must not go to Redis."""
        binding = ledger.binding if isinstance(ledger, RedisLedger) else None
        if binding is None or not isinstance(ledger, RedisLedger):
            return
        namespace, codec = binding
        batch = _Batch(ledger, namespace, codec)
        mode = req.state_mode
        chat = req.operation == OPERATION_CHAT
        if req.target_response_id is not None:
            batch.entry(req.target_response_id)
        elif mode == SERVER_CHAIN and req.previous_response_id is not None:
            batch.entry(req.previous_response_id)
            if chat:
                batch.marker(req.previous_response_id)
        elif mode == CONVERSATION and req.conversation_id is not None:
            batch.conversation(req.conversation_id)
        elif (
            mode is None
            and req.conversation_id is not None
            and req.input_items
            and req.operation in _CONVERSATION_WRITES
        ):
            batch.conversation(req.conversation_id)  # the items are remembered against its latest entry
        replay = mode == CLIENT_REPLAY
        lookups: Sequence[Key] = ()
        if req.lookups and (replay or (chat and mode in (SERVER_CHAIN, CONVERSATION))):
            lookups = [lookup.key for lookup in req.lookups]
            batch.locations(lookups)
        if not batch.names:
            return
        places = await batch.run(self)
        if not places:
            return
        # The entries the located items belong to: a replay's links; for a chained or conversation call, only when
        # its parent is known (the items the state holds are looked up then).
        if not replay:
            if mode == SERVER_CHAIN:
                parent = ledger.get(req.previous_response_id or "")
            else:
                parent = ledger.latest_in_conversation(req.conversation_id or "")
            if parent is None:
                return
        second = _Batch(ledger, namespace, codec)
        for response_id in dict.fromkeys(place[0] for place in places):
            second.entry(response_id)
            if replay and chat:
                second.marker(response_id)  # the latest link is the parent: whether it was continued
        if second.names:
            await second.run(self)


class _Batch:
    """The keys of one round trip and what to do with each value read."""

    __slots__ = ("codec", "continued", "ledger", "names", "namespace", "wants")

    def __init__(self, ledger: RedisLedger, namespace: str, codec: Codec) -> None:
        self.ledger = ledger
        self.namespace = namespace
        self.codec = codec
        self.names: list[str] = []
        self.wants: list[tuple[str, str]] = []  # (kind, the id the key is about)
        self.continued: list[str] = []

    def _want(self, name: str, kind: str, about: str) -> None:
        if name not in self.names:
            self.names.append(name)
            self.wants.append((kind, about))

    def entry(self, response_id: str) -> None:
        if is_id(response_id) and self.ledger.get(response_id) is None:
            self._want(entry_key(self.namespace, response_id), "r", response_id)

    def marker(self, response_id: str) -> None:
        if is_id(response_id) and not self.ledger.has_child(response_id):
            self._want(marker_key(self.namespace, response_id), "k", response_id)

    def conversation(self, conversation_id: str) -> None:
        if is_id(conversation_id):
            self._want(conversation_key(self.namespace, conversation_id), "c", conversation_id)

    def locations(self, keys: Sequence[Key]) -> None:
        """Item ids missing locally, and every text fingerprint (the latest response that said a text may be
        another process's), as ``RedisLedger.places`` asks them."""
        found = self.ledger.places(keys)
        for key, local in zip(keys, found, strict=True):
            name = location_key(self.namespace, key)
            if name is not None and (isinstance(key, int) or not local):
                self._want(name, "l", "")

    async def run(self, reader: AsyncReader) -> list[Location]:
        """One awaited round trip; entries found are cached, continued-markers noted; the item locations read."""
        values = await reader._mget(self.ledger, self.names)
        if values is None:
            return []
        places: list[Location] = []
        codec, ledger = self.codec, self.ledger
        for name, (kind, about), raw in zip(self.names, self.wants, values, strict=True):
            if raw is None:
                continue
            if kind == "l":
                place = codec.location(name, raw)
                if place is not None:
                    places.append(place)
            elif kind == "k":
                if codec.marker(name, raw):
                    self.continued.append(about)
            else:
                entry = codec.entry(name, raw)
                if entry is not None and (entry.conversation_id if kind == "c" else entry.response_id) != about:
                    ledger.count("undecodable")  # another response's or conversation's: a writer's bug
                    entry = None
                if entry is not None:
                    ledger.cache(entry)
        for response_id in self.continued:
            _note_continued(ledger, response_id)
        return places


def _note_continued(ledger: RedisLedger, response_id: str) -> None:
    """Remember in the local tier that ``response_id`` was continued (its marker was read), as ``has_child``
    would have found it in Redis. Only for an entry held there: ``has_child`` is asked only of a known parent,
    and the local tier forgets the mark with the entry."""
    ledger.cache_continued(response_id)


# Clients inherited through a fork (see ``AsyncReader.after_fork``).
_LEFT_BEHIND: list[Any] = []

# -- which ledgers --------------------------------------------------------------------------------------------

_READERS: weakref.WeakKeyDictionary[RedisLedger, AsyncReader | None] = weakref.WeakKeyDictionary()


def _reader(ledger: RedisLedger) -> AsyncReader | None:
    urls = ledger.urls
    if not urls:  # built around the app's own client: its settings are not ours to copy
        return None
    try:
        import redis.asyncio  # noqa: F401
    except ImportError:
        return None
    return AsyncReader(urls, bool(getattr(ledger, "cluster", False)), ledger.timeout_seconds)


def reader_for(ledger: object) -> AsyncReader | None:
    """The asynchronous reader of ``ledger``, or None when it has none (the synchronous path applies)."""
    if not isinstance(ledger, RedisLedger):
        return None
    try:
        return _READERS[ledger]
    except KeyError:
        reader = _READERS[ledger] = _reader(ledger)
        return reader


def _after_fork_in_child() -> None:
    for reader in list(_READERS.values()):
        if reader is not None:
            reader.after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
