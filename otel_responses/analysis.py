"""Derived facts of a request against the ledger: which earlier response it continues, what of it is
missing or changed, and how its tool calls pair up. Linear in the number of input items; pure apart
from reading the ledger."""

from __future__ import annotations

from dataclasses import dataclass, field

from .facts import CLIENT_REPLAY, CONVERSATION, SERVER_CHAIN, RequestFacts
from .items import CALL_OUTPUT_TYPES, OUTPUT_CALL_TYPES, ItemMeta
from .ledger import Entry, LedgerView

# Output items a replay must carry back (hosted tool calls such as web searches need not be).
REPLAYED_TYPES = frozenset({"message", "reasoning", "compaction", *CALL_OUTPUT_TYPES})


@dataclass(slots=True)
class Link:
    """An earlier response whose output items appear in a replay."""

    entry: Entry
    app_messages_before: int  # app messages between the latest compaction item (or the start) and this link
    compactions_before: int
    seen: set[int] = field(default_factory=set)

    def missing(self) -> list[ItemMeta]:
        """Output items of the response that the replay does not carry."""
        return [m for i, m in enumerate(self.entry.outputs) if i not in self.seen and m.type in REPLAYED_TYPES]


@dataclass(slots=True)
class Tools:
    """How client tool calls and outputs pair up across the input and the parent's pending calls."""

    present: bool = False
    orphans: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    before_call: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Analysis:
    """Everything the request-side checks read."""

    parent: Entry | None = None
    links: list[Link] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    phase_dropped: list[str] = field(default_factory=list)
    tools: Tools = field(default_factory=Tools)
    resolved: dict[int, ItemMeta] = field(default_factory=dict)  # item references, by input position

    @property
    def latest_link(self) -> Link | None:
        return max(self.links, key=lambda link: link.entry.sequence) if self.links else None


def _links(req: RequestFacts, ledger: LedgerView, analysis: Analysis) -> None:
    """Match replayed items to the responses that returned them; note modified payloads and lost phases."""
    lookups = req.lookups
    if not lookups:
        return
    located = ledger.locate([lookup.key for lookup in lookups])
    items = req.input_items
    links: dict[str, Link] = {}
    for lookup, found in zip(lookups, located, strict=True):
        if found is None:
            continue
        entry, index = found
        link = links.get(entry.response_id)
        if link is None:
            link = Link(entry, lookup.app_messages_before, lookup.compactions_before)
            links[entry.response_id] = link
        link.seen.add(index)
        position = lookup.position
        sent, returned = items[position], entry.outputs[index]
        if sent.type == "item_reference":  # the API resolves it to the item as returned, phase and all
            analysis.resolved[position] = returned
            continue
        if returned.encrypted and (
            sent.fingerprint != returned.fingerprint if sent.encrypted else not entry.store  # stripped, unresolvable
        ):
            analysis.modified.append(returned.id or sent.type)
        if returned.phase is not None and sent.phase != returned.phase:
            analysis.phase_dropped.append(returned.id or sent.type)
    analysis.links = list(links.values())


def _tools(req: RequestFacts, pending: tuple[str, ...], analysis: Analysis, parent_known: bool) -> None:
    """One pass over the input: calls, outputs, their order, duplicates; then the parent's pending calls.

    ``parent_known``: False when the request continues a response or conversation the ledger does not know
    (evicted, made by another process, a shared ledger out of reach): an output may answer one of its calls,
    so none is called an orphan."""
    calls: dict[str, int] = {}
    outputs: dict[str, int] = {}
    tools = analysis.tools
    resolved = analysis.resolved
    items = req.input_items
    for position in req.tool_positions:
        meta = resolved.get(position, items[position]) if resolved else items[position]
        if meta.call_id is None:
            continue
        if meta.type in CALL_OUTPUT_TYPES:
            if meta.call_id in calls:
                tools.duplicates.append(meta.call_id)
            else:
                calls[meta.call_id] = position
            tools.present = True
        elif meta.type in OUTPUT_CALL_TYPES:
            outputs.setdefault(meta.call_id, position)
            tools.present = True
    pending_set = set(pending)
    tools.present = tools.present or bool(pending_set)
    for call_id, position in outputs.items():
        if call_id in calls:
            if position < calls[call_id]:
                tools.before_call.append(call_id)
        elif call_id not in pending_set and parent_known:
            tools.orphans.append(call_id)
    tools.missing.extend(call_id for call_id in calls if call_id not in outputs)
    tools.missing.extend(call_id for call_id in pending if call_id not in outputs)


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
    if req.state_mode == CLIENT_REPLAY:
        _links(req, ledger, analysis)
        latest = analysis.latest_link
        analysis.parent = latest.entry if latest is not None else None
        pending: tuple[str, ...] = ()
    else:
        pending = analysis.parent.pending_calls if analysis.parent is not None else ()
    continues = req.state_mode in (SERVER_CHAIN, CONVERSATION)
    _tools(req, pending, analysis, parent_known=analysis.parent is not None or not continues)
    return analysis
