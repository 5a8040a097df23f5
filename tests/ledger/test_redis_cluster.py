"""The shared ledger on a Redis Cluster: three masters and a replica each, started here
(``tests/redis_cluster.py``).

The key tests of tests/ledger/test_redis_ledger.py run against a single node and this cluster (``store``/``process_a``
parametrized); here: a replay's lookup of many keys works on the cluster where one ``MGET`` would fail with
``CROSSSLOT`` (silently, were it swallowed), a master killed mid-run never reaches the app and checks resume once its
replica took over, a cluster down at startup breaks nothing, the settings, and what an async call's view reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from redis.exceptions import ClusterCrossSlotError

from otel_responses import ConfigError
from otel_responses._fingerprint import Fingerprinter, key_from_text
from otel_responses.attributes import LEDGER_UNAVAILABLE
from otel_responses.config import ENV_PREFIX, settings_from
from otel_responses.emulator import Emulator
from otel_responses.ledger import LedgerView
from otel_responses.ledger._codec import entry_key, location_key
from otel_responses.ledger.redis import RedisLedger, seed_nodes
from otel_responses.testing import capture

from ..ledger_scenarios import ENCRYPTED, INSTRUCTIONS, MODEL, REASONING_MODEL, REPLAYS, TOOLS, replay, tool_request
from ..redis_cluster import LocalCluster, cluster_fixture
from ..shared_ledger import CLUSTER_OPTIONS, KEY, chained, entry_with_calls, new_ledger
from ..support import attrs, chat_signals, free_port

redis_cluster = cluster_fixture("module")
failover_cluster = cluster_fixture("module", name="failover_cluster")


def _replayed_output(client: openai.OpenAI, ledger: RedisLedger) -> tuple[list[dict[str, Any]], str]:
    """A first turn with several output items (reasoning, a function call), recorded through ``ledger``."""
    with capture(ledger=ledger, hash_key=KEY):
        first = client.responses.create(
            model=REASONING_MODEL,
            input=[tool_request()],
            store=False,
            include=ENCRYPTED,
            tools=TOOLS,
        )
    assert ledger.flush(5)
    return [item.model_dump(mode="json", exclude_none=True) for item in first.output], first.id


def test_a_replay_is_checked_on_the_cluster_where_one_mget_would_fail(
    redis_cluster: LocalCluster, client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    """A replay's lookup fans out per slot: one MGET over all its keys would meet CROSSSLOT (a plain client) or a
    client-side refusal (a cluster client), and swallowed, silence the replay's checks. The replay drops an output
    item and the other process says so."""
    redis_cluster.flush()
    a = new_ledger(ledgers, redis_cluster.url, cluster=True)
    output, _ = _replayed_output(client, a)
    assert len(output) >= 2
    ns = a.namespace
    assert ns is not None
    names = [location_key(ns, item["id"]) or "" for item in output if "id" in item]
    old_names = [f"{ns}:i:{item['id']}" for item in output if "id" in item]  # the layout of format 4
    with redis_cluster.client() as admin:
        assert all(admin.exists(name) for name in names)
        slots = {admin.keyslot(name) for name in names}
        old_slots = {admin.keyslot(name) for name in old_names}
    assert len(slots) > 1
    assert len(old_slots) > 1
    with redis_cluster.node(redis_cluster.master_of(names[0])) as node, pytest.raises(ClusterCrossSlotError):
        node.mget(old_names)  # the server's CROSSSLOT

    # The old read path (one MGET, a plain client): the failure was swallowed, the checks silent.
    with redis_cluster.node(redis_cluster.ports[0]) as plain:
        old = RedisLedger(client=plain)
        old.bind(Fingerprinter(key_from_text(KEY)))
        view = old.for_call()
        assert view.places([item["id"] for item in output if "id" in item]) == [()] * len(names)
        assert old.stats()["read_failures"] == 1
        assert view.unavailable is True
        old.close(timeout=1)

    # A generous read timeout: the fan-out is tested here, not the timeout (a loaded machine may answer a pipeline
    # of several MGETs in more than the default 50 ms).
    b = new_ledger(ledgers, redis_cluster.url, cluster=True, timeout_seconds=5)
    with capture(ledger=b, hash_key=KEY) as cap:
        replay(client, "no_reasoning", output)
    (span,) = cap.chat_spans()
    assert LEDGER_UNAVAILABLE not in attrs(span)
    assert chat_signals(cap) == [REPLAYS["no_reasoning"]]  # ("reasoning_dropped",): the check speaks
    assert b.stats()["read_failures"] == 0
    assert b.stats()["reads"] >= 2
    found = b.places([item["id"] for item in output if "id" in item])
    assert all(len(places) == 1 for places in found)


def test_a_master_killed_mid_run_never_reaches_the_app(
    failover_cluster: LocalCluster, client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    """SIGKILL of a master: calls go on, checks needing its slots degrade to local knowledge (the span says the
    ledger was unavailable) and resume by themselves once its replica took over."""
    # A read budget for a loaded 2-core CI machine: with 50 ms, the healthy phase itself could time out there. Reads
    # of a killed master fail at once (its port is closed), well within.
    timeout, backoff = 0.5, 0.3
    cluster = failover_cluster
    a = new_ledger(ledgers, cluster.url, cluster=True, backoff_seconds=backoff)
    b = new_ledger(ledgers, cluster.url, cluster=True, timeout_seconds=timeout, backoff_seconds=backoff)
    with capture(ledger=a, hash_key=KEY):
        parents = [client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS).id for _ in range(8)]
    assert a.flush(5)
    ns = a.namespace
    assert ns is not None

    with capture(ledger=b, hash_key=KEY) as cap:
        healthy = chained(client, cap, parents[0])
        assert healthy[:2] == (("instructions_dropped",), False)
        victim = cluster.master_of(entry_key(ns, parents[1]))
        cluster.kill(victim)
        down = chained(client, cap, parents[1])
        assert down[:2] == ((), True)  # the app got its answer; the check fell back to local knowledge
        assert down[2] < healthy[2] + timeout + 0.5
        assert b.stats()["read_failures"] >= 1
        # A parent in a slot of a live master is still checked (after the backoff).
        time.sleep(backoff + 0.05)
        alive = next(p for p in parents[2:] if cluster.master_of(entry_key(ns, p)) != victim)
        assert chained(client, cap, alive)[0] == ("instructions_dropped",)

    # Writes while the master is gone: the call goes on (the batch may be retried or dropped, never the app's).
    with capture(ledger=a, hash_key=KEY) as cap_a:
        client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
    assert chat_signals(cap_a) == [()]

    cluster.wait_failover(victim)  # the replica took over (cluster-node-timeout 2 s)
    time.sleep(backoff + 0.05)
    with capture(ledger=a, hash_key=KEY):
        late = [client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS).id for _ in range(8)]
    assert a.flush(5)
    failures = b.stats()["read_failures"]
    with capture(ledger=b, hash_key=KEY) as cap:
        resumed = []
        for parent in late:
            resumed.append(chained(client, cap, parent))
            if resumed[-1][1]:  # the client's topology still named the dead node: that failure refreshed it
                time.sleep(backoff + 0.05)
    assert b.stats()["read_failures"] <= failures + 1
    assert len([result for result in resumed if result[1]]) <= 1
    checked = [result[:2] for result in resumed if not result[1]]
    assert checked == [(("instructions_dropped",), False)] * len(checked), checked
    assert len(checked) >= len(late) - 1


def test_a_cluster_down_at_startup_breaks_nothing(client: openai.OpenAI) -> None:
    """The cluster client asks for the topology when built: built lazily, so `instrument()` with no node up is not
    an error, and each read costs at most the timeout."""
    nothing_there = f"redis://127.0.0.1:{free_port()}/0"
    ledger = RedisLedger(nothing_there, cluster=True, timeout_seconds=0.05)
    with capture(ledger=ledger, hash_key=KEY) as cap:
        first = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
        started = time.perf_counter()
        client.responses.create(model=MODEL, input="Again.", previous_response_id=first.id)
        elapsed = time.perf_counter() - started
    single, chained = cap.chat_spans()
    assert LEDGER_UNAVAILABLE not in attrs(single)
    assert attrs(chained)[LEDGER_UNAVAILABLE] is True
    assert attrs(chained)["openai_responses.signals"] == ("instructions_dropped",)
    assert elapsed < 1.0


@contextlib.contextmanager
def _a_node_that_answers_a_byte_at_a_time() -> Iterator[tuple[str, threading.Event]]:
    """A seed node on 127.0.0.1 that accepts, then answers every connection one byte every 20 ms, never completing
    a reply: each socket read gets a byte within any timeout, so building a cluster client on it lasts until the
    context ends. Yields its URL and an event set once a client has connected."""
    listener = socket.create_server(("127.0.0.1", 0))
    connected, done = threading.Event(), threading.Event()

    def answer(connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connection.sendall(b"$")
            while not done.wait(0.02):
                connection.sendall(b"1")

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not done.is_set():
                connection, _ = listener.accept()
                connected.set()
                threading.Thread(target=answer, args=(connection,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0", connected
    finally:
        done.set()
        listener.close()


def test_a_read_while_the_cluster_client_is_being_built_is_skipped_not_backed_off() -> None:
    """Binding starts building the cluster client in the background (it reads the topology). A call's read that
    comes meanwhile waits at most the read timeout, then the call is analysed locally (its view unavailable, the read
    counted skipped) and no backoff starts: Redis has not failed, and the next call tries again at once."""
    timeout = 0.2
    with _a_node_that_answers_a_byte_at_a_time() as (url, connected):
        ledger = RedisLedger(url, cluster=True, timeout_seconds=timeout, backoff_seconds=60)
        try:
            ledger.bind(Fingerprinter(key_from_text(KEY)))
            assert connected.wait(5)  # the build is under way, and lasts
            for _ in range(2):
                view = ledger.for_call()
                started = time.perf_counter()
                assert view.get("resp_0123456789abcdef") is None
                waited = time.perf_counter() - started
                assert view.unavailable is True
                assert timeout * 0.9 <= waited < timeout + 1.0  # it waited for the build, not for a backoff
            stats = ledger.stats()
            assert (stats["reads_skipped"], stats["read_failures"], stats["reads"]) == (2, 0, 0)
            assert ledger.warm_up(timeout) is False  # still under way
        finally:
            ledger.close(timeout=1)


def test_cluster_settings() -> None:
    """A cluster is said in the URL (``?cluster=true``, taken off before redis-py reads it); its near misses are
    a single node."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    rows = [
        ({}, {f"{ENV_PREFIX}LEDGER_URL": f"{url}?cluster=true"}, True, url),
        ({"ledger_url": f"{url}?cluster=TRUE"}, {}, True, url),
        ({"ledger_url": f"{url}?ssl_cert_reqs=none&cluster=true"}, {}, True, f"{url}?ssl_cert_reqs=none"),
        ({"ledger_url": url}, {}, False, url),
        ({"ledger_url": f"{url}?cluster=false"}, {}, False, url),
    ]
    for config, environ, cluster, seen in rows:
        ledger = settings_from({"hash_key": KEY, **config}, environ).ledger
        assert isinstance(ledger, RedisLedger)
        assert (ledger.cluster, ledger.urls) == (cluster, (seen,)), config or environ
        ledger.close(timeout=1)
    for bad in ("unix:///tmp/redis.sock?cluster=true", "redis://127.0.0.1:7000/3?cluster=true"):
        with pytest.raises(ConfigError, match="ledger_url") as error:
            settings_from({"hash_key": KEY, "ledger_url": bad})
        assert bad not in str(error.value)
    with pytest.raises(ConfigError, match="ledger_cluster \\(a Redis Cluster is read from ledger_url"):
        settings_from({"hash_key": KEY, "ledger_url": url, "ledger_cluster": True})
    with pytest.raises(ValueError, match="braces"):
        RedisLedger(url, prefix="otel{responses}")


