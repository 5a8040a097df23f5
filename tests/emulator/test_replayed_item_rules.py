"""The API's rules on replayed items, end to end: the emulator refuses each broken rule as the API does (its status,
type, code, param and message), and the instrumentation names it before the request leaves — the same signals on the
same request stopped before it is sent. The real `openai` client over loopback; strict mode refuses what it may, and
nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import openai
import pytest

from otel_responses import ContextLossError
from otel_responses._analysis import item_ids
from otel_responses.emulator import Emulator, replay_rules

from ..ledger_scenarios import ENCRYPTED, MODEL, user
from ..sdk.test_signals import instrumented
from ..support import attrs

REASONER = "gpt-5-mini"  # reasoning, no `phase`
WEATHER: Any = [{"type": "function", "name": "lookup_weather", "parameters": {"type": "object", "properties": {}}}]
DUPLICATE = "Duplicate item found with id {}. Remove duplicate items from your input and try again."

Request = dict[str, Any]
Body = dict[str, Any]


def _refused(message: str, param: str = "input", code: str | None = None) -> Body:
    return {"message": message, "type": "invalid_request_error", "param": param, "code": code}


def colliding_fallback_ids(client: openai.OpenAI) -> tuple[Request, Body]:
    """A client's fallback ids (`msg_${index}`) colliding with one it kept."""
    said = {"type": "message", "id": "msg_4", "role": "assistant", "content": "Noted."}
    sent = [user("Hi."), said, user("And?"), {**said, "content": "Sure."}, user("Bye.")]
    return {"model": MODEL, "input": sent}, _refused(DUPLICATE.format("msg_4"))


def resent_beside_its_conversation(client: openai.OpenAI) -> tuple[Request, Body]:
    """A whole turn re-sent with its server ids beside the conversation that holds it."""
    conversation = client.conversations.create().id
    first = client.responses.create(model=MODEL, input="Remember: M-1.", conversation=conversation)
    sent = {"model": MODEL, "conversation": conversation, "input": [*first.output, user("What did I say?")]}
    return sent, _refused(DUPLICATE.format(first.output[0].id))


def referenced_beside_its_chain(client: openai.OpenAI) -> tuple[Request, Body]:
    """Item references to the chain's outputs beside `previous_response_id` (the AI SDK before its fix)."""
    first = client.responses.create(model=REASONER, input="Choose a code word.")
    references = [{"type": "item_reference", "id": item.id} for item in first.output]
    sent = {"model": REASONER, "previous_response_id": first.id, "input": [*references, user("The code word?")]}
    return sent, _refused(DUPLICATE.format(first.output[0].id))


def message_without_its_reasoning(client: openai.OpenAI) -> tuple[Request, Body]:
    """A stored message replayed under its id, its reasoning dropped."""
    first = client.responses.create(model=REASONER, input="Choose a code word.")
    reasoning, answer = first.output
    message = (
        f"Item '{answer.id}' of type 'message' was provided without its required 'reasoning' item: '{reasoning.id}'."
    )
    return {"model": REASONER, "input": [user("Choose a code word."), answer, user("The code word?")]}, _refused(
        message
    )


def reasoning_without_its_message(client: openai.OpenAI) -> tuple[Request, Body]:
    """pydantic-ai's modified history: the reasoning kept under its id, its message replaced by other text."""
    first = client.responses.create(model=REASONER, input="What is the meaning of life?")
    reasoning, _ = first.output
    other = {"role": "assistant", "content": "The meaning of life is 42"}
    sent = {"model": REASONER, "input": [user("What is the meaning of life?"), reasoning, other, user("Anything?")]}
    return sent, _refused(
        f"Item '{reasoning.id}' of type 'reasoning' was provided without its required following item."
    )


def another_providers_call_id(client: openai.OpenAI) -> tuple[Request, Body]:
    """A tool call made with another provider, replayed under its id."""
    call_id = "toolu_01A09q90qw90"
    call = {"type": "function_call", "id": call_id, "call_id": call_id, "name": "lookup_weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": call_id, "output": "sunny"}
    sent = {"model": MODEL, "input": [user("Weather?"), call, output], "tools": WEATHER}
    message = f"Invalid 'input[1].id': '{call_id}'. Expected an ID that begins with 'fc'."
    return sent, _refused(message, "input[1].id", "invalid_value")


