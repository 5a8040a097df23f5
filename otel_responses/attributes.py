"""Attribute and metric names: the telemetry contract (span attributes, metrics, events), in one place.

Every name is a literal here, so no other module spells one. The GenAI names are those of
open-telemetry/semantic-conventions-genai (``tests/telemetry/test_convention_names.py`` holds each one against the
page and the commit that define it); ``opentelemetry-semantic-conventions`` marks its GenAI constants deprecated, so
none is imported. Two dialects (``OTEL_SEMCONV_STABILITY_OPT_IN``): the default one emits the names of the
conventions' last release in open-telemetry/semantic-conventions (those of ``opentelemetry-util-genai`` today); with
``gen_ai_latest_experimental`` the newest ones. ``DIALECTS`` says which names only one of them emits.
"""

from __future__ import annotations

from typing import Final

# GenAI semantic conventions.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.usage.cache_write.input_tokens"  # only when not 0
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID: Final = "gen_ai.request.previous_response.id"
GEN_AI_CONVERSATION_COMPACTED: Final = "gen_ai.conversation.compacted"
OPENAI_API_TYPE: Final = "openai.api.type"
OPENAI_REQUEST_SERVICE_TIER: Final = "openai.request.service_tier"
OPENAI_RESPONSE_SERVICE_TIER: Final = "openai.response.service_tier"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"

PROVIDER_OPENAI: Final = "openai"
# The GenAI conventions' provider values (literals: the registry's enum moves with the conventions).
PROVIDER_AZURE_OPENAI: Final = "azure.ai.openai"
PROVIDER_AZURE_AI_INFERENCE: Final = "azure.ai.inference"
API_TYPE_RESPONSES: Final = "responses"
OPERATION_CHAT: Final = "chat"
OPERATION_COMPACT: Final = "compact_response"
OPERATION_FETCH: Final = "fetch_response"
OPERATION_CREATE_CONVERSATION_ITEMS: Final = "create_conversation_items"
OPERATION_DELETE_CONVERSATION_ITEM: Final = "delete_conversation_item"
TOKEN_TYPE_INPUT: Final = "input"
TOKEN_TYPE_OUTPUT: Final = "output"

# Project attributes: every one starts with this prefix.
PREFIX: Final = "openai_responses."
REQUEST_ID: Final = "openai_responses.request_id"
STATE_MODE: Final = "openai_responses.state.mode"
STORE: Final = "openai_responses.store"  # effective: the response body's `store` when present, else the request's
STORE_REQUESTED: Final = "openai_responses.store.requested"  # what the request asked, when the body said otherwise
ZDR: Final = "openai_responses.zdr"
# Set (true) when a shared ledger could not be read for this call: its checks used local knowledge only.
LEDGER_UNAVAILABLE: Final = "openai_responses.ledger.unavailable"
# Lineage (see lineage.py): the call's turn, its lineage's id (span attributes) and a turn-depth bucket (metrics).
# A turn is one response of the chain, counted from 1: every call that continues a response is the next turn, a call
# that only carries a tool's output back included, so a question answered after one tool call takes two turns. It
# counts the responses of the chain, not the user's messages; the depth buckets it (1, 2-4, 5-16, 17+).
TURN: Final = "openai_responses.turn"
LINEAGE_ID: Final = "openai_responses.lineage.id"
TURN_DEPTH: Final = "openai_responses.turn.depth"
INSTRUCTIONS_HASH: Final = "openai_responses.instructions.hash"
INSTRUCTIONS_VERSION: Final = "openai_responses.instructions.version"
INPUT_ITEM_TYPES: Final = "openai_responses.input.item_types"
INPUT_ITEM_COUNT: Final = "openai_responses.input.item_count"
OUTPUT_ITEM_TYPES: Final = "openai_responses.output.item_types"
OUTPUT_ITEM_COUNT: Final = "openai_responses.output.item_count"
INCLUDE: Final = "openai_responses.include"
REASONING_ENCRYPTED_REQUESTED: Final = "openai_responses.reasoning.encrypted_requested"
REASONING_ENCRYPTED_INPUT_COUNT: Final = "openai_responses.reasoning.encrypted_input_count"
REASONING_ENCRYPTED_OUTPUT_COUNT: Final = "openai_responses.reasoning.encrypted_output_count"
TOOL_CALLS_CHECK: Final = "openai_responses.tool_calls.check"
COMPACTION: Final = "openai_responses.compaction"
SIGNALS: Final = "openai_responses.signals"
CONTEXT_LOSS: Final = "openai_responses.context_loss"
STREAM_ENDED: Final = "openai_responses.stream.ended"

