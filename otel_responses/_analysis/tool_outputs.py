"""A replay's tool outputs against the copies first sent under their call_ids: an app that rewrites a tool result
before replaying it (clears it to save tokens, truncates it) leaves the model without what it saw before.

The response a replay continues remembers the tool outputs its own request was given (``Entry.given_outputs``: each
as first sent, carried forward turn after turn while the replays keep it among their newest); the replay's copy of
each is compared with it, length first. An equal length is settled in this process by Python's own hash of the text
(kept by the string itself: the same object replayed turn after turn costs nothing more), else, for an entry read from
a shared ledger, by the keyed fingerprint. Only a new output is fingerprinted in full, once. Outputs with anything but
text (an image, a file, a screenshot) are not read.
"""

from __future__ import annotations

from typing import NamedTuple

from .._items import OUTPUT_TYPES
from ..ledger import MAX_GIVEN_OUTPUTS, Entry, GivenOutput
from .facts import RequestFacts, TextReader


class Outputs(NamedTuple):
    """The call_ids of outputs changed since first sent (in input order), and what the next entry remembers."""

    modified: tuple[str, ...]
    given: tuple[GivenOutput, ...]


NONE = Outputs((), ())


def tool_outputs(req: RequestFacts, parent: Entry | None) -> Outputs:
    """The replay's tool outputs against those ``parent`` (the latest response it carries) was given; the newest
    ``MAX_GIVEN_OUTPUTS`` of them as the response this request makes will remember them."""
    reader = req.texts
    if reader is None or not req.tool_positions:
        return NONE
    first = {g.call_id: g for g in parent.given_outputs} if parent is not None and parent.given_outputs else {}
    items = req.input_items
    modified: list[str] = []
    given: list[GivenOutput] = []
    seen: set[str] = set()
    unmatched = len(first)
    for position in reversed(req.tool_positions):  # the newest first: they are the ones remembered
        meta = items[position]
        call_id = meta.call_id
        if call_id is None or meta.type not in OUTPUT_TYPES or call_id in seen:
            continue
        known = first.get(call_id)
        room = len(given) < MAX_GIVEN_OUTPUTS
        if known is None and not room:
            if not unmatched:
                break  # nothing left to compare, nothing more to remember
            continue
        text = reader.output(position)
        if text is None:
            continue
        seen.add(call_id)
        if known is None:
            record = GivenOutput(call_id, len(text), reader.fingerprint(text), hash(text))
        else:
            unmatched -= 1
            record = _compared(known, text, reader, modified)
        if room:
            given.append(record)
    modified.reverse()
    given.reverse()
    return Outputs(tuple(modified), tuple(given))


def _compared(known: GivenOutput, text: str, reader: TextReader, modified: list[str]) -> GivenOutput:
    """The record carried forward for ``text``, sent again under ``known``'s call_id; its call_id noted in
    ``modified`` when the text is not the one first sent."""
    if len(text) != known.length:
        modified.append(known.call_id)
        return known
    local = hash(text)
    if known.local is not None:  # recorded by this process: its hash decides
        if local != known.local:
            modified.append(known.call_id)
        return known
    if reader.fingerprint(text) != known.fingerprint:  # read from a shared ledger
        modified.append(known.call_id)
        return known
    return known._replace(local=local)
