"""The GenAI conventions' metrics of a call, in the dialect the settings choose: one class per dialect, the same
three duties (a call's end, a stream's chunks, the attribute sets they share).

- ``DefaultDialect``: the names of the conventions' last release in open-telemetry/semantic-conventions (those of
  ``opentelemetry-util-genai`` today), unchanged by default as the conventions' transition plan asks:
  ``gen_ai.client.operation.duration`` for every operation, ``gen_ai.client.token.usage`` by ``gen_ai.token.type``,
  ``gen_ai.client.operation.time_to_first_chunk`` / ``time_per_output_chunk``.
- ``LatestDialect`` (``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``): the newest names.
  Inference (``chat``, ``compact_response``) reports ``gen_ai.client.inference.duration`` and the inference chunk
  timings, every other operation ``gen_ai.client.operation.duration``; tokens are the usage counters with
  ``gen_ai.token.modality=unknown`` (the API's usage has no modality breakdown) and the per-operation histograms,
  both recorded for every inference call, a failed one too, 0 when no usage came. The counters are summed
  in-process (``tally``): five ``Counter.add`` calls per call would cost more than the rest of the dialect; they
  carry no exemplars.

Attribute sets are built once per operation, models, server and provider (``GenAIAttributes``) and shared with the
SDK, which only reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from opentelemetry.context import Context
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.util.types import AttributeValue

from .. import attributes as a
from .tally import observable_tally

if TYPE_CHECKING:
    from .recorded import Outcome
    from .recorded import Recorded as Call

Attributes = dict[str, AttributeValue]
Key = tuple[object, ...]


class GenAIAttributes(NamedTuple):
    """The attribute sets of the GenAI client metrics for one operation, models, server and provider."""

    key: Key  # what they were built for: a tally's series key
    duration: Attributes  # also the chunk timings' and, in the latest dialect, the per-operation token histograms'
    input: Attributes  # default dialect: token usage, `gen_ai.token.type` input
    output: Attributes  # default dialect: token usage, output
    usage: Attributes  # latest dialect: the usage counters', `gen_ai.token.modality` unknown


def genai_attributes(key: Key, base: Attributes) -> GenAIAttributes:
    """Every set for ``base`` (operation, provider, models, server), built together: one lookup per call."""
    return GenAIAttributes(
        key,
        base,
        {**base, a.GEN_AI_TOKEN_TYPE: a.TOKEN_TYPE_INPUT},
        {**base, a.GEN_AI_TOKEN_TYPE: a.TOKEN_TYPE_OUTPUT},
        {**base, a.GEN_AI_TOKEN_MODALITY: a.TOKEN_MODALITY_UNKNOWN},
    )


def _duration_histogram(meter: Meter, name: str, description: str) -> Histogram:
    return meter.create_histogram(
        name, unit="s", description=description, explicit_bucket_boundaries_advisory=list(a.DURATION_BUCKETS)
    )


def _token_histogram(meter: Meter, name: str, description: str) -> Histogram:
    return meter.create_histogram(
        name,
        unit="{token}",
        description=description,
        explicit_bucket_boundaries_advisory=list(a.TOKEN_USAGE_BUCKETS),
    )


_TTFC = "Time from the request to the first chunk of a streamed response."
_TPOC = (
    "Time per output chunk, recorded for each chunk received after the first one, measured as the time elapsed from "
    "the end of the previous chunk to the end of the current chunk."
)


class DefaultDialect:
    """The conventions' last released names: see the module's docstring."""

    latest = False

    def __init__(self, meter: Meter, chunk_timing: bool) -> None:
        self.duration = _duration_histogram(meter, a.METRIC_OPERATION_DURATION, "GenAI operation duration.")
        self.token_usage = _token_histogram(meter, a.METRIC_TOKEN_USAGE, "Number of input and output tokens used.")
        self.time_to_first_chunk = _duration_histogram(meter, a.METRIC_TIME_TO_FIRST_CHUNK, _TTFC)
        self.time_per_output_chunk = (
            _duration_histogram(meter, a.METRIC_TIME_PER_OUTPUT_CHUNK, _TPOC) if chunk_timing else None
        )

    def record(
        self,
        call: Call,
        outcome: Outcome,
        genai: GenAIAttributes,
        first: Attributes,
        failed: Attributes | None,
        context: Context | None,
    ) -> None:
        """The call's duration (``failed``: its attributes with ``error.type``), time to first chunk (``first``: the
        attributes it is recorded with) and, for a response of a call that consumes tokens, its token usage."""
        self.duration.record(call.duration, genai.duration if failed is None else failed, context=context)
        if call.first_chunk is not None:
            self.time_to_first_chunk.record(call.first_chunk, first, context=context)
        resp = outcome.response
        if resp is not None and call.records_usage:
            if resp.input_tokens is not None:
                self.token_usage.record(resp.input_tokens, genai.input, context=context)
            if resp.output_tokens is not None:
                self.token_usage.record(resp.output_tokens, genai.output, context=context)

    def chunk_timing(self, call: Call) -> bool:
        """Whether a stream of this call records its chunk timings: with ``chunk_timing`` on, any stream."""
        return self.time_per_output_chunk is not None


_USAGE = (
    (a.METRIC_USAGE_INPUT_TOKENS, "The number of input (prompt) tokens used, including cached tokens."),
    (a.METRIC_USAGE_OUTPUT_TOKENS, "The number of output (completion) tokens used, including reasoning tokens."),
    (a.METRIC_USAGE_CACHE_READ_INPUT_TOKENS, "The number of input tokens served from a provider-managed cache."),
    (a.METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS, "The number of input tokens written to a provider-managed cache."),
    (a.METRIC_USAGE_REASONING_OUTPUT_TOKENS, "The number of output tokens used for reasoning."),
)


class LatestDialect:
    """The newest names: see the module's docstring."""

    latest = True

    def __init__(self, meter: Meter, chunk_timing: bool) -> None:
        self.duration = _duration_histogram(meter, a.METRIC_OPERATION_DURATION, "GenAI operation duration.")
        self.inference_duration = _duration_histogram(
            meter, a.METRIC_INFERENCE_DURATION, "GenAI client inference operation duration."
        )
        self.time_to_first_chunk = _duration_histogram(meter, a.METRIC_INFERENCE_TIME_TO_FIRST_CHUNK, _TTFC)
        self.time_per_output_chunk = (
            _duration_histogram(meter, a.METRIC_INFERENCE_TIME_PER_OUTPUT_CHUNK, _TPOC) if chunk_timing else None
        )
        self.input_tokens = _token_histogram(
            meter, a.METRIC_OPERATION_INPUT_TOKENS, "The number of input (prompt) tokens used per inference operation."
        )
        self.output_tokens = _token_histogram(
            meter,
            a.METRIC_OPERATION_OUTPUT_TOKENS,
            "The number of output (completion) tokens used per inference operation.",
        )
        # The usage counters, in the order `record` adds to them.
        self.usage = tuple(
            observable_tally(meter, name, unit="{token}", description=description) for name, description in _USAGE
        )

    def record(
        self,
        call: Call,
        outcome: Outcome,
        genai: GenAIAttributes,
        first: Attributes,
        failed: Attributes | None,
        context: Context | None,
    ) -> None:
        """An inference call's duration, time to first chunk and token usage (0 for what no response said), a
        failed one's too; any other call's duration."""
        attrs = genai.duration if failed is None else failed
        if not call.records_usage:
            self.duration.record(call.duration, attrs, context=context)
            return
        self.inference_duration.record(call.duration, attrs, context=context)
        if call.first_chunk is not None:
            self.time_to_first_chunk.record(call.first_chunk, first, context=context)
        resp = outcome.response
        if resp is None:
            inputs = outputs = cached = written = reasoning = 0
        else:
            inputs, outputs, reasoning = resp.input_tokens or 0, resp.output_tokens or 0, resp.reasoning_tokens or 0
            cached, written = resp.cached_tokens or 0, resp.cache_write_tokens or 0
        self.input_tokens.record(inputs, attrs, context=context)
        self.output_tokens.record(outputs, attrs, context=context)
        key, usage = genai.key, genai.usage
        for tally, amount in zip(self.usage, (inputs, outputs, cached, written, reasoning), strict=True):
            tally.add(key, usage, amount)

    def chunk_timing(self, call: Call) -> bool:
        """Whether a stream of this call records its chunk timings: with ``chunk_timing`` on, an inference call's (the
        newest conventions define chunk timings for inference only)."""
        return self.time_per_output_chunk is not None and call.records_usage


GenAIDialect = DefaultDialect | LatestDialect


def genai_dialect(meter: Meter, latest: bool, chunk_timing: bool) -> GenAIDialect:
    """The GenAI conventions' instruments of one ``instrument()``, in the dialect it chose."""
    return LatestDialect(meter, chunk_timing) if latest else DefaultDialect(meter, chunk_timing)
