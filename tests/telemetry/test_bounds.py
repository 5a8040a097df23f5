"""Bounds on what reaches telemetry: model names, ids, codes and item types come from the app or the
server, unbounded in length and number. Span strings are capped (`bounds.MAX_LENGTH`), metric attribute values
validated (else `_OTHER`), and no structure of this package grows with the number of distinct values; the number
of series is the OpenTelemetry SDK's cardinality limit. The app sees the same results and errors throughout.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.metrics.view import View

from otel_responses import ResponsesInstrumentor
from otel_responses._telemetry import bounds, metrics, tally, telemetry
from otel_responses._telemetry.bounds import MAX_LENGTH, OTHER

from ..conftest import Captured, new_captured
from ..sameness.test_faults import (
    Seen,
    differential,
    error,
    events_stream,
    instrumentation_off,
    normal_events,
    ok,
    plain_create,
    response_body,
    run_sync,
    stream_create,
)
from ..support import mock_client

MODEL = "gpt-4.1-mini"
HUGE = 1_000_000
DURATION = "gen_ai.client.operation.duration"
COUNTERS = (
    DURATION,
    "gen_ai.client.token.usage",
    "openai_responses.calls",
    "openai_responses.tokens",
    "openai_responses.signals",
)


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def strings(value: Any) -> list[str]:
    """Every string in an attribute value (a string or a sequence of them)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def assert_span_bounded(span: Any) -> None:
    """The span name, status, attributes and event attributes: no string longer than the cap."""
    assert len(span.name) <= MAX_LENGTH + 32
    assert len(span.status.description or "") <= MAX_LENGTH
    for key, value in attrs(span).items():
        assert all(len(s) <= MAX_LENGTH for s in strings(value)), key
    for event in span.events:
        for key, value in (event.attributes or {}).items():
            assert all(len(s) <= MAX_LENGTH for s in strings(value)), key


def metric_values(cap: Captured, name: str, key: str) -> set[Any]:
    return {(p.attributes or {}).get(key) for p in cap.metric_points(name)}


def assert_metrics_bounded(cap: Captured) -> None:
    for name in COUNTERS:
        for point in cap.metric_points(name):
            for key, value in (point.attributes or {}).items():
                assert all(len(s) <= bounds.MAX_MODEL for s in strings(value)), (name, key)


# -- validators, table-driven ------------------------------------------------------------------------------------

MODELS_KEPT = [
    "gpt-5.4",
    "gpt-4o-2024-08-06",
    "gpt-4.1-mini",
    "o4-mini",
    "gpt-5.3-codex",
    "ft:gpt-4o-mini-2024-07-18:my-org:custom_suffix:9AbCdEfG",
    "openai/gpt-oss-120b",
    "my-azure-deployment_01.prod",
    "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
    "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
    "gemini-1.5-pro@001",
    "llama3.1:8b",
    "model+variant",
    "m" * 128,
]
MODELS_REFUSED = [
    "",
    "m" * 129,
    "m" * HUGE,
    "gpt-4o mini",
    "gpt-4o\n",
    "gpt\x00",
    "gpt\t4",
    "gpt-4o\u200b",  # zero-width space
    "g\u03c1t-4o",  # a Greek rho
    "gpt-4o;drop",
    "<script>",
    "gpt-4o\x1b[31m",
]


@pytest.mark.parametrize("name", MODELS_KEPT)
def test_real_model_names_are_kept_on_metrics(name: str) -> None:
    assert bounds.metric_model(name) == name
    assert bounds.metric_model(name) == name  # the second time from the memo


@pytest.mark.parametrize("name", MODELS_REFUSED, ids=lambda n: repr(n[:20]))
def test_odd_model_names_become_other_on_metrics(name: str) -> None:
    assert bounds.metric_model(name) == OTHER
    assert bounds.metric_model(name) == OTHER


def test_no_model_stays_none() -> None:
    assert bounds.metric_model(None) is None
    assert bounds.metric_host(None) is None


@pytest.mark.parametrize(
    ("code", "kept"),
    [
        ("previous_response_not_found", True),
        ("server_error", True),
        ("invalid_encrypted_content", True),
        ("rate_limit_exceeded", True),
        ("BadRequestError", True),
        ("APIError", True),
        ("ValidationError", True),
        ("Outer.Inner", True),
        ("response_failed", True),
        ("c" * 64, True),
        ("c" * 65, False),
        ("c" * HUGE, False),
        ("", False),
        ("server error", False),
        ("code\n", False),
        ("f.<locals>.Boom", False),
        ("code:x", False),
        ("é", False),
    ],
)
def test_error_codes_on_metrics(code: str, kept: bool) -> None:
    assert bounds.metric_code(code) == (code if kept else OTHER)