# Signal events.
SIGNAL_EVENT: Final = "openai_responses.signal"
SIGNAL_NAME: Final = "openai_responses.signal.name"
SIGNAL_SEVERITY: Final = "openai_responses.signal.severity"
# Signal metadata: the parent the request continues, whether the app deleted it, and the latest turn of the lineage
# that sent instructions (its response id and turn), for a turn that sends none.
PARENT_ID: Final = "openai_responses.parent.id"
PARENT_DELETED: Final = "openai_responses.parent.deleted"
# `unstored_parent`: the parent was created under another organization or project than the request names.
PARENT_OTHER_ORGANIZATION: Final = "openai_responses.parent.other_organization"
# `encrypted_content_foreign`: the boundaries a replayed payload crossed since it was minted: `model`,
# `organization`, `project`; once the API confirmed a crossing, also `endpoint` and `credential` when they changed.
ENCRYPTED_CROSSED: Final = "openai_responses.encrypted.crossed"
INSTRUCTIONS_LAST_RESPONSE_ID: Final = "openai_responses.instructions.last_response.id"
INSTRUCTIONS_LAST_TURN: Final = "openai_responses.instructions.last_turn"
MISSING_COUNT: Final = "openai_responses.missing.count"
MISSING_ITEM_TYPES: Final = "openai_responses.missing.item_types"
ITEM_IDS: Final = "openai_responses.item.ids"
CALL_IDS: Final = "openai_responses.call.ids"
HISTORY_EXPECTED_APP_MESSAGES: Final = "openai_responses.history.expected_app_messages"
HISTORY_APP_MESSAGES: Final = "openai_responses.history.app_messages"
DUPLICATED_COUNT: Final = "openai_responses.duplicated.count"
DUPLICATED_ITEM_TYPES: Final = "openai_responses.duplicated.item_types"
DUPLICATED_COUNTS: Final = "openai_responses.duplicated.counts"
INCOMPLETE_REASON: Final = "openai_responses.incomplete.reason"
REASONING_COUNT: Final = "openai_responses.reasoning.count"
# `reasoning_dropped`: the reasoning left out could never have been replayed (an unstored response, no payload).
REASONING_UNREPLAYABLE: Final = "openai_responses.reasoning.unreplayable"
# `replay_incomplete`: the replay kept only the app's messages of the turn it continues, none of what it returned.
REPLAY_MESSAGES_ONLY: Final = "openai_responses.replay.messages_only"
# `duplicate_item_id`: where the API finds the other copy of each id (`input`, `conversation`, `previous_response`).
DUPLICATE_HELD_BY: Final = "openai_responses.duplicate.held_by"
# `reasoning_pair_broken`: for each item named, what of its pair is missing (`reasoning`, `follower`).
PAIR_MISSING: Final = "openai_responses.pair.missing"
# `malformed_item_id`: the input positions of the ids the API refuses, their items' types and what is wrong (`prefix`,
# `characters`, `length`); never the ids themselves, which a client made and may have put anything in.
MALFORMED_POSITIONS: Final = "openai_responses.malformed.positions"
MALFORMED_ITEM_TYPES: Final = "openai_responses.malformed.item_types"
MALFORMED_PROBLEMS: Final = "openai_responses.malformed.problems"
CONFIRMED: Final = "openai_responses.confirmed"  # the API's own error confirmed the signal
LEDGER_SHARED: Final = "openai_responses.ledger.shared"

# Metrics.
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
METRIC_CALLS: Final = "openai_responses.calls"
METRIC_SIGNALS: Final = "openai_responses.signals"
METRIC_TOKENS: Final = "openai_responses.tokens"
METRIC_ENCRYPTED_ITEMS: Final = "openai_responses.reasoning.encrypted_items"
METRIC_INTERNAL_ERRORS: Final = "openai_responses.instrumentation.errors"
INSTRUMENTATION_STEP: Final = "openai_responses.instrumentation.step"
METRIC_PROXY_UNRECORDED: Final = "openai_responses.proxy.unrecorded"
PROXY_REASON: Final = "openai_responses.proxy.reason"
TOKEN_KIND: Final = "openai_responses.token.kind"
# The parts of usage the GenAI token histogram (input, output) cannot show.
TOKEN_KIND_CACHED_INPUT: Final = "cached_input"
TOKEN_KIND_REASONING: Final = "reasoning"
DIRECTION: Final = "openai_responses.direction"

# Advised bucket boundaries of the GenAI conventions.
TOKEN_USAGE_BUCKETS: Final = tuple(float(4**i) for i in range(14))
DURATION_BUCKETS: Final = tuple(0.01 * 2**i for i in range(14))

# Error metadata (never the message, which may echo payload).
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
ERROR_CODE: Final = "openai_responses.error.code"

# --- Request settings, chunk timing and cost -----------------------------------------------------------------
# Reasoning settings of the request, span attributes only (enum-like tokens, never text). The effort is the GenAI
# registry's `gen_ai.request.reasoning.level` (open-telemetry/semantic-conventions-genai#258, which renamed the
# proposed `gen_ai.request.reasoning_effort`); summary, context and mode have no convention: the `openai.*`
# namespace belongs to the conventions, so they are the project's.
GEN_AI_REQUEST_REASONING_LEVEL: Final = "gen_ai.request.reasoning.level"
REASONING_SUMMARY: Final = "openai_responses.reasoning.summary"
REASONING_CONTEXT: Final = "openai_responses.reasoning.context"
REASONING_MODE: Final = "openai_responses.reasoning.mode"
# Streams: one record per chunk after the first, previous chunk's end to this one's (the `chunk_timing` setting).
METRIC_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.operation.time_per_output_chunk"
# Cost, only from the user's price table (`prices`): by token kind (TOKEN_KIND: input = uncached input,
# cached_input, output = output with reasoning), and what cached input saved against the uncached input price.
METRIC_COST: Final = "openai_responses.cost"
METRIC_COST_SAVED: Final = "openai_responses.cost.saved"
COST_CURRENCY: Final = "openai_responses.cost.currency"
TOKEN_KIND_INPUT: Final = "input"
TOKEN_KIND_OUTPUT: Final = "output"

