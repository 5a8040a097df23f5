"""What the GenAI conventions define of a request and a response, in both dialects: ``gen_ai.request.stream``,
``gen_ai.output.type`` (only with ``text.format``), ``temperature`` and ``top_p``, ``gen_ai.prompt.name`` /
``version`` from the ``prompt`` parameter (never its variables), finish reasons in the conventions' values (the
Responses ``status`` in the package's own attribute), and on ``fetch_response`` spans the fetched status, the
resumed stream's cursor and no token usage. Rows of real request and response shapes with their near misses, then
the real client against the emulator."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import openai
import pydantic
import pytest
from opentelemetry.trace import StatusCode

from otel_responses import attributes as a
from otel_responses._analysis.facts import ResponseFacts, output_type, request_facts, stored_prompt
from otel_responses._fingerprint import Fingerprinter
from otel_responses._items import item_meta
from otel_responses._telemetry.spans import finish_reason
from otel_responses.config import settings_from
from otel_responses.emulator import Emulator
from otel_responses.testing import capture

MODEL = "gpt-4.1-mini"
LATEST = "gen_ai_latest_experimental"
VARIABLES_SECRET = "VARIABLE-SECRET-3f9a"
UNSET = getattr(openai, "omit", openai.NOT_GIVEN)  # the SDK's sentinel for a parameter left out (`omit` in newer SDKs)


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


class Answer(pydantic.BaseModel):
    marker: str


# -- the request's facts -------------------------------------------------------------------------------------------

OUTPUT_TYPE_ROWS: list[tuple[dict[str, Any], str | None]] = [
    ({"text": {"format": {"type": "json_schema", "name": "a", "schema": {}}}}, "json"),
    ({"text": {"format": {"type": "json_object"}}}, "json"),
    ({"text": {"format": {"type": "text"}}}, "text"),
    ({"text": {"verbosity": "low"}}, None),  # text settings without a format: no output type asked
    ({"text": {"format": {"type": "yaml"}}}, None),  # a type the conventions do not map
    ({"text": UNSET}, None),  # what responses.stream() passes when unset
    ({}, None),
    ({"text_format": Answer}, "json"),  # parse()/stream(): the SDK sends a json_schema format
    ({"text_format": UNSET}, None),
    ({"extra_body": {"text": {"format": {"type": "json_object"}}}}, "json"),  # sent in its place
    ({"text": {"format": {"type": "json_schema"}}, "extra_body": {"text": {"format": {"type": "text"}}}}, "text"),
]


@pytest.mark.parametrize(("kwargs", "expected"), OUTPUT_TYPE_ROWS)
def test_output_type_only_when_the_request_sends_a_format(kwargs: dict[str, Any], expected: str | None) -> None:
    assert output_type(kwargs) == expected


PROMPT_ROWS: list[tuple[dict[str, Any], tuple[str | None, str | None] | None]] = [
    ({"prompt": {"id": "pmpt_123", "version": "2", "variables": {"name": VARIABLES_SECRET}}}, ("pmpt_123", "2")),
    ({"prompt": {"id": "pmpt_123"}}, ("pmpt_123", None)),  # the latest version: no version sent
    ({"prompt": {"version": "2"}}, None),  # no id: no prompt name, so no version either
    ({"prompt": {"id": 123, "version": "2"}}, None),  # not a string
    ({"prompt": {"id": "", "version": "2"}}, None),
    ({"prompt": UNSET}, None),
    ({"prompt": None}, None),
    ({}, None),
    ({"extra_body": {"prompt": {"id": "pmpt_9", "version": "1"}}}, ("pmpt_9", "1")),
]


@pytest.mark.parametrize(("kwargs", "expected"), PROMPT_ROWS)
def test_prompt_name_and_version_from_the_prompt_parameter(
    kwargs: dict[str, Any], expected: tuple[str | None, str | None] | None
) -> None:
    assert stored_prompt(kwargs) == expected


SAMPLING_ROWS: list[tuple[object, float | None]] = [
    (0.2, 0.2),
    (1, 1.0),
    (0, 0.0),
    (True, None),  # a bool is no number here
    ("0.2", None),  # text is not sent as a number
    (math.nan, None),
    (math.inf, None),
    (UNSET, None),
    (None, None),
]


@pytest.mark.parametrize(("value", "expected"), SAMPLING_ROWS)
def test_temperature_and_top_p_as_sent(value: object, expected: float | None) -> None:
    settings = settings_from({})
    facts = request_facts("chat", {"model": MODEL, "input": "hi", "temperature": value, "top_p": value}, settings)
    assert facts.temperature == expected
    assert facts.top_p == expected


# -- finish reasons ------------------------------------------------------------------------------------------------

_KEY = Fingerprinter(b"k" * 32)
MESSAGE = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []}
FUNCTION_CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"}
WEB_SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed"}


def response(status: str | None, reason: str | None = None, *items: dict[str, Any]) -> ResponseFacts:
    """The facts of a response shaped as the API returns it (``finish_reason``: the incomplete reason, else the
    status, as ``response_facts`` reads them)."""
    outputs = tuple(item_meta(item, _KEY) for item in items)
    return replace(ResponseFacts.empty(), status=status, finish_reason=reason or status, output_items=outputs)


FINISH_ROWS: list[tuple[ResponseFacts | None, bool, str | None]] = [
    (response("completed", None, MESSAGE), False, "stop"),
    (response("completed", None, FUNCTION_CALL), False, "tool_call"),  # calls the app must answer
    (response("completed", None, WEB_SEARCH, MESSAGE), False, "stop"),  # a hosted tool: the API ran it
    (response("incomplete", "max_output_tokens"), False, "length"),
    (response("incomplete", "content_filter"), False, "content_filter"),
    (response("incomplete", "a_new_reason"), False, "a_new_reason"),  # another reason: as sent
    (response("incomplete"), False, None),  # no reason given: none invented
    (response("failed"), False, "error"),
    (response("cancelled"), False, "error"),
    (response("queued"), False, None),  # a background response still running
    (response("in_progress"), False, None),
    (response(None), False, None),  # a compacted response: no status
    (None, False, None),  # nothing read (a conversation, a deletion)
    (None, True, "error"),  # an inference call refused, or a stream cut before its end
    (response("completed", None, MESSAGE), True, "error"),
]


@pytest.mark.parametrize(("resp", "early", "expected"), FINISH_ROWS)
def test_finish_reason_in_the_conventions_values(resp: ResponseFacts | None, early: bool, expected: str | None) -> None:
    assert finish_reason(resp, early) == expected


# -- through the client, in both dialects --------------------------------------------------------------------------


@pytest.mark.parametrize("opt_in", ["", LATEST])
def test_request_attributes_on_the_span_in_both_dialects(
    emulator: Emulator, opt_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in)
    client = emulator.client()
    with capture() as telemetry:
        client.responses.create(
            model=MODEL,
            input="Remember this: the marker is R-1.",
            temperature=0.3,
            top_p=0.9,
            text={"format": {"type": "text"}},
            extra_body={"prompt": {"id": "pmpt_abc", "version": "7", "variables": {"who": VARIABLES_SECRET}}},
        )
        list(client.responses.create(model=MODEL, input="Now stream.", stream=True))
        client.responses.parse(model=MODEL, input="Remember this: the marker is R-2.", text_format=Answer)
        plain, streamed, parsed = (attrs(s) for s in telemetry.chat_spans())
        exported = repr([s.to_json() for s in telemetry.spans()]) + repr(telemetry.reader.get_metrics_data())
    assert plain[a.GEN_AI_REQUEST_TEMPERATURE] == 0.3
    assert plain[a.GEN_AI_REQUEST_TOP_P] == 0.9
    assert plain[a.GEN_AI_OUTPUT_TYPE] == "text"
    assert plain[a.GEN_AI_PROMPT_NAME] == "pmpt_abc"
    assert plain[a.GEN_AI_PROMPT_VERSION] == "7"
    assert a.GEN_AI_REQUEST_STREAM not in plain  # not streamed: unset, never false
    assert streamed[a.GEN_AI_REQUEST_STREAM] is True
    for absent in (a.GEN_AI_OUTPUT_TYPE, a.GEN_AI_REQUEST_TEMPERATURE, a.GEN_AI_PROMPT_NAME, a.GEN_AI_PROMPT_VERSION):
        assert absent not in streamed
    assert parsed[a.GEN_AI_OUTPUT_TYPE] == "json"
    assert VARIABLES_SECRET not in exported  # prompt variables are content: never read
    assert not [key for key in plain if key.startswith("gen_ai.prompt.variable")]


@pytest.mark.parametrize("opt_in", ["", LATEST])
def test_finish_reasons_and_status_through_the_client(
    emulator: Emulator, opt_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in)
    client = emulator.client()
    with capture() as telemetry:
        client.responses.create(model=MODEL, input="hello")
        client.responses.create(model=MODEL, input="hello there", max_output_tokens=1)
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="x", conversation="conv_x", previous_response_id="resp_x")
        stream = client.responses.create(model=MODEL, input="Stream, then stop.", stream=True)
        next(iter(stream))
        stream.close()
        list(client.responses.create(model=MODEL, input="please trigger failure", stream=True))
        completed, cut, refused, closed, failed = (attrs(s) for s in telemetry.chat_spans())
    assert (completed[a.GEN_AI_RESPONSE_FINISH_REASONS], completed[a.RESPONSE_STATUS]) == (("stop",), "completed")
    assert (cut[a.GEN_AI_RESPONSE_FINISH_REASONS], cut[a.RESPONSE_STATUS]) == (("length",), "incomplete")
    assert refused[a.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)
    assert a.RESPONSE_STATUS not in refused
    assert closed[a.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)
    assert closed[a.STREAM_ENDED] == "closed"
    assert (failed[a.GEN_AI_RESPONSE_FINISH_REASONS], failed[a.RESPONSE_STATUS]) == (("error",), "failed")


def test_a_response_that_ends_in_a_tool_call(emulator: Emulator) -> None:
    tools: Any = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]
    with capture() as telemetry:
        emulator.client().responses.create(model=MODEL, input="call tool lookup", tools=tools)
        (span,) = telemetry.chat_spans()
    assert attrs(span)[a.TOOL_CALLS_CHECK] == "pending"
    assert attrs(span)[a.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_call",)


@pytest.mark.parametrize("opt_in", ["", LATEST])
def test_fetch_response_spans_carry_the_status_and_cursor_and_no_usage(
    emulator: Emulator, opt_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in)
    client = emulator.client()
    created = client.responses.create(model=MODEL, input="Remember this: the marker is F-1.")
    with capture() as telemetry:
        client.responses.retrieve(created.id)
        events = list(client.responses.retrieve(created.id, stream=True, starting_after=2))
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve("resp_unknown")
        fetched, resumed, missing = (attrs(s) for s in telemetry.spans())
        spans = telemetry.spans()
    assert [s.name for s in spans] == ["fetch_response"] * 3  # no model: the operation alone, as the page says
    assert fetched[a.GEN_AI_RESPONSE_STATUS] == fetched[a.RESPONSE_STATUS] == "completed"
    assert fetched[a.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert fetched[a.GEN_AI_RESPONSE_ID] == created.id
    assert a.GEN_AI_REQUEST_STREAM_CURSOR not in fetched
    assert resumed[a.GEN_AI_REQUEST_STREAM_CURSOR] == "2"
    assert resumed[a.GEN_AI_REQUEST_STREAM] is True
    assert resumed[a.GEN_AI_RESPONSE_STATUS] == "completed"
    assert all(e.sequence_number > 2 for e in events)
    for span in (fetched, resumed, missing):
        assert not [key for key in span if key.startswith("gen_ai.usage.")], span
    assert spans[2].status.status_code is StatusCode.ERROR
    assert a.GEN_AI_RESPONSE_FINISH_REASONS not in missing  # the fetch failed: nothing said of the generation
    assert a.GEN_AI_RESPONSE_STATUS not in missing
