"""Build the Grafana dashboard and the Prometheus alert rules from code.

    python -m dashboards.build           # rewrite dashboards/context-health.json and dashboards/alerts/*.rules.yaml
    python -m dashboards.build --check   # exit 1 when a committed file differs from what this code builds

Metric and label names are derived from ``otel_responses.attributes`` the way the OpenTelemetry Prometheus
exporter spells them (dots become underscores, counters get ``_total``, seconds histograms ``_seconds``);
``tests/test_dashboards.py`` evaluates every expression against a real Prometheus scraping the real exporter.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.builders import bargauge, prometheus, stat, table, tempo, timeseries
from grafana_foundation_sdk.builders.common import (
    ReduceDataOptions,
    StackingConfig,
    TableSortByFieldState,
    VizLegendOptions,
)
from grafana_foundation_sdk.builders.dashboard import (
    Dashboard,
    DashboardLink,
    DatasourceVariable,
    QueryVariable,
    Row,
    TextBoxVariable,
    ThresholdsConfig,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    BigValueColorMode,
    BigValueGraphMode,
    LegendDisplayMode,
    LegendPlacement,
    StackingMode,
)
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DashboardLinkType,
    DataSourceRef,
    DynamicConfigValue,
    Threshold,
    ThresholdsMode,
    VariableOption,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.tempo import SearchTableType

from otel_responses import attributes as attr
from otel_responses.signals import CATALOGUE, ERROR, TOOL_SIGNALS, WARNING

HERE = Path(__file__).resolve().parent
DASHBOARD_FILE = HERE / "context-health.json"
RULES_FILE = HERE / "alerts" / "otel-responses.rules.yaml"

GRAFANA_VERSION = "11.6"
#: Where every runbook link points: the README, whose ``### <signal>`` sections are the runbooks.
RUNBOOK_BASE = "https://github.com/otel-responses/otel-responses/blob/main/README.md"


def label(attribute: str) -> str:
    """A span/metric attribute as a Prometheus label: dots become underscores."""
    return attribute.replace(".", "_")


# Metric names as the OpenTelemetry Prometheus exporter writes them.
CALLS = label(attr.METRIC_CALLS) + "_total"
SIGNALS = label(attr.METRIC_SIGNALS) + "_total"
TOKENS = label(attr.METRIC_TOKENS) + "_total"
TOKEN_USAGE_SUM = label(attr.METRIC_TOKEN_USAGE) + "_sum"
ENCRYPTED_ITEMS = label(attr.METRIC_ENCRYPTED_ITEMS) + "_total"
DURATION = label(attr.METRIC_OPERATION_DURATION) + "_seconds"
COST = label(attr.METRIC_COST) + "_total"
COST_SAVED = label(attr.METRIC_COST_SAVED) + "_total"

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
CURRENCY = label(attr.COST_CURRENCY)
#: The service: ``job`` as Prometheus sets it when scraping, or as the Collector's prometheus exporter derives
#: it from the resource's ``service.name`` (``service.namespace/service.name`` when a namespace is set).
SERVICE = "job"

# ---------------------------------------------------------------------------------------------------------------
# PromQL helpers
# ---------------------------------------------------------------------------------------------------------------


def eq(name: str, value: str) -> str:
    return f'{name}="{value}"'


def ne(name: str, value: str) -> str:
    return f'{name}!="{value}"'


def matches(name: str, values: Sequence[str]) -> str:
    return f'{name}=~"{"|".join(values)}"'


def group(by: Sequence[str]) -> str:
    """``sum by (a, b) `` or ``sum`` for no labels."""
    return f"sum by ({', '.join(by)}) " if by else "sum"


# ---------------------------------------------------------------------------------------------------------------
# Dashboard
# ---------------------------------------------------------------------------------------------------------------

PROMETHEUS = DataSourceRef(type_val="prometheus", uid="${datasource}")
TEMPO = DataSourceRef(type_val="tempo", uid="${tempo}")
FILTER = f'{SERVICE}=~"$service", {MODEL}=~"$model"'
RATE = "$__rate_interval"
#: The same interval in milliseconds (Grafana 10.2+), to turn events per interval into a rate.
RATE_MS = "$__rate_interval_ms"
RANGE = "$__range"
#: Calls without a model (retrieve, input items, the Conversations API) have no model label: per-model panels of
#: ratios and latency leave them out, per-model panels of problems name them NO_MODEL (``no_model()``).
HAS_MODEL = ne(MODEL, "")
NO_MODEL = "(no model)"
LINEAGE = "lineage"
ALL = VariableOption(selected=True, text=["All"], value=["$__all"])
UID = "otel-responses-context-health"
TRACEQL = (
    f'{{ span.{attr.CONTEXT_LOSS} = true && resource.service.name =~ "${{service:regex}}" '
    f'&& span.{attr.GEN_AI_REQUEST_MODEL} =~ "${{model:regex}}" }} '
    f"| select(span.{attr.SIGNALS}, span.{attr.STATE_MODE}, span.{attr.GEN_AI_REQUEST_MODEL}, "
    f"span.{attr.GEN_AI_OPERATION_NAME}, span.{attr.LINEAGE_ID}, span.{attr.TURN})"
)
#: Every turn of one conversation (the ``lineage`` text box): one span per turn, each in its own trace.
DRILL_DOWN_TRACEQL = (
    f'{{ span.{attr.LINEAGE_ID} = "${LINEAGE}" }} '
    f"| select(span.{attr.TURN}, span.{attr.STATE_MODE}, span.{attr.SIGNALS}, span.{attr.CONTEXT_LOSS}, "
    f"span.{attr.GEN_AI_USAGE_INPUT_TOKENS}, span.{attr.GEN_AI_USAGE_OUTPUT_TOKENS}, "
    f"span.{attr.GEN_AI_REQUEST_MODEL}, span.{attr.GEN_AI_OPERATION_NAME})"
)
#: The data link from a span's lineage id to the drill-down, keeping the time range and the datasources.
DRILL_DOWN_URL = (
    f"/d/{UID}/?var-{LINEAGE}=${{__value.raw}}&${{__url_time_range}}&${{datasource:queryparam}}&${{tempo:queryparam}}"
)


def sel(metric: str, *matchers: str) -> str:
    """``metric{service and model filters, matchers...}``."""
    return f"{metric}{{{', '.join([FILTER, *matchers])}}}"


# Whether a series existed ``window`` ago is read from its samples in the ``BEFORE`` just before then, not from the
# instant: one failed scrape there leaves a staleness marker, and an instant selector would then take a long-lived
# series for a new one and count its whole value (a false alert). A range ignores staleness markers.
BEFORE = "2m"


def fresh(selector: str, window: str) -> str:
    """What a counter counted in ``window``, a series' first sample included: the rules' ``events()`` on one line.

    ``rate()``/``increase()`` never count a series' first sample, and the exporter creates a series at its first
    event, already at 1: a brand-new model's first (often only) signal would show as 0 or nothing. A series born
    inside the window counts at its whole value, an older one (with a sample in the ``BEFORE`` before the window)
    by its increase; never both (``or`` keeps the left side of a label set present on both).
    """
    before = f"last_over_time({selector}[{BEFORE}] offset {window})"
    return f"(({selector} unless {before}) or increase({selector}[{window}]))"


def total(metric: str, *matchers: str, by: Sequence[str] = (), window: str = RANGE) -> str:
    """``metric``'s events in ``window`` (the selected range by default), summed by ``by``."""
    return f"{group(by)}({fresh(sel(metric, *matchers), window)})"


