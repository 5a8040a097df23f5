"""Load: many threads and asyncio tasks at once, each running its own correct little session.

- 16 threads against the emulator, 200 calls each by default; set ``OTEL_RESPONSES_FULL_LOAD=1`` for the full
  16 x 2,000 (CI time matters: the default run takes seconds, the full one minutes).
- 1,000 concurrent asyncio tasks through an in-process transport (the emulator's thread-per-connection server is
  not the thing under test).
- 500 more calls past the ledger's capacity under ``tracemalloc`` (it slows every allocation fourfold, so it is not
  on for the runs above).

Every span is ended exactly once (spans counted by span id = calls made), no signal is raised by interleaving
(each session is correct on its own), memory stays bounded (the ledger never exceeds its capacity; what the
instrumentation's own code still holds afterwards, and the peak, stay under stated bounds), nothing deadlocks
(everything finishes within a timeout). And 100 instrument/uninstrument cycles leave every patched SDK class
exactly as it was.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import itertools
import json
import os
import threading
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from otel_responses import ResponsesInstrumentor
from otel_responses.emulator import Emulator
from otel_responses.instrumentor import _OBSERVERS, TARGETS
from otel_responses.ledger import InMemoryLedger

from ..support import HTTPX, mock_async_client, mock_client, usage

FULL = os.environ.get("OTEL_RESPONSES_FULL_LOAD") == "1"
THREADS = 16
CALLS_PER_THREAD = 2_000 if FULL else 200
TASKS = 1_000
TIMEOUT = 1_800.0 if FULL else 180.0
MODEL = "gpt-4.1-mini"
INSTRUCTIONS = "Answer briefly."
LEDGER_CAPACITY = 256

# Memory bounds. Measured: otel_responses code holds ~0.2 MB after thousands of calls with a 256-entry ledger (the
# README's estimate is ~6 MB for the default 4,096), and 500 sequential calls peak at a few MB in all.
RETAINED_BOUND = 4 * 1024 * 1024
GROWTH_BOUND = 256 * 1024
PEAK_BOUND = 32 * 1024 * 1024


class CountingProcessor(SpanProcessor):
    """Counts ended spans by span id, and keeps only the names of spans that raised a signal."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ended: Counter[int] = Counter()
        self.signalled: list[tuple[str, tuple[str, ...]]] = []

    def on_end(self, span: ReadableSpan) -> None:
        signals: tuple[str, ...] = tuple((span.attributes or {}).get("openai_responses.signals", ()))  # type: ignore[arg-type]
        with self._lock:
            self.ended[span.context.span_id] += 1
            if signals:
                self.signalled.append((span.name, signals))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


@pytest.fixture
def counted() -> Iterator[tuple[CountingProcessor, InMemoryLedger]]:
    """The instrumentation on, counting spans, with a small ledger that must evict under load."""
    processor = CountingProcessor()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    ledger = InMemoryLedger(LEDGER_CAPACITY)
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, ledger=ledger)
    try:
        yield processor, ledger
    finally:
        instrumentor.uninstrument()


@pytest.fixture(scope="module")
def load_emulator() -> Iterator[Emulator]:
    """An emulator of its own: what it stores for thousands of calls is freed with the module."""
    with Emulator() as emulator:
        yield emulator


def _assert_counts(processor: CountingProcessor, calls: int) -> None:
    assert sum(processor.ended.values()) == calls, "spans ended != calls made"
    assert len(processor.ended) == calls, "a call made no span, or two calls shared one"
    assert set(processor.ended.values()) == {1}, "a span was ended more than once"
    assert processor.signalled == [], f"false signals from interleaving: {processor.signalled[:5]}"


# -- threads against the emulator ------------------------------------------------------------------------------------