def test_an_awaited_view_reads_what_its_reads_ask_and_nothing_else(
    redis_cluster: LocalCluster, ledgers: list[RedisLedger]
) -> None:
    """An async call's view (``prefetch``): the reads it is given run until they ask for nothing unread, each key
    read once, with the entry's continued-marker (its slot); then the view answers from what was read, and a key never
    read is absent without Redis being asked, nor the call marked."""
    redis_cluster.flush()
    writer = new_ledger(ledgers, redis_cluster.url, cluster=True)
    writer.bind(Fingerprinter(key_from_text(KEY)))
    written = entry_with_calls(1)
    writer.record(written, None)
    writer.record(dataclasses.replace(written, response_id="resp_child"), written.response_id)
    assert writer.flush(5)
    reader = new_ledger(ledgers, redis_cluster.url, cluster=True)
    reader.bind(Fingerprinter(key_from_text(KEY)))
    view = reader.for_call()
    asked: list[bool] = []

    def reads(ledger: LedgerView) -> None:
        entry = ledger.get(written.response_id)
        asked.append(entry is not None and ledger.has_child(entry.response_id))

    asyncio.run(view.prefetch(reads))
    assert asked == [True]  # the first run stopped at the unread entry; the second read it and its marker
    assert reader.stats()["reads"] == 1
    got = view.get(written.response_id)
    assert got is not None
    assert (got.shared, got.outputs) == (True, written.outputs)
    assert view.get("resp_never_asked") is None  # not read: absent, Redis not asked
    assert view.has_child("resp_never_asked") is False
    assert (reader.stats()["reads"], view.unavailable) == (1, False)
    assert reader.for_call().get("resp_child") is not None  # another call's view reads Redis itself
    assert reader.stats()["reads"] == 2