def per_minute(metric: str, *matchers: str, by: Sequence[str] = ()) -> str:
    """Events per minute at each step: events in ``$__rate_interval``, first samples included, over its length.

    ``60 * rate(x[$__rate_interval])`` on counters born inside the interval, plus their first value: the same
    per-step average ``rate()`` draws, only not blind to a new series.
    """
    return f"{total(metric, *matchers, by=by, window=RATE)} * 60000 / {RATE_MS}"


def per_second(metric: str, *matchers: str, by: Sequence[str] = ()) -> str:
    return f"{total(metric, *matchers, by=by, window=RATE)} * 1000 / {RATE_MS}"


def share(metric: str, part: str, whole: Sequence[str] = (), by: Sequence[str] = (), window: str = RATE) -> str:
    """Share of ``metric`` events matching ``part`` among those matching ``whole``: 0, not "no data", when none do.

    The ``or 0 * ...`` term keeps groups that have events but none of the part at 0 instead of dropping them.
    """
    part_total = total(metric, part, *whole, by=by, window=window)
    whole_total = total(metric, *whole, by=by, window=window)
    return f"(\n{part_total}\nor\n0 * {whole_total}\n)\n/\n{whole_total}"


def cache_hit_ratio() -> str:
    """Cached input tokens (a counter) over input tokens (the GenAI histogram's sum), per model; 0 when none hit."""
    by = (MODEL,)
    cached = total(TOKENS, eq(TOKEN_KIND, "cached_input"), HAS_MODEL, by=by, window=RATE)
    inputs = total(TOKEN_USAGE_SUM, eq(TOKEN_TYPE, "input"), HAS_MODEL, by=by, window=RATE)
    return f"(\n{cached}\nor\n0 * {inputs}\n)\n/\n{inputs}"


def quantile(q: float) -> str:
    """A latency percentile per model from the buckets' increase over ``$__rate_interval``, new buckets included."""
    buckets = fresh(sel(DURATION + "_bucket", HAS_MODEL), RATE)
    return f"histogram_quantile({q}, sum by (le, {MODEL}) ({buckets}))"


