"""Build the Grafana dashboard and the Prometheus alert rules from code.

    python -m dashboards.build           # rewrite both dashboards and dashboards/alerts/*.rules.yaml
    python -m dashboards.build --check   # exit 1 when a committed file differs from what this code builds
    python -m dashboards.build --docs-url https://docs.example.internal/otel-responses/   # runbooks: your copy
    python -m dashboards.build --semconv latest   # only the latest GenAI conventions' dashboard, and the rules

The dashboard has a form per dialect of the GenAI conventions (``context-health.json`` for the default one,
``context-health.latest.json`` for ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``: its counters are
``_total`` where the default's histograms are ``_sum``/``_count``); the alert rules read only this package's own
counters and serve both.

This module only writes: the dashboard is ``context_health.py`` and its rows ``rows/``, the alert rules
``rules.py``, both built from the names in ``names.py`` and the PromQL of ``promql.py``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dashboards.context_health import GRAFANA_VERSION, render_dashboard
from dashboards.names import DEFAULT, DIALECTS, LATEST, RUNBOOK_BASE
from dashboards.rules import render_rules
from otel_responses.docs_links import DOCS_URL

__all__ = [
    "DASHBOARD_FILE",
    "DASHBOARD_FILES",
    "GRAFANA_VERSION",
    "LATEST_DASHBOARD_FILE",
    "RULES_FILE",
    "RUNBOOK_BASE",
    "main",
    "render_dashboard",
    "render_rules",
]

HERE = Path(__file__).resolve().parent
DASHBOARD_FILE = HERE / "context-health.json"
LATEST_DASHBOARD_FILE = HERE / "context-health.latest.json"
DASHBOARD_FILES = {DEFAULT: DASHBOARD_FILE, LATEST: LATEST_DASHBOARD_FILE}
RULES_FILE = HERE / "alerts" / "otel-responses.rules.yaml"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.build", description="Build dashboards and rules.")
    parser.add_argument("--check", action="store_true", help="fail when a committed file differs from the build")
    parser.add_argument(
        "--docs-url",
        default=DOCS_URL,
        metavar="URL",
        help="where the documentation the runbook links lead to is hosted (default: %(default)s)",
    )
    parser.add_argument(
        "--semconv",
        choices=DIALECTS,
        help="only the dashboard for this dialect of the GenAI conventions (default: both), and the rules",
    )
    args = parser.parse_args(argv)
    dialects = [args.semconv] if args.semconv else list(DIALECTS)
    outputs = {DASHBOARD_FILES[d]: render_dashboard(args.docs_url, d) for d in dialects}
    outputs[RULES_FILE] = render_rules(args.docs_url)
    stale = [path for path, text in outputs.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(HERE.parent)} is out of date: run python -m dashboards.build", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(outputs[path])
        print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
