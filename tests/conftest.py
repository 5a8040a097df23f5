"""Shared fixtures, on top of the project's own pytest kit (`otel_responses.testing`): one emulator per
session, real SDK exporters, the instrumentation on per test."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator

import openai
import pytest

from otel_responses import testing
from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry

from .corpus import Exports

Captured = CapturedTelemetry


def new_captured() -> Captured:
    """Fresh in-memory providers, for tests that call `instrument()` themselves."""
    return CapturedTelemetry.new()


def pytest_configure(config: pytest.Config) -> None:
    """The kit comes through its `pytest11` entry point; register it here when plugin autoloading is off. The
    shared-ledger fixtures (a `redis-server`, the store, the ledgers a test made, process A's first turns) are
    registered for every module that asks for them, where the `redis` package is installed."""
    if not config.pluginmanager.is_registered(testing):
        config.pluginmanager.register(testing, "otel_responses")
    if importlib.util.find_spec("redis") is not None and not config.pluginmanager.has_plugin("tests.shared_ledger"):
        config.pluginmanager.import_plugin("tests.shared_ledger")


class _EndedSpanWarnings(logging.Handler):
    """Collects the SDK's complaints about a span ended twice or written after its end."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "ended span" in message:
            self.messages.append(message)


@pytest.fixture(autouse=True)
def no_span_used_after_its_end() -> Iterator[None]:
    """Every test: no span is ended twice nor written to after it ended."""
    handler = _EndedSpanWarnings()
    logger = logging.getLogger("opentelemetry.sdk.trace")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert handler.messages == []


@pytest.fixture(scope="session")
def emulator(responses_emulator: Emulator) -> Emulator:
    return responses_emulator


@pytest.fixture(scope="module")
def client(emulator: Emulator) -> Iterator[openai.OpenAI]:
    """One client per module: building one costs more than a call to the emulator."""
    shared = emulator.client()
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def captured(responses_telemetry: Captured) -> Captured:
    """The instrumentation on, exporting to in-memory SDK exporters; off again after the test."""
    return responses_telemetry


@pytest.fixture
def exports(captured: Captured, caplog: pytest.LogCaptureFixture) -> Exports:
    """What left the process, as the leak tests read it: spans, metrics and every `otel_responses` log record, at
    any level (debug included: a leak there reaches whoever turns logging up)."""
    caplog.set_level(logging.DEBUG, logger="otel_responses")
    return Exports(captured, caplog)
