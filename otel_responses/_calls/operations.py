"""Every wrapped SDK method as an operation: how its arguments become request facts, how its result becomes
response facts, and what it tells the ledger. The wrappers stay generic; this table is the one place that
knows the Responses and Conversations surface."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from .._analysis.facts import (
    CONVERSATION,
    SERVER_CHAIN,
    SINGLE_TURN,
    RequestFacts,
    ResponseFacts,
    conversation_facts,
    effective_store,
    request_facts,
    response_facts,
    target_facts,
)
from .._analysis.held import held_after
from .._analysis.reasoning_context import latest_user_message
from .._items import CALL_TYPES, OUTPUT_TYPES, ItemMeta, elements, is_sequence, item_meta
from ..attributes import OPERATION_CHAT, OPERATION_COMPACT, OPERATION_DELETE_CONVERSATION_ITEM, OPERATION_FETCH
from ..config import Settings
from ..ledger import CallLedger, Entry, deleted_item_id, items_deleted_id, outputs_to_keep

if TYPE_CHECKING:
    from .._analysis.analysis import Analysis
    from .._analysis.lineage import Lineage

Args = tuple[Any, ...]
FactsBuilder = Callable[[Args, Mapping[str, Any], Settings], RequestFacts]
Reader = Callable[[Any, Settings, "str | None"], "ResponseFacts | None"]


class CallState(Protocol):
    """What a call's end tells the ledger from: a :class:`~otel_responses._calls.call.Call` has all of it (so
    may a test)."""

    @property
    def ledger(self) -> CallLedger: ...
    @property
    def req(self) -> RequestFacts: ...
    @property
    def analysis(self) -> Analysis: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def lineage(self) -> Lineage: ...


Remember = Callable[[CallState, ResponseFacts], None]


@dataclass(frozen=True, slots=True)
class Operation:
    """One kind of call: its GenAI operation name, facts, result reader and ledger effect."""

    name: str
    facts: FactsBuilder
    read: Reader
    remember: Remember | None = None
    records_usage: bool = False  # token usage metric: only for calls that consume tokens


def _first(args: Args, kwargs: Mapping[str, Any], name: str) -> object:
    return args[0] if args else kwargs.get(name)


# -- facts ----------------------------------------------------------------------------------------------


def _chat_facts(name: str) -> FactsBuilder:
    def build(args: Args, kwargs: Mapping[str, Any], settings: Settings) -> RequestFacts:
        return request_facts(name, kwargs, settings)

    return build


def _target_facts(name: str) -> FactsBuilder:
    def build(args: Args, kwargs: Mapping[str, Any], settings: Settings) -> RequestFacts:
        return target_facts(name, _first(args, kwargs, "response_id"), kwargs)

    return build


def _conversation_facts(name: str, items_param: str | None = None, by_item: bool = False) -> FactsBuilder:
    """``by_item``: the method's first argument is an item id and the conversation is a keyword."""

    def build(args: Args, kwargs: Mapping[str, Any], settings: Settings) -> RequestFacts:
        if name == CREATE_CONVERSATION:
            conversation = None
        elif by_item:
            conversation = kwargs.get("conversation_id")
        else:
            conversation = _first(args, kwargs, "conversation_id")
        raw_items = kwargs.get(items_param) if items_param else None
        items = (
            tuple(item_meta(i, settings.fingerprinter) for i in elements(raw_items)) if is_sequence(raw_items) else ()
        )
        return conversation_facts(name, conversation, items, _first(args, kwargs, "item_id") if by_item else None)

    return build


# -- results --------------------------------------------------------------------------------------------


def read_response(result: Any, settings: Settings, request_id: str | None) -> ResponseFacts | None:
    return response_facts(result, settings, request_id)


def read_nothing(result: Any, settings: Settings, request_id: str | None) -> ResponseFacts | None:
    return ResponseFacts.empty(request_id)


def _read_input_tokens(result: Any, settings: Settings, request_id: str | None) -> ResponseFacts | None:
    tokens = getattr(result, "input_tokens", None)
    facts = ResponseFacts.empty(request_id)
    return replace(facts, input_tokens=tokens) if isinstance(tokens, int) else facts


def _read_conversation(result: Any, settings: Settings, request_id: str | None) -> ResponseFacts | None:
    conversation_id = getattr(result, "id", None)
    facts = ResponseFacts.empty(request_id)
    return replace(facts, conversation_id=conversation_id) if isinstance(conversation_id, str) else facts


