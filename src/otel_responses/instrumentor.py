"""``ResponsesInstrumentor``: one table of patch targets, wrapped on ``instrument()`` and restored on
``uninstrument()``."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from opentelemetry import metrics, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap
from wrapt import wrap_function_wrapper

from .attributes import OPERATION_CHAT, OPERATION_FETCH, OPERATION_INPUT_ITEMS
from .config import Settings, settings_from
from .facts import RequestFacts, request_facts, target_facts
from .package import _instruments
from .streams import end_with_async_helper_close, end_with_helper_close
from .telemetry import Telemetry
from .version import __version__
from .wrappers import Operation, Switch, async_wrapper, sync_wrapper

_log = logging.getLogger(__name__)
_RESPONSES = "openai.resources.responses.responses"
_INPUT_ITEMS = "openai.resources.responses.input_items"
_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
_OTHER_PROVIDERS = ("logger_provider", "event_logger_provider")


class Target(NamedTuple):
    """One method to wrap: module, class, method, the operation it performs, and whether it is a coroutine."""

    module: str
    cls: str
    method: str
    operation: Operation
    is_async: bool


def _chat(args: tuple[Any, ...], kwargs: Mapping[str, Any], settings: Settings) -> RequestFacts:
    return request_facts(OPERATION_CHAT, kwargs, settings)


def _fetch(args: tuple[Any, ...], kwargs: Mapping[str, Any], settings: Settings) -> RequestFacts:
    return target_facts(OPERATION_FETCH, args[0] if args else kwargs.get("response_id"), kwargs)


def _input_items(args: tuple[Any, ...], kwargs: Mapping[str, Any], settings: Settings) -> RequestFacts:
    return target_facts(OPERATION_INPUT_ITEMS, args[0] if args else kwargs.get("response_id"), kwargs)


CHAT = Operation(OPERATION_CHAT, _chat, creates_response=True)
FETCH = Operation(OPERATION_FETCH, _fetch, creates_response=False)
INPUT_ITEMS = Operation(OPERATION_INPUT_ITEMS, _input_items, creates_response=False)

# `parse` posts directly (it does not call `create`); `stream` calls `create`, so wrapping it too would
# make two spans. Raw and streaming-response variants call these same methods.
TARGETS: tuple[Target, ...] = (
    Target(_RESPONSES, "Responses", "create", CHAT, False),
    Target(_RESPONSES, "Responses", "parse", CHAT, False),
    Target(_RESPONSES, "Responses", "retrieve", FETCH, False),
    Target(_RESPONSES, "AsyncResponses", "create", CHAT, True),
    Target(_RESPONSES, "AsyncResponses", "parse", CHAT, True),
    Target(_RESPONSES, "AsyncResponses", "retrieve", FETCH, True),
    # The async `list` returns a paginator without awaiting anything: it is wrapped with streaming.
    Target(_INPUT_ITEMS, "InputItems", "list", INPUT_ITEMS, False),
)


# `responses.stream()` wraps our stream proxy in a ResponseStream whose close() bypasses the proxy.
_HELPER_CLOSES = (
    ("openai.lib.streaming.responses._responses", "ResponseStream", end_with_helper_close),
    ("openai.lib.streaming.responses._responses", "AsyncResponseStream", end_with_async_helper_close),
)


def _present(target: Target) -> type | None:
    """The class to patch, if the installed SDK has it and the method."""
    try:
        module = importlib.import_module(target.module)
    except ImportError:
        return None
    cls = getattr(module, target.cls, None)
    return cls if isinstance(cls, type) and hasattr(cls, target.method) else None


class ResponsesInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments the OpenAI SDK's Responses API: spans, metrics and context-loss facts.

    ``ResponsesInstrumentor().instrument(tracer_provider=..., meter_provider=..., zdr=True)``; options are
    documented in the README and may also come from ``OTEL_INSTRUMENTATION_OPENAI_RESPONSES_*`` variables.
    """

    _switch: Switch | None = None
    _patched: list[Target]

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        tracer_provider = kwargs.pop("tracer_provider", None)
        meter_provider = kwargs.pop("meter_provider", None)
        for ignored in _OTHER_PROVIDERS:  # passed by some distros to every instrumentor
            kwargs.pop(ignored, None)
        settings = settings_from(kwargs)
        tracer = trace.get_tracer(__name__, __version__, tracer_provider, schema_url=_SCHEMA_URL)
        meter = metrics.get_meter(__name__, __version__, meter_provider, schema_url=_SCHEMA_URL)
        telemetry = Telemetry(tracer, meter, settings)
        switch = Switch()
        patched: list[Target] = []
        for target in TARGETS:
            if _present(target) is None:
                continue
            make = async_wrapper if target.is_async else sync_wrapper
            wrap_function_wrapper(
                target.module, f"{target.cls}.{target.method}", make(switch, telemetry, target.operation)
            )
            patched.append(target)
        for module, cls, wrapper in _HELPER_CLOSES:
            target = Target(module, cls, "close", CHAT, False)
            if _present(target) is not None:
                wrap_function_wrapper(module, f"{cls}.close", wrapper)
                patched.append(target)
        self._switch = switch
        self._patched = patched

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._switch is not None:
            self._switch.on = False
        for target in getattr(self, "_patched", ()):
            cls = _present(target)
            if cls is not None:
                unwrap(cls, target.method)
        self._patched = []
