"""Build the Grafana dashboard and the Prometheus alert rules from code.

    python -m dashboards.build           # rewrite dashboards/context-health.json and dashboards/alerts/*.rules.yaml
    python -m dashboards.build --check   # exit 1 when a committed file differs from what this code builds
    python -m dashboards.build --docs-url https://docs.example.internal/otel-responses/   # runbooks: your copy

This module only writes: the dashboard is ``context_health.py`` and its rows ``rows/``, the alert rules
``rules.py``, both built from the names in ``names.py`` and the PromQL of ``promql.py``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dashboards.context_health import GRAFANA_VERSION, render_dashboard
from dashboards.names import RUNBOOK_BASE
from dashboards.rules import render_rules
from otel_responses.docs_links import DOCS_URL

__all__ = [
    "DASHBOARD_FILE",
    "GRAFANA_VERSION",
    "RULES_FILE",
    "RUNBOOK_BASE",
    "main",
    "render_dashboard",
    "render_rules",
]

HERE = Path(__file__).resolve().parent
DASHBOARD_FILE = HERE / "context-health.json"
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
    args = parser.parse_args(argv)
    outputs = {DASHBOARD_FILE: render_dashboard(args.docs_url), RULES_FILE: render_rules(args.docs_url)}
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