# -- ledger effects -------------------------------------------------------------------------------------


def remember_created(call: CallState, resp: ResponseFacts) -> None:
    """A new response: remember what the next turn will need to check against, and where it sits in its lineage
    (the next turn links to this call's span)."""
    ledger, req, an, settings, lineage = call.ledger, call.req, call.analysis, call.settings, call.lineage
    if resp.response_id is None:
        return
    parent = an.parent
    parent_id = parent.response_id if parent is not None else req.previous_response_id
    kept = outputs_to_keep(resp.output_items)
    own = lineage.own
    instructed = _instructed(req, parent)
    held = held_after(parent, _continues_state(req), _sent_newest_first(req, an), resp.output_items)
    entry = Entry(
        response_id=resp.response_id,
        sequence=ledger.next_sequence(),
        store=effective_store(req, resp) and not settings.zdr,
        instructions_hash=req.instructions_hash,
        conversation_id=req.conversation_id or resp.conversation_id,
        outputs=kept,
        input_app_messages=req.app_messages,
        input_compactions=req.compactions,
        parent_id=parent_id,
        input_messages=req.last_messages,
        copies=tuple([copy for copy in resp.copies if copy[0] < len(kept)]) if resp.copies else (),
        turn=lineage.turn,
        lineage_id=lineage.of_response(resp.response_id),
        trace_id=own[0] if own is not None else None,
        span_id=own[1] if own is not None else None,
        instructed_id=instructed[0] if instructed is not None else None,
        instructed_turn=instructed[1] if instructed is not None else None,
        system_in_state=req.system_messages
        or (_continues_state(req) and parent is not None and parent.system_in_state),
        held_calls=held.calls,
        held_outputs=held.outputs,
        held_partial=held.partial,
        given_outputs=an.outputs.given,
        input_system_messages=req.system_app_messages,
        given_messages=_given_messages(req, resp, kept),
        reasoning_context=resp.reasoning_context,
        input_tokens=resp.input_tokens,
        output_tokens=resp.output_tokens,
        reasoning_held=_reasoning_held(req, parent, resp),
        reasoning_turn=_reasoning_turn(req, parent, resp),
        tools_fingerprint=req.tools_fingerprint,
        **_minted_by(req, resp),
    )
    ledger.record(entry, parent_id)


# What a response must have returned for a replay that keeps none of it to have lost something.
_ANSWERS = frozenset({"message", "reasoning"})


def _given_messages(req: RequestFacts, resp: ResponseFacts, kept: tuple[ItemMeta, ...]) -> int | None:
    """The app messages a turn was given (``Entry.given_messages``), kept only where a replay that drops all of the
    response loses something: a completed response that returned a message or reasoning (not a warm-up without output,
    nor a failed, cancelled or cut response the app may rightly retry without)."""
    if req.given is None or resp.status != "completed":
        return None
    return req.given if any(meta.type in _ANSWERS for meta in kept) else None


def _minted_by(req: RequestFacts, resp: ResponseFacts) -> dict[str, Any]:
    """What a response's payloads were minted for: the model asked for and the one that answered, and whom the
    request was made as (keyed fingerprints)."""
    found: dict[str, Any] = {"model": req.model, "resolved_model": resp.model}
    identity = req.identity
    if identity is not None:
        found.update(identity._asdict())
    return found


def _reasoning_held(req: RequestFacts, parent: Entry | None, resp: ResponseFacts) -> int | None:
    """The reasoning tokens of every response of the state this response ends: a first turn's own; a chained or
    conversation turn's added to its parent's; None where that state is not known from its start (a replay's input,
    a parent not known)."""
    own = resp.reasoning_tokens or 0
    if req.state_mode == SINGLE_TURN:
        return own
    if not _continues_state(req) or parent is None or parent.reasoning_held is None:
        return None
    return parent.reasoning_held + own


def _reasoning_turn(req: RequestFacts, parent: Entry | None, resp: ResponseFacts) -> int:
    """The reasoning tokens of this response's turn so far: its own, and its parent's turn's when the request sent no
    user message (a tool loop's next step continues the turn)."""
    own = resp.reasoning_tokens or 0
    if not _continues_state(req) or parent is None or latest_user_message(req) is not None:
        return own
    return parent.reasoning_turn + own


def _sent_newest_first(req: RequestFacts, an: Analysis) -> Iterator[ItemMeta]:
    """The request's items with a call_id (item references as they resolved), the last first."""
    items, resolved = req.input_items, an.resolved
    for position in reversed(req.tool_positions):
        yield resolved.get(position, items[position]) if resolved else items[position]