def no_model(expr: str) -> str:
    """Name the group of calls without a model (retrieve, input items, Conversations API methods) ``(no model)``.

    For panels of problems (signals, errors): such a call can raise one (``unstored_retrieve``, a tool-call signal on
    ``conversations.items.create``) and the alerts count it; it is shown, under a name, not as an empty label.
    """
    return f'label_replace(\n{expr},\n"{MODEL}", "{NO_MODEL}", "{MODEL}", ""\n)'


def cost_saved_share() -> str:
    """What cached input saved over what the input would have cost without the cache: saved / (cost + saved)."""
    by = (MODEL, CURRENCY)
    cost = total(COST, HAS_MODEL, by=by, window=RATE)
    saved = f"(\n{total(COST_SAVED, HAS_MODEL, by=by, window=RATE)}\nor\n0 * {cost}\n)"
    return f"{saved}\n/\n(\n{cost}\n+\n{saved}\n)"


def legend(*labels: str) -> str:
    return " · ".join("{{" + name + "}}" for name in labels)


def prom(expr: str, legend_format: str, ref: str = "A", *, instant: bool = False) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).legend_format(legend_format).ref_id(ref).datasource(PROMETHEUS)
    return query.instant() if instant else query.range()


def series(title: str, description: str, *, unit: str, width: int = 12, height: int = 8) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(PROMETHEUS)
        .unit(unit)
        .min(0)
        .span(width)
        .height(height)
        .fill_opacity(10)
        .legend(
            VizLegendOptions().display_mode(LegendDisplayMode.LIST).placement(LegendPlacement.BOTTOM).show_legend(True)
        )
    )


def thresholds(*steps: tuple[float | None, str]) -> ThresholdsConfig:
    return ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps([Threshold(value, color) for value, color in steps])


def big_number(title: str, description: str, expr: str, *, unit: str, steps: ThresholdsConfig) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(PROMETHEUS)
        .with_target(prom(expr, "", instant=True))
        .unit(unit)
        .no_value("0")
        .thresholds(steps)
        .color_mode(BigValueColorMode.BACKGROUND)
        .graph_mode(BigValueGraphMode.NONE)
        .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]))
        .span(6)
        .height(5)
    )


def _names(severity: str) -> str:
    return ", ".join(kind.name for kind in CATALOGUE.values() if kind.severity == severity)


