"""What a proxy is started with, checked before anything listens: the one upstream it forwards to, where it listens,
and its limits. Every instrumentation setting (strict mode, the shared ledger, ...) is read as in-process, from the
environment and the option table (``config.py``); these are the proxy's own.

The checks are the security model's: the upstream is a fixed ``http(s)`` origin (no request chooses another);
plain ``http://`` only to a loopback host unless explicitly allowed; loopback listening by default, a wider address
said out loud by the command.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from .._redaction import shown_url

DEFAULT_UPSTREAM = "https://api.openai.com/v1"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024  # a long replay with images inline stays well under it
# The analysis bound: a longer body is forwarded unanalysed (counted). A long coding agent's session replayed whole is
# a few MB; a body of 16 MiB is about 500,000 small items, whose analysis would hold a core for seconds and half a
# gigabyte of memory.
DEFAULT_MAX_ANALYSED_BYTES = 16 * 1024 * 1024
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 600.0  # the SDK's own default: a reasoning model may think for minutes between events
DEFAULT_IDLE_TIMEOUT = 75.0  # an idle keep-alive connection, or one whose request head never completes
DEFAULT_GRACE = 30.0  # seconds in-flight requests and streams get to finish after SIGTERM
_LOOPBACK_NAMES = ("localhost", "localhost.")


class ProxySettingsError(ValueError):
    """A proxy setting cannot be used; the message names it."""


def is_loopback(host: str) -> bool:
    """A loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Upstream:
    """The one origin requests go to, and the API root under it (``/v1``): what the operation table reads paths
    under."""

    scheme: str
    host: str
    port: int
    root: str

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return f"{self.scheme}://{host}" + ("" if self.port == default else f":{self.port}")

    @property
    def url(self) -> str:
        return self.origin + self.root


def upstream_of(url: str, allow_http: bool = False) -> Upstream:
    """The upstream a URL names; ``ProxySettingsError`` for anything but an ``http(s)`` origin with an optional path
    (no credentials, query or fragment), and for plain ``http`` to a host that is not loopback unless allowed. No
    message repeats a credential: a URL that does not parse is shown by its scheme alone."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ProxySettingsError(
            f"--upstream is not a URL (its host or port cannot be read): {shown_url(url)}"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProxySettingsError(f"--upstream must be an http(s) URL, got {shown_url(url)}")
    if parts.username is not None or parts.password is not None:
        raise ProxySettingsError("--upstream must not carry credentials: clients send their own keys")
    if parts.query or parts.fragment:
        raise ProxySettingsError("--upstream takes an origin and a path only (no query, no fragment)")
    host = parts.hostname
    if parts.scheme == "http" and not allow_http and not is_loopback(host):
        raise ProxySettingsError(
            f"--upstream {parts.scheme}://{host}: plain http would send the clients' keys unencrypted; use https, or "
            "give --allow-http-upstream for a host on a network you trust"
        )
    return Upstream(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), parts.path.rstrip("/"))


def listen_of(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0: a free one) as a host and a port."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ProxySettingsError(f"--listen takes HOST:PORT, got {text!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ProxySettingsError(f"--listen: not a port number: {port_text!r}") from None
    if not 0 <= port < 65536:
        raise ProxySettingsError(f"--listen: port out of range: {port}")
    return host.strip("[]"), port


# The settings that are positive numbers (and the command's options of the same names).
LIMITS = ("max_body_bytes", "max_analysed_bytes", "connect_timeout", "read_timeout", "idle_timeout", "grace")


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """A proxy's own settings (see the module docstring). ``max_analysed_bytes``: the analysis bound (a longer
    body, as sent or decompressed, is forwarded unanalysed and counted; strict mode analyses it all the same).
    ``record``: off, the proxy only forwards (the floor the benchmark compares against)."""

    upstream: Upstream
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_analysed_bytes: int = DEFAULT_MAX_ANALYSED_BYTES
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    grace: float = DEFAULT_GRACE
    record: bool = True

    def __post_init__(self) -> None:
        for name in LIMITS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ProxySettingsError(f"{name} must be a positive number, got {value!r}")
        if not 0 <= self.port < 65536:
            raise ProxySettingsError(f"port out of range: {self.port}")

    @property
    def loopback_only(self) -> bool:
        """It listens on loopback only: nothing off this machine reaches it."""
        return is_loopback(self.host)
