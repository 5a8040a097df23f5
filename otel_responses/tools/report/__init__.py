"""A self-contained HTML page of each conversation's turns, built from this package's spans alone.

``render()`` makes the page from span records: read from OTLP/JSON files (``otlp_json.read``, the command
``otel-responses report``) or from the SDK's finished spans (``from_sdk``: the pytest kit and the demo). Names are
imported lazily: ``otel-responses`` builds the report command's options without the package's telemetry names.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .urls import DOCS_URL

if TYPE_CHECKING:
    from .page import Options, render
    from .records import SpanRecord, from_sdk

__all__ = ["DOCS_URL", "Options", "SpanRecord", "from_sdk", "labels", "render", "write_sdk_spans"]

_LAZY = {"Options": ".page", "render": ".page", "SpanRecord": ".records", "from_sdk": ".records"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def write_sdk_spans(spans: Iterable[Any], path: str | Path, options: Options | None = None) -> Path:
    """Write the report of the SDK's finished spans (``ReadableSpan``) to ``path``; returns the path written."""
    from .page import render
    from .records import from_sdk

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(from_sdk(spans), options), encoding="utf-8")
    return target


def labels(named: Iterable[tuple[str, Iterable[Any]]]) -> dict[str, str]:
    """Captions for the conversations of named groups of SDK spans (the demo: one group per scenario)."""
    from .model import conversations
    from .records import from_sdk

    found: dict[str, str] = {}
    for name, spans in named:
        for conversation in conversations(from_sdk(spans)):
            found.setdefault(conversation.key, name)
    return found
