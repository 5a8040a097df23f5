"""The depth row: whether context is lost on first calls or as chains grow.

Its depth is `openai_responses.turn.depth`, the bucket of the call's place among the responses of its chain
(`openai_responses.turn`): every response counts, the ones that only carry a tool's output back included, so it
is not the number of the user's messages. The names stay (a contract); the titles say what is counted."""

from __future__ import annotations

from grafana_foundation_sdk.builders import bargauge
from grafana_foundation_sdk.builders.common import ReduceDataOptions

from dashboards.names import CALLS, CONTEXT_LOSS, SEVERITY, SIGNAL_NAME, SIGNALS, TURN_DEPTH
from dashboards.panels import PROMETHEUS, Section, legend, prom, series, thresholds
from dashboards.promql import RANGE, eq, matches, ne, per_minute, share
from otel_responses.signals import ERROR, WARNING


def turn_depth() -> Section:
    """Where in a chain context gets lost: signals and loss by the call's depth in its chain."""
    return Section(
        "Depth in the chain (responses so far, tool round trips included): where context gets lost",
        [
            series(
                "Signals by depth in the chain",
                "Error and warning signals per minute by the depth in its chain of the call that raised them "
                "(openai_responses.turn.depth: 1 = a first call, 2-4, 5-16, 17+) and signal name. The depth counts "
                "responses, not the user's messages: every response of the chain counts, tool round trips "
                "included, so one question answered after two tool calls takes three. Signals only at depth 1 "
                "point at how requests are built; signals that start at 5-16 or 17+ point at history handling: "
                "truncation, compaction, replays that grow too long. Calls whose depth is unknown (the continued "
                "response was never seen by the ledger) are not shown here.",
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
            ),
            series(
                "Share of calls with context loss by depth in the chain",
                "Per depth in the chain (responses so far, tool round trips included), the fraction of calls "
                "that raised an error or warning signal. A share that climbs with depth means context is lost as "
                "chains grow (history cut without compaction, reasoning or tool outputs dropped from long "
                "replays); a flat share means the loss is in how every request is built.",
                unit="percentunit",
                width=9,
            )
            .max(1)
            .with_target(
                prom(
                    share(CALLS, eq(CONTEXT_LOSS, "true"), (ne(TURN_DEPTH, ""),), by=(TURN_DEPTH,)),
                    "depth " + legend(TURN_DEPTH),
                )
            ),
            bargauge.Panel()
            .title("Context loss by depth in the chain (selected range)")
            .description(
                "Over the selected time range, per depth in the chain (1, 2-4, 5-16, 17+: responses so far, tool "
                "round trips included), the share of calls with an "
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
            .height(8),
        ],
    )
