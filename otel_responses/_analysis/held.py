"""The tool calls the server-side state of a response holds, carried forward from its parent turn after turn.

A chain's or a conversation's state is everything sent and returned since it began: an output may answer a call made
several turns back, and the same output sent again is already there. Each entry says which calls its state holds, the
newest ``MAX_HELD_CALLS`` of them and of the answered ones, built from its parent's and its own request and response,
so a request is checked against its parent alone: no walk up the chain (with a shared ledger every step would be a
round trip). Where older calls were dropped, or the parent's state was never known, the entry says so
(``held_partial``), and an output whose call is not listed is then no evidence of anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from typing import NamedTuple

from .._items import OUTPUT_TYPES, ItemMeta
from ..ledger import MAX_HELD_CALLS, Entry


class Held(NamedTuple):
    """The call_ids a state holds, newest last: of calls, of answered calls; ``partial``: it may hold others."""

    calls: tuple[str, ...]
    outputs: tuple[str, ...]
    partial: bool


NOTHING_HELD = Held((), (), False)


def held_after(
    parent: Entry | None, continues: bool, sent_newest_first: Iterable[ItemMeta], returned: tuple[ItemMeta, ...]
) -> Held:
    """The calls held once a request that sent ``sent_newest_first`` (its items with a call_id, the last first) got
    ``returned``: with the parent's state when the request ``continues`` it (a chain, a conversation; a replay's state
    is its own input), unknown beyond what is seen when that parent is not known. An item reference the ledger could not
    resolve may stand for a call: the calls held are then partial. Reads the input only until both tuples are full."""
    sent = iter(sent_newest_first)
    newest = next(sent, None)
    if newest is None and not continues and all(meta.call_id is None for meta in returned):
        return NOTHING_HELD  # most calls: a first turn, or a replay, without any tool item
    calls: dict[str, None] = {}  # insertion-ordered sets, newest first
    answered: dict[str, None] = {}
    dropped = [False, False]  # a call, an answered call, that did not fit
    unresolved = False  # an item reference sent that may be a call this entry cannot list

    def take(items: Iterable[tuple[str | None, bool]]) -> bool:
        """Add each call_id (an output's among the answered); False once both tuples are full and one more came: the
        rest is older, and dropped."""
        nonlocal unresolved
        for call_id, output in items:
            if call_id is None:
                unresolved = True  # only an unresolved item reference comes without a call_id (``_kinds``)
                continue
            into = answered if output else calls
            if call_id in into:
                continue
            if len(into) < MAX_HELD_CALLS:
                into[call_id] = None
                continue
            dropped[output] = True
            if dropped[0] and dropped[1]:
                return False
        return True

    if take(_kinds(reversed(returned))) and (newest is None or take(_kinds(chain((newest,), sent)))) and continues:
        if parent is None:
            dropped[0] = True  # a state this process never saw begin
        else:
            # The parent's own outputs first: an entry of a format without held calls still knows them.
            for older in (
                _kinds(reversed(parent.outputs)),
                ((call_id, False) for call_id in reversed(parent.held_calls)),
                ((call_id, True) for call_id in reversed(parent.held_outputs)),
            ):
                if not take(older):
                    break
            dropped[0] = dropped[0] or parent.held_partial
    return Held(tuple(reversed(calls)), tuple(reversed(answered)), dropped[0] or dropped[1] or unresolved)


def _kinds(metas: Iterable[ItemMeta]) -> Iterator[tuple[str | None, bool]]:
    """Each item's call_id and whether it is an output; an item without a call_id is left out, but for an item
    reference (one resolved is given as the item it names): it may be any call."""
    for meta in metas:
        call_id = meta.call_id
        if call_id is not None or meta.type == "item_reference":
            yield call_id, meta.type in OUTPUT_TYPES
