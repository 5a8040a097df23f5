"""The span of a call, from the call: its request-side attributes (set when it starts, so samplers see them), and,
when it ends, the response side, one event per signal and its status. Metadata only: no payload reaches here.

Every string from the app, the server or a setting is capped (``bounds``). A span that is not recording (sampled
out) gets none of the response side built: the call's metrics, signals and ledger entry do not depend on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from .. import attributes as a
from .._analysis.facts import ReasoningSettings, RequestFacts, ResponseFacts, bounded_types
from .._analysis.lineage import Lineage
from .._items import pending_calls
from .bounds import MAX_ITEM_TYPES, cap, cap_all, cap_attributes, cap_list

if TYPE_CHECKING:
    from .recorded import Outcome
    from .recorded import Recorded as Call

Attributes = dict[str, AttributeValue]
_NO_SIGNALS: tuple[str, ...] = ()


def name_of(call: Call) -> str:
    """``{gen_ai.operation.name} {gen_ai.request.model}`` (the operation alone without a model)."""
    model = call.req.model
    return f"{call.req.operation} {cap(model)}" if model else call.req.operation


def request_attributes(call: Call, zdr: bool) -> tuple[Attributes, list[Link] | None]:
    """The attributes a span starts with, and its link to the span of the turn the call continues (another trace:
    each turn is its own)."""
    req = call.req
    attrs: Attributes = {
        a.GEN_AI_OPERATION_NAME: req.operation,
        a.GEN_AI_PROVIDER_NAME: req.provider,
        a.OPENAI_API_TYPE: a.API_TYPE_RESPONSES,
        a.ZDR: zdr,
    }
    if req.state_mode is not None:
        attrs[a.STATE_MODE] = req.state_mode
        attrs[a.STORE] = req.store
        attrs[a.INPUT_ITEM_TYPES] = cap_all(bounded_types(req.input_items, MAX_ITEM_TYPES))
        attrs[a.INPUT_ITEM_COUNT] = len(req.input_items)
        attrs[a.REASONING_ENCRYPTED_REQUESTED] = req.encrypted_requested
        attrs[a.REASONING_ENCRYPTED_INPUT_COUNT] = req.encrypted_input_count
    if req.target_response_id is not None:
        attrs[a.GEN_AI_RESPONSE_ID] = cap(req.target_response_id)
    if req.model is not None:
        attrs[a.GEN_AI_REQUEST_MODEL] = cap(req.model)
    host, port = call.server
    if host is not None:
        attrs[a.SERVER_ADDRESS] = cap(host)
    if port is not None:
        attrs[a.SERVER_PORT] = port
    if req.previous_response_id is not None:
        attrs[a.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID] = cap(req.previous_response_id)
    if req.conversation_id is not None:
        attrs[a.GEN_AI_CONVERSATION_ID] = cap(req.conversation_id)
    if req.service_tier is not None:
        attrs[a.OPENAI_REQUEST_SERVICE_TIER] = cap(req.service_tier)
    if req.instructions_hash is not None:
        attrs[a.INSTRUCTIONS_HASH] = req.instructions_hash  # 16 hex characters of our own hash
    if req.instructions_version is not None:
        attrs[a.INSTRUCTIONS_VERSION] = cap(req.instructions_version)
    if req.include:
        attrs[a.INCLUDE] = cap_list(req.include)
    if call.ledger.unavailable:
        attrs[a.LEDGER_UNAVAILABLE] = True
    _put_reasoning(attrs, req.reasoning)
    if call.analysis.not_replayed:
        attrs[a.REASONING_NOT_REPLAYED] = call.analysis.not_replayed
    _put(attrs, a.TRUNCATION, req.truncation)
    _put(attrs, a.GEN_AI_REQUEST_MAX_TOKENS, req.max_output_tokens)
    if req.stream:
        attrs[a.GEN_AI_REQUEST_STREAM] = True
    _put(attrs, a.GEN_AI_OUTPUT_TYPE, req.output_type)  # a validated token: `json` or `text`
    _put(attrs, a.GEN_AI_REQUEST_TEMPERATURE, req.temperature)
    _put(attrs, a.GEN_AI_REQUEST_TOP_P, req.top_p)
    _put_text(attrs, a.GEN_AI_PROMPT_NAME, req.prompt_name)
    _put_text(attrs, a.GEN_AI_PROMPT_VERSION, req.prompt_version)
    _put_text(attrs, a.GEN_AI_REQUEST_STREAM_CURSOR, req.stream_cursor)
    return attrs, _lineage_attrs(call.lineage, attrs)


def finish(span: Span, call: Call, outcome: Outcome, context_loss: bool, store: bool) -> None:
    """The response side of a recording span, its signal events and its status (the caller ends it)."""
    req, resp = call.req, outcome.response
    attrs: Attributes = {}
    _put(attrs, a.TOOL_CALLS_CHECK, call.tool_check)
    signals = call.signals
    if signals:
        attrs[a.SIGNALS] = list(dict.fromkeys(s.name for s in signals))
        for signal in signals:  # the detail's ids and item types come from the app or the server: capped
            span.add_event(
                a.SIGNAL_EVENT,
                {a.SIGNAL_NAME: signal.name, a.SIGNAL_SEVERITY: signal.severity, **cap_attributes(signal.detail)},
            )
    else:
        attrs[a.SIGNALS] = _NO_SIGNALS
    attrs[a.CONTEXT_LOSS] = context_loss
    if req.state_mode is not None and store != req.store:
        attrs[a.STORE] = store  # an organisation default overrode what the request asked
        attrs[a.STORE_REQUESTED] = req.store
    lineage = call.lineage
    if lineage.lineage_id is None and resp is not None and resp.response_id is not None:
        _put_text(attrs, a.LINEAGE_ID, lineage.of_response(resp.response_id))  # a first turn names its lineage
    if call.first_chunk is not None:
        attrs[a.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = call.first_chunk
    error_type = error_type_of(outcome)
    if error_type is not None:
        attrs[a.ERROR_TYPE] = error_type
    exc = outcome.exception
    if exc is not None:  # the error's class and safe metadata: its message may echo payload
        _put_text(attrs, a.REQUEST_ID, _str_attr(exc, "request_id"))
        _put(attrs, a.HTTP_RESPONSE_STATUS_CODE, _int_attr(exc, "status_code"))
        _put_text(attrs, a.ERROR_CODE, _str_attr(exc, "code"))
    if resp is not None:
        _response_attrs(req, resp, attrs)
    reason = finish_reason(resp, ended_early(call, outcome))
    if reason is not None:
        attrs[a.GEN_AI_RESPONSE_FINISH_REASONS] = [reason]
    if outcome.extra:
        attrs.update(cap_attributes(outcome.extra))
    span.set_attributes(attrs)
    if error_type is not None:
        span.set_status(Status(StatusCode.ERROR, error_type))


def error_type_of(outcome: Outcome) -> str | None:
    """``error.type``: the exception's class, or the code of a response that failed (a stream's ``response.failed``,
    an ``error`` event: the server's code, any text) or the class of the error that failed its parsing; capped."""
    if outcome.exception is not None:
        return cap(type(outcome.exception).__qualname__)
    return cap(outcome.error_type) if outcome.error_type is not None else None