def _continues_state(req: RequestFacts) -> bool:
    """The request's context is the server-side state it continues plus its input (a replay's is its input only)."""
    return req.state_mode in (SERVER_CHAIN, CONVERSATION)


def _instructed(req: RequestFacts, parent: Entry | None) -> tuple[str, int | None] | None:
    """The latest earlier turn of the lineage that sent instructions, carried into a turn that sends none (a turn that
    sends them is its own: ``Entry.last_instructed``)."""
    if req.instructions_hash is not None or parent is None:
        return None
    return parent.last_instructed()


def _place(lineage: Lineage, response_id: str) -> dict[str, Any]:
    """An entry's lineage fields: its turn, its lineage's id, the ids of the span that made it."""
    own = lineage.own
    return {
        "turn": lineage.turn,
        "lineage_id": lineage.of_response(response_id),
        "trace_id": own[0] if own is not None else None,
        "span_id": own[1] if own is not None else None,
    }


def remember_compacted(call: CallState, resp: ResponseFacts) -> None:
    """A compacted context (`responses.compact`): the user messages it kept and its compaction item are what the
    next turn must carry. It cannot be retrieved nor continued from, and it continues nothing."""
    ledger, req, an, lineage = call.ledger, call.req, call.analysis, call.lineage
    if resp.response_id is None or not resp.output_items:
        return
    parent = an.parent
    instructed = _instructed(req, parent)
    entry = Entry(
        response_id=resp.response_id,
        sequence=ledger.next_sequence(),
        store=False,
        instructions_hash=req.instructions_hash,
        conversation_id=None,
        outputs=outputs_to_keep(resp.output_items),
        input_app_messages=req.app_messages,
        input_compactions=req.compactions,
        parent_id=parent.response_id if parent is not None else req.previous_response_id,
        input_messages=req.last_messages,
        instructed_id=instructed[0] if instructed is not None else None,
        instructed_turn=instructed[1] if instructed is not None else None,
        **_place(lineage, resp.response_id),
        **_minted_by(req, resp),
    )
    ledger.record(entry, None)


def remember_fetched(call: CallState, resp: ResponseFacts) -> None:
    """A retrieved or cancelled response we know: a background response's output arrives this way. Its calls join
    the ones its state held (``held_after`` with the entry as its own parent), so a call past the outputs' bound is
    still held, or the entry says the held calls are partial."""
    ledger, an = call.ledger, call.analysis
    entry = an.parent
    if entry is not None and resp.output_items and resp.output_items != entry.outputs:
        held = held_after(entry, True, (), resp.output_items)
        fetched = replace(
            entry,
            outputs=outputs_to_keep(resp.output_items),
            held_calls=held.calls,
            held_outputs=held.outputs,
            held_partial=held.partial,
        )
        ledger.record(fetched, None)


def remember_deleted(call: CallState, resp: ResponseFacts) -> None:
    """A deleted response can no more be chained to than an unstored one, but retrieving it is the app's own doing:
    the fact is "deleted", not "unstored". One this process never saw is remembered as deleted too (another worker
    may chain to it)."""
    ledger, req, an = call.ledger, call.req, call.analysis
    entry = an.parent
    if entry is None:
        if req.target_response_id is None:
            return
        entry = Entry(req.target_response_id, ledger.next_sequence(), True, None, None, (), 0, 0)
    ledger.record(replace(entry, deleted=True), None)


