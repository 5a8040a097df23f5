"""Turns of a session split over two processes, for the shared-ledger tests: process A (a subprocess) makes
the first turns, process B the next ones. Importing this needs only `openai`, so the subprocess starts quickly."""

from __future__ import annotations

import contextlib
from typing import Any, TypeAlias

import openai

# An input item as an app builds it, a plain dict: the SDK's TypedDicts name only the shapes it knows, and these
# tests send others on purpose (rebuilt, cut, without ids), so an item is checked by the emulator, not by mypy.
Item: TypeAlias = Any

MODEL = "gpt-4.1-mini"
REASONING_MODEL = "gpt-5.4"  # reasoning, and returns `phase`
ENCRYPTED: Any = ["reasoning.encrypted_content"]
INSTRUCTIONS = "Answer briefly. Internal policy INSTR-SECRET-7781."
TOOL_NAME = "lookup_order"
TOOLS: Any = [
    {
        "type": "function",
        "name": TOOL_NAME,
        "description": "Look up an order's status.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]
# How a replay in the second process treats the first process's output, and what one process raises for it.
REPLAYS: dict[str, tuple[str, ...]] = {
    "whole": (),
    "no_reasoning": ("reasoning_dropped",),
    "no_progress_message": ("replay_incomplete",),
    "truncated_encrypted_content": ("encrypted_content_modified",),
    "call_without_id": (),  # as pydantic-ai and llama-index replay calls: recognised by call_id
    # Last: its text is every variant's progress update, and a text is matched to the newest response that said it.
    "text_only": ("phase_dropped",),
}


def user(text: str) -> Item:
    return {"role": "user", "content": text}


def tool_request() -> Item:
    return user(f"Please use {TOOL_NAME} for order 7.")


def first_turns(client: openai.OpenAI) -> dict[str, Any]:
    """Process A: an unstored response, one with instructions, and a reasoning tool turn per replay variant
    (each replay continues its own, so no variant is a second child of another's parent)."""
    out: dict[str, Any] = {
        "unstored": client.responses.create(model=MODEL, input="Remember this: the marker is X-1.", store=False).id,
        "instructions": client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS).id,
    }
    for variant in REPLAYS:
        first = client.responses.create(
            model=REASONING_MODEL, input=[tool_request()], store=False, include=ENCRYPTED, tools=TOOLS
        )
        out[variant] = [item.model_dump(mode="json", exclude_none=True) for item in first.output]
    return out


def replay_input(variant: str, output: list[dict[str, Any]]) -> list[Item]:
    """The history a client sends replaying A's output as ``variant`` says, with the tool's output."""
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"]
    items = [dict(item) for item in output]
    if variant == "no_reasoning":
        items = [item for item in items if item["type"] != "reasoning"]
    elif variant == "no_progress_message":
        items = [item for item in items if item["type"] != "message"]
    elif variant == "truncated_encrypted_content":
        items[0]["encrypted_content"] = items[0]["encrypted_content"][:64]
    elif variant == "call_without_id":
        items[2] = {key: value for key, value in items[2].items() if key not in ("id", "status")}
    elif variant == "text_only":
        text = "".join(part["text"] for part in items[1]["content"])
        items[1] = {"role": "assistant", "content": text}
    call_id = output[2]["call_id"]
    return [tool_request(), *items, {"type": "function_call_output", "call_id": call_id, "output": "shipped"}]


def replay(client: openai.OpenAI, variant: str, output: list[dict[str, Any]]) -> None:
    """Process B: the client replays A's output, as ``variant`` says, with the tool's output."""
    history = replay_input(variant, output)
    with contextlib.suppress(openai.APIStatusError):  # a modified payload is a 400; the span has the signal
        client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
