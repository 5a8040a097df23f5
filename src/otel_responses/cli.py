"""The ``otel-responses`` command. ``demo`` runs every scripted scenario (each state mode done right,
each context-losing mistake) against the built-in emulator and shows what the instrumentation saw."""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from .scenarios import Transcript

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
_LOSS = ("error", "warning")


@dataclass
class Outcome:
    """One scenario's transcript and the signals its spans carried."""

    transcript: Transcript
    spans: Sequence[ReadableSpan]

    @property
    def signals(self) -> list[str]:
        names: list[str] = []
        for span in self.spans:
            for name in (span.attributes or {}).get("openai_responses.signals", ()):  # type: ignore[union-attr]
                if name not in names:
                    names.append(str(name))
        return names

    @property
    def as_expected(self) -> bool:
        """Healthy: every fact kept, no loss signal. Broken: each expected signal raised."""
        from .signals import CATALOGUE

        scenario = self.transcript.scenario
        if scenario.mistake is None:
            loss = [n for n in self.signals if CATALOGUE[n].severity in _LOSS]
            return not loss and self.transcript.error is None and all(self.transcript.remembered.values())
        return all(name in self.signals for name in scenario.raises)


def run_scenarios(progress: TextIO | None = None) -> list[Outcome]:
    """Run every scenario against a fresh emulator with the instrumentation on; spans kept per scenario."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .emulator import Emulator
    from .instrumentor import ResponsesInstrumentor
    from .scenarios import SCENARIOS, run

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    outcomes: list[Outcome] = []
    try:
        with Emulator() as emulator:
            for number, scenario in enumerate(SCENARIOS, 1):
                if progress is not None:
                    progress.write(f"\r[{number}/{len(SCENARIOS)}] {scenario.name:<40}")
                    progress.flush()
                exporter.clear()
                transcript = run(emulator.client(), scenario, f"MK-{secrets.token_hex(3)}")
                outcomes.append(Outcome(transcript, exporter.get_finished_spans()))
    finally:
        instrumentor.uninstrument()
        if progress is not None:
            progress.write("\r" + " " * 60 + "\r")
    return outcomes


def _facts(transcript: Transcript) -> str:
    if transcript.error is not None:
        return f"API error ({transcript.error})"
    lost = [fact for fact, kept in transcript.remembered.items() if not kept]
    return "all kept" if not lost else "lost: " + ", ".join(lost)


def _print_table(out: TextIO, outcomes: list[Outcome]) -> None:
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


def _print_spans(out: TextIO, outcomes: list[Outcome]) -> None:
    for o in outcomes:
        out.write(f"\n== {o.transcript.scenario.name}: {o.transcript.scenario.summary}\n")
        for number, span in enumerate(o.spans, 1):
            out.write(f"  span {number}: {span.name}\n")
            for key, value in sorted((span.attributes or {}).items()):
                if key.startswith("openai_responses."):
                    shown = ", ".join(map(str, value)) if isinstance(value, tuple) else value
                    out.write(f"    {key:<50} {shown}\n")


def _demo(out: TextIO, err: TextIO, show_spans: bool) -> int:
    outcomes = run_scenarios(progress=err if err.isatty() else None)
    if show_spans:
        _print_spans(out, outcomes)
        out.write("\n")
    _print_table(out, outcomes)
    unexpected = [o.transcript.scenario.name for o in outcomes if not o.as_expected]
    if unexpected:
        out.write(f"\nunexpected outcomes: {', '.join(unexpected)}\n")
        return EXIT_FAILED
    out.write("\nevery healthy session kept its context; every mistake was named by its signal\n")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otel-responses", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run every scripted scenario against the built-in emulator")
    demo.add_argument("--spans", action="store_true", help="also print each span's openai_responses.* attributes")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 an outcome was not as expected, 2 bad usage)."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return _demo(sys.stdout, sys.stderr, args.spans)
    return EXIT_USAGE  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
