"""Cost from the user's price table: by token kind, exact for the table and the usage, with the service tier's
entry and snapshot names, none without a table or for a model it does not price, exported to Prometheus under the
dashboard's names; tables from files and the environment, bad tables as config errors, and the price matching and
the arithmetic table by table."""

from __future__ import annotations

import inspect
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import TracerProvider

from otel_responses import ConfigError, ResponsesInstrumentor
from otel_responses._analysis.facts import request_facts, response_facts
from otel_responses._telemetry.pricing import Price, PriceTable, cost_of, parse_prices
from otel_responses._telemetry.telemetry import Telemetry
from otel_responses.config import ENV_PREFIX, settings_from
from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry, capture

from ..conftest import Captured

REASONING_MODEL = "o4-mini"
MODEL = "gpt-4.1-mini"
COST = "openai_responses.cost"
SAVED = "openai_responses.cost.saved"
TABLE: dict[str, Any] = {
    "currency": "USD",
    "models": {
        MODEL: {"input": 0.40, "cached_input": 0.10, "output": 1.60, "service_tiers": {"flex": {"input": 0.20}}},
        REASONING_MODEL: {"input": 1.10, "cached_input": 0.275, "output": 4.40},
    },
}


def cost_points(telemetry: CapturedTelemetry, name: str = COST) -> dict[tuple[tuple[str, Any], ...], float]:
    return {tuple(sorted(dict(p.attributes).items())): p.value for p in telemetry.metric_points(name)}


# -- cost ------------------------------------------------------------------------------------------------------


def _expected(price: dict[str, float], usage: Any) -> dict[str, float]:
    cached = usage.input_tokens_details.cached_tokens
    out = {
        "input": (usage.input_tokens - cached) * price["input"] / 1_000_000,
        "cached_input": cached * price["cached_input"] / 1_000_000,
        "output": usage.output_tokens * price["output"] / 1_000_000,
    }
    return {kind: value for kind, value in out.items() if value}


def test_cost_by_token_kind_is_exact_for_the_table_and_the_usage(emulator: Emulator) -> None:
    client = emulator.client()
    with capture(prices=TABLE) as telemetry:
        first = client.responses.create(model=REASONING_MODEL, input="Remember this: the marker is M-1.")
        telemetry.reader.collect()  # cumulative sums: read the first call's cost alone
        after_first = cost_points(telemetry)
        second = client.responses.create(
            model=REASONING_MODEL, input="What was the marker?", previous_response_id=first.id
        )
        assert second.usage is not None
        assert second.usage.input_tokens_details.cached_tokens > 0
        assert second.usage.output_tokens_details.reasoning_tokens > 0  # part of output, priced as output
        price = TABLE["models"][REASONING_MODEL]
        first_cost = _expected(price, first.usage)
        assert after_first == {
            (
                ("gen_ai.request.model", REASONING_MODEL),
                ("openai_responses.cost.currency", "USD"),
                ("openai_responses.token.kind", kind),
            ): value
            for kind, value in first_cost.items()
        }
        second_cost = _expected(price, second.usage)
        totals = cost_points(telemetry)
        for kind in ("input", "cached_input", "output"):
            key = (
                ("gen_ai.request.model", REASONING_MODEL),
                ("openai_responses.cost.currency", "USD"),
                ("openai_responses.token.kind", kind),
            )
            assert totals[key] == first_cost.get(kind, 0.0) + second_cost[kind]
        cached = second.usage.input_tokens_details.cached_tokens
        assert cost_points(telemetry, SAVED) == {
            (("gen_ai.request.model", REASONING_MODEL), ("openai_responses.cost.currency", "USD")): cached
            * (price["input"] - price["cached_input"])
            / 1_000_000
        }


def test_cost_uses_the_service_tier_entry_and_snapshot_names(emulator: Emulator) -> None:
    client = emulator.client()
    snapshot = MODEL + "-2025-04-14"
    with capture(prices=TABLE) as telemetry:
        flex = client.responses.create(model=snapshot, input="Cheap, please.", service_tier="flex")
        points = cost_points(telemetry)
    assert flex.usage is not None
    key = (
        ("gen_ai.request.model", snapshot),
        ("openai_responses.cost.currency", "USD"),
        ("openai_responses.token.kind", "input"),
    )
    assert points[key] == flex.usage.input_tokens * 0.20 / 1_000_000  # the tier's input price
    key = (*key[:2], ("openai_responses.token.kind", "output"))
    assert points[key] == flex.usage.output_tokens * 1.60 / 1_000_000  # the model's, where the tier says nothing


