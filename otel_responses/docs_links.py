"""Where the documentation is: its URL, in one place, and the address of a page or a signal's section there.

The site is built by mkdocs from ``docs/`` (one directory per page: ``signals.md`` is ``signals/``); each signal's
section has the signal's name as its anchor. A team that hosts its own copy passes its ``base`` (the dashboards
builder, ``python -m dashboards.build --docs-url``; the report page, ``otel-responses report --docs-url``). The
standard library only: ``otel-responses --help`` and ``dashboards`` read it with nothing else installed.
"""

from __future__ import annotations

from typing import Final

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
