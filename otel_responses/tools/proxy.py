"""``otel-responses proxy``: the forwarding proxy as a command. Its options, the exporters (the demo's), the checks made
before it listens, and the startup a script can read: the base URL for clients on the first line of standard output
(and, with ``--port-file``, the bound port in a file) once it listens; ``--listen 127.0.0.1:0`` takes a free port.

Every instrumentation setting comes from the environment, as for ``opentelemetry-instrument``
(``OTEL_INSTRUMENTATION_OPENAI_RESPONSES_*``: strict mode, the shared ledger of several replicas, ...). Building the
command's options imports the standard library only.

Two processes: this one relays (it listens, forwards, and answers signals), a worker records (its exporters, the
ledger and the analysis live there: :func:`worker_telemetry` builds them), so that no client waits for another's
analysis and the analysis has a core of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Final, TextIO

from .arguments import missing_module, otlp_base, port, positive, positive_count, unreachable, url
from .exit_codes import EXIT_FAILED, EXIT_MISSING_EXTRA, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE

if TYPE_CHECKING:
    from collections.abc import Callable


NAME: Final = "proxy"
EXTRA: Final = "proxy"
PREFIX: Final = "otel-responses proxy"

DESCRIPTION: Final = """\
Forward every request to one upstream and record each Responses API call through it as the
in-process instrumentation does: the same spans, metrics and signals, for an app in any language.
Point the app's base URL at the URL this prints on standard output (the proxy's origin and the
upstream's path, e.g. http://127.0.0.1:8787/v1). What the app receives is what the upstream sent.
Instrumentation settings (strict mode, the shared ledger, ...) come from the environment
(OTEL_INSTRUMENTATION_OPENAI_RESPONSES_*). Ctrl-C or SIGTERM stops it; in-flight requests and
streams get --grace seconds to finish.
"""

EPILOG: Final = """\
exit codes: 0 stopped by Ctrl-C or SIGTERM; 2 bad usage (an --upstream or --listen it will not
use, a port in use); 3 the --otlp-endpoint could not be reached; 5 a package of the 'proxy' extra
is missing (the install command is named).
"""


def add_parser(commands: Any) -> None:
    """Register the subcommand on the ``otel-responses`` parser's subcommands."""
    parser = commands.add_parser(
        NAME,
        help="forward an app's Responses API traffic to its upstream and record it",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--upstream", default="https://api.openai.com/v1", metavar="URL", help="where to forward (default: %(default)s)"
    )
    parser.add_argument(
        "--listen",
        default="127.0.0.1:8787",
        metavar="HOST:PORT",
        help="where to listen (default: %(default)s; port 0: a free one; another host than loopback is said aloud)",
    )
    parser.add_argument(
        "--allow-http-upstream",
        action="store_true",
        help="allow a plain-http --upstream off loopback (the clients' keys would travel unencrypted)",
    )
    parser.add_argument("--port-file", metavar="FILE", help="write the bound port into FILE once listening")
    parser.add_argument("--console", action="store_true", help="print every span as the console exporter does")
    parser.add_argument(
        "--otlp-endpoint",
        type=url,
        metavar="URL",
        help="export traces, metrics and the signals' log events over OTLP/HTTP to URL/v1/traces, /v1/metrics and"
        " /v1/logs",
    )
    parser.add_argument(
        "--prometheus-port", type=port, metavar="PORT", help="serve metrics for scraping on 127.0.0.1:PORT"
    )
    parser.add_argument(
        "--max-body-bytes",
        type=positive_count,
        metavar="N",
        help="refuse larger request bodies with a 413 (default 64 MiB)",
    )
    parser.add_argument(
        "--max-analysed-bytes",
        type=positive_count,
        metavar="N",
        help="forward a longer body unanalysed, counted (default 16 MiB; strict mode analyses it all the same)",
    )
    parser.add_argument("--connect-timeout", type=positive, metavar="S", help="upstream connect timeout (10)")
    parser.add_argument(
        "--read-timeout", type=positive, metavar="S", help="longest wait for the upstream's next bytes (600)"
    )
    parser.add_argument(
        "--idle-timeout",
        type=positive,
        metavar="S",
        help="close a client connection idle this long, or whose request head or body stalls (75)",
    )
    parser.add_argument(
        "--grace", type=positive, metavar="S", help="how long in-flight requests get after Ctrl-C or SIGTERM (30)"
    )


