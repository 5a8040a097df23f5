"""Where the documentation is: its URL, in one place, and the address of a page or a signal's section there.

The site is built by mkdocs from ``docs/`` (one directory per page: ``signals.md`` is ``signals/``); each signal's
section has the signal's name as its anchor. A team that hosts its own copy passes its root as ``base`` (the
dashboards builder, ``python -m dashboards.build --docs-url``; ``otel-responses dashboards --docs-url``; the report
page, ``otel-responses report --docs-url``): the same root everywhere. The standard library only:
``otel-responses --help`` and ``dashboards`` read it with nothing else installed.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

__all__ = ["DOCS_URL", "SIGNALS_PAGE", "NotASite", "check_site", "page_url", "signal_doc_url"]

#: The documentation site (also ``[project.urls] Documentation`` and mkdocs.yml's ``site_url``).
DOCS_URL: Final = "https://otel-responses.github.io/otel-responses/"
SIGNALS_PAGE: Final = "signals"


def page_url(page: str = "", anchor: str | None = None, base: str | None = None) -> str:
    """The address of ``page`` (a file of ``docs/`` without ``.md``; empty: the home page), at ``anchor``."""
    root = base or DOCS_URL
    if not root.endswith("/"):
        root += "/"
    url = f"{root}{page}/" if page else root
    return f"{url}#{anchor}" if anchor else url


def signal_doc_url(name: str, base: str | None = None) -> str:
    """The section of the signal ``name``: why it loses context, how to fix it, a request that raises it."""
    return page_url(SIGNALS_PAGE, name, base)


class NotASite(ValueError):
    """A URL that cannot be a documentation site's root (``check_site``)."""


_SITE_CHARACTERS: Final = re.compile(r"[A-Za-z0-9\-._~:/@!$&()*+,;=%]+")


def check_site(url: str) -> str:
    """``url`` if it can be a copy of the site's root: http(s) with a host, no query nor fragment (pages are
    appended to it), of the characters a URL needs and no quote nor space, so that it goes into the alert rules'
    YAML, the dashboard's JSON and the report's HTML as it is."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotASite(f"not an http(s) URL: {url!r}")
    if "#" in url or "?" in url or not _SITE_CHARACTERS.fullmatch(url):
        raise NotASite(f"not a documentation site's URL (no query, fragment, quote or space): {url!r}")
    return url
