"""Spans and metrics of create/parse through the real client, sync and async, over loopback to the emulator."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import openai
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from otel_responses.emulator import Emulator
from otel_responses.tools import scenarios

from ..conftest import Captured

MODEL = "gpt-4.1-mini"
REASONING_MODEL = "o4-mini"
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def project_attrs(span: Any) -> dict[str, Any]:
    return {k: v for k, v in attrs(span).items() if k.startswith("openai_responses.")}


# -- one call, every attribute ------------------------------------------------------------------------


def test_single_turn_span_has_every_genai_and_project_attribute(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    response: Any = client.responses.create(model=MODEL, input="Remember this: the marker is M-1.")
    span = captured.only_span()
    a = attrs(span)
    assert span.name == f"chat {MODEL}"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["openai.api.type"] == "responses"
    assert a["gen_ai.request.model"] == MODEL
    assert a["gen_ai.response.model"] == response.model
    assert a["gen_ai.response.id"] == response.id
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["openai_responses.response.status"] == "completed"
    assert a["gen_ai.usage.input_tokens"] == response.usage.input_tokens
    assert a["gen_ai.usage.output_tokens"] == response.usage.output_tokens
    assert a["gen_ai.usage.cache_read.input_tokens"] == response.usage.input_tokens_details.cached_tokens
    assert a["gen_ai.usage.reasoning.output_tokens"] == response.usage.output_tokens_details.reasoning_tokens
    assert a["server.address"] == "127.0.0.1"
    assert a["server.port"] == emulator.port
    assert a["openai_responses.request_id"] == response._request_id
    assert a["openai_responses.request_id"].startswith("req_")
    assert a["openai_responses.state.mode"] == "single_turn"
    assert a["openai_responses.store"] is True
    assert a["openai_responses.zdr"] is False
    assert a["openai_responses.input.item_types"] == ("message",)
    assert a["openai_responses.input.item_count"] == 1
    assert a["openai_responses.output.item_types"] == ("message",)
    assert a["openai_responses.output.item_count"] == 1
    assert a["openai_responses.reasoning.encrypted_requested"] is False
    assert a["openai_responses.reasoning.encrypted_input_count"] == 0
    assert a["openai_responses.reasoning.encrypted_output_count"] == 0
    assert a["openai_responses.compaction"] is False
    for absent in (
        "openai_responses.instructions.hash",
        "openai_responses.include",
        "gen_ai.request.previous_response.id",
        "gen_ai.conversation.id",
        "gen_ai.conversation.compacted",
        "error.type",
    ):
        assert absent not in a


@pytest.mark.parametrize(("store", "expected"), [(True, True), (False, False), (None, True)])
def test_store_flag_is_the_effective_one(
    emulator: Emulator, captured: Captured, store: bool | None, expected: bool
) -> None:
    kwargs: dict[str, Any] = {} if store is None else {"store": store}
    emulator.client().responses.create(model=MODEL, input="hello", **kwargs)
    assert attrs(captured.only_span())["openai_responses.store"] is expected


def test_instructions_hash_is_keyed_short_hex_and_tracks_changes(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    secret_instructions = "Always answer in uppercase. Internal policy quokka-zebra."  # no id or hash holds it
    client.responses.create(model=MODEL, input="hi", instructions=secret_instructions)
    client.responses.create(model=MODEL, input="hi", instructions=str(secret_instructions))
    client.responses.create(model=MODEL, input="hi", instructions="Answer briefly.")
    client.responses.create(model=MODEL, input="hi")
    first, same, other, none = (attrs(s) for s in captured.spans())
    assert HEX16.match(first["openai_responses.instructions.hash"])
    assert first["openai_responses.instructions.hash"] == same["openai_responses.instructions.hash"]
    assert other["openai_responses.instructions.hash"] != first["openai_responses.instructions.hash"]
    assert "openai_responses.instructions.hash" not in none
    for span in captured.spans():
        assert all("quokka" not in str(v) for v in attrs(span).values())


def test_instructions_version_from_configuration(emulator: Emulator) -> None:
    from otel_responses import ResponsesInstrumentor

    from ..conftest import new_captured

    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(
        tracer_provider=cap.tracer_provider,
        meter_provider=cap.meter_provider,
        instructions_version=lambda text: "v2" if text and "briefly" in text else None,
        zdr=True,
    )
    try:
        emulator.client().responses.create(model=MODEL, input="hi", instructions="Answer briefly.")
        emulator.client().responses.create(model=MODEL, input="hi", instructions="Other.")
    finally:
        instrumentor.uninstrument()
    first, second = (attrs(s) for s in cap.spans())
    assert first["openai_responses.instructions.version"] == "v2"
    assert "openai_responses.instructions.version" not in second
    assert first["openai_responses.zdr"] is True


# -- the five state modes -----------------------------------------------------------------------------


def test_server_chain_mode(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    first = client.responses.create(model=MODEL, input="Remember this: the marker is M-2.")
    client.responses.create(model=MODEL, previous_response_id=first.id, input="What is the marker?")
    one, two = (attrs(s) for s in captured.spans())
    assert one["openai_responses.state.mode"] == "single_turn"
    assert two["openai_responses.state.mode"] == "server_chain"
    assert two["gen_ai.request.previous_response.id"] == first.id


def test_conversation_mode(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    conv = client.conversations.create()
    client.responses.create(model=MODEL, conversation=conv.id, input="Remember this: the marker is M-3.")
    client.responses.create(model=MODEL, conversation={"id": conv.id}, input="What is the marker?")
    spans = captured.chat_spans()
    assert [attrs(s)["openai_responses.state.mode"] for s in spans] == ["conversation", "conversation"]
    assert [attrs(s)["gen_ai.conversation.id"] for s in spans] == [conv.id, conv.id]


def test_client_replay_mode_lists_item_types(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    history: list[Any] = [{"role": "user", "content": "Remember this: the marker is M-4."}]
    first = client.responses.create(model=MODEL, input=history, store=False)
    history += first.output
    history.append({"role": "user", "content": "What is the marker?"})
    second = client.responses.create(model=MODEL, input=history, store=False)
    a = attrs(captured.spans()[1])
    assert a["openai_responses.state.mode"] == "client_replay"
    assert a["openai_responses.input.item_types"] == ("message", "message", "message")
    assert a["openai_responses.input.item_count"] == 3
    assert a["openai_responses.store"] is False
    assert "marker=M-4" in second.output_text


def test_conflict_mode_error_reaches_app_unchanged(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    conv = client.conversations.create()
    first = client.responses.create(model=MODEL, input="hi")
    captured.exporter.clear()

    def conflicting() -> openai.BadRequestError:
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.create(model=MODEL, input="hi", conversation=conv.id, previous_response_id=first.id)
        return info.value

    instrumented = conflicting()
    span = captured.only_span()
    from otel_responses import ResponsesInstrumentor

    ResponsesInstrumentor().uninstrument()
    bare = conflicting()
    ResponsesInstrumentor().instrument(tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider)
    assert type(instrumented) is type(bare)
    assert instrumented.status_code == bare.status_code == 400
    assert instrumented.body == bare.body
    assert str(instrumented) == str(bare)
    a = attrs(span)
    assert span.status.status_code is StatusCode.ERROR
    assert a["error.type"] == "BadRequestError"
    assert a["http.response.status_code"] == 400
    assert a["openai_responses.error.code"] == "mutually_exclusive_parameters"
    assert a["openai_responses.request_id"] == instrumented.request_id
    assert a["openai_responses.state.mode"] == "conflict"
    assert a["gen_ai.conversation.id"] == conv.id
    assert a["gen_ai.request.previous_response.id"] == first.id
    # The error message is never copied into telemetry: it may echo payload.
    assert all(event.name != "exception" for event in span.events)


def test_unstored_parent_error_is_recorded(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    first = client.responses.create(model=MODEL, input="hi", store=False)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="again", previous_response_id=first.id)
    a = attrs(captured.spans()[1])
    assert a["openai_responses.error.code"] == "previous_response_not_found"
    assert a["openai_responses.state.mode"] == "server_chain"


# -- reasoning, tools -----------------------------------------------------------------------------------


def test_encrypted_reasoning_requested_returned_and_replayed(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    include: Any = ["reasoning.encrypted_content"]
    history: list[Any] = [{"role": "user", "content": "Please choose a code word."}]
    first: Any = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=include)
    history += first.output
    history.append({"role": "user", "content": "What is the code word?"})
    second = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=include)
    one, two = (attrs(s) for s in captured.spans())
    assert one["openai_responses.reasoning.encrypted_requested"] is True
    assert one["openai_responses.include"] == ("reasoning.encrypted_content",)
    assert one["openai_responses.output.item_types"] == ("reasoning", "message")
    assert one["openai_responses.reasoning.encrypted_output_count"] == 1
    assert one["gen_ai.usage.reasoning.output_tokens"] > 0
    assert two["openai_responses.reasoning.encrypted_input_count"] == 1
    assert two["openai_responses.input.item_types"] == ("message", "reasoning", "message", "message")
    # Replayed, but an earlier turn's: under the model's default, current_turn, the API withholds it and says so.
    assert second.output_text == "code_word=unknown"
    assert two["openai_responses.response.reasoning.context"] == "current_turn"
    assert two["openai_responses.reasoning.withheld"] == 1
    assert two["openai_responses.reasoning.withheld_reasons"] == ("turn_boundary",)
    assert "openai_responses.reasoning.context" not in two  # the request sent none
    encrypted = first.output[0].encrypted_content
    assert encrypted
    assert all(encrypted not in str(v) for s in captured.spans() for v in attrs(s).values())


def test_reasoning_without_include_has_no_encrypted_payload(emulator: Emulator, captured: Captured) -> None:
    emulator.client().responses.create(model=REASONING_MODEL, input="hi", store=False)
    a = attrs(captured.only_span())
    assert a["openai_responses.reasoning.encrypted_requested"] is False
    assert a["openai_responses.output.item_types"][0] == "reasoning"
    assert a["openai_responses.reasoning.encrypted_output_count"] == 0


def test_tool_call_round_trip(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    history: list[Any] = [{"role": "user", "content": f"Please use {scenarios.TOOL_NAME} for order 42."}]
    first = client.responses.create(model=MODEL, input=history, tools=scenarios.TOOLS)
    call = next(item for item in first.output if item.type == "function_call")
    history += first.output
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "shipped"})
    second = client.responses.create(model=MODEL, input=history, tools=scenarios.TOOLS)
    one, two = (attrs(s) for s in captured.spans())
    assert one["openai_responses.output.item_types"] == ("function_call",)
    assert two["openai_responses.input.item_types"] == ("message", "function_call", "function_call_output")
    assert two["openai_responses.state.mode"] == "client_replay"
    assert "shipped" in second.output_text
    assert all(
        "shipped" not in str(v) and "order 42" not in str(v) for s in captured.spans() for v in attrs(s).values()
    )


# -- three turns in each state mode, sync --------------------------------------------------------------


@pytest.mark.parametrize("mode", scenarios.STATE_MODES)
def test_three_turns_each_mode(emulator: Emulator, captured: Captured, mode: str) -> None:
    transcript = scenarios.run(emulator.client(), scenarios.BY_NAME[mode], "MK-77")
    assert transcript.error is None
    assert transcript.remembered == {"marker": True, "tool": True, "constraints": True, "code word": True}
    spans = captured.chat_spans()
    assert len(spans) == 4
    expected = {
        "server_chain": ["single_turn", "server_chain", "server_chain", "server_chain"],
        "conversation": ["conversation"] * 4,
        "client_replay": ["single_turn", "client_replay", "client_replay", "client_replay"],
    }
    assert [attrs(s)["openai_responses.state.mode"] for s in spans] == expected[mode]
    hashes = {attrs(s)["openai_responses.instructions.hash"] for s in spans}
    assert len(hashes) == 1
    assert [attrs(s)["gen_ai.response.id"] for s in spans] == transcript.response_ids


# -- async -------------------------------------------------------------------------------------------


def test_async_create_and_parse(emulator: Emulator, captured: Captured) -> None:
    async def session() -> tuple[Any, Any, Any]:
        client = emulator.async_client()
        first: Any = await client.responses.create(model=MODEL, input="Remember this: the marker is A-1.", store=False)
        second = await client.responses.parse(
            model=MODEL,
            input=[{"role": "user", "content": "hi"}, *first.output, {"role": "user", "content": "marker?"}],
            store=False,
        )
        with pytest.raises(openai.BadRequestError) as info:
            await client.responses.create(model=MODEL, input="x", previous_response_id=first.id)
        await client.close()
        return first, second, info.value

    first, second, error = asyncio.run(session())
    one, two, three = captured.spans()
    assert attrs(one)["gen_ai.response.id"] == first.id
    assert attrs(one)["openai_responses.request_id"] == first._request_id
    assert attrs(two)["openai_responses.state.mode"] == "client_replay"
    assert attrs(two)["gen_ai.response.id"] == second.id
    assert attrs(three)["error.type"] == "BadRequestError"
    assert attrs(three)["openai_responses.request_id"] == error.request_id
    assert three.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("mode", scenarios.STATE_MODES)
def test_three_turns_each_mode_async_matches_sync(emulator: Emulator, captured: Captured, mode: str) -> None:
    """The same session through AsyncOpenAI gives the same project attributes as through OpenAI."""
    scenarios.run(emulator.client(), scenarios.BY_NAME[mode], "S-1")
    sync_attrs = [project_attrs(s) for s in captured.chat_spans()]
    captured.exporter.clear()

    class AsyncBridge:
        """Runs the sync scenario's calls on an AsyncOpenAI client, one event loop for the session."""

        def __init__(self) -> None:
            self.loop = asyncio.new_event_loop()
            self.client = emulator.async_client()
            self.responses = self._Proxy(self, self.client.responses)
            self.conversations = self._Proxy(self, self.client.conversations)

        class _Proxy:
            def __init__(self, bridge: Any, target: Any) -> None:
                self.bridge, self.target = bridge, target

            def __getattr__(self, name: str) -> Any:
                method = getattr(self.target, name)
                return lambda *a, **k: self.bridge.loop.run_until_complete(method(*a, **k))

    bridge = AsyncBridge()
    try:
        transcript = scenarios.run(bridge, scenarios.BY_NAME[mode], "S-1")  # type: ignore[arg-type]
    finally:
        bridge.loop.run_until_complete(bridge.client.close())
        bridge.loop.close()
    async_attrs = [project_attrs(s) for s in captured.chat_spans()]
    volatile = ("openai_responses.request_id", "openai_responses.lineage.id")  # ids differ between the runs

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k not in volatile}

    assert transcript.error is None
    assert [strip(d) for d in async_attrs] == [strip(d) for d in sync_attrs]
    assert len(async_attrs) == 4


