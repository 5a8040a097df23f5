"""Fixtures of the client-library tests: a fresh emulator per test (its ids start over, so failures are
reproducible) and the instrumentation captured in memory. Nothing here imports a client library."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry, capture


@pytest.fixture
def emu() -> Iterator[Emulator]:
    """A fresh emulator for one flow."""
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def telemetry() -> Iterator[CapturedTelemetry]:
    """The instrumentation on for the test, exporting to memory."""
    with capture() as captured:
        yield captured
