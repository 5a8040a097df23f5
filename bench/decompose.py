"""Where otel_responses' added time goes, in place: its own code against the OpenTelemetry SDK's work.

    .venv/bin/python bench/decompose.py [--workload short|stream] [--calls 3000] [--processes 3]

Each variant in its own process, three processes per variant in rounds (``--processes``), each alternating calls
with and without the instrumentation call by call (the paired method of ``run.py``: the call without goes through
the wrapper's ``__wrapped__``):

- ``span``: a wrapt wrapper that only opens and ends one CLIENT span, the floor of any tracing instrumentation;
- ``contract``: a wrapt wrapper that writes exactly what otel_responses writes for the workload's call (its span's
  attributes, the request side at the start and the rest at the end, and its synchronous metric recordings), taken
  from one call made with otel_responses and replayed as constants: the SDK's price of the telemetry contract,
  with none of our Python around it;
- ``noop``: otel_responses with no-op tracer and meter providers: its own Python (facts, checks, ledger) only;
- ``sdk``: otel_responses with the SDK providers, as in ``run.py``.

``sdk - noop`` is what the SDK spends on our span, its ~30 attributes and our metric recordings. Whole-call
times: meant for ``short`` (a replay's time is dominated by the SDK's own request transform; ``run.py`` nets it
out).

    .venv/bin/python bench/decompose.py --async-ledger [--workload short|stream]

The shared ledger's read on an async call: ``async_redis`` is otel_responses with the SDK providers and a
``RedisLedger`` on a throwaway ``redis-server``, an ``AsyncOpenAI`` client, and every timed call chained to a parent
that another process wrote and this one has never seen (so each call reads its parent's entry and continued-marker
from Redis before its analysis); ``async_local`` is the same call with the in-process ledger, where the parent is
not known at all (no read). ``async_redis - async_local`` is what the read costs an async call.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VARIANTS = ("span", "contract", "noop", "sdk")
ASYNC_VARIANTS = ("async_local", "async_redis")
FLEET_KEY = "bench-fleet-key"


def install_contract(workload: str, tracer_provider: Any, meter_provider: Any) -> None:
    """The ``contract`` variant: one call with otel_responses in a scratch pipeline gives the span (name, kind,
    attributes: the request side is what ``Telemetry.start`` sets, the rest is set at the end) and the synchronous
    recordings (histograms, with their attribute sets); then a plain wrapt wrapper replays them around each call."""
    import worker
    import wrapt
    from openai.resources.responses.responses import Responses
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, set_span_in_context

    from otel_responses import ResponsesInstrumentor
    from otel_responses._telemetry.telemetry import Telemetry

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    scratch = TracerProvider()
    scratch.add_span_processor(SimpleSpanProcessor(exporter))
    at_start: dict[str, Any] = {}
    original_start = Telemetry.start

    def spy(self: Telemetry, call: Any) -> None:
        original_start(self, call)
        at_start.update(call.span.attributes)

    Telemetry.start = spy  # type: ignore[method-assign]
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=scratch, meter_provider=MeterProvider(metric_readers=[reader]))
    harness = worker.build("bare")
    worker.make_call(harness.client, workload)()
    instrumentor.uninstrument()
    Telemetry.start = original_start  # type: ignore[method-assign]
    (span,) = exporter.get_finished_spans()
    start_attrs = dict(at_start)
    end_attrs = {k: v for k, v in (span.attributes or {}).items() if k not in start_attrs}
    recordings: list[tuple[str, float, dict[str, Any]]] = []
    for resource_metrics in reader.get_metrics_data().resource_metrics:  # type: ignore[union-attr]
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    if isinstance(point, HistogramDataPoint):
                        value, attributes = point.sum / point.count, dict(point.attributes or {})
                        recordings.extend((metric.name, value, attributes) for _ in range(point.count))
    meter = meter_provider.get_meter("bench.contract")
    histograms = {name: meter.create_histogram(name) for name, _, _ in recordings}
    knobs = os.environ.get("DECOMPOSE_CONTRACT", "")  # "noattrs", "norecord": parts of the contract, to weigh them
    if "noattrs" in knobs:
        start_attrs, end_attrs = {}, {}
    if "norecord" in knobs:
        recordings = []
    tracer = tracer_provider.get_tracer("bench.contract")
    name = span.name

    def contract(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        with tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=start_attrs) as current:
            result = wrapped(*args, **kwargs)
            if kwargs.get("stream"):
                for _ in result:
                    pass
            current.set_attributes(end_attrs)
        context = set_span_in_context(current)
        for metric_name, value, attributes in recordings:  # as ours: in the span's context, once it ended
            histograms[metric_name].record(value, attributes, context=context)
        return result

    wrapt.wrap_function_wrapper(Responses, "create", contract)
    log = sys.stderr
    print(f"contract: {len(start_attrs)} + {len(end_attrs)} attributes, {len(recordings)} recordings", file=log)


def measure(variant: str, workload: str, calls: int) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import worker
    import wrapt
    from openai.resources.responses.responses import Responses
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import NoOpTracerProvider, SpanKind

    from otel_responses import ResponsesInstrumentor

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    if variant == "sdk":
        ResponsesInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif variant == "noop":
        ResponsesInstrumentor().instrument(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    elif variant == "contract":
        install_contract(workload, tracer_provider, meter_provider)
    else:
        tracer = tracer_provider.get_tracer("bench.span-only")

        def one_span(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            with tracer.start_as_current_span("chat", kind=SpanKind.CLIENT):
                return wrapped(*args, **kwargs)

        wrapt.wrap_function_wrapper(Responses, "create", one_span)
    harness = worker.build("bare")
    with_it = worker.make_call(harness.client, workload)
    without = worker.make_call(harness.client, workload, original=True)
    for _ in range(50):
        with_it()
        without()
    on: list[int] = []
    off: list[int] = []
    clock = time.perf_counter_ns
    gc.collect()
    for index in range(calls):
        if index % 200 == 0:
            exporter.clear()
        for call, out in ((with_it, on), (without, off)) if index % 2 else ((without, off), (with_it, on)):
            begin = clock()
            call()
            out.append(clock() - begin)
    return paired(variant, workload, on, off)


def paired(variant: str, workload: str, on: list[int], off: list[int]) -> dict[str, Any]:
    """The paired figure of one process: the median call with the instrumentation less the median without."""
    return {
        "variant": variant,
        "workload": workload,
        "calls": len(on),
        "added_us": (statistics.median(on) - statistics.median(off)) / 1e3,
        "without_median_us": statistics.median(off) / 1e3,
    }


def parents(url: str, count: int) -> list[str]:
    """``count`` responses written to Redis by another process of the fleet (a writer ledger of their own, flushed):
    each timed call continues one of them, unknown to its own process until it reads Redis."""
    from otel_responses._fingerprint import Fingerprinter, key_from_text
    from otel_responses._items import ItemMeta
    from otel_responses.ledger import Entry
    from otel_responses.ledger.redis import RedisLedger

    writer = RedisLedger(url)
    writer.bind(Fingerprinter(key_from_text(FLEET_KEY)))
    names = [f"resp_parent_{os.getpid()}_{n}" for n in range(count)]
    for sequence, name in enumerate(names, 1):
        answer = ItemMeta("message", f"msg_{name}", None, "assistant", "final_answer", False, sequence)
        writer.record(Entry(name, sequence, True, None, None, (answer,), 1, 0), None)
    assert writer.flush(60), "the parents were not written"
    writer.close(1)
    return names


def measure_async(variant: str, workload: str, calls: int) -> dict[str, Any]:
    """An ``AsyncOpenAI`` call chained to a parent only Redis knows (``async_redis``) or nobody knows
    (``async_local``), paired call by call with the same call through the wrapper's ``__wrapped__``."""
    import asyncio

    sys.path.insert(0, str(HERE))
    import httpx2
    import openai
    import worker
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_responses import ResponsesInstrumentor

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    options: dict[str, Any] = {
        "tracer_provider": tracer_provider,
        "meter_provider": MeterProvider(metric_readers=[InMemoryMetricReader()]),
        "hash_key": FLEET_KEY,
        "log_signals": "off",
    }
    warm = 50
    ledger = None
    if variant == "async_redis":
        from otel_responses.ledger.redis import RedisLedger

        url = os.environ[worker.REDIS_URL_ENV]
        names = parents(url, 2 * (calls + warm))
        # A read timeout no loaded machine reaches: a timed-out read would start a backoff and skip the reads after it.
        ledger = options["ledger"] = RedisLedger(url, timeout_seconds=1.0)
    else:
        names = [f"resp_unknown_{n}" for n in range(2 * (calls + warm))]
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(**options)
    client = openai.AsyncOpenAI(
        api_key="sk-bench",
        base_url="https://api.openai.com/v1",
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(worker.CannedTransport())),
    )
    chained = iter(names)
    stream = workload == "stream"

    async def call(original: bool) -> None:
        method = client.responses.create
        create = getattr(method, "__wrapped__") if original else method  # noqa: B009
        result: Any = await create(
            model=worker.MODEL, input="And the capital of Italy?", previous_response_id=next(chained), stream=stream
        )
        if stream:
            async for _ in result:
                pass

    async def run() -> dict[tuple[bool, bool], list[int]]:
        for _ in range(warm):
            await call(False)
            await call(True)
        times: dict[tuple[bool, bool], list[int]] = {(cpu, off): [] for cpu in (False, True) for off in (False, True)}
        clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
        gc.collect()
        for index in range(calls):
            if index % 200 == 0:
                exporter.clear()
            for original in (False, True) if index % 2 else (True, False):
                begin, cpu_begin = clock(), cpu_clock()
                await call(original)
                times[False, original].append(clock() - begin)
                times[True, original].append(cpu_clock() - cpu_begin)
        return times

    times = asyncio.run(run())
    cpu = paired(variant, workload, times[True, False], times[True, True])["added_us"]
    stats = ledger.stats() if ledger is not None else {}
    return {**paired(variant, workload, times[False, False], times[False, True]), "cpu_added_us": cpu, "ledger": stats}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="short")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument(
        "--variant", choices=VARIANTS + ASYNC_VARIANTS, help="measure one variant in this process (internal)"
    )
    parser.add_argument("--processes", type=int, default=3, help="processes per variant (the median is reported)")
    parser.add_argument("--async-ledger", action="store_true", help="the shared ledger's read on an async call")
    args = parser.parse_args(argv)
    if args.variant in ASYNC_VARIANTS:
        print(json.dumps(measure_async(args.variant, args.workload, args.calls)))
        return 0
    if args.variant:
        print(json.dumps(measure(args.variant, args.workload, args.calls)))
        return 0
    if args.async_ledger:
        sys.path.insert(0, str(HERE))
        from run import redis_server
        from worker import REDIS_URL_ENV

        with redis_server() as url:
            if url is None:
                print("redis-server is not installed", file=sys.stderr)
                return 1
            os.environ[REDIS_URL_ENV] = url
            added = rounds(ASYNC_VARIANTS, args)
        print(f"the read of a shared parent on an async call: {added['async_redis'] - added['async_local']:+.0f} µs")
        return 0
    added = rounds(VARIANTS, args)
    own, sdk = added["noop"], added["sdk"] - added["noop"]
    print(f"otel_responses' own code {own:+.0f} µs; the SDK's work for it {sdk:+.0f} µs")
    print(f"the telemetry contract alone (the SDK writing our span and recordings) {added['contract']:+.0f} µs")
    return 0


def rounds(variants: tuple[str, ...], args: argparse.Namespace) -> dict[str, float]:
    """Each variant in ``args.processes`` processes, in rounds; the median added time of each, printed with its
    range. One process's paired figure depends on the process (its memory layout: tens of µs on a stream): the
    median of several, each paired on its own, in rounds so that a slow minute of the machine hits every variant
    alike."""
    runs: dict[str, list[float]] = {variant: [] for variant in variants}
    for _ in range(max(1, args.processes)):
        for variant in variants:
            command = [sys.executable, __file__, "--variant", variant, "--workload", args.workload]
            done = subprocess.run([*command, "--calls", str(args.calls)], capture_output=True, text=True, check=True)
            runs[variant].append(json.loads(done.stdout)["added_us"])
    added = {variant: statistics.median(values) for variant, values in runs.items()}
    for variant, values in runs.items():
        spread = f" [{min(values):+.0f}…{max(values):+.0f} over {len(values)} processes]" if len(values) > 1 else ""
        print(f"{variant:11} {args.workload}: added {added[variant]:+.0f} µs per call (paired, median){spread}")
    return added


if __name__ == "__main__":
    sys.exit(main())
