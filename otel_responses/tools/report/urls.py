"""Where the page's links go: each signal's documentation, and the tracing backend's view of a trace.

The standard library only: ``otel-responses --help`` builds the report command's options from here, and the
``dashboards`` command runs with nothing but the standard library installed.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from ...docs_links import DOCS_URL as SITE_URL
from ...docs_links import SIGNALS_PAGE, NotASite, check_site, page_url

# The documentation site's root (otel_responses/docs_links.py holds it): each signal's name links to its section
# of the Signals page there, the name being the anchor.
DOCS_URL: Final = SITE_URL
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
    """A copy of the documentation site's root (see ``docs_links.check_site``)."""
    try:
        return check_site(url)
    except NotASite as error:
        raise BadTemplate(str(error)) from None


def signals_page(docs_url: str = DOCS_URL) -> str:
    """The Signals page of the site at ``docs_url``."""
    return page_url(SIGNALS_PAGE, base=docs_url)


def signal_link(name: str, docs_url: str = DOCS_URL) -> str:
    """Where a signal's name on the page links to: its section of the Signals page."""
    return f"{signals_page(docs_url)}#{name}"
