"""Facts about one call, built from the call's keyword arguments and its result. Pure: no telemetry here.

Every value held is metadata (ids, enums, counts, keyed fingerprints); payloads stay in the app's objects.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from .._fingerprint import SEQUENCE_START, Fingerprinter, next_in_sequence
from .._items import (
    APP_ROLES,
    NOT_BY_CALL,
    ItemMeta,
    elements,
    fields_of,
    is_sequence,
    item_meta,
    output_text,
    text_fingerprint,
)
from ..attributes import OUTPUT_TYPE_JSON, OUTPUT_TYPE_TEXT, PROVIDER_OPENAI
from ..ledger import MAX_INPUT_MESSAGES, Key

SERVER_CHAIN = "server_chain"
CONVERSATION = "conversation"
CLIENT_REPLAY = "client_replay"
SINGLE_TURN = "single_turn"
CONFLICT = "conflict"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
# The reason `input_transformations` gives for reasoning of an earlier, finished turn that the request's reasoning
# context does not render back: the context at work, no mismatch.
TURN_BOUNDARY = "turn_boundary"


_log = logging.getLogger(__name__)

InstructionsVersion = str | Callable[[str | None], str | None] | None


class Reading(Protocol):
    """What facts are read with (``config.Settings`` is one): the keyed fingerprinter and the instructions version
    setting."""

    @property
    def fingerprinter(self) -> Fingerprinter: ...

    @property
    def instructions_version(self) -> InstructionsVersion: ...


def resolve_version(version: InstructionsVersion, instructions: str | None) -> str | None:
    """The configured instructions version; a failing resolver yields none rather than an error."""
    if version is None or isinstance(version, str):
        return version
    try:
        resolved = version(instructions)
    except Exception:  # a user callback must not break the app's call
        _log.debug("otel-responses: the instructions_version resolver failed; no version recorded")
        return None
    return resolved if isinstance(resolved, str) else None


@dataclass(slots=True)
class RequestFacts:
    """What the request says about state, storage, instructions and the items it carries."""

    operation: str
    model: str | None
    state_mode: str | None
    store: bool
    previous_response_id: str | None
    conversation_id: str | None
    instructions_hash: str | None
    instructions_version: str | None
    input_items: tuple[ItemMeta, ...]
    include: tuple[str, ...]
    encrypted_requested: bool
    encrypted_input_count: int
    compaction: bool
    service_tier: str | None
    stream: bool
    background: bool = False
    app_messages: int = 0  # distinct app messages after the latest compaction item (all of them when there is none)
    compactions: int = 0
    system_messages: bool = False  # a system or developer message with text is in the input (a replay's instructions)
    system_app_messages: int = 0  # of ``app_messages``, the distinct system and developer ones
    last_messages: tuple[int, ...] = ()  # fingerprints of the last app messages, oldest first
    target_response_id: str | None = None  # the response a retrieve or input-items call reads
    target_item_id: str | None = None  # the conversation item a call reads or deletes
    # Found in the same pass over the items, for the analysis against the ledger:
    lookups: tuple[Lookup, ...] = ()  # items the ledger may know: by id, by call, by assistant-text fingerprint
    texts: TextReader | None = None  # assistant messages' text fingerprints and tool outputs' texts, on demand
    tool_positions: tuple[int, ...] = ()  # items with a call_id, and item references (they may resolve to one)
    reasoning: ReasoningSettings | None = None  # the request's reasoning settings, validated tokens only
    truncation: str | None = None  # `auto` (the API may drop the oldest items) or `disabled`, validated token only
    max_output_tokens: int | None = None
    provider: str = PROVIDER_OPENAI  # gen_ai.provider.name: set by the call from its client, host or library
    # What the GenAI conventions record of a request: sampling settings as sent (finite numbers only), the output
    # type `text.format` asks for (`json`, `text`), the stored prompt's id and version (never its variables), and
    # the event a resumed stream of a stored response starts after (`retrieve(..., starting_after=)`).
    temperature: float | None = None
    top_p: float | None = None
    output_type: str | None = None
    prompt_name: str | None = None
    prompt_version: str | None = None
    stream_cursor: str | None = None
    # The input as a whole-input prefix (see ``ledger.Entry.given_messages``): the fold of every app message in order
    # when the input holds app messages only, each with a text; and of all of them but the last, a user message.
    given: int | None = None
    continues: int | None = None
    # A keyed fingerprint of the tool definitions, only under `truncation: "auto"`: the usage of two turns is compared
    # only when they had the same tools.
    tools_fingerprint: int | None = None
    identity: Identity | None = None  # set by the call from its client (``_patching.identity``)


class Identity(NamedTuple):
    """Whom a request is made as, each a keyed fingerprint (never exported), None when it does not say: the
    organization and project it names, its credential (the API key) and its endpoint (the base URL)."""

    organization: int | None
    project: int | None
    credential: int | None
    endpoint: int | None


class Lookup(NamedTuple):
    """An input item the ledger may know, and what precedes it in the input."""

    key: Key  # the item's id; else its call (type, call_id); else the fingerprint of an assistant message's text
    position: int
    app_messages_before: int  # distinct app messages since the latest compaction item before it (or the start)
    compactions_before: int
    # The call (type, call_id) of a call item that has an id: where it is looked for when the ledger does not know
    # the id (a client's own id, a conversation's). An assistant message with an id falls back to its text instead,
    # fingerprinted only then (``RequestFacts.texts``).
    fallback: Key | None = None
    system_messages_before: int = 0  # of ``app_messages_before``, the distinct system and developer ones


class TextReader:
    """Reads the text of an input item on demand: an assistant message with an id is recognised by it, and only when
    the ledger does not know the id is its text fingerprinted (a client's placeholder id); a tool output's text is
    read only when a replay's is compared with the copy first sent. Holds the app's input sequence for the call's
    analysis only; nothing of it is kept."""

    __slots__ = ("_fingerprints", "_items")

    def __init__(self, items: list[Any] | tuple[Any, ...], fingerprints: Fingerprinter) -> None:
        self._items = items
        self._fingerprints = fingerprints

    def _item(self, position: int) -> Any:
        items = self._items
        return list.__getitem__(items, position) if isinstance(items, list) else tuple.__getitem__(items, position)

    def __call__(self, position: int) -> int | None:
        return text_fingerprint(self._item(position), self._fingerprints)

    def output(self, position: int) -> str | None:
        """The text of the tool output at ``position`` (see ``items.output_text``)."""
        return output_text(self._item(position))

    def fingerprint(self, text: str) -> int:
        """The keyed fingerprint of a text, as the ledger compares it (in this process and across a fleet)."""
        return self._fingerprints.number(text)


# NamedTuples built without their Python-level __new__ (every field given): a Lookup per replayed item with an id,
# and a string input's item and scan once per call.
_new_tuple = tuple.__new__


class _Scan(NamedTuple):
    encrypted_in: int
    compactions: int
    app_messages: int
    user_messages: int
    only_app_messages: bool
    system_messages: bool
    last_messages: tuple[int, ...]
    lookups: tuple[Lookup, ...]
    tool_positions: tuple[int, ...]
    texts_with_ids: bool  # an assistant message with an id (its text is fingerprinted only if the id is unknown)
    system_messages_count: int  # distinct system and developer messages with text since the latest compaction
    given: int | None  # every app message in order (``next_in_sequence``), when the input holds nothing else
    continues: int | None  # the same of every app message but the last, a user message


def _scan(items: tuple[ItemMeta, ...], empty: int | None) -> _Scan:
    """One pass over the input items' metadata: every count and position the checks and the analysis need.

    An app message is one the app itself writes (a ``message`` with role user, system or developer), not model
    output; the only place that decides it. App messages are counted as distinct texts (by keyed fingerprint):
    a library that sends a message twice has not given the model two. A system or developer message whose text is
    empty (``empty``, its fingerprint) counts as none, as ``instructions=""`` does; one whose text was not read
    (``empty`` None: items written to a conversation) counts as a system message."""
    encrypted_in = compactions = user_messages = 0
    only_app = True
    system = False
    distinct: set[int] = set()  # app messages since the latest compaction item
    systems: set[int] = set()  # of them, the system and developer messages
    messages: list[int] = []
    lookups: list[Lookup] = []
    tool_positions: list[int] = []
    not_by_call, new_lookup = NOT_BY_CALL, _new_tuple  # locals: this loop runs once per replayed item
    texts_with_ids = False
    # Every app message in order (``next_in_sequence``), while the input holds nothing else and each has a text.
    sequence: int | None = SEQUENCE_START
    before_last: int | None = None
    for position, meta in enumerate(items):
        kind, item_id, call_id, role = meta[:4]
        # How the ledger may know the item: by its id, else its call (see items.NOT_BY_CALL), else its text.
        fallback: Key | None = None
        if call_id is not None:
            tool_positions.append(position)
            if kind in not_by_call:
                key: Key | None = item_id
            elif item_id is not None:
                key, fallback = item_id, (kind, call_id)
            else:
                key = (kind, call_id)
        elif item_id is not None:
            key = item_id
            if kind == "item_reference":
                tool_positions.append(position)
            elif role == "assistant":
                texts_with_ids = True
        else:
            key = meta.fingerprint if role == "assistant" else None
        if key is not None:
            lookup = (key, position, len(distinct), compactions, fallback, len(systems))
            lookups.append(new_lookup(Lookup, lookup))
        if kind == "message" and role in APP_ROLES:
            text = meta.fingerprint
            if sequence is not None:
                before_last = sequence
                sequence = None if text is None else next_in_sequence(sequence, text)
            if role == "user":
                user_messages += 1
            elif text is not None and text == empty:
                continue  # an empty system or developer message: none at all (an unread text is not empty)
            else:
                system = True
                systems.add(-1 - position if text is None else text)
            if text is None:
                distinct.add(-1 - position)  # no text (an image, a file): a message of its own
            else:
                distinct.add(text)
                messages.append(text)
            continue
        only_app = False
        if kind == "reasoning":
            encrypted_in += meta.encrypted
        elif kind == "compaction":
            compactions += 1
            distinct = set()  # a compaction item stands for everything before it
            systems = set()
    given = continues = None
    if only_app and sequence is not None and items:
        given = sequence
        if len(items) > 1 and items[-1].role == "user":
            continues = before_last
    return _Scan(
        encrypted_in,
        compactions,
        len(distinct),
        user_messages,
        only_app,
        system,
        tuple(messages[-MAX_INPUT_MESSAGES:]),
        tuple(lookups),
        tuple(tool_positions),
        texts_with_ids,
        len(systems),
        given,
        continues,
    )


@dataclass(slots=True)
class ResponseFacts:
    """What the response says: identity, status, usage and the items it returned."""

    response_id: str | None
    model: str | None
    status: str | None
    finish_reason: str | None
    output_items: tuple[ItemMeta, ...]
    encrypted_output_count: int
    compaction: bool
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    reasoning_tokens: int | None
    service_tier: str | None
    conversation_id: str | None
    request_id: str | None
    has_output: bool = True  # the result had an `output` list (a response), not just a count or an id
    store: bool | None = None  # the body's `store`: the effective flag (an organisation default may have set it)
    copies: tuple[tuple[int, int], ...] = ()  # (output index, shape) of other copies of an opaque payload seen
    cache_write_tokens: int | None = None  # input tokens written to the prompt cache (`cache_write_tokens`)
    # What the response says the model saw: the effective `reasoning.context`, the replayed reasoning the API withheld
    # (`input_transformations`: each reason with its count, in the order first met), and `prompt_cache_diagnostics`.
    reasoning_context: str | None = None
    withheld: tuple[tuple[str, int], ...] = ()
    cache_diagnostic: CacheDiagnostic | None = None

    @property
    def withheld_count(self) -> int:
        return sum(count for _, count in self.withheld)

    @classmethod
    def empty(cls, request_id: str | None = None) -> ResponseFacts:
        """Facts of a result that is not a response (a conversation, a token count)."""
        return cls(None, None, None, None, (), 0, False, None, None, None, None, None, None, request_id, False)


class CacheDiagnostic(NamedTuple):
    """``prompt_cache_diagnostics``: its type, and for a miss its reason and the input tokens the miss affected."""

    type: str
    reason: str | None
    missed_tokens: int | None


# A withheld item whose reason is no enum-like token is counted under this one.
UNKNOWN_REASON = "unknown"


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _conversation_id(value: object) -> str | None:
    if value is None:  # the usual case: not in conversation mode
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return _str(value.get("id"))
    return _str(getattr(value, "id", None))


def _state_mode(previous: str | None, conversation: str | None, scan: _Scan) -> str:
    if previous and conversation:
        return CONFLICT
    if previous:
        return SERVER_CHAIN
    if conversation:
        return CONVERSATION
    return SINGLE_TURN if scan.only_app_messages and scan.user_messages <= 1 else CLIENT_REPLAY


def request_facts(operation: str, kwargs: Mapping[str, Any], settings: Reading) -> RequestFacts:
    """Facts of a create/parse request. Unset parameters may be ``omit`` sentinels: only real types count."""
    raw_input = kwargs.get("input")
    if isinstance(raw_input, str):  # one user message: its metadata and scan written out, the most common call
        text = settings.fingerprinter.number(raw_input)
        items: tuple[ItemMeta, ...] = (
            _new_tuple(ItemMeta, ("message", None, None, "user", None, False, text, False, None)),
        )
        given = next_in_sequence(SEQUENCE_START, text)
        scan = _new_tuple(_Scan, (0, 0, 1, 1, True, False, (text,), (), (), False, 0, given, None))
        texts = None
    else:
        fingerprints = settings.fingerprinter
        if is_sequence(raw_input):
            sent = raw_input if type(raw_input) is list else elements(raw_input)
            items = tuple([item_meta(item, fingerprints, True) for item in sent])  # faster than a genexpr
        else:
            items = ()
        scan = _scan(items, fingerprints.empty)
        read = scan.texts_with_ids or scan.tool_positions
        texts = TextReader(raw_input, fingerprints) if read and is_sequence(raw_input) else None

    raw_include = kwargs.get("include")
    include = tuple(v for v in elements(raw_include) if isinstance(v, str)) if is_sequence(raw_include) else ()
    instructions = _str(kwargs.get("instructions")) or None  # "" gives the model no instructions
    previous = _str(kwargs.get("previous_response_id")) or None
    conversation = _conversation_id(kwargs.get("conversation")) or None
    prompt = stored_prompt(kwargs)
    truncation = _setting(_sent(kwargs, "truncation"))
    return RequestFacts(
        operation=operation,
        model=_str(kwargs.get("model")),
        state_mode=_state_mode(previous, conversation, scan),
        store=kwargs.get("store") is not False,  # the API stores when `store` is omitted
        previous_response_id=previous,
        conversation_id=conversation,
        instructions_hash=settings.fingerprinter.text(instructions) if instructions is not None else None,
        instructions_version=resolve_version(settings.instructions_version, instructions),
        input_items=items,
        include=include,
        encrypted_requested=ENCRYPTED_REASONING in include,
        encrypted_input_count=scan.encrypted_in,
        compaction=scan.compactions > 0,
        service_tier=_str(kwargs.get("service_tier")),
        stream=kwargs.get("stream") is True,
        background=kwargs.get("background") is True,
        app_messages=scan.app_messages,
        compactions=scan.compactions,
        system_messages=scan.system_messages,
        system_app_messages=scan.system_messages_count,
        last_messages=scan.last_messages,
        lookups=scan.lookups,
        tool_positions=scan.tool_positions,
        texts=texts,
        given=scan.given,
        continues=scan.continues,
        reasoning=reasoning_settings(kwargs),
        truncation=truncation,
        tools_fingerprint=tools_fingerprint(kwargs, settings.fingerprinter) if truncation == "auto" else None,
        max_output_tokens=_token_count(_sent(kwargs, "max_output_tokens")),
        temperature=_number(_sent(kwargs, "temperature")),
        top_p=_number(_sent(kwargs, "top_p")),
        output_type=output_type(kwargs),
        prompt_name=prompt[0] if prompt is not None else None,
        prompt_version=prompt[1] if prompt is not None else None,
    )


def conversation_facts(
    operation: str, conversation_id: object, items: tuple[ItemMeta, ...], item_id: object = None
) -> RequestFacts:
    """Facts of a Conversations API call; ``items`` are those it writes into the conversation, ``item_id`` the item
    it reads or deletes."""
    scan = _scan(items, None)
    return RequestFacts(
        operation=operation,
        model=None,
        state_mode=None,
        store=True,
        previous_response_id=None,
        conversation_id=_str(conversation_id),
        instructions_hash=None,
        instructions_version=None,
        input_items=items,
        include=(),
        encrypted_requested=False,
        encrypted_input_count=0,
        compaction=False,
        service_tier=None,
        stream=False,
        system_messages=scan.system_messages,
        lookups=scan.lookups,
        tool_positions=scan.tool_positions,
        target_item_id=_str(item_id),
    )


def target_facts(operation: str, response_id: object, kwargs: Mapping[str, Any]) -> RequestFacts:
    """Facts of a call that reads one stored response (retrieve, input items)."""
    return RequestFacts(
        operation=operation,
        model=None,
        state_mode=None,
        store=True,
        previous_response_id=None,
        conversation_id=None,
        instructions_hash=None,
        instructions_version=None,
        input_items=(),
        include=(),
        encrypted_requested=False,
        encrypted_input_count=0,
        compaction=False,
        service_tier=None,
        stream=kwargs.get("stream") is True,
        target_response_id=_str(response_id),
        stream_cursor=_cursor(kwargs.get("starting_after")),
    )


def response_facts(response: object, settings: Reading, request_id: str | None = None) -> ResponseFacts:
    """Facts of a ``Response`` (or anything shaped like one); missing fields become ``None``."""
    raw_output = getattr(response, "output", None)
    fingerprints = settings.fingerprinter
    output = tuple([item_meta(item, fingerprints) for item in elements(raw_output)]) if is_sequence(raw_output) else ()
    encrypted_out = 0
    compaction = False
    for meta in output:
        if meta.encrypted and meta.type == "reasoning":
            encrypted_out += 1
        elif meta.type == "compaction":
            compaction = True

    status = _str(getattr(response, "status", None))
    details = getattr(response, "incomplete_details", None)  # None unless incomplete: no failing getattr on None
    finish = (_str(getattr(details, "reason", None)) if details is not None else None) or status
    usage = getattr(response, "usage", None)
    # Fields an older SDK does not declare (its models keep them as extras, or a dict stands for the response): read
    # by name, never through the SDK's types.
    get = fields_of(response)
    if usage is not None:
        input_details = getattr(usage, "input_tokens_details", None)
        output_details = getattr(usage, "output_tokens_details", None)
    else:
        input_details = output_details = None
    return ResponseFacts(
        response_id=_str(getattr(response, "id", None)),
        model=_str(getattr(response, "model", None)),
        status=status,
        finish_reason=finish,
        output_items=output,
        encrypted_output_count=encrypted_out,
        compaction=compaction,
        input_tokens=_int(getattr(usage, "input_tokens", None)),
        output_tokens=_int(getattr(usage, "output_tokens", None)),
        cached_tokens=_int(getattr(input_details, "cached_tokens", None)),
        reasoning_tokens=_int(getattr(output_details, "reasoning_tokens", None)),
        service_tier=_str(getattr(response, "service_tier", None)),
        conversation_id=_conversation_id(getattr(response, "conversation", None)),
        request_id=request_id if request_id is not None else _str(getattr(response, "_request_id", None)),
        store=_bool(get("store")),
        cache_write_tokens=_int(getattr(input_details, "cache_write_tokens", None)),
        reasoning_context=_effective_context(get("reasoning")),
        withheld=_withheld(get("input_transformations")),
        cache_diagnostic=_cache_diagnostic(get("prompt_cache_diagnostics")),
    )


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _effective_context(reasoning: object) -> str | None:
    """The response's ``reasoning.context``: the reasoning context the API used (an enum-like token)."""
    return _setting(fields_of(reasoning)("context")) if reasoning is not None else None


def _withheld(raw: object) -> tuple[tuple[str, int], ...]:
    """``input_transformations``: the reasoning items the API removed before the model read the input, counted by
    reason (a reason that is no enum-like token counts as ``unknown``); an action other than ``removed`` withholds
    nothing."""
    if not is_sequence(raw) or not raw:
        return ()
    counts: dict[str, int] = {}
    for transformation in elements(raw):
        get = fields_of(transformation)
        action = get("action")
        if action is not None and action != "removed":
            continue
        reason = _setting(get("reason")) or UNKNOWN_REASON
        counts[reason] = counts.get(reason, 0) + 1
    return tuple(counts.items())


def _cache_diagnostic(raw: object) -> CacheDiagnostic | None:
    """``prompt_cache_diagnostics``: its type, reason and missed tokens, each only when well formed."""
    if raw is None:
        return None
    get = fields_of(raw)
    kind = _setting(get("type"))
    if kind is None:
        return None
    return CacheDiagnostic(kind, _setting(get("reason")), _token_count(get("cache_missed_tokens")))


class ReasoningSettings(NamedTuple):
    """The request's ``reasoning`` settings: each a short lowercase token (``high``, ``all_turns``), else None."""

    effort: str | None
    summary: str | None
    context: str | None  # `all_turns`: models that keep reasoning use earlier turns' reasoning (SDKs may type it)
    mode: str | None


# Enum-like values only (`none`, `xhigh`, `concise`, `current_turn`, `pro`): anything else is not recorded.
_SETTING_TOKEN = re.compile(r"[a-z][a-z0-9_]{0,31}")
# The values the API documents, accepted without the pattern (a set lookup); a later one goes through it.
_KNOWN_SETTINGS = frozenset(
    {"none", "minimal", "low", "medium", "high", "xhigh", "max", "auto", "concise", "detailed"}
    | {"current_turn", "all_turns", "standard", "pro", "disabled"}
)


def _setting(value: object) -> str | None:
    """``value`` when it is an enum-like token; never text (length checked before the pattern)."""
    if value is None:
        return None
    if isinstance(value, str) and (value in _KNOWN_SETTINGS or (len(value) <= 32 and _SETTING_TOKEN.fullmatch(value))):
        return value
    return None


def reasoning_settings(kwargs: Mapping[str, Any]) -> ReasoningSettings | None:
    """The ``reasoning`` the request sends: ``extra_body["reasoning"]`` when there is one (the SDK merges
    ``extra_body`` over the body key by key, so it replaces the keyword's), else the ``reasoning`` keyword (a dict
    or an SDK model; unset: an ``omit`` sentinel, which has no fields)."""
    raw = kwargs.get("reasoning")
    extra = kwargs.get("extra_body")
    if isinstance(extra, Mapping) and "reasoning" in extra:
        raw = extra["reasoning"]
    if raw is None:
        return None
    get: Callable[[str], object] = fields_of(raw)
    effort, summary, context, mode = get("effort"), get("summary"), get("context"), get("mode")
    if summary is None:
        summary = get("generate_summary")  # the deprecated spelling
    if effort is None and summary is None and context is None and mode is None:
        return None
    settings = ReasoningSettings(_setting(effort), _setting(summary), _setting(context), _setting(mode))
    return None if settings == _NO_REASONING else settings


_NO_REASONING = ReasoningSettings(None, None, None, None)
_INT64_MAX = 2**63 - 1


def _sent(kwargs: Mapping[str, Any], name: str) -> object:
    """A top-level body field as the request sends it: ``extra_body``'s when it has one (the SDK merges it over the
    keywords), else the keyword's (unset: an ``omit`` sentinel, which no check below accepts)."""
    extra = kwargs.get("extra_body")
    if isinstance(extra, Mapping) and name in extra:
        return extra[name]
    return kwargs.get(name)


def _token_count(value: object) -> int | None:
    """A token count (an int, not a bool) that fits an attribute's 64 bits; anything else is not recorded."""
    number = _int(value)
    return number if number is not None and 0 <= number <= _INT64_MAX else None


def _number(value: object) -> float | None:
    """A sampling setting (an int or a float, not a bool) when finite; anything else is not recorded."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


_JSON_FORMATS = frozenset({"json_schema", "json_object"})


def output_type(kwargs: Mapping[str, Any]) -> str | None:
    """``json`` or ``text`` when the request sends ``text.format`` (``parse``/``stream`` with ``text_format=`` send
    a ``json_schema`` one), else None: no output type is recorded for a request that asks none."""
    if isinstance(kwargs.get("text_format"), type):
        return OUTPUT_TYPE_JSON
    text = _sent(kwargs, "text")
    if text is None:
        return None
    kind = fields_of(fields_of(text)("format"))("type")
    if kind in _JSON_FORMATS:
        return OUTPUT_TYPE_JSON
    return OUTPUT_TYPE_TEXT if kind == "text" else None


def stored_prompt(kwargs: Mapping[str, Any]) -> tuple[str | None, str | None] | None:
    """The ``prompt`` parameter's ``id`` and ``version`` (a stored prompt); its ``variables`` are content: never
    read."""
    raw = _sent(kwargs, "prompt")
    if raw is None:
        return None
    get = fields_of(raw)
    name, version = _str(get("id")), _str(get("version"))
    return (name, version) if name else None


def tools_fingerprint(kwargs: Mapping[str, Any], fingerprints: Fingerprinter) -> int | None:
    """A keyed fingerprint of the request's tool definitions (none sent: the empty list's); None when they cannot be
    read as plain data (a generator is never iterated)."""
    raw = _sent(kwargs, "tools")
    tools = raw if is_sequence(raw) else []
    try:
        text = json.dumps(tools, sort_keys=True, separators=(",", ":"), default=_plain)
    except Exception:  # a tool object that is not plain data: no fingerprint, so no comparison
        return None
    return fingerprints.number(text)


def _plain(value: object) -> object:
    """An SDK model (a tool given as one) as its fields; anything else is not plain data."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True)
    raise TypeError


