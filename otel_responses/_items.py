"""Turn any input or output item into a small metadata record.

Items arrive as dicts, TypedDicts or SDK models (built without validation, so the class says nothing:
dispatch is on the ``type`` string). Only identifiers, enums, presence flags and keyed in-memory
fingerprints leave this module; payloads never do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, NamedTuple, TypeGuard

from ._fingerprint import Fingerprinter

# Opaque payloads the API returns and the app must replay byte for byte: never exported, never parsed.
OPAQUE_FIELDS = {"reasoning": "encrypted_content", "compaction": "encrypted_content", "program": "fingerprint"}
# Message roles an app writes itself; anything else in an input list came from an earlier response.
APP_ROLES = frozenset({"user", "system", "developer"})

# Every call/output pair the API defines, by the item types that answer a call (paired by `call_id`; see
# ``item_meta`` for the two that pair otherwise). The API also takes a `function_call_output` for a
# client-executed `tool_search_call`.
CALL_ANSWERS: dict[str, frozenset[str]] = {
    "function_call": frozenset({"function_call_output"}),
    "custom_tool_call": frozenset({"custom_tool_call_output"}),
    "computer_call": frozenset({"computer_call_output"}),
    "shell_call": frozenset({"shell_call_output"}),
    "apply_patch_call": frozenset({"apply_patch_call_output"}),
    "local_shell_call": frozenset({"local_shell_call_output"}),
    "tool_search_call": frozenset({"tool_search_output", "function_call_output"}),
    "program": frozenset({"program_output"}),
    "multi_agent_call": frozenset({"multi_agent_call_output"}),
    "mcp_approval_request": frozenset({"mcp_approval_response"}),
}
CALL_TYPES = frozenset(CALL_ANSWERS)
OUTPUT_TYPES = frozenset().union(*CALL_ANSWERS.values())
# Calls the app executes: each needs an output from the app before the conversation goes on. A `shell_call`
# run in a hosted container comes back with its output in the same response (see ``pending_calls``); a
# `tool_search_call` needs one only with `execution: client`. Hosted tools (web search, file search, code
# interpreter, image generation, MCP calls), `program` and `multi_agent_call` are run by the API; an MCP approval
# request may be left unanswered.
APP_EXECUTED = frozenset(
    {"function_call", "custom_tool_call", "computer_call", "shell_call", "apply_patch_call", "local_shell_call"}
)
# Outputs only the app writes: never returned by a response, so never looked up in the ledger.
APP_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "apply_patch_call_output",
        "local_shell_call_output",
        "mcp_approval_response",
    }
)
_UNFINISHED = frozenset({"in_progress", "incomplete"})

# Shape of an opaque payload: its length, and which base64 alphabet its characters belong to. The API encrypts
# afresh on every serialisation (same length, other bytes), so a copy the instrumentation never saw is not
# evidence of tampering; a change of length or alphabet is (truncated, re-encoded, escaped, rebuilt).
SHAPE_URLSAFE = 1  # has `-` or `_`
SHAPE_STANDARD = 2  # has `+` or `/`
SHAPE_FOREIGN = 4  # has a character outside both base64 alphabets
_SHAPE_BITS = 3
_BASE64_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"


def payload_shape(payload: str) -> int:
    """Length and alphabet of an opaque payload, as one int; the payload itself is not kept. (Deleting the base64
    bytes and looking at what is left runs in C, several times faster than a regular expression.)"""
    bits = 0
    if "-" in payload or "_" in payload:
        bits |= SHAPE_URLSAFE
    if "+" in payload or "/" in payload:
        bits |= SHAPE_STANDARD
    if not payload.isascii() or payload.encode("ascii").translate(None, _BASE64_BYTES):
        bits |= SHAPE_FOREIGN
    return len(payload) << _SHAPE_BITS | bits


def payload_length(shape: int) -> int:
    """The length a payload shape records (its alphabet aside)."""
    return shape >> _SHAPE_BITS


def reshaped(sent: int, returned: int) -> bool:
    """Whether a payload of shape ``sent`` cannot be a fresh encryption of one of shape ``returned``: another
    length, characters outside base64 where the API's copy had none, or the other base64 alphabet."""
    if sent >> _SHAPE_BITS != returned >> _SHAPE_BITS:
        return True
    if returned & SHAPE_FOREIGN:
        return False  # not base64 at all: only the length can be judged
    if sent & SHAPE_FOREIGN:
        return True
    family = returned & (SHAPE_URLSAFE | SHAPE_STANDARD)
    if family == SHAPE_URLSAFE:
        return bool(sent & SHAPE_STANDARD)
    if family == SHAPE_STANDARD:
        return bool(sent & SHAPE_URLSAFE)
    return False


