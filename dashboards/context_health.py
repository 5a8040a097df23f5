"""The "OpenAI Responses — context health" dashboard: its settings, variables and links, then its rows in order."""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders.dashboard import (
    Dashboard,
    DashboardLink,
    DatasourceVariable,
    QueryVariable,
    Row,
    TextBoxVariable,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DashboardLinkType,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

from dashboards.names import CALLS, DEFAULT, LATEST, MODEL, SERVICE
from dashboards.panels import LINEAGE, PROMETHEUS, UID
from dashboards.rows import rows_for
from otel_responses.docs_links import DOCS_URL, SIGNALS_PAGE, page_url

#: The Grafana the dashboard is built for: the grafana-foundation-sdk build pinned in pyproject.toml.
GRAFANA_VERSION = "11.6"
ALL = VariableOption(selected=True, text=["All"], value=["$__all"])


_DIALECT = {
    DEFAULT: "",
    LATEST: " For the latest GenAI conventions (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental).",
}


def context_health(docs_url: str = DOCS_URL, semconv: str = DEFAULT) -> Dashboard:
    """The "OpenAI Responses — context health" dashboard; its link to the signals' documentation at ``docs_url``;
    its GenAI queries for the ``semconv`` dialect (the same uid: one dashboard, in the dialect the services emit)."""
    board = (
        Dashboard("OpenAI Responses — context health")
        .uid(UID)
        .description(
            "Where multi-turn context gets lost in calls to the OpenAI Responses API, from the otel-responses "
            "instrumentation: signals, state handling, encrypted reasoning, tool calls, tokens, latency, errors."
            + _DIALECT[semconv]
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
            .url(page_url(SIGNALS_PAGE, "signals", docs_url))
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
    )
    for row in rows_for(semconv):
        section = row()
        board.with_row(Row(section.title))
        for panel in section.panels:
            board.with_panel(panel)
    return board


def render_dashboard(docs_url: str = DOCS_URL, semconv: str = DEFAULT) -> str:
    built = context_health(docs_url, semconv).build()
    return json.dumps(built, cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
