"""The `otel-responses` command: argument parsing, the checks made before any work, and exit codes.

The help text is written here in plain words, not taken from docstrings: argparse prints it as it is.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TextIO
from urllib.parse import urlsplit

from ..docs_links import DOCS_URL, NotASite, check_site
from ..version import __version__, install_hint
from .exit_codes import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MISSING_EXTRA,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)

DESCRIPTION = """\
OpenTelemetry instrumentation for the OpenAI Responses API, from the command line: see it at
work against the built-in emulator, troubleshoot a lost context, set up the dashboard and the
alerts, read exported traces as one page, or serve the emulator for your own app. Each
command's --help says more.
"""

EPILOG = """\
exit codes: 0 all as expected; 1 a step failed or an outcome was unexpected (dashboards: a file
in DIR differs, so nothing was written, or DIR cannot be written; report: an INPUT could not be
read in full or FILE cannot be written; demo: --report FILE cannot be written); 2 bad usage
(doctor: no API at --base-url, which answered 404, a URL without /v1 say);
3 an endpoint (doctor's --base-url, demo's --otlp-endpoint) could not be reached or refused the export;
4 the endpoint refused the key; 5 a package of the 'cli' extra is missing
(the install command is named; demo and doctor only; report: a zstd INPUT needs the 'zstd'
extra); 130 interrupted by Ctrl-C
(demo --serve and emulator stop with 0; emulator: 2 its port is in use or out of range).
"""

DASHBOARDS_EPILOG = """\
exit codes: 0 written (or already there, the same); 1 a file in DIR differs (nothing is written;
--force replaces it) or DIR cannot be written; 2 bad usage; 130 interrupted by Ctrl-C.
It needs no extra: the package alone has the files.
"""

EXTRA = "cli"
REACH_TIMEOUT = 2.0  # seconds: a collector on the network answers a TCP connect well within this


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


def _site(text: str) -> str:
    try:
        return check_site(text)
    except NotASite as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def _name(text: str) -> str:
    """A name such as a model: an empty one would only fail later, as a confusing API error."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


