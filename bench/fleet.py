"""The fleet benchmark (issue 16, part 3): the shared ledger across worker processes.

    .venv/bin/python bench/fleet.py [--workers 4] [--conversations 300] [--cluster] [--kill-master] [--out DIR]

One emulator process (``python -m otel_responses.emulator``) on 127.0.0.1 serves every worker. Each worker is a
process with the real OpenTelemetry SDK (``SimpleSpanProcessor`` + ``InMemorySpanExporter``, ``InMemoryMetricReader``)
and ``ResponsesInstrumentor().instrument(hash_key=..., ledger_url=...)``, serving turns from its own queue on a few
threads. The dispatcher (this process) runs the scripted sessions of ``otel_responses/scenarios.py`` — every state
mode done right and each scripted mistake, cycled over ``--conversations`` concurrent conversations — and sends each
turn to a random worker, after a model-like gap (``--gap-ms``, uniform, before every turn but the first; the
emulator answers at once). Workers report each turn's response id, the signals its spans carried, its wall time
and, with Redis, when its ledger entry became readable there: the dispatcher subscribes to Redis keyspace
notifications (``notify-keyspace-events E$``) and notes when each entry key (``…:r:{response id}``) is written,
so the write lag costs the workers nothing.

The same script (same scenarios, markers, gaps and worker draws) runs in up to four phases:

- ``single``: one worker, in-process ledger: the reference recall;
- ``fleet_local``: N workers, in-process ledger: what a fleet without sharing loses, and the time basis;
- ``fleet_redis``: N workers, shared ledger on a throwaway single ``redis-server``;
- ``fleet_cluster`` (``--cluster``, when ``tests/redis_cluster.py`` exists): the same on a local Redis Cluster,
  with ``--kill-master`` one master killed mid-run.

Results: ``bench/results/fleet-latest.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import multiprocessing as mp
import os
import platform
import random
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as `python bench/fleet.py` from anywhere
    sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:  # imported by a spawned worker: the benchmark's own modules
    sys.path.insert(0, str(HERE))

import run as bench_run  # noqa: E402

from otel_responses import scenarios  # noqa: E402

# A response's entry key: ``{namespace}:{{id}}:r`` (hash-tagged, for a cluster) or the older ``{namespace}:r:{id}``.
ENTRY_KEY = re.compile(r":\{([^}]+)\}:r$|:r:([^:{}]+)$")
UNAVAILABLE = "openai_responses.ledger.unavailable"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- worker process ----------------------------------------------------------------------------------------


@dataclass
class Turn:
    """What a worker reports for one call."""

    request: int
    worker: int
    kind: str  # "create" or "conversation"
    start: float  # time.monotonic() (system-wide on Linux: comparable across processes)
    end: float
    seconds: float
    response: dict[str, Any] | None = None
    error: str | None = None
    error_code: str | None = None
    signals: list[str] = field(default_factory=list)
    spans: int = 0
    ledger_unavailable: bool = False


def worker_main(
    index: int,
    base_url: str,
    ledger: dict[str, Any] | None,
    hash_key: str,
    requests: Any,
    results: Any,
    threads: int,
) -> None:
    """One fleet worker: instrumented client, ``threads`` threads serving turns from ``requests``."""
    import openai
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_responses import ResponsesInstrumentor
    from otel_responses.attributes import SIGNALS

    class ByThread(SpanProcessor):
        """Keeps each ended span for the thread that ended it (the thread that made the call)."""

        def __init__(self) -> None:
            self.local = threading.local()

        def on_end(self, span: ReadableSpan) -> None:
            spans = getattr(self.local, "spans", None)
            if spans is not None:
                spans.append(span)

    exporter = InMemorySpanExporter()
    by_thread = ByThread()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer_provider.add_span_processor(by_thread)
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    options: dict[str, Any] = {"hash_key": hash_key}
    shared: Any = None
    if ledger is not None:
        # Built from ledger_url (and whatever selects a cluster) exactly as instrument() would, kept for its stats.
        shared = shared_ledger(ledger, hash_key)
        options["ledger"] = shared
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, **options)
    client = openai.OpenAI(base_url=base_url, api_key="sk-fleet-bench", max_retries=0, timeout=30)
    export_lock = threading.Lock()

    def serve() -> None:
        while True:
            message = requests.get()
            if message is None:
                return
            request, kind, kwargs = message
            by_thread.local.spans = []
            start = time.monotonic()
            t0 = time.perf_counter()
            turn = Turn(request, index, kind, start, start, 0.0)
            try:
                if kind == "conversation":
                    turn.response = {"id": client.conversations.create().id}
                else:
                    response = client.responses.create(**kwargs)
                    turn.response = response.model_dump(mode="json", exclude_unset=True)
            except Exception as exc:  # the scenario's outcome, reported to the dispatcher
                turn.error = type(exc).__name__
                code = getattr(exc, "code", None)
                turn.error_code = code if isinstance(code, str) else None
            turn.seconds = time.perf_counter() - t0
            turn.end = time.monotonic()
            spans = by_thread.local.spans
            by_thread.local.spans = None
            turn.spans = len(spans)
            turn.ledger_unavailable = any((span.attributes or {}).get(UNAVAILABLE) for span in spans)
            turn.signals = [str(name) for span in spans for name in (span.attributes or {}).get(SIGNALS, ())]
            results.put(("turn", asdict(turn)))
            with export_lock:
                if len(exporter.get_finished_spans()) > 512:
                    exporter.clear()

    pool = [threading.Thread(target=serve, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    stats: dict[str, Any] = {}
    if shared is not None:
        with contextlib.suppress(Exception):
            shared.flush()
        stats = dict(shared.stats())
    instrumentor.uninstrument()
    results.put(("done", index, stats))


def ledger_options(ledger: dict[str, Any]) -> dict[str, Any]:
    """``instrument()`` keywords for the shared ledger: its URL, plus what selects a cluster."""
    options: dict[str, Any] = {"ledger_url": ledger["url"]}
    options.update(ledger.get("options", {}))
    return options


def shared_ledger(ledger: dict[str, Any], hash_key: str) -> Any:
    """A ``RedisLedger`` bound to the fleet's key, built from ``ledger_url`` as ``instrument()`` builds it."""
    from otel_responses.config import settings_from

    return settings_from({"hash_key": hash_key, "ledger_capacity": 100_000, **ledger_options(ledger)}).ledger


