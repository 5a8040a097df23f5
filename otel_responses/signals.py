"""The signal catalogue: each way a call loses context, its severity and the fix.

Names are a contract (span attributes, events, metrics, dashboards, alert rules): never rename one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from opentelemetry.util.types import AttributeValue

from .attributes import (
    HISTORY_SERVER_TRUNCATED,
    LEDGER_SHARED,
    PARENT_DELETED,
    PARENT_OTHER_ORGANIZATION,
    REASONING_UNREPLAYABLE,
    REASONING_WITHHELD_REASONS,
    REPLAY_MESSAGES_ONLY,
)
from .docs_links import signal_doc_url

__all__ = ["CATALOGUE", "ERROR", "INFO", "LOSS_SEVERITIES", "WARNING", "ContextLossError", "Kind", "Signal"]

ERROR: Final = "error"
WARNING: Final = "warning"
INFO: Final = "info"


@dataclass(frozen=True, slots=True)
class Kind:
    """One entry of the catalogue. ``variants``: a meaning and fix of their own for a signal whose detail sets the
    named attribute true (a deleted parent is no storage mistake)."""

    name: str
    severity: str
    meaning: str
    fix: str
    variants: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # Strict mode refuses to send a request raising it: only request-side errors that the request itself and this
    # process's records prove. `encrypted_content_modified` is recorded, never refused: the API encrypts afresh on
    # every serialisation and the instrumentation cannot see every copy, so it could be wrong about what is accepted.
    strict: bool = False
    # About pairing tool calls with their outputs: the span's `openai_responses.tool_calls.check` names the first
    # raised, in catalogue order.
    tool_pairing: bool = False
    # Rests on the Responses API server's own semantics (what it stores, how it chains, its encrypted reasoning and
    # assistant `phase`, the output items it returned): not raised on a call that a library bridges to a provider
    # without the Responses API (litellm translating to Chat Completions and keeping its own session state). The
    # others rest on the request's structure (tool pairing, both state fields, instructions across a lineage).
    server_premised: bool = False
    # A fix per value of one detail attribute (a list of enum values, e.g. the reasons the API withheld reasoning
    # for): the signal's fix is those of the values its detail names, the catalogue's fix when it names none known.
    fixes: tuple[str, Mapping[str, str]] | None = None
    # The severity of a variant (its attribute true in the detail) where it is not the signal's: what the server did
    # itself, seen in numbers, is worth knowing, not a mistake of the app's.
    severities: Mapping[str, str] = field(default_factory=dict)
    # Variants strict mode never refuses (their attribute true in the detail), although the signal is strict: the
    # fact behind them is one the API may judge otherwise.
    unrefused: frozenset[str] = frozenset()


# The fix for each reason the API withholds replayed reasoning for (`input_transformations`); `turn_boundary` is the
# reasoning context at work, no mistake.
WITHHELD_FIXES: Final[dict[str, str]] = {
    "model_mismatch": "keep one model for a conversation's reasoning (a model switch, a router changing tier or a "
    "fallback model gets none of it): switching on purpose, leave out the reasoning items the other model made",
    "organization_mismatch": "send every turn under the organization (and project) that made its reasoning: pin "
    "one organization per conversation, not per key of a pool or per gateway account",
    "end_user_mismatch": "keep `safety_identifier` the same for every turn of a conversation",
    "prefix_mismatch": "replay the items before a reasoning item exactly as they were (do not edit, reorder, drop or "
    "insert items ahead of it)",
}


CATALOGUE: Final[dict[str, Kind]] = {
    k.name: k
    for k in (
        Kind(
            "state_mode_conflict",
            ERROR,
            "`conversation` and `previous_response_id` in one request",
            "choose one state mode per session: pass either `conversation` or `previous_response_id`, never both",
            strict=True,
        ),
        Kind(
            "unstored_parent",
            ERROR,
            "`previous_response_id` names a response created with `store=false` (or under ZDR)",
            "store the parent (`store=true`), or keep the history yourself and replay every output item",
            {
                PARENT_DELETED: (
                    "`previous_response_id` names a response the app deleted",
                    "chain to a response that still exists (delete a conversation's responses only once it is over), "
                    "or keep the history yourself and replay every output item",
                ),
                PARENT_OTHER_ORGANIZATION: (
                    "`previous_response_id` names a response created under another organization or project than "
                    "this request names: the API finds no such response there",
                    "continue a response under the organization (and project) that created it: a gateway's account "
                    "pool or a key rotation must keep a conversation on one organization",
                ),
            },
            strict=True,
            server_premised=True,
            unrefused=frozenset({PARENT_OTHER_ORGANIZATION}),
        ),
        Kind(
            "unstored_retrieve",
            ERROR,
            "retrieving a response (or its input items) that was created with `store=false` (not one the app deleted)",
            "do not rely on retrieve for `store=false` responses: keep what you need from the create result",
            server_premised=True,
        ),
        Kind(
            "instructions_dropped",
            WARNING,
            "a request continuing a lineage (any mode) sends no `instructions` (nor, in a replay, a system or "
            "developer message) although an earlier turn of it had them, and the server-side state holds no system or "
            'developer message; `""` counts as none',
            "send the current `instructions` on every request: they are not inherited from the parent",
        ),
        Kind(
            "instructions_changed",
            INFO,
            "the instructions hash differs from the parent's",
            "expected after a deliberate change; otherwise check which instructions version each worker sends",
        ),
        Kind(
            "reasoning_not_replayable",
            WARNING,
            "`store=false` (or ZDR) and reasoning items came back without `encrypted_content`",
            'add `include=["reasoning.encrypted_content"]` so the reasoning can be replayed next turn',
            server_premised=True,
        ),
        Kind(
            "reasoning_dropped",
            WARNING,
            "a replay carries items of an earlier response but not its reasoning items, where the model would have "
            "seen them (under `all_turns`, or within the current turn)",
            "replay every output item, reasoning included, not just the message text",
            {
                REASONING_UNREPLAYABLE: (
                    "a replay carries items of an earlier response but not its reasoning items, which could never be "
                    "replayed: that response was not stored (`store=false` or ZDR) and returned them without "
                    "`encrypted_content`",
                    'add `include=["reasoning.encrypted_content"]` to the requests whose responses are not stored, '
                    "then replay every output item, reasoning included",
                )
            },
            server_premised=True,
        ),
        Kind(
            "replay_incomplete",
            WARNING,
            "a replay carries some output items of an earlier response but not all",
            "append the whole `response.output` to the history, not only `output_text` or `output[0]`",
            {
                REPLAY_MESSAGES_ONLY: (
                    "a replay continues a request this process recorded (its whole input, then one new user message) "
                    "with none of the output items its response returned: only the user's messages are kept",
                    "append each response's whole `response.output` to the history after its turn, not only the "
                    "user's messages",
                )
            },
            server_premised=True,
        ),
        Kind(
            "reasoning_pair_broken",
            WARNING,
            "an item replayed under the server id of an item its response returned right after a reasoning item, "
            "without that reasoning item; or a reasoning item replayed without the item that followed it (the API "
            'refuses both for a stored response: "provided without its required \'reasoning\' item", "without its '
            'required following item")',
            "replay a reasoning item and the item after it together, in the order returned, each as returned; to "
            "leave reasoning out, leave out the ids of the items that followed it too; never keep a turn that ended "
            "on its reasoning item",
            server_premised=True,
        ),
        Kind(
            "reasoning_withheld",
            WARNING,
            "the API reports (`input_transformations`) that it withheld replayed reasoning from the model: it was made "
            "for another model, organization or end user, or the items before it were edited (`turn_boundary`, the "
            "reasoning context at work, is recorded on the span, never a signal)",
            "replay reasoning only to the model, organization and end user it was made for, after the items it "
            "followed, unchanged",
            server_premised=True,
            fixes=(REASONING_WITHHELD_REASONS, WITHHELD_FIXES),
        ),
        Kind(
            "encrypted_content_foreign",
            WARNING,
            "a replayed encrypted payload (reasoning or compaction `encrypted_content`) was minted for another model, "
            "or for another organization or project (both requests naming one): the API withholds it from the "
            "model, or refuses the request (400 `invalid_encrypted_content` naming the organization or the caller)",
            "replay encrypted payloads only to the model and organization they were made for: keep one model and one "
            "organization (and project) per conversation, a gateway's account pool and a model router included; "
            "switching on purpose, leave out the reasoning and compaction items made before the switch",
            server_premised=True,
        ),
        Kind(
            "encrypted_content_modified",
            ERROR,
            "a replayed opaque payload (reasoning or compaction `encrypted_content`, a `program` fingerprint) changed "
            "in length or shape against every copy the API returned, or the API answered `invalid_encrypted_content` "
            "(and no boundary was crossed: that is `encrypted_content_foreign`)",
            "store and send `encrypted_content` byte for byte; never decode, trim or re-serialise it",
            server_premised=True,
        ),
        Kind(
            "phase_dropped",
            WARNING,
            "a replayed assistant message lost the `phase` it was returned with",
            "replay the message item as returned (with `phase`), not a rebuilt `{role, content}` message",
            server_premised=True,
        ),
        Kind(
            "orphan_tool_output",
            ERROR,
            "a tool output whose `call_id` matches no call in the input nor in the server-side state the request "
            "continues (as far as the ledger knows it: where it cannot know, nothing is said)",
            "send the tool call item together with its output, and keep the `call_id` unchanged",
            strict=True,
            tool_pairing=True,
        ),
        Kind(
            "missing_tool_output",
            ERROR,
            "a tool call (in the input, or pending in the parent) has no output",
            "answer every tool call with an output item carrying its `call_id` before the next user turn",
            strict=True,
            tool_pairing=True,
        ),
        Kind(
            "tool_output_before_call",
            ERROR,
            "a tool output placed before its call",
            "keep items in the order the API returned them: the call, then its output",
            strict=True,
            tool_pairing=True,
        ),
        Kind(
            "duplicate_call_id",
            WARNING,
            "one `call_id` used by two calls",
            "do not replay a turn twice or merge two branches' histories",
            tool_pairing=True,
        ),
        Kind(
            "duplicate_item_id",
            ERROR,
            "two input items with one `id`, or an item sent under an id the server-side state already holds (an item "
            "of the conversation beside `conversation`, a reference to an output of the chain beside "
            '`previous_response_id`): the API answers 400 "Duplicate item found"',
            "send each item once: give items the API did not return no `id` (or a unique one), and beside "
            "`conversation` or `previous_response_id` send only the new items, not the state's items nor references "
            "to them",
            strict=True,
            server_premised=True,
        ),
        Kind(
            "malformed_item_id",
            WARNING,
            "an input item's `id` has a shape the API refuses: not the prefix its type takes (`msg`, `rs`, `fc`, "
            "`ctc`, `ws`), characters other than letters, digits, `_` and `-`, or more than 64 of them (the API "
            'answers 400 "Expected an ID that begins with …")',
            "send an item without an `id` (the API gives it one) or with the one the API returned, never an id "
            "another provider or library made for it",
            server_premised=True,
        ),
        Kind(
            "history_truncated",
            WARNING,
            "a replay dropped earlier history without a compaction item in its place",
            "compact long histories (`responses.compact` or `context_management`) instead of cutting old items",
            {
                HISTORY_SERVER_TRUNCATED: (
                    'the server dropped the oldest items itself (`truncation: "auto"`): the response read fewer input '
                    "tokens than the chain or conversation it continues already held",
                    "compact long conversations (`responses.compact` or `context_management`) before they fill the "
                    'context window, or send `truncation: "disabled"` so that an overflow fails instead',
                )
            },
            severities={HISTORY_SERVER_TRUNCATED: INFO},
        ),
        Kind(
            "concurrent_branch",
            INFO,
            "two requests continue the same parent, or write one conversation at once",
            "serialise turns per session, or make branching explicit",
        ),
        Kind(
            "response_incomplete",
            WARNING,
            "the response ended `incomplete`",
            "raise `max_output_tokens` or shorten the context; check `incomplete_details.reason`",
        ),
        Kind("compaction", INFO, "compaction happened", "nothing to fix: check facts survive with fixed questions"),
        Kind(
            "tool_output_modified",
            INFO,
            "a replayed tool output whose content differs from what the app first sent under that `call_id`",
            "expected if the app clears or shortens old tool results on purpose; otherwise replay each tool output "
            "as first sent (the model no longer sees what it answered from)",
        ),
        Kind(
            "context_duplicated",
            WARNING,
            "a request continuing server state (`previous_response_id` or `conversation`) also re-sends items that "
            "state already holds, rebuilt without their ids (or under them beside `previous_response_id`): the API "
            "accepts them, and the model reads those turns twice",
            "send only the new items (the user's message, tool outputs) beside `previous_response_id` or "
            "`conversation`; or keep the history yourself and drop the server state",
            server_premised=True,
        ),
    )
}

# On a signal's event: the signal rests on a fact read from a shared ledger (another process's record, or a value
# anyone who can write that store put there). Strict mode never refuses on such a signal; it is still recorded.
SHARED_FACT: Final = LEDGER_SHARED
# Read from the catalogue, for the callers that need the set (or, for the tool check, the order).
STRICT: Final = frozenset(k.name for k in CATALOGUE.values() if k.strict)
TOOL_SIGNALS: Final = tuple(k.name for k in CATALOGUE.values() if k.tool_pairing)
SERVER_PREMISED: Final = frozenset(k.name for k in CATALOGUE.values() if k.server_premised)
LOSS_SEVERITIES: Final = frozenset({ERROR, WARNING})


@dataclass(frozen=True, slots=True)
class Signal:
    """One raised signal with metadata only (counts, types, ids)."""

    name: str
    detail: dict[str, AttributeValue] = field(default_factory=dict)
    # False when the signal rests on a conversation's latest turn as this process knows it: another process (or a
    # call the instrumentation did not see) may have written a later turn, so the fact may be stale. Such a signal is
    # never refused, and is dropped when the API accepts the request (the API enforces what it claims).
    settled: bool = True

    @property
    def severity(self) -> str:
        kind = CATALOGUE[self.name]
        for attribute, severity in kind.severities.items():
            if self.detail.get(attribute) is True:
                return severity
        return kind.severity

    @property
    def meaning(self) -> str:
        return self._variant()[0]

    @property
    def fix(self) -> str:
        fixes = CATALOGUE[self.name].fixes
        if fixes is not None:
            attribute, by_value = fixes
            values = self.detail.get(attribute)
            if isinstance(values, (list, tuple)):
                named = [by_value[v] for v in dict.fromkeys(values) if isinstance(v, str) and v in by_value]
                if named:
                    return "; ".join(named)
        return self._variant()[1]

    def _variant(self) -> tuple[str, str]:
        kind = CATALOGUE[self.name]
        for attribute, variant in kind.variants.items():
            if self.detail.get(attribute) is True:
                return variant
        return kind.meaning, kind.fix

    @property
    def refusable(self) -> bool:
        """Strict mode may refuse the request for it: an error the request itself, or this process's own records of
        immutable facts, prove (never a fact read from a shared store, nor a conversation's latest turn)."""
        if self.name not in STRICT or not self.settled or self.detail.get(SHARED_FACT) is True:
            return False
        return not any(self.detail.get(attribute) is True for attribute in CATALOGUE[self.name].unrefused)


class ContextLossError(Exception):
    """Raised by strict mode, before the request is sent, for a request that would lose context.

    ``signal`` is the first offending signal's name; ``signals`` all of them; ``doc_url`` the section of the
    documentation about the first (why context is lost, the fix), which the message ends with.
    """

    def __init__(self, signals: list[Signal]) -> None:
        self.signals = tuple(s.name for s in signals)
        self.signal = self.signals[0]
        self.doc_url = signal_doc_url(self.signal)
        first = signals[0]
        others = f" (also: {', '.join(self.signals[1:])})" if len(self.signals) > 1 else ""
        super().__init__(f"{first.name}: {first.meaning}. Fix: {first.fix}.{others} See {self.doc_url}")
