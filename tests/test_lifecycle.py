"""instrument/uninstrument, raw and streaming variants, and what the app sees staying the same."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from openai.resources.responses.responses import AsyncResponses, Responses

from otel_responses import ConfigError, ResponsesInstrumentor
from otel_responses.emulator import Emulator

from .conftest import Captured, new_captured

MODEL = "gpt-4.1-mini"
METHODS = ("create", "parse")


def originals() -> dict[str, Any]:
    return {f"{cls.__name__}.{m}": cls.__dict__[m] for cls in (Responses, AsyncResponses) for m in METHODS}


def test_uninstrument_restores_the_original_methods(emulator: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    before = originals()
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    during = originals()
    assert all(during[name] is not before[name] for name in before)
    instrumentor.uninstrument()
    assert originals() == before
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        instrumentor.uninstrument()  # a second uninstrument does nothing, and says nothing
    assert originals() == before
    assert caplog.records == []
    emulator.client().responses.create(model=MODEL, input="hi")
    assert cap.spans() == []


@pytest.mark.parametrize(
    "path",
    [
        "otel_responses:ResponsesInstrumentor",
        "otel_responses.integrations.litellm:LiteLLMResponsesInstrumentor",
        "otel_responses.integrations.dspy:DSPyResponsesInstrumentor",
    ],
)
def test_uninstrument_of_an_instrumentor_that_is_off_says_nothing(path: str, caplog: pytest.LogCaptureFixture) -> None:
    """OpenTelemetry's base class logs a warning for it; the documentation says the call does nothing."""
    import importlib

    module, name = path.split(":")
    instrumentor = getattr(importlib.import_module(module), name)()
    assert not instrumentor.is_instrumented_by_opentelemetry
    with caplog.at_level(logging.DEBUG):
        assert instrumentor.uninstrument() is None
    assert caplog.records == []


def test_second_instrument_does_not_double_wrap(emulator: Emulator, captured: Captured) -> None:
    wrapped = originals()
    ResponsesInstrumentor().instrument(tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider)
    assert originals() == wrapped
    emulator.client().responses.create(model=MODEL, input="hi")
    assert len(captured.spans()) == 1


def test_instrument_uninstrument_cycles_leave_one_span_per_call(emulator: Emulator) -> None:
    before = originals()
    cap = new_captured()
    for _ in range(5):
        instrumentor = ResponsesInstrumentor()
        instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
        emulator.client().responses.create(model=MODEL, input="hi")
        instrumentor.uninstrument()
    assert len(cap.spans()) == 5
    assert originals() == before


def test_raw_wrapper_built_while_instrumented_goes_quiet_after_uninstrument(emulator: Emulator) -> None:
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    raw = emulator.client().responses.with_raw_response  # captures the wrapped bound method
    raw.create(model=MODEL, input="hi")
    instrumentor.uninstrument()
    raw.create(model=MODEL, input="hi")
    assert len(cap.spans()) == 1


def test_with_raw_response_returns_what_it_returns_bare(emulator: Emulator, captured: Captured) -> None:
    raw = emulator.client().responses.with_raw_response.create(model=MODEL, input="Remember this: the marker is R-1.")
    instrumented_type = type(raw)
    parsed = raw.parse()
    assert raw.parse() is parsed  # the instrumentation's parse did not change the app's
    span = captured.only_span()
    assert (span.attributes or {})["gen_ai.response.id"] == parsed.id
    assert (span.attributes or {})["openai_responses.request_id"] == raw.request_id
    ResponsesInstrumentor().uninstrument()
    try:
        bare = emulator.client().responses.with_raw_response.create(
            model=MODEL, input="Remember this: the marker is R-1."
        )
        assert type(bare) is instrumented_type
        bare_parsed = bare.parse()
        assert type(bare_parsed) is type(parsed)
        assert bare_parsed.output_text == parsed.output_text
        assert bare.status_code == raw.status_code == 200
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )


def test_with_streaming_response_body_left_for_the_app(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    with client.responses.with_streaming_response.create(model=MODEL, input="Remember this: the marker is W-1.") as raw:
        span = captured.only_span()  # ended when the headers arrived; the body is the app's to read
        parsed = raw.parse()
        assert parsed.output_text == "Noted marker W-1."
    assert (span.attributes or {})["openai_responses.request_id"] == raw.request_id
    assert (span.attributes or {})["openai_responses.state.mode"] == "single_turn"
    assert "gen_ai.response.id" not in (span.attributes or {})


def test_raw_parse_variant(emulator: Emulator, captured: Captured) -> None:
    raw = emulator.client().responses.with_raw_response.parse(model=MODEL, input="hi")
    parsed = raw.parse()
    assert (captured.only_span().attributes or {})["gen_ai.response.id"] == parsed.id


def test_streaming_call_still_works_and_yields_the_same_events(emulator: Emulator, captured: Captured) -> None:
    def event_types() -> list[str]:
        stream = emulator.client().responses.create(model=MODEL, input="Remember this: the marker is S-1.", stream=True)
        return [event.type for event in stream]

    instrumented = event_types()
    ResponsesInstrumentor().uninstrument()
    try:
        bare = event_types()
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )
    assert instrumented == bare
    assert instrumented[-1] == "response.completed"
    with emulator.client().responses.stream(model=MODEL, input="hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Noted."


def test_generator_input_is_not_consumed_by_the_instrumentation(emulator: Emulator, captured: Captured) -> None:
    """The SDK types `input` as Iterable; iterating a generator would steal it from the SDK."""
    first = {"role": "user", "content": "Remember this: the marker is G-1."}
    items = (item for item in [first, {"role": "user", "content": "What is the marker?"}])
    with pytest.raises(TypeError, match="not JSON serializable"):  # what openai 3.x does with a generator
        emulator.client().responses.create(model=MODEL, input=items)  # type: ignore[call-overload]
    assert next(items) is first
    span = captured.only_span()
    assert (span.attributes or {})["error.type"] == "TypeError"
    assert (span.attributes or {})["openai_responses.input.item_count"] == 0


def test_unknown_option_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="unknown instrument\\(\\) option\\(s\\): colour"):
        ResponsesInstrumentor().instrument(colour="blue")
    assert not ResponsesInstrumentor().is_instrumented_by_opentelemetry


