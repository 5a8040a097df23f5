"""The shared-ledger tests' kit: a real `redis-server` on 127.0.0.1 (no persistence, restartable on its port), the
store a test's ledgers share (a single node or a Redis Cluster), the ledgers a test made (closed after it), and the
two-process session: process A's first turns made in a subprocess, process B's next ones here, and the signals each
of B's turns raised. Nothing here is a test; tests/conftest.py registers it, so a test takes its fixtures by name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import redis

from otel_responses._items import ItemMeta
from otel_responses.attributes import LEDGER_UNAVAILABLE
from otel_responses.config import ENV_PREFIX
from otel_responses.emulator import Emulator
from otel_responses.ledger import Entry
from otel_responses.ledger.redis import RedisLedger
from otel_responses.testing import CapturedTelemetry

from .ledger_scenarios import MODEL, REPLAYS, replay
from .programs import program
from .redis_cluster import LocalCluster, cluster_fixture
from .support import attrs, chat_signals, free_port, json_from_python

KEY = "fleet-shared-test-key-4c0ffee"
OTHER_KEY = "another-fleet-key-after-rotation"


# -- a real redis-server ---------------------------------------------------------------------------------------


class RedisServer:
    """`redis-server` on 127.0.0.1, no persistence, in a temporary directory; restartable on the same port. Without
    `redis-server` on PATH, ``start`` skips the test (fails it in CI: see ``programs``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, db=db, socket_timeout=5)

    def start(self) -> None:
        command = [program("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        self.process = subprocess.Popen(
            [*command, "--appendonly", "no", "--dir", str(self.directory), "--daemonize", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                with self.client() as probe:
                    if probe.ping():
                        return
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # in case a test left it paused
            self.process.terminate()
            self.process.wait(10)
        self.process = None

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted by the kernel, nothing answers (a hung Redis)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


def server_fixture(scope: Any = "module", name: str = "redis_server") -> Callable[..., Iterator[RedisServer]]:
    """A pytest fixture named ``name`` yielding a started ``RedisServer``, stopped after its scope."""

    @pytest.fixture(scope=scope, name=name)
    def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
        server = RedisServer(tmp_path_factory.mktemp(name))
        server.start()
        try:
            yield server
        finally:
            server.stop()

    return started


redis_server = server_fixture()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """Database 0, emptied for the test (database 1 holds the two-process session)."""
    with redis_server.client() as admin:
        admin.flushdb()
    return redis_server.url()


class Store:
    """Where a test's shared ledger lives: one Redis node (database 0, emptied) or the Redis Cluster (emptied)."""

    def __init__(self, kind: str, url: str, options: dict[str, Any], admin: Callable[[], Any]) -> None:
        self.kind = kind
        self.url = url
        self.options = options  # for RedisLedger: cluster=True on the cluster
        self.admin = admin  # a client for planting and reading keys (redis.Redis or RedisCluster)


redis_cluster = cluster_fixture("session")
process_cluster = cluster_fixture("module", name="process_cluster")


@pytest.fixture(params=["single", "cluster"])
def store(request: pytest.FixtureRequest, redis_server: RedisServer) -> Store:
    """The key tests run against a single node and against a Redis Cluster (three masters, a replica each)."""
    if request.param == "single":
        with redis_server.client() as admin:
            admin.flushdb()
        return Store("single", redis_server.url(), SINGLE_OPTIONS, redis_server.client)
    cluster: LocalCluster = request.getfixturevalue("redis_cluster")
    cluster.flush()
    return Store("cluster", cluster.url, CLUSTER_OPTIONS, cluster.client)


@pytest.fixture
def ledgers() -> Iterator[list[RedisLedger]]:
    """Ledgers the test made, closed after it."""
    made: list[RedisLedger] = []
    yield made
    for ledger in made:
        ledger.close(timeout=1)


# On the cluster, reads that fan out over three masters share a loaded 2-core CI machine with six redis-servers: a
# generous read budget, so that these tests check what is read, not how fast (timeouts have tests of their own). One
# read timing out would start the backoff, and the next calls' checks would go unread.
CLUSTER_OPTIONS: dict[str, Any] = {"cluster": True, "timeout_seconds": 2.0}
# The same budget on a single node: a loaded machine can stall a loopback read past the default 50 ms.
SINGLE_OPTIONS: dict[str, Any] = {"timeout_seconds": 2.0}


def new_ledger(made: list[RedisLedger], url: str, *, warm: bool = True, **options: Any) -> RedisLedger:
    """A ledger closed after the test. A cluster ledger's client is built here (``warm``: a loaded machine may take
    longer than a read's timeout to read the topology, and the call's checks would be skipped, not tested)."""
    ledger = RedisLedger(url, **options)
    made.append(ledger)
    if warm and ledger.cluster:
        ledger.warm_up(10)
    return ledger


def all_keys(admin: redis.Redis) -> list[bytes]:
    return list(admin.scan_iter(match="*", count=1000))


# -- the scenarios both processes run ------------------------------------------------------------------------


def chain_turns(client: openai.OpenAI, out: dict[str, Any], cap: CapturedTelemetry) -> dict[str, tuple[str, ...]]:
    """Process B chains to A's unstored response and to its response with instructions, without them."""
    cap.clear()
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=out["unstored"])
    second = client.responses.create(
        model=MODEL, input="What are the constraints?", previous_response_id=out["instructions"]
    )
    assert "constraints=none" in second.output_text  # the model really lost them
    unstored, instructions = chat_signals(cap)
    return {"unstored": unstored, "instructions": instructions}


def replay_turns(client: openai.OpenAI, out: dict[str, Any], cap: CapturedTelemetry) -> dict[str, tuple[str, ...]]:
    """Process B replays A's output, once per variant; the signals of each."""
    raised: dict[str, tuple[str, ...]] = {}
    for variant in REPLAYS:
        cap.clear()
        replay(client, variant, out[variant])
        (raised[variant],) = chat_signals(cap)
    return raised


PROCESS_A = """
import json, sys
import openai
from otel_responses import ResponsesInstrumentor
from tests.ledger_scenarios import first_turns

ResponsesInstrumentor().instrument()  # the ledger URL and hash key come from the environment
client = openai.OpenAI(base_url=sys.argv[1], api_key="emulator-key", max_retries=0)
print(json.dumps(first_turns(client)))
# No flush here: the ledger hands its queued writes to Redis at exit.
"""


@pytest.fixture(scope="module", params=["single", "cluster"])
def process_a(request: pytest.FixtureRequest, redis_server: RedisServer, emulator: Emulator) -> dict[str, Any]:
    """Process A's first turns, made in a subprocess sharing database 1 of the Redis, or a Redis Cluster of its
    own (its URL with ``?cluster=true``)."""
    env = dict(os.environ)
    if request.param == "single":
        url = redis_server.url(db=1)
        with redis_server.client(db=1) as admin:
            admin.flushdb()
        options: dict[str, Any] = SINGLE_OPTIONS
        admin_client: Callable[[], Any] = lambda: redis_server.client(db=1)  # noqa: E731
    else:
        cluster: LocalCluster = request.getfixturevalue("process_cluster")
        cluster.flush()
        url = cluster.url
        options = CLUSTER_OPTIONS
        admin_client = cluster.client
    marked = f"{url}?cluster=true" if request.param == "cluster" else url
    env = {**env, f"{ENV_PREFIX}LEDGER_URL": marked, f"{ENV_PREFIX}HASH_KEY": KEY}
    out: dict[str, Any] = json_from_python(PROCESS_A, emulator.base_url, env=env)
    return {**out, "url": url, "options": options, "admin": admin_client}


def entry_with_calls(outputs: int, id_chars: int = 40) -> Entry:
    """An entry of ``outputs`` function calls with long ids (``resp_big`` in ``conv_big``): for sizes and trims."""
    metas = tuple(
        ItemMeta("function_call", f"fc_{i:03d}_" + "x" * id_chars, f"call_{i}", None, None, False)
        for i in range(outputs)
    )
    return Entry("resp_big", 1, True, "0123456789abcdef", "conv_big", metas, 3, 0)


# -- a continuing turn, read back -------------------------------------------------------------------------------

CONTINUATION = "What are the constraints?"


def chained(client: openai.OpenAI, cap: CapturedTelemetry, parent: str) -> tuple[tuple[str, ...], bool, float]:
    """A turn chained to ``parent`` without its instructions: the signals its span carries, whether the ledger was
    unavailable for it, and how long the call took."""
    cap.clear()
    started = time.perf_counter()
    client.responses.create(model=MODEL, input=CONTINUATION, previous_response_id=parent)
    elapsed = time.perf_counter() - started
    (span,) = cap.chat_spans()
    return tuple(attrs(span)["openai_responses.signals"]), attrs(span).get(LEDGER_UNAVAILABLE, False), elapsed


async def achained(client: openai.AsyncOpenAI, cap: CapturedTelemetry, parent: str) -> tuple[tuple[str, ...], bool]:
    """``chained``, awaited: the signals and whether the ledger was unavailable."""
    cap.clear()
    await client.responses.create(model=MODEL, input=CONTINUATION, previous_response_id=parent)
    (span,) = cap.chat_spans()
    return tuple(attrs(span)["openai_responses.signals"]), attrs(span).get(LEDGER_UNAVAILABLE, False)
