"""Turn any input or output item into a small metadata record.

Items arrive as dicts, TypedDicts or SDK models (built without validation, so the class says nothing:
dispatch is on the ``type`` string). Only identifiers, enums and presence flags leave this module;
payloads never do.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeGuard

_ENCRYPTED_TYPES = frozenset({"reasoning", "compaction"})
# Message roles an app writes itself; anything else in an input list came from an earlier response.
_APP_ROLES = frozenset({"user", "system", "developer"})


class ItemMeta(NamedTuple):
    """Metadata of one item: never its text, arguments, outputs or encrypted payload."""

    type: str
    id: str | None
    call_id: str | None
    role: str | None
    phase: str | None
    encrypted: bool

    @property
    def from_app(self) -> bool:
        """True for a message the app itself writes (user, system, developer), not model output."""
        return self.type == "message" and self.role in _APP_ROLES


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def item_meta(item: object) -> ItemMeta:
    """Metadata of one item, whatever its shape; unknown shapes give type ``unknown``."""
    if isinstance(item, dict):
        get: Any = item.get
    else:
        model_get = getattr

        def get(name: str) -> Any:
            return model_get(item, name, None)

    raw_type = get("type")
    role = _text_or_none(get("role"))
    item_id = _text_or_none(get("id"))
    if isinstance(raw_type, str):
        item_type = raw_type
    elif role is not None:
        item_type = "message"  # EasyInputMessageParam: `type` is optional.
    elif item_id is not None:
        item_type = "item_reference"  # ItemReference: `type` is optional.
    else:
        item_type = "unknown"
    encrypted = item_type in _ENCRYPTED_TYPES and bool(get("encrypted_content"))
    return ItemMeta(
        item_type,
        item_id,
        _text_or_none(get("call_id")),
        role,
        _text_or_none(get("phase")),
        encrypted,
    )


def is_sequence(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """Lists and tuples only: the SDK types `input` as Iterable, and a generator must not be consumed."""
    return isinstance(value, (list, tuple))
