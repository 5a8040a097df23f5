"""How a replayed item is recognised, end to end: the real `openai` client against the emulator, one habit of a client
or a compatible server per test, the exact signals of every chat span, and the near miss that still names a loss.

The rule (``otel_responses._analysis.analysis``): an item is known by its id when the ledger knows it, else by its
call, else by its text; a match by anything but the item's own identity, or an ambiguous one, only clears a missing
item in a response the request already links, never accuses. The same rows, as item shapes, are in
tests/core/test_core.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from otel_responses.emulator import Emulator, EmulatorConfig
from otel_responses.ledger.redis import RedisLedger
from otel_responses.testing import CapturedTelemetry, capture

from ..ledger_scenarios import TOOL_NAME, TOOLS, Item, tool_request, user
from ..shared_ledger import KEY, RedisServer

REASONING = "gpt-5-mini"  # reasoning, no `phase`
MODEL = "gpt-4.1-mini"
ENCRYPTED: Any = ["reasoning.encrypted_content"]
ALL_TURNS: Any = {"context": "all_turns"}  # earlier turns' reasoning rendered back: dropping it loses it
PARENT_DELETED = "openai_responses.parent.deleted"


def chat_signals(cap: CapturedTelemetry) -> list[tuple[str, ...]]:
    return [tuple(dict(span.attributes or {})["openai_responses.signals"]) for span in cap.chat_spans()]  # type: ignore[arg-type]


def signal_details(cap: CapturedTelemetry, name: str) -> list[dict[str, Any]]:
    return [
        dict(event.attributes or {})
        for span in cap.spans()
        for event in span.events
        if event.name == "openai_responses.signal"
        and (event.attributes or {}).get("openai_responses.signal.name") == name
    ]


def dumped(response: Any) -> list[Item]:
    return [item.model_dump(mode="json", exclude_none=True) for item in response.output]


# -- an id the API never returned ---------------------------------------------------------------------------------


def _streamed(client: openai.OpenAI, prompt: str) -> list[Item]:
    """A reasoning turn streamed, its output items as a client keeps them: the message under an id of its own."""
    items: list[dict[str, Any]] = []
    with client.responses.stream(model=REASONING, input=prompt, store=False, include=ENCRYPTED) as stream:
        for event in stream:
            if event.type == "response.output_item.done":
                items.append(event.item.model_dump(mode="json", exclude_none=True))
    for number, item in enumerate(items, 1):
        if item["type"] == "message":
            item["id"] = f"msg_local_{number}"
    return items


def test_a_streamed_answer_replayed_under_the_clients_own_id(client: openai.OpenAI) -> None:
    with capture() as cap:
        kept = _streamed(client, "Remember: the marker is ID-1.")
        assert [item["type"] for item in kept] == ["reasoning", "message"]
        history = [user("Remember: the marker is ID-1."), *kept, user("What is the marker?")]
        answer = client.responses.create(model=REASONING, input=history, store=False, include=ENCRYPTED)
        assert answer.output_text == "marker=ID-1"
        # Near miss, another conversation: the answer really dropped (the reasoning kept, so the response is linked).
        other = _streamed(client, "Remember: the marker is ID-9.")
        dropped = [user("Remember: the marker is ID-9."), other[0], user("What is the marker?")]
        client.responses.create(model=REASONING, input=dropped, store=False, include=ENCRYPTED)
    assert chat_signals(cap) == [(), (), (), ("replay_incomplete",)]


# -- one id at two positions of a response ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def repeating() -> Iterator[Emulator]:
    """A Responses-compatible server that returns two reasoning items under one id per reasoning turn."""
    with Emulator(EmulatorConfig(repeat_reasoning_ids=True)) as emulator:
        yield emulator


def test_an_id_repeated_by_the_server_replayed_byte_for_byte(repeating: Emulator) -> None:
    with repeating.client() as client, capture() as cap:
        first = client.responses.create(
            model=REASONING, input="Now choose a code word.", store=False, include=ENCRYPTED, reasoning=ALL_TURNS
        )
        output = dumped(first)
        assert [item["type"] for item in output] == ["reasoning", "reasoning", "message"]
        assert output[0]["id"] == output[1]["id"]
        assert output[0]["encrypted_content"] != output[1]["encrypted_content"]
        base = [user("Now choose a code word."), *output, user("What is the code word?")]
        whole = client.responses.create(
            model=REASONING, input=base, store=False, include=ENCRYPTED, reasoning=ALL_TURNS
        )
        assert whole.output_text.startswith("code_word=CW-")
        # The same, in another conversation, each of the pair in the other's place.
        other = dumped(client.responses.create(model=REASONING, input="Choose a code word.", store=False,
                                               include=ENCRYPTED, reasoning=ALL_TURNS))  # fmt: skip
        swapped = [user("Choose a code word."), other[1], other[0], other[2], user("What is the code word?")]
        client.responses.create(model=REASONING, input=swapped, store=False, include=ENCRYPTED, reasoning=ALL_TURNS)
        # Near miss: one of the pair dropped is a loss, counted once.
        third = dumped(client.responses.create(model=REASONING, input="Pick a code word.", store=False,
                                               include=ENCRYPTED, reasoning=ALL_TURNS))  # fmt: skip
        one = [user("Pick a code word."), third[0], third[2], user("What is the code word?")]
        client.responses.create(model=REASONING, input=one, store=False, include=ENCRYPTED, reasoning=ALL_TURNS)
    assert chat_signals(cap) == [(), (), (), (), (), ("reasoning_dropped",)]
    assert [d["openai_responses.missing.count"] for d in signal_details(cap, "reasoning_dropped")] == [1]


# -- a call_id rewritten on both sides ----------------------------------------------------------------------------


def test_a_call_id_rewritten_on_the_call_and_its_output(client: openai.OpenAI) -> None:
    """The client sends each call's item id as its call_id, on the call and on the output, without the item id:
    the API pairs them, and the call is the response's (found by type and position beside its reasoning)."""
    with capture() as cap:
        first = client.responses.create(
            model=REASONING, input=[tool_request()], tools=TOOLS, store=False, include=ENCRYPTED
        )
        reasoning, call = dumped(first)
        assert call["type"] == "function_call"
        rewritten: Any = {"type": "function_call", "call_id": call["id"], "name": call["name"], "arguments": "{}"}
        output: Any = {"type": "function_call_output", "call_id": call["id"], "output": "shipped"}
        answer = client.responses.create(
            model=REASONING, input=[tool_request(), reasoning, rewritten, output], tools=TOOLS, store=False,
            include=ENCRYPTED,
        )  # fmt: skip
        assert answer.output_text == f"Tool {TOOL_NAME} returned shipped."
        # Near miss, another conversation: the call itself dropped (the API refuses the output without it).
        second = client.responses.create(
            model=REASONING, input=[tool_request()], tools=TOOLS, store=False, include=ENCRYPTED
        )
        reasoning, call = dumped(second)
        output = {"type": "function_call_output", "call_id": call["id"], "output": "shipped"}
        with pytest.raises(openai.BadRequestError):
            client.responses.create(
                model=REASONING, input=[tool_request(), reasoning, output], tools=TOOLS, store=False,
                include=ENCRYPTED,
            )  # fmt: skip
    assert chat_signals(cap) == [(), (), (), ("replay_incomplete", "orphan_tool_output")]


