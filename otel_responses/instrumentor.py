"""``ResponsesInstrumentor``: one table of patch targets, wrapped on ``instrument()`` and restored on
``uninstrument()``."""

from __future__ import annotations

import enum
import importlib
import logging
from collections.abc import Callable, Collection
from typing import Any, NamedTuple

from opentelemetry.instrumentation.utils import unwrap
from wrapt import wrap_function_wrapper

from ._calls.operations import OPERATIONS, Operation
from ._calls.runtime import Runtime
from ._patching import shared as _shared
from ._patching import websocket
from ._patching.streams import end_with_async_helper_close, end_with_helper_close
from ._patching.wrappers import Method, Switch, Wrapper, async_wrapper, keep_unparsed, paginator_wrapper, sync_wrapper
from .package import _instruments

__all__ = ["ResponsesInstrumentor"]

_log = logging.getLogger(__name__)
_USER = "ResponsesInstrumentor"


class Calling(enum.Enum):
    """How a wrapped method is called, which decides its wrapper."""

    SYNC = "sync"
    ASYNC = "async"
    PAGINATOR = "paginator"  # an async `list` that returns a paginator without awaiting
    PARSE = "parse"  # `parse`: keeps the unparsed response for the checks
    ASYNC_PARSE = "async_parse"


class Target(NamedTuple):
    """One method to wrap: where it lives, the operation it performs, and how it is called."""

    module: str
    cls: str
    method: str
    operation: Operation
    calling: Calling


_RESPONSES = "openai.resources.responses.responses"
_INPUT_ITEMS = "openai.resources.responses.input_items"
_INPUT_TOKENS = "openai.resources.responses.input_tokens"
_CONVERSATIONS = "openai.resources.conversations.conversations"
_ITEMS = "openai.resources.conversations.items"
_BETA_RESPONSES = "openai.resources.beta.responses.responses"


def _targets() -> tuple[Target, ...]:
    """The whole table. `parse` posts directly (it does not call `create`); `stream()` calls `create` and
    `retrieve`, so it is not wrapped (that would make two spans). Raw and streaming-response variants
    (`with_raw_response`, `with_streaming_response`) call these same methods. Methods the installed SDK lacks are
    skipped."""
    op = OPERATIONS
    table: list[Target] = []
    response_methods = {
        "create": op["chat"],
        "parse": op["chat"],
        "retrieve": op["fetch_response"],
        "delete": op["delete_response"],
        "cancel": op["cancel_response"],
        "compact": op["compact_response"],
    }
    for module in (_RESPONSES, _BETA_RESPONSES):
        for method, operation in response_methods.items():
            parses = method == "parse"
            table.append(Target(module, "Responses", method, operation, Calling.PARSE if parses else Calling.SYNC))
            table.append(
                Target(module, "AsyncResponses", method, operation, Calling.ASYNC_PARSE if parses else Calling.ASYNC)
            )
    table += [
        Target(_INPUT_ITEMS, "InputItems", "list", op["list_input_items"], Calling.SYNC),
        Target(_INPUT_ITEMS, "AsyncInputItems", "list", op["list_input_items"], Calling.PAGINATOR),
        Target(_INPUT_TOKENS, "InputTokens", "count", op["count_input_tokens"], Calling.SYNC),
        Target(_INPUT_TOKENS, "AsyncInputTokens", "count", op["count_input_tokens"], Calling.ASYNC),
        Target(_ITEMS, "Items", "list", op["list_conversation_items"], Calling.SYNC),
        Target(_ITEMS, "AsyncItems", "list", op["list_conversation_items"], Calling.PAGINATOR),
    ]
    for method, name in (
        ("create", "create_conversation"),
        ("retrieve", "retrieve_conversation"),
        ("update", "update_conversation"),
        ("delete", "delete_conversation"),
    ):
        table.append(Target(_CONVERSATIONS, "Conversations", method, op[name], Calling.SYNC))
        table.append(Target(_CONVERSATIONS, "AsyncConversations", method, op[name], Calling.ASYNC))
    for method, name in (
        ("create", "create_conversation_items"),
        ("retrieve", "retrieve_conversation_item"),
        ("delete", "delete_conversation_item"),
    ):
        table.append(Target(_ITEMS, "Items", method, op[name], Calling.SYNC))
        table.append(Target(_ITEMS, "AsyncItems", method, op[name], Calling.ASYNC))
    return tuple(table)


TARGETS = _targets()
_WRAPPERS: dict[Calling, Callable[[Method], Wrapper]] = {
    Calling.SYNC: sync_wrapper,
    Calling.ASYNC: async_wrapper,
    Calling.PAGINATOR: paginator_wrapper,
    Calling.PARSE: lambda method: sync_wrapper(method, parses=True),
    Calling.ASYNC_PARSE: lambda method: async_wrapper(method, parses=True),
}

