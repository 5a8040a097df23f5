"""The "Context-loss signals" row: which signals are raised, by name, severity and model."""

from __future__ import annotations

from grafana_foundation_sdk.builders import bargauge
from grafana_foundation_sdk.builders.common import ReduceDataOptions

from dashboards.names import CALLS, CONTEXT_LOSS, MODEL, SEVERITY, SIGNAL_NAME, SIGNALS
from dashboards.panels import PROMETHEUS, Section, legend, prom, series, thresholds
from dashboards.promql import HAS_MODEL, eq, matches, no_model, per_minute, share, total
from otel_responses.signals import TOOL_SIGNALS


def signals() -> Section:
    """Which signals are raised, how often, on which model: the list to work through."""
    return Section(
        "Context-loss signals",
        [
            series(
                "Signal rate by name, severity and model",
                "Signals raised per minute, one line per signal name, severity (error, warning, info) and requested "
                "model. A signal names one way multi-turn context gets lost; each has a section in the documentation's "
                "Signals page (dashboard link at the top; the signal name is its anchor) saying why context is lost "
                "and how to fix it. A new line right after a deploy usually points at the change that introduced it.",
                unit="cpm",
                width=16,
                height=9,
            ).with_target(
                prom(
                    no_model(per_minute(SIGNALS, by=(SIGNAL_NAME, SEVERITY, MODEL))),
                    legend(SEVERITY, SIGNAL_NAME, MODEL),
                )
            ),
            bargauge.Panel()
            .title("Signals in the selected range")
            .description(
                "Total of each signal over the selected time range, largest first: the list to work through. The "
                "signal name is also the anchor of its runbook, its section of the documentation's Signals page."
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
            .height(9),
            series(
                "Share of calls with context loss",
                "Per model, the fraction of calls that raised an error or warning signal (calls with "
                "openai_responses.context_loss = true over all calls). A steady share usually means one code path "
                "always builds its requests wrong; spikes follow particular sessions or deploys. The Tempo panel at "
                "the bottom lists the spans.",
                unit="percentunit",
            )
            .max(1)
            .with_target(prom(share(CALLS, eq(CONTEXT_LOSS, "true"), (HAS_MODEL,), by=(MODEL,)), legend(MODEL))),
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
            ),
        ],
    )
