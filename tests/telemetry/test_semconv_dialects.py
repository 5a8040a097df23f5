"""The two dialects of the GenAI conventions' metrics: ``OTEL_SEMCONV_STABILITY_OPT_IN`` read as
opentelemetry-instrumentation reads it, the default unchanged, and with ``gen_ai_latest_experimental`` the newest
names only: inference durations and chunk timings for ``chat`` and ``compact_response``, the operation duration for
every other operation, the usage counters (``gen_ai.token.modality=unknown``) and the per-operation token histograms
for every inference call, a failed one too, and no ``openai_responses.tokens``. Real client, emulator, SDK."""

from __future__ import annotations

import logging
from typing import Any

import openai
import pytest

from otel_responses import ConfigError
from otel_responses import attributes as a
from otel_responses.config import BY_NAME, settings_from
from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry, capture

LATEST = "gen_ai_latest_experimental"
VARIABLE = "OTEL_SEMCONV_STABILITY_OPT_IN"
MODEL = "o4-mini"  # the emulator's reasoning model: usage with reasoning tokens


# -- the switch ----------------------------------------------------------------------------------------------------

# (the variable's text, the latest dialect?) — each row beside its near miss.
OPT_IN_ROWS = [
    (LATEST, True),
    (f"{LATEST}x", False),  # not a prefix match
    (f"  {LATEST}  ", True),  # values are stripped
    (f"http,{LATEST}", True),  # beside another instrumentation's value
    (f"http/dup , database,{LATEST}", True),
    ("http/dup,database", False),
    ("gen_ai", False),  # the signal type is not a value
    (LATEST.upper(), False),  # values are case-sensitive, as the parser has them
    (f"{LATEST};http", False),  # only commas separate
    ("", False),
    (",,", False),
    ("gen_ai_latest_experimental,", True),
]


@pytest.mark.parametrize(("text", "latest"), OPT_IN_ROWS)
def test_the_variable_is_read_as_opentelemetry_instrumentation_reads_it(text: str, latest: bool) -> None:
    assert settings_from({}, {VARIABLE: text}).latest_semconv is latest


def test_the_reimplemented_parsing_agrees_with_opentelemetry_instrumentations(monkeypatch: pytest.MonkeyPatch) -> None:
    """The private parser, where the installed opentelemetry-instrumentation has it, answers every row alike."""
    semconv = pytest.importorskip("opentelemetry.instrumentation._semconv")
    stability = semconv._OpenTelemetrySemanticConventionStability
    signal = getattr(semconv._OpenTelemetryStabilitySignalType, "GEN_AI", None)
    if signal is None:
        pytest.skip("this opentelemetry-instrumentation has no GenAI stability opt-in")
    for text, latest in OPT_IN_ROWS:
        monkeypatch.setenv(VARIABLE, text)
        monkeypatch.setattr(stability, "_initialized", False)
        monkeypatch.setattr(stability, "_OTEL_SEMCONV_STABILITY_SIGNAL_MAPPING", {})
        stability._initialize()
        mode = stability._get_opentelemetry_stability_opt_in_mode(signal)
        assert (mode is semconv._StabilityMode.GEN_AI_LATEST_EXPERIMENTAL) is latest, text


def test_the_switch_is_the_ecosystems_variable_only(caplog: pytest.LogCaptureFixture) -> None:
    """As contrib's instrumentations read it: the variable, never a keyword of one instrumentation."""
    option = BY_NAME["semconv_opt_in"]
    assert (option.variable, option.keyword) == (VARIABLE, False)
    assert settings_from({}, {}).latest_semconv is False  # the default stays the default
    assert settings_from({}, {VARIABLE: LATEST}).latest_semconv is True
    assert settings_from({}, {VARIABLE: f"http, {LATEST}"}).latest_semconv is True
    assert settings_from({}, {VARIABLE: f"{LATEST}_not"}).latest_semconv is False  # a near miss
    with caplog.at_level(logging.WARNING):
        assert settings_from({}, {VARIABLE: "anything, at all"}).latest_semconv is False
    assert caplog.records == []  # an unknown value is ignored, as the parser does: no warning
    with pytest.raises(ConfigError, match=f"semconv_opt_in \\(set {VARIABLE}={LATEST}, as for OpenTelemetry's"):
        settings_from({"semconv_opt_in": LATEST}, {})


