"""litellm: every Responses API call ``litellm.responses()`` and its siblings make, as one span with the SDK's

contract.

Outer seams: the public functions of the ``litellm`` package (what apps, DSPy and litellm's Router call): the app's
layer. litellm rewrites between there and the wire (it re-encodes response ids, and with encrypted-content affinity
item ids, ``encrypted_content`` and compaction items), so the request is read from the keywords the app passed and
the response from what the app gets back, never one of them at the wire. Inner observers: the handler methods that
send a request (``BaseLLMHTTPHandler``'s, and the Chat Completions bridge's): a call that reaches none of them
(a cache hit, ``mock_response``) made no request and leaves no span. The gateway's WebSocket relay, which
calls none of these functions, has seams of its own (``_litellm_websocket.py``). The design, at length:
https://otel-responses.github.io/otel-responses/integrations-design/ (the documentation's "Design: litellm, DSPy and
Azure").
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from typing import Any

from .._calls.call import Call, Endpoint
from .._calls.library import LibraryCall, current
from .._calls.operations import OPERATIONS, Operation
from .._calls.runtime import Runtime
from .._patching import shared as _shared
from .._patching.hooks import Hooks, Seam, Wrapper
from .._patching.providers import provider_of_litellm, server_of
from .._patching.streams import AsyncStreamProxy, SyncStreamProxy
from .._patching.wrappers import Switch
from ..signals import SERVER_PREMISED
from . import _litellm_websocket

__all__ = ["LiteLLMResponsesInstrumentor"]

_instruments = ("litellm >= 1.81.0",)
_USER = "LiteLLMResponsesInstrumentor"
_HANDLERS = "litellm.llms.custom_httpx.llm_http_handler"
_BRIDGE = "litellm.responses.litellm_completion_transformation.handler"
_LOGGING = "litellm.litellm_core_utils.litellm_logging"
_NOTHING: frozenset[str] = frozenset()

# Public function -> operation. Each `a...` twin is a coroutine function.
_FUNCTIONS = {
    "responses": "chat",
    "get_responses": "fetch_response",
    "delete_responses": "delete_response",
    "cancel_responses": "cancel_response",
    "compact_responses": "compact_response",
    "list_input_items": "list_input_items",
}
# The handler methods that build and send each operation's request (sync-named: litellm calls them with
# `_is_async=True` for the async twins, and they return the coroutine that sends).
_SENDERS = (
    "response_api_handler",
    "get_responses",
    "delete_response_api_handler",
    "cancel_response_api_handler",
    "compact_response_api_handler",
    "list_responses_input_items",
)
# `responses(input, model, ...)` and `compact_responses(input, model, ...)` take these two positionally.
_POSITIONAL = ("input", "model")


@lru_cache(maxsize=256)
def _route(model: object, provider: object, api_base: object) -> tuple[str | None, bool]:
    """litellm's provider for a model string, and whether litellm bridges its Responses calls to Chat Completions
    (the provider has no Responses API config): asked of litellm itself, once per model, provider and address."""
    import litellm  # type: ignore[import-not-found]  # imported by the app already: this runs in its calls

    if not isinstance(model, str):
        return None, False
    try:
        _, name, _, _ = litellm.get_llm_provider(
            model=model,
            custom_llm_provider=provider if isinstance(provider, str) else None,
            api_base=api_base if isinstance(api_base, str) else None,
        )
        manager = litellm.ProviderConfigManager
        config = manager.get_provider_responses_api_config(provider=litellm.LlmProviders(name), model=model)
    except Exception:
        return (provider if isinstance(provider, str) else None), False
    return name, config is None


def _normalised(op: Operation, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The request as keywords (``input`` and ``model`` may come positionally)."""
    if not args or op.name not in ("chat", "compact_response"):
        return dict(kwargs)
    return {**dict(zip(_POSITIONAL, args, strict=False)), **kwargs}


def _endpoint(kwargs: Mapping[str, Any]) -> tuple[Endpoint, frozenset[str]]:
    """The server, provider and the signals that cannot hold (a bridged provider) of an app's request."""
    api_base = kwargs.get("api_base") or kwargs.get("base_url")
    base = api_base if isinstance(api_base, str) else None
    server = server_of(base)
    name, bridged = _route(kwargs.get("model"), kwargs.get("custom_llm_provider"), base)
    return (server, provider_of_litellm(name, server.address)), SERVER_PREMISED if bridged else _NOTHING


def _read(result: Any) -> tuple[Any, str | None]:
    """A litellm result and its request id (litellm keeps the provider's headers in ``_hidden_params``)."""
    hidden = getattr(result, "_hidden_params", None)
    headers = hidden.get("headers") if isinstance(hidden, dict) else None
    request_id = headers.get("x-request-id") if isinstance(headers, dict) else None
    return result, request_id if isinstance(request_id, str) else None


def _read_listing(result: Any) -> tuple[Any, str | None]:
    return result, None


