"""The metrics of a call, recorded once when it ends, from the call and how it ended: duration, time to first chunk,
token usage (the GenAI conventions' instruments, in the dialect the settings choose: ``genai_metrics``), the calls
and signals counters, tokens the default dialect's usage histogram cannot show, encrypted reasoning round trips and,
with a price table, cost.

Every recording is made in the context of the call's own span, so exemplars lead to that span (not to whatever span
the app has open). Attribute sets repeat call after call: each is built once per key, from validated names
(``bounds``), and shared with the SDK, which only reads them. Per-call counters with many recordings per call are
summed in-process (``tally``) and read at collection; the signals counter stays synchronous for its exemplars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.metrics import Meter
from opentelemetry.util.types import AttributeValue

from .. import attributes as a
from .._analysis.facts import RequestFacts, ResponseFacts
from .bounds import metric_code, metric_host, metric_model
from .genai_metrics import GenAIAttributes, genai_attributes, genai_dialect
from .recording import Recording
from .tally import Tally, observable_tally

if TYPE_CHECKING:
    from ..signals import Signal
    from .recorded import Outcome, Server
    from .recorded import Recorded as Call

Attributes = dict[str, AttributeValue]

_CACHE_SIZE = 1024


class Metrics:
    """The instruments of one ``instrument()`` and what a call records on them."""

    def __init__(self, meter: Meter, settings: Recording) -> None:
        self.settings = settings
        self._cache: dict[tuple[object, ...], Attributes] = {}
        self._genai_cache: dict[tuple[object, ...], GenAIAttributes] = {}
        self.genai = genai_dialect(meter, settings.latest_semconv, settings.chunk_timing)
        self.calls = observable_tally(
            meter,
            a.METRIC_CALLS,
            unit="{call}",
            description="Responses API calls by state mode, store flag, operation and truncation setting.",
        )
        # The latest dialect's usage counters cover cached input and reasoning: this counter is the default's only.
        self.tokens = (
            None
            if settings.latest_semconv
            else observable_tally(
                meter,
                a.METRIC_TOKENS,
                unit="{token}",
                description="Tokens the GenAI usage histogram cannot show: cached_input (a part of input) and "
                "reasoning (a part of output).",
            )
        )
        self.encrypted_items = observable_tally(
            meter,
            a.METRIC_ENCRYPTED_ITEMS,
            unit="{item}",
            description="Reasoning items carrying encrypted_content, returned (output) and replayed (input).",
        )
        self.withheld = observable_tally(
            meter,
            a.METRIC_WITHHELD_ITEMS,
            unit="{item}",
            description="Replayed reasoning items the API withheld from the model (input_transformations), by reason.",
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
        self.cost: Tally | None = None
        self.cost_saved: Tally | None = None
        if settings.prices is not None:
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

    # -- one call ---------------------------------------------------------------------------------------------

    def record(self, call: Call, outcome: Outcome, error_type: str | None, context_loss: bool, store: bool) -> None:
        """Everything the call records, in the context of its span. ``store``: the effective flag (the response
        body's when it said); ``error_type``: the span's ``error.type``, if any."""
        req, resp, context = call.req, outcome.response, call.context
        model = metric_model(req.model)
        depth = call.lineage.depth()
        for signal in call.signals:
            self.signal_counter.add(1, self._signal_attrs(req, signal, model, depth), context=context)
        self._count_call(req, model, context_loss, store, depth)
        response_model = metric_model(resp.model) if resp is not None else None
        genai = self._genai(req.operation, model, response_model, call.server, req.provider)
        failed = None if error_type is None else {**genai.duration, a.ERROR_TYPE: metric_code(error_type)}
        first = genai.duration
        if call.first_chunk is not None and response_model is not None:
            first = self._genai_base(call, model).duration  # as the chunk timings: known when the first chunk came
        self.genai.record(call, outcome, genai, first, failed, context)
        if resp is not None and call.records_usage:
            self._count_usage(req, resp, model)

    def _genai_base(self, call: Call, model: str | None) -> GenAIAttributes:
        return self._genai(call.req.operation, model, None, call.server, call.req.provider)

    def chunk_attributes(self, call: Call) -> Attributes | None:
        """The attributes of a stream's chunk timings (those of the time to first chunk), or None when chunk timing
        is off. Taken once per stream: each later chunk costs one histogram record."""
        if not self.genai.chunk_timing(call):
            return None
        return self._genai_base(call, metric_model(call.req.model)).duration

    def next_chunk(self, seconds: float, attrs: Attributes, context: Context | None) -> None:
        """A chunk after the first arrived, ``seconds`` after the previous one."""
        histogram = self.genai.time_per_output_chunk
        if histogram is not None:
            histogram.record(seconds, attrs, context=context)

    # -- attribute sets -----------------------------------------------------------------------------------------

    def _cached(self, key: tuple[object, ...], build: Callable[[], Attributes]) -> Attributes:
        """The attribute dict for ``key``, built once (bounded: cleared when full, a model name per user, say)."""
        attrs = self._cache.get(key)
        if attrs is None:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            attrs = self._cache[key] = build()
        return attrs

    def _genai(
        self, operation: str, model: str | None, response_model: str | None, server: Server, provider: str
    ) -> GenAIAttributes:
        """The GenAI client metrics' attribute sets of one call, built together once per operation, models, server and
        provider: one lookup per call."""
        host = metric_host(server.address)
        key = (operation, model, response_model, host, server.port, provider)
        sets = self._genai_cache.get(key)
        if sets is None:
            base: Attributes = {a.GEN_AI_OPERATION_NAME: operation, a.GEN_AI_PROVIDER_NAME: provider}
            _put(base, a.GEN_AI_REQUEST_MODEL, model)
            _put(base, a.GEN_AI_RESPONSE_MODEL, response_model)
            _put(base, a.SERVER_ADDRESS, host)
            _put(base, a.SERVER_PORT, server.port)
            sets = genai_attributes(key, base)
            if len(self._genai_cache) >= _CACHE_SIZE:
                self._genai_cache.clear()
            self._genai_cache[key] = sets
        return sets

    def _signal_attrs(self, req: RequestFacts, signal: Signal, model: str | None, depth: str | None) -> Attributes:
        def build() -> Attributes:
            attrs: Attributes = {a.SIGNAL_NAME: signal.name, a.SIGNAL_SEVERITY: signal.severity}
            _put(attrs, a.STATE_MODE, req.state_mode)
            _put(attrs, a.GEN_AI_REQUEST_MODEL, model)
            _put(attrs, a.TURN_DEPTH, depth)
            return attrs

        return self._cached(("s", signal.name, signal.severity, req.state_mode, model, depth), build)

    def _count_call(
        self, req: RequestFacts, model: str | None, context_loss: bool, store: bool, depth: str | None
    ) -> None:
        """The calls counter, by operation, context loss, state mode and store, model, turn depth, and the request's
        ``truncation`` when it set one (a validated token: few values), so a breakdown shows the calls whose context
        the API may cut itself."""
        mode, truncation = req.state_mode, req.truncation
        key = ("c", req.operation, context_loss, mode, mode is not None and store, model, depth, truncation)
        attrs = self._cache.get(key)
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
        attrs = self._cache.get(key)
        if attrs is None:

            def build() -> Attributes:
                built: Attributes = {a.GEN_AI_OPERATION_NAME: operation, name: value}
                _put(built, a.GEN_AI_REQUEST_MODEL, model)
                return built

            attrs = self._cached(key, build)
        tally.add(key, attrs, amount)

    def _count_usage(self, req: RequestFacts, resp: ResponseFacts, model: str | None) -> None:
        """The project's counters of a response's usage: the parts of it the default dialect's histogram cannot show
        (cached input, reasoning output), encrypted reasoning items sent and returned, reasoning the API withheld,
        cost. Zero counts are not recorded: a counter's missing series reads as zero."""
        operation, tokens = req.operation, self.tokens
        if tokens is not None:
            if resp.cached_tokens:
                self._count_by_model(
                    tokens, operation, model, a.TOKEN_KIND, a.TOKEN_KIND_CACHED_INPUT, resp.cached_tokens
                )
            if resp.reasoning_tokens:
                self._count_by_model(
                    tokens, operation, model, a.TOKEN_KIND, a.TOKEN_KIND_REASONING, resp.reasoning_tokens
                )
        if req.encrypted_input_count:
            self._count_by_model(
                self.encrypted_items, operation, model, a.DIRECTION, "input", req.encrypted_input_count
            )
        if resp.encrypted_output_count:
            self._count_by_model(
                self.encrypted_items, operation, model, a.DIRECTION, "output", resp.encrypted_output_count
            )
        for reason, count in resp.withheld:
            self._count_by_model(self.withheld, operation, model, a.WITHHELD_REASON, reason, count)
        if self.settings.prices is not None:
            self._count_cost(req, resp, model)

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
        from .pricing import cost_of  # loaded with a price table only

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


def _put(attrs: Attributes, key: str, value: AttributeValue | None) -> None:
    if value is not None:
        attrs[key] = value
