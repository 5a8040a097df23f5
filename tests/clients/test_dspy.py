"""DSPy running its own multi-turn flows in Responses mode (`dspy.LM(..., model_type="responses")`) against the
emulator, instrumented.

DSPy 3.4 posts through its vendored copy of lm15 (`dspy._vendor.lm15`, a standard-library transport) unless
`engine="litellm"` (or a setting only litellm carries) sends the call to `litellm.responses()`; DSPy 3.0.2 to 3.3
always call `litellm.responses()`. The flows: `dspy.Predict` with a `dspy.History` (plain and, where DSPy streams
Responses calls, through `dspy.streamify`), and `LM(messages, tools=...)` with a function tool round trip. Each
runs twice, the instrumentation off and then on, with the same answers and the same requests on the wire. What
DSPy does to context is described in tests/clients/README.md ("Known client behaviours").
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

pytest.importorskip("dspy")

import dspy  # type: ignore[import-not-found]

from otel_responses.emulator import Emulator

from .support import (
    INSTRUCTIONS,
    MARKER,
    PLAIN,
    PROMPTS,
    REASONING,
    TOOL_NAME,
    TOOL_RESULT,
    Run,
    answer_facts,
    assert_same_behaviour,
    calls,
    expect_signals,
    maybe_capture,
    responses_requests,
)

dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)  # nothing written under the home folder
# DSPy 3.4 carries lm15 inside it; before, every Responses call goes through litellm.
NATIVE = hasattr(dspy, "lm15")
ENGINES = ("auto", "litellm") if NATIVE else ("auto",)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Look up the weather for a place.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
]


class QA(dspy.Signature):  # type: ignore[misc]  # dspy is not installed where mypy runs
    """Answer the question, keeping what the conversation said."""

    question: str = dspy.InputField()
    history: dspy.History = dspy.InputField()
    answer: str = dspy.OutputField()


def _lm(emu: Emulator, model: str, engine: str, **options: Any) -> Any:
    settings: dict[str, Any] = {"model_type": "responses", "api_base": emu.base_url, "api_key": "emulator-key"}
    settings.setdefault("cache", False)
    if NATIVE:
        settings["engine"] = engine
    if model.startswith("gpt-5"):  # DSPy's rule for OpenAI reasoning models
        settings.update(temperature=1.0, max_tokens=16000)
    settings.update(options)
    return dspy.LM(f"openai/{model}", **settings)


def off_then_on(flow: Any) -> tuple[Run, Run, Emulator]:
    """The flow on a fresh emulator with the instrumentation off, then on: both runs and the second emulator."""
    runs = []
    emulators = []
    for on in (False, True):
        with Emulator() as emulator, maybe_capture(on) as captured:
            answer = flow(emulator)
            runs.append(Run(answer, responses_requests(emulator), captured))
            emulators.append(emulator)
    return runs[0], runs[1], emulators[1]


# -- Predict with a History --------------------------------------------------------------------------------------


def _predict_flow(engine: str, stream: bool = False) -> Any:
    """Four questions to a `dspy.Predict` whose `dspy.History` the app grows turn by turn (JSONAdapter: one request
    per question, `text.format` json_schema)."""

    def run(emu: Emulator) -> list[str]:
        lm = _lm(emu, PLAIN, engine)
        predict = dspy.Predict(QA)
        program = dspy.streamify(predict, async_streaming=False) if stream else predict
        history = dspy.History(messages=[])
        answers = []
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            for prompt in PROMPTS:
                if stream:
                    output = list(program(question=prompt, history=history))[-1]
                else:
                    output = program(question=prompt, history=history)
                answers.append(output.answer)
                history = dspy.History(messages=[*history.messages, {"question": prompt, "answer": output.answer}])
        return answers

    return run


class _Sent:
    """The chat spans of requests that left the process: DSPy 3.0's JSONAdapter first asks litellm for structured
    output with a Pydantic class as `text.format`, which litellm cannot serialise: each attempt (DSPy retries it,
    then falls back to JSON mode) fails inside litellm after it logged the request, and is recorded as a failed
    call, as an SDK call whose arguments fail to serialise is."""

    def __init__(self, telemetry: Any) -> None:
        spans = telemetry.chat_spans()
        self.failed = [s for s in spans if s.attributes.get("http.response.status_code") == 500]
        self.sent = [s for s in spans if s not in self.failed]

    def chat_spans(self) -> list[Any]:
        return self.sent


@pytest.mark.parametrize("engine", ENGINES)
def test_predict_with_history(engine: str) -> None:
    """The history goes back as text (DSPy renders each earlier question and answer as messages), with DSPy's
    instructions on every request: a healthy replay."""
    off, on, emu = off_then_on(_predict_flow(engine))
    assert_same_behaviour(off, on)
    seen = _Sent(on.captured)
    if NATIVE:
        assert seen.failed == []
    else:
        assert len(seen.failed) == 4 * len(PROMPTS)
        assert {s.attributes["error.type"] for s in seen.failed} == {"BaseLLMException", "InternalServerError"}
    expect_signals(seen, emu, [set() for _ in PROMPTS])
    if NATIVE:
        assert answer_facts(on.answer[-1]).get("marker") == MARKER
    else:  # the whole conversation merged into one user message: the model answers an earlier line of it
        assert on.answer[-1] == "I have chosen a code word."


def test_predict_streamed() -> None:
    """`dspy.streamify`: the vendored provider streams (`stream: true`), its SSE events observed as they arrive."""
    off, on, emu = off_then_on(_predict_flow("auto", stream=True))
    assert_same_behaviour(off, on)
    assert all(body.get("stream") is True for body in on.requests)
    expect_signals(on.captured, emu, [set() for _ in PROMPTS])
    assert answer_facts(on.answer[-1]).get("marker") == MARKER


# -- LM(messages, tools=...) -----------------------------------------------------------------------------------


def _messages_flow(engine: str, model: str = PLAIN, drop_system: bool = False) -> Any:
    """The support conversation through `lm(messages=..., tools=...)`: the app keeps the OpenAI-style messages,
    runs the tool DSPy hands back and sends its result as a `tool` message."""

    def run(emu: Emulator) -> list[Any]:
        lm = _lm(emu, model, engine)
        system = {"role": "system", "content": INSTRUCTIONS}
        messages: list[dict[str, Any]] = []
        answers: list[Any] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # messages= is deprecated in 3.4, still documented
            for prompt in PROMPTS:
                messages.append({"role": "user", "content": prompt})
                while True:
                    sent = messages if drop_system and answers else [system, *messages]
                    output = lm(messages=sent, tools=TOOLS)[0]
                    calls = output.get("tool_calls") if isinstance(output, dict) else None
                    if not calls:
                        text = output["text"] if isinstance(output, dict) else output
                        messages.append({"role": "assistant", "content": text})
                        answers.append(text)
                        break
                    call = dict(calls[0])
                    answers.append(call["function"]["name"])
                    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": TOOL_RESULT})
        return answers

    return run


@pytest.mark.parametrize("engine", ENGINES)
def test_lm_messages_with_tools(engine: str) -> None:
    """The tool round trip: DSPy sends the call back as a `function_call` item and the result as its
    `function_call_output`, the history as messages; nothing is lost on a model without reasoning."""
    off, on, emu = off_then_on(_messages_flow(engine))
    assert_same_behaviour(off, on)
    expect_signals(on.captured, emu, [set() for _ in range(5)])
    facts = answer_facts(on.answer[-1])
    assert (facts.get("marker"), facts.get("tool")) == (MARKER, TOOL_RESULT)


def test_lm_messages_drop_reasoning() -> None:
    """On a reasoning model DSPy's messages keep only the assistant text: each earlier response's reasoning item
    is left out of the replay. Under the model's default `reasoning.context` (`current_turn`) only the tool loop's
    reasoning would have reached the model: named there, nowhere else (the code word is lost either way)."""
    off, on, emu = off_then_on(_messages_flow("auto", model=REASONING))
    assert_same_behaviour(off, on)
    expect_signals(on.captured, emu, calls((), (), loop={"reasoning_dropped"}))
    assert answer_facts(on.answer[-1]).get("code_word") == "unknown"


@pytest.mark.parametrize("engine", ENGINES)
def test_system_message_sent_once(engine: str) -> None:
    """The scripted mistake: the app sends its system message on the first call only. The vendored provider sends
    a system message as `instructions`: every replay without them is named `instructions_dropped`. Through litellm
    it is an input item of the first request, and the next replay leaves it out: `history_truncated`."""
    off, on, emu = off_then_on(_messages_flow(engine, drop_system=True))
    assert_same_behaviour(off, on)
    if engine == "auto":
        expect_signals(on.captured, emu, [set()] + [{"instructions_dropped"} for _ in range(4)])
    else:
        expect_signals(on.captured, emu, [set(), {"history_truncated"}, set(), set(), set()])


def test_merged_messages() -> None:
    """DSPy 3.0-3.3 merge every message of a call into one input item with the last message's role: a system
    message and the whole history become one user message, which the instrumentation records as it is sent."""

    def run(emu: Emulator) -> Any:
        lm = _lm(emu, PLAIN, "auto")
        messages = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": PROMPTS[0]},
            {"role": "assistant", "content": "Noted marker M-1."},
            {"role": "user", "content": "What is the marker?"},
        ]
        return lm(messages=messages)

    off, on, emu = off_then_on(run)
    assert_same_behaviour(off, on)
    (body,) = on.requests
    assert [item["role"] for item in body["input"]] == ["user"]
    (span,) = on.captured.chat_spans()
    assert (span.attributes or {})["openai_responses.state.mode"] == "single_turn"
    assert (span.attributes or {})["openai_responses.input.item_types"] == ("message",)
    expect_signals(on.captured, emu, [set()])


# -- cache -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_cache_hit_makes_no_span(engine: str) -> None:
    """`cache=True` (DSPy's default): the second identical call is answered from DSPy's cache, with no request and
    no span; one span for the one request."""

    def run(emu: Emulator) -> list[Any]:
        lm = _lm(emu, PLAIN, engine, cache=True)
        question = f"Remember: the marker is {engine}-{id(emu)}."  # a fresh cache key per run
        return [lm(question), lm(question)]

    off, on, _ = off_then_on(run)
    assert off.answer[0] == off.answer[1]
    assert len(on.requests) == 1
    assert len(on.captured.chat_spans()) == 1


def test_azure_deployment() -> None:
    """`azure/<deployment>` with an `api_base`: DSPy (every release here) calls `litellm.responses()`, which posts to
    Azure's path; recorded as `azure.ai.openai`, the model being the deployment."""

    def run(emu: Emulator) -> Any:
        options: dict[str, Any] = {"api_base": emu.azure_endpoint, "api_key": "k", "api_version": "2025-04-01-preview"}
        if NATIVE:
            options["engine"] = "auto"
        lm = dspy.LM("azure/my-gpt-41", model_type="responses", cache=False, **options)
        return lm(PROMPTS[0])

    off, on, emu = off_then_on(run)
    assert_same_behaviour(off, on)
    assert [r.path for r in emu.requests] == ["/openai/responses"]
    (span,) = on.captured.chat_spans()
    assert (span.attributes or {})["gen_ai.provider.name"] == "azure.ai.openai"
    assert (span.attributes or {})["gen_ai.request.model"] == "my-gpt-41"


# Tests of one DSPy generation exist for it alone (CI fails on any skip): DSPy 3.4 streams Responses calls and sends
# each message as an item of its own; 3.0 to 3.3 merge the messages into one item and stream only chat completions.
if NATIVE:
    del test_merged_messages
else:
    del (
        test_predict_streamed,
        test_lm_messages_with_tools,
        test_lm_messages_drop_reasoning,
        test_system_message_sent_once,
    )
