"""A pytest kit for regression tests of apps that use the Responses API: the emulator, clients for it, the
instrumentation captured in memory, and assertions that name the lost context and its fix.

Registered as the pytest plugin ``otel_responses`` (entry point group ``pytest11``), so its fixtures are there in
every test session of a project that installs ``otel-responses``. Importing this module is cheap and needs neither
``openai`` nor ``opentelemetry-sdk``: they, and the emulator, are imported only when a fixture or function is used.

Fixtures: ``responses_emulator`` (session), ``responses_client``, ``responses_async_client``,
``responses_telemetry``. Functions: ``capture()``, ``assert_no_context_loss()``, ``assert_signal()``,
``assert_no_signal()``, ``assert_no_reasoning_withheld()``. When one of these assertions fails, the test's spans are
written as an HTML report of its conversations (under the test's ``tmp_path``, or ``--otel-responses-report-dir``)
and the failure names the file; ``--otel-responses-report=all`` writes one for every test that captured spans,
``off`` none.
"""

from __future__ import annotations

import difflib
import inspect
import re
import tempfile
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import pytest

from . import attributes as _attr
from .signals import CATALOGUE, LOSS_SEVERITIES, Signal

if TYPE_CHECKING:
    import openai
    from opentelemetry._logs import LogRecord
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .emulator import Emulator

__all__ = [
    "CapturedTelemetry",
    "Spans",
    "assert_no_context_loss",
    "assert_no_reasoning_withheld",
    "assert_no_signal",
    "assert_signal",
    "capture",
    "responses_async_client",
    "responses_client",
    "responses_emulator",
    "responses_telemetry",
]

_SDK_HINT = "pip install opentelemetry-sdk"
_TURN_BOUNDARY = "turn_boundary"
_OPENAI_HINT = "pip install 'openai>=1.101.0'"


@dataclass(repr=False)
class CapturedTelemetry:
    """What the instrumentation exported, read through the real OpenTelemetry SDK (in memory)."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    # The log events (`gen_ai.evaluation.result`, `gen_ai.client.operation.exception`): see `events()`.
    log_exporter: InMemoryLogRecordExporter | None = None
    logger_provider: LoggerProvider | None = None

    @classmethod
    def new(cls) -> CapturedTelemetry:
        """Fresh providers with an in-memory span exporter, metric reader and log exporter, not yet given to the
        instrumentation (``capture()`` does that)."""
        try:
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        except ImportError as exc:
            raise ImportError(f"capturing telemetry needs the OpenTelemetry SDK: {_SDK_HINT}") from exc
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader])
        log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
        return cls(exporter, reader, tracer_provider, meter_provider, log_exporter, logger_provider)

    def spans(self) -> list[ReadableSpan]:
        """Every finished span, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def chat_spans(self) -> list[ReadableSpan]:
        """Spans of create/parse calls only (``gen_ai.operation.name`` ``chat``; conversations.create and the
        like make spans of their own)."""
        return [s for s in self.spans() if (s.attributes or {}).get(_attr.GEN_AI_OPERATION_NAME) == "chat"]

    def only_span(self) -> ReadableSpan:
        """The single finished span; an ``AssertionError`` naming the spans when there is not exactly one."""
        spans = self.spans()
        if len(spans) != 1:
            raise AssertionError(f"expected exactly one span, got {len(spans)}: {[s.name for s in spans]}")
        return spans[0]

    def metric_points(self, name: str) -> list[Any]:
        """The data points of metric ``name`` collected so far (cumulative since ``capture()`` began)."""
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        if data is None:
            return points
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points

    def signals(self) -> list[str]:
        """The names of the signals raised, span by span in the order the spans ended."""
        return [name for span in self.spans() for name in _signals_of(span)]

    def events(self, name: str | None = None) -> list[LogRecord]:
        """The log events emitted, in order: each a ``LogRecord`` with its ``event_name``, ``attributes``,
        ``severity_number`` and the ``trace_id`` and ``span_id`` of the call's span; only those named ``name``
        (``gen_ai.evaluation.result``, ``gen_ai.client.operation.exception``) if given."""
        if self.log_exporter is None:
            return []
        records = [finished.log_record for finished in self.log_exporter.get_finished_logs()]
        return [r for r in records if r.event_name == name] if name is not None else records

    def clear(self) -> None:
        """Forget the spans and log events finished so far (metrics stay cumulative: SDK readers cannot be reset)."""
        self.exporter.clear()
        if self.log_exporter is not None:
            self.log_exporter.clear()

    def __repr__(self) -> str:
        spans = self.spans()
        return f"<CapturedTelemetry: {len(spans)} span(s), signals {[n for s in spans for n in _signals_of(s)]}>"


