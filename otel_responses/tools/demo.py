"""The demo: every scripted scenario against the built-in emulator, with the instrumentation on, and a
table of what it saw. Exporters (console, OTLP, Prometheus) are optional extras of the same run."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from ..attributes import PREFIX, SIGNALS
from ..signals import CATALOGUE, LOSS_SEVERITIES
from .scenarios import SCENARIOS, Transcript, run

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


@dataclass
class Outcome:
    """One scenario's transcript and the signals its spans carried."""

    transcript: Transcript
    spans: Sequence[ReadableSpan]

    @property
    def signals(self) -> list[str]:
        names: list[str] = []
        for span in self.spans:
            raised: Any = (span.attributes or {}).get(SIGNALS, ())
            names.extend(str(name) for name in raised if name not in names)
        return names

    @property
    def as_expected(self) -> bool:
        """Each expected signal raised; healthy sessions also keep every fact and raise no loss signal."""
        scenario = self.transcript.scenario
        raised = all(name in self.signals for name in scenario.raises)
        if scenario.mistake is None:
            loss = [n for n in self.signals if CATALOGUE[n].severity in LOSS_SEVERITIES]
            kept = self.transcript.error is None and all(self.transcript.remembered.values())
            return raised and not loss and kept
        return raised


class ReportNotWritten(OSError):
    """The ``--report`` file could not be written (the demo itself ran)."""


class MetricsPortUnavailable(OSError):
    """The ``--prometheus-port`` cannot be listened on (in use, say); nothing has run yet."""

    def __init__(self, port: int, error: OSError) -> None:
        super().__init__(error.errno, error.strerror)
        self.port = port


def write_report(path: str, outcomes: list[Outcome]) -> None:
    """The report page of one round: each scenario's conversation captioned with the scenario's name."""
    from .report import Options, labels, write_sdk_spans

    named = [(o.transcript.scenario.name, o.spans) for o in outcomes]
    options = Options(title="otel-responses demo", labels=labels(named))
    try:
        write_sdk_spans([span for o in outcomes for span in o.spans], path, options)
    except OSError as error:
        raise ReportNotWritten(error.errno, error.strerror, error.filename or path) from error


class _Watched:
    """A span exporter that remembers whether an export failed: the OTLP exporter only logs it, so a run against an
    endpoint that answers but rejects the export (a wrong port or path) would otherwise end in success."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter
        self.failed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self._exporter.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failed = True
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


@dataclass
class Exporters:
    """Where the demo's telemetry goes besides the table."""

    console: bool = False
    otlp_endpoint: str | None = None
    prometheus_port: int | None = None
    service_name: str = "otel-responses-demo"
    in_memory: bool = True  # the demo's table reads the spans back; a long-running proxy keeps none
    _shutdown: list[Any] = field(default_factory=list)
    _watched: list[_Watched] = field(default_factory=list)

    @property
    def export_failed(self) -> bool:
        """Whether the OTLP endpoint refused spans (final once the providers are shut down)."""
        return any(w.failed for w in self._watched)

    def providers(self, out: TextIO) -> tuple[Any, Any, Any]:
        """Tracer provider (with an in-memory exporter for the table, unless ``in_memory`` is off), meter provider,
        in-memory exporter (or None)."""
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        resource = Resource.create({"service.name": self.service_name})
        memory = InMemorySpanExporter() if self.in_memory else None
        tracer_provider = TracerProvider(resource=resource)
        if memory is not None:
            tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
        readers: list[Any] = []
        if self.console:
            tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
        if self.otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            base = self.otlp_endpoint.rstrip("/")
            watched = _Watched(OTLPSpanExporter(endpoint=f"{base}/v1/traces"))
            self._watched.append(watched)
            tracer_provider.add_span_processor(BatchSpanProcessor(watched))  # type: ignore[arg-type]
            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{base}/v1/metrics"), 5000))
        if self.prometheus_port is not None:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import start_http_server

            try:
                started = start_http_server(self.prometheus_port, addr="127.0.0.1")
            except OSError as error:
                raise MetricsPortUnavailable(self.prometheus_port, error) from error
            readers.append(PrometheusMetricReader())
            if isinstance(started, tuple):  # prometheus_client >= 0.17 returns (server, thread)
                self._shutdown.append(started[0].shutdown)
        meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        self._shutdown += [tracer_provider.shutdown, meter_provider.shutdown]
        return tracer_provider, meter_provider, memory

    def shutdown(self) -> None:
        for close in reversed(self._shutdown):
            with contextlib.suppress(Exception):  # best effort at exit
                close()