# -- items the app wrote to a conversation ------------------------------------------------------------------------


def _session_turn(client: openai.OpenAI, conversation: str, prompt: str) -> Any:
    """The OpenAI Agents SDK's `OpenAIConversationsSession`, with the raw SDK: the history is the conversation's
    items (listed as the session reads them), the new items are written back after the turn."""
    listed: Any = [
        item.model_dump(mode="json", exclude_unset=True)
        for item in client.conversations.items.list(conversation_id=conversation, order="asc")
    ]
    new: Any = [user(prompt)]
    response = client.responses.create(model=REASONING, input=[*listed, *new], tools=TOOLS)
    written = [*new, *dumped(response)]
    call = next((item for item in response.output if item.type == "function_call"), None)
    if call is not None:
        written.append({"type": "function_call_output", "call_id": call.call_id, "output": "shipped"})
    client.conversations.items.create(conversation_id=conversation, items=written)
    return response


def test_items_the_app_wrote_to_a_conversation_never_hide_the_response(client: openai.OpenAI) -> None:
    with capture() as cap:
        conversation = client.conversations.create().id
        _session_turn(client, conversation, f"Please use {TOOL_NAME} for order 7.")
        _session_turn(client, conversation, "Thanks. Now choose a code word.")
        last = _session_turn(client, conversation, "What did the tool return?")
    assert last.output_text == "tool=shipped"
    assert chat_signals(cap) == [(), (), ()]