def test_no_cost_without_a_table(client: openai.OpenAI, captured: Captured) -> None:
    client.responses.create(model=MODEL, input="No table.")
    assert captured.metric_points("gen_ai.client.token.usage")  # usage was recorded
    assert captured.metric_points(COST) == []
    assert captured.metric_points(SAVED) == []


def test_no_cost_for_a_model_the_table_does_not_price(client: openai.OpenAI) -> None:
    with capture(prices={"currency": "EUR", "models": {"some-other-model": {"input": 1, "output": 2}}}) as telemetry:
        client.responses.create(model=MODEL, input="Unpriced model.")
        assert telemetry.metric_points("gen_ai.client.token.usage")
        assert telemetry.metric_points(COST) == []
        assert telemetry.metric_points(SAVED) == []


def test_cost_counters_export_to_prometheus_under_the_dashboard_names(emulator: Emulator) -> None:
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import CollectorRegistry, generate_latest

    if "registry" not in inspect.signature(PrometheusMetricReader).parameters:
        pytest.skip("this opentelemetry-exporter-prometheus writes to the global registry only (a newer one takes one)")
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider(), meter_provider=provider, prices=TABLE)
    try:
        emulator.client().responses.create(model=MODEL, input="Scrape me.")
        text = generate_latest(registry).decode()
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    assert "openai_responses_cost_total{" in text
    line = next(
        line
        for line in text.splitlines()
        if line.startswith("openai_responses_cost_total{") and 'token_kind="output"' in line
    )
    assert 'gen_ai_request_model="gpt-4.1-mini"' in line
    assert 'openai_responses_cost_currency="USD"' in line


def test_price_table_from_files_and_the_environment(tmp_path: Path) -> None:
    json_file = tmp_path / "prices.json"
    json_file.write_text(json.dumps(TABLE))
    toml_file = tmp_path / "prices.toml"
    toml_file.write_text(
        'currency = "USD"\n[models."gpt-4.1-mini"]\ninput = 0.4\ncached_input = 0.1\noutput = 1.6\n'
        '[models."gpt-4.1-mini".service_tiers.flex]\ninput = 0.2\n'
    )
    for source in (json_file, str(toml_file)):
        table = settings_from({"prices": source}, {}).prices
        assert table is not None
        assert table.price(MODEL) == Price(0.4, 0.1, 1.6, "USD")
        assert table.price(MODEL, "flex") == Price(0.2, 0.1, 1.6, "USD")
    from_env = settings_from({}, {ENV_PREFIX + "PRICES": str(json_file)}).prices
    assert from_env is not None
    assert from_env.price(REASONING_MODEL) == Price(1.1, 0.275, 4.4, "USD")
    assert settings_from({}, {}).prices is None


def test_response_model_prices_first_then_the_request_model() -> None:
    table = {"currency": "USD", "models": {"alias": {"input": 1, "output": 1}, "served": {"input": 2, "output": 2}}}
    settings = settings_from({"prices": table, "hash_key": "pricing"})
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    telemetry = Telemetry(TracerProvider().get_tracer("t"), provider.get_meter("t"), settings)
    req = request_facts("chat", {"model": "alias", "input": "hi"}, settings)
    usage = SimpleNamespace(
        input_tokens=1_000_000, output_tokens=0, input_tokens_details=None, output_tokens_details=None
    )
    for served_by in ("served", "unpriced", None):
        telemetry.metrics._count_cost(
            req, response_facts(SimpleNamespace(model=served_by, usage=usage), settings), "alias"
        )
    data = reader.get_metrics_data()
    assert data is not None
    (point,) = [
        p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics for p in m.data.data_points
    ]
    assert dict(point.attributes or {})["gen_ai.request.model"] == "alias"  # the metric attribute: the request model
    assert isinstance(point, NumberDataPoint)
    assert point.value == 2.0 + 1.0 + 1.0  # `served` by its own price; unpriced and unknown fall back to `alias`


