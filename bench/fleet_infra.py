"""What the fleet benchmark runs on and reads from outside the fleet: the emulator, Redis, the machine.

``KeyWatcher`` reads the write lag from Redis's own keyspace notifications, so measuring it costs the workers
nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import run as bench_run

ROOT = Path(__file__).resolve().parent.parent
# A response's entry key: ``{namespace}:{{id}}:r`` (hash-tagged, for a cluster) or the older ``{namespace}:r:{id}``.
ENTRY_KEY = re.compile(r":\{([^}]+)\}:r$|:r:([^:{}]+)$")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class KeyWatcher:
    """When each ledger entry key was written, from Redis keyspace notifications (one connection per node)."""

    def __init__(self, urls: list[str]) -> None:
        import redis

        self.readable: dict[str, float] = {}
        self.clients: list[Any] = [redis.Redis.from_url(url) for url in urls]
        self.pubsubs: list[Any] = []
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        for client in self.clients:
            client.config_set("notify-keyspace-events", "E$")
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            pubsub.psubscribe("__keyevent@*__:set")
            self.pubsubs.append(pubsub)
            thread = threading.Thread(target=self.listen, args=(pubsub,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def listen(self, pubsub: Any) -> None:
        while not self.stop.is_set():
            try:
                message = pubsub.get_message(timeout=0.2)
            except Exception:  # a killed node: its notifications end
                return
            if message is None:
                continue
            now = time.monotonic()
            key = message["data"].decode() if isinstance(message["data"], bytes) else str(message["data"])
            found = ENTRY_KEY.search(key)
            if found:
                self.readable.setdefault(found.group(1) or found.group(2), now)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(2)
        for pubsub in self.pubsubs:
            with contextlib.suppress(Exception):
                pubsub.close()
        for client in self.clients:
            with contextlib.suppress(Exception):
                client.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def emulator() -> Iterator[str]:
    """``python -m otel_responses.emulator`` on a free port; yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_responses.emulator", "--port", str(free_port())],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        if not base_url.startswith("http"):
            raise RuntimeError("the emulator did not start")
        yield base_url
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway single redis-server on 127.0.0.1 (``run.redis_server``, the one the main benchmark starts);
    yields its URL."""
    with bench_run.redis_server() as url:
        if url is None:
            raise SystemExit("redis-server is not installed")
        yield url


def redis_memory(url: str) -> dict[str, int]:
    """``used_memory`` and key count of a single Redis."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        return {"used_memory": int(client.info("memory")["used_memory"]), "keys": int(client.dbsize())}
    finally:
        client.close()


def machine() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
        "openai": metadata.version("openai"),
        "opentelemetry-sdk": metadata.version("opentelemetry-sdk"),
        "redis (py)": metadata.version("redis"),
        "redis-server": subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=False)
        .stdout.split(" v=")[-1]
        .split()[0]
        if shutil.which("redis-server")
        else "none",
    }


def cluster_launcher() -> Any:
    """``tests/redis_cluster.py`` when it exists (another change adds it), else None."""
    if not (ROOT / "tests" / "redis_cluster.py").exists():
        return None
    return importlib.import_module("tests.redis_cluster")