# --- Request settings that decide what the model sees ---------------------------------------------------------
# `truncation` as sent (`auto`: the API itself drops the oldest input items when the context overflows, a loss no
# check can see; `disabled`), a validated token; on the span, and on the calls metric only when the request set it.
TRUNCATION: Final = "openai_responses.truncation"
# `max_output_tokens`, by the GenAI conventions' name (span attribute only).
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"

# --- What the response says the model saw --------------------------------------------------------------------
# `input_transformations`: the replayed reasoning items the API withheld from the model, how many and for which
# reasons (the distinct values, an enum: `turn_boundary`, `model_mismatch`, ...; never an item id). On the span, and
# on the `reasoning_withheld` event for the reasons that make it. The metric counts withheld items by one reason.
REASONING_WITHHELD: Final = "openai_responses.reasoning.withheld"
REASONING_WITHHELD_REASONS: Final = "openai_responses.reasoning.withheld_reasons"
WITHHELD_REASON: Final = "openai_responses.reasoning.withheld_reason"
METRIC_WITHHELD_ITEMS: Final = "openai_responses.reasoning.withheld_items"
# The effective `reasoning.context` the response returns (which earlier reasoning the model is shown): the request's
# value as sent is `REASONING_CONTEXT`.
RESPONSE_REASONING_CONTEXT: Final = "openai_responses.response.reasoning.context"
# `prompt_cache_diagnostics` (a request naming `prompt_cache_options.comparison_response_id`): its type, the reason
# the cache was missed, and the input tokens the miss affected.
PROMPT_CACHE_DIAGNOSTIC_TYPE: Final = "openai_responses.prompt_cache.diagnostic.type"
PROMPT_CACHE_DIAGNOSTIC_REASON: Final = "openai_responses.prompt_cache.diagnostic.reason"
PROMPT_CACHE_MISSED_TOKENS: Final = "openai_responses.prompt_cache.diagnostic.missed_tokens"
# Reasoning of earlier, finished turns a replay left out under an effective `current_turn`: the API renders none of
# it back, so it is no loss (no `reasoning_dropped`), only said.
REASONING_NOT_REPLAYED: Final = "openai_responses.reasoning.not_replayed"
# `history_truncated` from the usage alone: the server itself dropped items (`truncation: "auto"`), and the input
# tokens the state continued held at least.
HISTORY_SERVER_TRUNCATED: Final = "openai_responses.history.server_truncated"
HISTORY_HELD_TOKENS: Final = "openai_responses.history.held_tokens"

# --- What the conventions define about the request and the response (both dialects) ------------------------------
# Request settings, set when the span starts: `stream=True` (only then: unset means not streamed), the output type
# when the request sends `text.format` (`json_schema` and `json_object` -> `json`, `text` -> `text`), `temperature`
# and `top_p` when sent, and the `prompt` parameter's `id` and `version` (never its variables: they are content).
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_OUTPUT_TYPE: Final = "gen_ai.output.type"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
GEN_AI_PROMPT_VERSION: Final = "gen_ai.prompt.version"
OUTPUT_TYPE_JSON: Final = "json"
OUTPUT_TYPE_TEXT: Final = "text"
# `gen_ai.response.finish_reasons` in the conventions' values; the Responses `status` itself is the project's
# attribute (`RESPONSE_STATUS`), on every span of a call that read a response.
FINISH_STOP: Final = "stop"
FINISH_TOOL_CALL: Final = "tool_call"
FINISH_LENGTH: Final = "length"
FINISH_CONTENT_FILTER: Final = "content_filter"
FINISH_ERROR: Final = "error"
RESPONSE_STATUS: Final = "openai_responses.response.status"
# `responses.retrieve` (`fetch_response`): the fetched response's lifecycle status, and the cursor a resumed stream
# starts after (`starting_after`). Its spans carry no token usage: the fetched usage is the original call's.
GEN_AI_RESPONSE_STATUS: Final = "gen_ai.response.status"
GEN_AI_REQUEST_STREAM_CURSOR: Final = "gen_ai.request.stream_cursor"

# --- The newest conventions' metrics (the `gen_ai_latest_experimental` dialect) ------------------------------------
# Inference (`chat`, `compact_response`) reports these instead of `gen_ai.client.operation.*`, which stays for the
# other operations; the usage counters (with `gen_ai.token.modality`: the API's usage has no modality breakdown, so
# `unknown`) and the per-operation histograms replace `gen_ai.client.token.usage`. Every inference call records
# them, a failed one too (0 when no usage came).
METRIC_INFERENCE_DURATION: Final = "gen_ai.client.inference.duration"
METRIC_INFERENCE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.inference.time_to_first_chunk"
METRIC_INFERENCE_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.inference.time_per_output_chunk"
METRIC_USAGE_INPUT_TOKENS: Final = "gen_ai.client.inference.usage.input_tokens"
METRIC_USAGE_OUTPUT_TOKENS: Final = "gen_ai.client.inference.usage.output_tokens"
METRIC_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.client.inference.usage.cache_read.input_tokens"
METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.client.inference.usage.cache_write.input_tokens"
METRIC_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.client.inference.usage.reasoning.output_tokens"
METRIC_OPERATION_INPUT_TOKENS: Final = "gen_ai.client.inference.operation.input_tokens"
METRIC_OPERATION_OUTPUT_TOKENS: Final = "gen_ai.client.inference.operation.output_tokens"
GEN_AI_TOKEN_MODALITY: Final = "gen_ai.token.modality"
TOKEN_MODALITY_UNKNOWN: Final = "unknown"

