"""pydantic-ai (`pydantic-ai-slim[openai]`) running its own multi-turn flows against the emulator, instrumented.

`Agent(OpenAIResponsesModel(...))` on the emulator's `AsyncOpenAI`: the library's own history
(`message_history=result.all_messages()`) and `openai_previous_response_id='auto'`; a function tool round trip
on every flow, several turns each; `agent.run` (plain requests), `agent.run` with an `event_stream_handler` and
`agent.run_stream` (streamed requests). What the library sends is described in tests/clients/README.md ("Known
client behaviours").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("pydantic_ai.models.openai")

from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.openai import OpenAIResponsesModel, OpenAIResponsesModelSettings
from pydantic_ai.providers.openai import OpenAIProvider

from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry

from .support import (
    INSTRUCTIONS,
    PHASED,
    PLAIN,
    PROMPTS,
    REASONING,
    Run,
    assert_final_answer,
    assert_same_behaviour,
    clean,
    expect_signals,
    keeps_code_word,
    lookup_weather,
    maybe_capture,
    responses_requests,
    sent_context,
)


class Answer(BaseModel):
    answer: str


async def _drain(_: Any, events: AsyncIterable[Any]) -> None:
    async for _event in events:
        pass


async def conversation(
    emu: Emulator,
    model: str,
    *,
    chain: bool = False,
    conversation_id: bool = False,
    store: bool | None = None,
    stream: str | None = None,
    output_type: Any = str,
    websocket: bool = False,
) -> Any:
    """The four user turns as a pydantic-ai app writes them; returns the last output.

    ``stream``: None (`agent.run`), "handler" (`agent.run` with an `event_stream_handler`: every model request
    streamed, the run goes on to the end) or "run_stream" (`agent.run_stream`: the run ends at the first text).
    """
    client = emu.async_client()
    settings = OpenAIResponsesModelSettings()
    if chain:
        settings["openai_previous_response_id"] = "auto"
    if store is not None:
        settings["openai_store"] = store
    if conversation_id:
        settings["openai_conversation_id"] = (await client.conversations.create()).id
    if websocket:
        settings["openai_transport"] = "websocket"
    agent: Agent[None, Any] = Agent(
        OpenAIResponsesModel(model, provider=OpenAIProvider(openai_client=client)),
        instructions=INSTRUCTIONS,
        model_settings=settings,
        tools=[lookup_weather],
        output_type=output_type,
    )
    history = None
    output: Any = None
    try:
        for prompt in PROMPTS:
            if stream == "run_stream":
                async with agent.run_stream(prompt, message_history=history) as streamed:
                    output = await streamed.get_output()
                history = streamed.all_messages()
            else:
                handler = _drain if stream == "handler" else None
                result = await agent.run(prompt, message_history=history, event_stream_handler=handler)
                output, history = result.output, result.all_messages()
    finally:
        await client.close()
    return output


@pytest.mark.parametrize("stream", [None, "handler"], ids=["run", "run_streaming"])
@pytest.mark.parametrize("model", [PLAIN, REASONING, PHASED])
def test_replay(emu: Emulator, telemetry: CapturedTelemetry, model: str, stream: str | None) -> None:
    """`message_history=`: pydantic-ai rebuilds the input from its own messages. For reasoning models it keeps
    item ids, reasoning items with `encrypted_content` (it always asks for it) and `phase` where the model has it;
    for a model without reasoning it strips every item id (assistant text as `{role, content}`, calls without
    `id`), which loses nothing."""
    answer = asyncio.run(conversation(emu, model, stream=stream))
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model, sent_context(emu)))


@pytest.mark.parametrize("stream", [None, "handler"], ids=["run", "run_streaming"])
@pytest.mark.parametrize("model", [PLAIN, REASONING, PHASED])
def test_previous_response_id_auto(emu: Emulator, telemetry: CapturedTelemetry, model: str, stream: str | None) -> None:
    """`openai_previous_response_id='auto'`: only the messages after the latest response go out, beside its id;
    `instructions` are sent on every request."""
    answer = asyncio.run(conversation(emu, model, chain=True, stream=stream))
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model, sent_context(emu)))
    assert all(r.get("previous_response_id") for r in responses_requests(emu)[1:])


@pytest.mark.parametrize("model", [PLAIN, REASONING, PHASED])
def test_openai_conversation_id(emu: Emulator, telemetry: CapturedTelemetry, model: str) -> None:
    """`openai_conversation_id=<conversation>`: the first request sends the history it has, later ones only the
    messages after the latest response of that conversation."""
    answer = asyncio.run(conversation(emu, model, conversation_id=True))
    requests = responses_requests(emu)
    assert all(r.get("conversation") for r in requests)
    assert all(len(r["input"]) == 1 for r in requests)
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model, sent_context(emu)))


@pytest.mark.parametrize("model", [REASONING, PHASED])
def test_websocket_transport(emu: Emulator, telemetry: CapturedTelemetry, model: str) -> None:
    """`openai_transport='websocket'`: pydantic-ai opens the socket with `client.responses.connect()`, writes its
    own `response.create` frames (`send_raw`) and reads the events with `recv()`; `openai_previous_response_id`
    defaults to 'auto' there. Each response created on the socket is a model call: one chat span each."""
    answer = asyncio.run(conversation(emu, model, websocket=True))
    assert all(r.get("previous_response_id") for r in responses_requests(emu)[1:])
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model, sent_context(emu)))


@pytest.mark.parametrize("stream", [None, "handler"], ids=["run", "run_streaming"])
@pytest.mark.parametrize("model", [REASONING, PHASED])
def test_stateless_replay(emu: Emulator, telemetry: CapturedTelemetry, model: str, stream: str | None) -> None:
    """`openai_store=False`: reasoning travels as `encrypted_content`. Streamed, pydantic-ai keeps the copy of
    each reasoning item from its `response.output_item.done` event, which the API encrypted separately from the
    `response.completed` copy (different bytes, same length): replaying it is no modification."""
    answer = asyncio.run(conversation(emu, model, store=False, stream=stream))
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model, sent_context(emu)))
    replayed = [i for i in responses_requests(emu)[-1]["input"] if i.get("type") == "reasoning"]
    assert len(replayed) == 4
    assert all(i.get("encrypted_content") for i in replayed)


def test_run_stream_ends_at_the_first_text(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    """`agent.run_stream` ends the run at the first text it streams. On a model with `phase`, that is the
    `commentary` progress update before a tool call: the run returns it as the output, and the tool's result only
    reaches the model with the next user turn. Everything is replayed (phase included): no context is lost."""
    asyncio.run(conversation(emu, PHASED, stream="run_stream", store=False))
    requests = responses_requests(emu)
    assert len(requests) == 4  # no model call after the tool result: the run had already ended
    tool_turn = requests[2]["input"]
    assert [i.get("phase") for i in tool_turn if i.get("role") == "assistant"] == ["final_answer", "commentary"]
    assert tool_turn[-2]["type"] == "function_call_output"  # the tool ran; its output follows the next user turn
    expect_signals(telemetry, emu, [set() for _ in requests])


@pytest.mark.parametrize("chain", [False, True], ids=["replay", "previous_response_id"])
def test_structured_output(emu: Emulator, telemetry: CapturedTelemetry, chain: bool) -> None:
    """`NativeOutput` asks for `text.format` json_schema on every turn; pydantic-ai parses the JSON answer."""
    answer = asyncio.run(conversation(emu, REASONING, chain=chain, output_type=NativeOutput(Answer)))
    assert isinstance(answer, Answer)
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer.answer, code_word=keeps_code_word(REASONING, sent_context(emu)))


@pytest.mark.parametrize("variant", ["run", "run_streaming", "websocket"])
def test_same_behaviour_with_and_without_instrumentation(variant: str) -> None:
    """Same output and the same requests on the wire, instrumentation on or off."""
    variants: dict[str, dict[str, Any]] = {
        "run": {"store": False},
        "run_streaming": {"store": False, "stream": "handler"},
        "websocket": {"websocket": True},
    }
    options = variants[variant]
    runs = []
    for on in (False, True):
        with Emulator() as emu, maybe_capture(on) as captured:
            answer = asyncio.run(conversation(emu, PHASED, **options))
            runs.append(Run(answer, responses_requests(emu), captured))
    assert_same_behaviour(*runs)
