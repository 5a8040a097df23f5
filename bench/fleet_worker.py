"""A fleet worker process: the real OpenTelemetry SDK and instrumentation, serving turns from its own queue.

Spawned by ``fleet_dispatch.Fleet``; it reports each turn's outcome, the signals its spans carried and its wall
time, and at the end the shared ledger's stats.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

UNAVAILABLE = "openai_responses.ledger.unavailable"


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
