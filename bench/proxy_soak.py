"""The proxy's soak: many clients for many minutes, plain calls and streams mixed, some streams cut by their client,
through ``otel-responses proxy`` as it is deployed (the command, its Prometheus endpoint scraped), to the fast canned
upstream of ``proxy_peers.py``.

    flock /tmp/heavy.lock .venv/bin/python bench/proxy_soak.py --clients 100 --minutes 10

Every ``--every`` seconds it samples the resident memory and open file descriptors of the proxy's processes (the relay
and its analysis worker) and the calls done; at the end, what they did after the warm-up (``--warmup`` minutes): flat
is the expectation, with no error the upstream did not cause (the upstream causes none). Results:
``bench/results/proxy-soak-latest.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from proxy import replay

HERE = Path(__file__).resolve().parent
COMMAND = Path(sys.executable).parent / "otel-responses"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _memory_and_fds(pid: int) -> tuple[float, int]:
    """Resident memory (MiB) and open descriptors of the command's processes: the relay and its analysis worker."""
    from proxy import _descendants

    rss_kb = fds = 0
    for each in _descendants(pid):
        with contextlib.suppress(OSError, StopIteration):
            status = Path(f"/proc/{each}/status").read_text()
            rss_kb += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            fds += len(os.listdir(f"/proc/{each}/fd"))
    return rss_kb / 1024, fds


class Tally:
    def __init__(self) -> None:
        self.plain = self.streams = self.cut = 0
        self.errors: dict[str, int] = {}

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def client(session: aiohttp.ClientSession, url: str, body: bytes, tally: Tally, stop: float) -> None:
    rng = random.Random()
    previous: str | None = None
    headers = {"Content-Type": "application/json", "Authorization": "Bearer soak-key"}
    stream_body = json.dumps({"model": "gpt-5.4", "input": "Stream it.", "stream": True}).encode()
    stream_headers = {**headers, "X-Bench-Events": "100", "X-Bench-Delay-Ms": "5"}
    while time.monotonic() < stop:
        try:
            if rng.random() < 0.7:
                data = body
                if previous is not None and rng.random() < 0.3:  # some turns chain to the one before
                    data = json.dumps(
                        {"model": "gpt-5.4", "input": "And then?", "previous_response_id": previous}
                    ).encode()
                async with session.post(url, data=data, headers=headers) as answer:
                    payload = await answer.read()
                    if answer.status != 200:
                        tally.error(f"status {answer.status}")
                        continue
                    previous = json.loads(payload)["id"]
                    tally.plain += 1
            else:
                cut = rng.random() < 0.1
                async with session.post(url, data=stream_body, headers=stream_headers) as answer:
                    if answer.status != 200:
                        tally.error(f"stream status {answer.status}")
                        continue
                    if cut:  # leave after a few events: the proxy sees its client go
                        for _ in range(3):
                            await answer.content.readany()
                        answer.close()
                        tally.cut += 1
                        continue
                    data = await answer.read()
                    if b"response.completed" not in data:
                        tally.error("stream without its end")
                        continue
                    tally.streams += 1
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            tally.error(type(exc).__name__)


async def soak(args: argparse.Namespace, url: str, pid: int, metrics_url: str) -> dict[str, Any]:
    tally = Tally()
    body = replay(10_000)
    started = time.monotonic()
    stop = started + args.minutes * 60
    samples: list[dict[str, Any]] = []
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = [asyncio.ensure_future(client(session, url, body, tally, stop)) for _ in range(args.clients)]
        while time.monotonic() < stop:
            await asyncio.sleep(args.every)
            scraped = await asyncio.to_thread(lambda: urllib.request.urlopen(metrics_url, timeout=10).read())
            rss, fds = _memory_and_fds(pid)
            samples.append(
                {
                    "seconds": round(time.monotonic() - started),
                    "rss_mb": round(rss, 1),
                    "fds": fds,
                    "plain": tally.plain,
                    "streams": tally.streams,
                    "cut": tally.cut,
                    "errors": sum(tally.errors.values()),
                    "metrics_bytes": len(scraped),
                }
            )
            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
        await asyncio.gather(*tasks)
    warm = [s for s in samples if s["seconds"] >= args.warmup * 60] or samples
    return {
        "options": {"clients": args.clients, "minutes": args.minutes, "warmup_minutes": args.warmup},
        "samples": samples,
        "after_warmup": {
            "rss_mb": [
                warm[0]["rss_mb"],
                warm[-1]["rss_mb"],
                min(s["rss_mb"] for s in warm),
                max(s["rss_mb"] for s in warm),
            ],
            "fds": [warm[0]["fds"], warm[-1]["fds"], min(s["fds"] for s in warm), max(s["fds"] for s in warm)],
        },
        "calls": {"plain": tally.plain, "streams": tally.streams, "cut": tally.cut},
        "errors": tally.errors,
    }


def _markdown(result: dict[str, Any]) -> str:
    o, w, c = result["options"], result["after_warmup"], result["calls"]
    lines = [
        f"{o['clients']} clients for {o['minutes']} minutes (warm-up {o['warmup_minutes']} minutes): "
        f"{c['plain']} plain calls, {c['streams']} whole streams, {c['cut']} streams cut by their client; "
        f"errors: {result['errors'] or 'none'}.",
        "",
        f"After the warm-up: resident memory {w['rss_mb'][0]} MB at its start, {w['rss_mb'][1]} MB at the end "
        f"(between {w['rss_mb'][2]} and {w['rss_mb'][3]}); open file descriptors {w['fds'][0]} then {w['fds'][1]} "
        f"(between {w['fds'][2]} and {w['fds'][3]}).",
        "",
        "| s | RSS MB | fds | plain | streams | cut | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {s['seconds']} | {s['rss_mb']} | {s['fds']} | {s['plain']} | {s['streams']} | {s['cut']} | {s['errors']} |"
        for s in result["samples"]
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=2, help="minutes before memory is expected flat")
    parser.add_argument("--every", type=float, default=10, help="seconds between samples")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    upstream = subprocess.Popen(
        [sys.executable, str(HERE / "proxy_peers.py"), "upstream"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert upstream.stdout is not None
    upstream_url = f"http://127.0.0.1:{int(upstream.stdout.readline())}/v1"
    metrics_port = _free_port()
    proxy = subprocess.Popen(
        [
            str(COMMAND),
            "proxy",
            "--upstream",
            upstream_url,
            "--listen",
            "127.0.0.1:0",
            "--prometheus-port",
            str(metrics_port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proxy.stdout is not None
    base_url = proxy.stdout.readline().strip()
    try:
        result = asyncio.run(soak(args, base_url + "/responses", proxy.pid, f"http://127.0.0.1:{metrics_port}/metrics"))
    finally:
        proxy.send_signal(signal.SIGTERM)
        result_code = proxy.wait(60)
        with contextlib.suppress(Exception):
            assert upstream.stdin is not None
            upstream.stdin.close()
            upstream.wait(30)
    result["proxy_exit_code"] = result_code
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "proxy-soak-latest.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "proxy-soak-latest.md").write_text(_markdown(result))
    print(_markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
