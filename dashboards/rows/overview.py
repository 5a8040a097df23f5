"""The "Overview" row: a number for each of loss, errors, warnings and calls over the selected range."""

from __future__ import annotations

from dashboards.names import CALLS, CONTEXT_LOSS, SEVERITY, SIGNALS
from dashboards.panels import Section, big_number, thresholds
from dashboards.promql import RANGE, eq, share, total
from otel_responses.signals import CATALOGUE, ERROR, WARNING


def _names(severity: str) -> str:
    return ", ".join(kind.name for kind in CATALOGUE.values() if kind.severity == severity)


def overview() -> Section:
    """The totals of the selected range: how much context was lost, against how many calls."""
    return Section(
        "Overview (selected time range)",
        [
            big_number(
                "Calls with context loss",
                "Share of instrumented calls in the selected time range that raised at least one signal of "
                "severity error or warning (span attribute openai_responses.context_loss = true): the model "
                "probably answered without some of the context the app meant to give it. Healthy apps stay near "
                "0%; red is above 5%. 'Signal rate by name' below says which mistake it is.",
                share(CALLS, eq(CONTEXT_LOSS, "true"), window=RANGE),
                unit="percentunit",
                steps=thresholds((None, "green"), (0.01, "orange"), (0.05, "red")),
            ),
            big_number(
                "Error signals",
                f"Error-severity signals in the selected range ({_names(ERROR)}). Each one is a request the API "
                "rejects or context that is certainly lost. Anything above 0 needs a look; the alert "
                "OpenAIResponsesErrorSignal fires on the first one.",
                total(SIGNALS, eq(SEVERITY, ERROR)),
                unit="short",
                steps=thresholds((None, "green"), (1, "red")),
            ),
            big_number(
                "Warning signals",
                f"Warning-severity signals in the selected range ({_names(WARNING)}). Context was probably lost "
                "silently: the API accepted the request, but the model did not see everything it saw before (or, "
                "for a reasoning pair or an item id of a shape the API refuses, the request was refused).",
                total(SIGNALS, eq(SEVERITY, WARNING)),
                unit="short",
                steps=thresholds((None, "green"), (1, "orange")),
            ),
            big_number(
                "Calls",
                "Instrumented OpenAI Responses and Conversations API calls in the selected range, for scale: a "
                "handful of signals among a million calls reads differently from a handful among ten.",
                total(CALLS),
                unit="short",
                steps=thresholds((None, "blue")),
            ),
        ],
    )
