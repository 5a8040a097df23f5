"""The proxy's cost: what ``otel-responses proxy`` adds to a call and what it holds up, side by side with plain
forwarders, against one fast upstream.

    flock /tmp/heavy.lock .venv/bin/python bench/proxy.py        # about twelve minutes on a 2-vCPU machine

Every party is a process of its own (``proxy_peers.py``): a fast canned upstream, and the subjects — ``direct`` (no
forwarder), ``nginx`` (Debian's, when installed: ``proxy_pass`` with upstream keep-alive), ``aiohttp`` (a minimal
forwarder of a dozen lines), ``bare`` (the proxy with recording off) and ``proxy`` (the command itself, recording
every call and exporting OTLP to a local sink: its relay and its analysis worker). This process is the client.
Round after round, short bursts of every subject are interleaved, so that a slow minute of a shared machine hits
each alike; ratios hold where absolute times do not.

Measured, each against the denominator its target names:

- latency per non-streamed call, p50 and p99, by request body (a replay of ``--sizes`` bytes) and with the first
  size's answer gzip-compressed, one keep-alive connection per subject; CPU per request of every process of a
  subject (its children's too: nginx's workers, the proxy's analysis worker), from ``/proc/PID/task/*/schedstat``;
- streams: added time per streamed event and to the first event;
- beside: the 10 KB call's p99 while another connection sends 1 MB replays back to back (target: the proxy's at
  most 2x the recording-off proxy's), and while it sends requests of 10^6 small items (about 30 MB: target at most
  50 ms added over the same call through the same subject alone), with the analysis bound as shipped and raised
  past the request (``proxy-unbounded``: the analysis runs), with each subject's resident memory (every process);
- throughput: ``--clients`` concurrent clients of 10 KB calls for ``--seconds`` (target: the proxy at least 0.4x
  the aiohttp forwarder, every call recorded: the sink's span count and the unrecorded counter are checked);
- ``--concurrent`` streams at once.

Results: ``bench/results/proxy-latest.{json,md}``; the tables go into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stats import percentile

HERE = Path(__file__).resolve().parent
PEERS = HERE / "proxy_peers.py"
COMMAND = Path(sys.executable).parent / "otel-responses"
DIRECT, NGINX, AIOHTTP, BARE, PROXY, UNBOUNDED = "direct", "nginx", "aiohttp", "bare", "proxy", "proxy-unbounded"
FORWARDERS = (NGINX, AIOHTTP, BARE, PROXY)
GZIP = {"Accept-Encoding": "gzip", "X-Bench-Gzip": "1"}
Case = tuple[int, bool]  # (request body bytes, whether the answer comes gzip-compressed)
MIB = 1024 * 1024
LOAD_MODEL = "gpt-5.4-load"


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (nginx's workers, the proxy's analysis worker)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                found += _descendants(int(child))
    return found


@dataclass
class Party:
    """One subject of the benchmark (a process and its children) and the port it serves on."""

    role: str
    process: subprocess.Popen[str]
    port: int
    connection: http.client.HTTPConnection | None = None
    cpu: list[float] = field(default_factory=list)  # seconds per request, burst by burst (every process)
    own_cpu: list[float] = field(default_factory=list)  # the same, of its first process alone (the proxy's relay)
    workdir: str | None = None

    @classmethod
    def peer(cls, role: str, upstream: str | None = None) -> Party:
        args = [sys.executable, str(PEERS), role, *([upstream] if upstream else [])]
        process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE.parent)
        assert process.stdout is not None
        return cls(role, process, int(process.stdout.readline()))

    @classmethod
    def command(cls, role: str, upstream: str, sink: int, *options: str) -> Party:
        """``otel-responses proxy`` itself, exporting OTLP to the sink."""
        args = [str(COMMAND), "proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", *options]
        args += ["--otlp-endpoint", f"http://127.0.0.1:{sink}"]
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        return cls(role, process, int(base_url.rsplit(":", 1)[1].split("/")[0]))

    @classmethod
    def nginx(cls, upstream_port: int) -> Party:
        workdir = tempfile.mkdtemp(prefix="bench-nginx-")
        port = _free_port()
        config = f"""
