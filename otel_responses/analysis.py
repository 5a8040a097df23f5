"""Derived facts of a request against the ledger: which earlier response it continues, what of it is
missing, changed or sent again, and how its tool calls pair up. Linear in the number of input items; pure
apart from reading the ledger."""

from __future__ import annotations

from dataclasses import dataclass, field

from .attributes import OPERATION_CHAT
from .facts import CLIENT_REPLAY, CONVERSATION, SERVER_CHAIN, Lookup, RequestFacts
from .items import APP_ROLES, CALL_TYPES, OUTPUT_TYPES, ItemMeta, reshaped
from .ledger import Entry, LedgerView

# Output items a replay must carry back: messages, reasoning, compaction items and the calls the app answered
# (hosted tool calls such as web searches need not be).
_ALWAYS_REPLAYED = frozenset({"message", "reasoning", "compaction"})
# How far back a chain is followed to tell what server-side state already holds.
MAX_ANCESTORS = 16


@dataclass(slots=True)
class Link:
    """An earlier response whose output items appear in a replay."""

    entry: Entry
    app_messages_before: int  # distinct app messages between the latest compaction item (or the start) and it
    compactions_before: int
    seen: set[int] = field(default_factory=set)

    def missing(self) -> list[ItemMeta]:
        """Output items of the response that the replay does not carry."""
        return [
            m
            for i, m in enumerate(self.entry.outputs)
            if i not in self.seen and (m.type in _ALWAYS_REPLAYED or m.awaits)
        ]


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


@dataclass(slots=True)
class Analysis:
    """Everything the request-side checks read."""

    parent: Entry | None = None
    links: list[Link] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    phase_dropped: list[str] = field(default_factory=list)
    tools: Tools = field(default_factory=Tools)
    resolved: dict[int, ItemMeta] = field(default_factory=dict)  # item references, by input position
    duplicated: dict[str, int] = field(default_factory=dict)  # items server state already holds, by type
    # The tool pairing rests on an entry read from a shared store (the parent's pending calls, an item reference
    # resolved by it): strict mode does not refuse on it.
    shared: bool = False

    @property
    def latest_link(self) -> Link | None:
        return max(self.links, key=lambda link: link.entry.sequence) if self.links else None


def _payload_changed(sent: ItemMeta, entry: Entry, index: int) -> bool:
    """A replayed opaque payload that cannot be one the API returned: another length or alphabet than every
    copy seen (a fresh encryption the instrumentation did not see keeps both), or stripped from an item of an
    unstored response (the API cannot find it by id)."""
    if not sent.encrypted:
        return not entry.store
    if sent.shape is None:
        return False
    return all(reshaped(sent.shape, shape) for shape in entry.shapes(index))


def _links(req: RequestFacts, ledger: LedgerView, analysis: Analysis) -> None:
    """Match replayed items to the responses that returned them; note modified payloads and lost phases."""
    lookups = req.lookups
    if not lookups:
        return
    located = ledger.locate([lookup.key for lookup in lookups])
    items = req.input_items
    links: dict[str, Link] = {}
    prompts: dict[int, int] | None = None  # app message fingerprint -> its first position, built on first need
    said: dict[int, tuple[Entry, int]] | None = None  # texts of the responses found by id or call, built on need
    for lookup, found in zip(lookups, located, strict=True):
        if found is None:
            continue
        entry, index = found
        if type(lookup.key) is int:
            if said is None:
                said = _texts_of_known(lookups, located)
            found = said.get(lookup.key, found)  # the text of a response the replay carries by id or call: its own
            entry, index = found
            if entry.input_messages:
                if prompts is None:
                    prompts = _first_positions(items)
                if not _asked_before(entry, lookup.position, prompts):
                    continue
        link = links.get(entry.response_id)
        if link is None:
            link = Link(entry, lookup.app_messages_before, lookup.compactions_before)
            links[entry.response_id] = link
        position = lookup.position
        _match(analysis, link, items[position], position, index)
        # Reasoning items replayed without their id (the Agents SDK's `reasoning_item_id_policy="omit"`) are
        # known by where they stand: right before the item they preceded in the response.
        back = 1
        while (
            position - back >= 0
            and index - back >= 0
            and items[position - back].type == "reasoning"
            and items[position - back].id is None
            and entry.outputs[index - back].type == "reasoning"
            and index - back not in link.seen
        ):
            _match(analysis, link, items[position - back], position - back, index - back)
            back += 1
    analysis.links = list(links.values())
    _own_copies(req, analysis.links)