def _needed(args: argparse.Namespace) -> list[str]:
    modules = ["aiohttp", "openai", "opentelemetry.sdk"]
    if args.otlp_endpoint:
        modules.append("opentelemetry.exporter.otlp.proto.http")
    if args.prometheus_port is not None:
        modules += ["opentelemetry.exporter.prometheus", "prometheus_client"]
    return modules


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Check, start, serve until Ctrl-C or SIGTERM, stop gracefully; the exit code (see EPILOG)."""
    from ..version import install_hint

    missing = missing_module(_needed(args))
    if missing is not None:
        err.write(
            f"{PREFIX}: the module {missing!r} is missing; it comes with the '{EXTRA}' extra:\n"
            f"  {install_hint(EXTRA)}\n"
        )
        return EXIT_MISSING_EXTRA
    from ..proxy.settings import LIMITS, ProxySettings, ProxySettingsError, listen_of, upstream_of

    try:
        host, port = listen_of(args.listen)
        options = {name: getattr(args, name) for name in LIMITS if getattr(args, name) is not None}
        settings = ProxySettings(upstream_of(args.upstream, args.allow_http_upstream), host, port, **options)
    except ProxySettingsError as error:
        err.write(f"{PREFIX}: {error}\n")
        return EXIT_USAGE
    if args.otlp_endpoint:
        args.otlp_endpoint, _ = otlp_base(args.otlp_endpoint)
        reason = unreachable(args.otlp_endpoint)
        if reason is not None:
            err.write(f"{PREFIX}: cannot reach the OTLP endpoint ({reason})\n")
            return EXIT_UNREACHABLE
    options = {
        "console": args.console,
        "otlp_endpoint": args.otlp_endpoint,
        "prometheus_port": args.prometheus_port,
        "service_name": os.environ.get("OTEL_SERVICE_NAME") or "otel-responses-proxy",
    }
    return asyncio.run(_serve(settings, options, args, out, err))


def worker_runtime(options: dict[str, Any]) -> tuple[Any, Callable[[], None]]:
    """In the worker process: the runtime the proxy records with (the demo's exporters, the signals' log events
    beside them), and what flushes and closes it all (the ledger too) once the relay is done."""
    from .._calls.runtime import runtime_for
    from ..proxy.analyst import AnalysisUnavailable
    from .demo import Exporters, MetricsPortUnavailable

    exporters = Exporters(
        options["console"],
        options["otlp_endpoint"],
        options["prometheus_port"],
        service_name=options["service_name"],
        in_memory=False,
    )
    try:
        tracer_provider, meter_provider, _ = exporters.providers(sys.stdout)
    except MetricsPortUnavailable as error:
        reason = "is in use" if error.errno == errno.EADDRINUSE else f"cannot be listened on ({error.strerror})"
        raise AnalysisUnavailable(f"port {error.port} (--prometheus-port) {reason}", EXIT_USAGE) from None
    logger_provider = _logs(options["otlp_endpoint"], tracer_provider.resource)
    runtime = runtime_for({}, tracer_provider, meter_provider, logger_provider)

    def close() -> None:
        ledger_close = getattr(runtime.ledger, "close", None)
        if callable(ledger_close):
            ledger_close()
        exporters.shutdown()
        if logger_provider is not None:
            logger_provider.shutdown()

    return runtime, close


def _logs(otlp_endpoint: str | None, resource: Any) -> Any:
    """Where the signals' log events go (``gen_ai.evaluation.result``, ``gen_ai.client.operation.exception``): to
    ``URL/v1/logs`` beside the spans and metrics, from the same service (``resource``: the tracer provider's);
    without an OTLP endpoint, nowhere (the global provider's)."""
    if not otlp_endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{otlp_endpoint}/v1/logs")))
    return provider


async def _serve(settings: Any, options: dict[str, Any], args: Any, out: TextIO, err: TextIO) -> int:
    from ..proxy.analyst import AnalysisProcess, AnalysisUnavailable
    from ..proxy.server import Proxy
    from ..proxy.worker import tune_collector

    proxy = Proxy(settings, analyst=AnalysisProcess(settings, f"{__name__}:worker_runtime", options))
    try:
        await proxy.start()
    except AnalysisUnavailable as error:
        err.write(f"{PREFIX}: {error}\n")
        return error.exit_code
    except OSError as error:
        where = f"{settings.host}:{settings.port}"
        reason = "is in use" if error.errno == errno.EADDRINUSE else f"cannot be listened on ({error.strerror})"
        err.write(f"{PREFIX}: {where} (--listen) {reason}\n")
        return EXIT_USAGE
    tune_collector()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    lost = proxy.channel.lost if proxy.channel is not None else loop.create_future()
    code = EXIT_OK
    try:
        _announce(proxy, args, out, err)
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait([stopped, lost], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if lost.done() and not stop.is_set():  # the worker died: a proxy that records nothing must not go on
            err.write(f"{PREFIX}: the analysis worker exited; stopping\n")
            code = EXIT_FAILED
        else:
            err.write(f"{PREFIX}: stopping; in-flight requests get {settings.grace:g}s to finish\n")
        err.flush()
    finally:
        await proxy.stop()
    return code


def _announce(proxy: Any, args: Any, out: TextIO, err: TextIO) -> None:
    """The base URL on standard output (a script's one line to read), the port in ``--port-file``, what it does on
    standard error."""
    settings = proxy.settings
    if args.port_file:
        temporary = f"{args.port_file}.tmp"
        with open(temporary, "w") as file:
            file.write(f"{proxy.port}\n")
        os.replace(temporary, args.port_file)  # a reader never sees a half-written file
    out.write(proxy.base_url + "\n")
    out.flush()
    strict = "on" if proxy.strict else "off"
    err.write(f"{PREFIX}: forwarding to {settings.upstream.url} (strict mode {strict}); Ctrl-C or SIGTERM stops it\n")
    if not settings.loopback_only:
        err.write(
            f"{PREFIX}: listening on {settings.host}, not loopback: other machines can reach it and send requests "
            f"through it to {settings.upstream.origin}\n"
        )
    if not (args.console or args.otlp_endpoint or args.prometheus_port is not None):
        err.write(f"{PREFIX}: no exporter: give --otlp-endpoint, --prometheus-port or --console to see the calls\n")
    err.flush()