# -- several seed nodes --------------------------------------------------------------------------------------


def test_seed_node_settings(caplog: pytest.LogCaptureFixture) -> None:
    """``ledger_url`` names one node or several seeds, comma-separated (the keyword: a list too), which name a
    cluster; each is checked as one URL is, and a message names a URL by its place, never its text."""
    first, second = f"redis://127.0.0.1:{free_port()}/0", f"redis://127.0.0.1:{free_port()}/0"
    made = [
        settings_from({"hash_key": KEY, "ledger_url": f"{first}, {second}"}).ledger,
        settings_from({"hash_key": KEY, "ledger_url": [first, second]}).ledger,
        settings_from({"hash_key": KEY}, {f"{ENV_PREFIX}LEDGER_URL": f"{first},{second}?cluster=true"}).ledger,
        RedisLedger([first, second]),
    ]
    for ledger in made:
        assert isinstance(ledger, RedisLedger)
        assert (ledger.cluster, ledger.urls, ledger.url) == (True, (first, second), first)
        reader = ledger.async_reader()
        assert reader is not None
        assert reader.urls == (first, second)  # the async reads get every seed too
        ledger.close(timeout=1)
    assert seed_nodes((first, second)) == [("127.0.0.1", int(second.split(":")[2].split("/")[0]))]
    # A comma inside a URL (a password) is not a separator: one URL, as before.
    comma = f"redis://:pass,word@127.0.0.1:{free_port()}/0"
    single = settings_from({"hash_key": KEY, "ledger_url": comma}).ledger
    assert isinstance(single, RedisLedger)
    assert single.urls == (comma,)
    single.close(timeout=1)

    secret = f"redis://:hunter2-seed@127.0.0.1:{free_port()}/0"
    several = f"{first},{secret}"
    for bad, message in (
        (f"{several},unix:///tmp/redis.sock", "seed URL 3 of 3: a Redis Cluster ledger URL must start with redis://"),
        (f"{secret},redis://127.0.0.1:7000/2", "seed URL 2 of 2: a Redis Cluster has only database 0"),
        (
            f"{first},{secret}",
            "seed URL 2 of 2 differs from the first in more than host and port: the seeds of a Redis Cluster share "
            "one user, password, TLS setting and options",
        ),
        (f"{secret},rediss://:hunter2-seed@127.0.0.1:7001/0", "seed URL 2 of 2 differs from the first"),
        (f"{secret},redis://:hunter2-seed@127.0.0.1:7001/0?socket_timeout=x", "seed URL 2 of 2 is not a Redis URL"),
        (f"{secret},redis://:hunter2-seed@:7001/0", "seed URL 2 of 2 names no host"),
    ):
        with pytest.raises(ConfigError, match=f"^ledger_url: {re.escape(message)}") as error:
            settings_from({"hash_key": KEY, "ledger_url": bad})
        assert "hunter2" not in str(error.value)
        assert "127.0.0.1" not in str(error.value)