# -- bad tables ------------------------------------------------------------------------------------------------


def _table(**entry: Any) -> dict[str, Any]:
    return {"currency": "USD", "models": {"m": {"input": 1.0, "output": 2.0, **entry}}}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (_table(input=-1), r"prices\.models\['m'\]\.input must be a finite number >= 0"),
        (_table(output=math.nan), r"\.output must be a finite number >= 0, got nan"),
        (_table(cached_input=math.inf), r"\.cached_input must be a finite number >= 0"),
        (_table(input="2.50"), r"\.input must be a number \(price per 1M tokens\), got str"),
        (_table(output=True), r"\.output must be a number"),
        (_table(price=1), r"prices\.models\['m'\]: unknown key\(s\) 'price'"),
        ({"currency": "USD", "model": {}}, r"prices: unknown key\(s\) 'model'"),
        ({"models": {"m": {"input": 1, "output": 1}}}, r"prices\.models\['m'\]: no currency"),
        (
            {"currency": "US Dollars", "models": {"m": {"input": 1, "output": 1}}},
            r"prices\.currency must be a currency code",
        ),
        ({"currency": "USD", "models": {"m": {"output": 1}}}, r"prices\.models\['m'\]: input price missing"),
        ({"currency": "USD", "models": {}}, r"prices\.models must be a non-empty mapping"),
        ({"currency": "USD", "models": {"m": 2.5}}, r"prices\.models\['m'\] must be a mapping"),
        ({"currency": "USD", "models": {"gpt 4o": {"input": 1, "output": 1}}}, r"not a model name"),
        ({"currency": "USD", "models": {"*": {"input": 1, "output": 1}}}, r"not a model name"),
        (_table(service_tiers={"Flex Tier": {"input": 1}}), r"a service tier is a short lowercase name"),
        (_table(service_tiers={"flex": {"input": -0.5}}), r"service_tiers\['flex'\]\.input must be a finite number"),
        (_table(service_tiers={"flex": {"service_tiers": {}}}), r"service_tiers\['flex'\]: unknown key\(s\)"),
        (_table(service_tiers=["flex"]), r"service_tiers must be a mapping"),
        ([("m", 1)], r"prices must be a mapping or the path of a JSON or TOML file, got list"),
    ],
    ids=[
        "negative",
        "nan",
        "inf",
        "string",
        "bool",
        "unknown_entry_key",
        "unknown_table_key",
        "no_currency",
        "bad_currency",
        "no_input",
        "no_models",
        "entry_not_a_mapping",
        "bad_model_name",
        "bare_star",
        "bad_tier_name",
        "negative_tier_price",
        "nested_tiers",
        "tiers_not_a_mapping",
        "not_a_mapping",
    ],
)
def test_bad_price_tables_are_config_errors_from_instrument(table: Any, message: str) -> None:
    instrumentor = ResponsesInstrumentor()
    with pytest.raises(ConfigError, match=message):
        instrumentor.instrument(tracer_provider=TracerProvider(), meter_provider=MeterProvider(), prices=table)
    assert not instrumentor.is_instrumented_by_opentelemetry


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("prices.json", "{not json", r"is not valid JSON"),
        ("prices.toml", "currency = ", r"is not valid TOML"),
        ("prices.json", "[1, 2]", r"must hold a table \(an object\), not list"),
        ("prices.yaml", "currency: USD", r"must end in \.json or \.toml"),
        ("missing.json", None, r"cannot be read"),
    ],
    ids=["bad_json", "bad_toml", "json_list", "yaml", "missing"],
)
def test_bad_price_files_are_config_errors_from_a_keyword_and_warnings_from_the_environment(
    tmp_path: Path, name: str, content: str | None, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        settings_from({"prices": str(path)}, {})
    with caplog.at_level("WARNING", logger="otel_responses.config"):
        settings = settings_from({}, {ENV_PREFIX + "PRICES": str(path)})
    assert settings.prices is None
    [warning] = [record.getMessage() for record in caplog.records if record.name == "otel_responses.config"]
    assert warning.startswith(f"otel-responses: {ENV_PREFIX}PRICES: ")
    assert re.search(message, warning)
    assert warning.endswith("; using no price table instead")


# -- price matching and arithmetic ----------------------------------------------------------------------------

MATCHING = parse_prices(
    {
        "currency": "USD",
        "models": {
            "gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10.0},
            "gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
            "gpt-4-0613": {"input": 30.0, "output": 60.0},
            "gpt-4": {"input": 10.0, "output": 20.0},
            "ft:gpt-4o-mini*": {"input": 0.3, "output": 1.2, "currency": "EUR"},
            "ft:*": {"input": 9.0, "output": 9.0},
            "gpt-5.4": {"input": 1.25, "output": 10.0, "service_tiers": {"flex": {"input": 0.625, "output": 5.0}}},
        },
    }
)


@pytest.mark.parametrize(
    ("model", "tier", "expected_input"),
    [
        ("gpt-4o", None, 2.5),  # exact
        ("gpt-4o-2024-08-06", None, 2.5),  # a dated snapshot: its alias
        ("gpt-4o-mini", None, 0.15),  # exact, not the shorter gpt-4o
        ("gpt-4o-mini-2024-07-18", None, 0.15),
        ("gpt-4o-20240806", None, 2.5),  # compact date
        ("gpt-4-0613", None, 30.0),  # configured snapshot beats its alias
        ("gpt-4-1106", None, 10.0),  # -MMDD snapshot: its alias
        ("gpt-4o-audio-preview", None, None),  # not a snapshot, and no plain prefix rule: no price
        ("gpt-4o-mini-tts", None, None),
        ("ft:gpt-4o-mini-2024-07-18:org:name:abc", None, 0.3),  # longest `*` prefix
        ("ft:gpt-4.1:org:name:abc", None, 9.0),
        ("gpt-5.4", "flex", 0.625),  # the tier's own entry
        ("gpt-5.4", "priority", 1.25),  # a tier without an entry: the model's
        ("gpt-5.4-2026-03-05", "flex", 0.625),
        ("gpt-5.4", None, 1.25),
        ("GPT-4O", None, None),  # names are matched as given
        ("x" * 129, None, None),  # longer than any model name
        (None, None, None),
    ],
)
def test_price_matching(model: str | None, tier: str | None, expected_input: float | None) -> None:
    for _ in range(2):  # the second lookup comes from the cache
        price = MATCHING.price(model, tier)
        assert (price.input if price is not None else None) == expected_input


def test_price_currency_and_defaults() -> None:
    mini_ft = MATCHING.price("ft:gpt-4o-mini:org:x:y")
    assert mini_ft == Price(0.3, 0.3, 1.2, "EUR")  # cached_input defaults to input; the entry's own currency
    assert MATCHING.price("gpt-5.4", "flex") == Price(0.625, 1.25, 5.0, "USD")  # tier keys default to the model's


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ((1_000_000, 0, 1_000_000), (2.0, 0.0, 8.0, 0.0)),
        ((1_000_000, 250_000, 0), (1.5, 0.125, 0.0, 0.375)),
        ((100, 400, 10), (0.0, 100 * 0.5 / 1e6, 10 * 8.0 / 1e6, 100 * 1.5 / 1e6)),  # cached > input: capped
        ((None, None, None), (0.0, 0.0, 0.0, 0.0)),
        ((-5, -1, -3), (0.0, 0.0, 0.0, 0.0)),
    ],
    ids=["plain", "cached", "cached_over_input", "no_usage", "negative"],
)
def test_cost_arithmetic(usage: tuple[int | None, int | None, int | None], expected: tuple[float, ...]) -> None:
    cost = cost_of(Price(2.0, 0.5, 8.0, "USD"), *usage)
    assert (cost.input, cost.cached_input, cost.output, cost.saved) == pytest.approx(expected, rel=1e-12, abs=0)
    assert cost.currency == "USD"


def test_price_table_cache_is_bounded() -> None:
    table = PriceTable({}, [])
    for i in range(3000):
        assert table.price(f"model-{i}") is None
    assert len(table._cache) <= 1024
