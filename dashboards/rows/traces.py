"""The "Traces" row: the spans that lost context, from Tempo, each linking to its conversation."""

from __future__ import annotations

from grafana_foundation_sdk.builders import table, tempo
from grafana_foundation_sdk.models.dashboard import DynamicConfigValue
from grafana_foundation_sdk.models.tempo import SearchTableType

from dashboards.panels import LINEAGE, TEMPO, UID, Section
from otel_responses import attributes as attr

TRACEQL = (
    f'{{ span.{attr.CONTEXT_LOSS} = true && resource.service.name =~ "${{service:regex}}" '
    f'&& span.{attr.GEN_AI_REQUEST_MODEL} =~ "${{model:regex}}" }} '
    f"| select(span.{attr.SIGNALS}, span.{attr.STATE_MODE}, span.{attr.GEN_AI_REQUEST_MODEL}, "
    f"span.{attr.GEN_AI_OPERATION_NAME}, span.{attr.LINEAGE_ID}, span.{attr.TURN})"
)
#: The data link from a span's lineage id to the drill-down, keeping the time range and the datasources.
DRILL_DOWN_URL = (
    f"/d/{UID}/?var-{LINEAGE}=${{__value.raw}}&${{__url_time_range}}&${{datasource:queryparam}}&${{tempo:queryparam}}"
)


def traces() -> Section:
    """The spans that lost context, from Tempo, each linking to its conversation's drill-down."""
    return Section(
        "Traces",
        [
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
            .height(10),
        ],
    )
