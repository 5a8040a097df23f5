"""Errors both ways: what the proxy answers itself, in the API's error shape (``{"error": {message, type, param,
code}}``, which every SDK parses), and the exceptions a call through the SDK would have raised for what the upstream
answered, so that a forwarded call is recorded as the in-process one is (``error.type``, the status, the API's
``code``, which confirms or clears a signal).

Messages the proxy writes name the limit or the signal and its fix, never a value from the request.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any

from ..signals import ContextLossError

# The SDK's exception for each status (openai._client's table), by the names it exports.
_STATUS_ERRORS = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
}


# Strict mode's answer to a body the proxy cannot read: a code of the proxy's own, never a signal's name.
UNREADABLE_BODY = "proxy_unreadable_body"


def body(message: str, type_: str, code: str | None = None) -> bytes:
    """An error body in the API's shape."""
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}}).encode()


def refusal_body(error: ContextLossError) -> bytes:
    """Strict mode's refusal, as a 400 the SDKs raise (and do not retry): the signal as the code, its meaning and fix
    as the message."""
    return body(str(error), "invalid_request_error", error.signal)


def unreadable_event(message: str) -> str:
    """Strict mode's refusal of a WebSocket frame it cannot read: the ``error`` event the API sends for a bad
    frame, with the proxy's own code."""
    inner = {"message": message, "type": "invalid_request_error", "param": None, "code": UNREADABLE_BODY}
    return json.dumps({"type": "error", "status": 400, "error": inner})


def _http() -> ModuleType:
    """The HTTP library the SDK is built on: ``httpx2`` from openai 3.60, ``httpx`` before. Its errors read the
    request's headers (to drop credentials) and the response's history, so they get real objects of it."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


def _request() -> Any:
    """A request with no header and a placeholder address: what the SDK's errors keep of the proxy's call (never its
    credentials, path or body)."""
    return _http().Request("POST", "http://upstream.invalid/")


def status_error(status: int, parsed: Any, request_id: str | None) -> Exception:
    """The SDK's exception for an error status: ``BadRequestError`` for a 400 and so on, with the API's ``code``
    from the body's ``error`` object (``parsed``: the body's JSON, or None)."""
    import openai

    name = "InternalServerError" if status >= 500 else _STATUS_ERRORS.get(status, "APIStatusError")
    cls = getattr(openai, name, openai.APIStatusError)
    data = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
    headers = {"x-request-id": request_id} if request_id is not None else {}
    # The SDK's errors read the request, status and headers of the response they came with; this is all of it.
    answer = _http().Response(status, headers=headers, request=_request())
    error: Exception = cls(f"Error code: {status}", response=answer, body=data)
    return error


def connection_error(timed_out: bool) -> Exception:
    """The SDK's exception when the upstream could not be reached (or did not answer in time)."""
    import openai

    request = _request()
    return openai.APITimeoutError(request) if timed_out else openai.APIConnectionError(request=request)