@contextmanager
def capture(**instrument_options: Any) -> Iterator[CapturedTelemetry]:
    """The instrumentation on, exporting to fresh in-memory providers, for the ``with`` block; off after it.

    ``instrument_options`` are ``ResponsesInstrumentor().instrument()``'s settings (``strict=True``,
    ``zdr=True``, ...); a bad one raises ``otel_responses.ConfigError``. The instrumentation must be off on entry
    (not already on through ``opentelemetry-instrument`` or an enclosing ``capture()``), else ``RuntimeError``.
    """
    from .instrumentor import ResponsesInstrumentor

    for own in ("tracer_provider", "meter_provider", "logger_provider"):
        if own in instrument_options:
            raise TypeError(f"capture() makes its own {own}; read it from the CapturedTelemetry it yields")
    instrumentor = ResponsesInstrumentor()
    libraries = _library_instrumentors()
    if any(each.is_instrumented_by_opentelemetry for each in (instrumentor, *libraries)):
        raise RuntimeError(
            "the otel-responses instrumentation is already on (opentelemetry-instrument, an enclosing capture(), "
            "or an instrument() call not undone): capture() could not see the spans; turn it off first"
        )
    telemetry = CapturedTelemetry.new()
    if _test is not None:
        _test.captures.append(telemetry)
    instrumentor.instrument(
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider,
        **instrument_options,
    )
    if not instrumentor.is_instrumented_by_opentelemetry:  # a dependency conflict: logged, nothing patched
        raise RuntimeError(f"the instrumentation did not turn on: is a supported openai installed? {_OPENAI_HINT}")
    for library in libraries:  # they join the SDK's telemetry (its settings, ledger and providers)
        library.instrument(skip_dep_check=True)  # an absent library is never imported: its hooks never fire
    try:
        yield telemetry
    finally:
        for library in libraries:
            library.uninstrument()
        instrumentor.uninstrument()


def _library_instrumentors() -> list[Any]:
    """The litellm and DSPy instrumentors (each patches its library only if the app imports it)."""
    from .integrations.dspy import DSPyResponsesInstrumentor
    from .integrations.litellm import LiteLLMResponsesInstrumentor

    return [LiteLLMResponsesInstrumentor(), DSPyResponsesInstrumentor()]


# -- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def responses_emulator() -> Iterator[Emulator]:
    """The local Responses API emulator (``otel_responses.emulator.Emulator``), running for the whole session."""
    from .emulator import Emulator

    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def responses_client(responses_emulator: Emulator) -> Iterator[openai.OpenAI]:
    """An ``openai.OpenAI`` for the emulator (dummy key, no retries); closed after the test."""
    _require_openai("responses_client")
    client = responses_emulator.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def responses_async_client(
    responses_emulator: Emulator, request: pytest.FixtureRequest
) -> Iterator[openai.AsyncOpenAI]:
    """An ``openai.AsyncOpenAI`` for the emulator; closed after the test.

    pytest runs no ``async def`` test by itself: mark the test ``@pytest.mark.anyio`` (anyio's pytest plugin comes
    with anyio, which openai depends on) or, with pytest-asyncio, ``@pytest.mark.asyncio``. An async test with
    neither marker fails at setup with a message that says so. A plain test can call it through ``asyncio.run``.

    It keeps no connection open between requests, so one client works across event loops (``asyncio.run`` in a
    plain test, or an async test under pytest-asyncio or anyio) and is closed cleanly after the test.
    """
    import asyncio

    _require_async_runner(request, "responses_async_client")
    _require_openai("responses_async_client")
    client = responses_emulator.async_client(default_headers={"Connection": "close"})
    try:
        yield client
    finally:
        if not client.is_closed():  # on a loop of its own: the current event loop, if any, is left alone
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(client.close())
            finally:
                loop.close()