def run_scenarios(
    tracer_provider: Any,
    meter_provider: Any,
    memory: Any,
    progress: TextIO | None = None,
    stop: threading.Event | None = None,
) -> list[Outcome]:
    """Run every scenario once against a fresh emulator with the instrumentation on; `stop` ends the round
    after the current scenario (each takes a fraction of a second), so Ctrl-C need not wait for the round."""
    from ..emulator import Emulator
    from ..instrumentor import ResponsesInstrumentor

    instrumentor = ResponsesInstrumentor()
    # The demo prints each scenario's signals itself: no console line beside its table.
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, log_signals="off")
    outcomes: list[Outcome] = []
    try:
        with Emulator() as emulator:
            for number, scenario in enumerate(SCENARIOS, 1):
                if stop is not None and stop.is_set():
                    break
                if progress is not None:
                    progress.write(f"[{number}/{len(SCENARIOS)}] {scenario.name}\n")
                    progress.flush()
                memory.clear()
                transcript = run(emulator.client(), scenario, f"MK-{secrets.token_hex(3)}")
                outcomes.append(Outcome(transcript, memory.get_finished_spans()))
    finally:
        instrumentor.uninstrument()
    return outcomes


def _facts(transcript: Transcript) -> str:
    if transcript.error is not None:
        return f"API error ({transcript.error})"
    lost = [fact for fact, kept in transcript.remembered.items() if not kept]
    return "all kept" if not lost else "lost: " + ", ".join(lost)


def print_table(out: TextIO, outcomes: list[Outcome]) -> None:
    rows = [("scenario", "state mode", "signals raised", "the model still knew", "as expected")]
    for o in outcomes:
        scenario = o.transcript.scenario
        rows.append(
            (
                scenario.name,
                scenario.mode,
                ", ".join(o.signals) or "-",
                _facts(o.transcript),
                "ok" if o.as_expected else "UNEXPECTED",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        out.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n")
        if index == 0:
            out.write("  ".join("-" * width for width in widths) + "\n")


def print_spans(out: TextIO, outcomes: list[Outcome]) -> None:
    for o in outcomes:
        out.write(f"\n== {o.transcript.scenario.name}: {o.transcript.scenario.summary}\n")
        for number, span in enumerate(o.spans, 1):
            out.write(f"  span {number}: {span.name}\n")
            for key, value in sorted((span.attributes or {}).items()):
                if key.startswith(PREFIX):
                    shown = ", ".join(map(str, value)) if isinstance(value, tuple) else value
                    out.write(f"    {key:<50} {shown}\n")


METRICS_HINT = "give --serve to keep serving them for a scraper"
_WAKE_EVERY_SECONDS = 0.2


def _paused_until_stopped(stop: threading.Event, seconds: float) -> bool:
    """Wait up to `seconds`; True when `stop` was set. In slices: a signal the kernel hands to another thread
    does not wake the main thread's lock wait, so one long wait would sleep through Ctrl-C or SIGTERM."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if stop.wait(min(left, _WAKE_EVERY_SECONDS)):
            return True
    return stop.is_set()


def demo(
    out: TextIO,
    progress: TextIO,
    exporters: Exporters,
    *,
    show_spans: bool = False,
    serve: bool = False,
    interval: float = 5.0,
    stop: threading.Event | None = None,
    report: str | None = None,
) -> bool:
    """Run the workload (repeatedly with `serve`, until `stop` is set); True when every outcome was as expected.
    ``report``: where to write the HTML report of the first round."""
    tracer_provider, meter_provider, memory = exporters.providers(out)
    if exporters.prometheus_port is not None:
        url = f"http://127.0.0.1:{exporters.prometheus_port}/metrics"
        # Without --serve the process exits after its one round (seconds): too soon for a scraper.
        progress.write(f"metrics on {url}\n" if serve else f"metrics on {url} until this run ends; {METRICS_HINT}\n")
        progress.flush()
    stop = stop or threading.Event()
    ok = True
    rounds = 0
    try:
        while True:
            outcomes = run_scenarios(tracer_provider, meter_provider, memory, progress, stop)
            if stop.is_set():  # an interrupted round is incomplete: neither shown nor judged
                break
            rounds += 1
            ok = ok and all(o.as_expected for o in outcomes)
            if rounds == 1:
                if show_spans:
                    print_spans(out, outcomes)
                    out.write("\n")
                print_table(out, outcomes)
                unexpected = [o.transcript.scenario.name for o in outcomes if not o.as_expected]
                if unexpected:
                    out.write(f"\nunexpected outcomes: {', '.join(unexpected)}\n")
                else:
                    out.write("\nevery healthy session kept its context; every mistake was named by its signal\n")
                out.flush()
                if report is not None:
                    write_report(report, outcomes)
                    progress.write(f"report of the scenarios' conversations: {report}\n")
                    progress.flush()
            if not serve:
                break
            progress.write(f"round {rounds} done; next in {interval:g}s (Ctrl-C to stop)\n")
            progress.flush()
            if _paused_until_stopped(stop, interval):
                break
    finally:
        exporters.shutdown()
    return ok
