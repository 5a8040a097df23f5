"""The API's rules on the replayed reasoning a model is shown: each rule the reason it withholds an item for (as
`input_transformations` names it), what it finds, and where that behaviour is known from.

Every reasoning item of the context (server-side history, then the request's input) is taken by the first rule that
finds it, in order. The turn boundary comes first: an earlier turn's reasoning under `current_turn` is not rendered
whatever it was made for, so no mismatch costs the model anything there. With `EmulatorConfig.foreign_reasoning =
"refuse"`, a rule that has a refusal answers the request with it instead of withholding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .config import CURRENT_TURN
from .errors import ApiError, bad_request
from .items import kind
from .state import Caller, Entry


@dataclass(frozen=True)
class Reading:
    """What the rules read: the request's model, caller and effective reasoning context, the whole context and, per
    entry, the digest of the items before it."""

    model: str
    caller: Caller
    context: str | None
    entries: list[Entry]
    prefixes: list[str]
    turn_start: int


@dataclass(frozen=True)
class Withholding:
    """One rule: the reason it withholds a reasoning item for, what it finds (the item at that position), the
    refusal it answers with instead where the emulator refuses (`{id}`: the item's id), and its source."""

    reason: str
    finds: Callable[[Reading, int, Entry], bool]
    refusal: str | None
    source: str

    def refuse(self, entry: Entry) -> ApiError:
        message = (self.refusal or "").format(id=entry.item.get("id"))
        return bad_request(message, code="invalid_encrypted_content")


def _earlier_turn(reading: Reading, position: int, entry: Entry) -> bool:
    return reading.context == CURRENT_TURN and position < reading.turn_start


def _organization(reading: Reading, position: int, entry: Entry) -> bool:
    made = entry.minted.caller if entry.minted is not None else None
    now = reading.caller
    if made is None:
        return False
    if made.organization != now.organization:
        return True
    return made.project is not None and now.project is not None and made.project != now.project


def _end_user(reading: Reading, position: int, entry: Entry) -> bool:
    made = entry.minted.caller.end_user if entry.minted is not None else None
    now = reading.caller.end_user
    return made is not None and now is not None and made != now


def _model(reading: Reading, position: int, entry: Entry) -> bool:
    return entry.minted is not None and entry.minted.model != reading.model


def _prefix(reading: Reading, position: int, entry: Entry) -> bool:
    minted = entry.minted
    return minted is not None and bool(minted.prefix) and minted.prefix != reading.prefixes[position]


_VERIFY = "The encrypted content for item {id} could not be verified. Reason: "

RULES: tuple[Withholding, ...] = (
    Withholding(
        "turn_boundary",
        _earlier_turn,
        None,
        "the SDK's docstring of `Reasoning.context` (openai-python 2.42 and later: `current_turn` renders only the "
        "current turn's reasoning back); recorded: gpt-5, 5-mini, 5.2, 5.4, 5.5, o3, o4-mini answer `current_turn`, "
        "gpt-5.6 `all_turns` (tests/real_traffic)",
    ),
    Withholding(
        "organization_mismatch",
        _organization,
        _VERIFY + "Encrypted content organization_id did not match the target organization.",
        "withheld: the SDK's `InputTransformation` (openai-python 3.57); refused before it: openai/codex#13724 (the "
        "400's message), Kilo-Org/kilo#110 (an organization leaking across turns); the project: no public evidence, "
        "judged as the instrumentation judges it",
    ),
    Withholding(
        "end_user_mismatch",
        _end_user,
        _VERIFY + "reasoning `encrypted_content` was not issued to this caller.",
        "withheld: the SDK's `InputTransformation` (openai-python 3.57); refused before it: anomalyco/opencode#48773 "
        "(a gateway's answer: not issued to this caller)",
    ),
    Withholding(
        "model_mismatch",
        _model,
        _VERIFY + "Encrypted content could not be decrypted or parsed.",
        "withheld: the SDK's `InputTransformation` (openai-python 3.57); refused before it: "
        "miuuyy/codex-chatgpt-web#249 (a model switch mid-conversation), Wei-Shaw/sub2api#2863 (gateway account pools)",
    ),
    Withholding(
        "prefix_mismatch",
        _prefix,
        None,
        "the SDK's `InputTransformation` (openai-python 3.57): no public report of an answer yet",
    ),
)


def withheld(reading: Reading, refuse: bool) -> list[tuple[Entry, str]]:
    """Each reasoning item of the context a rule withholds, with its reason, in context order; with ``refuse``, the
    first item a refusing rule finds is a 400 instead."""
    found: list[tuple[Entry, str]] = []
    for position, entry in enumerate(reading.entries):
        if kind(entry.item) != "reasoning":
            continue
        for rule in RULES:
            if rule.finds(reading, position, entry):
                if refuse and rule.refusal is not None:
                    raise rule.refuse(entry)
                found.append((entry, rule.reason))
                break
    return found