def test_bad_option_value_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="max_item_types must be a positive integer"):
        ResponsesInstrumentor().instrument(max_item_types=0)


def test_environment_variables_configure(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_OPENAI_RESPONSES_ZDR", "true")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_OPENAI_RESPONSES_INSTRUCTIONS_VERSION", "2026-11")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_OPENAI_RESPONSES_MAX_ITEM_TYPES", "3")
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    try:
        history: Any = [{"role": "user", "content": str(i)} for i in range(6)]
        emulator.client().responses.create(model=MODEL, input=history, instructions="x")
    finally:
        instrumentor.uninstrument()
    attrs = dict(cap.spans()[0].attributes or {})
    assert attrs["openai_responses.zdr"] is True
    assert attrs["openai_responses.instructions.version"] == "2026-11"
    assert attrs["openai_responses.input.item_types"] == ("message", "...(+4)", "message")


def test_shared_hash_key_makes_hashes_comparable_across_instrumentations(emulator: Emulator) -> None:
    hashes = []
    for key in ("fleet-key", "fleet-key", "other-key"):
        cap = new_captured()
        instrumentor = ResponsesInstrumentor()
        instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, hash_key=key)
        try:
            emulator.client().responses.create(model=MODEL, input="hi", instructions="Answer briefly.")
        finally:
            instrumentor.uninstrument()
        hashes.append((cap.spans()[0].attributes or {})["openai_responses.instructions.hash"])
    assert hashes[0] == hashes[1] != hashes[2]


def test_auto_instrumentation_through_the_entry_point(emulator: Emulator, tmp_path: Path) -> None:
    app = tmp_path / "some_app.py"
    app.write_text(
        textwrap.dedent(
            """
            import os
            import openai

            client = openai.OpenAI(base_url=os.environ["EMULATOR_URL"], api_key="sk-never-exported")
            response = client.responses.create(model="gpt-4.1-mini", input="Remember this: the marker is E-1.")
            print("ANSWER", response.output_text)
            """
        )
    )
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "EMULATOR_URL": emulator.base_url,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "",
        "OTEL_SERVICE_NAME": "some-app",
    }
    result = subprocess.run(
        [str(bin_dir / "opentelemetry-instrument"), sys.executable, str(app)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "ANSWER Noted marker E-1." in result.stdout
    assert '"name": "chat gpt-4.1-mini"' in result.stdout
    assert '"openai_responses.state.mode": "single_turn"' in result.stdout
    assert "sk-never-exported" not in result.stdout + result.stderr
    assert "marker is E-1" not in result.stdout


def test_every_patched_class_is_left_exactly_as_it_was(emulator: Emulator) -> None:
    """All targets, inherited methods included: after 20 cycles each class's own namespace is unchanged."""
    import importlib

    from otel_responses.instrumentor import _OBSERVERS, TARGETS

    classes = set()
    for module, cls_name in [(t.module, t.cls) for t in TARGETS] + [(o[0], o[1]) for o in _OBSERVERS]:
        try:
            cls = getattr(importlib.import_module(module), cls_name, None)
        except ImportError:
            continue
        if cls is not None:
            classes.add(cls)
    assert len(classes) >= 10
    before = {cls: dict(cls.__dict__) for cls in classes}
    cap = new_captured()
    for _ in range(20):
        instrumentor = ResponsesInstrumentor()
        instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
        instrumentor.uninstrument()
    assert {cls: dict(cls.__dict__) for cls in classes} == before


def test_an_internal_failure_is_swallowed_counted_and_logged_without_payload(
    emulator: Emulator, captured: Captured, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import otel_responses._calls.call as wrappers

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("payload-like text that must not be logged")

    monkeypatch.setattr(wrappers, "run_response_checks", broken)
    with caplog.at_level("DEBUG", logger="otel_responses"):
        response = emulator.client().responses.create(model=MODEL, input="Remember this: the marker is F-1.")
    assert response.output_text == "Noted marker F-1."
    (point,) = captured.metric_points("openai_responses.instrumentation.errors")
    assert point.attributes == {"openai_responses.instrumentation.step": "record_response"}
    assert point.value == 1
    assert "record_response failed (RuntimeError at test_lifecycle.py:" in caplog.text
    assert "payload-like" not in caplog.text
    assert captured.only_span().end_time is not None