@pytest.mark.parametrize(
    ("host", "kept"),
    [
        ("api.openai.com", True),
        ("127.0.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("fe80::1%eth0", True),
        ("my-resource.openai.azure.com", True),
        ("xn--bcher-kva.example", True),
        ("h" * 253, True),
        ("h" * 254, False),
        ("evil host", False),
        ("host\r\n", False),
    ],
)
def test_hosts_on_metrics(host: str, kept: bool) -> None:
    assert bounds.metric_host(host) == (host if kept else OTHER)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ""),
        ("resp_" + "a" * 48, "resp_" + "a" * 48),
        ("x" * MAX_LENGTH, "x" * MAX_LENGTH),
        ("x" * (MAX_LENGTH + 1), "x" * MAX_LENGTH),
        ("y" * HUGE, "y" * MAX_LENGTH),
        ("a\nb\x00 c", "a\nb\x00 c"),  # span strings keep their text, only shorter
    ],
)
def test_cap(value: str, expected: str) -> None:
    assert bounds.cap(value) == expected


def test_short_strings_are_not_copied() -> None:
    value = "resp_" + "a" * 48
    assert bounds.cap(value) is value
    values = ["message", "function_call", "reasoning"]
    assert bounds.cap_all(values) is values
    detail: dict[str, Any] = {"openai_responses.call.ids": ["call_1"], "openai_responses.count": 3}
    assert bounds.cap_attributes(detail) is detail


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("z" * 300, "z" * MAX_LENGTH),
        (["a", "z" * 300], ["a", "z" * MAX_LENGTH]),
        (("a", "z" * 300), ["a", "z" * MAX_LENGTH]),
        ([], []),
        ([1, 2], [1, 2]),
        (7, 7),
        (True, True),
        (1.5, 1.5),
    ],
)
def test_cap_value(value: Any, expected: Any) -> None:
    assert bounds.cap_value(value) == expected


def test_cap_list_bounds_entries_and_their_length() -> None:
    capped = bounds.cap_list([*(f"v{i}" for i in range(1000)), "w" * HUGE])
    assert len(capped) == bounds.MAX_LIST
    assert bounds.cap_list(("reasoning.encrypted_content", "w" * HUGE)) == ["reasoning.encrypted_content", "w" * 256]


def test_the_model_memo_is_bounded_and_never_closed() -> None:
    for number in range(3 * bounds._CACHE_SIZE):
        assert bounds.metric_model(f"model-{number}") == f"model-{number}"
        assert len(bounds._models) <= bounds._CACHE_SIZE
    # A model first seen after thousands of others is still recorded by its name.
    assert bounds.metric_model("gpt-6") == "gpt-6"


# -- through the real client -------------------------------------------------------------------------------------


def test_a_huge_model_name_is_bounded_and_the_app_gets_the_same_answer(
    captured: Captured, client: openai.OpenAI
) -> None:
    model = "m" * HUGE
    instrumented = client.responses.create(model=model, input="The marker is ZEBRA. Say noted.")
    span = captured.only_span()
    a = attrs(span)
    assert a["gen_ai.request.model"] == "m" * MAX_LENGTH
    assert a["gen_ai.response.model"] == "m" * MAX_LENGTH
    assert span.name == "chat " + "m" * MAX_LENGTH
    assert_span_bounded(span)
    assert metric_values(captured, DURATION, "gen_ai.request.model") == {OTHER}
    assert metric_values(captured, DURATION, "gen_ai.response.model") == {OTHER}
    assert metric_values(captured, "openai_responses.calls", "gen_ai.request.model") == {OTHER}
    assert_metrics_bounded(captured)
    assert instrumented.model == model  # the app's object is untouched
    with instrumentation_off(captured):
        bare = client.responses.create(model=model, input="The marker is ZEBRA. Say noted.")
    assert instrumented.output_text == bare.output_text
    assert instrumented.model == bare.model


def test_a_huge_model_name_in_a_refused_request_is_bounded(captured: Captured) -> None:
    huge = "m" * HUGE
    body = {
        "error": {"message": "model not found", "type": "invalid_request_error", "param": "model", "code": "c" * HUGE}
    }

    def create(client: Any, seen: Any) -> Any:
        return client.responses.create(model=huge, input="hi")

    seen = differential(captured, lambda: run_sync([error(404, body, **{"x-request-id": "r" * 100_000})], create))
    assert seen.outcome[0] == "raised"
    assert seen.outcome[1][0] == "NotFoundError"
    span = captured.only_span()
    a = attrs(span)
    assert a["error.type"] == "NotFoundError"
    assert a["openai_responses.error.code"] == "c" * MAX_LENGTH
    assert a["openai_responses.request_id"] == "r" * MAX_LENGTH
    assert_span_bounded(span)
    assert metric_values(captured, DURATION, "gen_ai.request.model") == {OTHER}
    assert metric_values(captured, DURATION, "error.type") == {"NotFoundError"}


