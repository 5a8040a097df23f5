"""Turn any input or output item into a small metadata record.

Items arrive as dicts, TypedDicts or SDK models (built without validation, so the class says nothing:
dispatch is on the ``type`` string). Only identifiers, enums, presence flags and keyed in-memory
fingerprints leave this module; payloads never do.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeGuard

from .fingerprint import Fingerprinter

_ENCRYPTED_TYPES = frozenset({"reasoning", "compaction"})
# Message roles an app writes itself; anything else in an input list came from an earlier response.
APP_ROLES = frozenset({"user", "system", "developer"})

# Client-executed tool calls and the output item that must answer each, paired by `call_id`.
CALL_OUTPUT_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
OUTPUT_CALL_TYPES = {output: call for call, output in CALL_OUTPUT_TYPES.items()}


class ItemMeta(NamedTuple):
    """Metadata of one item: never its text, arguments, outputs or encrypted payload.

    ``fingerprint`` is a keyed in-memory hash: of the encrypted payload for reasoning and compaction
    items, of the text for assistant messages (so a replay of only the text is still recognised).
    """

    type: str
    id: str | None
    call_id: str | None
    role: str | None
    phase: str | None
    encrypted: bool
    fingerprint: int | None = None


USER_TEXT = ItemMeta("message", None, None, "user", None, False)


def _message_text(content: object) -> str | None:
    """The text of a message's content: a string, or its text parts joined as ``output_text`` does."""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        return None
    texts = []
    for part in content:
        text = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
        if isinstance(text, str):
            texts.append(text)
    return "".join(texts)


def _fields(item: object) -> Any:
    """A ``get`` over the item's fields without raising.

    Dicts answer directly. SDK models (pydantic) keep their fields in ``__dict__`` and undeclared ones (a field
    newer than the installed SDK, say ``phase``) in ``__pydantic_extra__``: reading those dicts avoids
    ``getattr`` on a missing field, which raises inside pydantic and costs microseconds per item.
    """
    if isinstance(item, dict):
        return item.get
    fields = getattr(item, "__dict__", None)
    if isinstance(fields, dict):
        extra = getattr(item, "__pydantic_extra__", None)
        if not extra:
            return fields.get
        return {**extra, **fields}.get  # a few references, not the payload
    return lambda name: getattr(item, name, None)


def item_meta(item: object, fingerprints: Fingerprinter, sent: bool = False) -> ItemMeta:
    """Metadata of one item, whatever its shape; unknown shapes give type ``unknown``.

    ``sent``: an item of a request. Its assistant text is fingerprinted only when it has no id (a replay of
    the text alone): an item with an id is recognised by the id, so hashing its text would be wasted work.
    Runs once per replayed item, so the string checks are written out rather than calling a helper.
    """
    get = item.get if isinstance(item, dict) else _fields(item)
    raw_type = get("type")
    role = get("role")
    if not isinstance(role, str):
        role = None
    item_id = get("id")
    if not isinstance(item_id, str):
        item_id = None
    if isinstance(raw_type, str):
        item_type = raw_type
    elif role is not None:
        item_type = "message"  # EasyInputMessageParam: `type` is optional.
    elif item_id is not None:
        item_type = "item_reference"  # ItemReference: `type` is optional.
    else:
        item_type = "unknown"
    fingerprint = call_id = phase = None
    encrypted = False
    if item_type == "message":
        phase = get("phase")
        if not isinstance(phase, str):
            phase = None
        if role == "assistant" and not (sent and item_id is not None):
            text = _message_text(get("content"))
            if text is not None:
                fingerprint = fingerprints.number(text)
    elif item_type in _ENCRYPTED_TYPES:
        payload = get("encrypted_content")
        if isinstance(payload, str) and payload:
            encrypted = True
            fingerprint = fingerprints.number(payload)
    else:
        call_id = get("call_id")
        if not isinstance(call_id, str):
            call_id = None
    return _new_meta(ItemMeta, (item_type, item_id, call_id, role, phase, encrypted, fingerprint))


# NamedTuple's generated __new__ is a Python-level wrapper; building the tuple directly skips a frame per item.
_new_meta = tuple.__new__


def is_sequence(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """Lists and tuples only: the SDK types `input` as Iterable, and a generator must not be consumed."""
    return isinstance(value, (list, tuple))
