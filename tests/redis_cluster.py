"""A local Redis Cluster for tests and benchmarks: three masters and a replica each, on 127.0.0.1, no persistence.

Six ``redis-server --cluster-enabled yes`` in a temporary directory, joined by ``redis-cli --cluster create
--cluster-replicas 1``; ready once every node says ``cluster_state:ok`` and knows all 16384 slots. A small
``cluster-node-timeout`` (2 s by default) makes a replica take over quickly from a master that died.

In a test module::

    from .redis_cluster import cluster_fixture

    redis_cluster = cluster_fixture()  # module scoped; ``cluster_fixture("session")`` for one per run
    other_cluster = cluster_fixture(name="other_cluster")  # a second one, under another fixture name

From a script (``bench/``)::

    from tests.redis_cluster import LocalCluster

    with LocalCluster() as cluster:
        url = cluster.url  # give it to RedisLedger(url, cluster=True)

Without ``redis-server`` or ``redis-cli`` on PATH, starting a cluster skips the test that needs it, except in CI
(``CI`` set), where .ci/run installs them and a missing program fails (``programs``); a cluster that does not come
up is always an error, never a skip.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from .programs import program

MASTERS = 3
REPLICAS = 1
NODE_TIMEOUT_MS = 2000
_BUS_OFFSET = 10_000  # a node's cluster bus listens on its port + 10000
_SLOTS = 16384


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """``count`` ports whose cluster bus port (+10000) is free too, both below Linux's ephemeral range (32768 and
    up: a port there may be taken by a client socket between this check and the server's start)."""
    chosen: list[int] = []
    rng = random.Random()
    while len(chosen) < count:
        port = rng.randrange(12_000, 22_700)
        if port not in chosen and port + _BUS_OFFSET not in chosen and _free(port) and _free(port + _BUS_OFFSET):
            chosen.append(port)
    return chosen


class _PortTaken(RuntimeError):
    pass