# -- dispatcher --------------------------------------------------------------------------------------------


class RemoteError(Exception):
    """A worker's call failed; carries the API error code as the SDK's errors do."""

    def __init__(self, name: str, code: str | None) -> None:
        super().__init__(name)
        self.name = name
        self.code = code


class Fleet:
    """Worker processes, their queues, and a thread that routes their reports back to waiting calls."""

    def __init__(self, workers: int, threads: int, base_url: str, ledger: dict[str, Any] | None, hash_key: str) -> None:
        context = mp.get_context("spawn")
        self.results: Any = context.Queue()
        self.queues: list[Any] = [context.Queue() for _ in range(workers)]
        self.threads = threads
        self.processes = [
            context.Process(
                target=worker_main,
                args=(i, base_url, ledger, hash_key, self.queues[i], self.results, threads),
                daemon=True,
            )
            for i in range(workers)
        ]
        self.waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self.stats: dict[int, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.next_request = 0
        self.done = 0
        self.finished = threading.Event()
        for process in self.processes:
            process.start()
        self.router = threading.Thread(target=self.route, daemon=True)
        self.router.start()

    def route(self) -> None:
        while self.done < len(self.processes):
            message = self.results.get()
            if message[0] == "turn":
                turn = message[1]
                with self.lock:
                    event, box = self.waiting.pop(turn["request"])
                box.append(turn)
                event.set()
            elif message[0] == "done":
                self.stats[message[1]] = message[2]
                self.done += 1
        self.finished.set()

    def call(self, worker: int, kind: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        event, box = threading.Event(), list[dict[str, Any]]()
        with self.lock:
            request = self.next_request
            self.next_request += 1
            self.waiting[request] = (event, box)
        self.queues[worker].put((request, kind, kwargs))
        if not event.wait(120):
            raise RuntimeError(f"worker {worker} did not answer request {request}")
        return box[0]

    def warm_up(self) -> None:
        """One conversation.create per worker thread: imports, connections and the instrumentation warm."""
        threads = [
            threading.Thread(target=self.call, args=(w, "conversation", {}))
            for w in range(len(self.queues))
            for _ in range(self.threads)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def close(self) -> None:
        for q in self.queues:
            for _ in range(self.threads):
                q.put(None)
        self.finished.wait(60)
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()


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


def jsonable(value: Any) -> Any:
    """Request keywords as JSON: SDK objects as the SDK itself would send them."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


class _Responses:
    def __init__(self, owner: ConversationClient) -> None:
        self.owner = owner

    def create(self, **kwargs: Any) -> Any:
        return self.owner.turn("create", jsonable(kwargs))


class _Conversations:
    def __init__(self, owner: ConversationClient) -> None:
        self.owner = owner

    def create(self) -> Any:
        return self.owner.turn("conversation", {})


class ConversationClient:
    """Stands in for ``openai.OpenAI`` in ``scenarios.run``: every call becomes a turn on a random worker, after
    a model-like gap (none before the first call)."""

    def __init__(self, fleet: Fleet, draws: random.Random, gap_ms: tuple[float, float], workers: int) -> None:
        self.fleet, self.draws, self.gap_ms, self.workers = fleet, draws, gap_ms, workers
        self.responses = _Responses(self)
        self.conversations = _Conversations(self)
        self.turns: list[dict[str, Any]] = []

    def turn(self, kind: str, kwargs: dict[str, Any]) -> Any:
        from openai.types.conversations import Conversation
        from openai.types.responses import Response

        gap = self.draws.uniform(*self.gap_ms) / 1000
        worker = self.draws.randrange(1_000_003) % self.workers  # the same draws whatever the worker count
        if self.turns:
            time.sleep(gap)
        turn = self.fleet.call(worker, kind, kwargs)
        turn["previous_response_id"] = kwargs.get("previous_response_id")
        self.turns.append(turn)
        if turn["error"] is not None:
            raise RemoteError(turn["error"], turn["error_code"])
        if kind == "conversation":
            return Conversation.construct(id=turn["response"]["id"], object="conversation", created_at=0, metadata={})
        return Response.model_validate(turn["response"])


@dataclass
class Conversation:
    index: int
    scenario: str
    transcript_error: str | None
    remembered: dict[str, bool]
    turns: list[dict[str, Any]]


def run_phase(
    name: str,
    fleet: Fleet,
    workers: int,
    conversations: int,
    seed: int,
    gap_ms: tuple[float, float],
    ramp: float,
    midway: Any = None,
) -> tuple[list[Conversation], float]:
    """Runs the script: ``conversations`` sessions, each on its own thread, started over ``ramp`` seconds."""
    done: list[Conversation] = []
    lock = threading.Lock()
    started = threading.Barrier(conversations + 1)
    t0 = time.monotonic()

    def one(i: int) -> None:
        draws = random.Random(seed * 1_000_003 + i)
        delay = draws.uniform(0, ramp)
        scenario = scenarios.SCENARIOS[i % len(scenarios.SCENARIOS)]
        client = ConversationClient(fleet, draws, gap_ms, workers)
        started.wait()
        time.sleep(delay)
        transcript = scenarios.run(client, scenario, f"M-{i}")  # type: ignore[arg-type]
        with lock:
            done.append(Conversation(i, scenario.name, transcript.error, transcript.remembered, client.turns))

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(conversations)]
    for thread in threads:
        thread.start()
    started.wait()
    t0 = time.monotonic()
    if midway is not None:
        midway(t0)
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - t0
    log(f"  {name}: {conversations} conversations, {sum(len(c.turns) for c in done)} calls in {elapsed:.1f} s")
    return sorted(done, key=lambda c: c.index), t0


# -- analysis ----------------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def raising_turns(reference: list[Conversation]) -> dict[tuple[str, str], int]:
    """In the single-process run: the turn of each scenario that raised each of its expected signals."""
    found: dict[tuple[str, str], int] = {}
    for conversation in reference:
        expected = scenarios.BY_NAME[conversation.scenario].raises
        for t, turn in enumerate(conversation.turns):
            for signal in turn["signals"]:
                if signal in expected:
                    found.setdefault((conversation.scenario, signal), t)
    return found


def analyse(
    conversations: list[Conversation],
    readable: dict[str, float] | None,
    where: dict[tuple[str, str], int],
    reference: dict[str, set[str]],
    kill_time: float | None = None,
) -> dict[str, Any]:
    """Recall of the scripted mistakes, false signals, call times, write lag and recall outside its window."""
    expected_total = detected = 0
    outside = outside_hit = inside = inside_hit = cross = cross_hit = 0
    after_kill = after_kill_hit = 0
    by_signal: dict[str, list[int]] = {}
    false_signals: dict[str, int] = {}
    false_turns = healthy_false = 0
    errors: dict[str, int] = {}
    seconds: list[float] = []
    lags: list[float] = []
    never = 0
    for conversation in conversations:
        scenario = scenarios.BY_NAME[conversation.scenario]
        expected = set(scenario.raises)
        allowed = expected | reference.get(conversation.scenario, set())
        raised = {s for turn in conversation.turns for s in turn["signals"]}
        if conversation.transcript_error:
            errors[conversation.scenario] = errors.get(conversation.scenario, 0) + 1
        for turn in conversation.turns:
            seconds.append(turn["seconds"])
            unexpected = [s for s in turn["signals"] if s not in allowed]
            if unexpected:
                false_turns += 1
                healthy_false += len(unexpected) if scenario.mistake is None else 0
                for signal in unexpected:
                    false_signals[signal] = false_signals.get(signal, 0) + 1
            rid = (turn["response"] or {}).get("id", "")
            if readable is not None and turn["kind"] == "create" and rid:
                when = readable.get(rid)
                if when is None:
                    never += 1
                else:
                    lags.append(when - turn["end"])
        if scenario.mistake is None:
            continue
        for signal in expected:
            hit = signal in raised
            expected_total += 1
            detected += hit
            by_signal.setdefault(signal, [0, 0])
            by_signal[signal][0] += 1
            by_signal[signal][1] += hit
            t = where.get((conversation.scenario, signal))
            if t is None or t == 0 or t >= len(conversation.turns):
                continue
            turn, parent = conversation.turns[t], conversation.turns[t - 1]
            if turn["worker"] != parent["worker"]:
                cross += 1
                cross_hit += hit
            parent_id = (parent["response"] or {}).get("id")
            ready = readable.get(parent_id) if readable is not None and parent_id else None
            if readable is not None and parent_id and (ready is None or turn["start"] < ready):
                inside += 1
                inside_hit += hit
            else:
                outside += 1
                outside_hit += hit
            if kill_time is not None and turn["start"] >= kill_time:
                after_kill += 1
                after_kill_hit += hit

    def ratio(a: int, b: int) -> float | None:
        return round(a / b, 4) if b else None

    result: dict[str, Any] = {
        "calls": len(seconds),
        "expected_signals": expected_total,
        "detected": detected,
        "recall": ratio(detected, expected_total),
        "recall_by_signal": {k: {"expected": v[0], "detected": v[1]} for k, v in sorted(by_signal.items())},
        "raising_turn_on_other_worker": {"n": cross, "detected": cross_hit, "recall": ratio(cross_hit, cross)},
        "outside_write_window": {"n": outside, "detected": outside_hit, "recall": ratio(outside_hit, outside)},
        "inside_write_window": {"n": inside, "detected": inside_hit, "recall": ratio(inside_hit, inside)},
        "false_signals": sum(false_signals.values()),
        "false_signals_on_healthy_sessions": healthy_false,
        "false_signals_by_name": false_signals,
        "turns_with_false_signals": false_turns,
        "scenario_errors": errors,
        "call_ms": {
            "p50": ms(percentile(seconds, 0.5)),
            "p90": ms(percentile(seconds, 0.9)),
            "p99": ms(percentile(seconds, 0.99)),
            "mean": ms(statistics.fmean(seconds) if seconds else None),
        },
    }
    if readable is not None:
        result["write_lag_ms"] = {
            "n": len(lags),
            "never_readable": never,
            "p50": ms(percentile(lags, 0.5)),
            "p99": ms(percentile(lags, 0.99)),
            "max": ms(max(lags) if lags else None),
        }
    result["calls_with_ledger_unavailable"] = sum(
        1 for c in conversations for t in c.turns if t.get("ledger_unavailable")
    )
    if kill_time is not None:
        late = [t["seconds"] for c in conversations for t in c.turns if t["start"] >= kill_time]
        result["calls_after_kill_ms"] = {
            "n": len(late),
            "p50": ms(percentile(late, 0.5)),
            "p99": ms(percentile(late, 0.99)),
            "max": ms(max(late) if late else None),
        }
        result["after_kill"] = {
            "n": after_kill,
            "detected": after_kill_hit,
            "recall": ratio(after_kill_hit, after_kill),
        }
    return result


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


# -- infrastructure ----------------------------------------------------------------------------------------


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


# -- report ------------------------------------------------------------------------------------------------


def render(results: dict[str, Any]) -> str:
    phases: dict[str, dict[str, Any]] = results["phases"]
    lines = [
        "# Fleet benchmark (issue 16)",
        "",
        f"`{results['command']}` — {results['workers']} workers x {results['threads']} threads, "
        f"{results['conversations']} conversations ({len(scenarios.SCENARIOS)} scripted sessions cycled), "
        f"gap {results['gap_ms'][0]:.0f}-{results['gap_ms'][1]:.0f} ms before each turn, started over "
        f"{results['ramp_seconds']:.0f} s; {results['machine']['cpus']} CPUs, Python {results['machine']['python']}, "
        f"redis-server {results['machine']['redis-server']}.",
        "",
        "| phase | calls | recall | raising turn on another worker | outside write window | "
        "false signals (on healthy sessions) | app outcomes != single | ledger unavailable | "
        "call p50 ms | call p99 ms | write lag p50 / p99 / max ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, phase in phases.items():
        lag = phase.get("write_lag_ms")
        lag_text = f"{lag['p50']} / {lag['p99']} / {lag['max']} (never: {lag['never_readable']})" if lag else "—"
        cross, out = phase["raising_turn_on_other_worker"], phase["outside_write_window"]
        lines.append(
            f"| {name} | {phase['calls']} | {phase['detected']}/{phase['expected_signals']} = {phase['recall']} | "
            f"{cross['detected']}/{cross['n']} | {out['detected']}/{out['n']} | "
            f"{phase['false_signals']} ({phase['false_signals_on_healthy_sessions']}) | "
            f"{phase.get('app_outcomes_differing_from_single', '—')} | {phase['calls_with_ledger_unavailable']} | "
            f"{phase['call_ms']['p50']} | {phase['call_ms']['p99']} | {lag_text} |"
        )
    lines += ["", "Added time per call against the in-process ledger (same fleet, same script):", ""]
    for name, added in results.get("added_ms", {}).items():
        lines.append(f"- {name}: p50 {added['p50']} ms, p99 {added['p99']} ms")
    for name, memory in results.get("redis_memory", {}).items():
        lines.append(
            f"- Redis memory ({name}): {memory['used_memory_delta']} B for {memory['keys']} keys = "
            f"{memory['bytes_per_conversation']} B per conversation ({memory['calls_per_conversation']} calls each)"
        )
    lines += ["", "Recall by signal:", "", "| signal | " + " | ".join(phases) + " |", "|---" * (len(phases) + 1) + "|"]
    signals = sorted({s for p in phases.values() for s in p["recall_by_signal"]})
    for signal in signals:
        cells = []
        for phase in phases.values():
            v = phase["recall_by_signal"].get(signal)
            cells.append(f"{v['detected']}/{v['expected']}" if v else "—")
        lines.append(f"| {signal} | " + " | ".join(cells) + " |")
    for name, phase in phases.items():
        if phase["false_signals"]:
            lines.append(f"\nFalse signals in {name}: {phase['false_signals_by_name']}")
        if phase.get("ledger_stats"):
            lines.append(f"\nLedger stats in {name} (summed over workers): {phase['ledger_stats']}")
    for name, phase in phases.items():
        if "kill" in phase:
            lines.append(
                f"\nKill master ({name}): {json.dumps(phase['kill'])}; calls from the kill on: "
                f"{json.dumps(phase.get('calls_after_kill_ms'))}; recall of mistakes whose raising turn started after "
                f"the kill: {json.dumps(phase.get('after_kill'))}"
            )
    return "\n".join(lines) + "\n"


# -- main --------------------------------------------------------------------------------------------------


def phase(
    name: str,
    args: argparse.Namespace,
    base_url: str,
    workers: int,
    ledger: dict[str, Any] | None,
    hash_key: str,
    where: dict[tuple[str, str], int],
    reference: dict[str, set[str]],
    watch: list[str] | None = None,
    midway: Any = None,
) -> tuple[dict[str, Any], list[Conversation]]:
    """One run of the script on a new set of workers; ``watch``: the Redis node URLs whose writes to follow."""
    log(f"phase {name}: {workers} worker(s), ledger {'shared' if ledger else 'in-process'}")
    fleet = Fleet(workers, args.threads, base_url, ledger, hash_key)
    watcher = KeyWatcher(watch) if watch else None
    kill: dict[str, Any] = {}
    try:
        fleet.warm_up()
        conversations, _ = run_phase(
            name,
            fleet,
            workers,
            args.conversations,
            args.seed,
            (args.gap_ms[0], args.gap_ms[1]),
            args.ramp,
            midway=(lambda start: midway(start, kill)) if midway is not None else None,
        )
    finally:
        fleet.close()
        if watcher is not None:
            watcher.close()
    readable = dict(watcher.readable) if watcher is not None else None
    result = analyse(conversations, readable, where, reference, kill.get("time"))
    stats: dict[str, int] = {}
    for worker_stats in fleet.stats.values():
        for key, value in worker_stats.items():
            stats[key] = stats.get(key, 0) + int(value)
    if stats:
        result["ledger_stats"] = stats
    if kill:
        result["kill"] = {k: v for k, v in kill.items() if k != "time"}
    result["sessions"] = [
        {
            "i": c.index,
            "scenario": c.scenario,
            "error": c.transcript_error,
            "remembered": c.remembered,
            "turns": [[t["worker"], t["signals"]] for t in c.turns],
        }
        for c in conversations
    ]
    return result, conversations


Reference = tuple[dict[tuple[str, str], int], dict[str, set[str]], dict[str, Any]]


def reference_run(base_url: str, hash_key: str) -> Reference:
    """Each scenario once, one after the other, on one worker with the in-process ledger: which turn raises each
    expected signal, and the full set of signals each scenario raises when nothing else runs (a mistake often
    raises a companion signal too, e.g. ``replay_incomplete`` beside ``orphan_tool_output``)."""
    log("phase reference: each scenario once, sequentially, one worker")
    fleet = Fleet(1, 1, base_url, None, hash_key)
    done: list[Conversation] = []
    try:
        for i, scenario in enumerate(scenarios.SCENARIOS):
            client = ConversationClient(fleet, random.Random(i), (0.0, 0.0), 1)
            transcript = scenarios.run(client, scenario, f"R-{i}")  # type: ignore[arg-type]
            done.append(Conversation(i, scenario.name, transcript.error, transcript.remembered, client.turns))
    finally:
        fleet.close()
    signals = {c.scenario: {s for t in c.turns for s in t["signals"]} for c in done}
    table = {c.scenario: [t["signals"] for t in c.turns] for c in done}
    return raising_turns(done), signals, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4, help="threads serving turns in each worker")
    parser.add_argument("--conversations", type=int, default=300)
    parser.add_argument("--gap-ms", type=float, nargs=2, default=(200.0, 600.0), metavar=("MIN", "MAX"))
    parser.add_argument("--ramp", type=float, default=5.0, help="seconds over which conversations start")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--cluster", action="store_true", help="also run on a local Redis Cluster")
    parser.add_argument("--kill-master", action="store_true", help="with --cluster: kill one master mid-run")
    parser.add_argument("--skip", default="", help="comma-separated phases to skip: single, fleet_local, fleet_redis")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if args.kill_master and not args.cluster:
        parser.error("--kill-master needs --cluster")
    skip = {s for s in args.skip.split(",") if s}
    hash_key = secrets.token_urlsafe(32)
    calls_per_conversation = 0.0
    results: dict[str, Any] = {
        "command": "python bench/fleet.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "workers": args.workers,
        "threads": args.threads,
        "conversations": args.conversations,
        "gap_ms": list(args.gap_ms),
        "ramp_seconds": args.ramp,
        "seed": args.seed,
        "machine": machine(),
        "phases": {},
        "redis_memory": {},
        "added_ms": {},
    }
    phases: dict[str, dict[str, Any]] = results["phases"]
    started = time.monotonic()
    with emulator() as base_url:
        where, reference, table = reference_run(base_url, hash_key)
        results["reference_signals_by_turn"] = table
        if "single" not in skip:
            phases["single"], _ = phase("single", args, base_url, 1, None, hash_key, where, reference)
        if "fleet_local" not in skip:
            phases["fleet_local"], _ = phase(
                "fleet_local", args, base_url, args.workers, None, hash_key, where, reference
            )
        if "fleet_redis" not in skip:
            with redis_server() as url:
                before = redis_memory(url)
                phases["fleet_redis"], done = phase(
                    "fleet_redis", args, base_url, args.workers, {"url": url}, hash_key, where, reference, [url]
                )
                after = redis_memory(url)
                calls_per_conversation = sum(len(c.turns) for c in done) / max(1, len(done))
                delta = after["used_memory"] - before["used_memory"]
                results["redis_memory"]["single node"] = {
                    "used_memory_delta": delta,
                    "keys": after["keys"] - before["keys"],
                    "bytes_per_conversation": round(delta / args.conversations),
                    "calls_per_conversation": round(calls_per_conversation, 2),
                }
        if args.cluster:
            launcher = cluster_launcher()
            if launcher is None:
                results["cluster"] = "not run: tests/redis_cluster.py does not exist yet"
                log(results["cluster"])
            else:
                results["cluster"] = run_cluster(launcher, args, base_url, hash_key, where, reference, results)
    for name in ("fleet_redis", "fleet_cluster", "fleet_cluster_kill_master"):
        if name in phases and "fleet_local" in phases:
            results["added_ms"][f"{name} - fleet_local"] = {
                q: round(phases[name]["call_ms"][q] - phases["fleet_local"]["call_ms"][q], 3) for q in ("p50", "p99")
            }
    if "single" in phases:
        outcome = {x["i"]: (x["error"], x["remembered"]) for x in phases["single"]["sessions"]}
        for data in phases.values():
            data["app_outcomes_differing_from_single"] = sum(
                1 for x in data["sessions"] if outcome.get(x["i"]) != (x["error"], x["remembered"])
            )
    results["total_seconds"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fleet-latest.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "fleet-latest.md").write_text(render(results))
    log(render(results))
    log(f"wrote {args.out / 'fleet-latest.json'} and fleet-latest.md in {results['total_seconds']} s")
    return 0


def run_cluster(
    launcher: Any,
    args: argparse.Namespace,
    base_url: str,
    hash_key: str,
    where: dict[tuple[str, str], int],
    reference: dict[str, set[str]],
    results: dict[str, Any],
) -> str:
    """The fleet on ``tests/redis_cluster.py``'s local cluster (3 masters, a replica each; ``ledger_cluster``),
    with ``--kill-master`` one master SIGKILLed a third of the way into the run."""
    import redis

    def memory(ports: list[int]) -> dict[str, int]:
        total = {"used_memory": 0, "keys": 0}
        for port in ports:
            node = redis.Redis(host="127.0.0.1", port=port)
            total["used_memory"] += int(node.info("memory")["used_memory"])
            total["keys"] += int(node.dbsize())
            node.close()
        return total

    for killing in (False, True) if args.kill_master else (False,):
        name = "fleet_cluster_kill_master" if killing else "fleet_cluster"
        with launcher.LocalCluster() as cluster:
            masters = cluster.master_ports()
            before = memory(masters)
            urls = [f"redis://127.0.0.1:{port}/0" for port in cluster.ports]

            def kill_master(
                start: float, kill: dict[str, Any], cluster: Any = cluster, masters: list[int] = masters
            ) -> None:
                def later() -> None:
                    time.sleep(args.ramp / 3)
                    victim = masters[0]
                    kill["time"] = time.monotonic()
                    kill["killed_port"] = victim
                    kill["seconds_into_run"] = round(kill["time"] - start, 2)
                    cluster.kill(victim)
                    try:
                        deadline = time.monotonic() + 30
                        while victim in cluster.master_ports() and time.monotonic() < deadline:
                            time.sleep(0.05)  # survivors still name the dead master until the node timeout
                        cluster.wait_ok(30, ports=[p for p in cluster.ports if p != victim])
                        kill["failover_seconds"] = round(time.monotonic() - kill["time"], 2)
                    except Exception as exc:  # reported, not fatal
                        kill["failover_error"] = type(exc).__name__

                threading.Thread(target=later, daemon=True).start()

            result, done = phase(
                name,
                args,
                base_url,
                args.workers,
                {"url": cluster.url, "options": {"ledger_cluster": True}},
                hash_key,
                where,
                reference,
                urls,
                midway=kill_master if killing else None,
            )
            results["phases"][name] = result
            if not killing:
                after = memory(masters)
                delta = after["used_memory"] - before["used_memory"]
                results["redis_memory"]["cluster (3 masters)"] = {
                    "used_memory_delta": delta,
                    "keys": after["keys"] - before["keys"],
                    "bytes_per_conversation": round(delta / args.conversations),
                    "calls_per_conversation": round(sum(len(c.turns) for c in done) / max(1, len(done)), 2),
                }
    return "run"


if __name__ == "__main__":
    sys.exit(main())
