"""instrument() and uninstrument(): the methods wrapped and restored, once however often, the options and their
environment variables, and auto-instrumentation through the entry point."""

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

from ..conftest import Captured, new_captured

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


def test_unknown_option_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="unknown instrument\\(\\) option\\(s\\): colour"):
        ResponsesInstrumentor().instrument(colour="blue")
    assert not ResponsesInstrumentor().is_instrumented_by_opentelemetry


def test_bad_option_value_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="ledger_capacity must be a positive integer"):
        ResponsesInstrumentor().instrument(ledger_capacity=0)


def test_environment_variables_configure(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_OPENAI_RESPONSES_ZDR", "true")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_OPENAI_RESPONSES_INSTRUCTIONS_VERSION", "2026-11")
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    try:
        history: Any = [{"role": "user", "content": str(i)} for i in range(130)]
        emulator.client().responses.create(model=MODEL, input=history, instructions="x")
    finally:
        instrumentor.uninstrument()
    attrs = dict(cap.spans()[0].attributes or {})
    assert attrs["openai_responses.zdr"] is True
    assert attrs["openai_responses.instructions.version"] == "2026-11"
    assert attrs["openai_responses.input.item_types"] == ("message",) * 32 + ("...(+3)",) + ("message",) * 95


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