def _texts_of_known(
    lookups: tuple[Lookup, ...], located: list[tuple[Entry, int] | None]
) -> dict[int, tuple[Entry, int]]:
    """Assistant texts of the responses the replay carries items of by id or by call: a text replayed alone is theirs
    rather than another conversation's newer response that said the same words (scripted or short answers repeat)."""
    texts: dict[int, tuple[Entry, int]] = {}
    seen: set[str] = set()
    for lookup, found in zip(lookups, located, strict=True):
        if found is None or type(lookup.key) is int or found[0].response_id in seen:
            continue
        entry = found[0]
        seen.add(entry.response_id)
        for index, meta in enumerate(entry.outputs):
            if meta.role == "assistant" and meta.fingerprint is not None:
                texts.setdefault(meta.fingerprint, (entry, index))
    return texts


def _first_positions(items: tuple[ItemMeta, ...]) -> dict[int, int]:
    """Where each app message of the input first stands, by fingerprint."""
    first: dict[int, int] = {}
    for position, meta in enumerate(items):
        if meta.fingerprint is not None and meta.role in APP_ROLES:
            first.setdefault(meta.fingerprint, position)
    return first


def _asked_before(entry: Entry, position: int, prompts: dict[int, int]) -> bool:
    """A response found by its text alone is the one the replay continues only if one of the app messages it was sent
    stands before that text: a short answer ("Sure!") is returned to many conversations, and another one's response
    would make this replay look incomplete."""
    return any(prompts.get(fingerprint, position) < position for fingerprint in entry.input_messages)


def _own_copies(req: RequestFacts, links: list[Link]) -> None:
    """User messages a response returned (`responses.compact` keeps them beside its compaction item) count as
    replayed when the app sends its own copy of their text."""
    sent: set[int | None] | None = None
    for link in links:
        for index, meta in enumerate(link.entry.outputs):
            if meta.role != "user" or index in link.seen or meta.fingerprint is None:
                continue
            if sent is None:
                sent = {m.fingerprint for m in req.input_items if m.role == "user"}
            if meta.fingerprint in sent:
                link.seen.add(index)


def _match(analysis: Analysis, link: Link, sent: ItemMeta, position: int, index: int) -> None:
    """A replayed item recognised as output ``index`` of the link's response: what it kept and lost of it."""
    entry = link.entry
    link.seen.add(index)
    returned = entry.outputs[index]
    if sent.type == "item_reference":  # the API resolves it to the item as returned, phase and all
        analysis.resolved[position] = returned
        analysis.shared = analysis.shared or entry.shared
        return
    if returned.encrypted and _payload_changed(sent, entry, index):
        analysis.modified.append(returned.id or sent.type)
    if returned.phase is not None and sent.phase != returned.phase:
        analysis.phase_dropped.append(returned.id or sent.type)