def context_health() -> Dashboard:
    """The "OpenAI Responses — context health" dashboard."""
    return (
        Dashboard("OpenAI Responses — context health")
        .uid(UID)
        .description(
            "Where multi-turn context gets lost in calls to the OpenAI Responses API, from the otel-responses "
            "instrumentation: signals, state handling, encrypted reasoning, tool calls, tokens, latency, errors."
        )
        .tags(["openai", "opentelemetry", "genai", "otel-responses"])
        .timezone("browser")
        .time("now-1h", "now")
        .refresh("30s")
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .editable()
        .link(
            DashboardLink("Signals: what each one means and how to fix it")
            .type(DashboardLinkType.LINK)
            .url(f"{RUNBOOK_BASE}#signals")
            .icon("doc")
            .target_blank(True)
        )
        .with_variable(
            DatasourceVariable("datasource").label("Prometheus").type("prometheus").description("Where the metrics are")
        )
        .with_variable(DatasourceVariable("tempo").label("Tempo").type("tempo").description("Where the traces are"))
        .with_variable(
            QueryVariable("service")
            .label("Service")
            .description("The Prometheus job label: the scrape job, or the resource's service.name via a Collector")
            .datasource(PROMETHEUS)
            .query(f"label_values({CALLS}, {SERVICE})")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(ALL)
        )
        .with_variable(
            QueryVariable("model")
            .label("Model")
            .description("gen_ai.request.model: the model the app asked for")
            .datasource(PROMETHEUS)
            .query(f'label_values({CALLS}{{{SERVICE}=~"$service"}}, {MODEL})')
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(ALL)
        )
        .with_variable(
            TextBoxVariable(LINEAGE)
            .label("Lineage id")
            .description(
                "A conversation to follow in the drill-down row: openai_responses.lineage.id, the conversation id "
                "(conv_...) in conversation mode, else the id of the first response of the chain or replay "
                "(resp_...). Click one in the Tempo table of spans that lost context, or paste it."
            )
            .default_value("")
        )
        # -- Overview -------------------------------------------------------------------------------------------
        .with_row(Row("Overview (selected time range)"))
        .with_panel(
            big_number(
                "Calls with context loss",
                "Share of instrumented calls in the selected time range that raised at least one signal of "
                "severity error or warning (span attribute openai_responses.context_loss = true): the model "
                "probably answered without some of the context the app meant to give it. Healthy apps stay near "
                "0%; red is above 5%. 'Signal rate by name' below says which mistake it is.",
                share(CALLS, eq(CONTEXT_LOSS, "true"), window=RANGE),
                unit="percentunit",
                steps=thresholds((None, "green"), (0.01, "orange"), (0.05, "red")),
            )
        )
        .with_panel(
            big_number(
                "Error signals",
                f"Error-severity signals in the selected range ({_names(ERROR)}). Each one is a request the API "
                "rejects or context that is certainly lost. Anything above 0 needs a look; the alert "
                "OpenAIResponsesErrorSignal fires on the first one.",
                total(SIGNALS, eq(SEVERITY, ERROR)),
                unit="short",
                steps=thresholds((None, "green"), (1, "red")),
            )
        )
        .with_panel(
            big_number(
                "Warning signals",
                f"Warning-severity signals in the selected range ({_names(WARNING)}). Context was probably lost "
                "silently: the API accepted the request, but the model did not see everything it saw before.",
                total(SIGNALS, eq(SEVERITY, WARNING)),
                unit="short",
                steps=thresholds((None, "green"), (1, "orange")),
            )
        )
        .with_panel(
            big_number(
                "Calls",
                "Instrumented OpenAI Responses and Conversations API calls in the selected range, for scale: a "
                "handful of signals among a million calls reads differently from a handful among ten.",
                total(CALLS),
                unit="short",
                steps=thresholds((None, "blue")),
            )
        )
        # -- Signals --------------------------------------------------------------------------------------------
        .with_row(Row("Context-loss signals"))
        .with_panel(
            series(
                "Signal rate by name, severity and model",
                "Signals raised per minute, one line per signal name, severity (error, warning, info) and requested "
                "model. A signal names one way multi-turn context gets lost; each has a README section (dashboard "
                "link at the top, or README.md#<signal name>) saying why context is lost and how to fix it. A new "
                "line right after a deploy usually points at the change that introduced it.",
                unit="cpm",
                width=16,
                height=9,
            ).with_target(
                prom(
                    no_model(per_minute(SIGNALS, by=(SIGNAL_NAME, SEVERITY, MODEL))),
                    legend(SEVERITY, SIGNAL_NAME, MODEL),
                )
            )
        )
        .with_panel(
            bargauge.Panel()
            .title("Signals in the selected range")
            .description(
                "Total of each signal over the selected time range, largest first: the list to work through. The "
                "signal name is also the anchor of its runbook in the README (README.md#<signal name>)."
            )
            .datasource(PROMETHEUS)
            .with_target(
                prom(
                    f"sort_desc({total(SIGNALS, by=(SIGNAL_NAME, SEVERITY))})",
                    legend(SIGNAL_NAME, SEVERITY),
                    instant=True,
                )
            )
            .unit("short")
            .min(0)
            .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]))
            .thresholds(thresholds((None, "orange")))
            .span(8)
            .height(9)
        )
        .with_panel(
            series(
                "Share of calls with context loss",
                "Per model, the fraction of calls that raised an error or warning signal (calls with "
                "openai_responses.context_loss = true over all calls). A steady share usually means one code path "
                "always builds its requests wrong; spikes follow particular sessions or deploys. The Tempo panel at "
                "the bottom lists the spans.",
                unit="percentunit",
            )
            .max(1)
            .with_target(prom(share(CALLS, eq(CONTEXT_LOSS, "true"), (HAS_MODEL,), by=(MODEL,)), legend(MODEL)))
        )
        .with_panel(
            series(
                "Tool-call check failures",
                f"Tool-call signals per minute ({', '.join(TOOL_SIGNALS)}): an output whose call_id matches no "
                "call, a call left without its output, an output placed before its call, or one call_id used by "
                "two calls. The API rejects most of these with a 400, or the model never sees the tool result. "
                "Fix: replay each call and its output together, in order.",
                unit="cpm",
            ).with_target(
                prom(
                    no_model(per_minute(SIGNALS, matches(SIGNAL_NAME, TOOL_SIGNALS), by=(SIGNAL_NAME, MODEL))),
                    legend(SIGNAL_NAME, MODEL),
                )
            )
        )
        # -- State handling -------------------------------------------------------------------------------------
        .with_row(Row("State handling"))
        .with_panel(
            series(
                "State-mode mix",
                "How calls carry their context, as shares of all calls: server_chain (previous_response_id), "
                "conversation (a Conversations API id), client_replay (the app re-sends the history itself), "
                "single_turn, and conflict (conversation and previous_response_id together, which the API "
                "rejects). A sudden shift means a code path changed how it keeps state; any conflict is a bug.",
                unit="percentunit",
            )
            .stacking(StackingConfig().mode(StackingMode.PERCENT))
            .fill_opacity(60)
            .with_target(
                prom(
                    f"{total(CALLS, ne(STATE_MODE, ''), by=(STATE_MODE,), window=RATE)}\n/ on () group_left ()\n"
                    f"{total(CALLS, ne(STATE_MODE, ''), window=RATE)}",
                    legend(STATE_MODE),
                )
            )
        )
        .with_panel(
            series(
                "store=false share",
                "Per model, the share of Responses calls sent with store=false (the API keeps nothing). Such a "
                "response cannot be continued with previous_response_id (signal unstored_parent) nor retrieved, and "
                "its reasoning survives only if the app asks for reasoning.encrypted_content and replays it. A jump "
                "here explains a jump in those signals.",
                unit="percentunit",
            )
            .max(1)
            .with_target(prom(share(CALLS, eq(STORE, "false"), (ne(STORE, ""), HAS_MODEL), by=(MODEL,)), legend(MODEL)))
        )
        .with_panel(
            series(
                "Encrypted reasoning round trips",
                "Reasoning items carrying encrypted_content, per minute: returned by the API (output) and replayed "
                "by the app in a later request (input). With store=false the replayed line should follow the "
                "returned one; if it stays below, reasoning is dropped between turns (signals reasoning_dropped, "
                "reasoning_not_replayable) and the model starts its thinking over.",
                unit="cpm",
            )
            .with_target(prom(per_minute(ENCRYPTED_ITEMS, eq(DIRECTION, "output")), "returned by the API", "A"))
            .with_target(prom(per_minute(ENCRYPTED_ITEMS, eq(DIRECTION, "input")), "replayed by the app", "B"))
        )
        .with_panel(
            series(
                "Compactions",
                "Compactions per minute (signal compaction, severity info): responses.compact calls and compaction "
                "items sent or returned. Not a problem in itself: long sessions are being shortened. If the "
                "context-loss share rises with it, check that the app replays the compaction output unchanged.",
                unit="cpm",
            ).with_target(
                prom(no_model(per_minute(SIGNALS, eq(SIGNAL_NAME, "compaction"), by=(MODEL,))), legend(MODEL))
            )
        )
        .with_panel(
            series(
                "Calls with server-side truncation, by state mode",
                "Calls per minute sent with truncation=auto (openai_responses.truncation), by state mode. With it, "
                "the API itself drops the oldest items when the context overflows; the response does not say it "
                "did, so no signal can name it. A long conversation that suddenly loses its early decisions, "
                "without a signal, on a state mode shown here may have been cut by the server: compact the history "
                "(responses.compact) or leave truncation disabled (the default) to get an error instead.",
                unit="cpm",
                width=24,
            ).with_target(prom(per_minute(CALLS, eq(TRUNCATION, "auto"), by=(STATE_MODE,)), legend(STATE_MODE)))
        )
        # -- Turn depth -----------------------------------------------------------------------------------------
        .with_row(Row("Turn depth: where in a conversation context gets lost"))
        .with_panel(
            series(
                "Signals by turn depth",
                "Error and warning signals per minute by the depth of the turn that raised them "
                "(openai_responses.turn.depth: 1 = a first turn, 2-4, 5-16, 17+) and signal name. Signals only "
                "at depth 1 point at how requests are built; signals that start at 5-16 or 17+ point at history "
                "handling: truncation, compaction, replays that grow too long. Calls whose turn is unknown (the "
                "continued response was never seen by the ledger) have no depth and are not shown here.",
                unit="cpm",
                width=9,
            ).with_target(
                prom(
                    per_minute(
                        SIGNALS,
                        matches(SEVERITY, (ERROR, WARNING)),
                        ne(TURN_DEPTH, ""),
                        by=(TURN_DEPTH, SIGNAL_NAME),
                    ),
                    "depth " + legend(TURN_DEPTH, SIGNAL_NAME),
                )
            )
        )
        .with_panel(
            series(
                "Share of calls with context loss by turn depth",
                "Per turn depth, the fraction of calls that raised an error or warning signal. A share that "
                "climbs with depth means context is lost as conversations grow (history cut without compaction, "
                "reasoning or tool outputs dropped from long replays); a flat share means the loss is in how every "
                "request is built.",
                unit="percentunit",
                width=9,
            )
            .max(1)
            .with_target(
                prom(
                    share(CALLS, eq(CONTEXT_LOSS, "true"), (ne(TURN_DEPTH, ""),), by=(TURN_DEPTH,)),
                    "depth " + legend(TURN_DEPTH),
                )
            )
        )
        .with_panel(
            bargauge.Panel()
            .title("Context loss by turn depth (selected range)")
            .description(
                "Over the selected time range, per turn depth (1, 2-4, 5-16, 17+), the share of calls with an "
                "error or warning signal: the depth at which this app starts losing context."
            )
            .datasource(PROMETHEUS)
            .with_target(
                prom(
                    share(CALLS, eq(CONTEXT_LOSS, "true"), (ne(TURN_DEPTH, ""),), by=(TURN_DEPTH,), window=RANGE),
                    "depth " + legend(TURN_DEPTH),
                    instant=True,
                )
            )
            .unit("percentunit")
            .min(0)
            .max(1)
            .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]))
            .thresholds(thresholds((None, "green"), (0.01, "orange"), (0.05, "red")))
            .span(6)
            .height(8)
        )
        # -- Tokens, latency, errors ----------------------------------------------------------------------------
        .with_row(Row("Tokens, latency and errors"))
        .with_panel(
            series(
                "Token usage",
                "Tokens per second from each response's usage: input (all prompt tokens) and output, from the GenAI "
                "token histogram; cached_input (the part of input served from the prompt cache) and reasoning (the "
                "part of output spent thinking), from openai_responses.tokens. Input growing turn after turn is "
                "normal when history is replayed; a sudden drop can mean history was cut.",
                unit="suffix: tokens/s",
            )
            .with_target(prom(per_second(TOKEN_USAGE_SUM, by=(TOKEN_TYPE,)), legend(TOKEN_TYPE)))
            .with_target(prom(per_second(TOKENS, by=(TOKEN_KIND,)), legend(TOKEN_KIND), ref="B"))
        )
        .with_panel(
            series(
                "Cache hit ratio",
                "Per model, cached input tokens over input tokens. The prompt cache needs an unchanged prefix: "
                "changing instructions (signal instructions_changed) or rewritten history make it fall, and cost "
                "and latency rise with it.",
                unit="percentunit",
            )
            .max(1)
            .with_target(prom(cache_hit_ratio(), legend(MODEL)))
        )
        .with_panel(
            series(
                "Latency p50 / p95 / p99 by model",
                "Client-side duration of each call (gen_ai.client.operation.duration), from sending the request to "
                "the end of the response or stream, as percentiles per requested model. They are estimated from "
                "histogram buckets, so read them to within a bucket's width.",
                unit="s",
            )
            .with_target(prom(quantile(0.5), "p50 " + legend(MODEL), "A"))
            .with_target(prom(quantile(0.95), "p95 " + legend(MODEL), "B"))
            .with_target(prom(quantile(0.99), "p99 " + legend(MODEL), "C"))
        )
        .with_panel(
            series(
                "Errors by error.type",
                "Failed calls per minute by error.type (the exception class, e.g. BadRequestError, RateLimitError) "
                "and model. A BadRequestError together with an error signal (state_mode_conflict, unstored_parent, "
                "a tool-call signal) means the API refused the request for the reason the signal names.",
                unit="cpm",
            ).with_target(
                prom(
                    no_model(per_minute(DURATION + "_count", ne(ERROR_TYPE, ""), by=(ERROR_TYPE, MODEL))),
                    legend(ERROR_TYPE, MODEL),
                )
            )
        )
        # -- Cost -----------------------------------------------------------------------------------------------
        .with_row(Row("Cost (with a price table)"))
        .with_panel(
            stat.Panel()
            .title("Cost (selected range)")
            .description(
                "What the calls of the selected range cost, per currency, from the price table given to the "
                "instrumentation (setting prices; nothing is recorded without one, nor for a model the table does "
                "not price): input, cached input and output tokens at the table's prices, reasoning included in "
                "output."
            )
            .datasource(PROMETHEUS)
            .with_target(prom(total(COST, HAS_MODEL, by=(CURRENCY,)), legend(CURRENCY), instant=True))
            .unit("short")
            .decimals(2)
            .no_value("no price table")
            .thresholds(thresholds((None, "blue")))
            .color_mode(BigValueColorMode.VALUE)
            .graph_mode(BigValueGraphMode.NONE)
            .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]))
            .span(6)
            .height(8)
        )
        .with_panel(
            series(
                "Cost per hour by model",
                "Spending rate per requested model and currency (openai_responses.cost, all token kinds), from the "
                "configured price table. A model that costs more than its traffic explains often re-sends history "
                "the server already holds (signal context_duplicated) or misses the prompt cache.",
                unit="short",
                width=9,
            ).with_target(
                prom(
                    f"{total(COST, HAS_MODEL, by=(MODEL, CURRENCY), window=RATE)} * 3600000 / {RATE_MS}",
                    legend(MODEL, CURRENCY) + " per hour",
                )
            )
        )
        .with_panel(
            series(
                "Share saved by cached input",
                "Per model and currency, what cached input tokens saved (openai_responses.cost.saved: their "
                "uncached input price minus their cached price) over what the calls would have cost without the "
                "cache (cost + saved). It falls when the prompt prefix stops being stable: changed instructions, "
                "rewritten or reordered history.",
                unit="percentunit",
                width=9,
            )
            .max(1)
            .with_target(prom(cost_saved_share(), legend(MODEL, CURRENCY)))
        )
        # -- Traces ---------------------------------------------------------------------------------------------
        .with_row(Row("Traces"))
        .with_panel(
            table.Panel()
            .title("Spans that lost context (Tempo)")
            .description(
                "The latest spans with openai_responses.context_loss = true, from Tempo: click a trace id to open "
                "the whole request. The openai_responses.signals column names what went wrong on that call; the "
                "span's openai_responses.signal events carry the details (counts, item types, ids, never content)."
            )
            .datasource(TEMPO)
            .with_target(
                tempo.TempoQuery()
                .ref_id("A")
                .datasource(TEMPO)
                .query_type("traceql")
                .query(TRACEQL)
                .limit(50)
                .spss(10)
                .table_type(SearchTableType.SPANS)
            )
            .override_by_name(
                attr.LINEAGE_ID,
                [DynamicConfigValue("links", [{"title": "Follow this conversation", "url": DRILL_DOWN_URL}])],
            )
            .span(24)
            .height(10)
        )
        # -- Conversation drill-down ----------------------------------------------------------------------------
        .with_row(Row(f"Conversation ${LINEAGE}"))
        .with_panel(
            table.Panel()
            .title("Turns of the conversation (Tempo)")
            .description(
                "Every turn of the conversation named in the Lineage id box, in order (openai_responses.turn, 1 "
                "for the first): its state mode, the signals it raised, whether it lost context, and its input and "
                "output tokens. Each turn is its own trace; each chat span also links (span link) to the span of "
                "the turn it continues. Click a trace id to open a turn."
            )
            .datasource(TEMPO)
            .with_target(
                tempo.TempoQuery()
                .ref_id("A")
                .datasource(TEMPO)
                .query_type("traceql")
                .query(DRILL_DOWN_TRACEQL)
                .limit(500)
                .spss(10)
                .table_type(SearchTableType.SPANS)
            )
            .sort_by([TableSortByFieldState().display_name(attr.TURN).desc(False)])
            .span(24)
            .height(12)
        )
    )


