"""The API's rules on the items a request replays, as one table: each rule a row with what it finds (its predicate),
the API's answer (status, `type`, `code`, `param`, message) and where that answer is known from (a recorded answer
where one exists, else the public reports it rests on).

A create request is checked row by row, in order, before its items are resolved; the first rule that finds something
is the request's answer. A rule reads only the request's own items and what the server holds: the responses it stored
(their outputs, in order), the conversation or the chain the request continues.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .config import EmulatorConfig
from .errors import ApiError
from .items import kind
from .state import Entry, Store

Finding = dict[str, object]  # the values a rule's param and message are written with


@dataclass(frozen=True)
class Replay:
    """What the rules read of one request: its input items (objects only, as sent), the ids the state it continues
    holds (a conversation's items, or the chain's inputs and outputs), the store and the server's habits."""

    items: list[Mapping[str, Any]]
    conversation_ids: frozenset[str]
    chain_ids: frozenset[str]
    store: Store
    config: EmulatorConfig


@dataclass(frozen=True)
class Rule:
    """One rule of the API: ``finds`` the first item that breaks it, or None; the rest is the API's answer."""

    name: str
    finds: Callable[[Replay], Finding | None]
    status: int
    type: str
    code: str | None
    param: str
    message: str
    source: str

    def error(self, found: Finding) -> ApiError:
        return ApiError(
            self.status,
            self.message.format(**found),
            param=self.param.format(**found),
            code=self.code,
            type_=self.type,
        )


# The prefix each item type's id must begin with, as the API's refusals name it ("Expected an ID that begins with
# 'fc'"); a type no refusal named is not checked.
ID_PREFIXES: dict[str, str] = {
    "message": "msg",
    "reasoning": "rs",
    "function_call": "fc",
    "function_call_output": "fc",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctc",
    "web_search_call": "ws",
}


def _ids(replay: Replay) -> list[tuple[int, str, str]]:
    """(position, id, type) of every input item that carries an id, item references included."""
    found: list[tuple[int, str, str]] = []
    for position, item in enumerate(replay.items):
        item_id = item.get("id")
        item_kind = kind(item)
        if isinstance(item_id, str) and item_id and item_kind is not None and item_kind != "local_shell_call_output":
            found.append((position, item_id, item_kind))
    return found


def _prefix(replay: Replay) -> Finding | None:
    for position, item_id, item_kind in _ids(replay):
        prefix = ID_PREFIXES.get(item_kind)
        if prefix is not None and not item_id.startswith(prefix):
            return {"index": position, "id": item_id, "prefix": prefix}
    return None


def _twice(replay: Replay) -> Finding | None:
    """An id twice in the input; a server that repeats reasoning ids within a response takes them back."""
    ids = _ids(replay)
    counts = Counter(item_id for _, item_id, item_kind in ids if not _repeats(replay, item_kind))
    for _, item_id, _ in ids:
        if counts[item_id] > 1:
            return {"id": item_id}
    return None


def _repeats(replay: Replay, item_kind: str) -> bool:
    return replay.config.repeat_reasoning_ids and item_kind == "reasoning"


def _held_by_conversation(replay: Replay) -> Finding | None:
    """An item (or a reference) under an id the conversation already holds."""
    for _, item_id, _ in _ids(replay):
        if item_id in replay.conversation_ids:
            return {"id": item_id}
    return None


def _referenced_in_chain(replay: Replay) -> Finding | None:
    """An item reference to an item the `previous_response_id` chain already holds."""
    for _, item_id, item_kind in _ids(replay):
        if item_kind == "item_reference" and item_id in replay.chain_ids:
            return {"id": item_id}
    return None


def _stored(replay: Replay, item_id: str) -> tuple[list[Entry], int] | None:
    return replay.store.output_place(item_id)


