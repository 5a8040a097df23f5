"""The dashboard's rows, one module each, in the order they appear from top to bottom."""

from __future__ import annotations

from collections.abc import Callable

from dashboards.names import LATEST
from dashboards.panels import Section
from dashboards.rows.conversation import conversation
from dashboards.rows.cost import cost
from dashboards.rows.overview import overview
from dashboards.rows.signals import signals
from dashboards.rows.state_handling import state_handling
from dashboards.rows.tokens_latency_errors import tokens_latency_errors, tokens_latency_errors_latest
from dashboards.rows.traces import traces
from dashboards.rows.turn_depth import turn_depth

ROWS: tuple[Callable[[], Section], ...] = (
    overview,
    signals,
    state_handling,
    turn_depth,
    tokens_latency_errors,
    cost,
    traces,
    conversation,
)


def rows_for(semconv: str) -> tuple[Callable[[], Section], ...]:
    """The rows for a dialect of the GenAI conventions: the same, but the one row that reads the GenAI metrics."""
    if semconv != LATEST:
        return ROWS
    return tuple(tokens_latency_errors_latest if row is tokens_latency_errors else row for row in ROWS)
