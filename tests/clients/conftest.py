"""Fixtures of the client-library tests: a fresh emulator per test (its ids start over, so failures are
reproducible) and the instrumentation captured in memory. Nothing here imports a client library."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from otel_responses.emulator import Emulator

# Before any test module imports litellm: its price table from the package, not the network; its telemetry off.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")
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
