"""langchain's `ContextEditingMiddleware` with `ClearToolUsesEdit` in a `create_agent` loop over
`ChatOpenAI(use_responses_api=True)`, against the emulator, instrumented: past its token trigger it replaces the
older tool results with `[cleared]` in the history it replays, and `tool_output_modified` names each such request.

The app runs three user turns through one agent, keeping the agent's messages between them (as a chat app does): two
turns that call the weather tool, then a question about what the tools returned. Five model calls.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry

from .support import TOOL_NAME, TOOL_RESULT, expect_signals, lookup_weather, responses_requests

TURNS = (
    f"Please call {TOOL_NAME} for Paris.",
    f"Please call {TOOL_NAME} for London.",
    "What did the tools return?",
)
CLEARED = "[cleared]"


def agent_turns(emu: Emulator, trigger: int) -> list[Any]:
    """The three turns; ``trigger``: the edit's token count (approximate) past which older tool results are cleared,
    the newest one kept."""
    llm = ChatOpenAI(
        model="gpt-4.1", base_url=emu.base_url, api_key="emulator-key", max_retries=0, use_responses_api=True
    )
    editing = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=trigger, keep=1)])
    agent = create_agent(llm, tools=[tool(lookup_weather)], middleware=[editing])
    messages: list[Any] = []
    for prompt in TURNS:
        messages.append(HumanMessage(prompt))
        messages = agent.invoke({"messages": messages})["messages"]
    return messages


def outputs_sent(emu: Emulator) -> list[list[str]]:
    return [
        [i["output"] for i in r["input"] if i.get("type") == "function_call_output"] for r in responses_requests(emu)
    ]


def test_tool_results_cleared_past_a_low_trigger(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    agent_turns(emu, trigger=40)
    # The first result goes out as the tool returned it, then cleared once the second one came.
    assert outputs_sent(emu) == [[], [TOOL_RESULT], [TOOL_RESULT], [CLEARED, TOOL_RESULT], [CLEARED, TOOL_RESULT]]
    expect_signals(telemetry, emu, [set(), set(), set(), {"tool_output_modified"}, {"tool_output_modified"}])
    first_call = next(i["call_id"] for i in responses_requests(emu)[1]["input"] if i.get("type") == "function_call")
    for span in telemetry.chat_spans()[3:]:
        (event,) = span.events
        assert dict(event.attributes or {})["openai_responses.call.ids"] == (first_call,)


def test_near_miss_trigger_not_reached(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    agent_turns(emu, trigger=100_000)  # the middleware's default
    assert CLEARED not in str(outputs_sent(emu))
    expect_signals(telemetry, emu, [set() for _ in range(5)])
