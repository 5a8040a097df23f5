"""The argument types and the checks the commands make before any work (a module of its own, below the command line
and each command's module, which all import it)."""

from __future__ import annotations

import argparse
import importlib
import socket
from collections.abc import Callable, Sequence
from typing import TypeVar
from urllib.parse import urlsplit

from .._redaction import shown_url

_N = TypeVar("_N", int, float)

REACH_TIMEOUT = 2.0  # seconds: a collector on the network answers a TCP connect well within this


def port(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"port out of range: {number}")
    return number


def url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {shown_url(text)!r}")
    try:
        parts.port  # noqa: B018  # read here, so that a port out of range is this usage error, not a traceback later
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a valid port in URL: {shown_url(text)!r}") from None
    return text


def positive(text: str) -> float:
    return _positive(text, float, "not a number")


def positive_count(text: str) -> int:
    """A positive whole number (of bytes, say)."""
    return _positive(text, int, "not a whole number")


def _positive(text: str, kind: Callable[[str], _N], what: str) -> _N:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def missing_module(modules: Sequence[str]) -> str | None:
    """The first module that cannot be imported, checked before any work so the user gets advice, not a traceback."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            return error.name or module
    return None


OTLP_SIGNAL_PATHS = ("/v1/traces", "/v1/metrics")


def otlp_base(url: str) -> tuple[str, str | None]:
    """The base URL the signal paths are appended to (as OTEL_EXPORTER_OTLP_ENDPOINT is), and the signal path
    dropped from it: a signal's own URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT's form) would be posted to at
    .../v1/traces/v1/traces otherwise."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for signal_path in OTLP_SIGNAL_PATHS:
        if path.endswith(signal_path):
            return parts._replace(path=path.removesuffix(signal_path)).geturl(), signal_path
    return url, None


def unreachable(url: str, timeout: float = REACH_TIMEOUT) -> str | None:
    """Why a TCP connection to the URL's host and port fails, or None: checked up front, because the OTLP
    exporters would otherwise retry for seconds in the background and the run would still end in success."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g}s"
    except OSError as error:
        return error.strerror or type(error).__name__