class _Parser(argparse.ArgumentParser):
    """argparse's usage line and error, then where the help is (each command's parser is one of these too)."""

    commands: Mapping[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\nsee '{self.prog} --help'\n")


def _parser() -> _Parser:
    parser = _Parser(
        prog="otel-responses",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    # Not required: with no command the whole help is shown (argparse would say "arguments are required"). The
    # commands are listed once, there, each by its help.
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run every scripted scenario (each state mode done right, each context-losing mistake) against "
        "the built-in emulator and show what the instrumentation saw",
        description="Run every scripted scenario against the built-in emulator and print what the\n"
        "instrumentation saw. No network and no API key needed.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--spans", action="store_true", help="also print each span's openai_responses.* attributes")
    demo.add_argument("--console", action="store_true", help="print every span as the console exporter does")
    demo.add_argument(
        "--otlp-endpoint",
        type=_url,
        metavar="URL",
        help="export traces and metrics over OTLP/HTTP to URL/v1/traces and URL/v1/metrics (a URL given with"
        " either path is taken as its base)",
    )
    demo.add_argument(
        "--prometheus-port", type=_port, metavar="PORT", help="serve metrics for scraping on 127.0.0.1:PORT"
    )
    demo.add_argument(
        "--serve", action="store_true", help="keep repeating the workload until Ctrl-C or SIGTERM (exit 0)"
    )
    demo.add_argument("--interval", type=_positive, default=5.0, metavar="SECONDS", help="pause between rounds")
    demo.add_argument(
        "--report", type=_name, metavar="FILE", help="write the HTML report of the scenarios' conversations to FILE"
    )
    doctor = commands.add_parser(
        "doctor",
        help="run the minimal troubleshooting flow (one state mode per step) against the emulator or a real endpoint",
        description="Run the minimal troubleshooting flow for lost context, one state mode per step, and print\n"
        "PASS or FAIL with the signals seen and the fix.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    doctor.add_argument(
        "--base-url", type=_url, metavar="URL", help="a real endpoint (key from OPENAI_API_KEY); default: emulator"
    )
    doctor.add_argument(
        "--model", type=_name, default="gpt-5-mini", help="a reasoning model that supports function tools"
    )
    dashboards = commands.add_parser(
        "dashboards",
        help="write the Grafana dashboard and the Prometheus alert rules into a directory, and say how to import them",
        description="Write the Grafana dashboard (context-health.json), the Prometheus alert rules\n"
        "(otel-responses.rules.yaml) and their promtool unit tests into DIR, and print how to\n"
        "import them. Files already there and the same are left alone; a differing one stops it\n"
        "before anything is written, unless --force.",
        epilog=DASHBOARDS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dashboards.add_argument(
        "--out", required=True, type=_name, metavar="DIR", help="the directory to write into (created if need be)"
    )
    dashboards.add_argument("--force", action="store_true", help="replace files in DIR that differ")
    dashboards.add_argument(
        "--semconv",
        choices=("default", "latest"),
        default="default",
        help="the GenAI conventions your services emit: latest (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_"
        "experimental) writes context-health.latest.json instead (default: %(default)s)",
    )
    dashboards.add_argument(
        "--docs-url",
        type=_site,
        default=DOCS_URL,
        metavar="URL",
        help="where your copy of the documentation is: the alerts' runbook links and the dashboard's link lead "
        "there (default: %(default)s)",
    )
    from .report.command import add_parser

    add_parser(commands)
    # Its arguments, --help included, are the emulator's own parser's (``emulator/__main__.py``): the emulator is
    # loaded only when it is run, not for every command's help.
    commands.add_parser(
        "emulator",
        help="serve the built-in Responses API emulator on 127.0.0.1 until Ctrl-C: point your app's base_url at "
        "the URL it prints",
        add_help=False,
    )
    parser.commands = commands.choices
    return parser


def _needed_modules(args: argparse.Namespace) -> list[str]:
    """What the command will import beyond the base install: all of it comes with the `cli` extra."""
    if args.command in ("dashboards", "report"):
        return []  # the standard library only
    modules = ["openai", "opentelemetry.sdk"]
    if getattr(args, "otlp_endpoint", None):
        modules.append("opentelemetry.exporter.otlp.proto.http")
    if getattr(args, "prometheus_port", None) is not None:
        modules += ["opentelemetry.exporter.prometheus", "prometheus_client"]
    return modules


def _missing_module(modules: Sequence[str]) -> str | None:
    """The first module that cannot be imported, checked before any work so the user gets advice, not a traceback."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            return error.name or module
    return None


def _endpoint(base_url: str) -> str:
    """host:port only: a URL may carry credentials, and the path says nothing useful."""
    parts = urlsplit(base_url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


OTLP_SIGNAL_PATHS = ("/v1/traces", "/v1/metrics")


def _otlp_base(url: str) -> tuple[str, str | None]:
    """The base URL the signal paths are appended to (as OTEL_EXPORTER_OTLP_ENDPOINT is), and the signal path
    dropped from it: a signal's own URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT's form) would be posted to at
    .../v1/traces/v1/traces otherwise."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for signal_path in OTLP_SIGNAL_PATHS:
        if path.endswith(signal_path):
            return parts._replace(path=path.removesuffix(signal_path)).geturl(), signal_path
    return url, None


def _no_api_hint(base_url: str) -> str:
    """What to do about a base URL with no Responses API behind it, credentials left out of the URL named."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if "v1" not in path.split("/"):
        fixed = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{path}/v1"
        return f"the URL's path lacks /v1; give --base-url {fixed}"
    return "no Responses API at this URL; give --base-url the URL an OpenAI client takes as its base_url"


def _unreachable(url: str, timeout: float = REACH_TIMEOUT) -> str | None:
    """Why a TCP connection to the URL's host and port fails, or None: checked up front, because the OTLP
    exporters would otherwise retry for seconds in the background and the run would still end in success."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g}s"
    except OSError as error:
        return error.strerror or type(error).__name__


def _stop_on_signals(stop: threading.Event) -> None:
    """Ctrl-C and SIGTERM set `stop`, which the demo checks between scenarios; a second signal acts as usual."""

    def handler(signum: int, _frame: Any) -> None:
        stop.set()
        for each in (signal.SIGINT, signal.SIGTERM):
            signal.signal(each, signal.SIG_DFL if each == signal.SIGTERM else signal.default_int_handler)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)


def _demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.interval != 5.0 and not args.serve:
        err.write("otel-responses demo: --interval only makes sense with --serve\n")
        return EXIT_USAGE
    if args.report is not None and not os.path.isdir(os.path.dirname(os.path.abspath(args.report))):
        where = os.path.dirname(os.path.abspath(args.report))
        err.write(f"otel-responses demo: cannot write the report {where}: no such directory\n")
        return EXIT_FAILED  # said before the run, not after it
    stop = threading.Event()
    if args.serve:
        _stop_on_signals(stop)
    if args.otlp_endpoint:
        args.otlp_endpoint, dropped = _otlp_base(args.otlp_endpoint)
        if dropped is not None:
            where = _endpoint(args.otlp_endpoint) + urlsplit(args.otlp_endpoint).path
            err.write(
                f"otel-responses demo: --otlp-endpoint takes the base URL, so its {dropped} is dropped:"
                f" traces go to {where}/v1/traces, metrics to {where}/v1/metrics\n"
            )
        reason = _unreachable(args.otlp_endpoint)
        if reason is not None:
            where = _endpoint(args.otlp_endpoint)
            err.write(f"otel-responses demo: cannot reach the OTLP endpoint {where} ({reason})\n")
            return EXIT_UNREACHABLE
    from .demo import Exporters, MetricsPortUnavailable, ReportNotWritten, demo

    exporters = Exporters(args.console, args.otlp_endpoint, args.prometheus_port)
    try:
        ok = demo(
            out,
            err,
            exporters,
            show_spans=args.spans,
            serve=args.serve,
            interval=args.interval,
            stop=stop,
            report=args.report,
        )
    except ReportNotWritten as error:
        err.write(f"otel-responses demo: cannot write the report {error.filename}: {error.strerror or error}\n")
        return EXIT_FAILED
    except MetricsPortUnavailable as error:
        reason = "is in use" if error.errno == errno.EADDRINUSE else f"cannot be listened on ({error.strerror})"
        err.write(f"otel-responses demo: port {error.port} (--prometheus-port) {reason}\n")
        return EXIT_USAGE
    except OSError as error:
        err.write(f"otel-responses demo: {error.strerror or error}\n")
        return EXIT_USAGE
    if exporters.export_failed:
        where = _endpoint(args.otlp_endpoint)
        err.write(f"otel-responses demo: the OTLP endpoint {where} did not accept the spans (the reason is above)\n")
        return EXIT_UNREACHABLE
    return EXIT_OK if ok else EXIT_FAILED


