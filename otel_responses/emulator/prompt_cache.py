"""`prompt_cache_diagnostics`: why a request did (or did not) reuse the prompt cache of a response it names
(`prompt_cache_options.comparison_response_id`), as the API reports it.

The comparison reads what decides a cache prefix, in the order the SDK lists the reasons of a miss: the model, the
`prompt_cache_key`, the tools, the text format, the reasoning effort, the verbosity, the service tier, a compaction,
then the input items themselves. The first that differs is the reason; the tokens it cost are every input token
after the first divergence (all of them for any reason but the input). A response that is not stored (or does not
exist) cannot be compared; models before the `gpt-5.6` family have no prompt cache options (the SDK's docstring).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import ALL_TURNS, default_reasoning_context
from .context import Context, chain_history
from .items import kind
from .rendering import entry_tokens, prefix_digests
from .state import Entry, Store

_TTLS = ("30m", "12h")


def options(sent: Mapping[str, Any]) -> dict[str, Any]:
    """The prompt cache options applied, as the response returns them."""
    mode = sent.get("mode") if sent.get("mode") in ("implicit", "explicit") else "implicit"
    ttl = sent.get("ttl") if sent.get("ttl") in _TTLS else "30m"
    return {"mode": mode, "ttl": ttl, "comparison_response_id": sent.get("comparison_response_id")}


def _text(body: Mapping[str, Any], name: str, default: Any) -> Any:
    """A `text` setting, its default when not sent (a response's body reports the default)."""
    text = body.get("text")
    value = text.get(name) if isinstance(text, Mapping) else None
    return default if value is None else value


def _effort(body: Mapping[str, Any]) -> Any:
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, Mapping) else None
    return effort or "medium"


# Each reason of a miss and what it compares, in the SDK's order (the input comes last, compared item by item).
_SETTINGS = (
    ("model_changed", lambda body: body.get("model")),
    ("prompt_cache_key_changed", lambda body: body.get("prompt_cache_key")),
    ("tools_changed", lambda body: body.get("tools") or []),
    ("text_format_changed", lambda body: _text(body, "format", {"type": "text"})),
    ("reasoning_effort_changed", _effort),
    ("verbosity_changed", lambda body: _text(body, "verbosity", "medium")),
    ("service_tier_changed", lambda body: body.get("service_tier") or "default"),
)


def _compared(store: Store, response_id: str) -> tuple[Mapping[str, Any], list[Entry]] | None:
    """The request body a stored response was created from (as far as its public body says) and its input context."""
    stored = store.get_response(response_id)
    if stored is None:
        return None
    previous = stored.previous_response_id
    history = chain_history(store, previous) if previous is not None and store.get_response(previous) else []
    return stored.body, [*history, *stored.input]


def diagnostics(store: Store, body: Mapping[str, Any], context: Context) -> dict[str, Any]:
    """`prompt_cache_diagnostics` of a request against the response it names."""
    model = body.get("model")
    if not isinstance(model, str) or default_reasoning_context(model) != ALL_TURNS:
        return {"type": "unavailable"}
    sent = body.get("prompt_cache_options")
    compared_id = sent.get("comparison_response_id") if isinstance(sent, Mapping) else None
    found = _compared(store, compared_id) if isinstance(compared_id, str) else None
    if found is None:
        return {"type": "comparison_response_not_found"}
    earlier, earlier_entries = found
    entries = context.entries
    total = sum(entry_tokens(e) for e in entries)
    for reason, read in _SETTINGS:
        if read(body) != read(earlier):
            return _miss(reason, total)
    if any(kind(e.item) == "compaction" for e in _raw(body)):
        return _miss("context_compacted", total)
    now, before = prefix_digests([*entries, Entry({})]), prefix_digests([*earlier_entries, Entry({})])
    common = 0
    while common < min(len(entries), len(earlier_entries)) and now[common + 1] == before[common + 1]:
        common += 1
    if common < len(earlier_entries):
        return _miss("input_changed", sum(entry_tokens(e) for e in entries[common:]))
    return {"type": "cache_hit"}


def _raw(body: Mapping[str, Any]) -> list[Entry]:
    raw = body.get("input")
    return [Entry(item) for item in raw if isinstance(item, dict)] if isinstance(raw, list) else []


def _miss(reason: str, missed: int) -> dict[str, Any]:
    return {"type": "cache_miss", "reason": reason, "cache_missed_tokens": missed, "comparison_reusable_tokens": None}
