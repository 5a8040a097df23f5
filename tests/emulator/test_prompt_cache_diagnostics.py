"""`prompt_cache_diagnostics`: a request naming `prompt_cache_options.comparison_response_id` is told why it did or
did not reuse that response's prompt cache. The emulator answers it as the SDK types it; the span records the type,
the reason of a miss and the input tokens the miss affected; no signal (a cache miss loses no context)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from otel_responses import attributes as a
from otel_responses.emulator import Emulator
from otel_responses.testing import capture

from ..support import attrs, chat_signals

MODEL = "gpt-5.6"  # prompt cache options: gpt-5.6 and later
TOOL: Any = {"type": "function", "name": "lookup_weather", "parameters": {"type": "object", "properties": {}}}
OPENING: list[Any] = [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": "Remember: the marker is P-1."},
]


@pytest.fixture(scope="module")
def cached() -> Iterator[tuple[openai.OpenAI, str]]:
    """A client and the id of a stored response to compare with."""
    with Emulator() as emulator, emulator.client() as client:
        first = client.responses.create(model=MODEL, input=OPENING, tools=[TOOL], prompt_cache_key="thread-1")
        yield client, first.id


def _diagnosed(client: openai.OpenAI, compared: str, **request: Any) -> tuple[Any, dict[str, Any]]:
    body: dict[str, Any] = {
        "model": MODEL,
        "input": [*OPENING, {"role": "user", "content": "And now?"}],
        "tools": [TOOL],
        "prompt_cache_key": "thread-1",
        **request,
    }
    options = {"comparison_response_id": compared}
    with capture() as telemetry:
        response = client.responses.create(**body, extra_body={"prompt_cache_options": options})
    assert chat_signals(telemetry) == [()]
    span = attrs(telemetry.only_span())
    keys = (a.PROMPT_CACHE_DIAGNOSTIC_TYPE, a.PROMPT_CACHE_DIAGNOSTIC_REASON, a.PROMPT_CACHE_MISSED_TOKENS)
    return response, {key: span[key] for key in keys if key in span}


def _diagnostics(response: Any) -> dict[str, Any]:
    raw: dict[str, Any] = response.model_dump().get("prompt_cache_diagnostics") or {}
    return {k: v for k, v in raw.items() if v is not None}


def test_the_same_prefix_is_a_hit(cached: tuple[openai.OpenAI, str]) -> None:
    client, compared = cached
    response, recorded = _diagnosed(client, compared)
    assert _diagnostics(response) == {"type": "cache_hit"}
    assert recorded == {a.PROMPT_CACHE_DIAGNOSTIC_TYPE: "cache_hit"}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"tools": []}, "tools_changed"),
        ({"prompt_cache_key": "thread-2"}, "prompt_cache_key_changed"),
        ({"model": "gpt-5.6-mini"}, "model_changed"),
        ({"input": [{"role": "user", "content": "Remember: the marker is P-1."}]}, "input_changed"),
    ],
)
def test_a_miss_names_its_reason_and_the_tokens_it_cost(
    cached: tuple[openai.OpenAI, str], change: dict[str, Any], reason: str
) -> None:
    client, compared = cached
    response, recorded = _diagnosed(client, compared, **change)
    diagnostics = _diagnostics(response)
    assert diagnostics["type"] == "cache_miss"
    assert diagnostics["reason"] == reason
    assert recorded == {
        a.PROMPT_CACHE_DIAGNOSTIC_TYPE: "cache_miss",
        a.PROMPT_CACHE_DIAGNOSTIC_REASON: reason,
        a.PROMPT_CACHE_MISSED_TOKENS: diagnostics["cache_missed_tokens"],
    }
    assert 0 < diagnostics["cache_missed_tokens"] <= response.usage.input_tokens


def test_an_unknown_comparison_and_an_earlier_model(cached: tuple[openai.OpenAI, str]) -> None:
    client, compared = cached
    response, recorded = _diagnosed(client, "resp_unknown")
    assert _diagnostics(response) == {"type": "comparison_response_not_found"}
    assert recorded == {a.PROMPT_CACHE_DIAGNOSTIC_TYPE: "comparison_response_not_found"}
    response, recorded = _diagnosed(client, compared, model="gpt-5.4")
    assert _diagnostics(response) == {"type": "unavailable"}
    assert recorded == {a.PROMPT_CACHE_DIAGNOSTIC_TYPE: "unavailable"}


def test_nothing_is_recorded_when_no_comparison_is_asked(cached: tuple[openai.OpenAI, str]) -> None:
    client, _ = cached
    with capture() as telemetry:
        response = client.responses.create(model=MODEL, input="Hi.")
    assert response.model_dump().get("prompt_cache_diagnostics") is None
    assert not any(key.startswith("openai_responses.prompt_cache") for key in attrs(telemetry.only_span()))
