"""The forwarding proxy (``otel-responses proxy``): any client that speaks the Responses API over HTTP points its
base URL here, and each forwarded call is recorded as the in-process instrumentation records it — the same
:class:`~otel_responses._patching.call.Call`, facts, ledger and telemetry, reached the way every front end reaches
them. A front end beside ``integrations/``: it imports the patching layer and below, nothing above.

Needs the ``proxy`` extra (aiohttp, and the SDK whose SSE decoder and exceptions the recording uses). From Python:
``ThreadedProxy(ProxySettings(upstream_of(url), port=0), telemetry_for(options, tracer_provider, meter_provider))``.
"""

from __future__ import annotations

from .._patching.shared import telemetry_for
from .server import Proxy, ThreadedProxy
from .settings import ProxySettings, ProxySettingsError, Upstream, listen_of, upstream_of

__all__ = [
    "Proxy",
    "ProxySettings",
    "ProxySettingsError",
    "ThreadedProxy",
    "Upstream",
    "listen_of",
    "telemetry_for",
    "upstream_of",
]
