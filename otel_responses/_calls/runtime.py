"""What every call records with: the settings of one ``instrument()`` (or of one proxy), the ledger they name, and the
telemetry (tracer, instruments, logger) under the instrumentors' scope. Built once, shared by every call it makes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import _logs, metrics, trace

from .._telemetry.telemetry import Telemetry
from ..config import Settings, settings_from
from ..ledger import Ledger
from ..version import __version__

_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
SCOPE = "otel_responses.instrumentor"  # the instrumentation scope of every span, metric and log event


@dataclass(frozen=True, slots=True)
class Runtime:
    """The settings, the ledger and the telemetry calls share."""

    settings: Settings
    telemetry: Telemetry

    @property
    def ledger(self) -> Ledger:
        return self.settings.ledger


def runtime_for(
    options: Mapping[str, Any], tracer_provider: Any = None, meter_provider: Any = None, logger_provider: Any = None
) -> Runtime:
    """A runtime from ``instrument()``'s options (``ConfigError`` for one that cannot be used) and the providers (the
    global ones when None): the process's shared one, or a front end's own (the proxy's, whose calls must read as the
    SDK's do)."""
    settings = settings_from(options)
    tracer = trace.get_tracer(SCOPE, __version__, tracer_provider, schema_url=_SCHEMA_URL)
    meter = metrics.get_meter(SCOPE, __version__, meter_provider, schema_url=_SCHEMA_URL)
    logger = _logs.get_logger(SCOPE, __version__, logger_provider, schema_url=_SCHEMA_URL)
    return Runtime(settings, Telemetry(tracer, meter, settings, logger))
