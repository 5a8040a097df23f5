"""The signal catalogue as code: one small pure function per signal.

Request checks read the request facts and the analysis (the request against the ledger); response
checks read the response facts. Each returns a Signal with metadata only, or None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry.util.types import AttributeValue

from .._items import CALL_TYPES, pending_calls
from ..attributes import (
    CALL_IDS,
    CONFIRMED,
    DUPLICATE_HELD_BY,
    DUPLICATED_COUNT,
    DUPLICATED_COUNTS,
    DUPLICATED_ITEM_TYPES,
    ENCRYPTED_CROSSED,
    HISTORY_APP_MESSAGES,
    HISTORY_EXPECTED_APP_MESSAGES,
    HISTORY_HELD_TOKENS,
    HISTORY_SERVER_TRUNCATED,
    INCOMPLETE_REASON,
    INSTRUCTIONS_LAST_RESPONSE_ID,
    INSTRUCTIONS_LAST_TURN,
    ITEM_IDS,
    MALFORMED_ITEM_TYPES,
    MALFORMED_POSITIONS,
    MALFORMED_PROBLEMS,
    MISSING_COUNT,
    MISSING_ITEM_TYPES,
    OPERATION_CHAT,
    OPERATION_COMPACT,
    PAIR_MISSING,
    PARENT_DELETED,
    PARENT_ID,
    PARENT_OTHER_ORGANIZATION,
    REASONING_COUNT,
    REASONING_UNREPLAYABLE,
    REASONING_WITHHELD,
    REASONING_WITHHELD_REASONS,
    REPLAY_MESSAGES_ONLY,
    ZDR,
)
from ..ledger import MAX_OUTPUT_ITEMS, Entry
from ..signals import SHARED_FACT, TOOL_SIGNALS, Signal
from .analysis import Analysis, owed
from .boundaries import BEFORE_SENDING
from .facts import (
    CLIENT_REPLAY,
    CONFLICT,
    CONVERSATION,
    SERVER_CHAIN,
    SINGLE_TURN,
    TURN_BOUNDARY,
    Identity,
    RequestFacts,
    ResponseFacts,
    effective_store,
)
from .item_ids import well_formed
from .reasoning_context import ALL_TURNS, effective_context, latest_user_message


@dataclass(frozen=True, slots=True)
class Situation:
    """Request-side context beyond the facts: configuration and what else is in flight."""

    zdr: bool
    concurrent: bool


RequestCheck = Callable[[RequestFacts, Analysis, Situation], "Signal | None"]
ResponseCheck = Callable[[RequestFacts, Analysis, ResponseFacts, Situation], "Signal | None"]


def state_mode_conflict(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    return Signal("state_mode_conflict") if req.state_mode == CONFLICT else None


def unstored_parent(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """The parent cannot be continued: created unstored (or under ZDR), or deleted by the app since."""
    if req.state_mode != SERVER_CHAIN:
        return None
    if an.parent is not None and an.parent.deleted:
        detail: dict[str, AttributeValue] = {PARENT_ID: an.parent.response_id, PARENT_DELETED: True}
        return Signal("unstored_parent", _on_entry(detail, an.parent.shared))
    if an.parent is not None and not an.parent.store:
        if sit.zdr:  # the setting alone says the parent is unstored, whatever the ledger holds
            return Signal("unstored_parent", {PARENT_ID: an.parent.response_id, ZDR: True})
        return Signal("unstored_parent", _on_entry({PARENT_ID: an.parent.response_id}, an.parent.shared))
    if an.parent is not None and other_organization(req.identity, an.parent):
        detail = {PARENT_ID: an.parent.response_id, PARENT_OTHER_ORGANIZATION: True}
        return Signal("unstored_parent", _on_entry(detail, an.parent.shared))
    if sit.zdr:
        return Signal("unstored_parent", {ZDR: True})
    return None


def other_organization(identity: Identity | None, minted: Entry) -> bool:
    """The request names another organization than the one ``minted`` was made under, or another project, where
    both name one (a request naming none is under its key's default, which nothing here can tell)."""
    if identity is None:
        return False
    for now, then in ((identity.organization, minted.organization), (identity.project, minted.project)):
        if now is not None and then is not None and now != then:
            return True
    return False


def unstored_retrieve(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """A read of a response the API never kept; one the app deleted itself is gone by its own choice."""
    if req.target_response_id is None or an.parent is None or an.parent.store or an.parent.deleted:
        return None
    return Signal("unstored_retrieve", {PARENT_ID: an.parent.response_id})


def instructions_dropped(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """Instructions are never carried over, in any mode: every turn of a lineage after one that had them must send
    them (or, in a replay, a system or developer message) again, unless the server-side state it continues holds a
    system or developer message. Raised on each such turn, naming the latest one that had them."""
    parent = an.parent
    if req.operation != OPERATION_CHAT or parent is None or req.target_response_id is not None:
        return None
    if req.instructions_hash is not None or req.system_messages:
        return None
    if parent.system_in_state and req.state_mode in (SERVER_CHAIN, CONVERSATION):
        return None
    last = parent.last_instructed()
    if last is None:
        return None
    detail: dict[str, AttributeValue] = {PARENT_ID: parent.response_id, INSTRUCTIONS_LAST_RESPONSE_ID: last[0]}
    if last[1] is not None:
        detail[INSTRUCTIONS_LAST_TURN] = last[1]
    return Signal("instructions_dropped", detail)


def instructions_changed(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    parent = an.parent
    if parent is None or req.operation != OPERATION_CHAT:
        return None
    if req.instructions_hash is None or parent.instructions_hash is None:
        return None
    if req.instructions_hash == parent.instructions_hash:
        return None
    return Signal("instructions_changed", {PARENT_ID: parent.response_id})


def reasoning_dropped(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """Reasoning items of a replayed response left out. When every one of them could never have been replayed (its
    response unstored, or under ZDR, and the item without an encrypted payload: ``reasoning_not_replayable`` on that
    response), the event says so: the fix is then on the earlier request, not the replay."""
    dropped = 0
    replayable = False
    earlier = an.earlier_turns
    for replayed in an.replayed:
        if earlier and replayed.entry.response_id in earlier:
            continue  # an earlier turn's reasoning: under current_turn the API renders none of it back
        for m in replayed.missing():
            if m.type == "reasoning":
                dropped += 1
                replayable = replayable or replayed.entry.store or m.encrypted
    if not dropped:
        return None
    detail: dict[str, AttributeValue] = {MISSING_COUNT: dropped}
    if not replayable:
        detail[REASONING_UNREPLAYABLE] = True
    return Signal("reasoning_dropped", detail)


def replay_incomplete(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """Output items of a replayed response left out (its reasoning aside: ``reasoning_dropped``); or, for a replay of
    the app's messages alone, every item the turn it continues returned (``Analysis.continued``)."""
    missing = [m.type for replayed in an.replayed for m in replayed.missing() if m.type != "reasoning"]
    if missing:
        return Signal("replay_incomplete", {MISSING_COUNT: len(missing), MISSING_ITEM_TYPES: missing[:16]})
    continued = an.continued
    if continued is None:
        return None
    lost = [m.type for m in owed(continued, set())]
    if not lost:
        return None
    detail: dict[str, AttributeValue] = {
        PARENT_ID: continued.response_id,
        MISSING_COUNT: len(lost),
        MISSING_ITEM_TYPES: lost[:16],
        REPLAY_MESSAGES_ONLY: True,
    }
    return Signal("replay_incomplete", _on_entry(detail, continued.shared))


def reasoning_pair_broken(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    pairs = an.broken_pairs
    if not pairs:
        return None
    return Signal(
        "reasoning_pair_broken", {ITEM_IDS: [i for i, _ in pairs[:16]], PAIR_MISSING: [m for _, m in pairs[:16]]}
    )


def encrypted_content_modified(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    if not an.modified:
        return None
    return Signal("encrypted_content_modified", {ITEM_IDS: an.modified[:16]})


def encrypted_content_foreign(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """Replayed payloads minted for another model, organization or project (``boundaries``): the endpoint and the
    credential are no evidence before the API answers."""
    if not an.foreign:
        return None
    kinds = [kind for kind in an.crossed if kind in BEFORE_SENDING]
    return Signal("encrypted_content_foreign", {ITEM_IDS: an.foreign[:16], ENCRYPTED_CROSSED: kinds})


def phase_dropped(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    if not an.phase_dropped:
        return None
    return Signal("phase_dropped", {ITEM_IDS: an.phase_dropped[:16]})


def _on_entry(detail: dict[str, AttributeValue], shared: bool) -> dict[str, AttributeValue]:
    """A signal's detail, marked when it rests on an entry read from a shared ledger."""
    if shared:
        detail[SHARED_FACT] = True
    return detail


def orphan_tool_output(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    ids = an.tools.orphans
    if not ids:
        return None
    detail = _on_entry({CALL_IDS: ids[:16]}, an.tools.rests_on_shared(ids))
    return Signal("orphan_tool_output", detail, settled=not an.tools.from_latest)


def missing_tool_output(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    tools = an.tools
    ids = tools.missing
    if not ids:
        return None
    settled = not tools.from_latest or tools.missing_from_input == len(ids)
    detail = _on_entry({CALL_IDS: ids[:16]}, tools.rests_on_shared(ids))
    return Signal("missing_tool_output", detail, settled)


def tool_output_before_call(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    ids = an.tools.before_call
    if not ids:
        return None
    detail = _on_entry({CALL_IDS: ids[:16]}, an.tools.rests_on_shared(ids))
    return Signal("tool_output_before_call", detail)


def duplicate_call_id(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    ids = an.tools.duplicates
    return Signal("duplicate_call_id", {CALL_IDS: ids[:16]}) if ids else None


# What an id the API would refuse by its shape is named by on a duplicate's event (a client made it: it may hold
# anything).
MALFORMED_ID = "(malformed id)"


def duplicate_item_id(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """An id the API would find twice: twice in the input (refusable whatever the ledger holds), or in the input and
    in the server-side state the request continues (refusable on what this process recorded)."""
    ids = an.duplicate_ids
    if not ids:
        return None
    named: list[str] = [i if well_formed(i) else MALFORMED_ID for i in ids[:16]]
    detail: dict[str, AttributeValue] = {ITEM_IDS: named, DUPLICATE_HELD_BY: list(an.duplicate_held_by)}
    return Signal("duplicate_item_id", _on_entry(detail, an.duplicates_shared))


def malformed_item_id(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    bad = an.malformed_ids[:16]
    if not bad:
        return None
    return Signal(
        "malformed_item_id",
        {
            MALFORMED_POSITIONS: [position for position, _, _ in bad],
            MALFORMED_ITEM_TYPES: [kind for _, kind, _ in bad],
            MALFORMED_PROBLEMS: [problem for _, _, problem in bad],
        },
    )


def history_truncated(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """The latest replayed response's own history must precede it, or a compaction item stand in for it.

    History may be cut at a compaction item: only the app messages since the latest compaction item are
    then owed, as many as the replayed response was given after its own latest compaction item, and among them as
    many system and developer messages (an empty one counts as none; one whose text changed, a date or a profile
    put in it each turn, still counts).
    """
    if req.state_mode != CLIENT_REPLAY:
        return None
    link = an.latest_replayed
    if link is None:
        return None
    entry = link.entry
    if any(i in link.seen and m.type == "compaction" for i, m in enumerate(entry.outputs)):
        return None  # the response itself returned a compaction item, and it was kept
    if entry.input_compactions == 0 and link.compactions_before > 0:
        return None  # compacted since (a compaction item from `responses.compact`, say)
    kept_compaction = link.compactions_before > 0 or entry.input_compactions == 0
    if (
        kept_compaction
        and link.app_messages_before >= entry.input_app_messages
        and link.system_messages_before >= entry.input_system_messages
    ):
        return None
    return Signal(
        "history_truncated",
        {
            PARENT_ID: entry.response_id,
            HISTORY_EXPECTED_APP_MESSAGES: entry.input_app_messages,
            HISTORY_APP_MESSAGES: link.app_messages_before,
        },
    )


def concurrent_branch(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    return Signal("concurrent_branch") if sit.concurrent else None


def tool_output_modified(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    """A replayed tool output whose text is not the one first sent under its call_id (see ``tool_outputs``)."""
    modified = an.outputs.modified
    if not modified or an.parent is None:
        return None
    return Signal("tool_output_modified", _on_entry({CALL_IDS: list(modified[:16])}, an.parent.shared))


def context_duplicated(req: RequestFacts, an: Analysis, sit: Situation) -> Signal | None:
    duplicated = an.duplicated
    if not duplicated:
        return None
    types = sorted(duplicated)
    return Signal(
        "context_duplicated",
        {
            DUPLICATED_COUNT: sum(duplicated.values()),
            DUPLICATED_ITEM_TYPES: types[:16],
            DUPLICATED_COUNTS: [duplicated[t] for t in types[:16]],
        },
    )


def response_incomplete(req: RequestFacts, an: Analysis, resp: ResponseFacts, sit: Situation) -> Signal | None:
    if resp.status != "incomplete":
        return None
    return Signal("response_incomplete", {INCOMPLETE_REASON: resp.finish_reason or "unknown"})


def reasoning_not_replayable(req: RequestFacts, an: Analysis, resp: ResponseFacts, sit: Situation) -> Signal | None:
    if effective_store(req, resp) and not sit.zdr:
        return None
    bare = sum(1 for m in resp.output_items if m.type == "reasoning" and not m.encrypted)
    return Signal("reasoning_not_replayable", {REASONING_COUNT: bare}) if bare else None


def reasoning_withheld(req: RequestFacts, an: Analysis, resp: ResponseFacts, sit: Situation) -> Signal | None:
    """Replayed reasoning the API says it withheld from the model for a mismatch (its own report, so confirmed);
    ``turn_boundary`` is the reasoning context at work: recorded on the span, never a signal."""
    crossed = [(reason, count) for reason, count in resp.withheld if reason != TURN_BOUNDARY]
    if not crossed:
        return None
    detail: dict[str, AttributeValue] = {
        REASONING_WITHHELD: sum(count for _, count in crossed),
        REASONING_WITHHELD_REASONS: [reason for reason, _ in crossed],
        CONFIRMED: True,
    }
    return Signal("reasoning_withheld", detail)


def history_truncated_by_server(req: RequestFacts, an: Analysis, resp: ResponseFacts, sit: Situation) -> Signal | None:
    """Under ``truncation: "auto"`` the server drops the oldest items itself, silently: a response that read fewer
    input tokens than the chain or conversation it continues already held (``held_tokens``) had items dropped. Not
    where the app deleted items from the conversation since: it holds less by the app's own doing."""
    if (
        req.truncation != "auto"
        or req.operation != OPERATION_CHAT
        or req.state_mode not in (SERVER_CHAIN, CONVERSATION)
    ):
        return None
    parent = an.parent
    if parent is None or resp.input_tokens is None or resp.compaction or an.items_deleted:
        return None
    held = held_tokens(req, parent)
    if held is None or resp.input_tokens >= held:
        return None
    detail: dict[str, AttributeValue] = {
        PARENT_ID: parent.response_id,
        HISTORY_HELD_TOKENS: held,
        HISTORY_SERVER_TRUNCATED: True,
    }
    return Signal("history_truncated", _on_entry(detail, parent.shared))


# Output items that render back as at least the tokens they were generated with (text, reasoning, client tool calls):
# a hosted tool's item (a web search, a generated image) may render back as fewer.
_RENDERED_WHOLE = CALL_TYPES | {"message", "reasoning"}


def held_tokens(req: RequestFacts, parent: Entry) -> int | None:
    """The input tokens the state ``parent`` ends already holds for this request, at least: the parent's input and
    output tokens, less the reasoning the request's effective reasoning context does not render back (all of it
    when that context is not known). None where the numbers cannot be compared: a compaction in between (sent, or
    returned by the parent), another model, other instructions (never inherited), other tool definitions, a state
    the app wrote to itself, or one whose numbers are not known."""
    if parent.input_tokens is None or parent.written_by_app or req.compactions:
        return None
    if parent.model is None or parent.model != req.model or parent.instructions_hash != req.instructions_hash:
        return None
    if req.tools_fingerprint is None or parent.tools_fingerprint != req.tools_fingerprint:
        return None
    outputs = parent.outputs
    if any(m.type == "compaction" for m in outputs):
        return None
    whole = len(outputs) < MAX_OUTPUT_ITEMS and all(m.type in _RENDERED_WHOLE for m in outputs)
    held = parent.input_tokens + ((parent.output_tokens or 0) if whole else 0)
    if effective_context(req, parent) == ALL_TURNS:
        return held
    if parent.reasoning_held is None:
        return None
    earlier_turns = parent.reasoning_held - parent.reasoning_turn
    return held - (parent.reasoning_held if latest_user_message(req) is not None else earlier_turns)


def compaction(req: RequestFacts, an: Analysis, resp: ResponseFacts, sit: Situation) -> Signal | None:
    return Signal("compaction") if resp.compaction or req.operation == OPERATION_COMPACT else None


REQUEST_CHECKS: tuple[RequestCheck, ...] = (
    state_mode_conflict,
    unstored_parent,
    unstored_retrieve,
    instructions_dropped,
    instructions_changed,
    reasoning_dropped,
    replay_incomplete,
    reasoning_pair_broken,
    encrypted_content_foreign,
    encrypted_content_modified,
    phase_dropped,
    orphan_tool_output,
    missing_tool_output,
    tool_output_before_call,
    duplicate_call_id,
    duplicate_item_id,
    malformed_item_id,
    history_truncated,
    concurrent_branch,
    context_duplicated,
    tool_output_modified,
)
RESPONSE_CHECKS: tuple[ResponseCheck, ...] = (
    response_incomplete,
    reasoning_not_replayable,
    reasoning_withheld,
    history_truncated_by_server,
    compaction,
)


# A single-turn request (app messages only, at most one user message, no state parameter) continues nothing and
# carries no tool item: of the catalogue, only these can raise on it (on the ids of its messages, if it gives them
# any). `tests/core/test_hot_path.py` runs the whole catalogue on every kind of single-turn request to hold this list
# to it.
SINGLE_TURN_CHECKS: tuple[RequestCheck, ...] = (duplicate_item_id, malformed_item_id, concurrent_branch)


def run_request_checks(req: RequestFacts, an: Analysis, sit: Situation) -> list[Signal]:
    checks = SINGLE_TURN_CHECKS if req.state_mode == SINGLE_TURN and req.target_response_id is None else REQUEST_CHECKS
    return [s for check in checks if (s := check(req, an, sit)) is not None]


def run_response_checks(req: RequestFacts, an: Analysis, resp: ResponseFacts, sit: Situation) -> list[Signal]:
    return [s for check in RESPONSE_CHECKS if (s := check(req, an, resp, sit)) is not None]


def tool_calls_check(an: Analysis, signals: list[Signal], resp: ResponseFacts | None = None) -> str:
    """The first failing tool-call signal's name; else ``pending`` (the response returned calls the app must
    answer), ``ok`` (the request's tool items pair up) or ``none`` (no tool items involved)."""
    if signals:
        raised = {s.name for s in signals}
        for name in TOOL_SIGNALS:
            if name in raised:
                return name
    if resp is not None and pending_calls(resp.output_items):
        return "pending"
    return "ok" if an.tools.present else "none"


def accepted_by_api(signals: list[Signal]) -> list[Signal]:
    """The API accepted the request and answered: signals that rest on a conversation's latest turn as this process
    knew it (possibly stale: another process may have answered the call since) are dropped. The API refuses a
    function call left without output, or an output without its call, in the conversation it holds."""
    if not signals:
        return signals
    return signals if all(s.settled for s in signals) else [s for s in signals if s.settled]


# What the API's `invalid_encrypted_content` answers say when a payload crossed a boundary (openai/codex#13724,
# anomalyco/opencode#48773), lowercased; "item_id did not match" is a client that rewrote the item's id.
_CROSSING_ANSWERS = ("organization_id did not match", "not issued to this caller")
_REWRITTEN_ID = "item_id did not match"


def confirmed_by_api(
    signals: list[Signal], error_code: object, message: str | None = None, crossed: Sequence[str] = ()
) -> list[Signal]:
    """The API refused the request with `invalid_encrypted_content`. A payload that crossed a boundary (the answer
    names the organization or the caller, or the request was seen crossing one before it left) is
    `encrypted_content_foreign`, confirmed, with every boundary known crossed (``crossed``: the endpoint and the
    credential among them); otherwise a replayed payload was modified, whether or not its shape showed it before
    sending."""
    if error_code != "invalid_encrypted_content":
        return signals
    answer = (message or "").lower()
    foreign = next((s for s in signals if s.name == "encrypted_content_foreign"), None)
    if _REWRITTEN_ID not in answer and (foreign is not None or any(text in answer for text in _CROSSING_ANSWERS)):
        return confirmed_crossing(signals, crossed)
    confirmed: dict[str, AttributeValue] = {CONFIRMED: True}
    kept = [s for s in signals if s.name != "encrypted_content_modified"]
    before = next((s for s in signals if s.name == "encrypted_content_modified"), None)
    return [*kept, Signal("encrypted_content_modified", {**(before.detail if before else {}), **confirmed})]


# The reasons `input_transformations` gives for reasoning made for another caller or model: the API confirmed that a
# replayed payload crossed a boundary.
_CROSSING_REASONS = frozenset({"organization_mismatch", "end_user_mismatch", "model_mismatch"})


def confirmed_crossing(signals: list[Signal], crossed: Sequence[str]) -> list[Signal]:
    """`encrypted_content_foreign`, confirmed by the API, in place of the one raised before sending (if any): with
    every boundary known crossed, the endpoint and the credential among them (``crossed``: what the analysis found,
    evidence only now)."""
    before = next((s for s in signals if s.name == "encrypted_content_foreign"), None)
    detail: dict[str, AttributeValue] = dict(before.detail) if before is not None else {}
    named = detail.get(ENCRYPTED_CROSSED)
    every = list(dict.fromkeys([*(named if isinstance(named, (list, tuple)) else ()), *crossed]))
    if every:
        detail[ENCRYPTED_CROSSED] = [str(boundary) for boundary in every]
    detail[CONFIRMED] = True
    confirmed = Signal("encrypted_content_foreign", detail)
    if before is None:
        return [*signals, confirmed]
    return [confirmed if s is before else s for s in signals]  # in its place


def confirmed_by_response(signals: list[Signal], resp: ResponseFacts, crossed: Sequence[str]) -> list[Signal]:
    """The response reports reasoning withheld for another organization, end user or model: a payload the request
    was seen crossing a boundary with (before sending, or only by its endpoint or credential) is confirmed foreign."""
    if not any(reason in _CROSSING_REASONS for reason, _ in resp.withheld):
        return signals
    if not crossed and not any(s.name == "encrypted_content_foreign" for s in signals):
        return signals
    return confirmed_crossing(signals, crossed)
