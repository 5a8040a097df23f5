"""The OpenAI Agents SDK (`openai-agents`) running its own multi-turn flows against the emulator, instrumented.

`Runner.run` / `Runner.run_streamed` with `OpenAIResponsesModel` on the emulator's `AsyncOpenAI`: the library's
own history (`result.to_input_list()`), `previous_response_id=`, `auto_previous_response_id=True` and
`conversation_id=`; a function tool round trip on every flow, several turns each. What the library sends is
described in tests/clients/README.md ("Known client behaviours").
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

pytest.importorskip("agents")
pytest.importorskip("agents.models.openai_responses")

from agents import (
    Agent,
    ModelSettings,
    OpenAIConversationsSession,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.models.openai_responses import OpenAIResponsesModel, OpenAIResponsesWSModel
from openai.types.shared import Reasoning
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
    clean,
    expect_signals,
    is_reasoning,
    keeps_code_word,
    lookup_weather,
    maybe_capture,
    responses_requests,
    signals_of,
)

# The SDK's own tracing exports to the OpenAI platform by default: off, nothing leaves this machine.
set_tracing_disabled(True)

MODES = (
    "replay",
    "session",
    "conversations_session",
    "previous_response_id",
    "auto_previous_response_id",
    "conversation_id",
)


class Answer(BaseModel):
    answer: str


async def _run(agent: Agent[Any], given: Any, *, stream: bool, **kwargs: Any) -> Any:
    if not stream:
        return await Runner.run(agent, given, **kwargs)
    result = Runner.run_streamed(agent, given, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


async def conversation(
    emu: Emulator,
    model: str,
    mode: str,
    *,
    stream: bool = False,
    settings: ModelSettings | None = None,
    run_config: RunConfig | None = None,
    output_type: type | None = None,
    websocket: bool = False,
) -> Any:
    """The four user turns as an Agents SDK app writes them; returns the last `final_output`."""
    client = emu.async_client()
    model_class = OpenAIResponsesWSModel if websocket else OpenAIResponsesModel
    agent: Agent[Any] = Agent(
        name="assistant",
        instructions=INSTRUCTIONS,
        model=model_class(model=model, openai_client=client),
        tools=[function_tool(lookup_weather)],
        model_settings=settings or ModelSettings(),
        output_type=output_type,
    )
    history: list[Any] = []
    previous: str | None = None
    conversation_id = (await client.conversations.create()).id if mode == "conversation_id" else None
    session: Any = None
    if mode == "session":
        session = SQLiteSession("conversation")  # in memory
    elif mode == "conversations_session":  # the history kept as items of a conversation the SDK writes each turn
        session = OpenAIConversationsSession(openai_client=client)
    result: Any = None
    try:
        for prompt in PROMPTS:
            kwargs: dict[str, Any] = {"run_config": run_config}
            given: Any = prompt
            if mode == "replay":  # the app keeps the history the SDK hands back and re-sends it
                given = [*history, {"role": "user", "content": prompt}]
            elif mode == "previous_response_id":
                kwargs["previous_response_id"] = previous
            elif mode == "auto_previous_response_id":
                kwargs.update(previous_response_id=previous, auto_previous_response_id=True)
            elif mode == "conversation_id":
                kwargs["conversation_id"] = conversation_id
            elif session is not None:  # the SDK keeps the history in its session store and re-sends it
                kwargs["session"] = session
            result = await _run(agent, given, stream=stream, **kwargs)
            history, previous = result.to_input_list(), result.last_response_id
    finally:
        await client.close()
        if isinstance(session, SQLiteSession):
            session.close()
    return result.final_output


# Every state mode on each model, but an `OpenAIConversationsSession` on a reasoning model (the test after the next).
RUNS = [
    (mode, model)
    for mode in MODES
    for model in (PLAIN, REASONING, PHASED)
    if not (mode == "conversations_session" and is_reasoning(model))
]


@pytest.mark.parametrize(("mode", "model"), RUNS)
def test_runner_run(emu: Emulator, telemetry: CapturedTelemetry, mode: str, model: str) -> None:
    """Every state mode the SDK offers, on a plain, a reasoning and a phased model: the SDK replays output items
    as returned (ids, `phase`, reasoning items) or sends only new items beside the server state."""
    answer = asyncio.run(conversation(emu, model, mode))
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model))


@pytest.mark.parametrize("model", [REASONING, PHASED])
def test_a_conversations_session_replays_reasoning_without_the_message_after_it(
    emu: Emulator, telemetry: CapturedTelemetry, model: str
) -> None:
    """`OpenAIConversationsSession` keeps each reasoning item's server id but strips the id of the message that
    followed it (openai-agents 0.24.0): a stored reasoning item replayed without its follower, which the API refuses
    on the second turn ("... without its required following item"; openai/openai-agents-js#929 reports it of the
    same session, mastra-ai/mastra#11103 probed the shape on the API). `reasoning_pair_broken` names it before it is
    sent."""
    with pytest.raises(openai.BadRequestError, match="was provided without its required following item"):
        asyncio.run(conversation(emu, model, "conversations_session"))
    first, second = telemetry.chat_spans()
    assert (signals_of(first), signals_of(second)) == (set(), {"reasoning_pair_broken"})
    sent = responses_requests(emu)[-1]["input"]
    at = next(i for i, item in enumerate(sent) if item.get("type") == "reasoning")
    assert sent[at]["id"].startswith("rs_")
    assert sent[at + 1].get("role") == "assistant"
    assert "id" not in sent[at + 1]


@pytest.mark.parametrize("model", [REASONING, PHASED])
@pytest.mark.parametrize("mode", ["replay", "previous_response_id"])
def test_runner_run_streamed(emu: Emulator, telemetry: CapturedTelemetry, mode: str, model: str) -> None:
    """`Runner.run_streamed` keeps the `response.completed` copy of each item (the terminal response's output) and
    replays it like `Runner.run`. The SDK streams through `responses.with_streaming_response.create(stream=True)`:
    each of those calls must produce a chat span too."""
    answer = asyncio.run(conversation(emu, model, mode, stream=True))
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=keeps_code_word(model))


@pytest.mark.parametrize("mode", ["replay", "session"])
@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("model", [REASONING, PHASED])
def test_stateless_replay_with_encrypted_reasoning(
    emu: Emulator, telemetry: CapturedTelemetry, model: str, stream: bool, mode: str
) -> None:
    """`store=False` + `include=["reasoning.encrypted_content"]`: the SDK replays each reasoning item with its
    id and the `encrypted_content` exactly as the response carried it; under `all_turns` the code word survives."""
    settings = ModelSettings(
        store=False, response_include=[ENCRYPTED], reasoning=Reasoning.model_validate(ALL_TURNS_REASONING)
    )
    answer = asyncio.run(conversation(emu, model, mode, stream=stream, settings=settings))
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=True)
    replayed = [i for i in responses_requests(emu)[-1]["input"] if i.get("type") == "reasoning"]
    assert len(replayed) == 4
    assert all(i.get("id") and i.get("encrypted_content") for i in replayed)


def test_stateless_replay_without_encrypted_reasoning(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    """`store=False` without `include=["reasoning.encrypted_content"]`: the reasoning items come back bare and the
    SDK replays them by id, which the API cannot resolve (404 on the second turn). The first response's
    `reasoning_not_replayable` names the mistake before it bites."""
    settings = ModelSettings(store=False)
    with pytest.raises(openai.NotFoundError, match="Items are not persisted when `store` is set to false"):
        asyncio.run(conversation(emu, REASONING, "replay", settings=settings))
    first, second = telemetry.chat_spans()
    assert signals_of(first) == {"reasoning_not_replayable"}
    assert (second.attributes or {})["error.type"] == "NotFoundError"
    replayed = responses_requests(emu)[-1]["input"][1]
    assert replayed["type"] == "reasoning"
    assert "encrypted_content" not in replayed


def test_reasoning_item_id_policy_omit(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    """`RunConfig(reasoning_item_id_policy="omit")` strips the ids of replayed reasoning items but keeps their
    `encrypted_content`: with `store=False` the reasoning still reaches the model (the code word survives), so
    nothing was dropped (the flow asks for `all_turns`, so the code word of turn 3 is in view)."""
    settings = ModelSettings(
        store=False, response_include=[ENCRYPTED], reasoning=Reasoning.model_validate(ALL_TURNS_REASONING)
    )
    run_config = RunConfig(reasoning_item_id_policy="omit")
    answer = asyncio.run(conversation(emu, REASONING, "replay", settings=settings, run_config=run_config))
    replayed = [i for i in responses_requests(emu)[-1]["input"] if i.get("type") == "reasoning"]
    assert len(replayed) == 4
    assert all("id" not in i and i.get("encrypted_content") for i in replayed)
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer, code_word=True)


def test_websocket_model_bypasses_the_openai_client(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    """`OpenAIResponsesWSModel` takes the base URL and key from the `AsyncOpenAI` client but opens its own
    connection with the `websockets` package and writes `response.create` frames itself: the OpenAI SDK's
    WebSocket mode (`client.responses.connect()`), which the instrumentation wraps, is never used, so no span."""
    answer = asyncio.run(conversation(emu, REASONING, "previous_response_id", websocket=True))
    assert_final_answer(answer, code_word=keeps_code_word(REASONING))
    assert len(responses_requests(emu)) == 5
    assert telemetry.chat_spans() == []


@pytest.mark.parametrize("mode", ["replay", "previous_response_id"])
def test_structured_output(emu: Emulator, telemetry: CapturedTelemetry, mode: str) -> None:
    """`output_type=` asks for `text.format` json_schema on every turn; the SDK parses the JSON answer."""
    answer = asyncio.run(conversation(emu, REASONING, mode, output_type=Answer))
    assert isinstance(answer, Answer)
    expect_signals(telemetry, emu, clean())
    assert_final_answer(answer.answer, code_word=keeps_code_word(REASONING))


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
def test_same_behaviour_with_and_without_instrumentation(stream: bool) -> None:
    """Same final output and the same requests on the wire, instrumentation on or off."""
    runs = []
    for on in (False, True):
        with Emulator() as emu, maybe_capture(on) as captured:
            settings = ModelSettings(store=False, response_include=[ENCRYPTED])
            answer = asyncio.run(conversation(emu, REASONING, "replay", stream=stream, settings=settings))
            runs.append(Run(answer, responses_requests(emu), captured))
    assert_same_behaviour(*runs)
