"""OpenTelemetry instrumentation for the OpenAI Responses API that names the ways context gets lost.

Names are imported lazily: the pytest plugin (`otel_responses.testing`) loads this package in every test
session of whoever installs it, and should not pay for the instrumentation machinery until it is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .config import ConfigError
    from .instrumentor import ResponsesInstrumentor
    from .signals import ContextLossError

__all__ = ["ConfigError", "ContextLossError", "ResponsesInstrumentor", "__version__"]

_LAZY = {"ConfigError": ".config", "ContextLossError": ".signals", "ResponsesInstrumentor": ".instrumentor"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
