"""The request's settings on the span: reasoning (effort, summary, context, mode; from a dict, an SDK model or a
newer SDK's type alike, odd values never recorded), truncation and ``max_output_tokens``, and truncation on the calls
metric only when the request set it. The real ``openai`` client over loopback to the emulator, the real SDK's
in-memory exporter and reader; the parsing also table by table."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from otel_responses._analysis.facts import ReasoningSettings, reasoning_settings, request_facts
from otel_responses.config import settings_from
from otel_responses.emulator import Emulator

from ..conftest import Captured

REASONING_MODEL = "o4-mini"
MODEL = "gpt-4.1-mini"
LEVEL = "gen_ai.request.reasoning.level"
SUMMARY = "openai_responses.reasoning.summary"
CONTEXT = "openai_responses.reasoning.context"
MODE = "openai_responses.reasoning.mode"
REASONING_KEYS = (LEVEL, SUMMARY, CONTEXT, MODE)


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def reasoning_attrs(span: Any) -> dict[str, Any]:
    return {k: v for k, v in attrs(span).items() if k in REASONING_KEYS}


# -- reasoning settings ----------------------------------------------------------------------------------------


def test_reasoning_settings_from_a_dict_are_on_the_span(client: openai.OpenAI, captured: Captured) -> None:
    client.responses.create(
        model=REASONING_MODEL,
        input="Think about it.",
        reasoning={"effort": "high", "summary": "concise", "context": "all_turns"},
    )
    span = captured.only_span()
    assert reasoning_attrs(span) == {LEVEL: "high", SUMMARY: "concise", CONTEXT: "all_turns"}


def test_reasoning_settings_from_an_sdk_model_are_on_the_span(client: openai.OpenAI, captured: Captured) -> None:
    from openai.types.shared import Reasoning

    reasoning = Reasoning(effort="low", summary="auto", context="current_turn", mode="standard")
    client.responses.create(model=REASONING_MODEL, input="Think.", reasoning=reasoning)  # type: ignore[call-overload]
    assert reasoning_attrs(captured.only_span()) == {
        LEVEL: "low",
        SUMMARY: "auto",
        CONTEXT: "current_turn",
        MODE: "standard",
    }


def test_reasoning_context_unknown_to_the_sdk_types_is_read_all_the_same(
    client: openai.OpenAI, captured: Captured
) -> None:
    """Older SDKs (the floor, 1.101.0) type no `reasoning.context`: an app passes it in a plain dict, in an SDK
    model that keeps it as an undeclared field, or through `extra_body` (which replaces the body's `reasoning`)."""

    class OldReasoning(openai.BaseModel):  # the shape of an older SDK's `Reasoning`: no `context` field
        effort: str | None = None

    old = OldReasoning.model_validate({"effort": "minimal", "context": "all_turns"})
    assert "context" not in OldReasoning.model_fields
    assert old.__pydantic_extra__ == {"context": "all_turns"}
    client.responses.create(model=REASONING_MODEL, input="One.", reasoning=old)  # type: ignore[call-overload]
    client.responses.create(
        model=REASONING_MODEL,
        input="Two.",
        reasoning={"effort": "low"},
        extra_body={"reasoning": {"effort": "xhigh", "context": "all_turns"}},
    )
    first, second = captured.chat_spans()
    assert reasoning_attrs(first) == {LEVEL: "minimal", CONTEXT: "all_turns"}
    assert reasoning_attrs(second) == {LEVEL: "xhigh", CONTEXT: "all_turns"}  # what the SDK sent


def test_odd_reasoning_values_are_never_recorded(client: openai.OpenAI, captured: Captured) -> None:
    """Enum-like tokens only: a megabyte string, text, a number or an object gives no attribute, never text."""
    huge = "a" * 1_000_000
    client.responses.create(
        model=REASONING_MODEL,
        input="Odd.",
        reasoning={"effort": huge, "summary": "Be Brief Please", "context": 3, "mode": {"nested": "pro"}},
    )  # type: ignore[call-overload]
    span = captured.only_span()
    assert reasoning_attrs(span) == {}
    assert not any(isinstance(v, str) and ("aaaa" in v or "Brief" in v) for v in attrs(span).values())


def test_no_reasoning_parameter_no_attribute_and_never_on_metrics(client: openai.OpenAI, captured: Captured) -> None:
    client.responses.create(model=MODEL, input="Plain.")
    client.responses.create(model=MODEL, input="Null.", reasoning=None)
    client.responses.create(model=REASONING_MODEL, input="Set.", reasoning={"effort": "medium"})
    plain, null, with_effort = captured.chat_spans()
    assert reasoning_attrs(plain) == reasoning_attrs(null) == {}
    assert reasoning_attrs(with_effort) == {LEVEL: "medium"}
    for name in ("openai_responses.calls", "gen_ai.client.operation.duration", "gen_ai.client.token.usage"):
        for point in captured.metric_points(name):
            assert not set(point.attributes) & set(REASONING_KEYS), name


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, None),
        ({"reasoning": None}, None),
        ({"reasoning": {}}, None),
        ({"reasoning": getattr(openai, "omit", openai.NOT_GIVEN)}, None),  # the SDK's unset sentinel
        ({"reasoning": {"effort": "high"}}, ReasoningSettings("high", None, None, None)),
        ({"reasoning": {"generate_summary": "detailed"}}, ReasoningSettings(None, "detailed", None, None)),
        (
            {"reasoning": {"summary": "auto", "generate_summary": "detailed"}},
            ReasoningSettings(None, "auto", None, None),
        ),
        ({"reasoning": {"effort": "HIGH"}}, None),
        ({"reasoning": {"effort": "x" * 33}}, None),
        ({"reasoning": {"effort": "x" * 32}}, ReasoningSettings("x" * 32, None, None, None)),
        ({"reasoning": {"effort": "high\n"}}, None),
        ({"reasoning": {"effort": True}}, None),
        ({"reasoning": "high"}, None),
        ({"reasoning": {"effort": "low"}, "extra_body": {"reasoning": None}}, None),
        ({"reasoning": {"effort": "low"}, "extra_body": {"other": 1}}, ReasoningSettings("low", None, None, None)),
    ],
    ids=[
        "absent",
        "none",
        "empty",
        "omit",
        "effort",
        "deprecated_summary",
        "summary_wins",
        "uppercase",
        "too_long",
        "longest",
        "newline",
        "bool",
        "not_a_mapping",
        "extra_body_null",
        "extra_body_other",
    ],
)
def test_reasoning_settings_table(kwargs: dict[str, Any], expected: ReasoningSettings | None) -> None:
    assert reasoning_settings(kwargs) == expected