CallKey = tuple[str, str]  # (item type, call_id): how a call is recognised when its id is stripped or new


class ItemMeta(NamedTuple):
    """Metadata of one item: never its text, arguments, outputs or opaque payload.

    ``fingerprint`` is a keyed in-memory hash of a message's text: of an assistant message (so a replay of only
    the text is still recognised), of an app message of a request (distinct messages, turns sent twice).
    ``encrypted`` tells an opaque payload is present (`encrypted_content`, a `program`'s `fingerprint`) and
    ``shape`` its length and alphabet. ``call_id`` pairs calls and outputs (for a
    `local_shell_call_output` it is the item's id, for MCP approvals the approval request's id); ``awaits``: a
    call the app must answer.
    """

    type: str
    id: str | None
    call_id: str | None
    role: str | None
    phase: str | None
    encrypted: bool
    fingerprint: int | None = None
    awaits: bool = False
    shape: int | None = None


# Longest item type, id or call_id kept (the API's are about 55 characters): the ledger holds them for as long as it
# holds a response, so a hostile server's megabyte ids must not be kept whole. Both sides of a comparison (output
# recorded, input replayed) are cut alike, so matching still works.
MAX_NAME = 256

USER_TEXT = ItemMeta("message", None, None, "user", None, False)


_NOT_TEXT_PARTS = frozenset({"input_image", "input_file", "computer_screenshot"})