def test_a_model_name_with_control_characters_is_other_on_metrics_and_kept_on_the_span(
    captured: Captured, client: openai.OpenAI
) -> None:
    model = "gpt-4o \x00\n\x1b[31mred"
    client.responses.create(model=model, input="hi")
    span = captured.only_span()
    assert attrs(span)["gen_ai.request.model"] == model
    assert attrs(span)["gen_ai.response.model"] == model
    for name in (DURATION, "gen_ai.client.token.usage", "openai_responses.calls"):
        assert metric_values(captured, name, "gen_ai.request.model") == {OTHER}, name
    assert metric_values(captured, DURATION, "gen_ai.response.model") == {OTHER}


def test_real_model_names_are_kept(captured: Captured, client: openai.OpenAI) -> None:
    for model in ("gpt-5.4", "ft:gpt-4o-mini:org:name:id", "openai/gpt-oss-120b"):
        client.responses.create(model=model, input="hi")
    assert metric_values(captured, "openai_responses.calls", "gen_ai.request.model") == {
        "gpt-5.4",
        "ft:gpt-4o-mini:org:name:id",
        "openai/gpt-oss-120b",
    }
    assert metric_values(captured, DURATION, "server.address") == {"127.0.0.1"}


def _error_event(code: str) -> list[Any]:
    start = {**response_body(), "status": "in_progress", "output": [], "usage": None}
    return [
        {"type": "response.created", "response": start},
        {"type": "error", "code": code, "message": "boom", "param": None},
    ]


@pytest.mark.parametrize(
    ("code", "span_type", "metric_type"),
    [
        ("server_error", "server_error", "server_error"),
        ("e" * HUGE, "e" * MAX_LENGTH, OTHER),
        ("bad code\n\x00", "bad code\n\x00", OTHER),
    ],
    ids=["plain", "huge", "odd"],
)
def test_a_stream_error_event_gives_a_bounded_error_type(
    captured: Captured, code: str, span_type: str, metric_type: str
) -> None:
    seen = differential(captured, lambda: run_sync([events_stream(_error_event(code))], stream_create))
    assert seen.events
    span = captured.only_span()
    assert attrs(span)["error.type"] == span_type
    assert span.status.description == span_type
    assert_span_bounded(span)
    assert metric_values(captured, DURATION, "error.type") == {metric_type}


def test_a_failed_response_with_a_huge_code_gives_a_bounded_error_type(captured: Captured) -> None:
    failed = response_body(status="failed", error={"code": "f" * HUGE, "message": "boom"}, model="x" * HUGE)
    differential(captured, lambda: run_sync([events_stream(normal_events(failed, "response.failed"))], stream_create))
    span = captured.only_span()
    assert attrs(span)["error.type"] == "f" * MAX_LENGTH
    assert attrs(span)["gen_ai.response.model"] == "x" * MAX_LENGTH
    assert_span_bounded(span)
    assert metric_values(captured, DURATION, "error.type") == {OTHER}
    assert metric_values(captured, DURATION, "gen_ai.response.model") == {OTHER}


def test_huge_item_types_are_bounded_in_the_type_lists(captured: Captured) -> None:
    odd = "t" * HUGE
    output = [{"type": odd, "id": "item_1"}, {"type": "message", "id": "msg_1", "role": "assistant", "content": []}]

    def create(client: Any, seen: Any) -> Any:
        return client.responses.create(
            model=MODEL,
            input=[{"type": odd, "id": "x"}, {"role": "user", "content": "hi"}],
            include=["reasoning.encrypted_content", "i" * HUGE],
            conversation="conv_" + "c" * HUGE,
            service_tier="s" * HUGE,
        )

    body = response_body("r" * HUGE, output=output, service_tier="s" * HUGE, conversation={"id": "conv_x"})
    differential(captured, lambda: run_sync([ok(body)], create))
    span = captured.only_span()
    a = attrs(span)
    assert a["openai_responses.input.item_types"] == ("t" * MAX_LENGTH, "message")
    assert a["openai_responses.output.item_types"] == ("t" * MAX_LENGTH, "message")
    assert a["openai_responses.include"] == ("reasoning.encrypted_content", "i" * MAX_LENGTH)
    assert a["gen_ai.conversation.id"] == ("conv_" + "c" * HUGE)[:MAX_LENGTH]
    assert a["gen_ai.response.id"] == "r" * MAX_LENGTH
    assert a["openai.request.service_tier"] == a["openai.response.service_tier"] == "s" * MAX_LENGTH
    assert_span_bounded(span)