def render_dashboard() -> str:
    return json.dumps(context_health().build(), cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Alert rules
# ---------------------------------------------------------------------------------------------------------------

WINDOW = "10m"
WARNING_RATIO = 0.05


def events(selector: str, window: str = WINDOW) -> str:
    """Events a counter counted in ``window``, a series born inside the window included.

    ``increase()`` never counts a series' first sample, so a counter that first appears already at 1 shows no
    increase: the ``unless ... offset`` term takes a series that did not exist ``window`` ago at its whole value.
    """
    return (
        f"(\n  {selector}\n    unless\n  last_over_time({selector}[{BEFORE}] offset {window})\n)"
        f"\nor\nincrease({selector}[{window}])"
    )


def counted(metric: str, *matchers: str, by: Sequence[str]) -> str:
    selector = f"{metric}{{{', '.join(matchers)}}}" if matchers else metric
    return f"{group(by)}(\n  " + events(selector).replace("\n", "\n  ") + "\n)"


def runbook(anchor: str) -> str:
    return f"{RUNBOOK_BASE}#{anchor}"


BY_SIGNAL = "{{ $labels." + SIGNAL_NAME + " }}"
JOB = "{{ $labels.job }}"
ON_MODEL = "{{ $labels." + MODEL + " }}"
TIMES = "{{ $value | humanize }}"
RULE_LABELS = (SERVICE, SIGNAL_NAME, MODEL)


def alert_rules() -> dict[str, Any]:
    """The Prometheus rule file, as data."""
    error_signal = counted(SIGNALS, eq(SEVERITY, ERROR), by=RULE_LABELS)
    warning_ratio = (
        f"{counted(SIGNALS, eq(SEVERITY, WARNING), by=(SERVICE,))}\n/\n{counted(CALLS, by=(SERVICE,))}"
        f"\n> {WARNING_RATIO}"
    )
    conflict = counted(SIGNALS, eq(SIGNAL_NAME, "state_mode_conflict"), by=(SERVICE,))
    unstored = counted(SIGNALS, eq(SIGNAL_NAME, "unstored_parent"), by=(SERVICE,))
    rules: list[dict[str, Any]] = [
        {
            "alert": "OpenAIResponsesErrorSignal",
            "expr": f"{error_signal} > 0",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"{BY_SIGNAL} raised by {JOB} ({ON_MODEL})",
                "description": (
                    f"{JOB} raised the error-severity signal {BY_SIGNAL} {TIMES} time(s) "
                    f"in the last {WINDOW} on {ON_MODEL}: the API rejects such requests or the model "
                    "certainly lost context. The runbook says why and how to fix it; the Tempo panel of the "
                    "context-health dashboard lists the spans."
                ),
                "runbook_url": runbook(BY_SIGNAL),
            },
        },
        {
            "alert": "OpenAIResponsesWarningSignalRatioHigh",
            "expr": warning_ratio,
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.job }}: {{ $value | humanizePercentage }} warning signals per call",
                "description": (
                    f"Over the last {WINDOW}, {JOB} raised {{{{ $value | humanizePercentage }}}} "
                    f"warning-severity signals per call (threshold {WARNING_RATIO:.0%}): context is being lost "
                    "silently (instructions, reasoning or history not carried over). See which signal in the "
                    "context-health dashboard, then follow its section of the README."
                ),
                "runbook_url": runbook("signals"),
            },
        },
        {
            "alert": "OpenAIResponsesStateModeConflictAndUnstoredParent",
            "expr": f"({conflict} > 0)\nand on ({SERVICE})\n({unstored} > 0)",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "{{ $labels.job }} mixes state modes: state_mode_conflict and unstored_parent together",
                "description": (
                    f"In the last {WINDOW} {JOB} both sent conversation with previous_response_id "
                    "(state_mode_conflict) and chained to a store=false response (unstored_parent): different "
                    "code paths or workers pick the state mode each on their own. Choose one state mode per "
                    f"session; see also {runbook('unstored_parent')}."
                ),
                "runbook_url": runbook("state_mode_conflict"),
            },
        },
        {
            "alert": "OpenAIResponsesInstructionsDropped",
            "expr": f"{counted(SIGNALS, eq(SIGNAL_NAME, 'instructions_dropped'), by=(SERVICE, MODEL))} > 0",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.job }} continues responses without their instructions",
                "description": (
                    f"{JOB} sent {TIMES} request(s) in the last {WINDOW} on "
                    f"{ON_MODEL} that continue a response without the instructions it had: "
                    "instructions are never carried over (not through previous_response_id, a conversation or a "
                    "replay), so the model answers without its system prompt. Send instructions on every request."
                ),
                "runbook_url": runbook("instructions_dropped"),
            },
        },
        {
            "alert": "OpenAIResponsesContextDuplicated",
            "expr": f"{counted(SIGNALS, eq(SIGNAL_NAME, 'context_duplicated'), by=(SERVICE, MODEL))} > 0",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.job }} re-sends turns the server already holds",
                "description": (
                    f"{JOB} sent {TIMES} request(s) in the last {WINDOW} on {ON_MODEL} that continue "
                    "previous_response_id or a conversation and also re-send items that state already holds: the "
                    "model reads those turns twice (and may ignore a tool result), and their input tokens are paid "
                    "twice. Send only the new items."
                ),
                "runbook_url": runbook("context_duplicated"),
            },
        },
        {
            "alert": "OpenAIResponsesReasoningDropped",
            "expr": (f"{counted(SIGNALS, matches(SIGNAL_NAME, REASONING_SIGNALS), by=RULE_LABELS)} > 0"),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{JOB} loses reasoning between turns ({BY_SIGNAL})",
                "description": (
                    f"{JOB} raised {BY_SIGNAL} {TIMES} time(s) in the last {WINDOW} on "
                    f"{ON_MODEL}: reasoning items are not carried to the next turn (not replayed, "
                    "or not replayable because encrypted_content was not requested with store=false), so the model "
                    "starts its thinking over: worse answers, more tokens."
                ),
                "runbook_url": runbook(BY_SIGNAL),
            },
        },
        {
            "alert": "OpenAIResponsesToolOutputMissingOrOrphaned",
            "expr": f"{counted(SIGNALS, matches(SIGNAL_NAME, TOOL_OUTPUT_SIGNALS), by=RULE_LABELS)} > 0",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"{JOB} sends tool calls and outputs that do not pair up ({BY_SIGNAL})",
                "description": (
                    f"{JOB} raised {BY_SIGNAL} {TIMES} time(s) in the last {WINDOW} on "
                    f"{ON_MODEL}: a tool call went without its output, or an output's call_id "
                    "matches no call. The API rejects the request with a 400 or the model never sees the tool "
                    "result. Replay each call and its output together, matched by call_id."
                ),
                "runbook_url": runbook(BY_SIGNAL),
            },
        },
    ]
    return {"groups": [{"name": "otel-responses-context-health", "rules": rules}]}


REASONING_SIGNALS = ("reasoning_dropped", "reasoning_not_replayable")
TOOL_OUTPUT_SIGNALS = ("missing_tool_output", "orphan_tool_output")


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (PromQL) as literal blocks, so the rule file reads like a hand-written one."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def render_rules() -> str:
    header = "# Generated by `python -m dashboards.build` from dashboards/build.py: edit that, not this file.\n"
    body = yaml.dump(alert_rules(), Dumper=_BlockDumper, sort_keys=False, width=1000, allow_unicode=True)
    return header + body


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.build", description="Build dashboards and rules.")
    parser.add_argument("--check", action="store_true", help="fail when a committed file differs from the build")
    args = parser.parse_args(argv)
    outputs = {DASHBOARD_FILE: render_dashboard(), RULES_FILE: render_rules()}
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