# --- Which dialect emits a name ----------------------------------------------------------------------------------
#: The names (by constant) only one dialect emits; every other name, both. The default dialect's token histogram,
#: chunk timings and `openai_responses.tokens` (cached input and reasoning: the latest counters cover them).
DIALECTS: Final[dict[str, str]] = {
    **dict.fromkeys(
        (
            "METRIC_TOKEN_USAGE",
            "GEN_AI_TOKEN_TYPE",
            "TOKEN_TYPE_INPUT",
            "TOKEN_TYPE_OUTPUT",
            "METRIC_TIME_TO_FIRST_CHUNK",
            "METRIC_TIME_PER_OUTPUT_CHUNK",
            "METRIC_TOKENS",
            "TOKEN_KIND_REASONING",
        ),
        "default",
    ),
    **dict.fromkeys(
        (
            "METRIC_INFERENCE_DURATION",
            "METRIC_INFERENCE_TIME_TO_FIRST_CHUNK",
            "METRIC_INFERENCE_TIME_PER_OUTPUT_CHUNK",
            "METRIC_USAGE_INPUT_TOKENS",
            "METRIC_USAGE_OUTPUT_TOKENS",
            "METRIC_USAGE_CACHE_READ_INPUT_TOKENS",
            "METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS",
            "METRIC_USAGE_REASONING_OUTPUT_TOKENS",
            "METRIC_OPERATION_INPUT_TOKENS",
            "METRIC_OPERATION_OUTPUT_TOKENS",
            "GEN_AI_TOKEN_MODALITY",
            "TOKEN_MODALITY_UNKNOWN",
        ),
        "latest",
    ),
}


def dialect_of(constant: str) -> str:
    """``default``, ``latest`` or ``both``: which dialect emits the name of ``constant``."""
    return DIALECTS.get(constant, "both")


# --- Signals heard: the GenAI conventions' log events, and sessions -------------------------------------------
# Log events through the OpenTelemetry Logs API (a `LogRecord` with `event_name`, in the call's span context), as
# opentelemetry-util-genai emits its own: `docs/gen-ai/gen-ai-events.md` (open-telemetry/semantic-conventions-genai
# at 002c8a6ea1c8a42b14a4527db83b3cabcded610a) and `docs/gen-ai/gen-ai-exceptions.md` (at
# 255336243987bb0cf5c9901a94f39ec3d7199982). One evaluation result per signal: the evaluation's name is the signal,
# its label the signal's severity, its explanation the catalogue's meaning and fix.
GEN_AI_EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
# A call that failed (an API error, a stream that failed): the exception's type only, never its message or
# stacktrace (both may carry content: Python's formatted traceback ends with the message).
GEN_AI_CLIENT_OPERATION_EXCEPTION_EVENT: Final = "gen_ai.client.operation.exception"
EXCEPTION_TYPE: Final = "exception.type"
# The general session convention (not `gen_ai.conversation.id`, which stays the API's conversation id): the
# lineage id on every span of the lineage, with the `session_id_from_lineage` setting; the app's own `session.id`
# in OpenTelemetry baggage wins.
SESSION_ID: Final = "session.id"

