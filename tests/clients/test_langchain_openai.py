"""langchain-openai's `ChatOpenAI(use_responses_api=True)` running its own multi-turn flows against the emulator,
instrumented.

The app keeps LangChain messages (`SystemMessage`, `HumanMessage`, the returned `AIMessage`s, `ToolMessage`s)
and calls the model with `bind_tools` the way LangChain's tool-calling loop does; `invoke` (plain requests) and
`stream` (chunks added up to one `AIMessage`); the history re-sent, or `use_previous_response_id=True`. What the
library sends is described in tests/clients/README.md ("Known client behaviours").
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry

from .support import (
    ALL_TURNS_REASONING,
    ENCRYPTED,
    INSTRUCTIONS,
    PHASED,
    PLAIN,
    PROMPTS,
    REASONING,
    Run,
    assert_final_answer,
    assert_same_behaviour,
    calls,
    clean,
    expect_signals,
    keeps_code_word,
    lookup_weather,
    maybe_capture,
    responses_requests,
)

weather_tool = tool(lookup_weather)


class Answer(BaseModel):
    answer: str


def chat_model(emu: Emulator, model: str, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model=model, base_url=emu.base_url, api_key="emulator-key", max_retries=0, use_responses_api=True, **options
    )


def conversation(emu: Emulator, model: str, *, stream: bool = False, structured: bool = False, **options: Any) -> Any:
    """The four user turns as a LangChain app writes them; returns the last answer's text (or the parsed
    `Answer` of a structured last turn)."""
    llm = chat_model(emu, model, **options)
    with_tools = llm.bind_tools([weather_tool])
    messages: list[Any] = [SystemMessage(INSTRUCTIONS)]
    text = ""
    for number, prompt in enumerate(PROMPTS, 1):
        messages.append(HumanMessage(prompt))
        if structured and number == len(PROMPTS):
            return llm.with_structured_output(Answer, method="json_schema").invoke(messages)
        while True:
            reply = _call(with_tools, messages, stream)
            messages.append(reply)
            if not reply.tool_calls:
                text = reply.text
                break
            for call in reply.tool_calls:
                messages.append(ToolMessage(weather_tool.invoke(call["args"]), tool_call_id=call["id"]))
    return text


def _call(model: Any, messages: list[Any], stream: bool) -> AIMessage:
    if not stream:
        return model.invoke(messages)
    reply = None
    for chunk in model.stream(messages):
        reply = chunk if reply is None else reply + chunk
    assert reply is not None
    return reply


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("model", [PLAIN, REASONING, PHASED])
def test_replay(emu: Emulator, telemetry: CapturedTelemetry, model: str, stream: bool) -> None:
    """The history re-sent: LangChain rebuilds each item from the `AIMessage` content blocks, with the item ids,
    reasoning items (ids only: `store` is on) and `phase`."""
    answer = conversation(emu, model, stream=stream)
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model))


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("model", [PLAIN, REASONING, PHASED])
def test_use_previous_response_id(emu: Emulator, telemetry: CapturedTelemetry, model: str, stream: bool) -> None:
    """`use_previous_response_id=True`: only the messages after the latest `AIMessage` go out, beside its response
    id. The `SystemMessage` is an input item of the first request, so the chain keeps it (no `instructions`)."""
    answer = conversation(emu, model, stream=stream, use_previous_response_id=True)
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model))
    assert all(r.get("previous_response_id") for r in responses_requests(emu)[1:])


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("model", [REASONING, PHASED])
def test_stateless_replay_with_encrypted_reasoning(
    emu: Emulator, telemetry: CapturedTelemetry, model: str, stream: bool
) -> None:
    """`store=False` + `include=["reasoning.encrypted_content"]`: LangChain drops the assistant message ids (they
    could not be resolved) and replays reasoning items with their `encrypted_content`. Streamed, it keeps the
    `response.output_item.done` copy of each reasoning item, encrypted separately from the `response.completed`
    copy (different bytes, same length): replaying it is no modification. The flow asks for `all_turns`, so the code
    word of turn 3 proves the replayed reasoning reached the model."""
    answer = conversation(emu, model, stream=stream, store=False, include=[ENCRYPTED], reasoning=ALL_TURNS_REASONING)
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=True)
    last = responses_requests(emu)[-1]["input"]
    assert all("id" not in i for i in last if i.get("role") == "assistant")
    assert len([i for i in last if i.get("type") == "reasoning" and i.get("encrypted_content")]) == 4


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_stateless_replay_without_encrypted_reasoning(
    emu: Emulator, telemetry: CapturedTelemetry, stream: bool
) -> None:
    """`store=False` without `include=["reasoning.encrypted_content"]`: the reasoning items come back bare, and
    LangChain leaves out every reasoning block without `encrypted_content` when `store` is False. The first habit is
    named on every call; the lost reasoning only where the model would have seen it: under the model's default
    `reasoning.context` (`current_turn`) that is the tool loop's second call, whose turn began with that reasoning —
    an earlier turn's reasoning was never going to reach the model."""
    answer = conversation(emu, REASONING, stream=stream, store=False)
    habit = {"reasoning_not_replayable"}
    expected = calls(first=habit, rest=habit, loop={"reasoning_dropped"})
    expect_signals(telemetry, emu, expected)
    assert not [i for i in responses_requests(emu)[-1]["input"] if i.get("type") == "reasoning"]
    assert_final_answer(answer, code_word=False)


@pytest.mark.parametrize("previous", [False, True], ids=["replay", "use_previous_response_id"])
def test_structured_output(emu: Emulator, telemetry: CapturedTelemetry, previous: bool) -> None:
    """`with_structured_output(..., method="json_schema")` on the last turn: `text.format` json_schema, parsed."""
    answer = conversation(emu, REASONING, structured=True, use_previous_response_id=previous)
    assert isinstance(answer, Answer)
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer.answer, code_word=keeps_code_word(REASONING))


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_same_behaviour_with_and_without_instrumentation(stream: bool) -> None:
    """Same answer and the same requests on the wire, instrumentation on or off."""
    runs = []
    for on in (False, True):
        with Emulator() as emu, maybe_capture(on) as captured:
            answer = conversation(emu, PHASED, stream=stream, store=False, include=[ENCRYPTED])
            runs.append(Run(answer, responses_requests(emu), captured))
    assert_same_behaviour(*runs)