daemon off; master_process on; worker_processes 1; user root; pid {workdir}/nginx.pid;
error_log stderr error;
events {{ worker_connections 1024; }}
http {{
  access_log off; client_body_temp_path {workdir}; proxy_temp_path {workdir};
  fastcgi_temp_path {workdir}; uwsgi_temp_path {workdir}; scgi_temp_path {workdir};
  client_max_body_size 64m; client_body_buffer_size 64m; proxy_buffering off; proxy_request_buffering on;
  upstream api {{ server 127.0.0.1:{upstream_port}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{ proxy_pass http://api; proxy_http_version 1.1; proxy_set_header Connection ""; }}
  }}
}}
"""
        Path(workdir, "nginx.conf").write_text(config)
        process = subprocess.Popen(["nginx", "-c", f"{workdir}/nginx.conf", "-p", workdir], text=True)
        _wait_for_port(port)
        return cls(NGINX, process, port, workdir=workdir)

    def conn(self) -> http.client.HTTPConnection:
        if self.connection is None:
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        return self.connection

    def cpu_seconds(self, children: bool = True) -> float:
        """Every thread's time on a CPU so far, of this process and its children (nanoseconds in ``schedstat``,
        where ``stat`` counts 10 ms ticks)."""
        total = 0
        for pid in _descendants(self.process.pid) if children else [self.process.pid]:
            for task in Path(f"/proc/{pid}/task").glob("*"):
                with contextlib.suppress(OSError, ValueError):
                    total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9

    def rss_mib(self) -> float:
        total = 0
        for pid in _descendants(self.process.pid):
            with contextlib.suppress(OSError, StopIteration):
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
                total += next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        return total / 1024

    def stop(self) -> None:
        if self.connection is not None:
            self.connection.close()
        if self.process.stdin is not None:
            self.process.stdin.close()
        else:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


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


def many_items(count: int) -> bytes:
    """A request of ``count`` small input items (10^6: about 30 MB, under the default body limit)."""
    return json.dumps({"model": "gpt-5.4", "input": [{"role": "user", "content": "x"}] * count}).encode()


def timed_call(party: Party, body: bytes, headers: dict[str, str], conn: Any = None) -> tuple[float, float]:
    """One request on the party's connection: seconds to the first byte of the body and to the last. A keep-alive
    connection the subject closed while it idled (a round is longer than an idle timeout) is opened anew first."""
    conn = conn or party.conn()
    if conn.sock is not None and _closed_by_peer(conn.sock):
        conn.close()
    started = time.perf_counter()
    conn.request(
        "POST", "/v1/responses", body, {"Content-Type": "application/json", "Authorization": "Bearer k", **headers}
    )
    response = conn.getresponse()
    response.read1(65536)
    at_first = time.perf_counter()
    response.read()
    done = time.perf_counter()
    if response.status != 200:
        raise RuntimeError(f"{party.role}: {response.status}")
    return at_first - started, done - started


def _closed_by_peer(sock: Any) -> bool:
    import select

    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)  # an idle connection with something to read has been closed (EOF) by the other end


def burst(party: Party, body: bytes, calls: int, headers: dict[str, str] | None = None) -> list[tuple[float, float]]:
    """``calls`` calls, one after the other; the CPU they cost every process of the subject, counted once the
    subject is idle again (the proxy's worker records the last calls after the client has its answers)."""
    measured = party.role != DIRECT
    cpu = party.cpu_seconds() if measured else 0.0
    own = party.cpu_seconds(children=False) if measured else 0.0
    times = [timed_call(party, body, headers or {}) for _ in range(calls)]
    if measured:
        settle(party)
        party.cpu.append((party.cpu_seconds() - cpu) / calls)
        party.own_cpu.append((party.cpu_seconds(children=False) - own) / calls)
    return times


@contextlib.contextmanager
def background(party: Party, body_file: Path) -> Iterator[dict[str, Any]]:
    """Calls of the body in ``body_file`` sent back to back, by a process of their own (this one's threads would
    share its GIL with the calls being timed), while the block runs; the subject's resident memory sampled
    meanwhile (``peak_rss_mib``), and how many calls were made."""
    stop = threading.Event()
    seen: dict[str, Any] = {"calls": 0, "peak_rss_mib": party.rss_mib()}
    loader = subprocess.Popen(
        [sys.executable, __file__, "--background", str(party.port), str(body_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert loader.stdout is not None
    assert loader.stdin is not None
    loader.stdout.readline()  # its first call is under way

    def sample() -> None:
        while not stop.wait(0.05):
            seen["peak_rss_mib"] = max(seen["peak_rss_mib"], party.rss_mib())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    time.sleep(0.2)
    try:
        yield seen
    finally:
        stop.set()
        loader.stdin.close()
        answer = loader.stdout.read().strip()
        loader.wait(300)
        sampler.join()
        seen["calls"] = int(answer) if answer.isdigit() else 0
        if not answer.isdigit():
            seen["error"] = answer


def _background(port: int, body_file: str) -> None:
    """The background load's process: calls back to back until standard input closes, then how many it made."""
    body = Path(body_file).read_bytes()
    closed = threading.Event()

    def watch() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=watch, daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    calls = 0
    print("started", flush=True)
    try:
        while not closed.is_set():
            conn.request("POST", "/v1/responses", body, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"status {answer.status}")
            calls += 1
        print(calls, flush=True)
    except Exception as error:
        print(repr(error), flush=True)


def settle(party: Party, quiet: float = 0.005, most: float = 60.0) -> None:
    """Wait until the subject's processes are idle (under ``quiet`` seconds of CPU in 0.2 s): the proxy's worker
    may still be recording what an earlier load handed it, which would be counted against the next burst."""
    deadline = time.monotonic() + most
    before = party.cpu_seconds()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = party.cpu_seconds()
        if now - before < quiet:
            return
        before = now


async def throughput(port: int, body: bytes, clients: int, seconds: float) -> tuple[int, int, list[float]]:
    """``clients`` clients, each on its own connection, sending 10 KB calls back to back for ``seconds``: the calls
    answered, the errors, and each call's latency."""
    import aiohttp

    headers = {"Content-Type": "application/json", "Authorization": "Bearer k"}
    done = errors = 0
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal done, errors
        while time.perf_counter() < stop:
            started = time.perf_counter()
            try:
                async with session.post(f"http://127.0.0.1:{port}/v1/responses", data=body, headers=headers) as r:
                    await r.read()
                    if r.status == 200:
                        done += 1
                        latencies.append(time.perf_counter() - started)
                    else:
                        errors += 1
            except aiohttp.ClientError:
                errors += 1

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    return done, errors, latencies


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


def _spans_at(sink: Party) -> dict[str, Any]:
    """The spans the sink was sent: ``spans`` in all, ``by_name``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{sink.port}/spans", timeout=10) as answer:
        found: dict[str, Any] = json.loads(answer.read())
        return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=60, help="calls per subject per round and size")
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--items", type=int, default=1_000_000, help="items of the large request beside")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=3.0, help="each subject's throughput burst, per round")
    parser.add_argument("--concurrent", type=int, default=100)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--background", nargs=2, help=argparse.SUPPRESS)  # the background load's own process
    args = parser.parse_args(argv)
    if args.background:
        _background(int(args.background[0]), args.background[1])
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    bodies = {size: replay(size) for size in sizes}
    small, mid = bodies[sizes[0]], bodies[sizes[-1]]
    # The throughput clients' calls name a model of their own: their spans are counted apart at the sink.
    loaded = small.replace(b'"model": "gpt-5.4"', f'"model": "{LOAD_MODEL}"'.encode(), 1)
    scratch = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    loads = {"1 MB": scratch / "mid.json", "10^6 items": scratch / "large.json"}
    loads["1 MB"].write_bytes(mid)
    loads["10^6 items"].write_bytes(many_items(args.items))
    cases = [(size, False) for size in sizes] + [(sizes[0], True)]  # and the first size with a gzip answer
    upstream = Party.peer("upstream")
    url = f"http://127.0.0.1:{upstream.port}/v1"
    sink, unbounded_sink = Party.peer("sink"), Party.peer("sink")
    parties: dict[str, Party] = {DIRECT: upstream}
    if shutil.which("nginx"):
        parties[NGINX] = Party.nginx(upstream.port)
    parties[AIOHTTP] = Party.peer(AIOHTTP, url)
    parties[BARE] = Party.peer(BARE, url)
    parties[PROXY] = Party.command(PROXY, url, sink.port)
    unbounded = Party.command(UNBOUNDED, url, unbounded_sink.port, "--max-analysed-bytes", str(64 * MIB))
    sent: dict[str, int] = {PROXY: 0, UNBOUNDED: 0}  # calls each recording proxy should record
    large_sent: dict[str, int] = {PROXY: 0, UNBOUNDED: 0}  # requests of 10^6 items (past the shipped bound)
    latency: dict[tuple[str, Case], list[float]] = {}
    cpu: dict[tuple[str, Case], list[float]] = {}
    relay_cpu: dict[Case, list[float]] = {}
    stream_total: dict[str, list[float]] = {}
    stream_first: dict[str, list[float]] = {}
    beside: dict[tuple[str, str], list[float]] = {}
    memory: dict[tuple[str, str], float] = {}
    rates: dict[str, list[float]] = {}
    through_p99: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    load_calls: dict[str, int] = {}
    stream_headers = {"X-Bench-Events": str(args.events)}
    stream_body = json.dumps({"model": "gpt-5.4", "input": "Stream it.", "stream": True}).encode()
    try:
        for party in [*parties.values(), unbounded]:  # warm every connection and process up
            burst(party, small, 30)
            burst(party, stream_body, 5, stream_headers)
            party.cpu.clear()
            party.own_cpu.clear()
            if party.role in sent:
                sent[party.role] += 35
        for round_number in range(args.rounds):
            for case in cases:
                size, compressed = case
                calls = args.calls if size <= 100_000 else max(10, args.calls // 4)
                for subject, party in parties.items():
                    settle(party)
                    before = len(party.cpu)
                    times = burst(party, bodies[size], calls, GZIP if compressed else {})
                    latency.setdefault((subject, case), []).extend(t for _, t in times)
                    cpu.setdefault((subject, case), []).extend(party.cpu[before:])
                    if subject == PROXY:
                        relay_cpu.setdefault(case, []).extend(party.own_cpu[before:])
                    sent[PROXY] += calls if subject == PROXY else 0
            for subject, party in parties.items():
                for first, total in burst(party, stream_body, 10, stream_headers):
                    stream_first.setdefault(subject, []).append(first)
                    stream_total.setdefault(subject, []).append(total)
                sent[PROXY] += 10 if subject == PROXY else 0
            # beside: the 10 KB call alone, then beside 1 MB replays, then beside requests of 10^6 items
            for subject, party in [*((s, p) for s, p in parties.items() if s != DIRECT), (UNBOUNDED, unbounded)]:
                settle(party)
                beside.setdefault((subject, "alone"), []).extend(t for _, t in burst(party, small, args.calls))
                for workload, body_file in loads.items():
                    if workload == "1 MB" and subject == UNBOUNDED:
                        continue
                    with background(party, body_file) as seen:
                        times = burst(party, small, args.calls)
                    beside.setdefault((subject, workload), []).extend(t for _, t in times)
                    key = (subject, workload)
                    memory[key] = max(memory.get(key, 0.0), seen["peak_rss_mib"])
                    if "error" in seen or not seen["calls"]:
                        raise RuntimeError(f"{subject}: the background of {workload} failed: {seen}")
                    if subject in sent:
                        (large_sent if workload == "10^6 items" else sent)[subject] += seen["calls"]
                party.cpu.clear()
                party.own_cpu.clear()
                if subject in sent:
                    sent[subject] += args.calls * (3 if subject == PROXY else 2)
            for subject, party in parties.items():
                if subject == DIRECT:
                    continue
                settle(party)
                done, failed, latencies = asyncio.run(throughput(party.port, loaded, args.clients, args.seconds))
                load_calls[subject] = load_calls.get(subject, 0) + done
                rates.setdefault(subject, []).append(done / args.seconds)
                through_p99.setdefault(subject, []).append(percentile(latencies, 0.99))
                errors[subject] = errors.get(subject, 0) + failed
                sent[PROXY] += done if subject == PROXY else 0
            print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        concurrent = {}
        for subject in (DIRECT, PROXY):
            durations, failed = asyncio.run(concurrent_streams(parties[subject].port, args.concurrent, 100))
            concurrent[subject] = {
                "p50_ms": _ms(percentile(durations, 0.5)),
                "p99_ms": _ms(percentile(durations, 0.99)),
                "errors": failed,
            }
            sent[PROXY] += args.concurrent if subject == PROXY else 0
    finally:
        for party in [*parties.values(), unbounded]:
            party.stop()  # the command flushes its exporters as it stops
        spans = {PROXY: _spans_at(sink), UNBOUNDED: _spans_at(unbounded_sink)}
        sink.stop()
        unbounded_sink.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    results = _summary(
        latency, cpu, relay_cpu, stream_first, stream_total, concurrent, beside, memory, rates, through_p99, cases, args
    )
    results["recorded"] = {
        subject: {
            "spans": spans[subject]["spans"],
            "calls": sent[subject],
            "calls_of_10^6_items": large_sent[subject],
        }
        for subject in sent
    }
    results["throughput"]["proxy_calls_recorded"] = {
        "calls": load_calls.get(PROXY, 0),
        "spans": spans[PROXY]["by_name"].get(f"chat {LOAD_MODEL}", 0),
    }
    results["errors"] = errors
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "proxy-latest.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "proxy-latest.md").write_text(_markdown(results))
    print(_markdown(results))
    return 0


def _summary(
    latency: dict[tuple[str, Case], list[float]],
    cpu: dict[tuple[str, Case], list[float]],
    relay_cpu: dict[Case, list[float]],
    stream_first: dict[str, list[float]],
    stream_total: dict[str, list[float]],
    concurrent: dict[str, Any],
    beside: dict[tuple[str, str], list[float]],
    memory: dict[tuple[str, str], float],
    rates: dict[str, list[float]],
    through_p99: dict[str, list[float]],
    cases: list[Case],
    args: argparse.Namespace,
) -> dict[str, Any]:
    subjects = sorted({s for s, _ in latency}, key=[DIRECT, *FORWARDERS].index)
    calls: dict[str, Any] = {}
    for case in cases:
        size, compressed = case
        row: dict[str, Any] = {}
        for subject in subjects:
            values = latency[(subject, case)]
            row[subject] = {"p50_ms": _ms(percentile(values, 0.5)), "p99_ms": _ms(percentile(values, 0.99))}
            if subject != DIRECT:
                row[subject]["cpu_us"] = round(statistics.median(cpu[(subject, case)]) * 1e6, 1)
                row[subject]["added_p50_ms"] = round(row[subject]["p50_ms"] - row[DIRECT]["p50_ms"], 3)
                row[subject]["added_p99_ms"] = round(row[subject]["p99_ms"] - row[DIRECT]["p99_ms"], 3)
        row[PROXY]["relay_cpu_us"] = round(statistics.median(relay_cpu[case]) * 1e6, 1)
        row["cpu_proxy_over_aiohttp"] = round(row[PROXY]["cpu_us"] / row[AIOHTTP]["cpu_us"], 2)
        row["relay_cpu_over_aiohttp"] = round(row[PROXY]["relay_cpu_us"] / row[AIOHTTP]["cpu_us"], 2)
        row["cpu_proxy_over_bare"] = round(row[PROXY]["cpu_us"] / row[BARE]["cpu_us"], 2)
        row["proxy_p99_over_p50"] = round(row[PROXY]["p99_ms"] / row[PROXY]["p50_ms"], 2)
        calls[f"{size // 1000} KB" + (", gzip answer" if compressed else "")] = row
    streams: dict[str, Any] = {}
    for subject in subjects:
        total = statistics.median(stream_total[subject])
        streams[subject] = {
            "first_event_p50_ms": _ms(percentile(stream_first[subject], 0.5)),
            "stream_p50_ms": _ms(total),
            "per_event_us": round((total - statistics.median(stream_total[DIRECT])) / args.events * 1e6, 2),
        }
    side: dict[str, Any] = {}
    for (subject, workload), values in beside.items():
        cell = {"p50_ms": _ms(percentile(values, 0.5)), "p99_ms": _ms(percentile(values, 0.99))}
        if (subject, workload) in memory:
            cell["peak_rss_mib"] = round(memory[(subject, workload)], 1)
        side.setdefault(subject, {})[workload] = cell
    for cells in side.values():
        for workload, cell in cells.items():
            if workload != "alone":
                cell["added_p99_ms"] = round(cell["p99_ms"] - cells["alone"]["p99_ms"], 3)
    load = {
        subject: {
            "calls_per_s": round(statistics.median(values)),
            "p99_ms": _ms(statistics.median(through_p99[subject])),
        }
        for subject, values in rates.items()
    }
    return {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "options": {k: v for k, v in vars(args).items() if k != "out"},
        "calls": calls,
        "streams": streams,
        "beside": side,
        "throughput": {
            "clients": args.clients,
            **load,
            "proxy_over_aiohttp": round(load[PROXY]["calls_per_s"] / load[AIOHTTP]["calls_per_s"], 2),
        },
        "concurrent_streams": {"streams": args.concurrent, "events": 100, "delay_ms": 10, **concurrent},
    }


def _markdown(results: dict[str, Any]) -> str:
    lines = [
        "| request body | subject | p50 ms | p99 ms | added p50 ms | added p99 ms | CPU µs/request |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for case, row in results["calls"].items():
        for subject in [s for s in (DIRECT, *FORWARDERS) if s in row]:
            cell = row[subject]
            added = (f"{cell['added_p50_ms']:+.3f}", f"{cell['added_p99_ms']:+.3f}") if subject != DIRECT else ("", "")
            lines.append(
                f"| {case} | {subject} | {cell['p50_ms']:.3f} | {cell['p99_ms']:.3f} | {added[0]} | "
                f"{added[1]} | {cell.get('cpu_us', '')} |"
            )
        lines.append(
            f"| {case} | proxy: CPU / aiohttp's, / bare's; p99 / p50 | | | | | {row['cpu_proxy_over_aiohttp']}x, "
            f"{row['cpu_proxy_over_bare']}x; {row['proxy_p99_over_p50']}x |"
        )
        lines.append(
            f"| {case} | proxy: its relay alone; / aiohttp's | | | | | {row[PROXY]['relay_cpu_us']}; "
            f"{row['relay_cpu_over_aiohttp']}x |"
        )
    lines += ["", "| stream | first event p50 ms | whole stream p50 ms | added per event µs |", "|---|--:|--:|--:|"]
    for subject, cell in results["streams"].items():
        lines.append(f"| {subject} | {cell['first_event_p50_ms']} | {cell['stream_p50_ms']} | {cell['per_event_us']} |")
    lines += [
        "",
        "| a 10 KB call | subject | p50 ms | p99 ms | added p99 ms (over alone) | peak RSS MiB |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for subject, cells in results["beside"].items():
        for workload, cell in cells.items():
            lines.append(
                f"| {workload if workload == 'alone' else 'beside ' + workload} | {subject} | {cell['p50_ms']} | "
                f"{cell['p99_ms']} | {cell.get('added_p99_ms', '')} | {cell.get('peak_rss_mib', '')} |"
            )
    load = results["throughput"]
    lines += ["", f"| {load['clients']} clients, 10 KB | calls/s | p99 ms |", "|---|--:|--:|"]
    for subject in FORWARDERS:
        if subject in load:
            lines.append(f"| {subject} | {load[subject]['calls_per_s']} | {load[subject]['p99_ms']} |")
    lines.append(f"| proxy / aiohttp | {load['proxy_over_aiohttp']}x | |")
    counted = load.get("proxy_calls_recorded", {})
    lines += ["", f"The proxy's throughput calls: {counted.get('calls')} answered, {counted.get('spans')} recorded."]
    c = results["concurrent_streams"]
    direct, proxied = c["direct"], c["proxy"]
    recorded = "; ".join(
        f"{subject}: {cell['spans']} spans for {cell['calls']} calls and {cell['calls_of_10^6_items']} of 10^6 items"
        for subject, cell in results.get("recorded", {}).items()
    )
    lines += [
        "",
        f"{c['streams']} concurrent streams ({c['events']} events, {c['delay_ms']} ms apart): "
        f"direct p50 {direct['p50_ms']} ms, p99 {direct['p99_ms']} ms, {direct['errors']} errors; "
        f"through the proxy p50 {proxied['p50_ms']} ms, p99 {proxied['p99_ms']} ms, {proxied['errors']} errors.",
        "",
        f"Recorded (spans at each proxy's OTLP sink): {recorded}. Throughput errors: {results.get('errors')}.",
        "",
        f"Machine: {results['machine']['cpus']} CPUs, Python {results['machine']['python']}, "
        f"load {', '.join(f'{x:.1f}' for x in results['machine']['load'])}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