class Refusal(NamedTuple):
    """A request the API refuses, built from earlier turns (``make``: the request and the API's error body), and the
    signals its span carries."""

    make: Callable[[openai.OpenAI], tuple[Request, Body]]
    signals: tuple[str, ...]


REFUSALS: dict[str, Refusal] = {
    "one id twice in the input": Refusal(colliding_fallback_ids, ("duplicate_item_id",)),
    "items re-sent under their ids beside the conversation": Refusal(
        resent_beside_its_conversation, ("duplicate_item_id",)
    ),
    "item references beside the chain that holds them": Refusal(referenced_beside_its_chain, ("duplicate_item_id",)),
    # An earlier turn's reasoning under the model's default, current_turn: leaving it out loses nothing the model would
    # have read (no reasoning_dropped), but the API still refuses its message under its id without it.
    "a message under its server id, its reasoning dropped": Refusal(
        message_without_its_reasoning, ("reasoning_pair_broken",)
    ),
    "a reasoning item, its message replaced by other text": Refusal(
        reasoning_without_its_message, ("replay_incomplete", "reasoning_pair_broken")
    ),
    "a call under another provider's id": Refusal(another_providers_call_id, ("malformed_item_id",)),
}


class _Stopped(Exception):
    """Raised by a client's request hook: the request never leaves the process."""


def _stop(request: Any) -> None:
    raise _Stopped


def never_sending(emulator: Emulator) -> openai.OpenAI:
    """A client whose requests are stopped before they are sent (an HTTP request hook that raises)."""
    return emulator.client(http_client=openai.DefaultHttpxClient(event_hooks={"request": [_stop]}))


def signals_of(span: Any) -> tuple[str, ...]:
    return tuple(attrs(span)["openai_responses.signals"])


def test_the_emulators_prefixes_are_those_the_signal_checks() -> None:
    assert replay_rules.ID_PREFIXES == item_ids.ID_PREFIXES


@pytest.mark.parametrize("case", list(REFUSALS))
def test_the_emulator_refuses_as_the_api_does_and_the_signal_comes_before_sending(
    case: str, emulator: Emulator
) -> None:
    refusal = REFUSALS[case]
    with instrumented() as cap, emulator.client() as client:
        sent, body = refusal.make(client)
        earlier = len(cap.chat_spans())
        with pytest.raises(openai.BadRequestError) as answered:
            client.responses.create(**sent)
        assert (answered.value.status_code, answered.value.body) == (400, body)
        spans = cap.chat_spans()
        assert [signals_of(span) for span in spans[:earlier]] == [()] * earlier  # the turns before it are healthy
        assert signals_of(spans[earlier]) == refusal.signals
        # The same request stopped before it leaves the process: the same signals, from the request alone.
        received = len(emulator.requests)
        # (The hook's exception reaches the app as it is, or as a connection error on the oldest supported SDK.)
        with never_sending(emulator) as stopped, pytest.raises((_Stopped, openai.APIConnectionError)):
            stopped.responses.create(**sent)
        assert len(emulator.requests) == received
        assert signals_of(cap.chat_spans()[-1]) == refusal.signals


@pytest.mark.parametrize("model", [REASONER, MODEL])
def test_a_replay_of_the_users_messages_alone_is_named_and_the_model_forgets(model: str, emulator: Emulator) -> None:
    """The seed guide's "not re-sending the user's text once more": `[user1, user2]` after `user1` got its answer."""
    with instrumented() as cap, emulator.client() as client:
        marker = user("Remember this: the marker is K-7. Now choose a code word.")
        first: Any = client.responses.create(model=model, input=[marker])
        answer = client.responses.create(model=model, input=[marker, user("What are the marker and the code word?")])
        assert "code_word=unknown" in answer.output_text  # the code word lived in the answer's reasoning only
        kept = client.responses.create(model=model, input=[marker, *first.output, user("The marker?")])
    expected = ["reasoning", "message"] if model == REASONER else ["message"]
    (healthy, lost, whole) = cap.chat_spans()
    assert (signals_of(healthy), signals_of(lost), signals_of(whole)) == ((), ("replay_incomplete",), ())
    (event,) = lost.events
    assert dict(event.attributes or {}) == {
        "openai_responses.signal.name": "replay_incomplete",
        "openai_responses.signal.severity": "warning",
        "openai_responses.parent.id": first.id,
        "openai_responses.missing.count": len(expected),
        "openai_responses.missing.item_types": tuple(expected),
        "openai_responses.replay.messages_only": True,
    }
    assert "marker=K-7" in kept.output_text


