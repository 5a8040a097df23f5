"""The forwarding proxy (``otel-responses proxy``): any client that speaks the Responses API over HTTP points its
base URL here, and each forwarded call is recorded as the in-process instrumentation records it — the same
:class:`~otel_responses._calls.call.Call`, facts, ledger and telemetry, reached the way every front end reaches
them. A front end beside ``integrations/``: it imports the patching layer and below, nothing above.

Needs the ``proxy`` extra (aiohttp, and the SDK whose SSE decoder and exceptions the recording uses). From Python:
``ThreadedProxy(upstream=url, port=0, tracer_provider=..., meter_provider=..., **options)``.
"""

from __future__ import annotations

from .server import ThreadedProxy
from .settings import ProxySettingsError

__all__ = ["ProxySettingsError", "ThreadedProxy"]