def _stream_proxy(result: Any) -> Callable[[Any, Call], Any]:
    """The proxy for a library's event iterator: its events are the SDK's shape (``type``, ``item``, ``response``)."""
    return AsyncStreamProxy.for_call if hasattr(result, "__anext__") else SyncStreamProxy.for_call


def outer_sync(switch: Switch, runtime: Runtime, op: Operation) -> Wrapper:
    """A public function: the request checked now (strict mode refuses here), the call ended with what the app
    gets."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not switch.enabled():
            return wrapped(*args, **kwargs)
        pending = LibraryCall(runtime, op)
        try:
            request = _normalised(op, args, kwargs)
            endpoint, dropped = _endpoint(request)
            pending.prepare((), request, endpoint, dropped)
        except Exception:
            runtime.telemetry.internal_error("start_call")
        refusal = pending.refusal()
        if refusal is not None:
            raise refusal
        token = pending.enter()
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            pending.failed(exc)
            raise
        finally:
            pending.leave(token)
        return pending.returned(result, _read, _stream_proxy(result))

    return wrapper


def outer_async(switch: Switch, runtime: Runtime, op: Operation) -> Wrapper:
    """The coroutine twin of :func:`outer_sync`."""

    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not switch.enabled():
            return await wrapped(*args, **kwargs)
        pending = LibraryCall(runtime, op)
        try:
            request = _normalised(op, args, kwargs)
            endpoint, dropped = _endpoint(request)
            await pending.aprepare((), request, endpoint, dropped)
        except Exception:
            runtime.telemetry.internal_error("start_call")
        refusal = pending.refusal()
        if refusal is not None:
            raise refusal
        token = pending.enter()
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            pending.failed(exc)
            raise
        finally:
            pending.leave(token)
        return pending.returned(result, _read, _stream_proxy(result))

    return wrapper


def handler(bridged: bool) -> Wrapper:
    """A handler method that builds and sends the request: where it goes (the provider the handler was given,
    whether it bridges, the model without its routing prefix), and a failure inside it noted (litellm may retry,
    or map it for the app). The call opens at :func:`pre_call`, when the request is about to leave: a request the
    handler fails to build never reached a server."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        pending = current()
        if pending is None:
            return wrapped(*args, **kwargs)
        params = kwargs.get("litellm_params")
        api_base = getattr(params, "api_base", None)
        server = server_of(api_base if isinstance(api_base, str) else None)
        provider = kwargs.get("custom_llm_provider")
        endpoint: Endpoint | None = None
        if server.address is not None or isinstance(provider, str):
            endpoint = (server, provider_of_litellm(provider if isinstance(provider, str) else None, server.address))
        model = kwargs.get("model")
        pending.routed(endpoint, SERVER_PREMISED if bridged else None, model if isinstance(model, str) else None)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            pending.note_failure(exc)
            raise
        if kwargs.get("_is_async") is True and hasattr(result, "__await__"):
            return _noting(result, pending)
        return result

    return wrapper


def pre_call(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Logging.pre_call``: litellm logs a request here, in every handler (and in the Chat Completions path a
    bridged call takes), right before it sends it: the pending call opens."""
    pending = current()
    if pending is not None:
        pending.sent()
    return wrapped(*args, **kwargs)


async def _noting(coroutine: Any, pending: LibraryCall) -> Any:
    """The handler's coroutine (the async twins send when it is awaited), its failure noted."""
    try:
        return await coroutine
    except BaseException as exc:
        pending.note_failure(exc)
        raise


def _seams(switch: Switch, runtime: Runtime) -> list[Seam]:
    seams = []
    for name, operation in _FUNCTIONS.items():
        op = OPERATIONS[operation]
        seams.append(Seam("litellm", "", name, outer_sync(switch, runtime, op)))
        seams.append(Seam("litellm", "", "a" + name, outer_async(switch, runtime, op)))
    native = handler(bridged=False)
    seams += [Seam(_HANDLERS, "BaseLLMHTTPHandler", method, native) for method in _SENDERS]
    seams.append(Seam(_BRIDGE, "LiteLLMCompletionTransformationHandler", "response_api_handler", handler(bridged=True)))
    seams.append(Seam(_LOGGING, "Logging", "pre_call", pre_call))
    return seams + _litellm_websocket.seams(switch, runtime)


class LiteLLMResponsesInstrumentor(_shared.CheckedInstrumentor):
    """Instruments litellm's Responses API functions (``litellm.responses()``, ``aresponses()``, ``get_responses()``
    and the others): the spans, metrics and signals of :class:`~otel_responses.ResponsesInstrumentor`, whose settings
    and ledger it shares. litellm is patched when the app imports it, never imported here."""

    _switch: Switch | None = None
    _hooks: Hooks | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        runtime = _shared.acquire(_USER, kwargs)
        switch = Switch()
        hooks = Hooks("litellm", lambda: _seams(switch, runtime))
        self._switch, self._hooks = switch, hooks
        hooks.start()

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._switch is not None:
            self._switch.on = False
        if self._hooks is not None:
            self._hooks.stop()
        self._switch = self._hooks = None
        _shared.release(_USER)