def test_a_new_worker_reaches_the_cluster_though_its_first_seed_died(
    redis_cluster: LocalCluster,
    client: openai.OpenAI,
    emulator: Emulator,
    ledgers: list[RedisLedger],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A node dies; a worker started afterwards with that node's URL alone never reaches the cluster (every call
    marked unavailable, its checks silent) and says so, once. With the dead node as the first of several seeds, a
    new worker's checks, sync and async, find another worker's entries: its signals are raised."""
    cluster = redis_cluster
    cluster.flush()
    writer = new_ledger(ledgers, cluster.url, **CLUSTER_OPTIONS)
    with capture(ledger=writer, hash_key=KEY):
        parents = [client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS).id for _ in "abc"]
    assert writer.flush(5)
    masters = cluster.master_ports()
    gone = next(port for port in cluster.running() if port not in masters)  # a replica: no failover to wait for
    cluster.kill(gone)
    seeds = [cluster.url_of(gone), *(cluster.url_of(port) for port in cluster.running())]
    assert len(seeds) == 6
    timeout = {f"{ENV_PREFIX}LEDGER_TIMEOUT": str(CLUSTER_OPTIONS["timeout_seconds"])}
    try:
        lone = settings_from({"hash_key": KEY, "ledger_url": f"{seeds[0]}?cluster=true"}, timeout).ledger
        assert isinstance(lone, RedisLedger)
        ledgers.append(lone)
        assert lone.warm_up(10) is False  # its one seed is dead: no topology
        with caplog.at_level(logging.WARNING, "otel_responses.ledger.redis"), capture(ledger=lone, hash_key=KEY) as cap:
            client.responses.create(model=MODEL, input="What are the constraints?", previous_response_id=parents[0])
        assert chat_signals(cap) == [()]  # the parent is another worker's: unseen
        (span,) = cap.chat_spans()
        assert attrs(span)[LEDGER_UNAVAILABLE] is True
        # Said once (by this ledger: others still connecting may say it too), naming no URL.
        warned = [r.getMessage() for r in caplog.records if r.name == "otel_responses.ledger.redis"]
        told = (
            "otel-responses: the Redis Cluster ledger could not read the cluster's topology from its seed nodes (1 "
            "given; RedisClusterException): its checks use this process's knowledge until a seed answers. Several "
            "seed nodes can be given in ledger_url, comma-separated."
        )
        assert warned.count(told) == 1, warned
        assert not [message for message in warned if "127.0.0.1" in message]

        worker = settings_from({"hash_key": KEY, "ledger_url": ",".join(seeds)}, timeout).ledger
        assert isinstance(worker, RedisLedger)
        ledgers.append(worker)
        assert worker.warm_up(10)  # past the dead first seed, the topology read from another
        with capture(ledger=worker, hash_key=KEY) as cap:
            client.responses.create(model=MODEL, input="What are the constraints?", previous_response_id=parents[1])
        assert chat_signals(cap) == [("instructions_dropped",)]
        (span,) = cap.chat_spans()
        assert LEDGER_UNAVAILABLE not in attrs(span)
        assert worker.stats()["read_failures"] == 0

        env = {
            f"{ENV_PREFIX}LEDGER_URL": ",".join(seeds),
            f"{ENV_PREFIX}LEDGER_TIMEOUT": str(CLUSTER_OPTIONS["timeout_seconds"]),
            f"{ENV_PREFIX}HASH_KEY": KEY,
        }
        awaited = settings_from({}, env).ledger
        assert isinstance(awaited, RedisLedger)
        ledgers.append(awaited)

        def no_sync_read() -> Any:
            raise AssertionError("a synchronous Redis read on the event loop")

        awaited._reader = no_sync_read  # a sync read would fail the call's checks: only the async reader may ask

        async def chained() -> None:
            async with openai.AsyncOpenAI(base_url=emulator.base_url, api_key="emulator-key", max_retries=0) as aio:
                await aio.responses.create(
                    model=MODEL, input="What are the constraints?", previous_response_id=parents[2]
                )

        with capture(ledger=awaited, hash_key=KEY) as cap:
            asyncio.run(chained())
        assert chat_signals(cap) == [("instructions_dropped",)]
        (span,) = cap.chat_spans()
        assert LEDGER_UNAVAILABLE not in attrs(span)
        reader = awaited.async_reader()
        assert reader is not None
        assert reader.urls == tuple(seeds)
        assert awaited.stats()["read_failures"] == 0
        assert awaited.stats()["reads"] >= 1
    finally:
        cluster.revive(gone)
