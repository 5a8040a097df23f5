"""llama-index's `OpenAIResponses` (`llama-index-llms-openai`) running its own multi-turn flows against the
emulator, instrumented.

Two ways an app holds the conversation: `llm.chat_with_tools(..., chat_history=...)` with the returned
`ChatMessage`s kept in a list (plain requests), and llama-index's own `FunctionAgent` with a `ChatMemoryBuffer`
(streamed requests through `astream_chat_with_tools`); the history re-sent (the default, `store=False`), with
`store=True`, and with `track_previous_responses=True`. What the library sends is described in
tests/clients/README.md ("Known client behaviours").

llama-index-llms-openai 0.6+ (the one with `OpenAIResponses`) needs `openai<3`, which the other client
libraries' pins exclude: these tests run in a virtualenv of their own (see tests/clients/README.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

llms_openai = pytest.importorskip("llama_index.llms.openai")
if not hasattr(llms_openai, "OpenAIResponses"):
    pytest.skip("llama-index-llms-openai without OpenAIResponses (before 0.4)", allow_module_level=True)

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.llms import ChatMessage  # noqa: E402
from llama_index.core.memory import ChatMemoryBuffer  # noqa: E402
from llama_index.core.prompts import ChatPromptTemplate  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from llama_index.core.workflow import Context  # noqa: E402
from llama_index.llms.openai import OpenAIResponses  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from otel_responses.emulator import Emulator  # noqa: E402
from otel_responses.testing import CapturedTelemetry  # noqa: E402

from .support import (  # noqa: E402
    ENCRYPTED,
    INSTRUCTIONS,
    MARKER,
    PHASED,
    PLAIN,
    PROMPTS,
    REASONING,
    Run,
    answer_facts,
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

# llama-index-core reads pydantic v1-style attributes on every call: a thousand deprecation warnings of its own.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

weather_tool = FunctionTool.from_defaults(fn=lookup_weather)


class Answer(BaseModel):
    answer: str


def responses_llm(emu: Emulator, model: str, **options: Any) -> OpenAIResponses:
    return OpenAIResponses(model=model, api_base=emu.base_url, api_key="emulator-key", max_retries=0, **options)


def chat_loop(emu: Emulator, model: str, **options: Any) -> tuple[str, list[ChatMessage], OpenAIResponses]:
    """The four user turns with `chat_with_tools` and a list of `ChatMessage`s; returns the last answer, the
    history and the LLM."""
    llm = responses_llm(emu, model, instructions=INSTRUCTIONS, **options)
    history: list[ChatMessage] = []
    answer = ""
    for prompt in PROMPTS:
        history.append(ChatMessage(role="user", content=prompt))
        while True:
            response = llm.chat_with_tools([weather_tool], chat_history=list(history))
            history.append(response.message)
            tool_calls = llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
            if not tool_calls:
                answer = response.message.content or ""
                break
            for call in tool_calls:
                output = weather_tool(**call.tool_kwargs)
                history.append(
                    ChatMessage(role="tool", content=str(output), additional_kwargs={"tool_call_id": call.tool_id})
                )
    return answer, history, llm


async def agent_conversation(emu: Emulator, model: str, *, keep: str = "memory", **options: Any) -> str:
    """The four user turns through llama-index's `FunctionAgent`: its memory a `ChatMemoryBuffer` handed to every
    run (``keep="memory"``) or the run `Context` (``keep="context"``)."""
    agent = FunctionAgent(tools=[weather_tool], llm=responses_llm(emu, model, **options), system_prompt=INSTRUCTIONS)
    kept: dict[str, Any] = {"memory": ChatMemoryBuffer.from_defaults()} if keep == "memory" else {"ctx": Context(agent)}
    answer = ""
    for prompt in PROMPTS:
        answer = str(await agent.run(prompt, **kept))
    return answer


def run_flow(emu: Emulator, flow: str, model: str, **options: Any) -> str:
    if flow == "chat_with_tools":
        return chat_loop(emu, model, **options)[0]
    return asyncio.run(agent_conversation(emu, model, **options))


FLOWS = ["chat_with_tools", "FunctionAgent"]


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize("model", [PLAIN, REASONING, PHASED])
def test_replay_default(emu: Emulator, telemetry: CapturedTelemetry, model: str, flow: str) -> None:
    """The default (`store=False`, nothing in `include`): llama-index rebuilds assistant messages as plain
    `{role, content}` (no id, no `phase`), sends calls without their `id`, and leaves out every reasoning item
    (`store` is False). Named: the reasoning that cannot be replayed, the phases lost, and the reasoning dropped
    where the model would have seen it (the tool loop: under `current_turn` an earlier turn's reasoning never
    reaches the model). Seen in the answer: no code word, and on a phased model the tool result is ignored (its
    progress update, replayed without `phase`, reads as the final answer)."""
    answer = run_flow(emu, flow, model)
    if model == PLAIN:
        expected = clean()
    elif model == REASONING:
        expected = calls({"reasoning_not_replayable"}, {"reasoning_not_replayable"}, loop={"reasoning_dropped"})
    else:
        rest = {"reasoning_not_replayable", "phase_dropped"}
        expected = calls({"reasoning_not_replayable"}, rest, loop={"reasoning_dropped"})
    expect_signals(telemetry, emu, expected)
    assert_final_answer(answer, tool="unknown" if model == PHASED else "sunny", code_word=False)


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize("model", [REASONING, PHASED])
def test_replay_stored(emu: Emulator, telemetry: CapturedTelemetry, model: str, flow: str) -> None:
    """`store=True`: llama-index would replay a reasoning item as `{type, id, summary}`, but only when it had a
    summary text; the API returns none unless asked (`reasoning.summary`), so every reasoning item is left out.
    Calls are replayed without their `id` (matched by `call_id`: the replay is complete). The reasoning is named
    dropped where the model would have seen it: the tool loop."""
    answer = run_flow(emu, flow, model, store=True)
    rest = {"phase_dropped"} if model == PHASED else set()
    expect_signals(telemetry, emu, calls((), rest, loop={"reasoning_dropped"}))
    assert_final_answer(answer, tool="unknown" if model == PHASED else "sunny", code_word=False)


@pytest.mark.parametrize("flow", FLOWS)
def test_replay_with_encrypted_reasoning_requested(emu: Emulator, telemetry: CapturedTelemetry, flow: str) -> None:
    """`include=["reasoning.encrypted_content"]` with `store=False`: the reasoning comes back replayable, and
    llama-index still leaves it out (it never sends `encrypted_content`): dropped where the model would have seen
    it, the tool loop."""
    answer = run_flow(emu, flow, REASONING, include=[ENCRYPTED])
    expect_signals(telemetry, emu, calls((), (), loop={"reasoning_dropped"}))
    assert_final_answer(answer, code_word=False)


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize("model", [PLAIN, REASONING, PHASED])
def test_track_previous_responses(emu: Emulator, telemetry: CapturedTelemetry, model: str, flow: str) -> None:
    """`track_previous_responses=True` (forces `store=True`): each request carries the latest response's id and,
    beside it, the whole history again: the server already holds every one of those items. On a phased model the
    re-sent copies are rebuilt without `phase`: the `commentary` progress update, seen twice and once without its
    phase, reads as a final answer, and the model ignores the tool result."""
    answer = run_flow(emu, flow, model, track_previous_responses=True)
    requests = responses_requests(emu)
    assert all(r.get("previous_response_id") for r in requests[1:])
    assert all(r["input"][:2] == requests[1]["input"][:2] for r in requests[2:])  # the history, from its start
    rest = {"context_duplicated", "phase_dropped"} if model == PHASED else {"context_duplicated"}
    expect_signals(telemetry, emu, calls((), rest))
    assert_final_answer(answer, tool="unknown" if model == PHASED else "sunny", code_word=keeps_code_word(model))


def test_function_agent_context_keeps_no_memory_between_runs(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    """`agent.run(..., ctx=Context(agent))`, the documented way to keep a conversation, keeps none between runs
    here: the workflow's state store drops the memory it cannot serialise (`UnserializableKeyWarning`), and each
    run starts from the system prompt and the new message. Every request is a valid first turn: there is nothing
    for the instrumentation to name, and it names nothing."""
    with pytest.warns(Warning, match="memory"):
        answer = asyncio.run(agent_conversation(emu, PLAIN, keep="context"))
    assert answer_facts(answer).get("marker") == "unknown"
    assert [len(r["input"]) for r in responses_requests(emu)] == [2, 2, 4, 2, 2]
    expect_signals(telemetry, emu, clean())


def test_structured_predict_after_the_conversation(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    """`structured_predict` (`responses.parse`) over the conversation so far and a new question: llama-index sends
    neither the LLM's `instructions` nor `previous_response_id` there, only the messages (rebuilt as text). The
    replay continues turns that had instructions without them, and the model answers without its constraints."""
    _, history, llm = chat_loop(emu, PLAIN)
    question = ChatMessage(role="user", content="What is the marker, and what are the constraints?")
    answer = llm.structured_predict(Answer, ChatPromptTemplate(message_templates=[*history, question]))
    assert "instructions" not in responses_requests(emu)[-1]
    expect_signals(telemetry, emu, [*clean(), {"instructions_dropped"}])
    assert answer_facts(answer.answer) == {"marker": MARKER, "constraints": "none"}


@pytest.mark.parametrize("flow", FLOWS)
def test_same_behaviour_with_and_without_instrumentation(flow: str) -> None:
    """Same answer and the same requests on the wire, instrumentation on or off."""
    runs = []
    for on in (False, True):
        with Emulator() as emu, maybe_capture(on) as captured:
            answer = run_flow(emu, flow, PHASED, store=True)
            runs.append(Run(answer, responses_requests(emu), captured))
    assert_same_behaviour(*runs)
