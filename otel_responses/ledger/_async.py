"""Awaited reads of the shared ledger, for asyncio callers.

A ``RedisLedger`` reads Redis synchronously: in an asyncio app that read would run on the event loop, and every
coroutine would wait for it (up to the read timeout when Redis is slow). An async call instead awaits
``RedisLedger.prefetch`` first, which runs the call's own reads (its analysis) against its view until they ask Redis
for nothing this call has not read yet (see ``redis.View``): each time, the keys asked are read here, awaited, with
``redis.asyncio`` (``redis.asyncio.cluster.RedisCluster`` for a cluster ledger, with the ledger's seed nodes), each
round trip bounded by the ledger's read timeout. So the async path reads exactly what the synchronous one does, and
decodes it with the same code. It is loaded only by a ``RedisLedger`` that an async app reads.

Failures follow the synchronous path's rules: a round trip that fails or times out is counted (``read_failures``),
marks the call's view (hence its span ``openai_responses.ledger.unavailable``) and leaves Redis alone for the
ledger's backoff; one skipped for the backoff is counted ``reads_skipped`` and marks the call too. Still read
synchronously: the first request of an async ``list`` paginator (the paginator is built by a plain method, before
anything can be awaited).

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
from collections.abc import AsyncGenerator, Awaitable
from typing import Any, Protocol

__all__ = ["AsyncReader", "Reader"]

_log = logging.getLogger(__name__)
# How long a cluster client may take to read the topology, on the first read of each event loop.
CLUSTER_SETUP_SECONDS = 1.0


class Reader(Protocol):
    """What this module needs of the ledger it reads for (``redis.RedisLedger`` is one), handed in rather than
    imported: its read accounting, which the synchronous reads share. ``view`` is the call's
    (``RedisLedger.for_call``), passed back untouched."""

    def read_allowed(self, view: Any) -> bool: ...

    def read_failed(self, error: BaseException, view: Any) -> None: ...

    def read_done(self, values: object, asked: int) -> list[Any] | None: ...

    def unreachable(self, error: BaseException) -> None: ...


async def _bounded(pending: Awaitable[Any], seconds: float) -> Any:
    """``pending``'s result, or TimeoutError after ``seconds`` (the command is cancelled: redis-py drops the
    connection it was using)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await pending
    return await asyncio.wait_for(pending, seconds)


def _build(urls: tuple[str, ...], seeds: list[tuple[str, int]], cluster: bool, timeout_seconds: float) -> Any:
    """An asyncio client with the read timeout on every socket operation and no retry, like the ledger's reader; a
    cluster's with every seed node (``seeds``: the host and port of each URL after the first) as a startup node, as
    the ledger's own client has."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    options: dict[str, Any] = {
        "socket_timeout": timeout_seconds,
        "socket_connect_timeout": timeout_seconds,
        "retry": Retry(NoBackoff(), 0),
    }
    if cluster:
        from redis.asyncio.cluster import ClusterNode, RedisCluster

        nodes = [ClusterNode(host, port) for host, port in seeds]
        return RedisCluster.from_url(urls[0], startup_nodes=nodes, **options)
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
    """The asynchronous reads of one ``RedisLedger``: one client per running event loop. ``seeds``: the host and
    port of every seed URL after the first (``redis.seed_nodes``), for a cluster."""

    def __init__(
        self, urls: tuple[str, ...], cluster: bool, timeout_seconds: float, seeds: list[tuple[str, int]] | None = None
    ) -> None:
        self.urls = urls
        self.seeds = seeds or []
        self.cluster = cluster
        self.timeout_seconds = timeout_seconds
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient] = weakref.WeakKeyDictionary()

    async def _client(self, ledger: Reader) -> Any:
        loop = asyncio.get_running_loop()
        held = self._clients.get(loop)
        if held is not None and held.pid == os.getpid() and not held.dropped:
            return held.client
        self._sweep()
        client = _build(self.urls, self.seeds, self.cluster, self.timeout_seconds)
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

    async def read(self, ledger: Reader, view: Any, keys: list[str]) -> list[Any] | None:
        """The values of ``keys``, awaited, with ``RedisLedger._fetch``'s rules: skipped during the backoff, a
        failure starts one; both mark the call's ``view`` unavailable (None)."""
        if not ledger.read_allowed(view):
            return None
        try:
            client = await self._client(ledger)
            pending = client.mget_nonatomic(keys) if self.cluster else client.mget(keys)
            values = await _bounded(pending, self.timeout_seconds)
        except Exception as error:  # refused, timed out, AUTH, a topology that cannot be read...
            ledger.read_failed(error, view)
            return None
        return ledger.read_done(values, len(keys))


# Clients inherited through a fork (see ``AsyncReader.after_fork``).
_LEFT_BEHIND: list[Any] = []
