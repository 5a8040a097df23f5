"""The emulator behaves as recorded traffic shows the real API does, where that differs from the obvious.

Each fact here was measured on recorded Responses API traffic (see tests/real_traffic/): opaque payloads are
encrypted afresh on every serialisation; `phase` comes back only from the models that have it; items written
without an id get one from the server; an organisation can make `store` default to false; structured output
answers with JSON that fits the schema; and the model, not a `reasoning` parameter, decides whether it reasons.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pydantic
import pytest

from otel_responses.emulator import Emulator, EmulatorConfig
from otel_responses.emulator.config import returns_phase

from ..ledger_scenarios import Item, user

REASONER = "gpt-5-mini"
PHASE_MODEL = "gpt-5.4"
MODEL = "gpt-4.1"
ENCRYPTED: Any = ["reasoning.encrypted_content"]
WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def items(output: Any) -> list[Item]:
    return [item.model_dump(exclude_none=True) for item in output]


@pytest.fixture(scope="module")
def org_without_storage() -> Iterator[openai.OpenAI]:
    """An organisation whose default is not to store responses."""
    with Emulator(EmulatorConfig(store_default=False)) as emulator, emulator.client() as sdk:
        yield sdk


# -- re-encryption on every serialisation --------------------------------------------------------------------


def test_stream_copies_of_an_encrypted_item_differ_in_bytes_not_length(client: openai.OpenAI) -> None:
    with client.responses.create(
        model=REASONER, input="Choose a code word.", store=False, include=ENCRYPTED, stream=True
    ) as stream:
        events: Any = list(stream)
    done: Any = [e.item for e in events if e.type == "response.output_item.done" and e.item.type == "reasoning"]
    completed: Any = events[-1].response
    assert completed.output[0].type == "reasoning"
    streamed, final = done[0].encrypted_content, completed.output[0].encrypted_content
    assert streamed
    assert final
    assert streamed != final
    assert len(streamed) == len(final)
    # Either copy replays: the API accepts whichever one the app kept.
    for copy in (streamed, final):
        reasoning: Any = {"type": "reasoning", "id": completed.output[0].id, "summary": [], "encrypted_content": copy}
        answer = client.responses.create(
            model=REASONER,
            input=[user("Choose a code word."), reasoning, user("What is the code word?")],
            store=False,
            reasoning={"context": "all_turns"},  # an earlier turn's reasoning, rendered back
        )
        assert answer.output_text.startswith("code_word=CW-")


def test_retrieve_and_listings_encrypt_afresh(client: openai.OpenAI) -> None:
    created: Any = client.responses.create(model=REASONER, input="Choose a code word.", include=ENCRYPTED)
    first = created.output[0].encrypted_content
    retrieved: Any = client.responses.retrieve(created.id, include=ENCRYPTED)
    again = retrieved.output[0].encrypted_content
    assert first
    assert again
    assert first != again
    assert len(first) == len(again)

    replayed = client.responses.create(
        model=REASONER, input=[*items(created.output), user("What is the code word?")], include=ENCRYPTED
    )
    listed = [i for i in client.responses.input_items.list(replayed.id, include=ENCRYPTED) if i.type == "reasoning"]
    assert listed[0].encrypted_content not in (None, first)
    assert len(listed[0].encrypted_content or "") == len(first)


def test_compaction_items_are_encrypted_afresh(client: openai.OpenAI) -> None:
    history: list[Any] = [user("The marker is C-1. " + "filler " * 40)]
    body: Any = {"context_management": [{"type": "compaction", "compact_threshold": 10}]}
    with client.responses.create(model=MODEL, input=history, stream=True, extra_body=body) as stream:
        events: Any = list(stream)
    done: Any = [e.item for e in events if e.type == "response.output_item.done" and e.item.type == "compaction"]
    final: Any = [i for i in events[-1].response.output if i.type == "compaction"]
    assert done
    assert final
    assert done[0].encrypted_content != final[0].encrypted_content
    assert len(done[0].encrypted_content) == len(final[0].encrypted_content)


# -- phase is model-dependent ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "has_phase"),
    [("gpt-5", False), ("gpt-5-mini", False), ("gpt-5.2", False), ("gpt-5.3-codex", True), ("gpt-5.4", True)],
)
def test_phase_follows_the_model(model: str, has_phase: bool) -> None:
    assert returns_phase(model) is has_phase


def test_phase_only_from_models_that_have_it(client: openai.OpenAI) -> None:
    with_phase = client.responses.create(model=PHASE_MODEL, input="get_weather please", tools=[WEATHER_TOOL])
    assert [(i.type, getattr(i, "phase", None)) for i in with_phase.output] == [
        ("reasoning", None),
        ("message", "commentary"),
        ("function_call", None),
    ]
    without = client.responses.create(model=REASONER, input="get_weather please", tools=[WEATHER_TOOL])
    assert [i.type for i in without.output] == ["reasoning", "function_call"]  # no progress update either
    plain = client.responses.create(model=MODEL, input="hello")
    assert "phase" not in plain.output[0].model_dump(exclude_unset=True)


def test_phase_rule_is_configurable() -> None:
    config = EmulatorConfig(phase_models=lambda model: model == MODEL)
    with Emulator(config) as emulator, emulator.client() as sdk:
        assert getattr(sdk.responses.create(model=MODEL, input="hi").output[0], "phase", None) == "final_answer"
        assert getattr(sdk.responses.create(model=PHASE_MODEL, input="hi").output[-1], "phase", None) is None


# -- ids from the server ----------------------------------------------------------------------------------------


def test_items_written_without_an_id_get_one(client: openai.OpenAI) -> None:
    call = client.responses.create(model=MODEL, input="get_weather in Paris", tools=[WEATHER_TOOL]).output[0]
    assert call.type == "function_call"
    conversation = client.conversations.create()
    stripped: Any = {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments}
    output: Any = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
    written = client.conversations.items.create(conversation.id, items=[user("weather?"), stripped, output])
    ids = [item.id for item in written.data]
    assert all(isinstance(i, str) and i for i in ids)
    assert ids[1] != call.id  # a new id, not the one the call was first returned with
    assert [i.id for i in client.conversations.items.list(conversation.id, order="asc")] == ids


# -- the organisation's store default ---------------------------------------------------------------------------


def test_an_organisation_default_makes_store_false(org_without_storage: openai.OpenAI) -> None:
    response = org_without_storage.responses.create(model=MODEL, input="The marker is S-1.")
    assert response.model_dump().get("store") is False
    with pytest.raises(openai.NotFoundError):
        org_without_storage.responses.retrieve(response.id)
    with pytest.raises(openai.BadRequestError) as refused:
        org_without_storage.responses.create(model=MODEL, input="marker?", previous_response_id=response.id)
    assert refused.value.code == "previous_response_not_found"
    stored = org_without_storage.responses.create(model=MODEL, input="The marker is S-2.", store=True)
    assert stored.model_dump().get("store") is True
    assert org_without_storage.responses.retrieve(stored.id).id == stored.id


def test_the_body_reports_the_effective_store(client: openai.OpenAI) -> None:
    assert client.responses.create(model=MODEL, input="hi").model_dump().get("store") is True
    assert client.responses.create(model=MODEL, input="hi", store=False).model_dump().get("store") is False


# -- structured output -------------------------------------------------------------------------------------------


class Weather(pydantic.BaseModel):
    city: str
    degrees: int
    sunny: bool
    tags: list[str]


def test_structured_output_fits_the_schema(client: openai.OpenAI) -> None:
    parsed = client.responses.parse(model=MODEL, input="The marker is J-1.", text_format=Weather)
    assert isinstance(parsed.output_parsed, Weather)
    assert parsed.output_parsed.city == "Noted marker J-1."
    assert parsed.output_parsed.tags == ["Noted marker J-1."]


def test_json_object_format(client: openai.OpenAI) -> None:
    answer = client.responses.create(model=MODEL, input="hello", text={"format": {"type": "json_object"}})
    assert json.loads(answer.output_text) == {"answer": "Noted."}


def test_structured_output_cut_short_fails_to_parse(client: openai.OpenAI) -> None:
    with pytest.raises(pydantic.ValidationError):
        client.responses.parse(model=MODEL, input="The marker is J-2.", text_format=Weather, max_output_tokens=3)


def test_a_background_response_is_kept_for_polling_whatever_the_org_default(org_without_storage: openai.OpenAI) -> None:
    queued = org_without_storage.responses.create(model=MODEL, input="The marker is B-1.", background=True)
    assert queued.status == "queued"
    assert queued.model_dump().get("store") is False
    polled = org_without_storage.responses.retrieve(queued.id)
    assert polled.id == queued.id
    with pytest.raises(openai.BadRequestError):
        org_without_storage.responses.create(model=MODEL, input="hi", background=True, store=False)