@pytest.fixture
def responses_telemetry() -> Iterator[CapturedTelemetry]:
    """The instrumentation on for the test, with default settings; off afterwards. For settings, use
    ``with capture(strict=True) as telemetry:`` in the test instead."""
    with capture() as telemetry:
        yield telemetry


_ASYNC_MARKERS = ("anyio", "asyncio", "trio")


def _require_async_runner(request: pytest.FixtureRequest, needed_by: str) -> None:
    """Fail an ``async def`` test that no plugin will run, at setup and saying what to add: pytest's own message
    ("async def functions are not natively supported", install anyio) misleads where anyio is installed."""
    function = getattr(request, "function", None)
    if function is None or not inspect.iscoroutinefunction(function):
        return
    if any(request.node.get_closest_marker(name) for name in _ASYNC_MARKERS) or "anyio_backend" in request.fixturenames:
        return
    try:
        if request.config.getini("asyncio_mode") == "auto":  # pytest-asyncio runs every async test
            return
    except ValueError:  # no pytest-asyncio
        pass
    pytest.fail(
        f"{request.node.name} is an async test with no async marker, so pytest would not run it: mark it"
        " @pytest.mark.anyio (anyio's pytest plugin comes with openai) or, with pytest-asyncio,"
        f" @pytest.mark.asyncio; {needed_by} works in either",
        pytrace=False,
    )


def _require_openai(needed_by: str) -> None:
    try:
        import openai  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{needed_by} needs the openai SDK: {_OPENAI_HINT}") from exc


# -- assertions ----------------------------------------------------------------------------------------------

Spans: TypeAlias = "CapturedTelemetry | ReadableSpan | Iterable[ReadableSpan]"
"""What the assertions accept: the captured telemetry (all its finished spans), one span, or spans."""


def assert_no_context_loss(spans: Spans) -> None:
    """Fail when any signal of severity ``error`` or ``warning`` was raised; the message names each span, signal,
    severity and fix. Fails too when there is no span at all (the instrumentation was not on)."""
    __tracebackhide__ = True
    checked = _spans(spans, "assert_no_context_loss")
    found = [(i, span, name) for i, span, name in _raised(checked) if _severity(span, name) in LOSS_SEVERITIES]
    if found:
        raise _failure(
            _report(f"context lost: {_count(len(found))} of severity error or warning", found, checked), checked
        )


def assert_signal(spans: Spans, name: str) -> list[ReadableSpan]:
    """Fail unless signal ``name`` was raised at least once; returns the spans that raised it. An unknown name
    is a ``ValueError``."""
    __tracebackhide__ = True
    kind = CATALOGUE[_known(name)]
    checked = _spans(spans, None)
    hits = [span for _, span, raised in _raised(checked) if raised == name]
    if not hits:
        others = sorted({raised for _, _, raised in _raised(checked)})
        raise _failure(
            f"expected signal {name} ({kind.severity}: {kind.meaning}), but it was not raised on any of "
            f"{len(checked)} span(s) {[s.name for s in checked]}; raised: {', '.join(others) or 'none'}",
            checked,
        )
    return hits


def assert_no_signal(spans: Spans, name: str) -> None:
    """Fail when signal ``name`` was raised; the message names the spans, the severity and the fix. An unknown
    name is a ``ValueError``. Fails too when there is no span at all."""
    __tracebackhide__ = True
    _known(name)
    checked = _spans(spans, "assert_no_signal")
    found = [(i, span, raised) for i, span, raised in _raised(checked) if raised == name]
    if found:
        raise _failure(_report(f"unexpected signal {name} raised {len(found)} time(s)", found, checked), checked)


