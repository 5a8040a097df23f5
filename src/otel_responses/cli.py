"""The ``otel-responses`` command. ``demo`` runs a three-turn session in each state mode against the
built-in emulator and prints what the instrumentation recorded on each span."""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _demo(out: TextIO) -> int:
    """Every state mode done right; the model must still know the marker, the tool result and the rules."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .emulator import Emulator
    from .instrumentor import ResponsesInstrumentor
    from .scenarios import SESSIONS

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    failed = False
    try:
        with Emulator() as emulator:
            out.write(f"emulator on {emulator.base_url}\n")
            for mode, session in SESSIONS.items():
                exporter.clear()
                transcript = session(emulator.client(), f"MK-{secrets.token_hex(3)}")
                known = transcript.remembered
                failed |= not all(known.values())
                summary = ", ".join(f"{fact} {'kept' if ok else 'LOST'}" for fact, ok in known.items())
                out.write(f"\n== {mode}: {summary}\n")
                _print_spans(out, exporter.get_finished_spans())
    finally:
        instrumentor.uninstrument()
    out.write("\nall facts kept in every state mode\n" if not failed else "\nsome facts were lost\n")
    return EXIT_FAILED if failed else EXIT_OK


_COLUMNS = (
    ("state.mode", "state mode", 14),
    ("store", "store", 6),
    ("instructions.hash", "instr. hash", 17),
    ("reasoning.encrypted_requested", "enc.req", 8),
    ("reasoning.encrypted_input_count", "enc.in", 7),
    ("reasoning.encrypted_output_count", "enc.out", 8),
    ("compaction", "compact", 8),
)


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return "-" if value is None else str(value)


def _print_spans(out: TextIO, spans: Sequence[ReadableSpan]) -> None:
    """One row per span: the context-state attributes, then the item types in and out."""
    out.write("  # " + "".join(f"{title:<{width}}" for _, title, width in _COLUMNS) + "input items -> output items\n")
    for number, span in enumerate(spans, 1):
        attrs = span.attributes or {}
        row = "".join(f"{_cell(attrs.get('openai_responses.' + key)):<{width}}" for key, _, width in _COLUMNS)
        items_in = _cell(attrs.get("openai_responses.input.item_types"))
        items_out = _cell(attrs.get("openai_responses.output.item_types"))
        out.write(f"  {number} {row}{items_in} -> {items_out}\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otel-responses", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="run a three-turn session per state mode against the emulator")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 a check failed, 2 bad usage)."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return _demo(sys.stdout)
    return EXIT_USAGE  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
