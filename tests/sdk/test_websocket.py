"""WebSocket mode: one span per `response.create` sent on the socket, ended by its terminal event, with
the same attributes and `previous_response_id` semantics as over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from openai.resources.responses.responses import Responses
from opentelemetry.trace import StatusCode

from otel_responses.emulator import Emulator

from ..conftest import Captured

pytest.importorskip("websockets")
if not hasattr(Responses, "connect"):  # pragma: no cover - old SDKs
    pytest.skip("responses.connect() (WebSocket mode) arrived in openai 2.22.0", allow_module_level=True)

MODEL = "gpt-4.1-mini"
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def until_done(connection: Any) -> Any:
    for event in connection:
        if event.type in TERMINAL:
            return event
    raise AssertionError("the connection closed first")


def test_two_turn_chain_over_one_connection(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input="Remember this: the marker is W-1.", instructions="Be brief.")
        first = until_done(connection)
        connection.response.create(model=MODEL, input="What is the marker?", previous_response_id=first.response.id)
        second = until_done(connection)
    assert second.response.output_text == "marker=W-1"
    one, two = captured.spans()
    assert one.name == two.name == f"chat {MODEL}"
    assert attrs(one)["gen_ai.response.id"] == first.response.id
    assert attrs(one)["gen_ai.usage.output_tokens"] == first.response.usage.output_tokens
    assert attrs(one)["gen_ai.response.time_to_first_chunk"] > 0
    assert attrs(two)["openai_responses.state.mode"] == "server_chain"
    assert attrs(two)["gen_ai.request.previous_response.id"] == first.response.id
    # Instructions are not inherited over the socket either.
    assert attrs(two)["openai_responses.signals"] == ("instructions_dropped",)


def test_unstored_parent_over_the_socket(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    unstored = client.responses.create(model=MODEL, input="hi", store=False)
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input="again", previous_response_id=unstored.id)
        error = until_done(connection)
        assert error.type == "error"
        # The connection's own latest response may be continued even unstored: no false signal for that.
        connection.response.create(model=MODEL, input="Remember this: the marker is W-2.", store=False)
        own = until_done(connection)
        connection.response.create(model=MODEL, input="Marker?", previous_response_id=own.response.id)
        answer = until_done(connection)
    assert answer.response.output_text == "marker=W-2"
    _, failed, own_span, continued = captured.spans()
    assert failed.status.status_code is StatusCode.ERROR
    assert attrs(failed)["error.type"] == "previous_response_not_found"
    assert attrs(failed)["openai_responses.signals"] == ("unstored_parent",)
    assert attrs(own_span)["openai_responses.store"] is False
    assert attrs(continued)["openai_responses.signals"] == ()


def test_connection_closed_before_the_answer_ends_the_span(emulator: Emulator, captured: Captured) -> None:
    with emulator.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="hi")
    span = captured.only_span()
    assert attrs(span)["openai_responses.stream.ended"] == "closed"


def test_async_connection(emulator: Emulator, captured: Captured) -> None:
    async def main() -> str:
        client = emulator.async_client()
        async with client.responses.connect() as connection:
            await connection.response.create(model=MODEL, input="Remember this: the marker is W-3.")
            async for event in connection:
                if event.type in TERMINAL:
                    first: Any = event
                    break
            await connection.response.create(model=MODEL, input="Marker?", previous_response_id=first.response.id)
            async for later in connection:
                if later.type in TERMINAL:
                    last: Any = later
                    text = str(last.response.output_text)
                    break
        await client.close()
        return text

    assert asyncio.run(main()) == "marker=W-3"
    spans = captured.spans()
    assert len(spans) == 2
    assert [attrs(s)["openai_responses.state.mode"] for s in spans] == ["single_turn", "server_chain"]
    assert all("gen_ai.response.id" in attrs(s) for s in spans)
