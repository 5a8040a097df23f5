"""Spans and metrics from facts: the only module that writes telemetry.

Attribute dictionaries are built once per call and handed to the SDK whole; no payload reaches here.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from opentelemetry.metrics import Meter
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags, Tracer
from opentelemetry.util.types import AttributeValue

from . import attributes as a
from .bounds import cap, cap_all, cap_attributes, cap_list, metric_code, metric_host, metric_model
from .config import Settings
from .facts import ReasoningSettings, RequestFacts, ResponseFacts, bounded_types, effective_store
from .lineage import Lineage
from .pricing import cost_of
from .signals import LOSS_SEVERITIES, Signal
from .tally import Tally, observable_tally

_log = logging.getLogger(__name__)
Attributes = dict[str, AttributeValue]
Server = tuple[str | None, int | None]

_ATTR_CACHE_SIZE = 1024
_INPUT = (a.GEN_AI_TOKEN_TYPE, a.TOKEN_TYPE_INPUT)
_OUTPUT = (a.GEN_AI_TOKEN_TYPE, a.TOKEN_TYPE_OUTPUT)
_NO_SIGNALS: tuple[str, ...] = ()


class GenAIAttributes(NamedTuple):
    """The attribute sets of the GenAI client metrics for one operation, models and server."""

    duration: Attributes  # also the time to first chunk's and the chunk timings'
    input: Attributes  # token usage, `gen_ai.token.type` input
    output: Attributes  # token usage, output


class Telemetry:
    """Tracer, instruments and settings of one ``instrument()``."""

    def __init__(self, tracer: Tracer, meter: Meter, settings: Settings) -> None:
        self.tracer = tracer
        self.settings = settings
        self._attr_cache: dict[tuple[object, ...], Attributes] = {}
        self._genai_cache: dict[tuple[object, ...], GenAIAttributes] = {}
        self.duration = meter.create_histogram(
            a.METRIC_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(a.DURATION_BUCKETS),
        )
        self.token_usage = meter.create_histogram(
            a.METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(a.TOKEN_USAGE_BUCKETS),
        )
        self.calls = observable_tally(
            meter,
            a.METRIC_CALLS,
            unit="{call}",
            description="Responses API calls by state mode, store flag, operation and truncation setting.",
        )
        self.time_to_first_chunk = meter.create_histogram(
            a.METRIC_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time from the request to the first chunk of a streamed response.",
            explicit_bucket_boundaries_advisory=list(a.DURATION_BUCKETS),
        )
        self.tokens = observable_tally(
            meter,
            a.METRIC_TOKENS,
            unit="{token}",
            description="Tokens the GenAI usage histogram cannot show: cached_input (a part of input) and reasoning "
            "(a part of output).",
        )
        self.encrypted_items = observable_tally(
            meter,
            a.METRIC_ENCRYPTED_ITEMS,
            unit="{item}",
            description="Reasoning items carrying encrypted_content, returned (output) and replayed (input).",
        )
        self.internal_errors = meter.create_counter(
            a.METRIC_INTERNAL_ERRORS,
            unit="{error}",
            description="Failures inside the instrumentation, by step; swallowed, the app never sees them.",
        )
        self.signal_counter = meter.create_counter(
            a.METRIC_SIGNALS,
            unit="{signal}",
            description="Context-loss signals raised, by signal name, severity, state mode and model.",
        )
        self._init_metering(meter)

    def start(
        self, req: RequestFacts, server: Server, ledger_unavailable: bool = False, lineage: Lineage | None = None
    ) -> Span:
        """Open the CLIENT span with every request-side attribute, so samplers see them, and a link to the span of
        the turn it continues (another trace: each turn is its own)."""
        attrs: Attributes = {
            a.GEN_AI_OPERATION_NAME: req.operation,
            a.GEN_AI_PROVIDER_NAME: req.provider,
            a.OPENAI_API_TYPE: a.API_TYPE_RESPONSES,
            a.ZDR: self.settings.zdr,
        }
        if req.state_mode is not None:
            attrs[a.STATE_MODE] = req.state_mode
            attrs[a.STORE] = req.store
            attrs[a.INPUT_ITEM_TYPES] = cap_all(bounded_types(req.input_items, self.settings.max_item_types))
            attrs[a.INPUT_ITEM_COUNT] = len(req.input_items)
            attrs[a.REASONING_ENCRYPTED_REQUESTED] = req.encrypted_requested
            attrs[a.REASONING_ENCRYPTED_INPUT_COUNT] = req.encrypted_input_count
        # Every string from the app, the server or a setting is capped (bounds.MAX_LENGTH).
        if req.target_response_id is not None:
            attrs[a.GEN_AI_RESPONSE_ID] = cap(req.target_response_id)
        model = req.model
        if model is not None:
            model = attrs[a.GEN_AI_REQUEST_MODEL] = cap(model)
        if server[0] is not None:
            attrs[a.SERVER_ADDRESS] = cap(server[0])
        if server[1] is not None:
            attrs[a.SERVER_PORT] = server[1]
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
        if ledger_unavailable:
            attrs[a.LEDGER_UNAVAILABLE] = True
        links = _lineage_attrs(lineage, attrs) if lineage is not None else None
        _put_reasoning(attrs, req.reasoning)
        _put(attrs, a.TRUNCATION, req.truncation)
        _put(attrs, a.GEN_AI_REQUEST_MAX_TOKENS, req.max_output_tokens)
        name = f"{req.operation} {model}" if model else req.operation
        return self.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs, links=links)

    def _cached(self, key: tuple[object, ...], build: Callable[[], Attributes]) -> Attributes:
        """The attribute dict for ``key``, built once. Metric attributes repeat call after call (a handful of
        operations, models and servers); the SDK only reads them, so one shared dict per key saves building
        and filling a new one per recording. Bounded: cleared when full (a model name per user, say)."""
        attrs = self._attr_cache.get(key)
        if attrs is None:
            if len(self._attr_cache) >= _ATTR_CACHE_SIZE:
                self._attr_cache.clear()
            attrs = self._attr_cache[key] = build()
        return attrs

    def _genai(
        self, operation: str, model: str | None, response_model: str | None, server: Server, provider: str
    ) -> GenAIAttributes:
        """The GenAI client metrics' attribute sets of one call (duration; token usage, input and output), by
        validated names (``bounds``: neither the cache nor the SDK keeps a long or odd string alive), built together
        once per operation, models and server: one lookup per call."""
        host = metric_host(server[0])
        key = (operation, model, response_model, host, server[1], provider)
        sets = self._genai_cache.get(key)
        if sets is None:
            base: Attributes = {a.GEN_AI_OPERATION_NAME: operation, a.GEN_AI_PROVIDER_NAME: provider}
            _put(base, a.GEN_AI_REQUEST_MODEL, model)
            _put(base, a.GEN_AI_RESPONSE_MODEL, response_model)
            _put(base, a.SERVER_ADDRESS, host)
            _put(base, a.SERVER_PORT, server[1])
            sets = GenAIAttributes(base, {**base, _INPUT[0]: _INPUT[1]}, {**base, _OUTPUT[0]: _OUTPUT[1]})
            if len(self._genai_cache) >= _ATTR_CACHE_SIZE:
                self._genai_cache.clear()
            self._genai_cache[key] = sets
        return sets

    def _with_error(self, base: Attributes, error_type: str) -> Attributes:
        """A duration's attributes with ``error.type`` (failures are rare: built each time)."""
        return {**base, a.ERROR_TYPE: metric_code(error_type)}

    def _count_call(
        self, req: RequestFacts, model: str | None, context_loss: bool, store: bool, depth: str | None
    ) -> None:
        """``model``: the validated request model; ``store``: the effective flag (the response body's when it said);
        ``depth``: the turn-depth bucket. The request's ``truncation`` only when it set one (a validated token: few
        values), so a breakdown can show the calls whose context the API may cut itself."""
        mode = req.state_mode
        truncation = req.truncation
        key = ("c", req.operation, context_loss, mode, mode is not None and store, model, depth, truncation)
        attrs = self._attr_cache.get(key)
        if attrs is None:

            def build() -> Attributes:
                built: Attributes = {a.GEN_AI_OPERATION_NAME: req.operation, a.CONTEXT_LOSS: context_loss}
                if mode is not None:
                    built[a.STATE_MODE] = mode
                    built[a.STORE] = store
                _put(built, a.GEN_AI_REQUEST_MODEL, model)
                _put(built, a.TURN_DEPTH, depth)
                _put(built, a.TRUNCATION, truncation)
                return built

            attrs = self._cached(key, build)
        self.calls.add(key, attrs, 1)

    def _count_by_model(
        self, tally: Tally, operation: str, model: str | None, name: str, value: str, amount: int
    ) -> None:
        """Add to a counter by operation, (validated) request model and one more attribute (token kind, direction)."""
        key = ("k", operation, model, name, value)
        attrs = self._attr_cache.get(key)
        if attrs is None:

            def build() -> Attributes:
                built: Attributes = {a.GEN_AI_OPERATION_NAME: operation, name: value}
                _put(built, a.GEN_AI_REQUEST_MODEL, model)
                return built

            attrs = self._cached(key, build)
        tally.add(key, attrs, amount)

    def _count_usage(self, req: RequestFacts, resp: ResponseFacts, model: str | None, genai: GenAIAttributes) -> None:
        """Token usage (the GenAI histogram: input and output), the parts of it the histogram cannot show
        (cached input, reasoning output: for cache-hit and reasoning panels) and encrypted reasoning items sent
        and returned (round trips). Zero counts are not recorded: a counter's missing series reads as zero."""
        if resp.input_tokens is not None:
            self.token_usage.record(resp.input_tokens, genai.input)
        if resp.output_tokens is not None:
            self.token_usage.record(resp.output_tokens, genai.output)
        operation = req.operation
        if resp.cached_tokens:
            self._count_by_model(
                self.tokens, operation, model, a.TOKEN_KIND, a.TOKEN_KIND_CACHED_INPUT, resp.cached_tokens
            )
        if resp.reasoning_tokens:
            self._count_by_model(
                self.tokens, operation, model, a.TOKEN_KIND, a.TOKEN_KIND_REASONING, resp.reasoning_tokens
            )
        if req.encrypted_input_count:
            self._count_by_model(
                self.encrypted_items, operation, model, a.DIRECTION, "input", req.encrypted_input_count
            )
        if resp.encrypted_output_count:
            self._count_by_model(
                self.encrypted_items, operation, model, a.DIRECTION, "output", resp.encrypted_output_count
            )
        if self.settings.prices is not None:
            self._count_cost(req, resp, model)

    def _signals(
        self,
        span: Span,
        req: RequestFacts,
        signals: list[Signal],
        attrs: Attributes,
        model: str | None,
        depth: str | None,
    ) -> bool:
        """Signals into ``attrs`` (one list), one span event each, and the counter; metadata only.

        Returns whether any of them is a context loss."""
        if not signals:
            attrs[a.SIGNALS] = _NO_SIGNALS
            attrs[a.CONTEXT_LOSS] = False
            return False
        context_loss = any(s.severity in LOSS_SEVERITIES for s in signals)
        attrs[a.SIGNALS] = list(dict.fromkeys(s.name for s in signals))
        attrs[a.CONTEXT_LOSS] = context_loss
        for signal in signals:
            span.add_event(  # the detail's ids and item types come from the app or the server: capped
                a.SIGNAL_EVENT,
                {a.SIGNAL_NAME: signal.name, a.SIGNAL_SEVERITY: signal.severity, **cap_attributes(signal.detail)},
            )
            self.signal_counter.add(1, self._signal_attrs(req, signal, model, depth))
        return context_loss

    def _signal_attrs(self, req: RequestFacts, signal: Signal, model: str | None, depth: str | None) -> Attributes:
        def build() -> Attributes:
            attrs: Attributes = {a.SIGNAL_NAME: signal.name, a.SIGNAL_SEVERITY: signal.severity}
            _put(attrs, a.STATE_MODE, req.state_mode)
            _put(attrs, a.GEN_AI_REQUEST_MODEL, model)
            _put(attrs, a.TURN_DEPTH, depth)
            return attrs

        return self._cached(("s", signal.name, signal.severity, req.state_mode, model, depth), build)

    def succeed(
        self,
        span: Span,
        req: RequestFacts,
        resp: ResponseFacts | None,
        seconds: float,
        server: Server,
        signals: list[Signal],
        tool_check: str | None,
        error_type: str | None = None,
        records_usage: bool = True,
        lineage: Lineage | None = None,
        first_chunk: float | None = None,
    ) -> None:
        """Record the response side, then end the span. ``resp`` is None when the body was not read; ``first_chunk``:
        a stream's time to its first chunk, if one came.

        ``error_type`` marks a response that arrived but failed (a stream's ``response.failed``, an ``error``
        event: the server's code, any text), or whose parsing failed (the exception's class name). The span keeps
        it capped; the metric keeps it when it looks like a code, else ``_OTHER``.
        """
        attrs: Attributes = {}
        _put(attrs, a.TOOL_CALLS_CHECK, tool_check)
        store = effective_store(req, resp)
        if req.state_mode is not None and store != req.store:
            attrs[a.STORE] = store  # an organisation default overrode what the request asked
            attrs[a.STORE_REQUESTED] = req.store
        depth = lineage.depth() if lineage is not None else None
        model = metric_model(req.model)
        self._count_call(req, model, self._signals(span, req, signals, attrs, model, depth), store, depth)
        if lineage is not None and lineage.lineage_id is None and resp is not None and resp.response_id is not None:
            _put_text(attrs, a.LINEAGE_ID, lineage.of_response(resp.response_id))  # a first turn names its lineage
        genai = self._genai(
            req.operation, model, metric_model(resp.model) if resp is not None else None, server, req.provider
        )
        if error_type is not None:
            error_type = attrs[a.ERROR_TYPE] = cap(error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))
            self.duration.record(seconds, self._with_error(genai.duration, error_type))
        else:
            self.duration.record(seconds, genai.duration)
        if first_chunk is not None:
            self._first_chunk(attrs, req, model, server, first_chunk)
        if resp is not None:
            self._response_attrs(req, resp, attrs)
        span.set_attributes(attrs)
        if resp is not None and records_usage:
            self._count_usage(req, resp, model, genai)
        span.end()

    def _response_attrs(self, req: RequestFacts, resp: ResponseFacts, attrs: Attributes) -> None:
        if resp.has_output:
            attrs[a.OUTPUT_ITEM_TYPES] = cap_all(bounded_types(resp.output_items, self.settings.max_item_types))
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
        _put(attrs, a.GEN_AI_USAGE_INPUT_TOKENS, resp.input_tokens)
        _put(attrs, a.GEN_AI_USAGE_OUTPUT_TOKENS, resp.output_tokens)
        _put(attrs, a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, resp.cached_tokens)
        _put(attrs, a.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, resp.reasoning_tokens)
        if resp.finish_reason is not None:
            attrs[a.GEN_AI_RESPONSE_FINISH_REASONS] = [cap(resp.finish_reason)]
        if resp.conversation_id is not None and req.conversation_id is None:
            attrs[a.GEN_AI_CONVERSATION_ID] = cap(resp.conversation_id)

    def internal_error(self, step: str) -> None:
        """Count and log (at debug, without the message, which may echo payload) a swallowed failure.

        Call from an ``except`` block."""
        exc = sys.exc_info()[1]
        where = ""
        tb = exc.__traceback__ if exc is not None else None
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f" at {tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
        _log.debug("otel-responses: %s failed (%s%s); the app is unaffected", step, type(exc).__qualname__, where)
        with contextlib.suppress(Exception):  # the metrics SDK itself failing: nothing more to do
            self.internal_errors.add(1, {a.INSTRUMENTATION_STEP: step})

    def _first_chunk(
        self, attrs: Attributes, req: RequestFacts, model: str | None, server: Server, seconds: float
    ) -> None:
        """A stream's time to its first chunk, recorded when the call ends, beside the call's other recordings (one
        attribute write and one recording less in the middle of the stream)."""
        attrs[a.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = seconds
        self.time_to_first_chunk.record(seconds, self._genai(req.operation, model, None, server, req.provider).duration)

    def tag_request_id(self, span: Span, request_id: str | None) -> None:
        """The request id of a response whose body is left unread (a streaming raw response)."""
        if request_id is not None:
            span.set_attribute(a.REQUEST_ID, cap(request_id))

    def annotate(self, span: Span, extra: Mapping[str, AttributeValue]) -> None:
        """Set attributes gathered outside the facts (a stream's request id, how it ended), strings capped."""
        span.set_attributes(cap_attributes(extra))

    def fail(
        self,
        span: Span,
        req: RequestFacts,
        exc: BaseException,
        seconds: float,
        server: Server,
        signals: list[Signal],
        tool_check: str | None,
        lineage: Lineage | None = None,
        first_chunk: float | None = None,
    ) -> None:
        """Mark the span failed with the error's class and safe metadata; its message may echo payload."""
        error_type = cap(type(exc).__qualname__)
        attrs: Attributes = {a.ERROR_TYPE: error_type}
        _put(attrs, a.TOOL_CALLS_CHECK, tool_check)
        depth = lineage.depth() if lineage is not None else None
        model = metric_model(req.model)
        self._count_call(req, model, self._signals(span, req, signals, attrs, model, depth), req.store, depth)
        self.duration.record(
            seconds,
            self._with_error(self._genai(req.operation, model, None, server, req.provider).duration, error_type),
        )
        if first_chunk is not None:
            self._first_chunk(attrs, req, model, server, first_chunk)
        _put_text(attrs, a.REQUEST_ID, _str_attr(exc, "request_id"))
        _put(attrs, a.HTTP_RESPONSE_STATUS_CODE, _int_attr(exc, "status_code"))
        _put_text(attrs, a.ERROR_CODE, _str_attr(exc, "code"))
        span.set_attributes(attrs)
        span.set_status(Status(StatusCode.ERROR, error_type))
        span.end()

    # -- request settings, chunk timing and cost (issue 15, part 4) --------------------------------------------

    def _init_metering(self, meter: Meter) -> None:
        """The instruments of the optional settings, made only when the setting is on."""
        self.time_per_output_chunk = (
            meter.create_histogram(
                a.METRIC_TIME_PER_OUTPUT_CHUNK,
                unit="s",
                description="Time per output chunk, recorded for each chunk received after the first one, measured "
                "as the time elapsed from the end of the previous chunk to the end of the current chunk.",
                explicit_bucket_boundaries_advisory=list(a.DURATION_BUCKETS),
            )
            if self.settings.chunk_timing
            else None
        )
        self.cost: Tally | None = None
        self.cost_saved: Tally | None = None
        if self.settings.prices is not None:
            self.cost = observable_tally(
                meter,
                a.METRIC_COST,
                unit="{currency}",
                description="Cost of the tokens used, from the configured price table, by token kind (input: "
                "uncached input; cached_input; output, reasoning included) in openai_responses.cost.currency.",
            )
            self.cost_saved = observable_tally(
                meter,
                a.METRIC_COST_SAVED,
                unit="{currency}",
                description="What cached input tokens saved against the uncached input price of the price table.",
            )

    def chunk_attributes(self, req: RequestFacts, server: Server) -> Attributes | None:
        """The attributes of a stream's chunk timings (those of the time to first chunk), or None when chunk timing
        is off. Taken once per stream: each later chunk costs one histogram record."""
        if self.time_per_output_chunk is None:
            return None
        return self._genai(req.operation, metric_model(req.model), None, server, req.provider).duration

    def next_chunk(self, seconds: float, attrs: Attributes) -> None:
        """A chunk after the first arrived, ``seconds`` after the previous one."""
        if self.time_per_output_chunk is not None:
            self.time_per_output_chunk.record(seconds, attrs)

    def _count_cost(self, req: RequestFacts, resp: ResponseFacts, model: str | None) -> None:
        """Cost by token kind and the cached-input saving, priced by the response's model (else the request's) and
        service tier (else the request's); nothing without a price table or a price for the model."""
        prices, cost_tally, saved_tally = self.settings.prices, self.cost, self.cost_saved
        if prices is None or cost_tally is None or saved_tally is None:
            return
        tier = resp.service_tier if resp.service_tier is not None else req.service_tier
        price = prices.price(resp.model, tier) if resp.model is not None else None
        if price is None:
            price = prices.price(req.model, tier)
        if price is None:
            return
        cost = cost_of(price, resp.input_tokens, resp.cached_tokens, resp.output_tokens)
        self._add_cost(cost_tally, model, cost.currency, a.TOKEN_KIND_INPUT, cost.input)
        self._add_cost(cost_tally, model, cost.currency, a.TOKEN_KIND_CACHED_INPUT, cost.cached_input)
        self._add_cost(cost_tally, model, cost.currency, a.TOKEN_KIND_OUTPUT, cost.output)
        self._add_cost(saved_tally, model, cost.currency, None, cost.saved)

    def _add_cost(self, tally: Tally, model: str | None, currency: str, kind: str | None, amount: float) -> None:
        """Add to a cost counter by request model, currency and (``cost`` only) token kind; zero adds nothing."""
        if not amount:
            return

        def build() -> Attributes:
            attrs: Attributes = {a.COST_CURRENCY: currency}
            _put(attrs, a.GEN_AI_REQUEST_MODEL, model)
            _put(attrs, a.TOKEN_KIND, kind)
            return attrs

        key = ("$", model, currency, kind)
        tally.add(key, self._cached(key, build), amount)


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