def _without_reasoning(replay: Replay) -> Finding | None:
    """An item under the id of a stored output that came right after a reasoning item, that reasoning absent: neither
    under its id anywhere in the input nor, without an id, right before the item."""
    items = replay.items
    present = {item_id for _, item_id, _ in _ids(replay)}
    for position, item_id, item_kind in _ids(replay):
        place = _stored(replay, item_id)
        if place is None:
            continue
        outputs, index = place
        returned = outputs[index].item
        if index == 0 or kind(returned) == "reasoning":
            continue
        before = outputs[index - 1].item
        reasoning_id = before.get("id")
        if kind(before) != "reasoning" or reasoning_id in present:
            continue
        if position > 0 and kind(items[position - 1]) == "reasoning" and not items[position - 1].get("id"):
            continue  # present without its id
        return {"id": item_id, "type": kind(returned) or item_kind, "reasoning": reasoning_id}
    return None


def _without_follower(replay: Replay) -> Finding | None:
    """A reasoning item under the id of a stored output, not followed by the item the response returned after it
    (or by nothing: a response that ended on it)."""
    items = replay.items
    for position, item_id, _ in _ids(replay):
        place = _stored(replay, item_id)
        if place is None:
            continue
        outputs, index = place
        if kind(outputs[index].item) != "reasoning":
            continue
        if index + 1 < len(outputs):
            expected = outputs[index + 1].item.get("id")
            if expected == item_id:
                continue  # a server that repeats the id: nothing pairs by it
            if position + 1 < len(items) and items[position + 1].get("id") == expected:
                continue
        return {"id": item_id}
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "id_prefix",
        _prefix,
        400,
        "invalid_request_error",
        "invalid_value",
        "input[{index}].id",
        "Invalid 'input[{index}].id': '{id}'. Expected an ID that begins with '{prefix}'.",
        "from public reports: jlcodes99/cockpit-tools#2090 ('rs'), earendil-works/pi#10257 ('ctc'), the OpenAI "
        "Agents SDK's `__fake_id__` ('fc'); the body's code `invalid_value` and param as gateways' tests quote it",
    ),
    Rule(
        "duplicate_in_input",
        _twice,
        400,
        "invalid_request_error",
        None,
        "input",
        "Duplicate item found with id {id}. Remove duplicate items from your input and try again.",
        "from public reports: openai/openai-agents-python#1789 (the error body), earendil-works/pi#5149 (fallback "
        "ids `msg_${index}` colliding), vercel/ai#7883 (one reasoning item in two messages)",
    ),
    Rule(
        "duplicate_in_conversation",
        _held_by_conversation,
        400,
        "invalid_request_error",
        None,
        "input",
        "Duplicate item found with id {id}. Remove duplicate items from your input and try again.",
        "from public reports: openai/openai-agents-python#1789 and its fix #1827 (items re-sent beside "
        "`conversation`), openai/openai-agents-js#436",
    ),
    Rule(
        "reference_in_chain",
        _referenced_in_chain,
        400,
        "invalid_request_error",
        None,
        "input",
        "Duplicate item found with id {id}. Remove duplicate items from your input and try again.",
        "from public reports: vercel/ai#15492 (item references beside `previous_response_id`); items re-sent under "
        "their ids beside it are accepted (openai/openai-agents-python#1827)",
    ),
    Rule(
        "follower_without_reasoning",
        _without_reasoning,
        400,
        "invalid_request_error",
        None,
        "input",
        "Item '{id}' of type '{type}' was provided without its required 'reasoning' item: '{reasoning}'.",
        "from public reports: continuedev/continue#12620 (`message`), mastra-ai/mastra#12980 and the AI SDK's item "
        "references (`message`, `function_call`)",
    ),
    Rule(
        "reasoning_without_follower",
        _without_follower,
        400,
        "invalid_request_error",
        None,
        "input",
        "Item '{id}' of type 'reasoning' was provided without its required following item.",
        "recorded: tests/real_traffic, pydantic-ai `test_openai_responses_thinking_with_modified_history` call 2 "
        "(also continuedev/continue#8933)",
    ),
)


def check(replay: Replay) -> None:
    """Raise the API's answer to the first rule the request breaks."""
    for rule in RULES:
        found = rule.finds(replay)
        if found is not None:
            raise rule.error(found)
