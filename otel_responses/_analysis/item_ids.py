"""What the API checks of the ids of the items a request sends, before it reads any of them: each id at most once in
an input, and of the shape its item type takes. Pure: the ledger's answers come in as arguments.

The shape, from the API's own refusals as public reports quote them ("Invalid 'input[3].id': '__fake_id__'. Expected
an ID that begins with 'fc'."): a prefix per item type (a `function_call_output` takes the `fc` of its call, so a
client's `fco_…` fits), the characters `A-Z a-z 0-9 _ -`, at most 64 of them. Only the types whose prefix a refusal
named are checked; an id the ledger knows was made by the server itself and is never judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .._items import ItemMeta
from ..ledger import Place
from .facts import Lookup

# The prefix each item type's id must begin with, as the API's refusals name it.
ID_PREFIXES: dict[str, str] = {
    "message": "msg",
    "reasoning": "rs",
    "function_call": "fc",
    "function_call_output": "fc",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctc",
    "web_search_call": "ws",
}
MAX_ID_LENGTH = 64
PREFIX, CHARACTERS, LENGTH = "prefix", "characters", "length"


def id_problem(kind: str, item_id: str) -> str | None:
    """Why the API refuses ``item_id`` on an item of type ``kind`` (``prefix``, ``characters``, ``length``), or None
    when it fits."""
    prefix = ID_PREFIXES.get(kind)
    if prefix is not None and not item_id.startswith(prefix):
        return PREFIX
    if len(item_id) > MAX_ID_LENGTH:
        return LENGTH
    if not (item_id.isascii() and item_id.replace("-", "").replace("_", "").isalnum()):
        return CHARACTERS
    return None


def well_formed(item_id: str) -> bool:
    """An id of the API's characters and length (whatever its type): one that may be named in telemetry as it is."""
    return len(item_id) <= MAX_ID_LENGTH and id_problem("", item_id) is None


def own_ids(lookups: Sequence[Lookup]) -> list[tuple[int, str]]:
    """(index into ``lookups``, id) of every input item that carries an id: an item with one is looked up by it. An
    empty id is none (the Codex CLI sends `"id": ""` on a message it writes after compacting)."""
    return [(n, key) for n, lookup in enumerate(lookups) if type(key := lookup.key) is str and key]


def input_duplicates(ids: list[tuple[int, str]], found: Sequence[tuple[Place, ...]]) -> list[str]:
    """Ids sent more than once in one input, in input order; an id the server itself returned at least as many times
    in one response (a habit of some compatible servers) is not one."""
    counts = Counter(item_id for _, item_id in ids)
    if len(counts) == len(ids):
        return []
    repeated: list[str] = []
    for n, item_id in ids:
        times = counts[item_id]
        if times < 2 or item_id in repeated:
            continue
        per_entry = Counter(place[0].response_id for place in found[n])
        if not per_entry or max(per_entry.values()) < times:
            repeated.append(item_id)
    return repeated


def malformed(
    ids: list[tuple[int, str]],
    lookups: Sequence[Lookup],
    items: tuple[ItemMeta, ...],
    found: Sequence[tuple[Place, ...]],
) -> list[tuple[int, str, str]]:
    """(input position, item type, problem) of each id the API refuses by its shape; ids the ledger knows are the
    server's own and are not judged."""
    bad: list[tuple[int, str, str]] = []
    for n, item_id in ids:
        if found[n]:
            continue
        position = lookups[n].position
        kind = items[position].type
        problem = id_problem(kind, item_id)
        if problem is not None:
            bad.append((position, kind, problem))
    return bad
