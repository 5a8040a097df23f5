"""Derived facts of a request against the ledger: which earlier responses it continues, what of them is missing,
changed or sent again, and how its tool calls pair up. Linear in the number of input items; pure apart from reading
the ledger.

**The matching rule** (how a replayed item is recognised as one an earlier response returned), in one place. An input
item is identified by its id when the ledger knows that id; else by its call, ``(type, call_id)`` (libraries strip or
rewrite ids, the server gives items written to a conversation new ones); else by the keyed fingerprint of its text
(an assistant message).

- A match by the item's **own identity** — the id it carries; for an item without an id, its call or its text — that
  names **one** response links the request to that response: every output item of it is then owed back, and the
  payload and phase of each item matched are judged against what the API returned. A text links only when the
  response was asked one of the app messages that stand before it (short answers are returned to many
  conversations), and is first taken as the text of a response the request already links.
- An **assistant message under an id the ledger does not know** (a client's own numbering, `msg_1`) is known by its
  text exactly as one without an id is, with the same guards: a client that renumbers its messages still replays
  what the response said (or drops what went with it).
- A **fallback** match (a call item whose id the ledger does not know, found by its call; an item found by type and
  position beside an item already matched) or an **ambiguous** one (a key naming several responses) links nothing by
  itself: it marks the item replayed in every candidate the request already links, and judges nothing. A fallback can
  clear a missing-item signal; it never causes one, nor any other.
- An id a response holds at several positions (some compatible servers repeat one) is consumed position by position
  in replay order, its payload judged against every position with that id; missing items are counted by occurrence.
- Items the app wrote to a conversation itself are never a place an item is matched to (see ``ledger.Entry``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .._items import APP_OUTPUTS, APP_ROLES, CALL_TYPES, OUTPUT_TYPES, ItemMeta, payload_length, reshaped
from ..attributes import (
    OPERATION_CHAT,
    OPERATION_COMPACT,
    OPERATION_CREATE_CONVERSATION_ITEMS,
    OPERATION_DELETE_CONVERSATION_ITEM,
    PROVIDER_AZURE_OPENAI,
    PROVIDER_OPENAI,
)
from ..ledger import MAX_OUTPUT_ITEMS, NOWHERE, Entry, LedgerView, Place, deleted_item_id, items_deleted_id
from .boundaries import BEFORE_SENDING, crossed
from .facts import CLIENT_REPLAY, CONVERSATION, SERVER_CHAIN, SINGLE_TURN, Lookup, RequestFacts
from .item_ids import input_duplicates, malformed, own_ids
from .reasoning_context import CURRENT_TURN, effective_context, latest_user_message
from .tool_outputs import NONE, Outputs, tool_outputs

# Output items a replay must carry back: messages, reasoning, compaction items and the calls the app answered
# (hosted tool calls such as web searches need not be).
_ALWAYS_REPLAYED = frozenset({"message", "reasoning", "compaction"})
# How far back a chain is followed to tell what server-side state already holds.
MAX_ANCESTORS = 16

_Matches = Callable[[ItemMeta], bool]


@dataclass(slots=True)
class Replayed:
    """An earlier response whose output items a replay carries (linked by an item's own identity)."""

    entry: Entry
    app_messages_before: int  # distinct app messages between the latest compaction item (or the start) and it
    compactions_before: int
    system_messages_before: int  # of them, the system and developer messages
    seen: set[int] = field(default_factory=set)
    last: int = -1  # the input position of the last item recognised as one of its outputs

    def missing(self) -> list[ItemMeta]:
        """Output items of the response that the replay does not carry, one per position."""
        return owed(self.entry, self.seen)


def owed(entry: Entry, seen: set[int]) -> list[ItemMeta]:
    """Output items of a response a replay must carry back, but those at the positions ``seen``."""
    return [m for i, m in enumerate(entry.outputs) if i not in seen and (m.type in _ALWAYS_REPLAYED or m.awaits)]


@dataclass(slots=True)
class Tools:
    """How client tool calls and outputs pair up across the input and the parent's pending calls."""

    present: bool = False
    orphans: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    before_call: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    # The orphans and the missing outputs rest on a conversation's latest turn as this process knows it (another
    # process may have written a later one): not settled.
    from_latest: bool = False
    missing_from_input: int = 0  # how many of ``missing`` are calls in the input itself (settled whatever the parent)
    # call_ids whose fact rests on an entry read from a shared store (the parent's pending calls or its lack of a
    # call, an item reference resolved by it); what the request itself shows is never among them.
    shared: set[str] = field(default_factory=set)
    # Outputs the server-side state already holds, sent again, by type.
    resent: dict[str, int] = field(default_factory=dict)

    def rests_on_shared(self, call_ids: list[str]) -> bool:
        """Every one of ``call_ids`` rests on a shared entry: strict mode may not refuse on them."""
        shared = self.shared
        return bool(shared) and all(call_id in shared for call_id in call_ids)


@dataclass(slots=True)
class Analysis:
    """Everything the request-side checks read."""

    parent: Entry | None = None
    # A request writing items into a conversation (or deleting one): its latest turn, which they are remembered after.
    written_after: Entry | None = None
    # The app deleted items from the conversation since its latest response: the state holds less than it said.
    items_deleted: bool = False
    replayed: list[Replayed] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    phase_dropped: list[str] = field(default_factory=list)
    tools: Tools = field(default_factory=Tools)
    resolved: dict[int, ItemMeta] = field(default_factory=dict)  # item references, by input position
    resolved_shared: set[int] = field(default_factory=set)  # positions of ``resolved`` read from a shared store
    duplicated: dict[str, int] = field(default_factory=dict)  # items server state already holds, by type
    outputs: Outputs = NONE  # a replay's tool outputs against the copies first sent
    # What the API checks of the items' ids and reasoning pairs before reading them (``item_ids``, ``_pairs``):
    duplicate_ids: list[str] = field(default_factory=list)  # ids it finds twice, in the input or the state as well
    duplicate_held_by: list[str] = field(default_factory=list)  # where: `input`, `conversation`, `previous_response`
    duplicates_shared: bool = False  # none in the input, and every copy in server state known from a shared entry
    malformed_ids: list[tuple[int, str, str]] = field(default_factory=list)  # (input position, item type, problem)
    broken_pairs: list[tuple[str, str]] = field(default_factory=list)  # (item id, `reasoning` or `follower` missing)
    continued: Entry | None = None  # the response a replay of its messages alone continues (``Entry.given_messages``)
    # The boundaries replayed encrypted payloads crossed since they were minted (`model`, `organization`, `project`,
    # `endpoint`, `credential`): the first three raise `encrypted_content_foreign`; all are its detail once the API
    # confirms a crossing.
    crossed: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # payload items (their ids, else types) minted across one
    # What the model is shown of replayed reasoning (``reasoning_context``): the request's effective
    # `reasoning.context` (None: not known, every replayed reasoning item counts as seen), the replayed responses of
    # earlier, finished turns whose reasoning it withholds anyway (under `current_turn`), and how many reasoning items
    # of theirs the replay left out (no loss: a detail on the span).
    reasoning_context: str | None = None
    earlier_turns: frozenset[str] = frozenset()
    not_replayed: int = 0

    @property
    def latest_replayed(self) -> Replayed | None:
        return max(self.replayed, key=lambda r: r.entry.sequence) if self.replayed else None


def _payload_changed(sent: ItemMeta, entry: Entry, index: int) -> bool:
    """A replayed opaque payload that cannot be one the API returned: another length or alphabet than every
    copy seen (a fresh encryption the instrumentation did not see keeps both), or stripped from an item of an
    unstored response (the API cannot find it by id)."""
    if not sent.encrypted:
        return not entry.store
    if sent.shape is None:
        return False
    return all(reshaped(sent.shape, shape) for shape in entry.shapes(index))


def _one_response(places: tuple[Place, ...]) -> tuple[Place, ...] | None:
    """The places of the one response ``places`` name; None when they name several that could tell the checks apart.
    Responses alike in everything the checks read of them (a scripted conversation run twice: the same prompts, the
    same answers) give one verdict whichever of them the replay came from: the newest stands for them."""
    first = places[0][0]
    if all(place[0] is first for place in places):
        return places
    newest = max((place[0] for place in places), key=lambda entry: entry.sequence)
    verdict = _as_judged(newest)
    if all(_as_judged(place[0]) == verdict for place in places):
        return tuple(place for place in places if place[0] is newest)
    return None


def _as_judged(entry: Entry) -> tuple[object, ...]:
    """What the checks read of a response a replay carries: its output items (ids and call ids aside; an opaque
    payload by its length, as every encryption of it has another alphabet by chance), its storage and its history's
    size."""
    return (
        entry.store,
        entry.input_app_messages,
        entry.input_compactions,
        tuple(
            (m.type, m.role, m.phase, m.fingerprint, m.encrypted, m.awaits, m.shape and payload_length(m.shape))
            for m in entry.outputs
        ),
    )


class _Matcher:
    """One replay matched against the ledger, by the rule in the module docstring."""

    __slots__ = ("analysis", "items", "matched", "own", "prompts", "replayed", "req")

    def __init__(self, req: RequestFacts, analysis: Analysis) -> None:
        self.req = req
        self.items = req.input_items
        self.analysis = analysis
        self.replayed: dict[str, Replayed] = {}
        self.matched: dict[int, tuple[Replayed, int]] = {}  # input position -> the output it was recognised as
        self.own: dict[int, tuple[Replayed, int]] = {}  # of them, those recognised by the server id they carry
        self.prompts: dict[int, int] | None = None  # app message fingerprint -> its first position, on first need

    def _link(self, entry: Entry, lookup: Lookup) -> Replayed:
        replayed = self.replayed.get(entry.response_id)
        if replayed is None:
            replayed = self.replayed[entry.response_id] = Replayed(
                entry, lookup.app_messages_before, lookup.compactions_before, lookup.system_messages_before
            )
        return replayed

    def _linked(self, entry: Entry) -> Replayed | None:
        replayed = self.replayed.get(entry.response_id)
        return replayed if replayed is not None and replayed.entry is entry else None

    # -- the item's own identity: links and judges -------------------------------------------------------------

    def identity(self, lookup: Lookup, places: tuple[Place, ...]) -> None:
        """The item is output of that one response (``places`` are its positions): at its first position not yet
        replayed."""
        entry = places[0][0]
        replayed = self._link(entry, lookup)
        seen = replayed.seen
        index = next((i for _, i in places if i not in seen), places[0][1])
        self._judge(replayed, lookup.position, index)
        if type(lookup.key) is str:
            self.own[lookup.position] = (replayed, index)

    def _judge(self, replayed: Replayed, position: int, index: int) -> None:
        """What the item recognised as output ``index`` kept and lost of it; reasoning replayed without an id right
        before it is recognised by where it stands (the Agents SDK's ``reasoning_item_id_policy="omit"``)."""
        self._compare(replayed, self.items[position], position, index)
        items, outputs, seen = self.items, replayed.entry.outputs, replayed.seen
        back = 1
        while (
            position - back >= 0
            and index - back >= 0
            and items[position - back].type == "reasoning"
            and items[position - back].id is None
            and outputs[index - back].type == "reasoning"
            and index - back not in seen
            and position - back not in self.matched
        ):
            self._compare(replayed, items[position - back], position - back, index - back)
            back += 1

    def _compare(self, replayed: Replayed, sent: ItemMeta, position: int, index: int) -> None:
        analysis, entry = self.analysis, replayed.entry
        replayed.seen.add(index)
        self.matched[position] = (replayed, index)
        returned = entry.outputs[index]
        if sent.type == "item_reference":  # the API resolves it to the item as returned, phase and all
            analysis.resolved[position] = returned
            if entry.shared:
                analysis.resolved_shared.add(position)
            return
        if returned.encrypted and _payload_changed(sent, entry, index):
            analysis.modified.append(returned.id or sent.type)
        if returned.phase is not None and sent.phase != returned.phase:
            analysis.phase_dropped.append(returned.id or sent.type)

    # -- texts: their own identity when one response can be theirs ---------------------------------------------

    def text(self, lookup: Lookup, places: tuple[Place, ...]) -> None:
        """An assistant message without an id, known by its text: the text of a response already linked, else of the
        one response among those that said it which was asked something the replay holds before it."""
        fingerprint = lookup.key
        among = self._in_linked(lambda m: m.role == "assistant" and m.fingerprint == fingerprint)
        if len(among) == 1:
            replayed, index = among[0]
            self._judge(replayed, lookup.position, index)
            return
        if among:
            self._mark(among, lookup.position)
            return
        position = lookup.position
        asked = tuple(place for place in places if self._asked_before(place[0], position))
        one = _one_response(asked) if asked else None
        if one is None and len(asked) > 1:
            # Scripted conversations say the same words: the copy is the one of the conversation the replay carries.
            asked = self._in_linked_lineages(asked) or asked
            one = _one_response(asked)
        if one is None and len(asked) > 1:
            # The same words on several turns of one conversation: a turn whose own prompt comes later, or whose text
            # an earlier copy already stands for, did not say this copy.
            asked = tuple(place for place in asked if self._may_have_said(place, position))
            one = _one_response(asked) if asked else None
        if one is not None:
            self.identity(lookup, one)

    def _in_linked_lineages(self, places: tuple[Place, ...]) -> tuple[Place, ...]:
        """The places of responses of a lineage the request already links (or continuing a response it links)."""
        replayed = self.replayed
        lineages = {r.entry.lineage_id for r in replayed.values() if r.entry.lineage_id is not None}
        return tuple(
            place
            for place in places
            if place[0].lineage_id in lineages or (place[0].parent_id is not None and place[0].parent_id in replayed)
        )

    def _may_have_said(self, place: Place, position: int) -> bool:
        entry, index = place
        replayed = self._linked(entry)
        if replayed is not None and index in replayed.seen:
            return False
        if not entry.input_messages:
            return True
        prompts = self.prompts
        return prompts is not None and prompts.get(entry.input_messages[-1], position) < position

    def _asked_before(self, entry: Entry, position: int) -> bool:
        """A response found by its text alone is the one the replay continues only if one of the app messages it was
        sent stands before that text: a short answer ("Sure!") is returned to many conversations, and another one's
        response would make this replay look incomplete. (An entry that remembers no app message passes.)"""
        if not entry.input_messages:
            return True
        prompts = self.prompts
        if prompts is None:
            prompts = self.prompts = _first_positions(self.items)
        return any(prompts.get(fingerprint, position) < position for fingerprint in entry.input_messages)

    # -- fallbacks and ambiguity: clear, never accuse --------------------------------------------------------

    def fallback(self, lookup: Lookup, places: tuple[Place, ...]) -> None:
        """An item no single response is known by its own identity to have returned: it counts as replayed in every
        linked response that holds it (by the ambiguous key, its call, its text)."""
        if places:
            linked = [(r, i) for entry, i in places if (r := self._linked(entry)) is not None]
            self._mark(linked, lookup.position)
            return
        position = lookup.position
        call = lookup.fallback
        if isinstance(call, tuple):
            self._mark(self._in_linked(lambda m: (m.type, m.call_id) == call), position)
            return
        sent = self.items[position]
        texts = self.req.texts
        if sent.role == "assistant" and texts is not None:
            fingerprint = texts(position)
            if fingerprint is not None:
                self._mark(self._in_linked(lambda m: m.role == "assistant" and m.fingerprint == fingerprint), position)

    def _in_linked(self, matches: _Matches) -> list[tuple[Replayed, int]]:
        """The first output of each linked response that ``matches`` and is not replayed yet."""
        found = []
        for replayed in self.replayed.values():
            seen = replayed.seen
            for index, meta in enumerate(replayed.entry.outputs):
                if index not in seen and matches(meta):
                    found.append((replayed, index))
                    break
        return found

    def _mark(self, candidates: list[tuple[Replayed, int]], position: int) -> None:
        """The item at ``position`` counts as replayed in each candidate; nothing is judged."""
        for replayed, index in candidates:
            replayed.seen.add(index)
            self.matched.setdefault(position, (replayed, index))
            self._mark_reasoning_before(replayed, position, index)

    def _mark_reasoning_before(self, replayed: Replayed, position: int, index: int) -> None:
        items, outputs, seen = self.items, replayed.entry.outputs, replayed.seen
        back = 1
        while (
            position - back >= 0
            and index - back >= 0
            and items[position - back].type == "reasoning"
            and outputs[index - back].type == "reasoning"
            and index - back not in seen
            and position - back not in self.matched
        ):
            seen.add(index - back)
            self.matched[position - back] = (replayed, index - back)
            back += 1

    def pairs(self) -> list[tuple[str, str]]:
        """Reasoning pairs the API refuses, among items replayed under the server ids of a stored response (the API
        finds them by id): an item the response returned right after a reasoning item, that reasoning absent from the
        replay (present without its id is not absent); a reasoning item not followed by the item the response returned
        after it, or by nothing (a turn stored after its reasoning was cut). (item id, what is missing)."""
        broken: list[tuple[str, str]] = []
        items = self.items
        sent: set[str | None] | None = None  # the ids the input carries, on first need
        for position, (replayed, index) in self.own.items():
            entry = replayed.entry
            if not entry.store:
                continue  # ids of an unstored response name nothing the API holds: it pairs nothing
            outputs = entry.outputs
            returned = outputs[index]
            if returned.type == "reasoning":
                after = index + 1
                if after < len(outputs):
                    expected = outputs[after].id
                    if expected is None or expected == returned.id:
                        continue  # nothing to tell the follower by (a server that repeats an id pairs nothing by it)
                    if position + 1 < len(items) and items[position + 1].id == expected:
                        continue
                elif len(outputs) >= MAX_OUTPUT_ITEMS:
                    continue  # its follower may be past the items kept
                broken.append((returned.id or returned.type, "follower"))
            elif index > 0 and outputs[index - 1].type == "reasoning" and index - 1 not in replayed.seen:
                if sent is None:
                    sent = {meta.id for meta in items}
                if outputs[index - 1].id not in sent:
                    broken.append((returned.id or returned.type, "reasoning"))
        return broken

    def by_position(self) -> None:
        """Items left unrecognised (messages aside) that stand right after (or before) an item recognised as output
        ``i`` of a linked response, with the type of output ``i + 1`` (or ``i - 1``): that output, under ids or call
        ids the client rewrote. Marked replayed only."""
        items, matched = self.items, self.matched
        for step in (1, -1):
            # From each recognised item, onwards (or backwards) while the next item stands where the next output does.
            for start in sorted(matched, reverse=step == -1):
                replayed, index = matched[start]
                outputs = replayed.entry.outputs
                position = start + step
                while 0 <= position < len(items) and position not in matched and _by_position(items[position]):
                    index += step
                    if not 0 <= index < len(outputs) or index in replayed.seen:
                        break
                    if outputs[index].type != items[position].type:
                        break
                    replayed.seen.add(index)
                    matched[position] = (replayed, index)
                    position += step


def _by_position(meta: ItemMeta) -> bool:
    """An input item that may be recognised by where it stands: a copy of a response's output other than a message (a
    message is known by its text: one whose text matches nothing was not replayed as returned), and not an item only
    the app writes."""
    return meta.type not in _NOT_BY_POSITION


_NOT_BY_POSITION = APP_OUTPUTS | {"message", "item_reference"}


def _replays(req: RequestFacts, ledger: LedgerView, analysis: Analysis, found: list[tuple[Place, ...]]) -> None:
    """Match replayed items to the responses that returned them; note modified payloads, lost phases and broken
    reasoning pairs."""
    lookups = req.lookups
    if not lookups:
        return
    matcher = _Matcher(req, analysis)
    texts: list[tuple[Lookup, tuple[Place, ...]]] = []
    later: list[tuple[Lookup, tuple[Place, ...]]] = []
    renamed: list[Lookup] = []  # assistant messages under ids the ledger does not know
    items = req.input_items
    for lookup, places in zip(lookups, found, strict=True):
        if type(lookup.key) is int:
            texts.append((lookup, places))  # decided once the ids and calls have linked what they link
            continue
        one = _one_response(places) if places else None
        if one is not None:
            matcher.identity(lookup, one)
        elif not places and lookup.fallback is None and items[lookup.position].role == "assistant":
            renamed.append(lookup)
        else:
            later.append((lookup, places))
    if renamed:
        texts.extend(_by_text(req, ledger, renamed))
    for lookup, places in texts:
        matcher.text(lookup, places)
    if matcher.replayed:  # fallbacks only clear items of linked responses: with none, nothing to do (no hashing)
        for lookup, places in later:
            matcher.fallback(lookup, places)
        matcher.by_position()
    analysis.replayed = list(matcher.replayed.values())
    _own_copies(req, analysis.replayed)
    if matcher.own:
        analysis.broken_pairs = matcher.pairs()
    matched = matcher.matched
    for position, (replayed, _) in matched.items():
        replayed.last = max(replayed.last, position)
    _boundaries(req, analysis, [(p, matched[p][0].entry) for p in _payloads(req) if p in matched])


def _by_text(req: RequestFacts, ledger: LedgerView, renamed: list[Lookup]) -> list[tuple[Lookup, tuple[Place, ...]]]:
    """Assistant messages under ids the ledger does not know, looked up by their text as messages without an id are
    (their text is read only now: an id the ledger knows is all that is needed of the others)."""
    reader = req.texts
    if reader is None:
        return []
    keyed = [lookup._replace(key=text) for lookup in renamed if (text := reader(lookup.position)) is not None]
    if not keyed:
        return []
    return list(zip(keyed, ledger.places([lookup.key for lookup in keyed]), strict=True))


def _continued(req: RequestFacts, ledger: LedgerView, analysis: Analysis) -> None:
    """A replay made of the app messages one recorded turn was given, in order, then one new user message, and
    nothing else: it continues that turn without any of what it returned. Only one turn given exactly those messages
    counts (an opening many conversations share names several)."""
    wanted = req.continues
    if wanted is None:
        return
    (places,) = ledger.places([wanted])
    entries = {place[0].response_id: place[0] for place in places if place[0].given_messages == wanted}
    if len(entries) == 1:
        (analysis.continued,) = entries.values()


# The providers whose reasoning context rule is the API's: a compatible server keeps the rule that every replayed
# reasoning item is seen.
_RENDERING_PROVIDERS = frozenset({PROVIDER_OPENAI, PROVIDER_AZURE_OPENAI})


def _earlier_turns(req: RequestFacts, analysis: Analysis) -> None:
    """Under an effective `current_turn`, the replayed responses of earlier, finished turns (every item of them
    before the latest user message the app wrote): the API renders none of their reasoning back, so reasoning of
    theirs left out loses nothing."""
    if req.provider not in _RENDERING_PROVIDERS:
        return
    context = analysis.reasoning_context = effective_context(req, analysis.parent)
    start = latest_user_message(req) if context == CURRENT_TURN else None
    if start is None:
        return
    earlier = [r for r in analysis.replayed if 0 <= r.last < start]
    analysis.earlier_turns = frozenset(r.entry.response_id for r in earlier)
    analysis.not_replayed = sum(1 for r in earlier for m in r.missing() if m.type == "reasoning")


def _payloads(req: RequestFacts) -> list[int]:
    """Positions of the input's encrypted payloads the API ties to whom they were minted for: reasoning and
    compaction items carrying `encrypted_content`."""
    return [i for i, meta in enumerate(req.input_items) if meta.encrypted and meta.type in _MINTED]


_MINTED = frozenset({"reasoning", "compaction"})


def _minted_by_id(req: RequestFacts, found: list[tuple[Place, ...]]) -> list[tuple[int, Entry]]:
    """The response that returned each payload replayed beside server state (found by its id alone: one response)."""
    payloads = set(_payloads(req))
    minted: list[tuple[int, Entry]] = []
    for lookup, places in zip(req.lookups, found, strict=True):
        if lookup.position in payloads and type(lookup.key) is str and places:
            one = _one_response(places)
            if one is not None:
                minted.append((lookup.position, one[0][0]))
    return minted


def _boundaries(req: RequestFacts, analysis: Analysis, minted: list[tuple[int, Entry]]) -> None:
    """The boundaries the replayed payloads crossed since they were minted (``boundaries.crossed``), and the payloads
    that crossed one a request shows before it is sent."""
    found: dict[str, None] = dict.fromkeys(analysis.crossed)
    for position, entry in minted:
        kinds = crossed(req.model, req.identity, (entry,))
        found.update(dict.fromkeys(kinds))
        if BEFORE_SENDING.intersection(kinds):
            meta = req.input_items[position]
            analysis.foreign.append(meta.id or meta.type)
    analysis.crossed = list(found)


def _first_positions(items: tuple[ItemMeta, ...]) -> dict[int, int]:
    """Where each app message of the input first stands, by fingerprint."""
    first: dict[int, int] = {}
    for position, meta in enumerate(items):
        if meta.fingerprint is not None and meta.role in APP_ROLES:
            first.setdefault(meta.fingerprint, position)
    return first


def _own_copies(req: RequestFacts, replayed: list[Replayed]) -> None:
    """User messages a response returned (`responses.compact` keeps them beside its compaction item) count as
    replayed when the app sends its own copy of their text."""
    sent: set[int | None] | None = None
    for link in replayed:
        for index, meta in enumerate(link.entry.outputs):
            if meta.role != "user" or index in link.seen or meta.fingerprint is None:
                continue
            if sent is None:
                sent = {m.fingerprint for m in req.input_items if m.role == "user"}
            if meta.fingerprint in sent:
                link.seen.add(index)


def _tools(req: RequestFacts, parent: Entry | None, analysis: Analysis, replay: bool, parent_known: bool) -> None:
    """One pass over the input: calls, outputs, their order, duplicates; then the parent's pending calls.

    An output answers any item with its `call_id`, in the input or in the server-side state the request continues (the
    parent's outputs, and the calls its state holds: ``Entry.held_calls``), whatever that item's type (the API takes a
    `function_call_output` for a client `tool_search_call`); an item type the code does not know is never counted as
    a call that needs an answer. An output whose call is in neither is an orphan only where that state is known whole
    (``Entry.held_partial`` clear) and the input has no item reference the ledger could not resolve: else nothing is
    said of it. ``parent_known``: False when the request continues a
    response or conversation the ledger does not know (evicted, made by another process, a shared ledger out of reach):
    an output may answer one of its calls, so none is called an orphan. An output the state already holds is noted as
    sent again. What the input itself shows rests on no ledger entry; only an item reference resolved by a shared
    entry, and the parent's calls, rest on one."""
    # In a replay the API holds no parent: the calls must be in the input itself.
    server_parent = parent if not replay else None
    if not req.tool_positions and server_parent is None:
        return  # no tool item and no parent's pending calls: nothing to pair (most calls)
    calls: dict[str, int] = {}  # call items of known types, first position
    answerable: set[str] = set()  # call_ids of every input item that is not an output
    awaiting: list[str] = []  # calls the app executes, in order
    outputs: dict[str, int] = {}
    tools = analysis.tools
    resolved, resolved_shared = analysis.resolved, analysis.resolved_shared
    items = req.input_items
    whole = True  # the calls the input and the state hold are all known: no unresolved item reference, no call dropped
    for position in req.tool_positions:
        meta = resolved.get(position, items[position]) if resolved else items[position]
        call_id = meta.call_id
        kind = meta.type
        if call_id is None:
            whole = whole and kind != "item_reference"  # one the ledger could not resolve may be any call
            continue
        if kind in OUTPUT_TYPES:
            outputs.setdefault(call_id, position)
            tools.present = True
            continue
        answerable.add(call_id)
        if kind not in CALL_TYPES:
            continue
        tools.present = True
        if call_id in calls:
            tools.duplicates.append(call_id)
            continue
        calls[call_id] = position
        if position in resolved_shared:
            tools.shared.add(call_id)
        if meta.awaits:
            awaiting.append(call_id)
    pending = server_parent.pending_calls if server_parent is not None else ()
    tools.present = tools.present or bool(pending)
    if outputs and server_parent is not None:
        answerable.update(m.call_id for m in server_parent.outputs if m.call_id is not None)
        answerable.update(server_parent.held_calls)
        whole = whole and not server_parent.held_partial
        if server_parent.held_outputs and req.operation == OPERATION_CHAT:  # a turn, as for ``_duplicated``
            _resent(outputs, items, server_parent.held_outputs, tools.resent)
    parent_shared = server_parent is not None and server_parent.shared
    for call_id, position in outputs.items():
        if call_id in calls:
            if position < calls[call_id]:
                tools.before_call.append(call_id)
        elif call_id not in answerable and parent_known and whole:
            tools.orphans.append(call_id)
            if parent_shared:  # the shared parent's lack of that call
                tools.shared.add(call_id)
    tools.missing.extend(call_id for call_id in awaiting if call_id not in outputs)
    tools.missing_from_input = len(tools.missing)
    for call_id in pending:
        if call_id not in outputs and call_id not in calls:
            tools.missing.append(call_id)
            if parent_shared:
                tools.shared.add(call_id)


def _resent(outputs: dict[str, int], items: tuple[ItemMeta, ...], held: tuple[str, ...], into: dict[str, int]) -> None:
    """Outputs the app alone writes (never located by the ledger) whose call the state already holds an output for:
    the same answer sent twice, by type. (An output a response returned is found by its call, with the other items
    the state holds.)"""
    answered = set(held)
    for call_id, position in outputs.items():
        kind = items[position].type
        if call_id in answered and kind in APP_OUTPUTS:
            into[kind] = into.get(kind, 0) + 1


def _state(parent: Entry, ledger: LedgerView) -> tuple[set[str], set[int]]:
    """The responses server-side state holds (the parent and its known ancestors) and the fingerprints of the app
    messages they were sent last (a few per response)."""
    responses: set[str] = set()
    messages: set[int] = set()
    entry: Entry | None = parent
    for _ in range(MAX_ANCESTORS):
        if entry is None or entry.response_id in responses:
            break
        responses.add(entry.response_id)
        messages.update(entry.input_messages)
        entry = ledger.get(entry.parent_id) if entry.parent_id is not None else None
    return responses, messages


def _duplicated(
    req: RequestFacts, ledger: LedgerView, parent: Entry, analysis: Analysis, found: list[tuple[Place, ...]]
) -> dict[str, int]:
    """Items a request continuing server state sends although that state already holds them, by type.

    An output item of the chain, known by its own identity (id, call or text), counts on its own; a user message only
    inside a run of at least two consecutive items the state holds (the previous turn sent again, not a user typing
    "yes" twice). System and developer messages are left out: apps send their instructions that way every turn. A
    re-sent assistant message that lost its `phase` is noted too: that copy reads as a final answer.

    The API refuses some of them outright ("Duplicate item found"): beside a conversation, an item under the id the
    conversation holds it by (unless the app deleted it from the conversation since); beside `previous_response_id`,
    an item reference to an output of the chain. Those are noted as duplicate ids, not counted here (an item re-sent
    under its id beside `previous_response_id` is accepted, and counted)."""
    responses, messages = _state(parent, ledger)
    conversation = req.conversation_id if req.state_mode == CONVERSATION else None
    held: dict[int, str] = {}
    refused: list[tuple[str, bool]] = []  # (id, known from a shared entry only)
    for lookup, places in zip(req.lookups, found, strict=True):
        for entry, index in places:
            if entry.response_id in responses or (conversation is not None and entry.conversation_id == conversation):
                sent = req.input_items[lookup.position]
                if type(lookup.key) is str and (conversation is not None or sent.type == "item_reference"):
                    if conversation is None or ledger.get(deleted_item_id(conversation, lookup.key)) is None:
                        refused.append((lookup.key, entry.shared))
                    break
                returned = entry.outputs[index]
                held[lookup.position] = returned.type
                if returned.phase is not None and sent.type != "item_reference" and sent.phase != returned.phase:
                    analysis.phase_dropped.append(returned.id or sent.type)  # a copy that reads otherwise
                break
    if refused:
        in_input = bool(analysis.duplicate_ids)
        analysis.duplicate_ids.extend(item_id for item_id, _ in refused if item_id not in analysis.duplicate_ids)
        analysis.duplicate_held_by.append(_CONVERSATION if conversation is not None else _PREVIOUS_RESPONSE)
        analysis.duplicates_shared = not in_input and all(shared for _, shared in refused)
    counts: dict[str, int] = {}
    run: list[tuple[str, bool]] = []  # (type, whether an app message) of consecutive items the state holds
    for position, meta in enumerate((*req.input_items, None)):
        if meta is not None and meta.type == "message" and meta.role in APP_ROLES and meta.role != "user":
            continue  # system and developer messages are often sent each turn: they neither count nor part runs
        held_type = held.get(position)
        if held_type is None and meta is not None and meta.role == "user" and meta.fingerprint in messages:
            held_type = "message"
            run.append((held_type, True))
            continue
        if held_type is not None:
            run.append((held_type, False))
            continue
        for kind, app_message in run:
            if not app_message or len(run) >= 2:
                counts[kind] = counts.get(kind, 0) + 1
        run = []
    return counts


# Where the API finds the other copy of a duplicate id (`openai_responses.duplicate.held_by`).
_INPUT, _CONVERSATION, _PREVIOUS_RESPONSE = "input", "conversation", "previous_response"
# Operations whose `input` the API checks item by item (a turn, its token count, a compaction).
_SENDS_INPUT = frozenset({OPERATION_CHAT, OPERATION_COMPACT, "count_input_tokens"})


def _item_ids(req: RequestFacts, analysis: Analysis, found: list[tuple[Place, ...]]) -> None:
    """The ids of the input against the API's rules: each at most once, each of its type's shape."""
    ids = own_ids(req.lookups)
    if not ids:
        return
    repeated = input_duplicates(ids, found)
    if repeated:
        analysis.duplicate_ids.extend(repeated)
        analysis.duplicate_held_by.append(_INPUT)
    analysis.malformed_ids = malformed(ids, req.lookups, req.input_items, found)


def _places(req: RequestFacts, ledger: LedgerView) -> list[tuple[Place, ...]]:
    """Where the ledger knows each input item from, by its lookup, for a request whose input the API reads. A single
    turn's app messages were returned by no response: its ids are judged without asking."""
    lookups = req.lookups
    if not lookups or req.operation not in _SENDS_INPUT:
        return []
    if req.state_mode == SINGLE_TURN:
        return [NOWHERE] * len(lookups)
    return ledger.places([lookup.key for lookup in lookups])


def analyse(req: RequestFacts, ledger: LedgerView) -> Analysis:
    """The request's relation to what the ledger remembers."""
    analysis = Analysis()
    if req.target_response_id is not None:
        analysis.parent = ledger.get(req.target_response_id)
        return analysis
    if req.state_mode == SERVER_CHAIN and req.previous_response_id is not None:
        analysis.parent = ledger.get(req.previous_response_id)
    elif req.state_mode == CONVERSATION and req.conversation_id is not None:
        analysis.parent = parent = ledger.latest_in_conversation(req.conversation_id)
        if req.truncation == "auto" and parent is not None:  # the only call that compares the state's numbers
            deleted = ledger.get(items_deleted_id(req.conversation_id))
            analysis.items_deleted = deleted is not None and deleted.parent_id == parent.response_id
    elif req.conversation_id is not None and _writes(req):
        analysis.written_after = ledger.latest_in_conversation(req.conversation_id)
    replay = req.state_mode == CLIENT_REPLAY
    found = _places(req, ledger)
    if found:
        _item_ids(req, analysis, found)
    if replay:
        _replays(req, ledger, analysis, found)
        latest = analysis.latest_replayed
        analysis.parent = latest.entry if latest is not None else None
        if req.operation == OPERATION_CHAT and req.continues is not None:
            _continued(req, ledger, analysis)
        if analysis.replayed:
            _earlier_turns(req, analysis)
    elif (
        analysis.parent is not None
        and req.operation == OPERATION_CHAT
        and (req.lookups or req.app_messages >= 2)
        and req.state_mode in (SERVER_CHAIN, CONVERSATION)
    ):
        analysis.duplicated = _duplicated(req, ledger, analysis.parent, analysis, found)
    continues = req.state_mode in (SERVER_CHAIN, CONVERSATION)
    analysis.tools.from_latest = req.state_mode == CONVERSATION and analysis.parent is not None
    _tools(req, analysis.parent, analysis, replay, parent_known=analysis.parent is not None or not continues)
    resent = analysis.tools.resent
    if resent:
        duplicated = analysis.duplicated
        for kind, count in resent.items():
            duplicated[kind] = duplicated.get(kind, 0) + count
    if replay and req.operation == OPERATION_CHAT:
        analysis.outputs = tool_outputs(req, analysis.parent)
    if found and not replay and req.operation == OPERATION_CHAT and (req.encrypted_input_count or req.compaction):
        _boundaries(req, analysis, _minted_by_id(req, found))  # payloads replayed beside server state
    return analysis


# Conversations API operations that write items: remembered against the conversation's latest entry.
_WRITES_ITEMS = frozenset({OPERATION_CREATE_CONVERSATION_ITEMS})


def _writes(req: RequestFacts) -> bool:
    """Whether the call changes what a conversation holds after its latest response (items written or deleted)."""
    if req.operation == OPERATION_DELETE_CONVERSATION_ITEM:
        return True
    return bool(req.input_items) and req.operation in _WRITES_ITEMS