def _cursor(value: object) -> str | None:
    """``starting_after`` (an event's sequence number) as the conventions' string cursor."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) and value else None


def effective_store(req: RequestFacts, resp: ResponseFacts | None) -> bool:
    """Whether the API kept the response: the body's `store` when it says (an organisation default may have turned
    storage off for a request that omitted it), else the request's (true when omitted). A background response is
    kept for polling whatever its body says (recorded traffic: `"store": false` in the body, retrieves answered)."""
    if resp is None or resp.store is None or req.background:
        return req.store
    return resp.store


def bounded_types(items: tuple[ItemMeta, ...], limit: int) -> list[str]:
    """Item types in order; past ``limit``, the head and the tail with a ``...(+N)`` marker between.

    The head shows how a history starts (system prompt, compaction item), the tail the latest turns.
    """
    if len(items) <= limit:
        return [meta.type for meta in items]
    head = max(1, limit // 4)
    tail = max(1, limit - head - 1)
    omitted = len(items) - head - tail
    return [m.type for m in items[:head]] + [f"...(+{omitted})"] + [m.type for m in items[-tail:]]


def with_stream_items(resp: ResponseFacts, streamed: tuple[ItemMeta, ...]) -> ResponseFacts:
    """The terminal response's facts, completed by the items of the stream's ``output_item.done`` events: they
    stand for the output when the terminal response lacks it, and are other copies of its opaque payloads (the
    API encrypts afresh each time it serialises an item) when it has it."""
    if not streamed:
        return resp
    if not resp.output_items:
        return replace(
            resp,
            output_items=streamed,
            encrypted_output_count=sum(1 for m in streamed if m.type == "reasoning" and m.encrypted),
            compaction=resp.compaction or any(m.type == "compaction" for m in streamed),
        )
    shapes = {m.id: m.shape for m in streamed if m.shape is not None and m.id is not None}
    if not shapes:
        return resp
    copies = tuple(
        (index, shapes[m.id]) for index, m in enumerate(resp.output_items) if m.id in shapes and shapes[m.id] != m.shape
    )
    return replace(resp, copies=resp.copies + copies) if copies else resp