def test_signal_event_ids_are_bounded(captured: Captured) -> None:
    call_id = "call_" + "c" * HUGE

    def create(client: Any, seen: Any) -> Any:
        return client.responses.create(
            model=MODEL, input=[{"type": "function_call_output", "call_id": call_id, "output": "42"}]
        )

    differential(captured, lambda: run_sync([ok()], create))
    span = captured.only_span()
    assert attrs(span)["openai_responses.signals"] == ("orphan_tool_output",)
    (event,) = [
        e for e in span.events if (e.attributes or {}).get("openai_responses.signal.name") == "orphan_tool_output"
    ]
    assert (event.attributes or {})["openai_responses.call.ids"] == (call_id[:MAX_LENGTH],)
    assert_span_bounded(span)


def test_a_huge_instructions_version_setting_is_capped() -> None:
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(
        tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, instructions_version="v" * HUGE
    )
    try:
        client = mock_client(lambda request: ok()(request, False))
        plain_create(client, Seen())
        client.close()
    finally:
        instrumentor.uninstrument()
    assert attrs(cap.only_span())["openai_responses.instructions.version"] == "v" * MAX_LENGTH


def echo_model(request: Any) -> Any:
    """A response naming the requested model, as the API does."""
    return ok(response_body(model=json.loads(request.content)["model"]))(request, False)


# -- the number of series -----------------------------------------------------------------------------------------


@pytest.fixture
def small_sdk_limit(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Captured, list[telemetry.Telemetry]]]:
    """The instrumentation on, with the SDK's cardinality limit lowered by an operator's View to 50 series per
    instrument; the Telemetry objects made, to look inside."""
    made: list[telemetry.Telemetry] = []
    original = telemetry.Telemetry.__init__

    def init(self: telemetry.Telemetry, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    if "aggregation_cardinality_limit" not in inspect.signature(View).parameters:
        pytest.skip("this opentelemetry-sdk has no per-View cardinality limit (a newer one has)")
    monkeypatch.setattr(telemetry.Telemetry, "__init__", init)
    monkeypatch.setattr(tally, "MAX_SERIES", 500)  # the tally's own memory guard, made small enough to reach
    cap = new_captured()
    reader = InMemoryMetricReader()
    provider = MeterProvider(
        metric_readers=[reader], views=[View(instrument_name="*", aggregation_cardinality_limit=50)]
    )
    cap.reader, cap.meter_provider = reader, provider
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=provider)
    try:
        yield cap, made
    finally:
        instrumentor.uninstrument()


def test_many_model_names_grow_nothing_of_this_package_and_overflow_in_the_sdk(
    small_sdk_limit: tuple[Captured, list[telemetry.Telemetry]],
) -> None:
    cap, made = small_sdk_limit
    models = [f"tenant-{number}-model" for number in range(1200)]
    client = mock_client(echo_model)
    try:
        for model in models:
            client.responses.create(model=model, input="hi")
            client.responses.create(model=model + " \x00" + "x" * 5000, input="hi")  # and as many odd, long ones
    finally:
        client.close()
    (tel,) = made
    recorded = tel.metrics
    assert len(recorded._cache) <= metrics._CACHE_SIZE
    assert len(recorded._genai_cache) <= metrics._CACHE_SIZE
    assert len(bounds._models) <= bounds._CACHE_SIZE
    assert recorded.tokens is not None  # the default dialect's
    for series in (recorded.calls, recorded.tokens, recorded.encrypted_items):
        assert len(series._totals) <= tally.MAX_SERIES
    # The SDK decides how many series are exported: 50, then one overflow series that keeps summing.
    for name in (DURATION, "gen_ai.client.token.usage", "openai_responses.calls"):
        points = cap.metric_points(name)
        assert len(points) <= 51, name
        overflow = [p for p in points if (p.attributes or {}).get("otel.metric.overflow") is True]
        assert len(overflow) == 1, name
    calls = cap.metric_points("openai_responses.calls")
    assert sum(p.value for p in calls) == 2 * len(models)  # nothing lost, only folded
    durations = cap.metric_points(DURATION)
    assert sum(p.count for p in durations) == 2 * len(models)
    assert metric_values(cap, "openai_responses.calls", "gen_ai.request.model") <= {*models, OTHER, None}
    # No string held for the metrics is longer than a model name may be.
    for key, cached in recorded._cache.items():
        assert all(len(s) <= bounds.MAX_MODEL for k in key if isinstance(k, str) for s in [k])
        assert all(len(s) <= bounds.MAX_MODEL for v in cached.values() for s in strings(v))
