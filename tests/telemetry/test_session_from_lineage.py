"""`session.id` on every span of a lineage with the `session_id_from_lineage` setting, so that backends grouping by
the general session convention show one conversation as one session; the app's `session.id` in OpenTelemetry
baggage wins; off by default; `gen_ai.conversation.id` untouched. Real client, emulator, SDK spans."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import openai
import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from otel_responses import ResponsesInstrumentor
from otel_responses.emulator import Emulator
from otel_responses.testing import capture

from ..support import attrs

SESSION = "session.id"
LINEAGE = "openai_responses.lineage.id"
MODEL = "gpt-5-mini"


@pytest.fixture(scope="module")
def client() -> Iterator[openai.OpenAI]:
    with Emulator() as emulator:
        shared = emulator.client()
        yield shared
        shared.close()


def _chain(client: openai.OpenAI, turns: int = 3) -> list[str]:
    """A `previous_response_id` chain of ``turns`` turns; the response ids."""
    ids = [client.responses.create(model=MODEL, instructions="Be brief.", input="The marker is M-5.").id]
    for _ in range(turns - 1):
        ids.append(
            client.responses.create(
                model=MODEL, instructions="Be brief.", previous_response_id=ids[-1], input="Again?"
            ).id
        )
    return ids


def test_off_by_default(client: openai.OpenAI) -> None:
    with capture() as telemetry:
        _chain(client)
    assert [SESSION in attrs(s) for s in telemetry.chat_spans()] == [False] * 3


def test_every_turn_of_a_chain_carries_the_lineage_as_its_session(client: openai.OpenAI) -> None:
    with capture(session_id_from_lineage=True) as telemetry:
        ids = _chain(client)
        other = _chain(client, 2)
    spans = telemetry.chat_spans()
    assert [attrs(s)[SESSION] for s in spans] == [ids[0]] * 3 + [other[0]] * 2
    assert [attrs(s)[SESSION] for s in spans] == [attrs(s)[LINEAGE] for s in spans]
    assert ["gen_ai.conversation.id" in attrs(s) for s in spans] == [False] * 5  # no surrogate conversation id


def test_a_conversation_is_one_session_named_by_it(client: openai.OpenAI) -> None:
    conversation = client.conversations.create()
    with capture(session_id_from_lineage=True) as telemetry:
        for text in ("The marker is M-6.", "What is the marker?"):
            client.responses.create(model=MODEL, instructions="Be brief.", input=text, conversation=conversation.id)
    assert [attrs(s)[SESSION] for s in telemetry.chat_spans()] == [conversation.id] * 2
    assert [attrs(s)["gen_ai.conversation.id"] for s in telemetry.chat_spans()] == [conversation.id] * 2


def test_a_stream_carries_its_session_too(client: openai.OpenAI) -> None:
    with capture(session_id_from_lineage=True) as telemetry:
        first = client.responses.create(model=MODEL, instructions="Be brief.", input="The marker is M-8.")
        stream = client.responses.create(
            model=MODEL, instructions="Be brief.", previous_response_id=first.id, input="Again?", stream=True
        )
        with stream:
            for _ in stream:
                pass
    assert [attrs(s)[SESSION] for s in telemetry.chat_spans()] == [first.id] * 2


def _in_baggage(session: str) -> object:
    return otel_context.attach(baggage.set_baggage(SESSION, session))


def test_the_apps_session_in_baggage_wins_on_every_span(client: openai.OpenAI) -> None:
    with capture(session_id_from_lineage=True) as telemetry:
        token = _in_baggage("chat-4711")
        try:
            ids = _chain(client)
            client.responses.retrieve(ids[-1])  # no lineage: the app's session all the same
        finally:
            otel_context.detach(token)  # type: ignore[arg-type]
        _chain(client, 2)  # out of the app's session again: the lineage's
    spans = telemetry.spans()
    assert [attrs(s).get(SESSION) for s in spans[:4]] == ["chat-4711"] * 4
    assert attrs(spans[3])["gen_ai.operation.name"] == "fetch_response"
    assert [attrs(s)[SESSION] for s in spans[4:]] == [attrs(spans[4])["gen_ai.response.id"]] * 2


def test_without_the_setting_baggage_adds_nothing(client: openai.OpenAI) -> None:
    with capture() as telemetry:
        token = _in_baggage("chat-4711")
        try:
            _chain(client, 2)
        finally:
            otel_context.detach(token)  # type: ignore[arg-type]
    assert [SESSION in attrs(s) for s in telemetry.spans()] == [False, False]


def test_a_call_without_a_lineage_has_no_session(client: openai.OpenAI) -> None:
    with capture(session_id_from_lineage=True) as telemetry:
        (first,) = _chain(client, 1)
        client.responses.retrieve(first)
    assert [attrs(s).get(SESSION) for s in telemetry.spans()] == [first, None]


class Seen(Sampler):
    """A real SDK sampler that records the attributes each span starts with (what any sampler may decide on)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        self.seen.append(dict(attributes or {}))
        return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return "Seen"


def test_samplers_see_a_continuing_turns_session_a_first_turn_gets_it_at_its_end(client: openai.OpenAI) -> None:
    sampler = Seen()
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=provider, session_id_from_lineage=True)
    try:
        ids = _chain(client, 2)
    finally:
        instrumentor.uninstrument()
    assert [seen.get(SESSION) for seen in sampler.seen] == [None, ids[0]]
    assert [attrs(s)[SESSION] for s in exporter.get_finished_spans()] == [ids[0]] * 2
    assert sampler.seen[0]["gen_ai.operation.name"] == "chat"