# -- bounded lists ---------------------------------------------------------------------------------


def test_huge_history_item_types_are_bounded(emulator: Emulator, captured: Captured) -> None:
    history: list[Any] = [{"role": "system", "content": "sys"}]
    for i in range(999):
        history.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"})
    emulator.client().responses.create(model=MODEL, input=history)
    a = attrs(captured.only_span())
    types = a["openai_responses.input.item_types"]
    assert a["openai_responses.input.item_count"] == 1000
    assert len(types) == 128
    assert types[0] == "message"
    assert types[32] == "...(+873)"
    assert sum(1 for t in types if t == "message") == 127


# -- metrics -------------------------------------------------------------------------------------------


def test_metrics_duration_tokens_and_calls(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    response: Any = client.responses.create(model=MODEL, input="hello", store=False)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="x", previous_response_id=response.id)

    durations = captured.metric_points("gen_ai.client.operation.duration")
    by_error = {p.attributes.get("error.type"): p for p in durations}
    assert set(by_error) == {None, "BadRequestError"}
    ok = by_error[None]
    assert ok.count == 1
    assert ok.sum > 0
    assert ok.attributes["gen_ai.operation.name"] == "chat"
    assert ok.attributes["gen_ai.provider.name"] == "openai"
    assert ok.attributes["gen_ai.request.model"] == MODEL
    assert ok.attributes["server.port"] == emulator.port
    assert list(ok.explicit_bounds)[:3] == pytest.approx([0.01, 0.02, 0.04])

    tokens = {p.attributes["gen_ai.token.type"]: p for p in captured.metric_points("gen_ai.client.token.usage")}
    assert tokens["input"].sum == response.usage.input_tokens
    assert tokens["output"].sum == response.usage.output_tokens
    assert list(tokens["input"].explicit_bounds)[:3] == [1, 4, 16]

    calls = captured.metric_points("openai_responses.calls")
    by_mode = {p.attributes["openai_responses.state.mode"]: p for p in calls}
    assert by_mode["single_turn"].value == 1
    assert by_mode["single_turn"].attributes["openai_responses.store"] is False
    assert by_mode["server_chain"].value == 1
    assert all(p.attributes["gen_ai.operation.name"] == "chat" for p in calls)
    for point in calls + durations:
        assert not any(str(v).startswith(("resp_", "req_", "conv_")) for v in point.attributes.values())


