"""The public surface, pinned (as httpx's ``test_exported_members``): each public module's ``__all__`` is exactly the
names below, each of them importable. A name added, removed or renamed fails here first, so a change to what users
import is made on purpose. Modules whose name has no underscore are public; inside the folders whose package is their
surface (the emulator, the proxy, the command and its report, the Redis ledger's helpers), only the package is."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import otel_responses
from otel_responses import attributes

PINNED: dict[str, list[str]] = {
    "otel_responses": ["ConfigError", "ContextLossError", "ResponsesInstrumentor", "__version__"],
    "otel_responses.attributes": sorted(
        [
            *attributes.MEANINGS,
            "DIALECTS",
            "DURATION_BUCKETS",
            "MEANINGS",
            "PREFIX",
            "TOKEN_USAGE_BUCKETS",
            "dialect_of",
        ]
    ),
    "otel_responses.config": [
        "ConfigError",
        "ENV_PREFIX",
        "GEN_AI_LATEST_EXPERIMENTAL",
        "KEYWORDS",
        "OPTIONS",
        "Option",
        "Settings",
        "settings_from",
    ],
    "otel_responses.docs_links": ["DOCS_URL", "NotASite", "SIGNALS_PAGE", "check_site", "page_url", "signal_doc_url"],
    "otel_responses.emulator": ["Emulator", "EmulatorConfig", "RecordedRequest", "RequestLog"],
    "otel_responses.instrumentor": ["ResponsesInstrumentor"],
    "otel_responses.integrations": [],
    "otel_responses.integrations.dspy": ["DSPyResponsesInstrumentor"],
    "otel_responses.integrations.litellm": ["LiteLLMResponsesInstrumentor"],
    "otel_responses.ledger": [
        "AsyncCallLedger",
        "CallLedger",
        "DEFAULT_CAPACITY",
        "DEFAULT_TIMEOUT_SECONDS",
        "DEFAULT_TTL_SECONDS",
        "Entry",
        "GivenOutput",
        "InMemoryLedger",
        "Key",
        "Ledger",
        "LedgerView",
        "LedgerWrites",
        "Place",
        "SharedLedger",
    ],
    "otel_responses.ledger.redis": [
        "COUNTS",
        "DEFAULT_BACKOFF_SECONDS",
        "DEFAULT_MAX_ENTRY_BYTES",
        "DEFAULT_PREFIX",
        "DEFAULT_QUEUE_SIZE",
        "DEFAULT_TIMEOUT_SECONDS",
        "DEFAULT_TTL_SECONDS",
        "RedisLedger",
        "RedisURLError",
    ],
    "otel_responses.package": [],
    "otel_responses.proxy": ["ProxySettingsError", "ThreadedProxy"],
    "otel_responses.signals": [
        "CATALOGUE",
        "ERROR",
        "INFO",
        "LOSS_SEVERITIES",
        "WARNING",
        "ContextLossError",
        "Kind",
        "Signal",
    ],
    "otel_responses.testing": [
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
    ],
    "otel_responses.tools": [],
    "otel_responses.tools.report": [
        "DOCS_URL",
        "Options",
        "SpanRecord",
        "from_sdk",
        "labels",
        "render",
        "write_sdk_spans",
    ],
    "otel_responses.version": ["__version__", "install_hint"],
}
# Folders whose package is their whole surface: their modules are the package's own business.
SURFACE_IS_THE_PACKAGE = ("emulator", "proxy", "tools", "ledger")


@pytest.mark.parametrize("name", sorted(PINNED))
def test_exported_members(name: str) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == sorted(PINNED[name])
    for member in module.__all__:
        assert hasattr(module, member), f"{name}.{member}"


def test_every_public_module_is_pinned() -> None:
    """A new module is private by its name, inside a folder whose package is its surface, or pinned above."""
    public = set()
    for info in pkgutil.walk_packages(otel_responses.__path__, "otel_responses."):
        parts = info.name.split(".")[1:]
        if any(part.startswith("_") for part in parts) or parts == ["__main__"]:
            continue
        if len(parts) > 1 and parts[0] in SURFACE_IS_THE_PACKAGE and info.name not in PINNED:
            continue
        public.add(info.name)
    assert public | {"otel_responses"} == set(PINNED)


def test_the_package_root_is_what_the_readme_imports() -> None:
    """Near miss of the pins: a name reached through the root that is not exported is no part of the surface."""
    assert "Settings" not in otel_responses.__all__
    assert not hasattr(otel_responses, "telemetry_for")
