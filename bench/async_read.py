"""The shared-ledger read of a chained async call (its parent's entry and continued-marker, one ``MGET``) by the
asyncio client the ledger uses, and by a worker-thread hop (``asyncio.to_thread``) of the ledger's own synchronous
read: the two alternated in one event loop, in blocks, so a slow minute of the machine hits both alike.

    .venv/bin/python bench/async_read.py [--reads 4000] [--processes 3]

Each process prints the median wall time of a read by each path and its CPU per read (the process's, every thread's,
over each block), and the difference; a throwaway ``redis-server`` on 127.0.0.1 serves them all.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BLOCK = 200
URL_ENV = "OTEL_RESPONSES_BENCH_REDIS_URL"


async def measure(url: str, reads: int) -> dict[str, float]:
    from otel_responses._fingerprint import Fingerprinter, key_from_text
    from otel_responses.ledger import Entry
    from otel_responses.ledger._codec import entry_key, marker_key
    from otel_responses.ledger.redis import RedisLedger, View

    fleet = Fingerprinter(key_from_text("bench-fleet-key"))
    writer = RedisLedger(url)
    writer.bind(fleet)
    writer.record(Entry("resp_parent", 1, input_app_messages=1), None)
    assert writer.flush(5)
    writer.close(1)
    ledger = RedisLedger(url, timeout_seconds=1.0)
    ledger.bind(fleet)
    namespace = ledger.namespace
    reader = ledger.async_reader()
    assert namespace is not None
    assert reader is not None
    keys = [entry_key(namespace, "resp_parent"), marker_key(namespace, "resp_parent")]

    async def client() -> Any:
        return await reader.read(ledger, View(ledger), keys)

    async def hop() -> Any:
        return await asyncio.to_thread(ledger._fetch, keys, View(ledger))

    paths: dict[str, Callable[[], Awaitable[Any]]] = {"asyncio_client": client, "thread_hop": hop}
    for read in paths.values():
        for _ in range(50):
            assert await read() is not None
    wall: dict[str, list[int]] = {name: [] for name in paths}
    cpu: dict[str, list[float]] = {name: [] for name in paths}
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    for block in range(max(2, reads // BLOCK)):
        for name, read in list(paths.items())[:: 1 if block % 2 else -1]:
            cpu_begin = cpu_clock()
            for _ in range(BLOCK):
                begin = clock()
                await read()
                wall[name].append(clock() - begin)
            cpu[name].append((cpu_clock() - cpu_begin) / BLOCK)
    ledger.close(1)
    found = {f"{name}_wall_us": statistics.median(wall[name]) / 1e3 for name in paths}
    found |= {f"{name}_cpu_us": statistics.median(cpu[name]) / 1e3 for name in paths}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=4000)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--one", action="store_true", help="measure in this process (internal)")
    args = parser.parse_args(argv)
    if args.one:
        found = asyncio.run(measure(os.environ[URL_ENV], args.reads))
        print(
            f"asyncio client {found['asyncio_client_wall_us']:.1f} µs wall, {found['asyncio_client_cpu_us']:.1f} µs "
            f"CPU; thread hop {found['thread_hop_wall_us']:.1f} µs wall, {found['thread_hop_cpu_us']:.1f} µs CPU; "
            f"the hop {found['thread_hop_wall_us'] - found['asyncio_client_wall_us']:+.1f} µs wall, "
            f"{found['thread_hop_cpu_us'] - found['asyncio_client_cpu_us']:+.1f} µs CPU a read"
        )
        return 0
    sys.path.insert(0, str(HERE))
    from run import redis_server

    with redis_server() as url:
        if url is None:
            print("redis-server is not installed", file=sys.stderr)
            return 1
        for _ in range(max(1, args.processes)):
            command = [sys.executable, __file__, "--one", "--reads", str(args.reads)]
            subprocess.run(command, check=True, env={**os.environ, URL_ENV: url})
    return 0


if __name__ == "__main__":
    sys.exit(main())
