"""Server-Sent Events for `stream: true`: the event sequence the real API emits for a response.

The events are derived from the finished response so a streamed turn and a non-streamed turn
of the same script produce the same output and the same stored state.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

Event = tuple[str, dict[str, Any]]


def _chunks(text: str, pieces: int = 3) -> list[str]:
    """Split text into a few deltas on word boundaries (at least one, possibly empty)."""
    words = text.split(" ")
    if len(words) <= 1:
        return [text]
    size = max(1, -(-len(words) // pieces))
    groups = [words[i : i + size] for i in range(0, len(words), size)]
    return [" ".join(group) + (" " if index < len(groups) - 1 else "") for index, group in enumerate(groups)]


# Stream faults, asked for in the last user message of a streaming request.
ERROR_EVENT_TRIGGER = "trigger error event"  # an `error` event the SDK yields
STREAM_EXCEPTION_TRIGGER = "trigger stream exception"  # an `error` event with an `error` key: the SDK raises
_FINAL = {"incomplete": "response.incomplete", "failed": "response.failed"}


def fault(body: Any) -> str | None:
    """Which stream fault the request asks for, if any (by the text of its last input message)."""
    raw = body.get("input") if isinstance(body, dict) else None
    last = raw if isinstance(raw, str) else None
    if isinstance(raw, list) and raw and isinstance(raw[-1], dict):
        content = raw[-1].get("content")
        last = content if isinstance(content, str) else json.dumps(content)
    text = (last or "").lower()
    for trigger in (ERROR_EVENT_TRIGGER, STREAM_EXCEPTION_TRIGGER):
        if trigger in text:
            return trigger
    return None


Reseal = Callable[[dict[str, Any]], dict[str, Any]]


def _same(item: dict[str, Any]) -> dict[str, Any]:
    return item


def events(response: dict[str, Any], fault: str | None = None, reseal: Reseal = _same) -> list[Event]:
    """The full event sequence for `response`, with `sequence_number` set on each event.

    ``reseal`` serialises an item once more: the real API encrypts each opaque payload afresh, so an item's
    ``output_item.done`` copy differs from the one in ``response.completed`` (same length, other bytes)."""
    pending = copy.deepcopy(response)
    pending.update(status="in_progress", output=[], usage=None, incomplete_details=None, completed_at=None)
    out: list[Event] = [
        ("response.created", {"response": pending}),
        ("response.in_progress", {"response": pending}),
    ]
    if fault == ERROR_EVENT_TRIGGER:
        out.append(("error", {"code": "server_error", "message": "The server had an error.", "param": None}))
    elif fault == STREAM_EXCEPTION_TRIGGER:
        error = {"type": "server_error", "code": "server_error", "message": "Stream interrupted.", "param": None}
        out.append(("error", {"error": error}))
    else:
        for index, item in enumerate(response["output"]):
            out.extend(_item_events(index, item, reseal))
        out.append((_FINAL.get(response["status"], "response.completed"), {"response": response}))
    return [(name, {"type": name, "sequence_number": seq, **data}) for seq, (name, data) in enumerate(out)]


def _item_events(index: int, item: dict[str, Any], reseal: Reseal) -> list[Event]:
    item_id = item.get("id")
    base = {"output_index": index, "item_id": item_id}
    kind = item.get("type")
    result: list[Event] = []
    if kind == "message":
        pending = {**item, "status": "in_progress", "content": []}
        result.append(("response.output_item.added", {"output_index": index, "item": pending}))
        for part_index, part in enumerate(item.get("content") or []):
            text = part.get("text", "")
            empty = {**part, "text": ""}
            where = {**base, "content_index": part_index}
            result.append(("response.content_part.added", {**where, "part": empty}))
            for delta in _chunks(text):
                result.append(("response.output_text.delta", {**where, "delta": delta, "logprobs": []}))
            result.append(("response.output_text.done", {**where, "text": text, "logprobs": []}))
            result.append(("response.content_part.done", {**where, "part": part}))
    elif kind == "function_call":
        pending = {**item, "arguments": "", "status": "in_progress"}
        result.append(("response.output_item.added", {"output_index": index, "item": pending}))
        arguments = item.get("arguments", "")
        done = {**base, "arguments": arguments, "name": item.get("name")}
        result.append(("response.function_call_arguments.delta", {**base, "delta": arguments}))
        result.append(("response.function_call_arguments.done", done))
    else:
        added = {k: v for k, v in item.items() if k != "encrypted_content"}
        result.append(("response.output_item.added", {"output_index": index, "item": added}))
    result.append(("response.output_item.done", {"output_index": index, "item": reseal(item)}))
    return result


def encode(name: str, data: dict[str, Any]) -> bytes:
    """One SSE frame: `event: <type>` and a single-line `data: <json>`."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
