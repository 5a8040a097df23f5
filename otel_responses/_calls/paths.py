"""The HTTP surface of the operations: which request (method and path) performs which entry of ``OPERATIONS``, and the
arguments its facts builder reads, as the SDK method would have been called. A front end that sees requests rather
than SDK calls (the forwarding proxy) reads its calls from here; the operations themselves stay in one table.

Paths are read under the API's root, whatever it is: the upstream's own path (``/v1``, a gateway's prefix), and
Azure OpenAI's shapes (``/openai/v1/...``, ``/openai/...`` with an ``api-version`` query, and a deployment's
``/openai/deployments/<name>/...``). A path the table does not know has no route: the front end passes it through.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import unquote

from .operations import OPERATIONS, Operation, read_nothing

# What may stand between the API root and an operation's path: Azure's resource prefix (a deployment's too) and the
# version segment.
_PREFIX = re.compile(r"(?:/openai(?:/deployments/[^/]+)?)?(?:/v1)?(?=/)")
_ID = r"([^/]+)"

Build = Callable[["re.Match[str]", Mapping[str, str]], tuple[tuple[Any, ...], dict[str, Any]]]


class Route(NamedTuple):
    """One request's operation, and the positional and keyword arguments the SDK method would have had (ids from
    the path, settings from the query). ``body``: the JSON body is the method's keywords too (a create); ``azure``:
    the path has Azure OpenAI's shape (``/openai/...``), the provider the SDK's Azure client reaches. ``reads``: the
    operation reads its answer (a listing or a deletion is recorded without reading its body)."""

    operation: Operation
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    body: bool
    azure: bool = False
    reads: bool = True


def _nothing(match: re.Match[str], query: Mapping[str, str]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (), {}


def _target(match: re.Match[str], query: Mapping[str, str]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A response or a conversation named by the path; ``stream=true`` resumes a stored response's events."""
    return (unquote(match[1]),), ({"stream": True} if query.get("stream") == "true" else {})


def _item(match: re.Match[str], query: Mapping[str, str]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A conversation's item: the item is the method's first argument, the conversation a keyword."""
    return (unquote(match[2]),), {"conversation_id": unquote(match[1])}


# (method, path under the API root, operation, arguments, whether the body is the keywords)
_TABLE: tuple[tuple[str, str, str, Build, bool], ...] = (
    ("POST", "/responses", "chat", _nothing, True),
    ("POST", "/responses/compact", "compact_response", _nothing, True),
    ("POST", "/responses/input_tokens", "count_input_tokens", _nothing, True),
    ("GET", f"/responses/{_ID}", "fetch_response", _target, False),
    ("DELETE", f"/responses/{_ID}", "delete_response", _target, False),
    ("POST", f"/responses/{_ID}/cancel", "cancel_response", _target, False),
    ("GET", f"/responses/{_ID}/input_items", "list_input_items", _target, False),
    ("POST", "/conversations", "create_conversation", _nothing, True),
    ("GET", f"/conversations/{_ID}", "retrieve_conversation", _target, False),
    ("POST", f"/conversations/{_ID}", "update_conversation", _target, True),
    ("DELETE", f"/conversations/{_ID}", "delete_conversation", _target, False),
    ("GET", f"/conversations/{_ID}/items", "list_conversation_items", _target, False),
    ("POST", f"/conversations/{_ID}/items", "create_conversation_items", _target, True),
    ("GET", f"/conversations/{_ID}/items/{_ID}", "retrieve_conversation_item", _item, False),
    ("DELETE", f"/conversations/{_ID}/items/{_ID}", "delete_conversation_item", _item, False),
)
_ROUTES: dict[str, tuple[tuple[re.Pattern[str], Operation, Build, bool], ...]] = {}
for _method, _path, _name, _build, _body in _TABLE:
    _ROUTES[_method] = (*_ROUTES.get(_method, ()), (re.compile(_path), OPERATIONS[_name], _build, _body))


def operation_path(path: str, root: str = "") -> tuple[str, bool] | None:
    """``path`` under the API root (``/responses/resp_1``) and whether it came in Azure's shape, or None when it is
    outside it. ``root``: the upstream URL's own path (``/v1``), stripped first when the path starts with it. The
    shape is read from the whole path before the operation, root included: an upstream whose root is Azure's own
    (``/openai/v1``, a gateway in front of Azure) is still reached in Azure's shape."""
    root = root.rstrip("/")
    under = path[len(root) :] if root and (path == root or path.startswith(root + "/")) else path
    prefix = _PREFIX.match(under)
    rest = under[prefix.end() :] if prefix is not None else under
    if not rest.startswith("/"):
        return None
    azure = "openai" in path[: len(path) - len(rest)].split("/")
    return (rest.rstrip("/") or "/"), azure


def route(method: str, path: str, query: Mapping[str, str], root: str = "") -> Route | None:
    """The operation ``method path`` performs, with its arguments; None for a request the table does not know."""
    routes = _ROUTES.get(method.upper())
    if routes is None:
        return None
    found = operation_path(path, root)
    if found is None:
        return None
    rest, azure = found
    for pattern, operation, build, body in routes:
        match = pattern.fullmatch(rest)
        if match is not None:
            args, kwargs = build(match, query)
            return Route(operation, args, kwargs, body, azure, operation.read is not read_nothing)
    return None


def is_websocket_path(path: str, root: str = "") -> bool:
    """``GET /responses`` upgraded to a WebSocket: WebSocket mode (``client.responses.connect()``)."""
    found = operation_path(path, root)
    return found is not None and found[0] == "/responses"
