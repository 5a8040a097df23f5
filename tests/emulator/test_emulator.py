"""The Responses API emulator, exercised only through the real openai clients over loopback HTTP."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.resources.responses import Responses

from otel_responses.emulator import Emulator, EmulatorConfig

from ..ledger_scenarios import Item, user
from ..support import free_port, sdk_field, withheld

MODEL = "gpt-4.1"
REASONER = "o4-mini"
PHASE_MODEL = "gpt-5.4"  # returns `phase` on assistant messages, as the real API does for gpt-5.4 and later
WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}
CODE_WORD = re.compile(r"^code_word=CW-[0-9a-f]{6}$")
ALL_TURNS: Any = {"context": "all_turns"}  # earlier turns' reasoning rendered back (o4-mini defaults to current_turn)


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def client(emu: Emulator) -> Iterator[openai.OpenAI]:
    with emu.client() as sdk_client:
        yield sdk_client


def replayable(output: list[Any]) -> list[Item]:
    """Output items as an app would replay them: SDK models dumped to dicts."""
    return [item.model_dump(exclude_none=True, warnings=False) for item in output]


# -- store / previous_response_id / conversation ------------------------------------------------


def test_store_false_is_neither_retrievable_nor_chainable(client: openai.OpenAI) -> None:
    unstored: Any = client.responses.create(model=MODEL, input="The marker is m1.", store=False)
    assert unstored.store is False  # the API returns it; the SDK's Response type lacks it
    assert unstored.output_text == "Noted marker m1."

    with pytest.raises(openai.NotFoundError) as not_found:
        client.responses.retrieve(unstored.id)
    assert not_found.value.status_code == 404
    assert not_found.value.body == {
        "message": f"Response with id '{unstored.id}' not found.",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert (not_found.value.request_id or "").startswith("req_")

    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=unstored.id)
    assert bad.value.code == "previous_response_not_found"
    assert bad.value.param == "previous_response_id"
    assert f"Previous response with id '{unstored.id}' not found." in bad.value.message

    with pytest.raises(openai.BadRequestError) as unknown:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_does_not_exist")
    assert unknown.value.code == "previous_response_not_found"


def test_stored_response_is_retrievable_by_default(client: openai.OpenAI) -> None:
    created = client.responses.create(model=MODEL, input="The marker is m2.", metadata={"k": "v"})
    fetched: Any = client.responses.retrieve(created.id)
    assert fetched.id == created.id
    assert fetched.store is True
    assert fetched.output_text == "Noted marker m2."
    assert fetched.metadata == {"k": "v"}
    assert fetched.usage == created.usage


def test_conversation_and_previous_response_id_are_mutually_exclusive(emu: Emulator, client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, input="hello")
    conversation = client.conversations.create()
    before = len(emu.requests)
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(
            model=MODEL, input="hi", previous_response_id=first.id, conversation={"id": conversation.id}
        )
    assert bad.value.status_code == 400
    assert bad.value.code == "mutually_exclusive_parameters"
    assert bad.value.param == "conversation"
    assert "Mutually exclusive parameters" in bad.value.message
    assert len(emu.requests) == before + 1
    seen = emu.requests[-1]
    assert (seen.method, seen.path) == ("POST", "/v1/responses")
    assert seen.body["previous_response_id"] == first.id


def test_unknown_conversation_and_unknown_route_are_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as conv:
        client.responses.create(model=MODEL, input="hi", conversation="conv_missing")
    assert "conv_missing" in conv.value.message
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve("conv_missing")
    with pytest.raises(openai.NotFoundError) as route:
        client.get("/nowhere", cast_to=object)
    assert route.value.body == {
        "message": "Invalid URL (GET /v1/nowhere)",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


def test_instructions_are_not_inherited(client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, input="The marker is m3.", instructions="Answer in uppercase.")
    assert first.output_text == "NOTED MARKER M3."
    assert first.instructions == "Answer in uppercase."

    second = client.responses.create(
        model=MODEL, input="Which constraint applies, and what is the marker?", previous_response_id=first.id
    )
    assert second.instructions is None
    assert second.previous_response_id == first.id
    assert second.output_text == "marker=m3; constraints=none"

    third = client.responses.create(
        model=MODEL, input="Which constraint applies?", previous_response_id=second.id, instructions="Be terse."
    )
    assert third.output_text == "constraints=Be terse."


# -- context: marker through chain, conversation, replay; lost with drop_context ------------------


def test_marker_through_server_chain(client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, input="The marker is chain-7.")
    filler = client.responses.create(model=MODEL, input="Nothing to add.", previous_response_id=first.id)
    assert filler.output_text == "Noted."
    asked = client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=filler.id)
    assert asked.output_text == "marker=chain-7"
    unchained = client.responses.create(model=MODEL, input="What is the marker?")
    assert unchained.output_text == "marker=unknown"


def test_marker_through_conversation(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(items=[user("The marker is seed-1.")], metadata={"topic": "t"})
    assert conversation.id.startswith("conv_")
    assert conversation.metadata == {"topic": "t"}
    assert client.conversations.retrieve(conversation.id).id == conversation.id

    first = client.responses.create(model=MODEL, input="What is the marker?", conversation=conversation.id)
    assert first.output_text == "marker=seed-1"
    assert first.conversation is not None
    assert first.conversation.id == conversation.id
    client.responses.create(model=MODEL, input="The marker is conv-2.", conversation={"id": conversation.id})
    latest = client.responses.create(model=MODEL, input="What is the marker?", conversation=conversation.id)
    assert latest.output_text == "marker=conv-2"


def test_marker_through_client_replay(client: openai.OpenAI) -> None:
    history: list[Any] = [user("The marker is replay-3.")]
    first: Any = client.responses.create(model=MODEL, input=history, store=False)
    history += replayable(first.output)
    history.append(user("What is the marker?"))
    second = client.responses.create(model=MODEL, input=history, store=False)
    assert second.output_text == "marker=replay-3"
    # also accepts the SDK's own output models, not just dicts
    third = client.responses.create(
        model=MODEL, input=[user("The marker is replay-4."), *first.output, user("marker?")], store=False
    )
    assert third.output_text == "marker=replay-4"


def test_marker_lost_with_drop_context() -> None:
    with Emulator(EmulatorConfig(drop_context=True)) as broken, broken.client() as sdk:
        first = sdk.responses.create(model=MODEL, input="The marker is gone-1.")
        second = sdk.responses.create(model=MODEL, input="What is the marker?", previous_response_id=first.id)
        assert second.output_text == "marker=unknown"
        assert second.usage is not None
        assert second.usage.input_tokens_details.cached_tokens == 0


# -- reasoning, code word, encrypted_content --------------------------------------------------------


def test_code_word_remembered_through_chain(emu: Emulator, client: openai.OpenAI) -> None:
    chose = client.responses.create(model=REASONER, input="Please choose a code word.")
    assert chose.output_text == "I have chosen a code word."
    assert [item.type for item in chose.output] == ["reasoning", "message"]
    reasoning = chose.output[0]
    assert reasoning.type == "reasoning"
    assert reasoning.id.startswith("rs_")
    assert reasoning.encrypted_content is None
    assert chose.usage is not None
    assert chose.usage.output_tokens_details.reasoning_tokens > 0

    asked = client.responses.create(
        model=REASONER, input="What is the code word?", previous_response_id=chose.id, reasoning=ALL_TURNS
    )
    assert CODE_WORD.match(asked.output_text), asked.output_text
    # the code word lives only server-side: it never crossed the wire before it was asked for
    word = asked.output_text.split("=")[1]
    assert word not in json.dumps(client.responses.retrieve(chose.id).model_dump())
    # Under the model's default, current_turn, the earlier turn's reasoning is not rendered back, and the response
    # says so.
    current = client.responses.create(model=REASONER, input="What is the code word?", previous_response_id=chose.id)
    assert current.output_text == "code_word=unknown"
    assert current.reasoning is not None
    assert sdk_field(current.reasoning, "context") == "current_turn"
    assert withheld(current) == [(reasoning.id, "turn_boundary")]


def test_code_word_through_replayed_encrypted_reasoning(client: openai.OpenAI) -> None:
    chose: Any = client.responses.create(
        model=REASONER, input="Choose a code word.", store=False, include=["reasoning.encrypted_content"]
    )
    token = chose.output[0].encrypted_content
    assert isinstance(token, str)
    assert token
    replay = [user("Choose a code word."), *replayable(chose.output), user("What is the code word?")]
    asked = client.responses.create(model=REASONER, input=replay, store=False, reasoning=ALL_TURNS)
    assert CODE_WORD.match(asked.output_text), asked.output_text
    word = asked.output_text.split("=")[1]
    assert word not in token
    assert word.encode() not in base64.b64decode(token)

    dropped = [item for item in replay if item.get("type") != "reasoning"]
    assert len(dropped) == len(replay) - 1
    forgot = client.responses.create(model=REASONER, input=dropped, store=False, reasoning=ALL_TURNS)
    assert forgot.output_text == "code_word=unknown"


@pytest.mark.parametrize("where", [0.5, 0.9], ids=["ciphertext", "tag"])
def test_altered_encrypted_content_is_rejected(client: openai.OpenAI, where: float) -> None:
    chose = client.responses.create(
        model=REASONER, input="Choose a code word.", store=False, include=["reasoning.encrypted_content"]
    )
    replay = replayable(chose.output)
    token = replay[0]["encrypted_content"]
    at = int(len(token.rstrip("=")) * where)
    replay[0]["encrypted_content"] = token[:at] + ("A" if token[at] != "A" else "B") + token[at + 1 :]
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=REASONER, input=[*replay, user("What is the code word?")], store=False)
    assert bad.value.code == "invalid_encrypted_content"
    assert bad.value.param == "input"
    assert f"The encrypted content for item {replay[0]['id']} could not be verified." in bad.value.message


def test_encrypted_content_only_when_included(client: openai.OpenAI) -> None:
    plain = client.responses.create(model=REASONER, input="hello", store=False)
    included = client.responses.create(
        model=REASONER, input="hello", store=False, include=["reasoning.encrypted_content"]
    )
    assert plain.output[0].type == "reasoning"
    assert plain.output[0].encrypted_content is None
    assert included.output[0].type == "reasoning"
    assert included.output[0].encrypted_content
    non_reasoning = client.responses.create(model=MODEL, input="hello", include=["reasoning.encrypted_content"])
    assert [item.type for item in non_reasoning.output] == ["message"]
    # The model alone decides: libraries send `"reasoning": {}` to every model.
    reasonings: list[Any] = [{}, {"effort": "low"}]
    for reasoning in reasonings:
        explicit = client.responses.create(model=MODEL, input="hello", reasoning=reasoning)
        assert [item.type for item in explicit.output] == ["message"]
        assert explicit.reasoning is not None
        assert explicit.reasoning.effort is None


def test_reasoning_item_references_resolve_only_when_stored(client: openai.OpenAI) -> None:
    stored: Any = client.responses.create(model=REASONER, input="Choose a code word.")
    reasoning_id, answer_id = stored.output[0].id, stored.output[1].id
    answer: Any = {"type": "item_reference", "id": answer_id}
    by_reference = client.responses.create(
        model=REASONER,
        input=[user("Choose a code word."), {"type": "item_reference", "id": reasoning_id}, answer, user("code word?")],
        reasoning=ALL_TURNS,
    )
    assert CODE_WORD.match(by_reference.output_text)
    bare_id = client.responses.create(
        model=REASONER,
        input=[
            user("Choose a code word."),
            {"type": "reasoning", "id": reasoning_id, "summary": []},
            answer,
            user("code word?"),
        ],
        reasoning=ALL_TURNS,
    )
    assert bare_id.output_text == by_reference.output_text

    unstored = client.responses.create(model=REASONER, input="Choose a code word.", store=False)
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model=REASONER, input=[*replayable(unstored.output), user("code word?")])
    assert missing.value.param == "input"
    assert f"Item with id '{unstored.output[0].id}' not found." in missing.value.message
    assert "`store` is set to false" in missing.value.message


def test_non_reasoning_model_keeps_no_code_word(client: openai.OpenAI) -> None:
    chose = client.responses.create(model=MODEL, input="Choose a code word.")
    assert chose.output_text == "I have chosen a code word."
    asked = client.responses.create(model=MODEL, input="What is the code word?", previous_response_id=chose.id)
    assert asked.output_text == "code_word=unknown"


# -- function calls ----------------------------------------------------------------------------------


def test_function_call_round_trip(client: openai.OpenAI) -> None:
    question: Any = user("Use get_weather for Paris")
    called = client.responses.create(model=MODEL, input=[question], tools=[WEATHER_TOOL])
    assert [item.type for item in called.output] == ["function_call"]
    call = called.output[0]
    assert call.type == "function_call"
    assert call.name == "get_weather"
    assert call.call_id.startswith("call_")
    assert (call.id or "").startswith("fc_")
    assert json.loads(call.arguments) == {"query": "Use get_weather for Paris"}
    assert called.output_text == ""

    result: Any = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
    replayed = client.responses.create(
        model=MODEL,
        input=[question, *replayable(called.output), result],
        tools=[WEATHER_TOOL],
    )
    assert replayed.output_text == "Tool get_weather returned sunny."

    chained = client.responses.create(model=MODEL, input=[result], previous_response_id=called.id)
    assert chained.output_text == "Tool get_weather returned sunny."
    later = client.responses.create(model=MODEL, input="What did the tool return?", previous_response_id=chained.id)
    assert later.output_text == "tool=sunny"


SHELL_TOOL: Any = {  # an agent's own tool: a required parameter of its own, and an optional one
    "type": "function",
    "name": "exec_command",
    "description": "Run a shell command.",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "login": {"type": "boolean"}},
        "required": ["cmd"],
    },
}


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        ("Run `echo hi` with exec_command.", SHELL_TOOL, {"cmd": "echo hi"}),
        # near misses: no quoted span, or a tool whose parameters want none of it, keep the request's text
        ("Run echo hi with exec_command.", SHELL_TOOL, {"query": "Run echo hi with exec_command."}),
        ("Use `Paris` with get_weather.", WEATHER_TOOL, {"query": "Paris"}),
        (
            "Use `Paris` with get_weather.",
            {**WEATHER_TOOL, "parameters": {"type": "object", "properties": {"days": {"type": "integer"}}}},
            {"query": "Use `Paris` with get_weather."},
        ),
    ],
    ids=["quoted-into-cmd", "unquoted", "quoted-into-query", "no-required-string"],
)
def test_a_quoted_span_fills_the_tool_s_first_required_string(
    client: openai.OpenAI, text: str, tool: Any, arguments: dict[str, str]
) -> None:
    called = client.responses.create(model=MODEL, input=text, tools=[tool])
    assert [item.type for item in called.output] == ["function_call"]
    call = called.output[0]
    assert call.type == "function_call"
    assert json.loads(call.arguments) == arguments


def test_a_request_for_a_summary_carries_the_marker(client: openai.OpenAI) -> None:
    """A client compacting its history itself asks for a summary, then sends it in place of the turns it stands for:
    the turns after it still know the marker."""
    noted = client.responses.create(model=MODEL, input="The marker is S-1.")
    summary = client.responses.create(model=MODEL, input="Create a handoff summary.", previous_response_id=noted.id)
    assert summary.output_text == "Summary: the marker is S-1."
    rebuilt = client.responses.create(model=MODEL, input=[user(summary.output_text), user("What is the marker?")])
    assert rebuilt.output_text == "marker=S-1"
    nothing = client.responses.create(model=MODEL, input="Create a handoff summary.")
    assert nothing.output_text == "Summary: nothing to carry over."
    asked = client.responses.create(
        model=MODEL, input="Is there a summary of the marker?", previous_response_id=noted.id
    )
    assert asked.output_text == "marker=S-1"  # a question is answered, not summarised


def test_function_call_pairing_is_enforced(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as orphan:
        client.responses.create(
            model=MODEL, input=[{"type": "function_call_output", "call_id": "call_nope", "output": "x"}]
        )
    assert orphan.value.param == "input"
    assert "No tool call found for function call output with call_id call_nope." in orphan.value.message

    called: Any = client.responses.create(model=MODEL, input="please get_weather", tools=[WEATHER_TOOL])
    call_id = called.output[0].call_id
    with pytest.raises(openai.BadRequestError) as unanswered:
        client.responses.create(model=MODEL, input="and now?", previous_response_id=called.id)
    assert f"No tool output found for function call {call_id}." in unanswered.value.message


# -- usage, determinism, max_output_tokens -------------------------------------------------------------


def _script(sdk: openai.OpenAI) -> list[Any]:
    first = sdk.responses.create(model=REASONER, input="The marker is det-1. Choose a code word.")
    second = sdk.responses.create(model=REASONER, input="What is the marker?", previous_response_id=first.id)
    third = sdk.responses.create(model=MODEL, input="code word?", previous_response_id=second.id)
    return [
        (r.id, r.output_text, r.usage.model_dump() if r.usage else None, r._request_id) for r in (first, second, third)
    ]


def test_usage_and_ids_are_deterministic() -> None:
    runs = []
    for _ in range(2):
        with Emulator() as emulator, emulator.client() as sdk:
            runs.append(_script(sdk))
    assert runs[0] == runs[1]
    (_, _, first_usage, _), (_, second_text, second_usage, _), (_, third_text, third_usage, _) = runs[0]
    assert second_text == "marker=det-1"
    assert third_text == "code_word=unknown"  # another model: the reasoning is withheld from it (model_mismatch)
    assert first_usage["input_tokens_details"]["cached_tokens"] == 0
    assert second_usage["input_tokens_details"]["cached_tokens"] > 0
    assert second_usage["input_tokens"] > second_usage["input_tokens_details"]["cached_tokens"]
    assert third_usage["input_tokens"] > second_usage["input_tokens"]
    assert third_usage["output_tokens_details"]["reasoning_tokens"] == 0
    for usage in (first_usage, second_usage, third_usage):
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_request_ids_are_deterministic_per_sequence() -> None:
    ids = []
    for _ in range(2):
        with Emulator() as emulator, emulator.client() as sdk:
            response = sdk.responses.with_raw_response.create(model=MODEL, input="hi")
            ids.append(response.headers["x-request-id"])
            assert response.parse().output_text == "Noted."
    assert ids[0] == ids[1]
    assert re.fullmatch(r"req_[0-9a-f]+", ids[0])


def test_max_output_tokens_makes_response_incomplete(client: openai.OpenAI) -> None:
    full = client.responses.create(model=MODEL, input="What is the marker and the code word?")
    assert full.output_text == "marker=unknown; code_word=unknown"
    short = client.responses.create(model=MODEL, input="What is the marker and the code word?", max_output_tokens=2)
    assert short.status == "incomplete"
    assert short.incomplete_details is not None
    assert short.incomplete_details.reason == "max_output_tokens"
    assert short.output_text == "marker=u"
    assert short.usage is not None
    assert short.usage.output_tokens <= 2


# -- input items, delete ---------------------------------------------------------------------------------


def test_input_items_listing_and_order(client: openai.OpenAI) -> None:
    created = client.responses.create(
        model=MODEL,
        input=[user("one"), user("two"), {"type": "message", "role": "user", "content": "three"}],
    )
    newest_first: Any = list(client.responses.input_items.list(created.id))
    texts = [item.content[0].text for item in newest_first]
    assert texts == ["three", "two", "one"]
    assert all(item.id.startswith("msg_") for item in newest_first)

    oldest_first: Any = client.responses.input_items.list(created.id, order="asc")
    assert [item.content[0].text for item in oldest_first.data] == ["one", "two", "three"]

    page: Any = client.responses.input_items.list(created.id, order="asc", limit=2)
    assert page.has_more is True
    assert page.first_id == page.data[0].id
    assert page.last_id == page.data[1].id
    rest: Any = client.responses.input_items.list(created.id, order="asc", limit=2, after=page.last_id)
    assert [item.content[0].text for item in rest.data] == ["three"]
    assert rest.has_more is False
    # auto-pagination follows `after`
    assert len(list(client.responses.input_items.list(created.id, limit=1))) == 3

    unstored = client.responses.create(model=MODEL, input="x", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list(unstored.id)


def test_delete_response(emu: Emulator, client: openai.OpenAI) -> None:
    created = client.responses.create(model=MODEL, input="The marker is del-1.")
    client.responses.delete(created.id)  # returns nothing: the API's body is empty
    assert emu.requests[-1].method == "DELETE"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(created.id)
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, input="marker?", previous_response_id=created.id)
    assert bad.value.code == "previous_response_not_found"
    again = client.responses.create(model=MODEL, input="x")
    deleted = client.delete(f"/responses/{again.id}", cast_to=object)
    assert deleted == {"id": again.id, "object": "response", "deleted": True}


# -- streaming, async ---------------------------------------------------------------------------------------


def test_streaming_matches_non_streaming(client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, input="The marker is stream-1.")
    plain = client.responses.create(model=MODEL, input="What marker and constraint?", previous_response_id=first.id)
    with client.responses.create(
        model=MODEL, input="What marker and constraint?", previous_response_id=first.id, stream=True
    ) as stream:
        events: Any = list(stream)
    types = [event.type for event in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert "response.output_text.delta" in types
    assert "response.content_part.done" in types
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert final.output_text == plain.output_text == deltas == "marker=stream-1; constraints=none"
    assert final.status == "completed"
    # the streamed response is stored like any other
    assert client.responses.retrieve(final.id).output_text == plain.output_text


def test_streaming_reasoning_tool_call_and_incomplete(client: openai.OpenAI) -> None:
    with client.responses.create(
        model=PHASE_MODEL,
        input="get_weather please",
        tools=[WEATHER_TOOL],
        stream=True,
    ) as stream:
        events = list(stream)
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    assert added == ["reasoning", "message", "function_call"]  # the progress update comes first
    assert "response.function_call_arguments.done" in [e.type for e in events]
    with client.responses.create(model=MODEL, input="marker and code word?", max_output_tokens=2, stream=True) as s:
        last: Any = list(s)[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"


def test_async_client_round_trip(emu: Emulator) -> None:
    async def scenario() -> tuple[str, str]:
        async with emu.async_client() as sdk:
            first = await sdk.responses.create(model=MODEL, input="The marker is async-1.")
            second = await sdk.responses.create(model=MODEL, input="marker?", previous_response_id=first.id)
            stream = await sdk.responses.create(
                model=MODEL, input="marker?", previous_response_id=first.id, stream=True
            )
            last = None
            async for event in stream:
                last = event
            assert last is not None
            assert last.type == "response.completed"
            return second.output_text, last.response.output_text

    assert asyncio.run(scenario()) == ("marker=async-1", "marker=async-1")


# -- compaction, conversation items ----------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(Responses, "compact"), reason="responses.compact arrived in openai 2.9.0")
def test_compaction_keeps_context_opaque_and_replayable(client: openai.OpenAI) -> None:
    first = client.responses.create(model=REASONER, input="The marker is cmp-1. Choose a code word.")
    compacted = client.responses.compact(model=REASONER, previous_response_id=first.id)
    assert compacted.object == "response.compaction"
    assert [item.type for item in compacted.output] == ["message", "compaction"]
    sealed = compacted.output[-1]
    assert sealed.type == "compaction"
    assert "CW-" not in sealed.encrypted_content
    assert compacted.usage.input_tokens_details.cached_tokens > 0

    window = [*replayable(compacted.output), user("What is the marker and the code word?")]
    asked = client.responses.create(model=REASONER, input=window, store=False, reasoning=ALL_TURNS)
    marker, word = asked.output_text.split("; ")
    assert marker == "marker=cmp-1"
    assert CODE_WORD.match(word)

    token = window[1]["encrypted_content"]
    at = len(token) // 2
    window[1]["encrypted_content"] = token[:at] + ("A" if token[at] != "A" else "B") + token[at + 1 :]
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=REASONER, input=window, store=False)
    assert bad.value.code == "invalid_encrypted_content"


def test_conversation_items_accumulate(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(items=[user("The marker is ci-1.")])
    client.responses.create(model=MODEL, input="Thanks.", conversation=conversation.id)
    items = client.conversations.items.list(conversation.id, order="asc")
    kinds = [(item.type, getattr(item, "role", None)) for item in items.data]
    assert kinds == [("message", "user"), ("message", "user"), ("message", "assistant")]
    assert client.conversations.delete(conversation.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL, input="hi", conversation=conversation.id)


# -- lifecycle, request log, CLI -----------------------------------------------------------------------------


def test_request_log_and_reset() -> None:
    with Emulator() as emulator:
        assert len(emulator.requests) == 0
        assert emulator.base_url == f"http://127.0.0.1:{emulator.port}/v1"
        with emulator.client() as sdk:
            sdk.responses.create(model=MODEL, input="hi", store=False)
        (seen,) = emulator.requests
        assert (seen.method, seen.path, seen.body) == (
            "POST",
            "/v1/responses",
            {"model": MODEL, "input": "hi", "store": False},
        )
        assert seen.headers["authorization"] == "Bearer <redacted>"
        with emulator.client() as sdk:
            emulator.reset()
            before = sdk.responses.with_raw_response.create(model=MODEL, input="hi")
            emulator.reset()
            assert list(emulator.requests) == []
            after = sdk.responses.with_raw_response.create(model=MODEL, input="hi")
            assert after.parse().id == before.parse().id
            assert after.headers["x-request-id"] == before.headers["x-request-id"]
            # a stream abandoned after its first event leaves the server healthy
            stream = sdk.responses.create(model=MODEL, input="hi", stream=True)
            assert next(iter(stream)).type == "response.created"
            stream.close()
            assert sdk.responses.create(model=MODEL, input="hi").output_text == "Noted."
    with pytest.raises(RuntimeError):
        _ = emulator.base_url


def test_concurrent_clients_keep_their_own_chains(emu: Emulator) -> None:
    def worker(n: int) -> list[str]:
        with emu.client() as sdk:
            answers = []
            previous = sdk.responses.create(model=MODEL, input=f"The marker is t{n}.")
            for _ in range(3):
                previous = sdk.responses.create(model=MODEL, input="marker?", previous_response_id=previous.id)
                answers.append(previous.output_text)
            return answers

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(worker, range(8)))
    assert results == [[f"marker=t{n}"] * 3 for n in range(8)]


def test_only_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        Emulator(host="0.0.0.0")


# The emulator's command line: as a module, and as the `otel-responses` command's `emulator` (the same options and
# code; its usage line names it as it was called).
EMULATOR_COMMANDS = {
    "python -m otel_responses.emulator": [sys.executable, "-m", "otel_responses.emulator"],
    "otel-responses emulator": [str(Path(sys.executable).parent / "otel-responses"), "emulator"],
}


@pytest.fixture(params=list(EMULATOR_COMMANDS))
def emulator_command(request: pytest.FixtureRequest) -> tuple[str, list[str]]:
    """The emulator's command, by the name its usage line gives, and the argv that runs it."""
    name: str = request.param
    return name, EMULATOR_COMMANDS[name]


