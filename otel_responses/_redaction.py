"""A URL as a message may show it. A URL a person gives a command (an upstream, an OTLP endpoint) may carry a
password (``https://user:secret@host``) or a key in its query, and a message about it goes to a terminal, a log, a
CI page: its credentials, query and fragment are replaced by ``***``, and so is a host in brackets that is no
address (it may hold anything). Standard library only: the commands' argument checks use it before anything else
is imported."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

HIDDEN = "***"
_AUTHORITY_END = re.compile(r"[/?#]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


def shown_url(text: str) -> str:
    """``text`` without what may be secret in it."""
    scheme, sep, rest = text.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):  # `user:password@host` reads as a scheme and a path: none of it
        return HIDDEN
    end = _AUTHORITY_END.search(rest)
    authority, tail = (rest[: end.start()], rest[end.start() :]) if end else (rest, "")
    if "@" in authority:
        authority = f"{HIDDEN}@" + authority.rpartition("@")[2]
    if "[" in authority or "]" in authority:
        try:
            urlsplit(text).hostname  # noqa: B018  # an address in brackets that is none raises
        except ValueError:
            authority = HIDDEN
    path, query, fragment = tail, "", ""
    if "#" in path:
        path, fragment = path.split("#", 1)[0], f"#{HIDDEN}"
    if "?" in path:
        path, query = path.split("?", 1)[0], f"?{HIDDEN}"
    return f"{scheme}://{authority}{path}{query}{fragment}"
