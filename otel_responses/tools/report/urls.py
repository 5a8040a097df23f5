"""Where the page's links go: each signal's documentation, and the tracing backend's view of a trace.

The standard library only: ``otel-responses --help`` builds the report command's options from here, and the
``dashboards`` command runs with nothing but the standard library installed.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from ...docs_links import SIGNALS_PAGE, page_url

# Where each signal's section of the documentation is: the signal's name is the anchor (otel_responses/docs_links.py
# holds the site's address).
DOCS_URL: Final = page_url(SIGNALS_PAGE)
TRACE_ID: Final = "{trace_id}"
SPAN_ID: Final = "{span_id}"


class BadTemplate(ValueError):
    """A link template that is not an http(s) URL (with ``{trace_id}``, for a tracing backend)."""


def check_trace_url(template: str) -> str:
    """A link template for a tracing backend: http(s), with ``{trace_id}`` (``{span_id}`` optional)."""
    parts = urlsplit(template.replace(TRACE_ID, "0").replace(SPAN_ID, "0"))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadTemplate(f"not an http(s) URL: {template!r}")
    if TRACE_ID not in template:
        raise BadTemplate(f"no {TRACE_ID} in {template!r}")
    return template


def check_docs_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadTemplate(f"not an http(s) URL: {url!r}")
    return url