def _response_attrs(req: RequestFacts, resp: ResponseFacts, attrs: Attributes) -> None:
    if resp.has_output:
        attrs[a.OUTPUT_ITEM_TYPES] = cap_all(bounded_types(resp.output_items, MAX_ITEM_TYPES))
        attrs[a.OUTPUT_ITEM_COUNT] = len(resp.output_items)
        attrs[a.REASONING_ENCRYPTED_OUTPUT_COUNT] = resp.encrypted_output_count
    if req.state_mode is not None or resp.has_output:
        compaction = req.compaction or resp.compaction or req.operation == a.OPERATION_COMPACT
        attrs[a.COMPACTION] = compaction
        if compaction:
            attrs[a.GEN_AI_CONVERSATION_COMPACTED] = True
    _put_text(attrs, a.GEN_AI_RESPONSE_ID, resp.response_id)
    _put_text(attrs, a.GEN_AI_RESPONSE_MODEL, resp.model)
    _put_text(attrs, a.REQUEST_ID, resp.request_id)
    _put_text(attrs, a.OPENAI_RESPONSE_SERVICE_TIER, resp.service_tier)
    _put_text(attrs, a.RESPONSE_STATUS, resp.status)
    if req.operation == a.OPERATION_FETCH:  # the fetched usage is the original call's: none is reported here
        _put_text(attrs, a.GEN_AI_RESPONSE_STATUS, resp.status)
    else:
        _put(attrs, a.GEN_AI_USAGE_INPUT_TOKENS, resp.input_tokens)
        _put(attrs, a.GEN_AI_USAGE_OUTPUT_TOKENS, resp.output_tokens)
        _put(attrs, a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, resp.cached_tokens)
        _put(attrs, a.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, resp.reasoning_tokens)
        if resp.cache_write_tokens:  # a breakdown recorded only when the usage reports one
            attrs[a.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS] = resp.cache_write_tokens
    if resp.conversation_id is not None and req.conversation_id is None:
        attrs[a.GEN_AI_CONVERSATION_ID] = cap(resp.conversation_id)  # a conversation the call itself created
    _what_the_model_saw(resp, attrs)


