"""Every name this package takes from the GenAI semantic conventions, held against the page of
open-telemetry/semantic-conventions-genai that defines it, at the commit read (the same table as the Dialects section
of docs/records.md): a literal in attributes.py that drifts from the page fails here, and so does a new GenAI name
added without its page. The default dialect's names are those the migration guide says were renamed or removed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from otel_responses import attributes as a

ROOT = Path(__file__).resolve().parents[2]
RECORDS = (ROOT / "docs" / "records.md").read_text()

# The pages read, at the commits cited in docs/records.md.
INFERENCE = ("docs/gen-ai/client-inference.md", "024a4f944a1291fcb627c9c47da69e79868dd15e")
TOKENS = ("docs/gen-ai/gen-ai-token-metrics.md", "066d4a7f356f8600de6f10c42874626ab88692fb")
SPANS = ("docs/gen-ai/gen-ai-spans.md", "024a4f944a1291fcb627c9c47da69e79868dd15e")
MIGRATION = ("docs/gen-ai/non-normative/migration.md", "32c328e85013588c6fe32ebc30934ab5b1752b6a")
OPENAI = ("docs/gen-ai/openai.md", "5bc5dd3cb0a126dfa335e72f8e337c5634ddf9ff")
MESSAGES = ("model/gen-ai/gen-ai-output-messages.json", "2b902ce14e7fa9d3d97cac49de02bae6917c02ae")
# The log events' pages, at the commits docs/events.md cites (the Signals heard page).
EVENTS = ("docs/gen-ai/gen-ai-events.md", "002c8a6ea1c8a42b14a4527db83b3cabcded610a")
EXCEPTIONS = ("docs/gen-ai/gen-ai-exceptions.md", "255336243987bb0cf5c9901a94f39ec3d7199982")
EVENTS_PAGE = (ROOT / "docs" / "events.md").read_text()

# (constant, the name as the page spells it, the page). Values of an enum-like attribute are rows too.
CONVENTIONS: list[tuple[str, str, tuple[str, str]]] = [
    # The inference span (client-inference.md, "Span: gen_ai.client.inference").
    ("GEN_AI_OPERATION_NAME", "gen_ai.operation.name", INFERENCE),
    ("GEN_AI_PROVIDER_NAME", "gen_ai.provider.name", INFERENCE),
    ("GEN_AI_REQUEST_MODEL", "gen_ai.request.model", INFERENCE),
    ("GEN_AI_RESPONSE_MODEL", "gen_ai.response.model", INFERENCE),
    ("GEN_AI_RESPONSE_ID", "gen_ai.response.id", INFERENCE),
    ("GEN_AI_RESPONSE_FINISH_REASONS", "gen_ai.response.finish_reasons", INFERENCE),
    ("GEN_AI_CONVERSATION_ID", "gen_ai.conversation.id", INFERENCE),
    ("GEN_AI_CONVERSATION_COMPACTED", "gen_ai.conversation.compacted", INFERENCE),
    ("GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID", "gen_ai.request.previous_response.id", INFERENCE),
    ("GEN_AI_REQUEST_REASONING_LEVEL", "gen_ai.request.reasoning.level", INFERENCE),
    ("GEN_AI_REQUEST_MAX_TOKENS", "gen_ai.request.max_tokens", INFERENCE),
    ("GEN_AI_REQUEST_STREAM", "gen_ai.request.stream", INFERENCE),
    ("GEN_AI_REQUEST_TEMPERATURE", "gen_ai.request.temperature", INFERENCE),
    ("GEN_AI_REQUEST_TOP_P", "gen_ai.request.top_p", INFERENCE),
    ("GEN_AI_OUTPUT_TYPE", "gen_ai.output.type", INFERENCE),
    ("OUTPUT_TYPE_JSON", "json", INFERENCE),
    ("OUTPUT_TYPE_TEXT", "text", INFERENCE),
    ("GEN_AI_PROMPT_NAME", "gen_ai.prompt.name", INFERENCE),
    ("GEN_AI_PROMPT_VERSION", "gen_ai.prompt.version", INFERENCE),
    ("GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK", "gen_ai.response.time_to_first_chunk", INFERENCE),
    ("GEN_AI_USAGE_INPUT_TOKENS", "gen_ai.usage.input_tokens", INFERENCE),
    ("GEN_AI_USAGE_OUTPUT_TOKENS", "gen_ai.usage.output_tokens", INFERENCE),
    ("GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS", "gen_ai.usage.cache_read.input_tokens", INFERENCE),
    ("GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS", "gen_ai.usage.cache_write.input_tokens", INFERENCE),
    ("GEN_AI_USAGE_REASONING_OUTPUT_TOKENS", "gen_ai.usage.reasoning.output_tokens", INFERENCE),
    ("SERVER_ADDRESS", "server.address", INFERENCE),
    ("SERVER_PORT", "server.port", INFERENCE),
    ("ERROR_TYPE", "error.type", INFERENCE),
    ("OPERATION_CHAT", "chat", INFERENCE),
    ("PROVIDER_OPENAI", "openai", INFERENCE),
    ("PROVIDER_AZURE_OPENAI", "azure.ai.openai", INFERENCE),
    ("PROVIDER_AZURE_AI_INFERENCE", "azure.ai.inference", INFERENCE),
    # Its metrics.
    ("METRIC_INFERENCE_DURATION", "gen_ai.client.inference.duration", INFERENCE),
    ("METRIC_INFERENCE_TIME_TO_FIRST_CHUNK", "gen_ai.client.inference.time_to_first_chunk", INFERENCE),
    ("METRIC_INFERENCE_TIME_PER_OUTPUT_CHUNK", "gen_ai.client.inference.time_per_output_chunk", INFERENCE),
    # The token metrics (gen-ai-token-metrics.md).
    ("METRIC_USAGE_INPUT_TOKENS", "gen_ai.client.inference.usage.input_tokens", TOKENS),
    ("METRIC_USAGE_OUTPUT_TOKENS", "gen_ai.client.inference.usage.output_tokens", TOKENS),
    ("METRIC_USAGE_CACHE_READ_INPUT_TOKENS", "gen_ai.client.inference.usage.cache_read.input_tokens", TOKENS),
    ("METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS", "gen_ai.client.inference.usage.cache_write.input_tokens", TOKENS),
    ("METRIC_USAGE_REASONING_OUTPUT_TOKENS", "gen_ai.client.inference.usage.reasoning.output_tokens", TOKENS),
    ("METRIC_OPERATION_INPUT_TOKENS", "gen_ai.client.inference.operation.input_tokens", TOKENS),
    ("METRIC_OPERATION_OUTPUT_TOKENS", "gen_ai.client.inference.operation.output_tokens", TOKENS),
    ("GEN_AI_TOKEN_MODALITY", "gen_ai.token.modality", TOKENS),
    ("TOKEN_MODALITY_UNKNOWN", "unknown", TOKENS),
    # The fetch-response span (gen-ai-spans.md, "Fetch response").
    ("OPERATION_FETCH", "fetch_response", SPANS),
    ("GEN_AI_RESPONSE_STATUS", "gen_ai.response.status", SPANS),
    ("GEN_AI_REQUEST_STREAM_CURSOR", "gen_ai.request.stream_cursor", SPANS),
    # The default dialect: the names the migration guide says inference left (#521) or were removed (#374).
    ("METRIC_OPERATION_DURATION", "gen_ai.client.operation.duration", MIGRATION),
    ("METRIC_TIME_TO_FIRST_CHUNK", "gen_ai.client.operation.time_to_first_chunk", MIGRATION),
    ("METRIC_TIME_PER_OUTPUT_CHUNK", "gen_ai.client.operation.time_per_output_chunk", MIGRATION),
    ("METRIC_TOKEN_USAGE", "gen_ai.client.token.usage", MIGRATION),
    ("GEN_AI_TOKEN_TYPE", "gen_ai.token.type", MIGRATION),
    ("TOKEN_TYPE_INPUT", "input", MIGRATION),
    ("TOKEN_TYPE_OUTPUT", "output", MIGRATION),
    # The OpenAI page.
    ("OPENAI_API_TYPE", "openai.api.type", OPENAI),
    ("API_TYPE_RESPONSES", "responses", OPENAI),
    ("OPENAI_REQUEST_SERVICE_TIER", "openai.request.service_tier", OPENAI),
    ("OPENAI_RESPONSE_SERVICE_TIER", "openai.response.service_tier", OPENAI),
    # The finish reasons' values (the output messages' FinishReason enum).
    ("FINISH_STOP", "stop", MESSAGES),
    ("FINISH_TOOL_CALL", "tool_call", MESSAGES),
    ("FINISH_LENGTH", "length", MESSAGES),
    ("FINISH_CONTENT_FILTER", "content_filter", MESSAGES),
    ("FINISH_ERROR", "error", MESSAGES),
    # The log events.
    ("GEN_AI_EVALUATION_RESULT_EVENT", "gen_ai.evaluation.result", EVENTS),
    ("GEN_AI_EVALUATION_NAME", "gen_ai.evaluation.name", EVENTS),
    ("GEN_AI_EVALUATION_SCORE_LABEL", "gen_ai.evaluation.score.label", EVENTS),
    ("GEN_AI_EVALUATION_EXPLANATION", "gen_ai.evaluation.explanation", EVENTS),
    ("GEN_AI_CLIENT_OPERATION_EXCEPTION_EVENT", "gen_ai.client.operation.exception", EXCEPTIONS),
    ("EXCEPTION_TYPE", "exception.type", EXCEPTIONS),
]

# Names of the general conventions this package uses without a GenAI page: the HTTP status code, the session.
OTHER_CONVENTIONS = {"HTTP_RESPONSE_STATUS_CODE": "http.response.status_code", "SESSION_ID": "session.id"}
# Values of the conventions' attributes that name this package's own operations (custom values are allowed).
OWN_VALUES = {"OPERATION_COMPACT", "OPERATION_CREATE_CONVERSATION_ITEMS", "OPERATION_DELETE_CONVERSATION_ITEM"}


@pytest.mark.parametrize(("constant", "name", "page"), CONVENTIONS, ids=[row[0] for row in CONVENTIONS])
def test_each_name_is_what_its_page_spells(constant: str, name: str, page: tuple[str, str]) -> None:
    assert getattr(a, constant) == name
    if page in (EVENTS, EXCEPTIONS):  # the log events' pages are cited where the events are documented
        assert f"`{page[0]}`" in EVENTS_PAGE, page
        assert f"`{page[1]}`" in EVENTS_PAGE, page
    else:
        assert page in _cited_pages(), f"{page[0]} at {page[1]} is not cited in docs/records.md"


def _cited_pages() -> set[tuple[str, str]]:
    """(page, commit) of every row of the Dialects section's table of docs/records.md."""
    section = RECORDS.split("\n## Dialects {#dialects}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \| `([0-9a-f]{40})` \|", section, re.M))