def _message_text(content: object) -> str | None:
    """The text of a message's content: a string, or its text parts joined as ``output_text`` does; None when
    it also carries an image or a file (its text alone does not tell two such messages apart)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        return None
    texts = []
    for part in elements(content):
        if isinstance(part, dict):
            get = field_reader(part)
            kind, text = get("type"), get("text")
        else:  # an SDK model (the output text parts of a response): no closure per part
            kind, text = getattr(part, "type", None), getattr(part, "text", None)
        if kind in _NOT_TEXT_PARTS:
            return None
        if isinstance(text, str):
            texts.append(text)
    return "".join(texts)  # one part: the same string, not a copy


def fields_of(item: object) -> Any:
    """A ``get`` over the item's fields without raising: the one reader of a dict's, a mapping's or an SDK model's
    fields, declared or not.

    Dicts answer directly. SDK models (pydantic) keep their fields in ``__dict__`` and undeclared ones (a field
    the installed SDK does not declare, say ``phase``) in ``__pydantic_extra__``: reading those dicts avoids
    ``getattr`` on a missing field, which raises inside pydantic and costs microseconds per item.
    """
    if isinstance(item, dict):
        return field_reader(item)
    if isinstance(item, Mapping):
        return item.get
    fields = getattr(item, "__dict__", None)
    if isinstance(fields, dict):
        extra = getattr(item, "__pydantic_extra__", None)
        if not extra:
            return fields.get
        return {**extra, **fields}.get  # a few references, not the payload
    return lambda name: getattr(item, name, None)


def field_of(item: object, name: str) -> Any:
    """One field of ``item`` (see :func:`fields_of`); ``None`` when it has none by that name."""
    return fields_of(item)(name)


def item_meta(item: object, fingerprints: Fingerprinter, sent: bool = False) -> ItemMeta:
    """Metadata of one item, whatever its shape; unknown shapes give type ``unknown``.

    ``sent``: an item of a request. Its assistant text is fingerprinted only when it has no id (a replay of
    the text alone): an item with an id is recognised by the id, so hashing its text would be wasted work. Its app
    messages' text is fingerprinted (distinct messages, turns sent twice).
    Runs once per replayed item, so the string checks are written out rather than calling a helper.
    """
    get = item.get if type(item) is dict else fields_of(item)
    raw_type = get("type")
    role = get("role")
    if not isinstance(role, str):
        role = None
    elif len(role) > MAX_NAME:
        role = role[:MAX_NAME]
    item_id = get("id")
    if not isinstance(item_id, str):
        item_id = None
    elif len(item_id) > MAX_NAME:
        item_id = item_id[:MAX_NAME]
    if isinstance(raw_type, str):
        item_type = raw_type if len(raw_type) <= MAX_NAME else raw_type[:MAX_NAME]
    elif role is not None:
        item_type = "message"  # EasyInputMessageParam: `type` is optional.
    elif item_id is not None:
        item_type = "item_reference"  # ItemReference: `type` is optional.
    else:
        item_type = "unknown"
    fingerprint = call_id = phase = shape = None
    encrypted = awaits = False
    if item_type == "message":
        phase = get("phase")
        if not isinstance(phase, str) or len(phase) > MAX_NAME:
            phase = None
        # Assistant text: to recognise a replay of the text alone (an item with an id is recognised by it). App
        # messages of a request: to count distinct ones and to tell a turn sent twice. User messages returned
        # (by `responses.compact`): to recognise them when the app sends its own copy.
        if (not sent or item_id is None) if role == "assistant" else (role in APP_ROLES if sent else role == "user"):
            text = _message_text(get("content"))
            if text is not None:
                fingerprint = fingerprints.number(text)
    elif item_type in OPAQUE_FIELDS:
        payload = get(OPAQUE_FIELDS[item_type])
        if isinstance(payload, str) and payload:
            encrypted = True
            shape = payload_shape(payload)
        if item_type == "program":
            call_id = get("call_id")
            if not isinstance(call_id, str):
                call_id = None
    else:
        call_id = get("call_id")
        if isinstance(call_id, str):
            if len(call_id) > MAX_NAME:
                call_id = call_id[:MAX_NAME]
            if item_type in APP_EXECUTED:
                awaits = get("status") not in _UNFINISHED
            elif item_type == "tool_search_call":
                awaits = get("execution") == "client" and get("status") not in _UNFINISHED
        else:  # the two pairs that do not use `call_id`
            call_id = None
            if item_type == "local_shell_call_output":
                call_id, item_id = item_id, None  # its `id` is the call's call_id
            elif item_type == "mcp_approval_request":
                call_id = item_id
            elif item_type == "mcp_approval_response":
                call_id = get("approval_request_id")
                if not isinstance(call_id, str):
                    call_id = None
    return _new_meta(ItemMeta, (item_type, item_id, call_id, role, phase, encrypted, fingerprint, awaits, shape))


def text_fingerprint(item: object, fingerprints: Fingerprinter) -> int | None:
    """The keyed fingerprint of a message's text, as ``item_meta`` makes it for an assistant message without an id:
    asked of one with an id only when the ledger does not know that id."""
    get = item.get if type(item) is dict else fields_of(item)
    text = _message_text(get("content"))
    return fingerprints.number(text) if text is not None else None


_TEXT_PARTS = frozenset({"input_text", "output_text"})


def output_text(item: object) -> str | None:
    """The text a tool output gives the model: its ``output`` string, or its parts' texts joined; None when it has no
    text, or carries anything but text (an image, a file, a screenshot: megabytes, never read)."""
    output = (item.get if type(item) is dict else fields_of(item))("output")
    if isinstance(output, str):
        return output
    if not isinstance(output, (list, tuple)) or not output:
        return None
    texts = []
    for part in elements(output):
        get = field_reader(part) if isinstance(part, dict) else fields_of(part)
        text = get("text")
        if get("type") not in _TEXT_PARTS or not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def pending_calls(outputs: tuple[ItemMeta, ...]) -> tuple[str, ...]:
    """call_ids of a response's calls the app must answer: calls it executes whose output the response did not
    bring itself (a hosted shell, say)."""
    for meta in outputs:
        if meta.awaits:
            break
    else:  # no call the app executes: most responses
        return ()
    answered = {m.call_id for m in outputs if m.type in OUTPUT_TYPES}
    return tuple(m.call_id for m in outputs if m.awaits and m.call_id is not None and m.call_id not in answered)


# How the ledger may know an input item (``facts._scan``): a call by its type and `call_id` (libraries strip ids, the
# server gives items written to a conversation new ones), any other item by its id, an assistant message without id
# by its text. Not by call_id: outputs only the app writes (never returned by a response, never looked up) and MCP
# approval requests (their call_id is their own id).
NOT_BY_CALL = APP_OUTPUTS | {"mcp_approval_request"}


# NamedTuple's generated __new__ is a Python-level wrapper; building the tuple directly skips a frame per item.
_new_meta = tuple.__new__


def is_sequence(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """Lists and tuples only: the SDK types `input` as Iterable, and a generator must not be consumed."""
    return isinstance(value, (list, tuple))


def elements(value: list[Any] | tuple[Any, ...]) -> Iterator[Any]:
    """The elements a list or tuple holds, read without calling a subclass's own ``__iter__``: an app's list whose
    iteration can run only once must still reach the SDK whole."""
    return list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)


def field_reader(item: dict[str, Any]) -> Callable[[str], Any]:
    """A dict's ``get``; for a subclass, the dict's own (its override may raise or count reads)."""
    return item.get if type(item) is dict else partial(dict.get, item)
