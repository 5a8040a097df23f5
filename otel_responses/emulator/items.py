"""Pure helpers over Responses API items (plain dicts): their kind, their text, their shape.

Items arrive in any shape the SDK sends (easy messages, typed items, bare `{"id"}`
references), so everything dispatches on the `type` string and tolerates missing fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Item = dict[str, Any]

ID_PREFIXES: dict[str, str] = {
    "message": "msg",
    "reasoning": "rs",
    "function_call": "fc",
    "function_call_output": "fco",
    "compaction": "cmp",
}
"""Id prefixes the emulator assigns to items that arrive without an id."""

_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")


def kind(item: Mapping[str, Any]) -> str | None:
    """The effective item type: `type`, else a message (has `role`) or an item reference (bare `id`)."""
    type_ = item.get("type")
    if isinstance(type_, str):
        return type_
    if "role" in item:
        return "message"
    if "id" in item:
        return "item_reference"
    return None


def parts_text(content: Any) -> str:
    """The text of a `content`/`output` value: a string, or a list of typed parts."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                if part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    texts.append(part["refusal"])
    return "\n".join(texts)


def text_of(item: Mapping[str, Any], notes: str | None = None) -> str:
    """All the plain text an item puts in front of the model (used for rules and token counts)."""
    item_kind = kind(item)
    if item_kind == "message":
        return parts_text(item.get("content"))
    if item_kind == "function_call":
        return f"{item.get('name') or ''} {item.get('arguments') or ''}"
    if item_kind == "function_call_output":
        return parts_text(item.get("output"))
    if item_kind == "reasoning":
        return notes or ""
    return ""


def is_user_message(item: Mapping[str, Any]) -> bool:
    """Whether the item is a message written by the user (where facts are stated)."""
    return kind(item) == "message" and item.get("role") == "user"


def user_message(text: str, item_id: str) -> Item:
    """The item the API makes out of a plain-string `input`."""
    return {
        "type": "message",
        "id": item_id,
        "role": "user",
        "status": "completed",
        "content": [{"type": "input_text", "text": text}],
    }


def normalize(item: Mapping[str, Any], new_id: Callable[[str], str]) -> Item:
    """A typed copy of an input item with an id, the way the API persists and lists it."""
    item_kind = kind(item) or "message"
    result: Item = dict(item)
    result["type"] = item_kind
    if item_kind == "message":
        role = result.get("role") or "user"
        result["role"] = role
        content = result.get("content")
        if isinstance(content, str):
            part_type = "output_text" if role == "assistant" else "input_text"
            part: Item = {"type": part_type, "text": content}
            if part_type == "output_text":
                part["annotations"] = []
            result["content"] = [part]
        elif not isinstance(content, list):
            result["content"] = []
    if not isinstance(result.get("id"), str) or not result.get("id"):
        result["id"] = new_id(ID_PREFIXES.get(item_kind, "item"))
    if item_kind in ("message", "function_call", "function_call_output") and result.get("status") is None:
        result["status"] = "completed"
    return result