# -- truncation and max_output_tokens ---------------------------------------------------------------------------

TRUNCATION = "openai_responses.truncation"
MAX_TOKENS = "gen_ai.request.max_tokens"


def limits(span: Any) -> dict[str, Any]:
    return {k: v for k, v in attrs(span).items() if k in (TRUNCATION, MAX_TOKENS)}


def test_truncation_and_max_output_tokens_are_on_the_span(emulator: Emulator, captured: Captured) -> None:
    """`truncation="auto"` lets the API drop the oldest items itself when the context overflows: recorded as sent,
    beside `max_output_tokens`, on plain, streamed and async calls, from the span's start (samplers see them)."""
    client = emulator.client()
    first = client.responses.create(model=MODEL, input="Hello.", truncation="auto", max_output_tokens=64)
    list(
        client.responses.create(
            model=MODEL, input="Again.", previous_response_id=first.id, truncation="disabled", stream=True
        )
    )
    client.responses.create(model=MODEL, input="Plain.")
    client.responses.create(model=MODEL, input="Extra.", truncation="disabled", extra_body={"truncation": "auto"})

    async def awaited() -> None:
        async with openai.AsyncOpenAI(base_url=emulator.base_url, api_key="emulator-key", max_retries=0) as aio:
            await aio.responses.create(model=MODEL, input="Async.", truncation="auto", max_output_tokens=16)

    asyncio.run(awaited())
    assert [limits(span) for span in captured.chat_spans()] == [
        {TRUNCATION: "auto", MAX_TOKENS: 64},
        {TRUNCATION: "disabled"},
        {},
        {TRUNCATION: "auto"},  # what the SDK sent: extra_body wins
        {TRUNCATION: "auto", MAX_TOKENS: 16},
    ]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, (None, None)),
        ({"truncation": None, "max_output_tokens": None}, (None, None)),
        ({"truncation": getattr(openai, "omit", openai.NOT_GIVEN)}, (None, None)),
        ({"truncation": "auto", "max_output_tokens": 1024}, ("auto", 1024)),
        ({"truncation": "disabled", "max_output_tokens": 0}, ("disabled", 0)),
        ({"truncation": "Drop the oldest, please", "max_output_tokens": "64"}, (None, None)),
        ({"truncation": "a" * 1_000_000, "max_output_tokens": True}, (None, None)),
        ({"truncation": 1, "max_output_tokens": 64.0}, (None, None)),
        ({"max_output_tokens": -1}, (None, None)),
        ({"max_output_tokens": 2**63}, (None, None)),
        ({"max_output_tokens": 2**63 - 1}, (None, 2**63 - 1)),
        ({"truncation": "auto", "extra_body": {"truncation": None, "max_output_tokens": 8}}, (None, 8)),
    ],
    ids=[
        "absent",
        "none",
        "omit",
        "auto",
        "disabled_zero",
        "text_and_string",
        "huge_and_bool",
        "number_and_float",
        "negative",
        "past_int64",
        "int64",
        "extra_body",
    ],
)
def test_truncation_and_max_output_tokens_table(kwargs: dict[str, Any], expected: tuple[Any, Any]) -> None:
    req = request_facts("chat", {"model": MODEL, "input": "Hi.", **kwargs}, settings_from({}, {}))
    assert (req.truncation, req.max_output_tokens) == expected


def test_the_calls_metric_carries_truncation_only_when_the_request_set_it(
    client: openai.OpenAI, captured: Captured
) -> None:
    """One attribute more on `openai_responses.calls`, of a few values, only when sent: calls without it keep their
    series as they were. `max_output_tokens` (any number) stays off metrics."""
    first = client.responses.create(model=MODEL, input="Hello.", truncation="auto", max_output_tokens=64)
    client.responses.create(model=MODEL, input="More.", previous_response_id=first.id, truncation="auto")
    client.responses.create(model=MODEL, input="Off.", truncation="disabled")
    client.responses.create(model=MODEL, input="Plain.", max_output_tokens=32)
    points = {
        (dict(p.attributes).get(TRUNCATION), dict(p.attributes)["openai_responses.state.mode"]): p.value
        for p in captured.metric_points("openai_responses.calls")
    }
    assert points == {
        ("auto", "single_turn"): 1,
        ("auto", "server_chain"): 1,
        ("disabled", "single_turn"): 1,
        (None, "single_turn"): 1,
    }
    for name in ("openai_responses.calls", "openai_responses.signals", "gen_ai.client.operation.duration"):
        for point in captured.metric_points(name):
            assert MAX_TOKENS not in point.attributes, name
    for point in captured.metric_points("openai_responses.signals"):
        assert TRUNCATION not in point.attributes
