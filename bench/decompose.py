"""Where otel_responses' added time goes, in place: its own code against the OpenTelemetry SDK's work.

    .venv/bin/python bench/decompose.py [--workload short] [--calls 3000]

One process per variant (run one after the other), each alternating calls with and without the instrumentation
call by call (the paired method of ``run.py``: the call without goes through the wrapper's ``__wrapped__``):

- ``span``: a wrapt wrapper that only opens and ends one CLIENT span, the floor of any tracing instrumentation;
- ``noop``: otel_responses with no-op tracer and meter providers: its own Python (facts, checks, ledger) only;
- ``sdk``: otel_responses with the SDK providers, as in ``run.py``.

``sdk - noop`` is what the SDK spends on our span, its ~30 attributes and our metric recordings. Whole-call
times: meant for ``short`` (a replay's time is dominated by the SDK's own request transform; ``run.py`` nets it
out).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VARIANTS = ("span", "noop", "sdk")


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
    return {
        "variant": variant,
        "workload": workload,
        "calls": calls,
        "added_us": (statistics.median(on) - statistics.median(off)) / 1e3,
        "without_median_us": statistics.median(off) / 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="short")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--variant", choices=VARIANTS, help="measure one variant in this process (internal)")
    args = parser.parse_args(argv)
    if args.variant:
        print(json.dumps(measure(args.variant, args.workload, args.calls)))
        return 0
    results = []
    for variant in VARIANTS:
        command = [
            sys.executable,
            __file__,
            "--variant",
            variant,
            "--workload",
            args.workload,
            "--calls",
            str(args.calls),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout))
    for row in results:
        print(f"{row['variant']:5} {row['workload']}: added {row['added_us']:+.0f} µs per call (paired, median)")
    added = {row["variant"]: row["added_us"] for row in results}
    own, sdk = added["noop"], added["sdk"] - added["noop"]
    print(f"otel_responses' own code {own:+.0f} µs; the SDK's work for it {sdk:+.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
