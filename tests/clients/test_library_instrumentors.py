"""The litellm and DSPy instrumentors as instrumentors: entry points and dependencies, shared settings, strict mode,
faults inside the instrumentation, uninstrument() and suppress_instrumentation(), async DSPy calls."""

from __future__ import annotations

import asyncio
import importlib.metadata
import warnings
from typing import Any

import pytest

pytest.importorskip("litellm")
pytest.importorskip("dspy")

import dspy  # type: ignore[import-not-found]
import litellm  # type: ignore[import-not-found]
from opentelemetry.instrumentation.utils import suppress_instrumentation

from otel_responses import ConfigError, ContextLossError, ResponsesInstrumentor
from otel_responses._calls.call import Call
from otel_responses.emulator import Emulator
from otel_responses.integrations.dspy import DSPyResponsesInstrumentor
from otel_responses.integrations.litellm import LiteLLMResponsesInstrumentor
from otel_responses.testing import CapturedTelemetry, capture

from .support import INSTRUCTIONS, PLAIN, PROMPTS, responses_requests, signals_of

NATIVE = hasattr(dspy, "lm15")
TOOL = {"type": "function", "name": "lookup_weather", "parameters": {"type": "object", "properties": {}}}


def _options(emu: Emulator) -> dict[str, Any]:
    return {"api_base": emu.base_url, "api_key": "emulator-key"}


def _lm(emu: Emulator, **options: Any) -> Any:
    return dspy.LM(f"openai/{PLAIN}", model_type="responses", cache=False, **_options(emu), **options)


def test_entry_points_and_dependencies() -> None:
    """One entry point per instrumentor (OTEL_PYTHON_DISABLED_INSTRUMENTATIONS names them), each with its library."""
    points = {p.name: p.value for p in importlib.metadata.entry_points(group="opentelemetry_instrumentor")}
    assert points["litellm_responses"] == "otel_responses.integrations.litellm:LiteLLMResponsesInstrumentor"
    assert points["dspy_responses"] == "otel_responses.integrations.dspy:DSPyResponsesInstrumentor"
    assert LiteLLMResponsesInstrumentor().instrumentation_dependencies() == ("litellm >= 1.81.0",)
    assert DSPyResponsesInstrumentor().instrumentation_dependencies() == ("dspy >= 3.0.2",)


def test_one_instrumentor_alone(emu: Emulator) -> None:
    """litellm's instrumentor on its own (the SDK's off): its calls recorded, settings given to it."""
    telemetry = CapturedTelemetry.new()
    instrumentor = LiteLLMResponsesInstrumentor()
    instrumentor.instrument(
        tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider, zdr=True
    )
    try:
        litellm.responses(model=f"openai/{PLAIN}", input=PROMPTS[0], **_options(emu))
        emu.client().responses.create(model=PLAIN, input=PROMPTS[0])  # the SDK's instrumentor is off
    finally:
        instrumentor.uninstrument()
    (span,) = telemetry.spans()
    assert (span.attributes or {})["openai_responses.zdr"] is True
    litellm.responses(model=f"openai/{PLAIN}", input=PROMPTS[0], **_options(emu))
    assert len(telemetry.spans()) == 1


def test_a_later_instrumentor_shares_the_first_ones_settings(emu: Emulator) -> None:
    """The first instrument() builds the settings and the ledger; a later one joins them, and one with options of
    its own is refused (they would silently not apply)."""
    telemetry = CapturedTelemetry.new()
    sdk, library = ResponsesInstrumentor(), LiteLLMResponsesInstrumentor()
    sdk.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider, zdr=True)
    try:
        with pytest.raises(ConfigError, match="first instrument"):
            library.instrument(strict=True)
        assert not library.is_instrumented_by_opentelemetry
        library.instrument()
        try:
            litellm.responses(model=f"openai/{PLAIN}", input=PROMPTS[0], **_options(emu))
        finally:
            library.uninstrument()
    finally:
        sdk.uninstrument()
    (span,) = telemetry.spans()  # the SDK's providers and settings
    assert (span.attributes or {})["openai_responses.zdr"] is True