def test_token_kinds_encrypted_round_trips_and_context_loss_are_counted(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    include: Any = ["reasoning.encrypted_content"]
    first: Any = client.responses.create(
        model=REASONING_MODEL, input="Remember this: the marker is K-1.", include=include
    )
    second: Any = client.responses.create(model=REASONING_MODEL, previous_response_id=first.id, input="Marker?")
    history: Any = [{"role": "user", "content": "hi"}]
    replayed: Any = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=include)
    client.responses.create(
        model=REASONING_MODEL, input=[*history, *replayed.output, {"role": "user", "content": "x"}], store=False
    )
    kinds: dict[str, int] = {}
    for point in captured.metric_points("openai_responses.tokens"):
        kind = point.attributes["openai_responses.token.kind"]
        kinds[kind] = kinds.get(kind, 0) + point.value
    assert kinds["cached_input"] == second.usage.input_tokens_details.cached_tokens > 0
    assert kinds["reasoning"] >= first.usage.output_tokens_details.reasoning_tokens > 0
    # Input and output are the GenAI histogram's alone: the counter does not count them twice.
    assert set(kinds) == {"cached_input", "reasoning"}
    usage: dict[str, int] = {}
    for point in captured.metric_points("gen_ai.client.token.usage"):
        token_type = point.attributes["gen_ai.token.type"]
        usage[token_type] = usage.get(token_type, 0) + point.sum
    assert usage["input"] > kinds["cached_input"]
    assert usage["output"] >= kinds["reasoning"]
    items = {
        p.attributes["openai_responses.direction"]: p.value
        for p in captured.metric_points("openai_responses.reasoning.encrypted_items")
    }
    assert items == {"output": 2, "input": 1}
    calls: dict[tuple[str, bool], int] = {}
    for p in captured.metric_points("openai_responses.calls"):
        key = (p.attributes["openai_responses.state.mode"], p.attributes["openai_responses.context_loss"])
        calls[key] = calls.get(key, 0) + p.value
    # The stateless turn without `include` leaves reasoning that cannot be replayed: a context-loss call.
    assert calls == {("single_turn", False): 2, ("server_chain", False): 1, ("client_replay", True): 1}
