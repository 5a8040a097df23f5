"""Fixtures of the client-library tests: a fresh emulator per test (its ids start over, so failures are
reproducible) and the instrumentation captured in memory. Nothing here imports a client library."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry, capture

# Before any test module imports litellm: its price table from the package, not the network; its telemetry off.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")
# litellm counts tokens with tiktoken, whose encodings it ships; older releases point tiktoken at them only on some
# paths, and tiktoken would otherwise download them.
_litellm = importlib.util.find_spec("litellm")
if _litellm is not None and _litellm.submodule_search_locations:
    _tokenizers = os.path.join(_litellm.submodule_search_locations[0], "litellm_core_utils", "tokenizers")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", _tokenizers)


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
