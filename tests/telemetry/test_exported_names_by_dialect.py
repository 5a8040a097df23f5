"""The demo, run in each dialect of the GenAI conventions, exports only names the records page lists for that
dialect (the generated Every name table, from attributes.py): every span attribute, span event and event attribute,
metric and metric attribute it exports is there, as ``both`` or as that dialect's, none is the other dialect's,
and each name the page gives that dialect alone, the demo can make, it does make."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_responses import attributes as a
from otel_responses.tools.demo import run_scenarios

RECORDS = (Path(__file__).resolve().parents[2] / "docs" / "records.md").read_text()
VARIABLE = "OTEL_SEMCONV_STABILITY_OPT_IN"
# Names the demo cannot make: it streams nothing (the chunk timings), turns no chunk timing on, and has no price
# table (cost); its scenarios never fail inside the instrumentation (the internal errors counter and its step).
NOT_IN_THE_DEMO = {
    a.METRIC_TIME_TO_FIRST_CHUNK,
    a.METRIC_TIME_PER_OUTPUT_CHUNK,
    a.METRIC_INFERENCE_TIME_TO_FIRST_CHUNK,
    a.METRIC_INFERENCE_TIME_PER_OUTPUT_CHUNK,
}


def listed() -> dict[str, str]:
    """Name -> dialect (``both``, ``default``, ``latest``), as the records page's Every name table says."""
    block = RECORDS.split("<!-- generated: names", 1)[1].split("<!-- end generated: names", 1)[0]
    names_table = block.split("\n\n", 1)[0]  # then the values' table
    rows = re.findall(r"^\| `([^`]+)` \| [^|]+ \| [^|]* \| (both|default|latest) \| ", names_table, re.M)
    assert len(rows) > 100
    return dict(rows)


def exported_names(monkeypatch: pytest.MonkeyPatch, opt_in: str | None) -> set[str]:
    """Every name the demo's scenarios export with ``OTEL_SEMCONV_STABILITY_OPT_IN`` set to ``opt_in``."""
    if opt_in is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, opt_in)
    memory = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
    reader = InMemoryMetricReader()
    outcomes = run_scenarios(tracer_provider, MeterProvider(metric_readers=[reader]), memory)
    assert outcomes
    assert all(o.as_expected for o in outcomes)
    names: set[str] = set()
    for outcome in outcomes:
        for span in outcome.spans:
            names.update(span.attributes or {})
            for event in span.events:
                names.add(event.name)
                names.update(event.attributes or {})
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                names.add(metric.name)
                for point in metric.data.data_points:
                    names.update(point.attributes or {})
    return names


@pytest.mark.parametrize(("opt_in", "dialect"), [(None, "default"), ("gen_ai_latest_experimental", "latest")])
def test_the_demo_exports_only_the_names_the_page_lists_for_its_dialect(
    monkeypatch: pytest.MonkeyPatch, opt_in: str | None, dialect: str
) -> None:
    names = listed()
    exported = exported_names(monkeypatch, opt_in)
    allowed = {name for name, its in names.items() if its in ("both", dialect)}
    other = {name for name, its in names.items() if its not in ("both", dialect)}
    assert exported - allowed == set()
    assert exported & other == set()
    own = {name for name, its in names.items() if its == dialect}
    assert own - NOT_IN_THE_DEMO <= exported
    # Which names these are: the renamed metrics, each on its side.
    if dialect == "latest":
        assert {a.METRIC_INFERENCE_DURATION, a.METRIC_USAGE_INPUT_TOKENS, a.GEN_AI_TOKEN_MODALITY} <= exported
    else:
        assert {a.METRIC_TOKEN_USAGE, a.GEN_AI_TOKEN_TYPE, a.METRIC_TOKENS} <= exported
    assert a.METRIC_OPERATION_DURATION in exported  # both: the latest keeps it for the other operations


def test_the_page_lists_each_dialects_names_from_attributes() -> None:
    """The dialect column is attributes.DIALECTS: a name moved to one dialect in code moves on the page."""
    names = listed()
    constants = {v: k for k, v in vars(a).items() if k.isupper() and isinstance(v, str)}
    for name, dialect in names.items():
        assert a.dialect_of(constants[name]) == dialect, name