# -- a response the app deleted -----------------------------------------------------------------------------------


def test_a_response_the_app_deleted(client: openai.OpenAI) -> None:
    with capture() as cap:
        kept = client.responses.create(model=MODEL, input="Remember: the marker is D-1.")
        client.responses.delete(kept.id)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(kept.id)
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=kept.id)
        # Near miss: a response created unstored, retrieved.
        unstored = client.responses.create(model=MODEL, input="Remember: the marker is D-2.", store=False)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(unstored.id)
    by_operation = [
        (dict(s.attributes or {})["gen_ai.operation.name"], tuple(dict(s.attributes or {})["openai_responses.signals"]))  # type: ignore[arg-type]
        for s in cap.spans()
    ]
    assert by_operation == [
        ("chat", ()),
        ("delete_response", ()),
        ("fetch_response", ()),
        ("chat", ("unstored_parent",)),
        ("chat", ()),
        ("fetch_response", ("unstored_retrieve",)),
    ]
    (deleted,) = signal_details(cap, "unstored_parent")
    assert deleted[PARENT_DELETED] is True


# -- instructions across the whole lineage ------------------------------------------------------------------------


def test_every_turn_without_the_instructions_is_named(client: openai.OpenAI) -> None:
    with capture() as cap:
        first = client.responses.create(model=MODEL, input="Remember: the marker is L-1.", instructions="Be brief.")
        second = client.responses.create(model=MODEL, input="And?", previous_response_id=first.id)
        client.responses.create(model=MODEL, input="And then?", previous_response_id=second.id)
        # Near miss: a chain whose first turn put a system message into the server's state.
        system = [{"role": "system", "content": "Be brief."}, user("Remember: the marker is L-2.")]
        held = client.responses.create(model=MODEL, input=system, instructions="Be brief.")
        again = client.responses.create(model=MODEL, input="And?", previous_response_id=held.id)
        client.responses.create(model=MODEL, input="And then?", previous_response_id=again.id)
    assert chat_signals(cap) == [(), ("instructions_dropped",), ("instructions_dropped",), (), (), ()]
    assert [
        (d["openai_responses.parent.id"], d["openai_responses.instructions.last_response.id"],
         d["openai_responses.instructions.last_turn"])
        for d in signal_details(cap, "instructions_dropped")
    ] == [(first.id, first.id, 1), (second.id, first.id, 1)]  # fmt: skip


# -- the same habits through a shared ledger, read by an async worker ---------------------------------------------


def test_an_async_worker_reading_the_shared_ledger_recognises_the_same_items(
    redis_server: RedisServer, emulator: Emulator, client: openai.OpenAI
) -> None:
    """Worker A makes the turns; worker B, asynchronous (its ledger's reads awaited before each call), replays them
    as the clients above do: the same signals as in one process."""
    url = redis_server.url(db=5)
    with redis_server.client(db=5) as admin:
        admin.flushdb()
    writer, reader = RedisLedger(url), RedisLedger(url)
    try:
        with capture(ledger=writer, hash_key=KEY):
            kept = _streamed(client, "Remember: the marker is ID-2.")
            other = _streamed(client, "Remember: the marker is ID-3.")
            tool = client.responses.create(
                model=REASONING, input=[tool_request()], tools=TOOLS, store=False, include=ENCRYPTED
            )
        assert writer.flush(5)
        reasoning, call = dumped(tool)
        rewritten = {"type": "function_call", "call_id": call["id"], "name": call["name"], "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": call["id"], "output": "shipped"}
        replays = [
            [user("Remember: the marker is ID-2."), *kept, user("What is the marker?")],
            [user("Remember: the marker is ID-3."), other[0], user("What is the marker?")],  # the answer dropped
            [tool_request(), reasoning, rewritten, output],
        ]

        async def worker_b() -> None:
            async with emulator.async_client() as b:
                for history in replays:
                    await b.responses.create(
                        model=REASONING, input=history, tools=TOOLS, store=False, include=ENCRYPTED
                    )

        with capture(ledger=reader, hash_key=KEY) as cap:
            asyncio.run(worker_b())
        assert chat_signals(cap) == [(), ("replay_incomplete",), ()]
        assert reader.stats()["reads"] >= 3
        assert reader.stats()["read_failures"] == 0
    finally:
        writer.close(timeout=1)
        reader.close(timeout=1)