# --- What each name is -----------------------------------------------------------------------------------------
# Beside the names, for the documentation (docs/generate.py writes the list of every name of "What it records" from
# it; tests/project/test_docs.py fails when a constant above has no entry here): where it is recorded, its type, its
# meaning.
# Where: `span` (a span attribute), `event` (an attribute of the `openai_responses.signal` span event), `metric` (an
# attribute of metric points), `span event`, `log event` (an event of the Logs API, or one of its attributes), or a
# metric's instrument and unit; `value`: a value of another name.
MEANINGS: Final[dict[str, tuple[str, str, str]]] = {  # by the constant's name (two share a value)
    "GEN_AI_OPERATION_NAME": (
        "span, metric",
        "string",
        "the operation: `chat`, `compact_response`, `fetch_response`, …",
    ),
    "GEN_AI_PROVIDER_NAME": ("span", "string", "`openai`, or `azure.ai.openai`, or the provider litellm reaches"),
    "GEN_AI_REQUEST_MODEL": ("span, metric", "string", "the model the request named (the Azure deployment)"),
    "GEN_AI_RESPONSE_MODEL": ("span, metric", "string", "the model the response names"),
    "GEN_AI_RESPONSE_ID": ("span", "string", "the response's id"),
    "GEN_AI_RESPONSE_FINISH_REASONS": (
        "span",
        "string[]",
        "why generation ended: `stop`, `tool_call`, `length`, `content_filter` or `error`",
    ),
    "GEN_AI_CONVERSATION_ID": ("span", "string", "the API's conversation id (`conversation` mode only)"),
    "GEN_AI_USAGE_INPUT_TOKENS": ("span", "int", "input tokens"),
    "GEN_AI_USAGE_OUTPUT_TOKENS": ("span", "int", "output tokens, reasoning included"),
    "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS": ("span", "int", "input tokens read from the prompt cache"),
    "GEN_AI_USAGE_REASONING_OUTPUT_TOKENS": ("span", "int", "output tokens spent on reasoning"),
    "GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS": (
        "span",
        "int",
        "input tokens written to the prompt cache (`cache_write_tokens`), when not 0",
    ),
    "GEN_AI_TOKEN_TYPE": ("metric", "string", "`input` or `output`, on `gen_ai.client.token.usage`"),
    "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK": ("span", "double (s)", "a stream's time to its first event"),
    "GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID": ("span", "string", "the request's `previous_response_id`"),
    "GEN_AI_CONVERSATION_COMPACTED": ("span", "bool", "only ever `true`: a compaction item was sent or returned"),
    "OPENAI_API_TYPE": ("span", "string", "`responses`"),
    "OPENAI_REQUEST_SERVICE_TIER": ("span", "string", "the service tier the request asked for"),
    "OPENAI_RESPONSE_SERVICE_TIER": ("span", "string", "the service tier that served the response"),
    "SERVER_ADDRESS": ("span, metric", "string", "the API's host"),
    "SERVER_PORT": ("span", "int", "the API's port"),
    "ERROR_TYPE": ("span, metric", "string", "on failure: the exception's class, or a stream's error code"),
    "PROVIDER_OPENAI": ("value", "", "of `gen_ai.provider.name`: the OpenAI API"),
    "PROVIDER_AZURE_OPENAI": ("value", "", "of `gen_ai.provider.name`: Azure OpenAI"),
    "PROVIDER_AZURE_AI_INFERENCE": ("value", "", "of `gen_ai.provider.name`: Azure AI Inference (through litellm)"),
    "API_TYPE_RESPONSES": ("value", "", "of `openai.api.type`"),
    "OPERATION_CHAT": ("value", "", "of `gen_ai.operation.name`: create, parse, stream, a WebSocket `response.create`"),
    "OPERATION_COMPACT": ("value", "", "of `gen_ai.operation.name`: `responses.compact`"),
    "OPERATION_FETCH": ("value", "", "of `gen_ai.operation.name`: `responses.retrieve`"),
    "OPERATION_CREATE_CONVERSATION_ITEMS": ("value", "", "of `gen_ai.operation.name`: `conversations.items.create`"),
    "OPERATION_DELETE_CONVERSATION_ITEM": ("value", "", "of `gen_ai.operation.name`: `conversations.items.delete`"),
    "TOKEN_TYPE_INPUT": ("value", "", "of `gen_ai.token.type`"),
    "TOKEN_TYPE_OUTPUT": ("value", "", "of `gen_ai.token.type`"),
    "REQUEST_ID": ("span", "string", "the `x-request-id` of the HTTP response (also on errors)"),
    "STATE_MODE": (
        "span, metric",
        "string",
        "`server_chain`, `conversation`, `client_replay`, `single_turn`, or `conflict` (both state fields)",
    ),
    "STORE": ("span, metric", "bool", "the effective store flag: the response body's `store`, else the request's"),
    "STORE_REQUESTED": ("span", "bool", "what the request asked, only when the body's `store` says otherwise"),
    "ZDR": ("span", "bool", "the `zdr` setting"),
    "LEDGER_UNAVAILABLE": (
        "span",
        "bool",
        "`true`: a shared ledger could not be read; the checks used local knowledge",
    ),
    "TURN": (
        "span",
        "int",
        "the call's turn in its lineage: 1 for a first turn, the parent's + 1; absent when unknown",
    ),
    "LINEAGE_ID": ("span", "string", "the conversation id, else the id of the first response of the chain or replay"),
    "TURN_DEPTH": ("metric", "string", "the turn as a bucket: `1`, `2-4`, `5-16`, `17+`"),
    "INSTRUCTIONS_HASH": ("span", "string", "16 hex characters of a keyed BLAKE2b of `instructions`"),
    "INSTRUCTIONS_VERSION": ("span", "string", "the `instructions_version` setting"),
    "INPUT_ITEM_TYPES": ("span", "string[]", "the input items' types in order (at most 128)"),
    "INPUT_ITEM_COUNT": ("span", "int", "the number of input items"),
    "OUTPUT_ITEM_TYPES": ("span", "string[]", "the output items' types in order (at most 128)"),
    "OUTPUT_ITEM_COUNT": ("span", "int", "the number of output items"),
    "INCLUDE": ("span", "string[]", "the request's `include` values"),
    "REASONING_ENCRYPTED_REQUESTED": ("span", "bool", "`reasoning.encrypted_content` is in `include`"),
    "REASONING_ENCRYPTED_INPUT_COUNT": ("span", "int", "reasoning items sent with an encrypted payload"),
    "REASONING_ENCRYPTED_OUTPUT_COUNT": ("span", "int", "reasoning items returned with an encrypted payload"),
    "TOOL_CALLS_CHECK": (
        "span",
        "string",
        "the first failing tool-call signal, else `pending`, `ok` or `none`",
    ),
    "COMPACTION": ("span", "bool", "a compaction item was sent or returned"),
    "SIGNALS": ("span", "string[]", "the names of the signals raised on this call (empty when none)"),
    "CONTEXT_LOSS": ("span, metric", "bool", "a signal of severity `error` or `warning` was raised"),
    "STREAM_ENDED": ("span", "string", "`closed` or `abandoned`: a stream ended before its terminal event"),
    "SIGNAL_EVENT": ("span event", "", "one per signal raised, with its name, severity and metadata"),
    "SIGNAL_NAME": ("event, metric", "string", "the signal's name"),
    "SIGNAL_SEVERITY": ("event, metric", "string", "`error`, `warning` or `info`"),
    "PARENT_ID": ("event", "string", "the parent the request continues"),
    "PARENT_DELETED": ("event", "bool", "`unstored_parent`: the app deleted the parent"),
    "PARENT_OTHER_ORGANIZATION": (
        "event",
        "bool",
        "`unstored_parent`: the parent was created under another organization or project than the request names",
    ),
    "ENCRYPTED_CROSSED": (
        "event",
        "string[]",
        "`encrypted_content_foreign`: what the payload crossed since it was minted: `model`, `organization`, "
        "`project`; once the API confirmed it, `endpoint` and `credential` where they changed",
    ),
    "INSTRUCTIONS_LAST_RESPONSE_ID": ("event", "string", "`instructions_dropped`: the latest response that had them"),
    "INSTRUCTIONS_LAST_TURN": ("event", "int", "`instructions_dropped`: the latest turn that had them"),
    "MISSING_COUNT": ("event", "int", "replay signals: how many items of the earlier response are missing"),
    "MISSING_ITEM_TYPES": ("event", "string[]", "replay signals: the missing items' types"),
    "ITEM_IDS": (
        "event",
        "string[]",
        "the items concerned (`encrypted_content_modified`, `phase_dropped`, `duplicate_item_id`, "
        "`reasoning_pair_broken`)",
    ),
    "CALL_IDS": ("event", "string[]", "tool signals: the `call_id`s concerned"),
    "HISTORY_EXPECTED_APP_MESSAGES": ("event", "int", "`history_truncated`: app messages the replayed response had"),
    "HISTORY_APP_MESSAGES": ("event", "int", "`history_truncated`: app messages the replay kept"),
    "DUPLICATED_COUNT": ("event", "int", "`context_duplicated`: items the server state already holds"),
    "DUPLICATED_ITEM_TYPES": ("event", "string[]", "`context_duplicated`: their types"),
    "DUPLICATED_COUNTS": ("event", "int[]", "`context_duplicated`: how many of each type"),
    "INCOMPLETE_REASON": ("event", "string", "`response_incomplete`: `incomplete_details.reason`"),
    "REASONING_COUNT": ("event", "int", "`reasoning_not_replayable`: reasoning items without a payload"),
    "REASONING_UNREPLAYABLE": (
        "event",
        "bool",
        "`reasoning_dropped`: the reasoning left out could never have been replayed (its response unstored, "
        "no `encrypted_content`)",
    ),
    "REPLAY_MESSAGES_ONLY": (
        "event",
        "bool",
        "`replay_incomplete`: the replay kept only the app's messages of the turn it continues, none of its output",
    ),
    "DUPLICATE_HELD_BY": (
        "event",
        "string[]",
        "`duplicate_item_id`: where the other copy is (`input`, `conversation`, `previous_response`)",
    ),
    "PAIR_MISSING": ("event", "string[]", "`reasoning_pair_broken`: per item named, `reasoning` or `follower` missing"),
    "MALFORMED_POSITIONS": ("event", "int[]", "`malformed_item_id`: the input positions of the ids refused"),
    "MALFORMED_ITEM_TYPES": ("event", "string[]", "`malformed_item_id`: their items' types"),
    "MALFORMED_PROBLEMS": ("event", "string[]", "`malformed_item_id`: `prefix`, `characters` or `length`, per id"),
    "CONFIRMED": ("event", "bool", "the API's own error confirmed the signal"),
    "LEDGER_SHARED": ("event", "bool", "the signal rests on an entry another process wrote to a shared ledger"),
    "METRIC_OPERATION_DURATION": (
        "histogram, s",
        "",
        "each call's duration (GenAI conventions); in the latest dialect, of the calls that are not inference",
    ),
    "METRIC_TOKEN_USAGE": ("histogram, {token}", "", "input and output tokens per call (GenAI conventions)"),
    "METRIC_TIME_TO_FIRST_CHUNK": ("histogram, s", "", "a stream's time to its first event (GenAI conventions)"),
    "METRIC_CALLS": ("counter", "", "calls, by state mode, store, context loss, model, turn depth"),
    "METRIC_SIGNALS": ("counter", "", "signals raised, by name, severity, state mode, model, turn depth"),
    "METRIC_TOKENS": ("counter, {token}", "", "cached input and reasoning tokens (the latest counters cover them)"),
    "METRIC_ENCRYPTED_ITEMS": ("counter", "", "encrypted reasoning items returned and replayed"),
    "METRIC_INTERNAL_ERRORS": ("counter", "", "failures inside the instrumentation (swallowed)"),
    "INSTRUMENTATION_STEP": ("metric", "string", "where inside the instrumentation a failure happened"),
    "METRIC_PROXY_UNRECORDED": ("counter", "", "calls the proxy forwarded without recording them, by reason"),
    "PROXY_REASON": (
        "metric",
        "string",
        "why the proxy forwarded a call unrecorded (a small fixed set: the Proxy page lists them)",
    ),
    "TOKEN_KIND": (
        "metric",
        "string",
        "`cached_input`, `reasoning` (`openai_responses.tokens`); `input`, `cached_input`, `output` (cost)",
    ),
    "TOKEN_KIND_CACHED_INPUT": ("value", "", "of `openai_responses.token.kind`"),
    "TOKEN_KIND_REASONING": ("value", "", "of `openai_responses.token.kind`"),
    "DIRECTION": ("metric", "string", "`output` (returned) or `input` (replayed)"),
    "HTTP_RESPONSE_STATUS_CODE": ("span", "int", "on API errors: the HTTP status"),
    "ERROR_CODE": ("span", "string", "on API errors: the error's `code` (e.g. `previous_response_not_found`)"),
    "GEN_AI_REQUEST_REASONING_LEVEL": ("span", "string", "`reasoning.effort` as sent"),
    "REASONING_SUMMARY": ("span", "string", "`reasoning.summary`: `auto`, `concise`, `detailed`"),
    "REASONING_CONTEXT": (
        "span",
        "string",
        "the request's `reasoning.context` as sent: `all_turns`, `current_turn`, `auto`",
    ),
    "REASONING_MODE": ("span", "string", "`reasoning.mode`: `standard`, `pro`"),
    "METRIC_TIME_PER_OUTPUT_CHUNK": ("histogram, s", "", "time between a stream's chunks (with `chunk_timing`)"),
    "METRIC_COST": ("counter, currency", "", "spend by model and token kind, from your price table only"),
    "METRIC_COST_SAVED": ("counter, currency", "", "what cached input saved against the uncached input price"),
    "COST_CURRENCY": ("metric", "string", "the price table's currency (`USD`, `EUR`, …)"),
    "TOKEN_KIND_INPUT": ("value", "", "of `openai_responses.token.kind` (cost: uncached input)"),
    "TOKEN_KIND_OUTPUT": ("value", "", "of `openai_responses.token.kind` (cost: output, reasoning included)"),
    "TRUNCATION": ("span, metric", "string", "the request's `truncation`: `auto` or `disabled`"),
    "GEN_AI_REQUEST_MAX_TOKENS": ("span", "int", "the request's `max_output_tokens`"),
    "REASONING_WITHHELD": (
        "span, event",
        "int",
        "replayed reasoning items the API withheld from the model (`input_transformations`); on the "
        "`reasoning_withheld` event, those withheld for a mismatch",
    ),
    "REASONING_WITHHELD_REASONS": (
        "span, event",
        "string[]",
        "the distinct reasons of `openai_responses.reasoning.withheld`: `turn_boundary`, `model_mismatch`, "
        "`organization_mismatch`, `end_user_mismatch`, `prefix_mismatch`",
    ),
    "WITHHELD_REASON": ("metric", "string", "one reason the API withheld reasoning for (`input_transformations`)"),
    "METRIC_WITHHELD_ITEMS": (
        "counter",
        "",
        "replayed reasoning items the API withheld from the model, by reason, operation and model",
    ),
    "RESPONSE_REASONING_CONTEXT": (
        "span",
        "string",
        "the effective `reasoning.context` the response returns: `current_turn` or `all_turns`",
    ),
    "REASONING_NOT_REPLAYED": (
        "span",
        "int",
        "reasoning items of earlier, finished turns a replay left out under `current_turn`: the API renders none of "
        "them back, so no `reasoning_dropped`",
    ),
    "PROMPT_CACHE_DIAGNOSTIC_TYPE": (
        "span",
        "string",
        "`prompt_cache_diagnostics.type`: `cache_hit`, `cache_miss`, `comparison_response_not_found`, `unavailable`",
    ),
    "PROMPT_CACHE_DIAGNOSTIC_REASON": (
        "span",
        "string",
        "`prompt_cache_diagnostics.reason` of a miss: `model_changed`, `tools_changed`, `input_changed`, …",
    ),
    "PROMPT_CACHE_MISSED_TOKENS": ("span", "int", "`prompt_cache_diagnostics.cache_missed_tokens` of a miss"),
    "HISTORY_SERVER_TRUNCATED": (
        "event",
        "bool",
        '`history_truncated`: the server dropped items itself (`truncation: "auto"`), seen in the usage',
    ),
    "HISTORY_HELD_TOKENS": (
        "event",
        "int",
        "`history_truncated`: the input tokens the continued state held at least (its usage said fewer)",
    ),
    "GEN_AI_EVALUATION_RESULT_EVENT": ("log event", "", "one per signal raised, in the call's span context"),
    "GEN_AI_EVALUATION_NAME": ("log event", "string", "`gen_ai.evaluation.result`: the signal's name"),
    "GEN_AI_EVALUATION_SCORE_LABEL": (
        "log event",
        "string",
        "`gen_ai.evaluation.result`: the signal's severity, `error`, `warning` or `info`",
    ),
    "GEN_AI_EVALUATION_EXPLANATION": (
        "log event",
        "string",
        "`gen_ai.evaluation.result`: the catalogue's meaning of the signal and its fix (never payload)",
    ),
    "GEN_AI_CLIENT_OPERATION_EXCEPTION_EVENT": (
        "log event",
        "",
        "a call that failed (an API error, a failed stream), at severity `WARN` (13)",
    ),
    "EXCEPTION_TYPE": (
        "log event",
        "string",
        "`gen_ai.client.operation.exception`: the exception's class (`openai.BadRequestError`), or a failed "
        "stream's error code; never its message",
    ),
    "SESSION_ID": (
        "span",
        "string",
        "with `session_id_from_lineage`: the lineage id, or the app's `session.id` from OpenTelemetry baggage",
    ),
    "GEN_AI_REQUEST_STREAM": ("span", "bool", "`true` when the request asked for a stream (never `false`)"),
    "GEN_AI_OUTPUT_TYPE": ("span", "string", "`json` or `text`, when the request sends `text.format`"),
    "GEN_AI_REQUEST_TEMPERATURE": ("span", "double", "the request's `temperature`"),
    "GEN_AI_REQUEST_TOP_P": ("span", "double", "the request's `top_p`"),
    "GEN_AI_PROMPT_NAME": ("span", "string", "the `prompt` parameter's `id` (a stored prompt)"),
    "GEN_AI_PROMPT_VERSION": ("span", "string", "the `prompt` parameter's `version`"),
    "OUTPUT_TYPE_JSON": ("value", "", "of `gen_ai.output.type`: `text.format` `json_schema` or `json_object`"),
    "OUTPUT_TYPE_TEXT": ("value", "", "of `gen_ai.output.type`: `text.format` `text`"),
    "FINISH_STOP": ("value", "", "of `gen_ai.response.finish_reasons`: `completed`, without tool calls to answer"),
    "FINISH_TOOL_CALL": ("value", "", "of `gen_ai.response.finish_reasons`: `completed` with tool calls to answer"),
    "FINISH_LENGTH": ("value", "", "of `gen_ai.response.finish_reasons`: `incomplete`, `max_output_tokens`"),
    "FINISH_CONTENT_FILTER": ("value", "", "of `gen_ai.response.finish_reasons`: `incomplete`, `content_filter`"),
    "FINISH_ERROR": (
        "value",
        "",
        "of `gen_ai.response.finish_reasons`: failed or cancelled, an API error, a stream cut before its end",
    ),
    "RESPONSE_STATUS": ("span", "string", "the response's `status`: `completed`, `incomplete`, `failed`, …"),
    "GEN_AI_RESPONSE_STATUS": ("span", "string", "`fetch_response`: the fetched response's `status`"),
    "GEN_AI_REQUEST_STREAM_CURSOR": ("span", "string", "`fetch_response`: a resumed stream's `starting_after`"),
    "METRIC_INFERENCE_DURATION": ("histogram, s", "", "each inference call's duration (`chat`, `compact_response`)"),
    "METRIC_INFERENCE_TIME_TO_FIRST_CHUNK": ("histogram, s", "", "a stream's time to its first event"),
    "METRIC_INFERENCE_TIME_PER_OUTPUT_CHUNK": (
        "histogram, s",
        "",
        "time between a stream's chunks (with `chunk_timing`)",
    ),
    "METRIC_USAGE_INPUT_TOKENS": ("counter, {token}", "", "input tokens, cached ones included"),
    "METRIC_USAGE_OUTPUT_TOKENS": ("counter, {token}", "", "output tokens, reasoning included"),
    "METRIC_USAGE_CACHE_READ_INPUT_TOKENS": ("counter, {token}", "", "input tokens read from the prompt cache"),
    "METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS": ("counter, {token}", "", "input tokens written to the prompt cache"),
    "METRIC_USAGE_REASONING_OUTPUT_TOKENS": ("counter, {token}", "", "output tokens spent on reasoning"),
    "METRIC_OPERATION_INPUT_TOKENS": ("histogram, {token}", "", "input tokens per inference call"),
    "METRIC_OPERATION_OUTPUT_TOKENS": ("histogram, {token}", "", "output tokens per inference call"),
    "GEN_AI_TOKEN_MODALITY": ("metric", "string", "`unknown` (the API's usage has no modality breakdown)"),
    "TOKEN_MODALITY_UNKNOWN": ("value", "", "of `gen_ai.token.modality`"),
}

# Every telemetry name (each documented in ``MEANINGS``, which the docs test holds to the constants), and the tables.
__all__ = [*MEANINGS, "DIALECTS", "DURATION_BUCKETS", "MEANINGS", "PREFIX", "TOKEN_USAGE_BUCKETS", "dialect_of"]