class LocalCluster:
    """Three masters and a replica each on 127.0.0.1 (``masters``/``replicas`` to change it)."""

    def __init__(
        self,
        directory: Path | None = None,
        *,
        masters: int = MASTERS,
        replicas: int = REPLICAS,
        node_timeout_ms: int = NODE_TIMEOUT_MS,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="redis-cluster-")
            directory = Path(self._tmp.name)
        self.directory = directory
        self.masters = masters
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.ports = free_ports(masters * (1 + replicas))
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    # -- addresses and clients ---------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """A URL naming one node (any node will do: the client discovers the rest)."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def node(self, port: int) -> Any:
        """A plain client of one node (for CLUSTER commands)."""
        import redis

        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)

    def client(self) -> Any:
        """A ``RedisCluster`` client with generous timeouts (for administration: flush, plant, scan)."""
        from redis.cluster import RedisCluster

        alive = self.running()[0]
        return RedisCluster(host="127.0.0.1", port=alive, socket_timeout=5)

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0, attempts: int = 3) -> LocalCluster:
        """Start the nodes and join them; a port taken meanwhile (a node that does not start) is tried again on
        other ports, up to ``attempts`` times."""
        for attempt in range(attempts):
            try:
                return self._start(timeout)
            except _PortTaken:
                if attempt == attempts - 1:
                    raise
                self.ports = free_ports(len(self.ports))
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> LocalCluster:
        server, cli = program("redis-server"), program("redis-cli")
        for port in self.ports:
            self._start_node(server, port)
        for port in self.ports:
            self._wait_ping(port, time.monotonic() + 10)
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        done = subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
        try:
            self.wait_ok(timeout)
            self.wait_replicas(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, server: str, port: int) -> None:
        directory = self.directory / str(port)
        directory.mkdir(parents=True, exist_ok=True)
        self.processes[port] = subprocess.Popen(
            [
                server,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                str(directory / "nodes.conf"),
                "--cluster-node-timeout",
                str(self.node_timeout_ms),
                # A replica takes over however long ago it last heard from its master (a test kills one early).
                "--cluster-replica-validity-factor",
                "0",
                "--repl-diskless-sync-delay",
                "0",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _wait_ping(self, port: int, deadline: float) -> None:
        import redis

        while True:
            try:
                with self.node(port) as probe:
                    if probe.ping():
                        return
            except redis.ConnectionError:
                process = self.processes[port]
                if process.poll() is not None or time.monotonic() > deadline:
                    self._kill_all()
                    raise _PortTaken(f"redis-server did not start on port {port}") from None
                time.sleep(0.02)

    def _state(self, port: int) -> tuple[bool, int]:
        with self.node(port) as probe:
            info = probe.execute_command("CLUSTER", "INFO")
        text = info.decode() if isinstance(info, bytes) else str(info)
        fields = dict(line.split(":", 1) for line in text.split() if ":" in line)
        return fields.get("cluster_state") == "ok", int(fields.get("cluster_slots_ok", "0"))

    def wait_ok(self, timeout: float = 30.0, ports: list[int] | None = None) -> None:
        """Until every running node (or ``ports``) says ``cluster_state:ok`` with all slots served."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if all(self._state(port) == (True, _SLOTS) for port in ports or self.running()):
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.05)

    def wait_replicas(self, timeout: float = 30.0) -> None:
        """Until every replica is in sync with its master (``master_link_status:up``)."""
        deadline = time.monotonic() + timeout
        pending = set(self.running())
        while pending:
            for port in list(pending):
                try:
                    with self.node(port) as probe:
                        info = probe.info("replication")
                except Exception:
                    continue
                if info.get("role") == "master" or info.get("master_link_status") == "up":
                    pending.discard(port)
            if pending and time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster's replicas did not sync")
            if pending:
                time.sleep(0.05)

    def wait_failover(self, port: int, timeout: float = 30.0) -> None:
        """Until a replica took over from the master on ``port`` (killed) and the cluster is whole again."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if port not in self.master_ports():
                    break
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no replica took over from the master on port {port}")
            time.sleep(0.05)
        self.wait_ok(max(1.0, deadline - time.monotonic()))

    def running(self) -> list[int]:
        return [port for port, process in self.processes.items() if process.poll() is None]

    def master_ports(self) -> list[int]:
        """Ports of the masters serving slots, as a running node sees them."""
        with self.node(self.running()[0]) as probe:
            text = probe.execute_command("CLUSTER", "NODES")
        text = text.decode() if isinstance(text, bytes) else str(text)
        masters = []
        for line in text.splitlines():
            fields = line.split()
            if "master" in fields[2] and "fail" not in fields[2] and len(fields) > 8:
                masters.append(int(fields[1].split("@")[0].rsplit(":", 1)[1]))
        return sorted(masters)

    def master_of(self, key: str) -> int:
        """The port of the master serving ``key``'s slot."""
        with self.node(self.running()[0]) as probe:
            slot = int(probe.execute_command("CLUSTER", "KEYSLOT", key))
            ranges = probe.execute_command("CLUSTER", "SLOTS")
        for start, end, master, *_ in ranges:
            if start <= slot <= end:
                return int(master[1])
        raise LookupError(slot)

    def kill(self, port: int) -> None:
        """SIGKILL one node (a crash: no goodbye to the others)."""
        process = self.processes[port]
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def revive(self, port: int, timeout: float = 10.0) -> None:
        """Start a killed node again on its port, with its own cluster config: it rejoins the cluster as the node it
        was (a killed master, by then replaced, as a replica). Returns once it answers; its data resyncs later."""
        self._start_node(program("redis-server"), port)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.node(port) as probe:
                    if probe.ping():
                        return
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the node on port {port} did not come back") from None
                time.sleep(0.02)

    def url_of(self, port: int) -> str:
        """The URL of the node on ``port``."""
        return f"redis://127.0.0.1:{port}/0"

    def flush(self) -> None:
        for port in self.master_ports():
            with self.node(port) as node:
                node.flushall()

    def stop(self) -> None:
        """Kill every node and remove the temporary directory this cluster made."""
        self._kill_all()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _kill_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
        for process in self.processes.values():
            process.wait(10)
        self.processes.clear()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def cluster_fixture(scope: Any = "module", name: str = "redis_cluster") -> Callable[..., Iterator[LocalCluster]]:
    """A pytest fixture named ``name`` yielding a started ``LocalCluster``, stopped after its scope."""
    import pytest

    @pytest.fixture(scope=scope, name=name)
    def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
        cluster = LocalCluster(tmp_path_factory.mktemp("redis-cluster")).start()
        try:
            yield cluster
        finally:
            cluster.stop()

    return redis_cluster