def assert_no_reasoning_withheld(spans: Spans, allow: Iterable[str] = (_TURN_BOUNDARY,)) -> None:
    """Fail when the API reports (``input_transformations``) that it withheld replayed reasoning from the model for a
    reason not in ``allow``: by default any but ``turn_boundary`` (under ``reasoning.context: current_turn`` an
    earlier turn's reasoning is withheld by design). The message names each span, the reasons and their fixes.
    Fails too when there is no span at all."""
    __tracebackhide__ = True
    allowed = frozenset(allow)
    checked = _spans(spans, "assert_no_reasoning_withheld")
    lines = []
    for index, span in enumerate(checked):
        attributes = span.attributes or {}
        raw = attributes.get(_attr.REASONING_WITHHELD_REASONS)
        reasons = [str(r) for r in raw if str(r) not in allowed] if isinstance(raw, (list, tuple)) else []
        if not reasons:
            continue
        response = attributes.get(_attr.GEN_AI_RESPONSE_ID)
        where = f"span {span.name!r} (#{index + 1} of {len(checked)}{f', response {response}' if response else ''})"
        count = attributes.get(_attr.REASONING_WITHHELD)
        lines.append(f"- {where}: {count} reasoning item(s) withheld, reasons {', '.join(reasons)}")
        fix = Signal("reasoning_withheld", {_attr.REASONING_WITHHELD_REASONS: reasons}).fix
        lines.append(f"  Fix: {fix}.")
    if lines:
        raise _failure("\n".join(["the API withheld replayed reasoning from the model:", *lines]), checked)


def _severity(span: ReadableSpan, name: str) -> str:
    """A raised signal's severity, as its event's metadata makes it (a variant may have its own)."""
    return Signal(name, dict(_event(span, name))).severity