def _doctor(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ..emulator import Emulator
    from ..instrumentor import ResponsesInstrumentor
    from .doctor import NoApi, Refused, Unreachable, diagnose

    emulator: Emulator | None = None
    if args.base_url:
        key = os.environ.get("OPENAI_API_KEY", "").strip()
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
    instrumentor.instrument(tracer_provider=provider, log_signals="off")  # the doctor names its signals itself
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
    except NoApi as error:
        err.write(f"otel-responses doctor: {where} answered 404 to {error}: {_no_api_hint(base_url)}\n")
        return EXIT_USAGE
    finally:
        instrumentor.uninstrument()
        client.close()
        if emulator is not None:
            emulator.stop()
    passed = sum(1 for r in results if r.check.passed and not r.signals)
    out.write(f"\n{passed} of {len(results)} steps passed\n")
    return EXIT_OK if passed == len(results) else EXIT_FAILED


def _dashboards(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pathlib import Path

    from .dashboard_files import NotShipped, WouldOverwrite, report, write

    where = Path(args.out).expanduser().absolute()
    try:
        done = write(where, force=args.force, docs_url=args.docs_url, semconv=args.semconv)
    except WouldOverwrite as error:
        err.write("otel-responses dashboards: nothing written; these files differ from the shipped ones:\n")
        err.writelines(f"  {path}\n" for path in error.paths)
        err.write("give --force to replace them, or --out another directory\n")
        return EXIT_FAILED
    except NotShipped as error:
        err.write(f"otel-responses dashboards: this install has no dashboard files ({error}); reinstall the package\n")
        return EXIT_FAILED
    except OSError as error:  # DIR is a file, not writable, ...
        name = f" {error.filename}" if error.filename else ""
        err.write(f"otel-responses dashboards: cannot write{name}: {error.strerror or error}\n")
        return EXIT_FAILED
    report(done, out)
    return EXIT_OK


def _quiet(unraisable: object) -> None:
    """Say nothing: the process is ending on the user's Ctrl-C."""


def _check_command(parser: _Parser, argv: Sequence[str]) -> None:
    """An unknown command is a usage error naming the nearest one (``reprot``: did you mean ``report``?)."""
    for arg in argv:
        if arg in ("-h", "--help", "-V", "--version"):
            return  # answered before any command is read
        if not arg.startswith("-"):
            if arg not in parser.commands:
                near = difflib.get_close_matches(arg, list(parser.commands), n=1, cutoff=0.6)
                hint = f"did you mean '{near[0]}'?" if near else f"choose from {', '.join(parser.commands)}"
                parser.error(f"unknown command '{arg}' ({hint})")
            return


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (see EPILOG)."""
    parser = _parser()
    _check_command(parser, sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(argv)
    if args.command == "emulator":
        from ..emulator.__main__ import main as serve

        return serve(unknown, prog="otel-responses emulator")
    if unknown:  # said by the command's own parser, whose usage line and help are the ones to read
        parser.commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    missing = _missing_module(_needed_modules(args))
    if missing is not None:
        sys.stderr.write(
            f"otel-responses {args.command}: the module {missing!r} is missing; it comes with the '{EXTRA}' extra:\n"
            f"  {install_hint(EXTRA)}\n"
        )
        return EXIT_MISSING_EXTRA
    try:
        if args.command == "demo":
            return _demo(args, sys.stdout, sys.stderr)
        if args.command == "dashboards":
            return _dashboards(args, sys.stdout, sys.stderr)
        if args.command == "report":
            from .report.command import run

            return run(args, sys.stdout, sys.stderr)
        return _doctor(args, sys.stdout, sys.stderr)
    except KeyboardInterrupt:  # Ctrl-C in a one-off run: a line, not a traceback
        sys.stderr.write(f"otel-responses {args.command}: interrupted\n")
        # An object the interrupt caught half-built (an HTTP client, say) complains when collected at exit.
        sys.unraisablehook = _quiet
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