def test_cli_serves_and_prints_base_url(emulator_command: tuple[str, list[str]]) -> None:
    port = free_port()
    src = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(
        [*emulator_command[1], "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line == f"http://127.0.0.1:{port}/v1"
        with openai.OpenAI(base_url=line, api_key="x", max_retries=0) as sdk:
            assert sdk.responses.create(model=MODEL, input="The marker is cli-1.").output_text == "Noted marker cli-1."
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert process.returncode == 0
    assert err == "otel-responses emulator running; press Ctrl-C to stop\n"


def _emulator_command(
    command: list[str], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("value", [None, "", "  "], ids=["unset", "empty", "blank"])
def test_cli_refuses_to_start_with_an_api_key_variable_that_is_not_set(
    emulator_command: tuple[str, list[str]], value: str | None
) -> None:
    """Started, it would accept every key, while its help promises it refuses all but one."""
    name, command = emulator_command
    env = {k: v for k, v in os.environ.items() if k != "EMULATOR_TEST_KEY"}
    if value is not None:
        env["EMULATOR_TEST_KEY"] = value
    result = subprocess.run(
        [*command, "--api-key-env", "EMULATOR_TEST_KEY"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"usage: {name} ")
    said = f"{name}: error: --api-key-env EMULATOR_TEST_KEY: the variable is not set; set it to the key to accept"
    assert said in result.stderr.splitlines()
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("port", ["70000", "-1", "65536"])
def test_cli_says_in_one_line_that_a_port_is_out_of_range(emulator_command: tuple[str, list[str]], port: str) -> None:
    result = _emulator_command(emulator_command[1], "--port", port)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"otel-responses emulator: port {port} is out of range (1-65535)\n"


def test_cli_says_in_one_line_that_a_port_is_in_use(emulator_command: tuple[str, list[str]]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _emulator_command(emulator_command[1], "--port", str(port))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"otel-responses emulator: port {port} is in use\n"


def _reset_midway(port: int, request: bytes) -> None:
    """Send `request`, then end the connection with a TCP reset (SO_LINGER 0), as a killed client does."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        time.sleep(0.2)  # the handler is reading (or writing) by now
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_cli_says_nothing_when_a_client_resets_its_connection() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_responses.emulator", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        head = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        _reset_midway(port, head + b'Content-Length: 1000\r\n\r\n{"model"')  # reset while the body is read
        body = json.dumps({"model": MODEL, "input": "The marker is r-1. " * 2000, "stream": True}).encode()
        _reset_midway(port, head + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # while it writes
        with openai.OpenAI(base_url=base_url, api_key="x", max_retries=0) as sdk:  # still serving
            assert sdk.responses.create(model=MODEL, input="The marker is r-2.").output_text == "Noted marker r-2."
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert err == "otel-responses emulator running; press Ctrl-C to stop\n"


def test_other_handler_errors_are_still_reported(capsys: pytest.CaptureFixture[str]) -> None:
    with Emulator() as emulator:
        server = emulator._running()
        for quiet in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
            try:
                raise quiet
            except OSError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise RuntimeError("a handler's own mistake")
        except RuntimeError:
            server.handle_error(None, ("127.0.0.1", 1))
    err = capsys.readouterr().err
    assert "Exception occurred during processing of request from ('127.0.0.1', 1)" in err
    assert "RuntimeError: a handler's own mistake" in err
