"""What the model sees for one request: server-side history plus the request's resolved input.

This is where the API's state semantics live: the `previous_response_id` chain, conversation
items, item references, and replayed reasoning items whose `encrypted_content` must verify.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .crypto import Sealer
from .errors import ApiError, bad_request, item_not_found
from .items import kind, normalize, user_message
from .state import Caller, Entry, Minted, Store, StoredResponse


@dataclass
class Context:
    """`history` came from server state (already seen, hence cached); `current` is this request's input."""

    history: list[Entry] = field(default_factory=list)
    current: list[Entry] = field(default_factory=list)

    @property
    def entries(self) -> list[Entry]:
        """The whole context, oldest first."""
        return [*self.history, *self.current]


def previous_not_found(response_id: str) -> ApiError:
    """The real API's 400 for a `previous_response_id` it cannot use."""
    return bad_request(
        f"Previous response with id '{response_id}' not found.",
        param="previous_response_id",
        code="previous_response_not_found",
    )


def chain_history(store: Store, previous_response_id: str) -> list[Entry]:
    """Every stored ancestor's input then output, oldest first; 400 if the parent is unusable."""
    parent = store.get_response(previous_response_id)
    if parent is None:
        raise previous_not_found(previous_response_id)
    lineage = []
    seen: set[str] = set()
    node: StoredResponse | None = parent
    while node is not None and node.id not in seen:
        seen.add(node.id)
        lineage.append(node)
        node = store.get_response(node.previous_response_id) if node.previous_response_id else None
    history: list[Entry] = []
    for ancestor in reversed(lineage):
        history.extend(ancestor.input)
        history.extend(ancestor.output)
    return history


def resolve_input(
    raw: Any, store: Store, sealer: Sealer, new_id: Callable[[str], str], *, param: str = "input"
) -> list[Entry]:
    """The request's `input` as typed entries with ids, references resolved, reasoning verified."""
    if raw is None:
        return []
    if isinstance(raw, str):
        return [Entry(user_message(raw, new_id("msg")))]
    if not isinstance(raw, list):
        raise bad_request(f"Invalid type for '{param}': expected a string or an array of items.", param=param)
    entries: list[Entry] = []
    for index, raw_item in enumerate(raw):
        if not isinstance(raw_item, dict):
            raise bad_request(f"Invalid type for '{param}[{index}]': expected an object.", param=f"{param}[{index}]")
        if kind(raw_item) == "compaction":
            entries.extend(expand_compaction(raw_item, sealer))
        else:
            entries.append(_resolve_item(raw_item, store, sealer, new_id))
    return entries


def _minted(minted: Minted | None) -> list[Any] | None:
    if minted is None:
        return None
    caller = minted.caller
    return [minted.model, caller.organization, caller.project, caller.end_user, minted.prefix]


def _read_minted(raw: Any) -> Minted | None:
    if not isinstance(raw, list) or len(raw) != 5:
        return None
    model, organization, project, end_user, prefix = raw
    return Minted(model, Caller(organization, project, end_user), prefix)


def seal_reasoning(notes: str, minted: Minted | None, sealer: Sealer) -> str:
    """The opaque `encrypted_content` of a reasoning item: its notes, and what it was made for."""
    return sealer.seal(json.dumps({"n": notes, "m": _minted(minted)}, separators=(",", ":")))


def open_reasoning(token: str, sealer: Sealer) -> tuple[str, Minted | None] | None:
    """The notes a reasoning item's `encrypted_content` holds and what it was made for; None when it does not
    verify."""
    opened = sealer.open(token)
    if opened is None:
        return None
    try:
        payload = json.loads(opened)
    except ValueError:
        return opened, None
    if not isinstance(payload, dict) or not isinstance(payload.get("n"), str):
        return opened, None
    return payload["n"], _read_minted(payload.get("m"))


def seal_compaction(entries: list[Entry], sealer: Sealer, caller: Caller | None = None) -> str:
    """The opaque `encrypted_content` of a compaction item: the compacted entries (notes and what each reasoning was
    made for included), and the organization and project it was made for."""
    payload = {
        "c": [caller.organization, caller.project] if caller is not None else None,
        "e": [{"item": entry.item, "notes": entry.notes, "m": _minted(entry.minted)} for entry in entries],
    }
    return sealer.seal(json.dumps(payload, separators=(",", ":")))


def open_compaction(raw: Mapping[str, Any], sealer: Sealer) -> tuple[list[Entry], Caller | None]:
    """The entries a replayed compaction item stands for, and whom it was made for; 400 when its content does not
    verify."""
    token = raw.get("encrypted_content")
    opened = sealer.open(token) if isinstance(token, str) else None
    if opened is None:
        raise bad_request(
            f"The encrypted content for item {raw.get('id')} could not be verified.",
            param="input",
            code="invalid_encrypted_content",
        )
    payload = json.loads(opened)
    made_for = payload.get("c") if isinstance(payload, dict) else None
    caller = Caller(made_for[0], made_for[1]) if isinstance(made_for, list) and len(made_for) == 2 else None
    entries = payload["e"] if isinstance(payload, dict) else payload
    held = str(raw.get("id") or "compaction")
    return [Entry(dict(e["item"]), e.get("notes"), _read_minted(e.get("m")), held) for e in entries], caller


def expand_compaction(raw: dict[str, Any], sealer: Sealer) -> list[Entry]:
    """The entries a replayed compaction item stands for; 400 when its content does not verify."""
    return open_compaction(raw, sealer)[0]


def compaction_caller(raw: Mapping[str, Any], sealer: Sealer) -> Caller | None:
    """Whom a replayed compaction item was made for; None when that cannot be read (its content does not verify:
    resolving it answers that)."""
    try:
        return open_compaction(raw, sealer)[1]
    except (ApiError, ValueError, KeyError, TypeError):
        return None


def _resolve_item(raw: dict[str, Any], store: Store, sealer: Sealer, new_id: Callable[[str], str]) -> Entry:
    item_kind = kind(raw)
    item_id = raw.get("id")
    if item_kind is None:
        raise bad_request("Missing required parameter: 'input[].type'.", param="input")
    if item_kind == "item_reference":
        if not isinstance(item_id, str):
            raise bad_request("Missing required parameter: 'input[].id'.", param="input")
        found = store.get_item(item_id)
        if found is None:
            raise item_not_found(item_id)
        return Entry(dict(found.item), found.notes, found.minted)
    if item_kind == "reasoning":
        token = raw.get("encrypted_content")
        if isinstance(token, str) and token:
            opened = open_reasoning(token, sealer)
            if opened is None:
                raise bad_request(
                    f"The encrypted content for item {item_id} could not be verified.",
                    param="input",
                    code="invalid_encrypted_content",
                )
            return Entry(normalize(raw, new_id), *opened)
        if isinstance(item_id, str) and item_id:
            found = store.get_item(item_id)
            if found is None or kind(found.item) != "reasoning":
                raise item_not_found(item_id)
            return Entry(normalize(raw, new_id), found.notes, found.minted)
    return Entry(normalize(raw, new_id))
