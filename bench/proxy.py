"""The proxy's cost: what ``otel-responses proxy`` adds to a call, against a direct connection and against the same
library forwarding with no analysis (the floor).

    flock /tmp/heavy.lock .venv/bin/python bench/proxy.py        # about four minutes on a 2-vCPU machine

Every party is a process of its own (``proxy_peers.py``): a fast canned upstream, ``--processes`` bare forwarders
and as many recording proxies; this process is the client (``http.client``, one keep-alive connection per
subject process). Round after round, short bursts of every subject are interleaved, so that a slow minute of a
shared machine hits each alike. Measured:

- added latency per non-streamed call, p50 and p99, by request body (a replay of ``--sizes`` bytes: its JSON parse
  is the analysis; the answer is a 2 KB response), and with the first size's answer gzip-compressed (relayed as it
  came, a decompressed copy analysed);
- added latency per streamed event (a stream of ``--events`` deltas, time to its last byte over the events) and to
  the first event;
- CPU per request of each proxy process (every thread's time on a CPU, from ``/proc/PID/task/*/schedstat``);
- ``--concurrent`` streams at once (``--events`` deltas 10 ms apart each): how long each takes, and errors.

Results: ``bench/results/proxy-latest.{json,md}``; the tables go into docs/benchmarks.md. Targets: at most 1 ms
added at p50 over direct for a 10 KB body; CPU per request at most 1.5 times the bare forwarder's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stats import percentile

HERE = Path(__file__).resolve().parent
PEERS = HERE / "proxy_peers.py"
DIRECT, BARE, PROXY = "direct", "bare", "proxy"
GZIP = {"Accept-Encoding": "gzip", "X-Bench-Gzip": "1"}
Case = tuple[int, bool]  # (request body bytes, whether the answer comes gzip-compressed)


@dataclass
class Party:
    """One process of the benchmark and the port it serves on."""

    role: str
    process: subprocess.Popen[str]
    port: int
    connection: http.client.HTTPConnection | None = None
    cpu: list[float] = field(default_factory=list)  # seconds per request, burst by burst

    @classmethod
    def start(cls, role: str, upstream: str | None = None) -> Party:
        args = [sys.executable, str(PEERS), role, *([upstream] if upstream else [])]
        process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE.parent)
        assert process.stdout is not None
        return cls(role, process, int(process.stdout.readline()))

    def conn(self) -> http.client.HTTPConnection:
        if self.connection is None:
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        return self.connection

    def cpu_seconds(self) -> float:
        """Every thread's time on a CPU so far (``/proc/PID/task/*/schedstat``: nanoseconds, where ``stat`` counts
        10 ms ticks)."""
        total = 0
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that just ended
                total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9

    def stop(self) -> None:
        if self.connection is not None:
            self.connection.close()
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(30)


def replay(size: int) -> bytes:
    """A client-replay request of about ``size`` bytes: the turns of a tool-using conversation, each with its
    reasoning (and its encrypted payload), replayed whole, as a long replay is."""
    items: list[dict[str, Any]] = []
    turn = 0
    body = b""
    while len(body) < size:
        turn += 1
        items += [
            {"role": "user", "content": f"Turn {turn}: please look up order {turn} and tell me its status."},
            {"type": "reasoning", "id": f"rs_{turn:08d}", "summary": [], "encrypted_content": "gAAAAAB" + "y" * 1000},
            {
                "type": "function_call",
                "id": f"fc_{turn:08d}",
                "call_id": f"call_{turn}",
                "name": "lookup",
                "arguments": '{"order": 1}',
            },
            {"type": "function_call_output", "call_id": f"call_{turn}", "output": "shipped " * 10},
            {
                "type": "message",
                "id": f"msg_{turn:08d}",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "It shipped. " * 8}],
            },
        ]
        request = {"model": "gpt-5.4", "instructions": "Answer briefly.", "input": items, "store": False}
        body = json.dumps(request).encode()
    return body


def timed_call(party: Party, body: bytes, headers: dict[str, str]) -> tuple[float, float, bytes]:
    """One request on the party's connection: seconds to the first byte of the body and to the last, and the body."""
    conn = party.conn()
    started = time.perf_counter()
    conn.request(
        "POST", "/v1/responses", body, {"Content-Type": "application/json", "Authorization": "Bearer k", **headers}
    )
    response = conn.getresponse()
    first = response.read1(65536)
    at_first = time.perf_counter()
    rest = response.read()
    done = time.perf_counter()
    if response.status != 200:
        raise RuntimeError(f"{party.role}: {response.status}")
    return at_first - started, done - started, first + rest


