"""What every row builds its panels from: the datasources, the dashboard's identity and the panel shapes.

One place for a panel's look (legend, fill, size, thresholds) keeps the rows to what each panel shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.builders.common import ReduceDataOptions, VizLegendOptions
from grafana_foundation_sdk.builders.dashboard import ThresholdsConfig
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models.common import (
    BigValueColorMode,
    BigValueGraphMode,
    LegendDisplayMode,
    LegendPlacement,
)
from grafana_foundation_sdk.models.dashboard import DataSourceRef, Panel, Threshold, ThresholdsMode

PROMETHEUS = DataSourceRef(type_val="prometheus", uid="${datasource}")
TEMPO = DataSourceRef(type_val="tempo", uid="${tempo}")
UID = "otel-responses-context-health"
#: The text box variable naming the conversation of the drill-down row.
LINEAGE = "lineage"


@dataclass(frozen=True)
class Section:
    """One row of the dashboard: its title and its panels, left to right and top to bottom."""

    title: str
    panels: list[Builder[Panel]]


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