def _known(name: str) -> str:
    if name not in CATALOGUE:
        close = difflib.get_close_matches(name, list(CATALOGUE), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known signals: {', '.join(CATALOGUE)}"
        raise ValueError(f"unknown signal {name!r}{hint}")
    return name


def _spans(source: Spans, needs_some: str | None) -> list[ReadableSpan]:
    if isinstance(source, CapturedTelemetry):
        spans = source.spans()
    elif isinstance(source, Iterable):
        spans = list(source)
    else:
        spans = [source]
    if needs_some is not None and not spans:
        raise AssertionError(
            f"{needs_some}: no span to check; was the instrumentation on? (the responses_telemetry fixture, or "
            "`with capture() as telemetry:`, around the calls)"
        )
    return spans


def _signals_of(span: ReadableSpan) -> tuple[str, ...]:
    names = (span.attributes or {}).get(_attr.SIGNALS, ())
    return tuple(str(n) for n in names) if isinstance(names, (list, tuple)) else ()


def _raised(spans: list[ReadableSpan]) -> Iterator[tuple[int, ReadableSpan, str]]:
    for index, span in enumerate(spans):
        for name in _signals_of(span):
            yield index, span, name


def _count(n: int) -> str:
    return f"{n} signal{'s' if n != 1 else ''}"


def _report(headline: str, found: list[tuple[int, ReadableSpan, str]], spans: list[ReadableSpan]) -> str:
    lines = [headline + ":"]
    for index, span, name in found:
        signal = Signal(name, dict(_event(span, name)))  # its meaning and fix may depend on its metadata
        attributes = span.attributes or {}
        response = attributes.get(_attr.GEN_AI_RESPONSE_ID)
        where = f"span {span.name!r} (#{index + 1} of {len(spans)}{f', response {response}' if response else ''})"
        lines.append(f"- {name} ({signal.severity}) on {where}: {signal.meaning}{_detail(span, name)}")
        lines.append(f"  Fix: {signal.fix}.")
    return "\n".join(lines)


def _event(span: ReadableSpan, name: str) -> Mapping[str, Any]:
    """The attributes of the span's event for signal ``name`` (empty when it has none)."""
    for event in span.events:
        attributes = event.attributes or {}
        if event.name == _attr.SIGNAL_EVENT and attributes.get(_attr.SIGNAL_NAME) == name:
            return attributes
    return {}


def _detail(span: ReadableSpan, name: str) -> str:
    """The signal event's metadata (counts, item types, ids; never payload)."""
    own = {_attr.SIGNAL_NAME, _attr.SIGNAL_SEVERITY}
    detail = {k.removeprefix(_attr.PREFIX): v for k, v in _event(span, name).items() if k not in own}
    return " [" + ", ".join(f"{k}={_value(v)}" for k, v in detail.items()) + "]" if detail else ""


def _value(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


# -- reports of the test's conversations ---------------------------------------------------------------------

REPORT_OPTION = "--otel-responses-report"
REPORT_DIR_OPTION = "--otel-responses-report-dir"
_REPORT_NAME = "otel-responses-report.html"
_FAILED, _ALL, _OFF = "failed", "all", "off"
_LISTED = 5  # reports listed at the end of the run


@dataclass
class _Test:
    """The test running now: the telemetry its ``capture()`` calls made, and its report once written."""

    item: pytest.Item
    captures: list[CapturedTelemetry] = field(default_factory=list)
    report: Path | None = None


_test: _Test | None = None
_written: list[Path] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    """The report options (in ``addopts`` they become a project's default)."""
    group = parser.getgroup("otel-responses")
    group.addoption(
        REPORT_OPTION,
        choices=(_FAILED, _ALL, _OFF),
        default=_FAILED,
        help="write an HTML report of a test's conversations when a kit assertion fails (failed, the default), "
        "after every test that captured spans (all), or never (off)",
    )
    group.addoption(
        REPORT_DIR_OPTION,
        metavar="DIR",
        default=None,
        help="write the reports into DIR (one file per test, named after it) instead of each test's tmp_path",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """Which test is running (its ``capture()`` calls are its spans); with ``all``, its report once it is done."""
    global _test
    _test = _Test(item)
    try:
        yield
        if _mode(item.config) == _ALL and _test.captures:
            _write_report(_test, [])
    finally:
        _test = None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The reports written, at the end of the run."""
    if _written:
        many = len(_written) != 1
        terminalreporter.write_line(f"otel-responses: {len(_written)} conversation report{'s' if many else ''}:")
        for path in _written[:_LISTED]:
            terminalreporter.write_line(f"  {path}")
        if len(_written) > _LISTED:
            terminalreporter.write_line(f"  and {len(_written) - _LISTED} more")


def _mode(config: pytest.Config) -> str:
    value = config.getoption(REPORT_OPTION, default=_FAILED)  # absent when the plugin was registered late
    return value if value in (_FAILED, _ALL, _OFF) else _FAILED


def _failure(message: str, checked: list[ReadableSpan]) -> AssertionError:
    """The assertion's error; within a test, with the path of the report of its conversations."""
    test = _test
    if test is not None and _mode(test.item.config) != _OFF:
        message += f"\n{_write_report(test, checked)}"
    return AssertionError(message)


def _write_report(test: _Test, checked: list[ReadableSpan]) -> str:
    """Write the report of every span the test captured (and those checked); a line saying where, or why not."""
    spans: dict[tuple[int, int], ReadableSpan] = {}
    for span in [*(s for t in test.captures for s in t.spans()), *checked]:
        context = span.context
        spans.setdefault((context.trace_id, context.span_id) if context is not None else (id(span), 0), span)
    try:
        from .tools.report import Options, write_sdk_spans

        path = test.report or _report_path(test.item)
        write_sdk_spans(list(spans.values()), path, Options(title=f"otel-responses: {test.item.nodeid}"))
    except Exception as error:  # the assertion's own message matters more than its report
        return f"(the report of the conversations was not written: {type(error).__name__}: {error})"
    if test.report is None:
        test.report = path
        _written.append(path)
    return f"See the conversations turn by turn: {path}"


def _report_path(item: pytest.Item) -> Path:
    """``--otel-responses-report-dir``, else the test's ``tmp_path`` (if it has one), else a directory made as
    ``tmp_path`` would be, under pytest's base temporary directory."""
    directory = item.config.getoption(REPORT_DIR_OPTION, default=None)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")[:150] or "test"
    if directory:
        return Path(directory).expanduser().absolute() / f"{name}.html"
    tmp_path = getattr(item, "funcargs", {}).get("tmp_path")
    if isinstance(tmp_path, Path):
        return tmp_path / _REPORT_NAME
    factory = getattr(item.config, "_tmp_path_factory", None)  # pytest's own, behind the tmp_path fixtures
    if factory is not None:
        return Path(factory.mktemp(f"otel-responses-{re.sub(r'[^A-Za-z0-9_-]', '_', item.name)[:30]}")) / _REPORT_NAME
    return Path(tempfile.mkdtemp(prefix="otel-responses-report-")) / _REPORT_NAME