def _thread_sessions(emulator: Emulator, thread: int, calls: int) -> int:
    """Two-call sessions, alternately chained on the server and replayed by the client; each checks its answer."""
    made = 0
    client = emulator.client()
    try:
        for session in range(calls // 2):
            marker = f"M-{thread}-{session}"
            first_input = f"Remember this: the marker is {marker}."
            if session % 2 == 0:
                first = client.responses.create(model=MODEL, input=first_input, instructions=INSTRUCTIONS)
                second = client.responses.create(
                    model=MODEL, previous_response_id=first.id, instructions=INSTRUCTIONS, input="What is the marker?"
                )
            else:
                history: list[Any] = [{"role": "user", "content": first_input}]
                first = client.responses.create(model=MODEL, input=history, store=False)
                history += [*first.output, {"role": "user", "content": "What is the marker?"}]
                second = client.responses.create(model=MODEL, input=history, store=False)
            made += 2
            assert f"marker={marker}" in second.output_text, (marker, second.output_text)
    finally:
        client.close()
    return made


def test_threads_against_the_emulator(
    load_emulator: Emulator, counted: tuple[CountingProcessor, InMemoryLedger]
) -> None:
    processor, ledger = counted
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        futures = [pool.submit(_thread_sessions, load_emulator, t, CALLS_PER_THREAD) for t in range(THREADS)]
        done, not_done = wait(futures, timeout=TIMEOUT)
        assert not not_done, f"{len(not_done)} threads still running after {TIMEOUT}s: deadlock?"
    made = sum(f.result() for f in done)
    assert made == THREADS * CALLS_PER_THREAD
    _assert_counts(processor, made)
    assert len(ledger) <= ledger.capacity
    assert ledger._in_flight == {}, "a request is still marked in flight"


# -- asyncio tasks through an in-process transport ---------------------------------------------------------------


class Api:
    """A tiny deterministic Responses API: unique ids per response and item; yields to the loop mid-request."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    async def __call__(self, request: Any) -> Any:
        await asyncio.sleep(0)  # let other tasks interleave between request and response
        body = json.loads(request.content)
        n = next(self._ids)
        await asyncio.sleep(0)
        output = [
            {
                "type": "message",
                "id": f"msg_load_{n}",
                "role": "assistant",
                "status": "completed",
                "phase": "final_answer",
                "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}],
            }
        ]
        response = {
            "id": f"resp_load_{n}",
            "object": "response",
            "created_at": 1,
            "model": body.get("model"),
            "status": "completed",
            "output": output,
            "usage": usage(),
            "tool_choice": "auto",
            "tools": [],
            "parallel_tool_calls": True,
        }
        return HTTPX.Response(200, json=response, headers={"x-request-id": f"req_load_{n}"})


async def _task_session(client: openai.AsyncOpenAI, task: int) -> int:
    """Two turns: alternately server-chained (instructions re-sent) and client-replayed (every item)."""
    if task % 2 == 0:
        first = await client.responses.create(model=MODEL, input=f"turn one of {task}", instructions=INSTRUCTIONS)
        await client.responses.create(
            model=MODEL, previous_response_id=first.id, input="turn two", instructions=INSTRUCTIONS
        )
        return 2
    history: list[Any] = [{"role": "user", "content": f"turn one of {task}"}]
    response = await client.responses.create(model=MODEL, input=history, store=False)
    history += [*response.output, {"role": "user", "content": "turn two"}]
    await client.responses.create(model=MODEL, input=history, store=False)
    return 2


def _own_retained_bytes(snapshot: tracemalloc.Snapshot) -> int:
    own = snapshot.filter_traces(
        [tracemalloc.Filter(True, "*otel_responses*"), tracemalloc.Filter(False, "*otel_responses/emulator*")]
    )
    return sum(stat.size for stat in own.statistics("filename"))


def test_concurrent_asyncio_tasks(counted: tuple[CountingProcessor, InMemoryLedger]) -> None:
    processor, ledger = counted

    async def run() -> int:
        client = mock_async_client(Api())
        try:
            tasks = [asyncio.create_task(_task_session(client, t)) for t in range(TASKS)]
            done, pending = await asyncio.wait(tasks, timeout=TIMEOUT)
            assert not pending, f"{len(pending)} tasks still running after {TIMEOUT}s: deadlock?"
            return sum(t.result() for t in done)
        finally:
            await client.close()

    made = asyncio.run(run())
    assert made == TASKS * 2
    _assert_counts(processor, made)
    assert len(ledger) <= ledger.capacity
    assert ledger._in_flight == {}


def test_sync_memory_does_not_grow_with_calls(counted: tuple[CountingProcessor, InMemoryLedger]) -> None:
    """Past the ledger's capacity, more calls leave no more memory behind."""
    processor, ledger = counted
    api_ids = itertools.count(1)

    def handler(request: Any) -> Any:
        n = next(api_ids)
        body = {
            "id": f"resp_mem_{n}",
            "object": "response",
            "model": MODEL,
            "status": "completed",
            "output": [{"type": "message", "id": f"msg_mem_{n}", "role": "assistant", "content": []}],
            "usage": usage(),
        }
        return HTTPX.Response(200, json=body)

    client = mock_client(handler)

    def calls(count: int) -> None:
        for _ in range(count):
            client.responses.create(model=MODEL, input="hi")

    calls(LEDGER_CAPACITY * 2)  # warm up: the ledger is full and evicting
    gc.collect()
    tracemalloc.start()
    try:
        before = _own_retained_bytes(tracemalloc.take_snapshot())
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        calls(500)
        _, peak = tracemalloc.get_traced_memory()
        gc.collect()
        after = _own_retained_bytes(tracemalloc.take_snapshot())
    finally:
        tracemalloc.stop()
        client.close()
    assert len(ledger) == ledger.capacity
    assert after < RETAINED_BOUND, f"otel_responses code holds {after} bytes"
    assert after - before < GROWTH_BOUND, f"{after - before} more bytes held after 500 more calls"
    assert peak - start < PEAK_BOUND, f"peak {peak - start} bytes above the start"
    assert sum(processor.ended.values()) == LEDGER_CAPACITY * 2 + 500


# -- instrument / uninstrument cycles -----------------------------------------------------------------------------


def _patched_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for module_name, cls_name in [(t.module, t.cls) for t in TARGETS] + [(o[0], o[1]) for o in _OBSERVERS]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, cls_name, None)
        if isinstance(cls, type):
            found[f"{module_name}.{cls_name}"] = cls
    return found


