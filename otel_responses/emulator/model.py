"""The deterministic "model": context in, output items out.

It answers only from the context it actually received, so an application that loses
context (a broken chain, a dropped reasoning item) gets a visibly wrong answer. The rules
are summarised in the package docstring (`otel_responses.emulator`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import rendering, schema, tokens
from .context import Context
from .errors import bad_request
from .items import Item, kind, parts_text, text_of
from .state import Entry

_MARKER = re.compile(r"\bmarker is ([A-Za-z0-9_-]+)", re.IGNORECASE)
_CODE_WORD = re.compile(r"CW-[0-9a-f]{6}")
_QUOTED = re.compile(r"`([^`]+)`")
PREAMBLE = "Looking that up with {tool}."
FAILURE_TRIGGER = "trigger failure"
_PREAMBLE_START = "Looking that up with "


@dataclass(frozen=True)
class Request:
    """The request parameters the model cares about."""

    model: str
    instructions: str | None
    tools: list[Any]
    reasoning: bool
    reasoning_summary: bool
    max_output_tokens: int | None
    phase: bool = False  # the model returns `phase` on its messages (and announces tool calls)
    text_format: Mapping[str, Any] | None = None  # `text.format` asking for JSON


@dataclass
class Turn:
    """What the model produced: output entries (reasoning carries its notes), status and usage."""

    output: list[Entry]
    status: str
    usage: dict[str, Any]
    incomplete_reason: str | None = None
    error: dict[str, Any] | None = None


def code_word(seed: str, response_id: str) -> str:
    """The code word a reasoning turn chooses: reproducible from the seed and the response id."""
    return "CW-" + hashlib.sha256(f"{seed}|code-word|{response_id}".encode()).hexdigest()[:6]


def check_tool_pairs(entries: list[Entry]) -> None:
    """Enforce the API's pairing of function calls and outputs (400, param `input`), in linear time."""
    items = [e.item for e in entries]
    calls_seen: set[Any] = set()
    for item in items:
        if kind(item) == "function_call":
            calls_seen.add(item.get("call_id"))
        elif kind(item) == "function_call_output" and item.get("call_id") not in calls_seen:
            call_id = item.get("call_id")
            raise bad_request(f"No tool call found for function call output with call_id {call_id}.", param="input")
    outputs_after: set[Any] = set()
    unanswered = None
    for item in reversed(items):
        if kind(item) == "function_call_output":
            outputs_after.add(item.get("call_id"))
        elif kind(item) == "function_call" and item.get("call_id") not in outputs_after:
            unanswered = item.get("call_id")  # keep the earliest one, as a forward scan would report
    if unanswered is not None:
        raise bad_request(f"No tool output found for function call {unanswered}.", param="input")


def _latest_marker(entries: list[Entry]) -> str | None:
    marker = None
    for entry in entries:
        if kind(entry.item) == "message" and entry.item.get("role") == "user":
            found = _MARKER.findall(text_of(entry.item))
            if found:
                marker = found[-1]
    return marker


def _latest_tool_output(entries: list[Entry]) -> str | None:
    output = None
    for entry in entries:
        if kind(entry.item) == "function_call_output":
            output = parts_text(entry.item.get("output"))
    return output


def _latest_code_word(entries: list[Entry]) -> str | None:
    word = None
    for entry in entries:
        if kind(entry.item) == "reasoning" and entry.notes:
            found = _CODE_WORD.findall(entry.notes)
            if found:
                word = found[-1]
    return word


def _current_text(current: list[Entry]) -> str:
    for entry in reversed(current):
        if kind(entry.item) == "message" and entry.item.get("role") == "user":
            return text_of(entry.item)
    return ""


def _offered_tool(tools: list[Any], text: str) -> dict[str, Any] | None:
    lowered = text.lower()
    for tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "function":
            name = tool.get("name")
            if isinstance(name, str) and name and name.lower() in lowered:
                return tool
    return None


def _arguments(tool: Mapping[str, Any], text: str) -> str:
    """The call's arguments: a `backtick-quoted` span of the request fills the tool's first required string
    parameter (so an agent's own tools, a shell command's `cmd`, get a value they can run); otherwise the
    request's text as `query`."""
    quoted = _QUOTED.search(text)
    parameters = tool.get("parameters")
    if quoted is not None and isinstance(parameters, Mapping):
        properties = parameters.get("properties")
        required = parameters.get("required")
        if isinstance(properties, Mapping) and isinstance(required, list):
            for name in required:
                spec = properties.get(name)
                if isinstance(name, str) and isinstance(spec, Mapping) and spec.get("type") == "string":
                    return json.dumps({name: quoted[1]})
    return json.dumps({"query": text})


def _progress_taken_for_final(entries: list[Entry]) -> bool:
    """A progress update (`phase: commentary`) replayed without its phase reads as a final answer: the
    model then believes its tool turn ended there, before any tool result."""
    for entry in entries:
        item = entry.item
        if (
            kind(item) == "message"
            and item.get("role") == "assistant"
            and not item.get("phase")
            and text_of(item).startswith(_PREAMBLE_START)
        ):
            return True
    return False