def test_a_client_giving_its_own_ids_to_every_input_item_is_healthy(emulator: Emulator) -> None:
    """The Codex CLI: `msg_<uuid>` on every message, `fco_<uuid>` on every function call output, store=false."""
    tools: Any = [{"type": "function", "name": "lookup_order", "parameters": {"type": "object", "properties": {}}}]
    with instrumented() as cap, emulator.client() as client:
        history: list[Any] = [
            {"type": "message", "id": "msg_0199a6b2-6f4e-7c21-9d3a-2b8f5e1c4a70", "role": "developer", "content": "x"},
            {"type": "message", "id": "msg_0199a6b2-6f4e-7c21-9d3a-2b8f5e1c4a71", "role": "user",
             "content": "Please use lookup_order for order 7."},
        ]  # fmt: skip
        first = client.responses.create(model=REASONER, input=history, tools=tools, store=False, include=ENCRYPTED)
        call = next(item for item in first.output if item.type == "function_call")
        output = {"type": "function_call_output", "id": "fco_0199a6b2-7a10-7e55-8c2d-91f0aa3b6c11",
                  "call_id": call.call_id, "output": "shipped"}  # fmt: skip
        history += [*first.output, output]
        second = client.responses.create(model=REASONER, input=history, tools=tools, store=False, include=ENCRYPTED)
        history += [*second.output, {**history[1], "id": "msg_0199a6b2-8b3c-7f00-a1e4-5d6c7b8a9f02", "content": "ok"}]
        client.responses.create(model=REASONER, input=history, tools=tools, store=False, include=ENCRYPTED)
    assert [signals_of(span) for span in cap.chat_spans()] == [(), (), ()]


def test_near_misses_the_api_accepts_raise_nothing(emulator: Emulator) -> None:
    with instrumented() as cap, emulator.client() as client:
        # The reasoning sent without its id before its message (the Agents SDK's `reasoning_item_id_policy="omit"`).
        first: Any = client.responses.create(model=REASONER, input="Choose a code word.")
        reasoning, answer = first.output
        bare: Any = {k: v for k, v in reasoning.model_dump(exclude_none=True).items() if k != "id"}
        client.responses.create(model=REASONER, input=[user("Choose a code word."), bare, answer, user("And?")])
        # An item the app deleted from its conversation, sent again under its id.
        conversation = client.conversations.create().id
        said: Any = client.responses.create(model=MODEL, input="Remember: M-2.", conversation=conversation)
        client.conversations.items.delete(said.output[0].id, conversation_id=conversation)
        client.responses.create(model=MODEL, conversation=conversation, input=[*said.output, user("What did I say?")])
        # Items re-sent under their ids beside previous_response_id: accepted, read twice (not a duplicate id).
        chained: Any = client.responses.create(model=MODEL, input="Remember: M-3.")
        again = client.responses.create(
            model=MODEL, previous_response_id=chained.id, input=[*chained.output, user("?")]
        )
        assert again.status == "completed"
    assert [signals_of(span) for span in cap.chat_spans()] == [(), (), (), (), (), ("context_duplicated",)]


def test_strict_mode_refuses_a_duplicate_id_and_nothing_else(emulator: Emulator) -> None:
    """Refused before sending: one id twice in the input, and ids the conversation holds by this process's record.
    Sent, for the API to answer: the warnings (a broken pair, a malformed id)."""
    with instrumented(strict=True) as cap, emulator.client() as client:
        for make in (colliding_fallback_ids, resent_beside_its_conversation):
            sent, _ = make(client)
            received = len(emulator.requests)
            with pytest.raises(ContextLossError) as refused:
                client.responses.create(**sent)
            assert refused.value.signal == "duplicate_item_id"
            assert refused.value.doc_url.endswith("/signals/#duplicate_item_id")
            assert len(emulator.requests) == received  # nothing was sent
        for make in (message_without_its_reasoning, another_providers_call_id):
            sent, body = make(client)
            with pytest.raises(openai.BadRequestError) as answered:
                client.responses.create(**sent)
            assert answered.value.body == body
    assert attrs(cap.chat_spans()[-1])["error.type"] == "BadRequestError"