def _state(classes: dict[str, type]) -> dict[str, dict[str, Any]]:
    return {name: dict(vars(cls)) for name, cls in classes.items()}


def _differences(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """By identity: a wrapt wrapper compares equal to what it wraps."""
    diffs = []
    for name, attributes in before.items():
        now = after[name]
        for key in attributes.keys() | now.keys():
            if key not in now or key not in attributes or now[key] is not attributes[key]:
                diffs.append(f"{name}.{key}")
    return diffs


def test_instrument_cycles_leave_the_sdk_as_it_was() -> None:
    classes = _patched_classes()
    assert len(classes) >= 10
    before = _state(classes)
    processor = CountingProcessor()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    instrumentor = ResponsesInstrumentor()
    for _ in range(100):
        instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
        assert _differences(before, _state(classes)), "instrument() patched nothing"
        instrumentor.uninstrument()
        assert _differences(before, _state(classes)) == []
    assert _differences(before, _state(classes)) == []

    client = mock_client(lambda request: HTTPX.Response(200, json={"id": "resp_c", "output": [], "usage": usage()}))
    try:
        client.responses.create(model=MODEL, input="off")
        assert sum(processor.ended.values()) == 0
        instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
        try:
            client.responses.create(model=MODEL, input="on")
        finally:
            instrumentor.uninstrument()
        assert sum(processor.ended.values()) == 1, "one call, one span: no wrapper left stacked by the cycles"
    finally:
        client.close()
    assert _differences(before, _state(classes)) == []