def _answer(text: str, entries: list[Entry], instructions: str | None) -> str:
    lowered = text.lower()
    parts: list[str] = []
    if "marker" in lowered:
        parts.append(f"marker={_latest_marker(entries) or 'unknown'}")
    if "tool" in lowered:
        tool_output = None if _progress_taken_for_final(entries) else _latest_tool_output(entries)
        parts.append(f"tool={tool_output if tool_output is not None else 'unknown'}")
    if "constraint" in lowered:
        parts.append(f"constraints={instructions or 'none'}")
    if "code word" in lowered:
        parts.append(f"code_word={_latest_code_word(entries) or 'unknown'}")
    return "; ".join(parts) if parts else "I don't know."


def respond(context: Context, request: Request, *, response_id: str, seed: str, new_id: Callable[[str], str]) -> Turn:
    """Run the rules over the context and produce this turn's output items and usage."""
    entries = context.entries
    check_tool_pairs(entries)
    current = _current_text(context.current)
    lowered = current.lower()
    last = context.current[-1].item if context.current else None

    reply: str | None = None
    call: Item | None = None
    preamble: str | None = None
    if FAILURE_TRIGGER in lowered:  # a response the model fails to produce (status `failed`)
        failed = _finish(context, request, None, None, None, new_id)
        failed.status = "failed"
        failed.error = {"code": "server_error", "message": "The model failed to generate a response."}
        return failed
    notes = f"Considered {len(entries)} context items."
    if last is not None and kind(last) == "function_call_output":
        call_id = last.get("call_id")
        calls = [e.item for e in entries if kind(e.item) == "function_call" and e.item.get("call_id") == call_id]
        name = calls[-1].get("name") if calls else None
        reply = f"Tool {name} returned {parts_text(last.get('output'))}."
        notes = f"Read the output of {name}."
    elif (offered := _offered_tool(request.tools, current)) is not None:
        tool = offered["name"]
        call = {
            "type": "function_call",
            "id": new_id("fc"),
            "call_id": new_id("call"),
            "name": tool,
            "arguments": _arguments(offered, current),
            "status": "completed",
        }
        notes = f"Decided to call {tool}."
        if request.reasoning and request.phase:  # models with phases announce a tool call with a progress update
            preamble = PREAMBLE.format(tool=tool)
    elif "choose a code word" in lowered:
        notes = f"The code word is {code_word(seed, response_id)}."
        reply = "I have chosen a code word."
    elif "summary" in lowered and "?" not in current:  # a client compacting its history itself asks for one
        latest = _latest_marker(entries)
        reply = f"Summary: the marker is {latest}." if latest else "Summary: nothing to carry over."
    elif "?" in current:
        reply = _answer(current, entries, request.instructions)
    else:
        marker = _MARKER.findall(current)
        reply = f"Noted marker {marker[-1]}." if marker else "Noted."
    if reply is not None and request.instructions and "uppercase" in request.instructions.lower():
        reply = reply.upper()
    if reply is not None and request.text_format is not None:
        reply = schema.render(request.text_format, reply)

    return _finish(context, request, reply, call, notes if request.reasoning else None, new_id, preamble)


def warm_up(context: Context, request: Request, *, new_id: Callable[[str], str]) -> Turn:
    """A `generate: false` request (WebSocket mode's warm-up): the request state is prepared, nothing is
    generated; a completed response with no output that later turns can continue."""
    check_tool_pairs(context.entries)
    return _finish(context, request, None, None, None, new_id)


def _finish(
    context: Context,
    request: Request,
    reply: str | None,
    call: Item | None,
    notes: str | None,
    new_id: Callable[[str], str],
    preamble: str | None = None,
) -> Turn:
    """Apply `max_output_tokens`, build the output items and count usage."""
    budget = request.max_output_tokens
    status = "completed"
    output: list[Entry] = []
    reasoning = 0
    if notes is not None:
        reasoning = tokens.reasoning_tokens(notes)
        if budget is not None and reasoning > budget:
            reasoning, status = budget, "incomplete"
        summary = [{"type": "summary_text", "text": "Considered the request."}] if request.reasoning_summary else []
        output.append(Entry({"type": "reasoning", "id": new_id("rs"), "summary": summary}, notes))
    remaining = None if budget is None else budget - reasoning
    visible = 0
    if preamble is not None:
        output.append(Entry(_assistant_message(new_id("msg"), preamble, "completed", "commentary")))
        visible += tokens.count(preamble)
    if call is not None:
        cost = tokens.count(text_of(call))
        if remaining is not None and cost > remaining:
            status = "incomplete"
        else:
            output.append(Entry(call))
            visible += cost
    if reply is not None:
        message_status = "completed"
        if remaining is not None and tokens.count(reply) > remaining:
            reply = reply[: max(0, remaining) * 4]
            status = message_status = "incomplete"
        if reply:
            output.append(
                Entry(
                    _assistant_message(new_id("msg"), reply, message_status, "final_answer" if request.phase else None)
                )
            )
            visible += tokens.count(reply)

    input_tokens = rendering.input_tokens(context, request.instructions)
    cached = sum(rendering.entry_tokens(e) for e in context.history)
    return Turn(
        output=output,
        status=status,
        usage=tokens.usage(input_tokens, cached, visible + reasoning, reasoning),
        incomplete_reason="max_output_tokens" if status == "incomplete" else None,
    )


def _assistant_message(message_id: str, text: str, status: str, phase: str | None) -> Item:
    """An assistant message; `phase` only for models that return it (the key is absent otherwise)."""
    message: Item = {"type": "message", "id": message_id, "role": "assistant", "status": status}
    if phase is not None:
        message["phase"] = phase
    message["content"] = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return message