def test_strict_mode_refuses_before_litellm_sends(emu: Emulator) -> None:
    """A tool output without its call: strict mode raises `ContextLossError` from `litellm.responses()` itself,
    before litellm does anything (no request, one failed span)."""
    orphan = [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "call_x", "output": "1"}]
    with capture(strict=True) as telemetry, pytest.raises(ContextLossError, match="orphan_tool_output"):
        litellm.responses(model=f"openai/{PLAIN}", input=orphan, tools=[TOOL], **_options(emu))
    assert responses_requests(emu) == []
    (span,) = telemetry.spans()
    assert (span.attributes or {})["error.type"] == "ContextLossError"
    assert signals_of(span) == {"orphan_tool_output"}


def test_strict_mode_refuses_before_dspy_sends(emu: Emulator) -> None:
    """Through DSPy 3.4's provider the refusal leaves `_payload`, before anything is sent; DSPy wraps what its
    engines raise (`LMError`), ours as the cause. DSPy 3.0 merges the messages into one (no tool output left to
    refuse): the request goes out."""
    lm = _lm(emu)
    messages = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_x", "content": "1"}]
    with capture(strict=True) as telemetry, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if not NATIVE:
            lm(messages=messages)
            assert len(responses_requests(emu)) == 1
            return
        with pytest.raises(Exception, match="orphan_tool_output") as raised:
            lm(messages=messages)
    chain = []
    error: BaseException | None = raised.value
    while error is not None:
        chain.append(type(error).__name__)
        error = error.__cause__ or error.__context__
    assert "ContextLossError" in chain
    assert responses_requests(emu) == []
    (span,) = telemetry.spans()
    assert (span.attributes or {})["error.type"] == "ContextLossError"
    assert signals_of(span) == {"orphan_tool_output"}


def test_a_failing_instrumentation_never_reaches_the_app(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step of the instrumentation failing: litellm's and DSPy's calls go on unchanged, nothing recorded."""

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("instrumentation bug")

    with capture() as telemetry:
        monkeypatch.setattr(Call, "_check", broken)
        monkeypatch.setattr(Call, "open", broken)
        answer = litellm.responses(
            model=f"openai/{PLAIN}", input=PROMPTS[0], instructions=INSTRUCTIONS, **_options(emu)
        )
        stream = litellm.responses(model=f"openai/{PLAIN}", input=PROMPTS[0], stream=True, **_options(emu))
        events = [event.type for event in stream]
        lm = _lm(emu)
        reply = lm(PROMPTS[0])
    assert answer.output[0].content[0].text == "Noted marker M-1."
    assert events[-1] == "response.completed"
    assert reply == ["Noted marker M-1."] or reply[0].get("text") == "Noted marker M-1."
    assert telemetry.spans() == []
    errors = telemetry.metric_points("openai_responses.instrumentation.errors")
    assert sum(point.value for point in errors) >= 3


def test_uninstrument_restores_dspy_and_suppression_is_honoured(emu: Emulator) -> None:
    lm = _lm(emu)
    if NATIVE:
        from dspy._vendor.lm15.providers.async_base import AsyncOpenAILM  # type: ignore[import-not-found]
        from dspy._vendor.lm15.providers.openai import OpenAILM  # type: ignore[import-not-found]

        before = (OpenAILM.__dict__["complete"], OpenAILM.__dict__["_payload"], "complete" in AsyncOpenAILM.__dict__)
    with capture() as telemetry:
        with suppress_instrumentation():
            lm(PROMPTS[0])
        assert telemetry.spans() == []
        lm(PROMPTS[1])
        assert len(telemetry.chat_spans()) == 1
    if NATIVE:
        after = (OpenAILM.__dict__["complete"], OpenAILM.__dict__["_payload"], "complete" in AsyncOpenAILM.__dict__)
        assert after == before == (before[0], before[1], False)


def test_dspy_async_calls(emu: Emulator) -> None:
    """`await lm.acall(...)` and `await predict.acall(...)`: the async provider (or litellm's `aresponses`)."""

    class QA(dspy.Signature):  # type: ignore[misc]  # dspy is not installed where mypy runs
        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    async def run() -> list[Any]:
        lm = _lm(emu)
        first = await lm.acall(PROMPTS[0])
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            second = await dspy.Predict(QA).acall(question="What is the marker?")
        return [first, second.answer]

    with capture() as telemetry:
        answers = asyncio.run(run())
    assert answers[1]
    spans = [s for s in telemetry.chat_spans() if "error.type" not in (s.attributes or {})]
    assert len(spans) == len(responses_requests(emu))
    assert all(signals_of(s) == set() for s in spans)