def remember_conversation_items(call: CallState, resp: ResponseFacts) -> None:
    """Items written straight into a conversation: tool outputs there answer the calls still pending in it. A
    conversation created here is remembered even without items: its first response is then turn 1 of it."""
    ledger, req = call.ledger, call.req
    conversation_id = req.conversation_id or resp.conversation_id
    created = req.operation == CREATE_CONVERSATION
    if conversation_id is None or not (req.input_items or created):
        return
    latest = None if created else call.analysis.written_after  # read with the call's analysis
    answered = {m.call_id for m in req.input_items if m.type in OUTPUT_TYPES}
    carried = tuple(
        m._replace(id=None)
        for m in (latest.outputs if latest is not None else ())
        if m.type in CALL_TYPES and m.call_id not in answered
    )
    # The server gives items written without an id new ones: the calls are known by their call_id.
    written: tuple[ItemMeta, ...] = tuple(m._replace(id=None) for m in req.input_items if m.type in CALL_TYPES)
    sequence = ledger.next_sequence()
    instructed = latest.last_instructed() if latest is not None else None
    held = held_after(latest, not created, reversed(req.input_items), ())
    entry = Entry(
        response_id=f"conversation-items:{conversation_id}:{sequence}",
        sequence=sequence,
        store=True,
        instructions_hash=latest.instructions_hash if latest is not None else None,  # what the next turn compares
        conversation_id=conversation_id,
        outputs=outputs_to_keep(carried + written),
        input_app_messages=0,
        input_compactions=0,
        parent_id=latest.response_id if latest is not None else None,
        # Items are not a turn: the next response continues the latest one (or is the first, turn 1).
        turn=0 if created else (latest.turn if latest is not None else None),
        lineage_id=conversation_id,
        trace_id=latest.trace_id if latest is not None else None,
        span_id=latest.span_id if latest is not None else None,
        written_by_app=True,
        instructed_id=instructed[0] if instructed is not None else None,
        instructed_turn=instructed[1] if instructed is not None else None,
        system_in_state=req.system_messages or (latest is not None and latest.system_in_state),
        held_calls=held.calls,
        held_outputs=held.outputs,
        held_partial=held.partial,
        # Items written hold no reasoning tokens that are known: the state's count is carried over only without any.
        reasoning_held=None
        if any(m.type == "reasoning" for m in req.input_items)
        else (0 if created else (latest.reasoning_held if latest is not None else None)),
        reasoning_turn=latest.reasoning_turn if latest is not None and latest_user_message(req) is None else 0,
    )
    ledger.record(entry, None)


def remember_conversation_item_deleted(call: CallState, resp: ResponseFacts) -> None:
    """The conversation holds the item no more: sent again under its id beside it, it is no duplicate."""
    req = call.req
    if req.conversation_id is None or req.target_item_id is None:
        return
    ledger = call.ledger
    name = deleted_item_id(req.conversation_id, req.target_item_id)
    ledger.record(Entry(name, ledger.next_sequence(), True, None, None, (), 0, 0, written_by_app=True), None)
    latest = call.analysis.written_after
    if latest is not None:  # what the conversation held after its latest response is known no more
        marker = items_deleted_id(req.conversation_id)
        deleted = Entry(
            marker,
            ledger.next_sequence(),
            True,
            None,
            None,
            (),
            0,
            0,
            parent_id=latest.response_id,
            written_by_app=True,
        )
        ledger.record(deleted, None)


# -- the table ------------------------------------------------------------------------------------------

CHAT = OPERATION_CHAT
FETCH = OPERATION_FETCH
CREATE_CONVERSATION = "create_conversation"

OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation(CHAT, _chat_facts(CHAT), read_response, remember_created, records_usage=True),
        Operation(FETCH, _target_facts(FETCH), read_response, remember_fetched),
        Operation("cancel_response", _target_facts("cancel_response"), read_response, remember_fetched),
        Operation("delete_response", _target_facts("delete_response"), read_nothing, remember_deleted),
        Operation(
            OPERATION_COMPACT, _chat_facts(OPERATION_COMPACT), read_response, remember_compacted, records_usage=True
        ),
        Operation("list_input_items", _target_facts("list_input_items"), read_nothing),
        Operation("count_input_tokens", _chat_facts("count_input_tokens"), _read_input_tokens),
        Operation(
            CREATE_CONVERSATION,
            _conversation_facts(CREATE_CONVERSATION, "items"),
            _read_conversation,
            remember_conversation_items,
        ),
        Operation("retrieve_conversation", _conversation_facts("retrieve_conversation"), read_nothing),
        Operation("update_conversation", _conversation_facts("update_conversation"), read_nothing),
        Operation("delete_conversation", _conversation_facts("delete_conversation"), read_nothing),
        Operation(
            "create_conversation_items",
            _conversation_facts("create_conversation_items", "items"),
            read_nothing,
            remember_conversation_items,
        ),
        Operation("list_conversation_items", _conversation_facts("list_conversation_items"), read_nothing),
        Operation(
            "retrieve_conversation_item", _conversation_facts("retrieve_conversation_item", by_item=True), read_nothing
        ),
        Operation(
            OPERATION_DELETE_CONVERSATION_ITEM,
            _conversation_facts(OPERATION_DELETE_CONVERSATION_ITEM, by_item=True),
            read_nothing,
            remember_conversation_item_deleted,
        ),
    )
}