@pytest.fixture
def latest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The latest dialect, as an app turns it on: the ecosystem's variable."""
    monkeypatch.setenv(VARIABLE, LATEST)


# -- the metrics of each dialect -----------------------------------------------------------------------------------


def exported(telemetry: CapturedTelemetry) -> dict[str, list[Any]]:
    """Every metric exported so far, by name: its points."""
    data = telemetry.reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def by_operation(points: list[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for point in points:
        grouped.setdefault(dict(point.attributes)[a.GEN_AI_OPERATION_NAME], []).append(point)
    return grouped


def _workload(client: openai.OpenAI) -> dict[str, int]:
    """A chat call, a streamed one continuing it (cached input), a refused one (both state fields: a 400), a
    retrieve, a conversation; the usage the two answered calls reported, summed."""
    first = client.responses.create(model=MODEL, input="Remember this: the marker is D-1.")
    events: list[Any] = list(
        client.responses.create(model=MODEL, input="And stream it.", previous_response_id=first.id, stream=True)
    )
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="x", previous_response_id=first.id, conversation="conv_x")
    client.responses.retrieve(first.id)
    client.conversations.create()
    usages: list[Any] = [first.usage, events[-1].response.usage]
    assert all(u is not None for u in usages)
    return {
        "input": sum(u.input_tokens for u in usages),
        "output": sum(u.output_tokens for u in usages),
        "cached": sum(u.input_tokens_details.cached_tokens for u in usages),
        "reasoning": sum(u.output_tokens_details.reasoning_tokens for u in usages),
    }


def _withheld(metrics: dict[str, list[Any]]) -> dict[str, int]:
    return {dict(p.attributes)[a.WITHHELD_REASON]: p.value for p in metrics[a.METRIC_WITHHELD_ITEMS]}


def total(points: list[Any]) -> int:
    return int(sum(p.value for p in points))


def test_the_default_dialect_is_unchanged(emulator: Emulator) -> None:
    with capture() as telemetry:
        usage = _workload(emulator.client())
        metrics = exported(telemetry)
    assert set(metrics) == {
        a.METRIC_OPERATION_DURATION,
        a.METRIC_TOKEN_USAGE,
        a.METRIC_TIME_TO_FIRST_CHUNK,
        a.METRIC_CALLS,
        a.METRIC_SIGNALS,
        a.METRIC_TOKENS,
        a.METRIC_WITHHELD_ITEMS,  # the chained turn's parent reasoning, an earlier turn's (o4-mini: current_turn)
    }
    assert _withheld(metrics) == {"turn_boundary": 1}
    durations = by_operation(metrics[a.METRIC_OPERATION_DURATION])
    assert sum(p.count for p in durations["chat"]) == 3  # the refused call too, with its error.type
    assert {dict(p.attributes).get(a.ERROR_TYPE) for p in durations["chat"]} == {None, "BadRequestError"}
    assert set(durations) == {"chat", "fetch_response", "create_conversation"}
    usage_points = metrics[a.METRIC_TOKEN_USAGE]
    assert {dict(p.attributes)[a.GEN_AI_TOKEN_TYPE] for p in usage_points} == {"input", "output"}
    inputs = [p for p in usage_points if dict(p.attributes)[a.GEN_AI_TOKEN_TYPE] == "input"]
    assert sum(p.count for p in inputs) == 2  # responses read only: not the refused call
    assert sum(p.sum for p in inputs) == usage["input"]
    kinds = {dict(p.attributes)[a.TOKEN_KIND]: p.value for p in metrics[a.METRIC_TOKENS]}
    assert kinds == {"reasoning": usage["reasoning"], "cached_input": usage["cached"]}
    assert usage["cached"] > 0


def test_the_latest_dialect_emits_the_newest_names_and_not_the_old_ones(emulator: Emulator, latest: None) -> None:
    with capture() as telemetry:
        usage = _workload(emulator.client())
        metrics = exported(telemetry)
    assert set(metrics) == {
        a.METRIC_INFERENCE_DURATION,
        a.METRIC_INFERENCE_TIME_TO_FIRST_CHUNK,
        a.METRIC_OPERATION_DURATION,
        a.METRIC_USAGE_INPUT_TOKENS,
        a.METRIC_USAGE_OUTPUT_TOKENS,
        a.METRIC_USAGE_CACHE_READ_INPUT_TOKENS,
        a.METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS,
        a.METRIC_USAGE_REASONING_OUTPUT_TOKENS,
        a.METRIC_OPERATION_INPUT_TOKENS,
        a.METRIC_OPERATION_OUTPUT_TOKENS,
        a.METRIC_CALLS,
        a.METRIC_SIGNALS,
        a.METRIC_WITHHELD_ITEMS,  # the project's own: the same in both dialects
    }
    assert _withheld(metrics) == {"turn_boundary": 1}
    # Inference has its own duration; the operation duration is for the other operations only.
    inference = by_operation(metrics[a.METRIC_INFERENCE_DURATION])
    assert set(inference) == {"chat"}
    assert sum(p.count for p in inference["chat"]) == 3
    assert set(by_operation(metrics[a.METRIC_OPERATION_DURATION])) == {"fetch_response", "create_conversation"}
    assert set(by_operation(metrics[a.METRIC_INFERENCE_TIME_TO_FIRST_CHUNK])) == {"chat"}
    # The usage counters: every inference call, the refused one at 0, under gen_ai.token.modality=unknown.
    for name in (a.METRIC_USAGE_INPUT_TOKENS, a.METRIC_USAGE_OUTPUT_TOKENS, a.METRIC_USAGE_REASONING_OUTPUT_TOKENS):
        points = metrics[name]
        assert {dict(p.attributes)[a.GEN_AI_TOKEN_MODALITY] for p in points} == {"unknown"}
        assert all(a.ERROR_TYPE not in dict(p.attributes) for p in points)
        assert {dict(p.attributes)[a.GEN_AI_OPERATION_NAME] for p in points} == {"chat"}
    refused = [p for p in metrics[a.METRIC_USAGE_INPUT_TOKENS] if a.GEN_AI_RESPONSE_MODEL not in dict(p.attributes)]
    assert [p.value for p in refused] == [0]  # no response came: 0, recorded all the same
    assert total(metrics[a.METRIC_USAGE_INPUT_TOKENS]) == usage["input"]
    assert total(metrics[a.METRIC_USAGE_OUTPUT_TOKENS]) == usage["output"]
    assert total(metrics[a.METRIC_USAGE_CACHE_READ_INPUT_TOKENS]) == usage["cached"] > 0
    assert total(metrics[a.METRIC_USAGE_REASONING_OUTPUT_TOKENS]) == usage["reasoning"] > 0
    assert total(metrics[a.METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS]) == 0  # the emulator reports none written
    assert len(metrics[a.METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS]) == 2  # 0 is recorded: the two series exist
    # The per-operation histograms: no modality; the refused call's 0 with its error.type.
    for name in (a.METRIC_OPERATION_INPUT_TOKENS, a.METRIC_OPERATION_OUTPUT_TOKENS):
        points = metrics[name]
        assert all(a.GEN_AI_TOKEN_MODALITY not in dict(p.attributes) for p in points)
        assert sum(p.count for p in points) == 3
        assert sum(p.sum for p in points) == usage["input" if name == a.METRIC_OPERATION_INPUT_TOKENS else "output"]
        failed = [p for p in points if dict(p.attributes).get(a.ERROR_TYPE) == "BadRequestError"]
        assert [(p.count, p.sum) for p in failed] == [(1, 0)]
        assert list(points[0].explicit_bounds) == list(a.TOKEN_USAGE_BUCKETS)


def test_a_stream_cut_short_still_counts_its_inference_call_at_zero(emulator: Emulator, latest: None) -> None:
    with capture() as telemetry:
        stream = emulator.client().responses.create(model=MODEL, input="Stream, then stop.", stream=True)
        next(iter(stream))
        stream.close()
        metrics = exported(telemetry)
    assert [p.value for p in metrics[a.METRIC_USAGE_OUTPUT_TOKENS]] == [0]
    assert [p.count for p in metrics[a.METRIC_OPERATION_OUTPUT_TOKENS]] == [1]
    assert [p.count for p in metrics[a.METRIC_INFERENCE_DURATION]] == [1]


def test_chunk_timing_in_the_latest_dialect_is_the_inference_metric(emulator: Emulator, latest: None) -> None:
    client = emulator.client()
    with capture(chunk_timing=True) as telemetry:
        events = list(client.responses.create(model=MODEL, input="Stream it.", stream=True))
        metrics = exported(telemetry)
    (point,) = metrics[a.METRIC_INFERENCE_TIME_PER_OUTPUT_CHUNK]
    assert point.count == len(events) - 1
    assert dict(point.attributes) == dict(metrics[a.METRIC_INFERENCE_TIME_TO_FIRST_CHUNK][0].attributes)
    assert a.METRIC_TIME_PER_OUTPUT_CHUNK not in metrics
    assert a.METRIC_TIME_TO_FIRST_CHUNK not in metrics


@pytest.mark.skipif(not hasattr(openai.resources.responses.Responses, "compact"), reason="compact: openai 2.9.0")
def test_compact_is_inference_in_the_latest_dialect(emulator: Emulator, latest: None) -> None:
    client = emulator.client()
    with capture() as telemetry:
        first = client.responses.create(model=MODEL, input="Remember: the marker is C-1.")
        client.responses.compact(model=MODEL, previous_response_id=first.id)
        metrics = exported(telemetry)
    assert set(by_operation(metrics[a.METRIC_INFERENCE_DURATION])) == {"chat", "compact_response"}
    assert set(by_operation(metrics[a.METRIC_USAGE_INPUT_TOKENS])) == {"chat", "compact_response"}
    assert a.METRIC_OPERATION_DURATION not in metrics


def test_the_switch_reaches_the_instrumentation_from_the_environment(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VARIABLE, f"http, {LATEST}")
    with capture() as telemetry:
        emulator.client().responses.create(model=MODEL, input="hi")
        metrics = exported(telemetry)
    assert a.METRIC_INFERENCE_DURATION in metrics
    assert a.METRIC_OPERATION_DURATION not in metrics
    assert a.METRIC_TOKEN_USAGE not in metrics


def test_the_prefixed_spelling_is_no_setting_and_names_the_variable_to_use(caplog: pytest.LogCaptureFixture) -> None:
    """The switch is the ecosystem's variable: the package's prefix before its name is a typo, warned about with
    the variable to use instead, and ignored; the variable itself warns about nothing."""
    prefixed = "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_SEMCONV_OPT_IN"
    with caplog.at_level(logging.WARNING):
        assert settings_from({}, {prefixed: LATEST}).latest_semconv is False
    assert [r.getMessage() for r in caplog.records] == [
        f"otel-responses: {prefixed} is not a setting of this package (did you mean {VARIABLE}?); it is ignored"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert settings_from({}, {VARIABLE: LATEST}).latest_semconv is True
    assert caplog.records == []