def test_every_convention_name_in_attributes_has_its_page() -> None:
    """A GenAI (or OpenAI, server, error) name added to attributes.py without a row above fails: no name of the
    conventions is spelled without the page that defines it."""
    cited = {row[0] for row in CONVENTIONS} | set(OTHER_CONVENTIONS) | OWN_VALUES
    names = {k: v for k, v in vars(a).items() if k.isupper() and isinstance(v, str)}

    def foreign(constant: str, value: str) -> bool:
        where, _, meaning = a.MEANINGS.get(constant, ("", "", ""))
        if where == "value":  # a value of which attribute: "of `gen_ai.token.type`"
            of = re.match(r"of `([^`]+)`", meaning)
            return of is not None and not of.group(1).startswith(a.PREFIX)
        return not value.startswith(a.PREFIX)

    assert {k for k, v in names.items() if k != "PREFIX" and foreign(k, v)} - cited == set()
    assert {row[0] for row in CONVENTIONS} <= set(names)
    for constant, value in OTHER_CONVENTIONS.items():
        assert names[constant] == value


def test_the_cited_commits_are_the_ones_this_table_reads() -> None:
    pages = {INFERENCE, TOKENS, SPANS, MIGRATION, OPENAI, MESSAGES}
    assert _cited_pages() == pages


def test_dialects_name_only_constants_that_exist_and_tell_the_dialects_apart() -> None:
    """Each name of one dialect is a constant, and the renamed metrics sit on either side: the default dialect's
    the migration guide's old names, the latest one's the new pages'."""
    names = {k for k, v in vars(a).items() if k.isupper() and isinstance(v, str)}
    assert set(a.DIALECTS) <= names
    assert set(a.DIALECTS.values()) == {"default", "latest"}
    pages = {constant: page for constant, _, page in CONVENTIONS}
    for constant, dialect in a.DIALECTS.items():
        if constant in pages and constant.startswith("METRIC_"):
            assert (pages[constant] == MIGRATION) == (dialect == "default"), constant
    assert a.dialect_of("METRIC_OPERATION_DURATION") == "both"  # kept for the operations that are not inference
    assert a.dialect_of("METRIC_TOKENS") == "default"  # the latest counters cover cached input and reasoning
    assert a.dialect_of("GEN_AI_REQUEST_STREAM") == "both"


def test_no_name_comes_from_the_deprecated_incubating_modules() -> None:
    """attributes.py imports nothing but typing: every name is a literal there."""
    tree = ast.parse((ROOT / "otel_responses" / "attributes.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"__future__", "typing"}
