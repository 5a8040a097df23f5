"""The "Cost" row: spending and what the prompt cache saved; empty without a price table."""

from __future__ import annotations

from grafana_foundation_sdk.builders import stat
from grafana_foundation_sdk.builders.common import ReduceDataOptions
from grafana_foundation_sdk.models.common import BigValueColorMode, BigValueGraphMode

from dashboards.names import COST, CURRENCY, MODEL
from dashboards.panels import PROMETHEUS, Section, legend, prom, series, thresholds
from dashboards.promql import HAS_MODEL, RATE, RATE_MS, cost_saved_share, total


def cost() -> Section:
    """What the calls cost and what the prompt cache saved, from the instrumentation's price table."""
    return Section(
        "Cost (with a price table)",
        [
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
            .height(8),
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
            ),
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
            .with_target(prom(cost_saved_share(), legend(MODEL, CURRENCY))),
        ],
    )