def _tools(req: RequestFacts, parent: Entry | None, analysis: Analysis, replay: bool, parent_known: bool) -> None:
    """One pass over the input: calls, outputs, their order, duplicates; then the parent's pending calls.

    An output answers any item with its `call_id`, in the input or in the parent, whatever that item's type (the
    API takes a `function_call_output` for a client `tool_search_call`); an item type the code does not know is
    never counted as a call that needs an answer. ``parent_known``: False when the request continues a response
    or conversation the ledger does not know (evicted, made by another process, a shared ledger out of reach):
    an output may answer one of its calls, so none is called an orphan."""
    # In a replay the API holds no parent: the calls must be in the input itself.
    server_parent = parent if not replay else None
    if not req.tool_positions and server_parent is None:
        return  # no tool item and no parent's pending calls: nothing to pair (most calls)
    calls: dict[str, int] = {}  # call items of known types, first position
    answerable: set[str] = set()  # call_ids of every input item that is not an output
    awaiting: list[str] = []  # calls the app executes, in order
    outputs: dict[str, int] = {}
    tools = analysis.tools
    resolved = analysis.resolved
    items = req.input_items
    for position in req.tool_positions:
        meta = resolved.get(position, items[position]) if resolved else items[position]
        call_id = meta.call_id
        if call_id is None:
            continue
        kind = meta.type
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
        if meta.awaits:
            awaiting.append(call_id)
    pending = server_parent.pending_calls if server_parent is not None else ()
    tools.present = tools.present or bool(pending)
    if outputs and server_parent is not None:
        answerable.update(m.call_id for m in server_parent.outputs if m.call_id is not None)
    for call_id, position in outputs.items():
        if call_id in calls:
            if position < calls[call_id]:
                tools.before_call.append(call_id)
        elif call_id not in answerable and parent_known:
            tools.orphans.append(call_id)
    tools.missing.extend(call_id for call_id in awaiting if call_id not in outputs)
    tools.missing_from_input = len(tools.missing)
    tools.missing.extend(call_id for call_id in pending if call_id not in outputs and call_id not in calls)


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


def _duplicated(req: RequestFacts, ledger: LedgerView, parent: Entry, analysis: Analysis) -> dict[str, int]:
    """Items a request continuing server state sends although that state already holds them, by type.

    An output item of the chain (by id, call or text) counts on its own; a user message only inside a run of at
    least two consecutive items the state holds (the previous turn sent again, not a user typing "yes" twice).
    System and developer messages are left out: apps send their instructions that way every turn. A re-sent
    assistant message that lost its `phase` is noted too: that copy reads as a final answer."""
    responses, messages = _state(parent, ledger)
    conversation = req.conversation_id if req.state_mode == CONVERSATION else None
    held: dict[int, str] = {}
    if req.lookups:
        located = ledger.locate([lookup.key for lookup in req.lookups])
        for lookup, found in zip(req.lookups, located, strict=True):
            if found is None:
                continue
            entry, index = found
            if entry.response_id in responses or (conversation is not None and entry.conversation_id == conversation):
                returned = entry.outputs[index]
                held[lookup.position] = returned.type
                sent = req.input_items[lookup.position]
                if returned.phase is not None and sent.type != "item_reference" and sent.phase != returned.phase:
                    analysis.phase_dropped.append(returned.id or sent.type)  # a copy that reads otherwise
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


def analyse(req: RequestFacts, ledger: LedgerView) -> Analysis:
    """The request's relation to what the ledger remembers."""
    analysis = Analysis()
    if req.target_response_id is not None:
        analysis.parent = ledger.get(req.target_response_id)
        return analysis
    if req.state_mode == SERVER_CHAIN and req.previous_response_id is not None:
        analysis.parent = ledger.get(req.previous_response_id)
    elif req.state_mode == CONVERSATION and req.conversation_id is not None:
        analysis.parent = ledger.latest_in_conversation(req.conversation_id)
    replay = req.state_mode == CLIENT_REPLAY
    if replay:
        _links(req, ledger, analysis)
        latest = analysis.latest_link
        analysis.parent = latest.entry if latest is not None else None
    elif (
        analysis.parent is not None
        and req.operation == OPERATION_CHAT
        and (req.lookups or req.app_messages >= 2)
        and req.state_mode in (SERVER_CHAIN, CONVERSATION)
    ):
        analysis.duplicated = _duplicated(req, ledger, analysis.parent, analysis)
    continues = req.state_mode in (SERVER_CHAIN, CONVERSATION)
    if continues and analysis.parent is not None and analysis.parent.shared:
        analysis.shared = True
    analysis.tools.from_latest = req.state_mode == CONVERSATION and analysis.parent is not None
    _tools(req, analysis.parent, analysis, replay, parent_known=analysis.parent is not None or not continues)
    return analysis
