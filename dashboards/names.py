"""Metric and label names as the OpenTelemetry Prometheus exporter writes them, for the panels and the rules alike.

Derived from ``otel_responses.attributes`` (dots become underscores, counters get ``_total``, seconds histograms
``_seconds``), so a renamed attribute cannot leave a query reading a metric that no longer exists.
"""

from __future__ import annotations

from otel_responses import attributes as attr
from otel_responses.docs_links import SIGNALS_PAGE, page_url

#: Where every runbook link points by default: the Signals page of the documentation, whose sections (one per signal,
#: the signal's name as anchor) are the runbooks. ``python -m dashboards.build --docs-url BASE`` points them at a copy
#: of the site hosted elsewhere.
RUNBOOK_BASE = page_url(SIGNALS_PAGE)


def label(attribute: str) -> str:
    """A span/metric attribute as a Prometheus label: dots become underscores."""
    return attribute.replace(".", "_")


# Metric names as the OpenTelemetry Prometheus exporter writes them.
CALLS = label(attr.METRIC_CALLS) + "_total"
SIGNALS = label(attr.METRIC_SIGNALS) + "_total"
TOKENS = label(attr.METRIC_TOKENS) + "_total"
TOKEN_USAGE_SUM = label(attr.METRIC_TOKEN_USAGE) + "_sum"
ENCRYPTED_ITEMS = label(attr.METRIC_ENCRYPTED_ITEMS) + "_total"
WITHHELD_ITEMS = label(attr.METRIC_WITHHELD_ITEMS) + "_total"
DURATION = label(attr.METRIC_OPERATION_DURATION) + "_seconds"
COST = label(attr.METRIC_COST) + "_total"
COST_SAVED = label(attr.METRIC_COST_SAVED) + "_total"
# The latest dialect's GenAI metrics (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental): the inference
# duration, and the usage counters where the default dialect has one token histogram.
INFERENCE_DURATION = label(attr.METRIC_INFERENCE_DURATION) + "_seconds"
USAGE_INPUT = label(attr.METRIC_USAGE_INPUT_TOKENS) + "_total"
USAGE_OUTPUT = label(attr.METRIC_USAGE_OUTPUT_TOKENS) + "_total"
USAGE_CACHE_READ = label(attr.METRIC_USAGE_CACHE_READ_INPUT_TOKENS) + "_total"
USAGE_CACHE_WRITE = label(attr.METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS) + "_total"
USAGE_REASONING = label(attr.METRIC_USAGE_REASONING_OUTPUT_TOKENS) + "_total"

# Labels.
MODEL = label(attr.GEN_AI_REQUEST_MODEL)
SIGNAL_NAME = label(attr.SIGNAL_NAME)
SEVERITY = label(attr.SIGNAL_SEVERITY)
STATE_MODE = label(attr.STATE_MODE)
STORE = label(attr.STORE)
CONTEXT_LOSS = label(attr.CONTEXT_LOSS)
TOKEN_KIND = label(attr.TOKEN_KIND)
TOKEN_TYPE = label(attr.GEN_AI_TOKEN_TYPE)
DIRECTION = label(attr.DIRECTION)
ERROR_TYPE = label(attr.ERROR_TYPE)
TURN_DEPTH = label(attr.TURN_DEPTH)
TRUNCATION = label(attr.TRUNCATION)
WITHHELD_REASON = label(attr.WITHHELD_REASON)
CURRENCY = label(attr.COST_CURRENCY)
#: The dialects of the GenAI conventions a dashboard is built for (``python -m dashboards.build --semconv``).
DEFAULT = "default"
LATEST = "latest"
DIALECTS = (DEFAULT, LATEST)
#: The service: ``job`` as Prometheus sets it when scraping, or as the Collector's prometheus exporter derives
#: it from the resource's ``service.name`` (``service.namespace/service.name`` when a namespace is set).
SERVICE = "job"
