"""The dashboard's rows, one module each, in the order they appear from top to bottom."""

from __future__ import annotations

from collections.abc import Callable

from dashboards.panels import Section
from dashboards.rows.conversation import conversation
from dashboards.rows.cost import cost
from dashboards.rows.overview import overview
from dashboards.rows.signals import signals
from dashboards.rows.state_handling import state_handling
from dashboards.rows.tokens_latency_errors import tokens_latency_errors
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