def burst(party: Party, body: bytes, calls: int, headers: dict[str, str] | None = None) -> list[tuple[float, float]]:
    measured = party.role in (BARE, PROXY)
    cpu = party.cpu_seconds() if measured else 0.0
    times = [timed_call(party, body, headers or {})[:2] for _ in range(calls)]
    if measured:
        party.cpu.append((party.cpu_seconds() - cpu) / calls)
    return times


async def concurrent_streams(port: int, streams: int, events: int) -> tuple[list[float], int]:
    """``streams`` streams at once through ``port``: each one's seconds to its last event, and the errors."""
    import aiohttp

    body = json.dumps({"model": "gpt-5.4", "input": "hi", "stream": True})
    headers = {"Content-Type": "application/json", "X-Bench-Events": str(events), "X-Bench-Delay-Ms": "10"}
    errors = 0

    async def one(session: aiohttp.ClientSession) -> float:
        nonlocal errors
        started = time.perf_counter()
        try:
            async with session.post(f"http://127.0.0.1:{port}/v1/responses", data=body, headers=headers) as answer:
                data = await answer.read()
                if answer.status != 200 or b"response.completed" not in data:
                    errors += 1
        except aiohttp.ClientError:
            errors += 1
        return time.perf_counter() - started

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        durations = await asyncio.gather(*(one(session) for _ in range(streams)))
    return list(durations), errors


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--processes", type=int, default=3, help="processes per proxy subject")
    parser.add_argument("--calls", type=int, default=60, help="calls per subject process per round and size")
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=100)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    bodies = {size: replay(size) for size in sizes}
    cases = [(size, False) for size in sizes] + [(sizes[0], True)]  # and the first size with a gzip answer
    upstream = Party.start("upstream")
    url = f"http://127.0.0.1:{upstream.port}/v1"
    parties = {
        DIRECT: [upstream],
        BARE: [Party.start(BARE, url) for _ in range(args.processes)],
        PROXY: [Party.start(PROXY, url) for _ in range(args.processes)],
    }
    latency: dict[tuple[str, Case], list[float]] = {}
    cpu: dict[tuple[str, Case], list[float]] = {}
    stream_total: dict[str, list[float]] = {}
    stream_first: dict[str, list[float]] = {}
    stream_headers = {"X-Bench-Events": str(args.events)}
    stream_body = json.dumps({"model": "gpt-5.4", "input": "Stream it.", "stream": True}).encode()
    try:
        for party in [p for group in parties.values() for p in group]:  # warm every connection and process up
            burst(party, bodies[sizes[0]], 30)
            burst(party, stream_body, 5, stream_headers)
            party.cpu.clear()
        for round_number in range(args.rounds):
            for case in cases:
                size, compressed = case
                calls = args.calls if size <= 100_000 else max(10, args.calls // 4)
                headers = GZIP if compressed else {}
                for subject, group in parties.items():
                    for party in group:
                        before = len(party.cpu)
                        times = burst(party, bodies[size], calls, headers)
                        latency.setdefault((subject, case), []).extend(t for _, t in times)
                        cpu.setdefault((subject, case), []).extend(party.cpu[before:])
            for subject, group in parties.items():
                for party in group:
                    for first, total in burst(party, stream_body, 10, stream_headers):
                        stream_first.setdefault(subject, []).append(first)
                        stream_total.setdefault(subject, []).append(total)
            print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        concurrent = {}
        for subject in (DIRECT, PROXY):
            durations, errors = asyncio.run(concurrent_streams(parties[subject][0].port, args.concurrent, 100))
            concurrent[subject] = {
                "p50_ms": _ms(percentile(durations, 0.5)),
                "p99_ms": _ms(percentile(durations, 0.99)),
                "errors": errors,
            }
    finally:
        for group in parties.values():
            for party in group:
                party.stop()
    results = _summary(latency, cpu, stream_first, stream_total, concurrent, cases, args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "proxy-latest.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "proxy-latest.md").write_text(_markdown(results))
    print(_markdown(results))
    return 0


def _summary(
    latency: dict[tuple[str, Case], list[float]],
    cpu: dict[tuple[str, Case], list[float]],
    stream_first: dict[str, list[float]],
    stream_total: dict[str, list[float]],
    concurrent: dict[str, Any],
    cases: list[Case],
    args: argparse.Namespace,
) -> dict[str, Any]:
    calls: dict[str, Any] = {}
    for case in cases:
        size, compressed = case
        row: dict[str, Any] = {}
        for subject in (DIRECT, BARE, PROXY):
            values = latency[(subject, case)]
            row[subject] = {
                "p50_ms": _ms(percentile(values, 0.5)),
                "p99_ms": _ms(percentile(values, 0.99)),
                "n": len(values),
            }
            if subject != DIRECT:
                row[subject]["cpu_us"] = round(statistics.median(cpu[(subject, case)]) * 1e6, 1)
        for subject in (BARE, PROXY):
            row[subject]["added_p50_ms"] = round(row[subject]["p50_ms"] - row[DIRECT]["p50_ms"], 3)
            row[subject]["added_p99_ms"] = round(row[subject]["p99_ms"] - row[DIRECT]["p99_ms"], 3)
        row["cpu_ratio"] = round(row[PROXY]["cpu_us"] / row[BARE]["cpu_us"], 2)
        calls[f"{size // 1000} KB" + (", gzip answer" if compressed else "")] = row
    streams: dict[str, Any] = {}
    for subject in (DIRECT, BARE, PROXY):
        total = statistics.median(stream_total[subject])
        streams[subject] = {
            "first_event_p50_ms": _ms(percentile(stream_first[subject], 0.5)),
            "stream_p50_ms": _ms(total),
            "per_event_us": round((total - statistics.median(stream_total[DIRECT])) / args.events * 1e6, 2),
        }
    return {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "options": {"rounds": args.rounds, "processes": args.processes, "calls": args.calls, "events": args.events},
        "calls": calls,
        "streams": streams,
        "concurrent_streams": {"streams": args.concurrent, "events": 100, "delay_ms": 10, **concurrent},
    }


def _markdown(results: dict[str, Any]) -> str:
    lines = [
        "| request body | subject | p50 ms | p99 ms | added p50 ms | added p99 ms | CPU µs/request |",
        "|---|---|---|---|---|---|---|",
    ]
    for case, row in results["calls"].items():
        for subject in (DIRECT, BARE, PROXY):
            cell = row[subject]
            added = (f"{cell['added_p50_ms']:+.3f}", f"{cell['added_p99_ms']:+.3f}") if subject != DIRECT else ("", "")
            lines.append(
                f"| {case} | {subject} | {cell['p50_ms']:.3f} | {cell['p99_ms']:.3f} | {added[0]} | "
                f"{added[1]} | {cell.get('cpu_us', '')} |"
            )
        lines.append(f"| {case} | CPU proxy / bare | | | | | {row['cpu_ratio']}x |")
    lines += ["", "| stream | first event p50 ms | whole stream p50 ms | added per event µs |", "|---|---|---|---|"]
    for subject, cell in results["streams"].items():
        lines.append(f"| {subject} | {cell['first_event_p50_ms']} | {cell['stream_p50_ms']} | {cell['per_event_us']} |")
    c = results["concurrent_streams"]
    direct, proxied = c["direct"], c["proxy"]
    lines += [
        "",
        f"{c['streams']} concurrent streams ({c['events']} events, {c['delay_ms']} ms apart): "
        f"direct p50 {direct['p50_ms']} ms, p99 {direct['p99_ms']} ms, {direct['errors']} errors; "
        f"through the proxy p50 {proxied['p50_ms']} ms, p99 {proxied['p99_ms']} ms, {proxied['errors']} errors.",
        "",
        f"Machine: {results['machine']['cpus']} CPUs, Python {results['machine']['python']}, "
        f"load {', '.join(f'{x:.1f}' for x in results['machine']['load'])}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
