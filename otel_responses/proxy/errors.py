"""Errors both ways: what the proxy answers itself, in the API's error shape (``{"error": {message, type, param,
code}}``, which every SDK parses), and the exceptions a call through the SDK would have raised for what the upstream
answered, so that a forwarded call is recorded as the in-process one is (``error.type``, the status, the API's
``code``, which confirms or clears a signal).

Messages the proxy writes name the limit or the signal and its fix, never a value from the request.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple, cast

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


class _Answer(NamedTuple):
    """What the SDK's status errors read of an HTTP response: its request, status and headers."""

    request: Any
    status_code: int
    headers: dict[str, str]


def status_error(status: int, parsed: Any, request_id: str | None) -> Exception:
    """The SDK's exception for an error status: ``BadRequestError`` for a 400 and so on, with the API's ``code``
    from the body's ``error`` object (``parsed``: the body's JSON, or None)."""
    import openai

    name = "InternalServerError" if status >= 500 else _STATUS_ERRORS.get(status, "APIStatusError")
    cls = getattr(openai, name, openai.APIStatusError)
    data = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
    # The SDK's errors read the request, status and headers of the response they came with; this is all of it.
    answer: Any = _Answer(None, status, {"x-request-id": request_id} if request_id is not None else {})
    error: Exception = cls(f"Error code: {status}", response=answer, body=data)
    return error


def connection_error(timed_out: bool) -> Exception:
    """The SDK's exception when the upstream could not be reached (or did not answer in time)."""
    import openai

    request = cast(Any, None)  # the SDK's request object: the proxy has none, and nothing reads it
    return openai.APITimeoutError(request) if timed_out else openai.APIConnectionError(request=request)
