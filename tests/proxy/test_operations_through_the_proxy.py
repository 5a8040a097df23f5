"""Every operation the instrumentation records — retrieve (and its resumed stream), delete, cancel, compact, input
items, input tokens, conversations and their items, a background response polled, raw and streaming-response
variants, an API error — and Azure OpenAI's paths: through the proxy, span for span what the SDK instrumented
in-process records for the same calls against the same (reset) emulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from otel_responses.emulator import Emulator, EmulatorConfig
from otel_responses.testing import capture

from ..corpus import HAS_COMPACT, HAS_INPUT_TOKENS
from .support import KEY, proxied
from .test_scenarios_through_the_proxy import _record

MODEL = "gpt-5.4"
API_VERSION = "2025-04-01-preview"


def every_operation(client: openai.OpenAI) -> None:
    """One of each call, in an order whose ledger effects matter (a retrieve of what was deleted, items written into
    a conversation before its next turn)."""
    responses, conversations = client.responses, client.conversations
    first = responses.create(model=MODEL, instructions="Be brief.", input="Remember this: the marker is OP-1.")
    responses.retrieve(first.id)
    for _ in responses.retrieve(first.id, stream=True):
        pass
    list(responses.input_items.list(first.id))
    if HAS_INPUT_TOKENS:
        responses.input_tokens.count(model=MODEL, input="How many tokens is this?")
    if HAS_COMPACT:
        responses.compact(model=MODEL, input=[{"role": "user", "content": "Remember this: the marker is OP-2."}])
    background = responses.create(model=MODEL, input="Remember this: the marker is OP-3.", background=True)
    responses.retrieve(background.id)
    responses.cancel(background.id)
    raw = responses.with_raw_response.create(model=MODEL, input="What is the marker?", previous_response_id=first.id)
    raw.parse()
    with responses.with_streaming_response.create(model=MODEL, input="Again?", stream=True) as streamed:
        for _ in streamed.iter_lines():
            pass
    responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        responses.retrieve(first.id)
    conversation = conversations.create(items=[{"role": "user", "content": "Remember this: the marker is OP-4."}])
    conversations.retrieve(conversation.id)
    conversations.update(conversation.id, metadata={"topic": "operations"})
    added = conversations.items.create(conversation.id, items=[{"role": "user", "content": "And OP-5."}])
    list(conversations.items.list(conversation.id))
    item_id: Any = added.data[0].id
    conversations.items.retrieve(item_id, conversation_id=conversation.id)
    responses.create(model=MODEL, conversation=conversation.id, input="What is the marker?")
    conversations.items.delete(item_id, conversation_id=conversation.id)
    conversations.delete(conversation.id)


def azure_calls(client: openai.OpenAI) -> None:
    """The Azure client's dated API (``/openai/responses?api-version=``): a chain, a retrieve, a stream."""
    first = client.responses.create(model="my-deployment", instructions="Be brief.", input="The marker is AZ-1.")
    client.responses.create(model="my-deployment", input="What is the marker?", previous_response_id=first.id)
    client.responses.retrieve(first.id)
    for _ in client.responses.create(model="my-deployment", input="Again.", stream=True, previous_response_id=first.id):
        pass


def _compare(
    workload: Callable[[openai.OpenAI], Any],
    direct: Callable[[Emulator], openai.OpenAI],
    via: Callable[[str], openai.OpenAI],
    upstream: Callable[[Emulator], str],
) -> int:
    with Emulator(EmulatorConfig(background_polls=1)) as emulator:
        with capture(hash_key=KEY) as captured, direct(emulator) as client:
            workload(client)
            theirs = _record(captured.spans())
        emulator.reset()
        with proxied(upstream(emulator)) as through, via(through.origin) as client:
            workload(client)
            ours = _record(through.wait_for_spans(len(theirs)))
    assert [r["name"] for r in ours] == [r["name"] for r in theirs]
    for number, (want, got) in enumerate(zip(theirs, ours, strict=True)):
        assert got == want, f"span {number + 1}: {want['name']}"
    return len(ours)


def test_every_operation_is_recorded_through_the_proxy_as_in_process() -> None:
    count = _compare(
        every_operation,
        lambda emulator: emulator.client(),
        lambda origin: openai.OpenAI(base_url=origin + "/v1", api_key="k", max_retries=0),
        lambda emulator: emulator.base_url,
    )
    assert count == 20 + HAS_INPUT_TOKENS + HAS_COMPACT


def test_azure_paths_are_recorded_through_the_proxy_as_in_process() -> None:
    def azure(endpoint: str) -> openai.OpenAI:
        return openai.AzureOpenAI(azure_endpoint=endpoint, api_key="k", api_version=API_VERSION, max_retries=0)

    count = _compare(azure_calls, lambda emulator: azure(emulator.azure_endpoint), azure, lambda e: e.azure_endpoint)
    assert count == 4
