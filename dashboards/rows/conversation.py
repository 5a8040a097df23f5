"""The conversation drill-down row: every turn of the conversation named in the lineage box."""

from __future__ import annotations

from grafana_foundation_sdk.builders import table, tempo
from grafana_foundation_sdk.builders.common import TableSortByFieldState
from grafana_foundation_sdk.models.tempo import SearchTableType

from dashboards.panels import LINEAGE, TEMPO, Section
from otel_responses import attributes as attr

#: Every turn of one conversation (the ``lineage`` text box): one span per turn, each in its own trace.
DRILL_DOWN_TRACEQL = (
    f'{{ span.{attr.LINEAGE_ID} = "${LINEAGE}" }} '
    f"| select(span.{attr.TURN}, span.{attr.STATE_MODE}, span.{attr.SIGNALS}, span.{attr.CONTEXT_LOSS}, "
    f"span.{attr.GEN_AI_USAGE_INPUT_TOKENS}, span.{attr.GEN_AI_USAGE_OUTPUT_TOKENS}, "
    f"span.{attr.GEN_AI_REQUEST_MODEL}, span.{attr.GEN_AI_OPERATION_NAME})"
)


def conversation() -> Section:
    """Every turn of the conversation named in the lineage box, from Tempo."""
    return Section(
        f"Conversation ${LINEAGE}",
        [
            table.Panel()
            .title("Responses of the conversation, tool round trips included (Tempo)")
            .description(
                "Every response of the conversation named in the Lineage id box, in order (openai_responses.turn, "
                "1 for the first; a call that only carries a tool's output back is a turn of its own): its state "
                "mode, the signals it raised, whether it lost context, and its input and output tokens. Each turn "
                "is its own trace; each chat span also links (span link) to the span of the turn it continues. "
                "Click a trace id to open a turn."
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
            .height(12),
        ],
    )
