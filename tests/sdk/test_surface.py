"""Every method of the Responses and Conversations surface, sync and async, through the real client: each
makes one span with its own operation name, and what it tells the ledger shows in later checks."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from openai.resources.responses.responses import Responses

from otel_responses.emulator import Emulator
from otel_responses.tools import scenarios as sc

from ..conftest import Captured

MODEL = "gpt-4.1-mini"
HAS_COMPACT = hasattr(Responses, "compact")
HAS_CANCEL = hasattr(Responses, "cancel")
HAS_INPUT_TOKENS = hasattr(Responses, "input_tokens")


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def by_operation(captured: Captured, name: str) -> list[dict[str, Any]]:
    return [attrs(s) for s in captured.spans() if attrs(s).get("gen_ai.operation.name") == name]


def test_delete_makes_a_span_and_the_response_unchainable(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    created = client.responses.create(model=MODEL, input="hi")
    client.responses.delete(created.id)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="again", previous_response_id=created.id)
    (deleted,) = by_operation(captured, "delete_response")
    assert deleted["gen_ai.response.id"] == created.id
    assert captured.spans()[1].name == "delete_response"
    assert attrs(captured.spans()[-1])["openai_responses.signals"] == ("unstored_parent",)


def test_background_response_polled_to_completion_feeds_the_ledger(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    created = client.responses.create(
        model=MODEL, input=f"Please use {sc.TOOL_NAME} for 9.", tools=sc.TOOLS, background=True
    )
    assert created.status == "queued"
    polled = created
    while polled.status in ("queued", "in_progress"):
        polled = client.responses.retrieve(created.id)
    call = next(item for item in polled.output if item.type == "function_call")
    # The call arrived with the polled response: a next turn without its output is caught.
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, previous_response_id=created.id, input="go on", tools=sc.TOOLS)
    assert attrs(captured.spans()[-1])["openai_responses.signals"] == ("missing_tool_output",)
    answered = client.responses.create(
        model=MODEL,
        previous_response_id=created.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "done"}],
        tools=sc.TOOLS,
    )
    assert answered.output_text == f"Tool {sc.TOOL_NAME} returned done."
    chat = by_operation(captured, "chat")
    assert "gen_ai.response.finish_reasons" not in chat[0]  # queued: no reason yet
    assert chat[0]["openai_responses.response.status"] == "queued"
    assert chat[-1]["openai_responses.signals"] == ()
    fetches = by_operation(captured, "fetch_response")
    assert fetches[-1]["gen_ai.response.finish_reasons"] == ("tool_call",)  # completed with a call to answer
    assert fetches[-1]["gen_ai.response.status"] == "completed"
    assert fetches[-1]["openai_responses.output.item_types"] == ("function_call",)


@pytest.mark.skipif(not HAS_CANCEL, reason="responses.cancel is not in this SDK release")
def test_cancel(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    created = client.responses.create(model=MODEL, input="hi", background=True)
    cancelled = client.responses.cancel(created.id)
    assert cancelled.status == "cancelled"
    (span,) = by_operation(captured, "cancel_response")
    assert span["gen_ai.response.id"] == created.id
    assert span["gen_ai.response.finish_reasons"] == ("error",)
    assert span["openai_responses.response.status"] == "cancelled"


@pytest.mark.skipif(not HAS_COMPACT, reason="responses.compact arrived in openai 2.9.0")
def test_compact(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    first = client.responses.create(model=MODEL, input="Remember this: the marker is C-1.")
    compacted = client.responses.compact(model=MODEL, previous_response_id=first.id)
    (span,) = by_operation(captured, "compact_response")
    assert span["openai_responses.compaction"] is True
    assert span["gen_ai.conversation.compacted"] is True
    assert span["openai_responses.signals"] == ("compaction",)
    assert span["openai_responses.context_loss"] is False
    assert span["gen_ai.usage.input_tokens"] == compacted.usage.input_tokens
    assert span["openai_responses.output.item_types"] == tuple(item.type for item in compacted.output)
    assert captured.spans()[-1].name == f"compact_response {MODEL}"


@pytest.mark.skipif(not HAS_INPUT_TOKENS, reason="responses.input_tokens is not in this SDK release")
def test_input_items_and_input_tokens(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    created: Any = client.responses.create(model=MODEL, input="Remember this: the marker is I-1.")
    page = client.responses.input_items.list(created.id)
    assert [item.type for item in page.data] == ["message"]
    counted: Any = client.responses.input_tokens.count(model=MODEL, input="Remember this: the marker is I-1.")
    assert counted.input_tokens == created.usage.input_tokens
    (listed,) = by_operation(captured, "list_input_items")
    assert listed["gen_ai.response.id"] == created.id
    (count,) = by_operation(captured, "count_input_tokens")
    assert count["gen_ai.usage.input_tokens"] == counted.input_tokens
    usage = captured.metric_points("gen_ai.client.token.usage")
    assert sum(p.count for p in usage) == 2  # the create's input and output; a count consumes no tokens


def test_conversations_and_their_items(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    conversation = client.conversations.create(items=[{"role": "user", "content": "Remember this: the marker is V-1."}])
    client.conversations.retrieve(conversation.id)
    client.conversations.update(conversation.id, metadata={"topic": "orders"})
    added = client.conversations.items.create(conversation.id, items=[{"role": "user", "content": "Hello."}])
    item_id = added.data[0].id
    assert item_id is not None
    client.conversations.items.retrieve(item_id, conversation_id=conversation.id)
    listed = client.conversations.items.list(conversation.id)
    assert len(listed.data) == 2
    client.conversations.items.delete(item_id, conversation_id=conversation.id)
    answer = client.responses.create(model=MODEL, conversation=conversation.id, input="What is the marker?")
    assert answer.output_text == "marker=V-1"
    client.conversations.delete(conversation.id)
    names = [s.name for s in captured.spans()]
    assert names == [
        "create_conversation",
        "retrieve_conversation",
        "update_conversation",
        "create_conversation_items",
        "retrieve_conversation_item",
        "list_conversation_items",
        "delete_conversation_item",
        f"chat {MODEL}",
        "delete_conversation",
    ]
    assert all(attrs(s)["gen_ai.conversation.id"] == conversation.id for s in captured.spans())
    assert all("topic" not in str(attrs(s)) and "orders" not in str(attrs(s)) for s in captured.spans())


def test_tool_output_written_into_a_conversation_answers_its_pending_call(
    emulator: Emulator, captured: Captured
) -> None:
    client = emulator.client()
    conversation = client.conversations.create()
    asked = client.responses.create(
        model=MODEL, conversation=conversation.id, input=f"Please use {sc.TOOL_NAME} for 5.", tools=sc.TOOLS
    )
    call = next(item for item in asked.output if item.type == "function_call")
    client.conversations.items.create(
        conversation.id, items=[{"type": "function_call_output", "call_id": call.call_id, "output": "ok"}]
    )
    client.responses.create(model=MODEL, conversation=conversation.id, input="Thanks. What did the tool return?")
    last = attrs(captured.spans()[-1])
    assert last["openai_responses.signals"] == ()
    assert last["openai_responses.tool_calls.check"] == "none"


def test_unanswered_call_in_a_conversation_is_caught(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    conversation = client.conversations.create()
    client.responses.create(
        model=MODEL, conversation=conversation.id, input=f"Please use {sc.TOOL_NAME} for 5.", tools=sc.TOOLS
    )
    client.conversations.items.create(conversation.id, items=[{"role": "user", "content": "Any news?"}])
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, conversation=conversation.id, input="Go on.")
    assert (captured.spans()[-1].attributes or {})["openai_responses.tool_calls.check"] == "missing_tool_output"


def test_async_surface(emulator: Emulator, captured: Captured) -> None:
    async def main() -> None:
        client = emulator.async_client()
        created = await client.responses.create(model=MODEL, input="Remember this: the marker is Y-1.")
        page = await client.responses.input_items.list(created.id)
        assert len(page.data) == 1
        items = [item async for item in client.responses.input_items.list(created.id)]
        assert len(items) == 1
        if HAS_INPUT_TOKENS:
            await client.responses.input_tokens.count(model=MODEL, input="hi")
        conversation = await client.conversations.create()
        await client.conversations.items.create(conversation.id, items=[{"role": "user", "content": "hi"}])
        listed = [item async for item in client.conversations.items.list(conversation.id)]
        assert len(listed) == 1
        await client.conversations.delete(conversation.id)
        await client.responses.delete(created.id)
        await client.close()

    asyncio.run(main())
    names = [s.name for s in captured.spans()]
    assert names == [
        f"chat {MODEL}",
        "list_input_items",
        "list_input_items",
        *([f"count_input_tokens {MODEL}"] if HAS_INPUT_TOKENS else []),
        "create_conversation",
        "create_conversation_items",
        "list_conversation_items",
        "delete_conversation",
        "delete_response",
    ]


def test_paginator_never_awaited_makes_no_request_and_ends_its_span(emulator: Emulator, captured: Captured) -> None:
    import gc

    async def main() -> None:
        client = emulator.async_client()
        paginator = client.responses.input_items.list("resp_never")
        del paginator
        gc.collect()
        await client.close()

    before = len(emulator.requests)
    asyncio.run(main())
    assert len(emulator.requests) == before
    assert attrs(captured.only_span())["openai_responses.stream.ended"] == "abandoned"


def test_beta_responses_when_the_sdk_has_them(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    beta = getattr(getattr(client, "beta", None), "responses", None)
    if beta is None or not hasattr(beta, "create"):
        pytest.skip("client.beta.responses is not in this SDK release")
    created = beta.create(model=MODEL, input="Remember this: the marker is B-1.")
    span = captured.only_span()
    assert span.name == f"chat {MODEL}"
    assert attrs(span)["gen_ai.response.id"] == created.id
