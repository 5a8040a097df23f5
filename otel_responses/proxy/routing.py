"""Which call a request is, read from its path as the upstream reads it: percent-decoded once (RFC 3986 reads
``%72`` as ``r``; a server that decodes ``%2F`` reads it as ``/``), dot segments resolved, repeated and trailing
slashes dropped. ``POST /v1/%72esponses`` is a create, recorded and checked like any other; the path goes upstream
as the client sent it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from urllib.parse import unquote

from .._calls.paths import Route, is_websocket_path, route

_SLASHES = re.compile(r"/{2,}")


def canonical_path(raw_path: str) -> str:
    """One form for every spelling of a path: ``/v1/%72esponses/``, ``/v1//responses`` and ``/v1/x/../responses``
    are ``/v1/responses``."""
    decoded = _SLASHES.sub("/", unquote(raw_path))
    return posixpath.normpath(decoded) if decoded.startswith("/") else decoded


def _for_table(path: str) -> str:
    """The canonical path as the operation table takes it: the table decodes the ids it reads from a path, so a
    ``%`` left after the one decoding is written as ``%25`` (an id is decoded once, as the upstream decodes it)."""
    return path.replace("%", "%25")


def route_of(method: str, raw_path: str, query: Mapping[str, str], root: str) -> Route | None:
    """The operation a request performs, or None for a request the table does not know (forwarded unrecorded)."""
    return route(method, _for_table(canonical_path(raw_path)), query, root)


def is_responses_socket(raw_path: str, root: str) -> bool:
    """A WebSocket upgrade of ``/responses``, however spelt: WebSocket mode."""
    return is_websocket_path(_for_table(canonical_path(raw_path)), root)
