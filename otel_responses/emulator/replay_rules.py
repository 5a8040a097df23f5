"""The API's rules on the items a request replays, as one table: each rule a row with what it finds (its predicate),
the API's answer (status, `type`, `code`, `param`, message) and where that answer is known from (a recorded answer
where one exists, else the public reports it rests on).

Two kinds of rows. A refusal: a create request is checked row by row, in order, before its items are resolved; the
first rule that finds something is the request's answer. It reads only the request's own items and what the server
holds: the responses it stored (their outputs, in order), the conversation or the chain the request continues, and
whom a replayed payload was made for. A withholding: once the context is resolved, every reasoning item of it
(server-side history, then the input) is taken by the first such rule that finds it, in order, and withheld from the
model; its name is the reason `input_transformations` reports. The turn boundary comes first: an earlier turn's
reasoning under `current_turn` is not rendered whatever it was made for, so no mismatch costs the model anything
there. With `EmulatorConfig.foreign_reasoning = "refuse"`, a withholding rule that has an answer refuses the request
with it instead, as the API did before it withheld.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .config import CURRENT_TURN, EmulatorConfig
from .context import compaction_caller
from .crypto import Sealer
from .errors import ApiError
from .items import kind
from .state import Caller, Entry, Store

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
    caller: Caller | None = None  # whom the request comes from (a payload made for another is refused)
    sealer: Sealer | None = None  # opens a replayed payload to read whom it was made for


@dataclass(frozen=True)
class Reading:
    """What a withholding rule reads: the request's model, caller and effective reasoning context, the whole context
    and, per entry, the digest of the items before it (``rendering.prefix_digests``), and where its turn begins."""

    model: str
    caller: Caller
    context: str | None
    entries: list[Entry]
    prefixes: list[str]
    turn_start: int


@dataclass(frozen=True)
class Rule:
    """One rule of the API: a refusal ``finds`` the first item that breaks it, or None, and the rest is the API's
    answer; a withholding ``withholds`` each reasoning item of the context it takes (its name: the reason reported),
    and its answer, where it has a message, is the refusal the emulator gives instead when configured to."""

    name: str
    finds: Callable[[Replay], Finding | None] | None
    status: int
    type: str
    code: str | None
    param: str | None
    message: str
    source: str
    withholds: Callable[[Reading, int, Entry], bool] | None = None

    def error(self, found: Finding) -> ApiError:
        return ApiError(
            self.status,
            self.message.format(**found),
            param=self.param.format(**found) if self.param is not None else None,
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


def _compaction_foreign(replay: Replay) -> Finding | None:
    """A compaction item made for another organization (or project) than the request's caller: a compacted context
    has no reasoning item to withhold, so the request is refused."""
    if replay.caller is None or replay.sealer is None:
        return None
    for item in replay.items:
        if kind(item) != "compaction":
            continue
        made_for = compaction_caller(item, replay.sealer)
        if made_for is not None and made_for.crosses(replay.caller):
            return {"id": item.get("id")}
    return None


def _earlier_turn(reading: Reading, position: int, entry: Entry) -> bool:
    return reading.context == CURRENT_TURN and position < reading.turn_start


def _organization(reading: Reading, position: int, entry: Entry) -> bool:
    return entry.minted is not None and entry.minted.caller.crosses(reading.caller)


def _end_user(reading: Reading, position: int, entry: Entry) -> bool:
    made = entry.minted.caller.end_user if entry.minted is not None else None
    now = reading.caller.end_user
    return made is not None and now is not None and made != now


def _model(reading: Reading, position: int, entry: Entry) -> bool:
    return entry.minted is not None and entry.minted.model != reading.model


def _edited_prefix(reading: Reading, position: int, entry: Entry) -> bool:
    """Reasoning a compaction item holds is out of the client's reach: only what it replays itself is judged."""
    minted = entry.minted
    if minted is None or not minted.prefix or entry.compacted is not None:
        return False
    return minted.prefix != reading.prefixes[position]


_NOT_VERIFIED = "The encrypted content for item {id} could not be verified. Reason: "
_WITHHELD = "withheld: the SDK's `InputTransformation` (openai-python 3.57)"

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
    Rule(
        "compaction_foreign",
        _compaction_foreign,
        400,
        "invalid_request_error",
        "invalid_encrypted_content",
        None,
        _NOT_VERIFIED + "Encrypted content organization_id did not match the target organization.",
        "from public reports: openai/codex#13724 (the answer's message, for an organization's payload; a compaction "
        "item has no reasoning item to withhold), Kilo-Org/kilo#110 (an organization leaking across turns)",
    ),
    Rule(
        "turn_boundary",
        None,
        400,
        "invalid_request_error",
        None,
        None,
        "",
        "the SDK's docstring of `Reasoning.context` (`current_turn` renders only the current turn's reasoning back; "
        "the `gpt-5.6` family defaults to `all_turns`); recorded: gpt-5, 5-mini, 5.2, 5.4, 5.5, o3, o4-mini answer "
        "`current_turn`, gpt-5.6 `all_turns` (tests/real_traffic); reported as `turn_boundary` by the SDK's types",
        withholds=_earlier_turn,
    ),
    Rule(
        "organization_mismatch",
        None,
        400,
        "invalid_request_error",
        "invalid_encrypted_content",
        None,
        _NOT_VERIFIED + "Encrypted content organization_id did not match the target organization.",
        _WITHHELD + "; refused before it: openai/codex#13724 (the answer), Kilo-Org/kilo#110; the project: no public "
        "evidence, judged as the instrumentation judges it",
        withholds=_organization,
    ),
    Rule(
        "end_user_mismatch",
        None,
        400,
        "invalid_request_error",
        "invalid_encrypted_content",
        None,
        _NOT_VERIFIED + "reasoning `encrypted_content` was not issued to this caller.",
        _WITHHELD + "; refused before it: anomalyco/opencode#48773 (a gateway's answer: not issued to this caller)",
        withholds=_end_user,
    ),
    Rule(
        "model_mismatch",
        None,
        400,
        "invalid_request_error",
        "invalid_encrypted_content",
        None,
        _NOT_VERIFIED + "Encrypted content could not be decrypted or parsed.",
        _WITHHELD + "; refused before it: miuuyy/codex-chatgpt-web#249 (a model switch mid-conversation), "
        "Wei-Shaw/sub2api#2863 (a gateway's account pool)",
        withholds=_model,
    ),
    Rule(
        "prefix_mismatch",
        None,
        400,
        "invalid_request_error",
        None,
        None,
        "",
        _WITHHELD + ": no public report of an answer yet",
        withholds=_edited_prefix,
    ),
)


def check(replay: Replay) -> None:
    """Raise the API's answer to the first refusal the request breaks."""
    for rule in RULES:
        found = rule.finds(replay) if rule.finds is not None else None
        if found is not None:
            raise rule.error(found)


def withheld(reading: Reading, refuse: bool) -> list[tuple[Entry, str]]:
    """Each reasoning item of the context a withholding rule takes, with its reason, in context order; with
    ``refuse``, the first item a rule with an answer takes is that answer instead."""
    found: list[tuple[Entry, str]] = []
    rules = [rule for rule in RULES if rule.withholds is not None]
    for position, entry in enumerate(reading.entries):
        if kind(entry.item) != "reasoning":
            continue
        for rule in rules:
            if rule.withholds is not None and rule.withholds(reading, position, entry):
                if refuse and rule.message:
                    raise rule.error({"id": entry.item.get("id")})
                found.append((entry, rule.name))
                break
    return found
