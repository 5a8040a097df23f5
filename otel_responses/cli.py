"""The ``otel-responses`` command.

``demo``   runs every scripted scenario (each state mode done right, each context-losing mistake) against
           the built-in emulator and shows what the instrumentation saw.
``doctor`` runs the troubleshooting guide's minimal flow against the emulator or a real endpoint.

Exit codes: 0 all as expected; 1 a step failed or an outcome was unexpected; 2 bad usage; 3 the endpoint
could not be reached; 4 the endpoint refused the key.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, TextIO
from urllib.parse import urlsplit

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_REFUSED = 4


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port out of range: {port}")
    return port


def _url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r}")
    return text


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otel-responses", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run every scripted scenario against the built-in emulator")
    demo.add_argument("--spans", action="store_true", help="also print each span's openai_responses.* attributes")
    demo.add_argument("--console", action="store_true", help="print every span as the console exporter does")
    demo.add_argument("--otlp-endpoint", type=_url, metavar="URL", help="export traces and metrics over OTLP/HTTP")
    demo.add_argument(
        "--prometheus-port", type=_port, metavar="PORT", help="serve metrics for scraping on 127.0.0.1:PORT"
    )
    demo.add_argument("--serve", action="store_true", help="keep repeating the workload until interrupted")
    demo.add_argument("--interval", type=_positive, default=5.0, metavar="SECONDS", help="pause between rounds")
    doctor = commands.add_parser("doctor", help="the minimal troubleshooting flow, step by step")
    doctor.add_argument(
        "--base-url", type=_url, metavar="URL", help="a real endpoint (key from OPENAI_API_KEY); default: emulator"
    )
    doctor.add_argument("--model", default="gpt-5-mini", help="a reasoning model that supports function tools")
    return parser


def _demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .demo import Exporters, demo

    if args.interval != 5.0 and not args.serve:
        err.write("otel-responses demo: --interval only makes sense with --serve\n")
        return EXIT_USAGE
    stop = threading.Event()
    if args.serve:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        if args.prometheus_port:
            err.write(f"metrics on http://127.0.0.1:{args.prometheus_port}/metrics\n")
    exporters = Exporters(args.console, args.otlp_endpoint, args.prometheus_port)
    try:
        ok = demo(out, err, exporters, show_spans=args.spans, serve=args.serve, interval=args.interval, stop=stop)
    except OSError as error:  # a port already taken, say
        err.write(f"otel-responses demo: {error.strerror or error}\n")
        return EXIT_USAGE
    return EXIT_OK if ok else EXIT_FAILED


def _endpoint(base_url: str) -> str:
    """host:port only: a URL may carry credentials, and the path says nothing useful."""
    parts = urlsplit(base_url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def _doctor(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .doctor import Refused, Unreachable, diagnose
    from .emulator import Emulator
    from .instrumentor import ResponsesInstrumentor

    emulator: Emulator | None = None
    if args.base_url:
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            err.write("otel-responses doctor: set OPENAI_API_KEY to use --base-url\n")
            return EXIT_USAGE
        base_url, where = args.base_url, _endpoint(args.base_url)
    else:
        emulator = Emulator().start()
        base_url, key, where = emulator.base_url, "emulator-key", "the built-in emulator"
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    client: Any = openai.OpenAI(base_url=base_url, api_key=key, max_retries=1, timeout=60)
    out.write(f"otel-responses doctor: {where}, model {args.model}\n")
    try:
        results = diagnose(client, args.model, memory, out)
    except Unreachable as error:
        err.write(f"otel-responses doctor: cannot reach {where} ({error})\n")
        return EXIT_UNREACHABLE
    except Refused as error:
        err.write(f"otel-responses doctor: {where} refused the key ({error}); check OPENAI_API_KEY\n")
        return EXIT_REFUSED
    finally:
        instrumentor.uninstrument()
        client.close()
        if emulator is not None:
            emulator.stop()
    passed = sum(1 for r in results if r.check.passed and not r.signals)
    out.write(f"\n{passed} of {len(results)} steps passed\n")
    return EXIT_OK if passed == len(results) else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (see the module docstring)."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args, sys.stdout, sys.stderr)
    return _doctor(args, sys.stdout, sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
