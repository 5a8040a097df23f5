"""The "State handling" row: how calls carry their context from one turn to the next."""

from __future__ import annotations

from grafana_foundation_sdk.builders.common import StackingConfig
from grafana_foundation_sdk.models.common import StackingMode

from dashboards.names import (
    CALLS,
    DIRECTION,
    ENCRYPTED_ITEMS,
    MODEL,
    SIGNAL_NAME,
    SIGNALS,
    STATE_MODE,
    STORE,
    TRUNCATION,
    WITHHELD_ITEMS,
    WITHHELD_REASON,
)
from dashboards.panels import Section, legend, prom, series
from dashboards.promql import HAS_MODEL, RATE, eq, ne, no_model, per_minute, share, total


def state_handling() -> Section:
    """How calls carry their context: state modes, store=false, encrypted reasoning, compaction, truncation."""
    return Section(
        "State handling",
        [
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
            ),
            series(
                "store=false share",
                "Per model, the share of Responses calls sent with store=false (the API keeps nothing). Such a "
                "response cannot be continued with previous_response_id (signal unstored_parent) nor retrieved, and "
                "its reasoning survives only if the app asks for reasoning.encrypted_content and replays it. A jump "
                "here explains a jump in those signals.",
                unit="percentunit",
            )
            .max(1)
            .with_target(
                prom(share(CALLS, eq(STORE, "false"), (ne(STORE, ""), HAS_MODEL), by=(MODEL,)), legend(MODEL))
            ),
            series(
                "Encrypted reasoning round trips",
                "Reasoning items carrying encrypted_content, per minute: returned by the API (output) and replayed "
                "by the app in a later request (input). With store=false the replayed line should follow the "
                "returned one; if it stays below, reasoning is dropped between turns (signals reasoning_dropped, "
                "reasoning_not_replayable) and the model starts its thinking over.",
                unit="cpm",
            )
            .with_target(prom(per_minute(ENCRYPTED_ITEMS, eq(DIRECTION, "output")), "returned by the API", "A"))
            .with_target(prom(per_minute(ENCRYPTED_ITEMS, eq(DIRECTION, "input")), "replayed by the app", "B")),
            series(
                "Compactions",
                "Compactions per minute (signal compaction, severity info): responses.compact calls and compaction "
                "items sent or returned. Not a problem in itself: long sessions are being shortened. If the "
                "context-loss share rises with it, check that the app replays the compaction output unchanged.",
                unit="cpm",
            ).with_target(
                prom(no_model(per_minute(SIGNALS, eq(SIGNAL_NAME, "compaction"), by=(MODEL,))), legend(MODEL))
            ),
            series(
                "Reasoning withheld by the API, by reason",
                "Replayed reasoning items the API withheld from the model per minute, as its responses report them "
                "(input_transformations), by reason. turn_boundary is the reasoning context at work: under "
                "reasoning.context current_turn an earlier turn's reasoning is never rendered back. Any other "
                "reason is the reasoning_withheld signal: the reasoning was made for another model "
                "(model_mismatch), organization (organization_mismatch) or end user (end_user_mismatch), or the "
                "items before it were edited (prefix_mismatch), and the model answered without it.",
                unit="cpm",
            ).with_target(prom(per_minute(WITHHELD_ITEMS, by=(WITHHELD_REASON,)), legend(WITHHELD_REASON))),
            series(
                "Calls with server-side truncation, by state mode",
                "Calls per minute sent with truncation=auto (openai_responses.truncation), by state mode. With it, "
                "the API itself drops the oldest items when the context overflows, without saying so. In a chain or "
                "a conversation the usage shows it (history_truncated, info); in a client replay nothing does. A "
                "long conversation that suddenly loses its early decisions on a state mode shown here may have been "
                "cut by the server: compact the history (responses.compact) or leave truncation disabled (the "
                "default) to get an error instead.",
                unit="cpm",
            ).with_target(prom(per_minute(CALLS, eq(TRUNCATION, "auto"), by=(STATE_MODE,)), legend(STATE_MODE))),
        ],
    )