def _what_the_model_saw(resp: ResponseFacts, attrs: Attributes) -> None:
    """The effective reasoning context, the reasoning the API withheld and the prompt cache's diagnostics, as the
    response reports them (validated tokens and counts: see ``facts.response_facts``)."""
    _put(attrs, a.RESPONSE_REASONING_CONTEXT, resp.reasoning_context)
    if resp.withheld:
        attrs[a.REASONING_WITHHELD] = resp.withheld_count
        attrs[a.REASONING_WITHHELD_REASONS] = [reason for reason, _ in resp.withheld]
    diagnostic = resp.cache_diagnostic
    if diagnostic is not None:
        attrs[a.PROMPT_CACHE_DIAGNOSTIC_TYPE] = diagnostic.type
        _put(attrs, a.PROMPT_CACHE_DIAGNOSTIC_REASON, diagnostic.reason)
        _put(attrs, a.PROMPT_CACHE_MISSED_TOKENS, diagnostic.missed_tokens)


# The Responses API's `incomplete_details.reason` -> the conventions' finish reason; another reason is kept as sent.
_INCOMPLETE = {"max_output_tokens": a.FINISH_LENGTH, "content_filter": a.FINISH_CONTENT_FILTER}
_FAILED = frozenset({"failed", "cancelled"})
_UNFINISHED = frozenset({"queued", "in_progress"})  # a background response still running: no reason yet


def ended_early(call: Call, outcome: Outcome) -> bool:
    """An inference call that ended without a response's final status: the API refused it (an exception), a stream's
    ``error`` event, or a stream closed or abandoned before its terminal event."""
    if not call.records_usage or outcome.response is not None:
        return False
    extra = outcome.extra
    return (
        outcome.exception is not None
        or outcome.error_type is not None
        or (extra is not None and a.STREAM_ENDED in extra)
    )


def finish_reason(resp: ResponseFacts | None, early: bool) -> str | None:
    """``gen_ai.response.finish_reasons``' one entry (a response is one generation), in the conventions' values:
    ``completed`` is ``stop``, or ``tool_call`` when it returned calls the app must answer; ``incomplete`` says why it
    was cut (``length``, ``content_filter``); ``failed``, ``cancelled`` and an inference call that ended without a
    final status are ``error``; a response still queued or in progress has none yet, nor has a call that read none."""
    if early:
        return a.FINISH_ERROR
    if resp is None or resp.status is None or resp.status in _UNFINISHED:
        return None
    status = resp.status
    if status == "completed":
        return a.FINISH_TOOL_CALL if pending_calls(resp.output_items) else a.FINISH_STOP
    if status in _FAILED:
        return a.FINISH_ERROR
    if status == "incomplete":
        reason = resp.finish_reason if resp.finish_reason != status else None  # `incomplete_details.reason`
        return _INCOMPLETE.get(reason, cap(reason)) if reason is not None else None
    return cap(status)


def _lineage_attrs(lineage: Lineage, attrs: Attributes) -> list[Link] | None:
    """The turn and lineage id into ``attrs``; the link to the span of the turn continued, if known."""
    _put(attrs, a.TURN, lineage.turn)
    _put_text(attrs, a.LINEAGE_ID, lineage.lineage_id)
    continues = lineage.continues
    if continues is None:
        return None
    context = SpanContext(continues[0], continues[1], is_remote=True, trace_flags=TraceFlags(TraceFlags.DEFAULT))
    return [Link(context)]


def _put_reasoning(attrs: Attributes, reasoning: ReasoningSettings | None) -> None:
    """The request's reasoning settings (validated tokens: see ``facts.reasoning_settings``)."""
    if reasoning is not None:
        _put(attrs, a.GEN_AI_REQUEST_REASONING_LEVEL, reasoning.effort)
        _put(attrs, a.REASONING_SUMMARY, reasoning.summary)
        _put(attrs, a.REASONING_CONTEXT, reasoning.context)
        _put(attrs, a.REASONING_MODE, reasoning.mode)


def _put(attrs: Attributes, key: str, value: AttributeValue | None) -> None:
    if value is not None:
        attrs[key] = value


def _put_text(attrs: Attributes, key: str, value: str | None) -> None:
    """A string from the app or the server, capped."""
    if value is not None:
        attrs[key] = cap(value)


def _str_attr(obj: Any, name: str) -> str | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, str) else None


def _int_attr(obj: Any, name: str) -> int | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