# `responses.parse`'s post-parser calls the module-level `parse_response` of the module defining `parse`
# (`openai.lib._response_resources` in recent SDKs, the responses resource module in older ones; wrapped wherever
# present). Wrapped there, not where it is defined: `responses.stream()` parses with its own import and is
# observed as a stream.
_PARSE_RESPONSE_MODULES = ("openai.lib._response_resources", _RESPONSES)

# Wrappers that watch rather than make a call: the close of `responses.stream()`'s ResponseStream (which
# bypasses our stream proxy), and WebSocket mode (a span per `response.create` however it is sent, ended by
# received events).
_STREAM_HELPERS = "openai.lib.streaming.responses._responses"
_OBSERVERS: tuple[tuple[str, str, str, Callable[[Switch, Runtime], Wrapper]], ...] = (
    (_STREAM_HELPERS, "ResponseStream", "close", lambda switch, runtime: end_with_helper_close),
    (_STREAM_HELPERS, "AsyncResponseStream", "close", lambda switch, runtime: end_with_async_helper_close),
    (_RESPONSES, "ResponsesResponseResource", "create", websocket.create_wrapper),
    (_RESPONSES, "AsyncResponsesResponseResource", "create", websocket.async_create_wrapper),
    (_RESPONSES, "ResponsesConnection", "send", websocket.send_wrapper),
    (_RESPONSES, "AsyncResponsesConnection", "send", websocket.async_send_wrapper),
    (_RESPONSES, "ResponsesConnection", "send_raw", websocket.send_raw_wrapper),
    (_RESPONSES, "AsyncResponsesConnection", "send_raw", websocket.async_send_raw_wrapper),
    (_RESPONSES, "ResponsesConnection", "recv", websocket.recv_wrapper),
    (_RESPONSES, "AsyncResponsesConnection", "recv", websocket.async_recv_wrapper),
    (_RESPONSES, "ResponsesConnection", "close", websocket.close_wrapper),
    (_RESPONSES, "AsyncResponsesConnection", "close", websocket.async_close_wrapper),
)


class _Patch(NamedTuple):
    """A method (or module function) we replaced, and whether its owner defined it itself (else a class
    inherited it)."""

    owner: object
    method: str
    own: bool


def _patch(module: str, cls_name: str, method: str, wrapper: Wrapper) -> _Patch | None:
    cls = _present(Target(module, cls_name, method, OPERATIONS["chat"], Calling.SYNC))
    if cls is None:
        return None
    own = method in cls.__dict__
    wrap_function_wrapper(cls, method, wrapper)
    return _Patch(cls, method, own)


def _patch_function(module_name: str, name: str, wrapper: Wrapper) -> _Patch | None:
    """A module-level function, if the installed SDK's module has it."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    if not callable(module.__dict__.get(name)):
        return None
    wrap_function_wrapper(module, name, wrapper)
    return _Patch(module, name, True)


def _restore(patch: _Patch) -> None:
    """Put the original back; an inherited method is un-shadowed rather than copied onto the class."""
    if patch.own:
        unwrap(patch.owner, patch.method)
    elif patch.method in vars(patch.owner):
        delattr(patch.owner, patch.method)


def _present(target: Target) -> type | None:
    """The class to patch, if the installed SDK has it and the method."""
    try:
        module = importlib.import_module(target.module)
    except ImportError:
        return None
    cls = getattr(module, target.cls, None)
    return cls if isinstance(cls, type) and hasattr(cls, target.method) else None


class ResponsesInstrumentor(_shared.CheckedInstrumentor):
    """Instruments the OpenAI SDK's Responses API: spans, metrics and context-loss facts.

    ``ResponsesInstrumentor().instrument(tracer_provider=..., meter_provider=..., logger_provider=..., zdr=True)``
    (each provider optional: the global one otherwise; the logger provider takes the signals' log events); options are
    documented on the Configuration page of the documentation (``otel_responses.docs_links.page_url("configuration")``)
    and may also come from ``OTEL_INSTRUMENTATION_OPENAI_RESPONSES_*`` variables.
    """

    _switch: Switch | None = None
    _patched: list[_Patch]

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        runtime = _shared.acquire(_USER, kwargs)
        switch = Switch()
        patched: list[_Patch] = []
        for target in TARGETS:
            make = _WRAPPERS[target.calling]
            done = _patch(target.module, target.cls, target.method, make(Method(switch, runtime, target.operation)))
            if done is not None:
                patched.append(done)
        for module, cls_name, method, factory in _OBSERVERS:
            done = _patch(module, cls_name, method, factory(switch, runtime))
            if done is not None:
                patched.append(done)
        for module in _PARSE_RESPONSE_MODULES:
            done = _patch_function(module, "parse_response", keep_unparsed)
            if done is not None:
                patched.append(done)
        self._switch = switch
        self._patched = patched

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._switch is not None:
            self._switch.on = False
        for patch in getattr(self, "_patched", ()):
            _restore(patch)
        self._patched = []
        _shared.release(_USER)
