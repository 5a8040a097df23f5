"""Which headers cross the proxy: every end-to-end header both ways, unchanged (credentials and trace context
included: they are the client's and go upstream as sent); the hop-by-hop ones (RFC 9110 section 7.6.1) stay on
their hop. ``Host`` names the proxy on the client's hop and the upstream on the other; a request's ``Expect`` and
``Content-Length`` are this hop's too (the proxy reads the body whole before it forwards it, and its length is the
same).

Nothing here is recorded. The analysis reads a request's ``Content-Encoding`` and the trace context's headers
(``forward.read_headers``): as W3C Trace Context propagation has it, the client's ``tracestate`` becomes the trace
state of the proxy's span (exported with it, bounded by the SDK). And whom the call is made as (``caller``): the
``OpenAI-Organization`` and ``OpenAI-Project`` it names, and its credential as a digest only (the key never leaves
the relay), each fingerprinted by the analysis and compared, never exported. No other header value reaches a span, a
metric or a log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from multidict import CIMultiDict

from .._patching.identity import credential_digest

# Hop-by-hop headers, and the ones the WebSocket handshake makes on each hop itself.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_REQUEST_OWN = frozenset({"host", "content-length", "expect"})
_HANDSHAKE_OWN = frozenset(
    {"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-accept"}
)
PROTOCOL_HEADER = "sec-websocket-protocol"
# Whom a call is made as: the headers the SDK sends for ``organization=`` and ``project=``, and the credential's
# digest under a name no request header has (the SDK sends the key as ``Authorization: Bearer``, Azure's as
# ``api-key``).
ORGANIZATION_HEADER = "openai-organization"
PROJECT_HEADER = "openai-project"
CREDENTIAL_DIGEST = ":credential-sha256"
_BEARER = "bearer "


def caller(headers: CIMultiDict[str] | Mapping[str, str]) -> list[tuple[str, str]]:
    """Whom a request is made as, for the analysis: its organization and project as named, its credential (the
    bearer token or ``api-key``, the first sent) as a digest."""
    found = [(name, value) for name in (ORGANIZATION_HEADER, PROJECT_HEADER) if (value := headers.get(name))]
    key = headers.get("authorization")
    if key is not None and key[: len(_BEARER)].lower() == _BEARER:
        key = key[len(_BEARER) :].strip()
    elif key is not None:
        key = None  # another scheme: not a key the SDK sends
    key = key or headers.get("api-key")
    if key:
        found.append((CREDENTIAL_DIGEST, credential_digest(key)))
    return found


def _named_by_connection(headers: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The headers a ``Connection`` header declares hop-by-hop (``Connection: close, X-Hop``)."""
    named: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            named.update(token.strip().lower() for token in value.split(",") if token.strip())
    return frozenset(named)


def _kept(headers: Iterable[tuple[str, str]], dropped: frozenset[str]) -> CIMultiDict[str]:
    pairs = list(headers)
    also = _named_by_connection(pairs)
    kept: CIMultiDict[str] = CIMultiDict()
    for name, value in pairs:
        lowered = name.lower()
        if lowered not in dropped and lowered not in also:
            kept.add(name, value)
    return kept


def upstream_request(headers: Iterable[tuple[str, str]]) -> CIMultiDict[str]:
    """The headers a request goes upstream with (aiohttp adds ``Host`` and ``Content-Length``)."""
    return _kept(headers, HOP_BY_HOP | _REQUEST_OWN)


def upstream_handshake(headers: Iterable[tuple[str, str]]) -> CIMultiDict[str]:
    """The headers of a WebSocket handshake sent upstream: the client's own, less what each hop negotiates (the
    subprotocols go through ``ws_connect(protocols=...)``)."""
    return _kept(headers, HOP_BY_HOP | _REQUEST_OWN | _HANDSHAKE_OWN | {PROTOCOL_HEADER})


def client_response(headers: Iterable[tuple[str, str]]) -> CIMultiDict[str]:
    """The headers a response reaches the client with."""
    return _kept(headers, HOP_BY_HOP)


def refused_handshake(headers: Iterable[tuple[str, str]]) -> CIMultiDict[str]:
    """The headers of an upstream's refusal of a WebSocket upgrade, relayed with a body of the proxy's own."""
    return _kept(headers, HOP_BY_HOP | {"content-length", "content-encoding"})


def protocols(value: str | None) -> tuple[str, ...]:
    """The subprotocols a WebSocket client asks for (``Sec-WebSocket-Protocol: a, b``)."""
    return tuple(token.strip() for token in (value or "").split(",") if token.strip())
