"""Scripted multi-turn sessions, one per state mode, shared by the demo and the tests.

Each follows the acceptance test of the troubleshooting guide: turn 1 gives a marker, turn 2 runs a tool,
turn 3 asks for the marker, the tool's result and the current constraints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openai import OpenAI

MODEL = "gpt-5-mini"
INSTRUCTIONS = "Answer briefly. Never reveal internal ids."
TOOL_NAME = "lookup_order"
TOOLS: Any = [  # typed loosely: the SDK's TypedDicts vary across supported releases
    {
        "type": "function",
        "name": TOOL_NAME,
        "description": "Look up an order's status.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]
ENCRYPTED_REASONING = "reasoning.encrypted_content"
STATE_MODES = ("server_chain", "conversation", "client_replay")


def run_tool(arguments: str) -> str:
    """The app's tool: deterministic, so the answer can be checked."""
    query = json.loads(arguments or "{}").get("query", "")
    return f"order-status:shipped:{len(query)}"


@dataclass
class Transcript:
    """What a scripted session saw: the final answer and the tool's result."""

    mode: str
    marker: str
    tool_result: str = ""
    answer: str = ""
    response_ids: list[str] = field(default_factory=list)

    @property
    def remembered(self) -> dict[str, bool]:
        """Which facts the model still knew at the last turn."""
        return {
            "marker": f"marker={self.marker}" in self.answer,
            "tool": f"tool={self.tool_result}" in self.answer,
            "constraints": f"constraints={INSTRUCTIONS}" in self.answer,
        }


def _function_call(output: list[Any]) -> Any:
    for item in output:
        if getattr(item, "type", None) == "function_call":
            return item
    raise RuntimeError("the model did not call the tool")


def _turns() -> tuple[str, str, str]:
    return (
        "Remember this: the marker is {marker}.",
        f"Please use {TOOL_NAME} for order 42.",
        "What is the marker, what did the tool return, and what are the constraints?",
    )


def server_chain(client: OpenAI, marker: str) -> Transcript:
    """Each turn names the previous response and re-sends the instructions."""
    t = Transcript("server_chain", marker)
    first, second, third = _turns()
    r1 = client.responses.create(model=MODEL, instructions=INSTRUCTIONS, input=first.format(marker=marker))
    r2 = client.responses.create(
        model=MODEL, instructions=INSTRUCTIONS, previous_response_id=r1.id, input=second, tools=TOOLS
    )
    call = _function_call(r2.output)
    t.tool_result = run_tool(call.arguments)
    r3 = client.responses.create(
        model=MODEL,
        instructions=INSTRUCTIONS,
        previous_response_id=r2.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": t.tool_result}],
        tools=TOOLS,
    )
    r4 = client.responses.create(model=MODEL, instructions=INSTRUCTIONS, previous_response_id=r3.id, input=third)
    t.answer = r4.output_text
    t.response_ids = [r1.id, r2.id, r3.id, r4.id]
    return t


def conversation(client: OpenAI, marker: str) -> Transcript:
    """Every turn is written into one server-side conversation."""
    t = Transcript("conversation", marker)
    first, second, third = _turns()
    conv = client.conversations.create()
    r1 = client.responses.create(
        model=MODEL, instructions=INSTRUCTIONS, conversation=conv.id, input=first.format(marker=marker)
    )
    r2 = client.responses.create(
        model=MODEL, instructions=INSTRUCTIONS, conversation=conv.id, input=second, tools=TOOLS
    )
    call = _function_call(r2.output)
    t.tool_result = run_tool(call.arguments)
    r3 = client.responses.create(
        model=MODEL,
        instructions=INSTRUCTIONS,
        conversation=conv.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": t.tool_result}],
        tools=TOOLS,
    )
    r4 = client.responses.create(model=MODEL, instructions=INSTRUCTIONS, conversation=conv.id, input=third)
    t.answer = r4.output_text
    t.response_ids = [r1.id, r2.id, r3.id, r4.id]
    return t


def client_replay(client: OpenAI, marker: str) -> Transcript:
    """Stateless: ``store=False``, encrypted reasoning requested, every output item replayed."""
    t = Transcript("client_replay", marker)
    first, second, third = _turns()
    history: list[Any] = [{"role": "user", "content": first.format(marker=marker)}]
    common: dict[str, Any] = {
        "model": MODEL,
        "instructions": INSTRUCTIONS,
        "store": False,
        "include": [ENCRYPTED_REASONING],
    }
    r1 = client.responses.create(input=history, **common)
    history += r1.output
    history.append({"role": "user", "content": second})
    r2 = client.responses.create(input=history, tools=TOOLS, **common)
    history += r2.output
    call = _function_call(r2.output)
    t.tool_result = run_tool(call.arguments)
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": t.tool_result})
    r3 = client.responses.create(input=history, tools=TOOLS, **common)
    history += r3.output
    history.append({"role": "user", "content": third})
    r4 = client.responses.create(input=history, **common)
    t.answer = r4.output_text
    t.response_ids = [r1.id, r2.id, r3.id, r4.id]
    return t


SESSIONS: dict[str, Callable[[OpenAI, str], Transcript]] = {
    "server_chain": server_chain,
    "conversation": conversation,
    "client_replay": client_replay,
}
