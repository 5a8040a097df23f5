"""What the model is shown of a context: the reasoning the API withholds, and what `truncation: "auto"` drops.

The request's context (server-side history, then its own input) is stored and listed as sent; the model reads a
rendering of it. Replayed reasoning is withheld from that rendering by the rules of `replay_rules` (the turn
boundary of `reasoning.context`, and the boundaries a payload cannot cross: organization, end user, model, an edited
prefix), and each item withheld is reported in the response's `input_transformations`. Under `truncation: "auto"`,
an input over the model's context window (`EmulatorConfig.context_window`) loses its oldest items until it fits,
silently; without it the request is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import tokens
from .config import REASONING_CONTEXTS, default_reasoning_context
from .context import Context
from .errors import bad_request
from .items import Item, is_user_message, kind, text_of
from .state import Entry

# Items a prefix digest leaves out: reasoning (whether an earlier one is replayed or left out changes nothing the
# model reads after it). A compaction item stands for every item before it: a client may keep them before it, drop
# them, or send some again after it (the AI SDK re-sends the compacting turn's user message): what follows it is
# digested afresh, less the items it holds.
_NOT_IN_PREFIX = frozenset({"reasoning"})
_COMPACTION = "compaction"
# Messages a prefix digest leaves out: instructions sent as items, which apps and libraries re-send each turn (often
# rewritten: a date, a profile), as `instructions` itself is.
_INSTRUCTION_ROLES = frozenset({"system", "developer"})


def effective_context(reasoning: Any, model: str, reasons: bool) -> str | None:
    """The `reasoning.context` a response reports: the request's `current_turn` or `all_turns`, else (omitted, or
    `auto`: the model decides) its model's default; None for a model that does not reason."""
    if not reasons:
        return None
    sent = reasoning.get("context") if isinstance(reasoning, dict) else None
    return sent if sent in REASONING_CONTEXTS else default_reasoning_context(model)


def _canonical(item: Item) -> str:
    """An item as the model reads it: its kind, role, text, call and tool name; its id, status and `phase` aside, a
    call's arguments as parsed JSON (a library may re-serialise them)."""
    item_kind = kind(item)
    text = text_of(item)
    if item_kind == "function_call":
        arguments = item.get("arguments")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
            text = f"{item.get('name') or ''} {json.dumps(parsed, sort_keys=True)}"
        except ValueError:
            pass
    return json.dumps([item_kind, item.get("role"), text, item.get("call_id")], sort_keys=True)


def prefix_digests(entries: Iterable[Entry]) -> list[str]:
    """For each entry, the digest of the items before it (``_NOT_IN_PREFIX`` and instructions aside). A compaction
    item (one a response returns, or the entries a replayed one is read as: the whole context it compacted) starts
    the digest afresh for what follows it, which leaves out the items it holds."""
    running = hashlib.sha256()
    digests: list[str] = []
    seen: set[str] = set()  # since the digest last started afresh
    held: set[str] = set()  # what the latest compaction item holds
    expansion: str | None = None
    for entry in entries:
        if entry.compacted != expansion:
            if entry.compacted is not None:  # a replayed compaction's entries: the whole context, from its start
                running, seen = hashlib.sha256(), set()
            else:
                running, held, seen = hashlib.sha256(_COMPACTION.encode()), seen, set()
            expansion = entry.compacted
        digests.append(running.hexdigest()[:16])
        item_kind = kind(entry.item)
        if item_kind == _COMPACTION:
            running, held, seen = hashlib.sha256(_COMPACTION.encode()), seen, set()
            continue
        if item_kind in _NOT_IN_PREFIX or entry.item.get("role") in _INSTRUCTION_ROLES:
            continue
        canonical = _canonical(entry.item)
        if entry.compacted is None and canonical in held:
            continue  # sent again after the compaction item that holds it
        seen.add(canonical)
        running.update(canonical.encode() + b"\x00")
    return digests


def prefix_digest(entries: list[Entry]) -> str:
    """The digest of everything in ``entries``, as the prefix of what comes after them."""
    return prefix_digests([*entries, Entry({"type": "reasoning"})])[-1]


def turn_start(entries: list[Entry]) -> int:
    """Where the current turn begins: the latest user message (0 when there is none)."""
    for index in range(len(entries) - 1, -1, -1):
        if is_user_message(entries[index].item):
            return index
    return 0


@dataclass
class Rendered:
    """A context as the model reads it, and what was left out of it: reasoning withheld (with the reason), and the
    number of items `truncation: "auto"` dropped."""

    context: Context
    withheld: list[tuple[Entry, str]] = field(default_factory=list)
    dropped: int = 0

    def transformations(self) -> list[dict[str, Any]]:
        """`input_transformations`: each withheld reasoning item, in input order."""
        return [
            {"id": entry.item.get("id"), "type": "reasoning", "action": "removed", "reason": reason}
            for entry, reason in self.withheld
        ]


def without(context: Context, withheld: list[tuple[Entry, str]]) -> Rendered:
    """The context without the withheld entries."""
    gone = {id(entry) for entry, _ in withheld}
    kept = Context(
        history=[e for e in context.history if id(e) not in gone],
        current=[e for e in context.current if id(e) not in gone],
    )
    return Rendered(kept, withheld)


def entry_tokens(entry: Entry) -> int:
    """Tokens one entry takes in the model's input: a reasoning item as many as it took to think it."""
    if kind(entry.item) == "reasoning" and entry.notes:
        return tokens.reasoning_tokens(entry.notes)
    return tokens.item_tokens(text_of(entry.item, entry.notes))


def input_tokens(context: Context, instructions: str | None) -> int:
    """`usage.input_tokens` of a turn over ``context``."""
    total = sum(entry_tokens(e) for e in context.entries)
    return total + (tokens.item_tokens(instructions) if instructions else 0)


def context_length_exceeded(window: int) -> Exception:
    """The API's 400 for an input over the context window without `truncation: "auto"`."""
    return bad_request(
        f"Your input exceeds the context window of this model ({window} tokens). Please adjust your input and try "
        "again.",
        param="input",
        code="context_length_exceeded",
    )


def truncate(rendered: Rendered, window: int | None, auto: bool, instructions: str | None) -> Rendered:
    """Fit the rendering into the context window: under `truncation: "auto"` drop the oldest items (a call with
    its output, never the latest item) until it fits; else a 400 when it does not."""
    if window is None:
        return rendered
    context = rendered.context
    if input_tokens(context, instructions) <= window:
        return rendered
    if not auto:
        raise context_length_exceeded(window)
    entries = context.entries
    total = input_tokens(context, instructions)
    start = 0
    while total > window and start < len(entries) - 1:
        total -= entry_tokens(entries[start])
        start += 1
    kept = entries[start:]
    answered = {e.item.get("call_id") for e in kept if kind(e.item) == "function_call"}
    orphans = [e for e in kept if kind(e.item) == "function_call_output" and e.item.get("call_id") not in answered]
    kept = [e for e in kept if not any(e is o for o in orphans)]
    if total > window:
        raise context_length_exceeded(window)
    history = set(map(id, context.history))
    truncated = Context(
        history=[e for e in kept if id(e) in history],
        current=[e for e in kept if id(e) not in history],
    )
    return Rendered(truncated, rendered.withheld, rendered.dropped + len(entries) - len(kept))
