"""litellm running its own multi-turn flows against the emulator, instrumented.

`litellm.responses()` / `litellm.aresponses()` post with litellm's own HTTP client, not through the `openai` SDK:
the history replayed by the app (`response.output` items sent back), `previous_response_id=` (litellm hands the app
its own encoding of every response id and decodes it on the way out), a function tool round trip on every flow,
plain and streamed, sync and async; the other Responses operations litellm offers. Each flow runs twice, the
instrumentation off and then on, with the same answers and the same requests on the wire. What litellm does to
context is described in tests/clients/README.md ("Known client behaviours").
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

import pytest

pytest.importorskip("litellm")

import litellm  # type: ignore[import-not-found]

from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry, capture

from .chat_stub import ChatStub
from .support import (
    ALL_TURNS_REASONING,
    ENCRYPTED,
    INSTRUCTIONS,
    PHASED,
    PLAIN,
    PROMPTS,
    REASONING,
    TOOL_NAME,
    Run,
    assert_final_answer,
    assert_same_behaviour,
    clean,
    expect_signals,
    keeps_code_word,
    lookup_weather,
    maybe_capture,
    responses_requests,
    signals_of,
)

litellm.telemetry = False
LITELLM = tuple(int(part) for part in version("litellm").split(".")[:2])
TOOL = {
    "type": "function",
    "name": TOOL_NAME,
    "description": "Look up the weather for a place.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}
MODES = ("replay", "previous_response_id")


def _answer(response: Any) -> str:
    return "".join(
        part.text
        for item in response.output
        if getattr(item, "type", None) == "message"
        for part in item.content or ()
        if getattr(part, "type", None) == "output_text"
    )


def _calls_of(response: Any) -> list[Any]:
    return [item for item in response.output if getattr(item, "type", None) == "function_call"]


def _completed(events: Any) -> Any:
    """The `response.completed` event's response of a stream the app reads to its end."""
    final = None
    for event in events:
        if event.type == "response.completed":
            final = event.response
    return final


async def _acompleted(events: Any) -> Any:
    final = None
    async for event in events:
        if event.type == "response.completed":
            final = event.response
    return final


class Flow:
    """The four user turns as a litellm app writes them: each turn's request, and the tool turn's second call
    (the tool's output), with the history kept by the app or by the server (`previous_response_id`)."""

    def __init__(self, emu: Emulator | ChatStub, model: str, mode: str, **options: Any) -> None:
        self.model = model if "/" in model else f"openai/{model}"
        self.mode = mode
        self.stream = options.pop("stream", False)
        self.drop_instructions = options.pop("drop_instructions", False)
        self.as_dicts = options.pop("as_dicts", False)
        self.options = {"api_base": emu.base_url, "api_key": "emulator-key", "tools": [TOOL], **options}
        self.history: list[Any] = []
        self.previous: str | None = None
        self.turn = 0

    def request(self, new_items: list[Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, **self.options}
        if not (self.drop_instructions and self.turn > 0):
            kwargs["instructions"] = INSTRUCTIONS
        if self.mode == "replay":
            self.history += new_items
            kwargs["input"] = list(self.history)
        else:
            kwargs["input"] = new_items
            if self.previous is not None:
                kwargs["previous_response_id"] = self.previous
        if self.stream:
            kwargs["stream"] = True
        self.turn += 1
        return kwargs

    def answered(self, response: Any) -> list[Any]:
        """Keep the response; the tool outputs to send next (empty when the model answered)."""
        self.previous = response.id
        if self.mode == "replay":
            self.history += (
                [item.model_dump(exclude_none=True) for item in response.output]
                if self.as_dicts
                else list(response.output)
            )
        return [
            {"type": "function_call_output", "call_id": call.call_id, "output": lookup_weather("Paris")}
            for call in _calls_of(response)
        ]

    def run(self) -> str:
        response: Any = None
        for prompt in PROMPTS:
            pending: list[Any] = [{"role": "user", "content": prompt}]
            while pending:
                result = litellm.responses(**self.request(pending))
                response = _completed(result) if self.stream else result
                pending = self.answered(response)
        return _answer(response)

    async def arun(self) -> str:
        response: Any = None
        for prompt in PROMPTS:
            pending: list[Any] = [{"role": "user", "content": prompt}]
            while pending:
                result = await litellm.aresponses(**self.request(pending))
                response = await _acompleted(result) if self.stream else result
                pending = self.answered(response)
        return _answer(response)


def off_then_on(flow: Any, **emulator_options: Any) -> tuple[Run, Run, Emulator]:
    """The flow on a fresh emulator with the instrumentation off, then on: both runs and the second emulator."""
    runs = []
    emulators = []
    for on in (False, True):
        with Emulator(**emulator_options) as emulator, maybe_capture(on) as captured:
            answer = flow(emulator)
            runs.append(Run(answer, responses_requests(emulator), captured))
            emulators.append(emulator)
    return runs[0], runs[1], emulators[1]


def _flow(model: str, mode: str, asynchronous: bool = False, **options: Any) -> Any:
    def run(emu: Emulator) -> str:
        flow = Flow(emu, model, mode, **options)
        return asyncio.run(flow.arun()) if asynchronous else flow.run()

    return run


@pytest.mark.parametrize("model", [PLAIN, REASONING, PHASED])
@pytest.mark.parametrize("mode", MODES)
def test_responses(mode: str, model: str) -> None:
    """`litellm.responses()` on a plain, a reasoning and a phased model, the history replayed as returned or kept
    by the server: every output item goes back as litellm handed it over (ids, `phase`, reasoning items)."""
    off, on, emu = off_then_on(_flow(model, mode))
    assert_same_behaviour(off, on)
    expect_signals(on.captured, emu, clean())
    assert_final_answer(on.answer, code_word=keeps_code_word(model))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("mode", MODES)
def test_aresponses(mode: str, stream: bool) -> None:
    """`litellm.aresponses()`: the same flows awaited, plain and streamed."""
    off, on, emu = off_then_on(_flow(REASONING, mode, asynchronous=True, stream=stream))
    assert_same_behaviour(off, on)
    expect_signals(on.captured, emu, clean())
    assert_final_answer(on.answer, code_word=keeps_code_word(REASONING))


@pytest.mark.parametrize("model", [REASONING, PHASED])
@pytest.mark.parametrize("mode", MODES)
def test_streamed(mode: str, model: str) -> None:
    """`responses(stream=True)`: litellm's own event iterator; the app keeps `response.completed`'s response."""
    off, on, emu = off_then_on(_flow(model, mode, stream=True))
    assert_same_behaviour(off, on)
    expect_signals(on.captured, emu, clean())
    assert_final_answer(on.answer, code_word=keeps_code_word(model))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_stateless_replay_with_encrypted_reasoning(stream: bool) -> None:
    """`store=False` + `include=["reasoning.encrypted_content"]`: the reasoning items go back with the
    `encrypted_content` litellm handed over, and the code word survives (the flow asks for `all_turns`)."""
    flow = _flow(REASONING, "replay", stream=stream, store=False, include=[ENCRYPTED], reasoning=ALL_TURNS_REASONING)
    off, on, emu = off_then_on(flow)
    assert_same_behaviour(off, on)
    expect_signals(on.captured, emu, clean())
    assert_final_answer(on.answer, code_word=True)
    replayed = [i for i in responses_requests(emu)[-1]["input"] if i.get("type") == "reasoning"]
    assert len(replayed) == 4
    assert all(i.get("encrypted_content") for i in replayed)


def test_chain_without_instructions() -> None:
    """The scripted mistake: a `previous_response_id` chain that sends `instructions` on the first turn only. The
    API does not carry instructions over from the parent: every call that continues without them is named."""
    off, on, emu = off_then_on(_flow(PLAIN, "previous_response_id", drop_instructions=True))
    assert_same_behaviour(off, on)
    expect_signals(on.captured, emu, [set()] + [{"instructions_dropped"} for _ in range(4)])


def test_stateless_replay_without_encrypted_reasoning() -> None:
    """`store=False` without the encrypted reasoning: the first response's reasoning cannot be replayed (the
    emulator, like the API, answers 404 for the bare item), and the first call says so before it bites."""

    def flow(emu: Emulator) -> str:
        try:
            return Flow(emu, REASONING, "replay", store=False).run()
        except Exception as exc:  # NotFoundError (BadRequestError in older releases)
            return type(exc).__name__

    off, on, emu = off_then_on(flow)
    assert_same_behaviour(off, on)
    assert on.answer in ("NotFoundError", "BadRequestError")
    first, second = on.captured.chat_spans()
    assert signals_of(first) == {"reasoning_not_replayable"}
    assert (second.attributes or {})["error.type"] == on.answer
    assert len(responses_requests(emu)) == 2


def test_other_operations() -> None:
    """Retrieve, input items, compact, cancel and delete, sync and async: one span per request, named by the
    operation, on the id the app holds (litellm's encoding of the server's)."""

    def sync_flow(options: dict[str, Any]) -> list[Any]:
        first = litellm.responses(model=f"openai/{PLAIN}", input=PROMPTS[0], instructions=INSTRUCTIONS, **options)
        fetched = litellm.get_responses(response_id=first.id, **options)
        items = litellm.list_input_items(response_id=first.id, **options)
        compacted = litellm.compact_responses(
            model=f"openai/{PLAIN}", input=[{"role": "user", "content": PROMPTS[0]}], **options
        )
        with pytest.raises(Exception, match="cancelled"):  # a foreground response cannot be cancelled
            litellm.cancel_responses(response_id=first.id, **options)
        deleted = litellm.delete_responses(response_id=first.id, **options)
        return [fetched.id == first.id, len(items["data"]), compacted.output[-1].type, deleted.deleted]

    async def async_flow(options: dict[str, Any]) -> list[Any]:
        first = await litellm.aresponses(model=f"openai/{PLAIN}", input=PROMPTS[0], **options)
        fetched = await litellm.aget_responses(response_id=first.id, **options)
        items = await litellm.alist_input_items(response_id=first.id, **options)
        compacted = await litellm.acompact_responses(
            model=f"openai/{PLAIN}", input=[{"role": "user", "content": PROMPTS[0]}], **options
        )
        with pytest.raises(Exception, match="cancelled"):
            await litellm.acancel_responses(response_id=first.id, **options)
        deleted = await litellm.adelete_responses(response_id=first.id, **options)
        return [fetched.id == first.id, len(items["data"]), compacted.output[-1].type, deleted.deleted]

    def flow(emu: Emulator) -> list[Any]:
        options = {"api_base": emu.base_url, "api_key": "emulator-key"}
        return sync_flow(options) + asyncio.run(async_flow(options))

    off, on, emu = off_then_on(flow)
    assert on.answer == off.answer == [True, 1, "compaction", True] * 2
    spans = on.captured.spans()
    operations = [
        "chat",
        "fetch_response",
        "list_input_items",
        "compact_response",
        "cancel_response",
        "delete_response",
    ]
    assert [(span.attributes or {})["gen_ai.operation.name"] for span in spans] == operations * 2
    assert len(spans) == len(emu.requests)
    assert [signals_of(span) for span in spans] == [set(), set(), set(), {"compaction"}, set(), set()] * 2
    # The exception the app sees (BadRequestError; older releases map this 400 to APIConnectionError).
    assert (spans[4].attributes or {})["error.type"] in ("BadRequestError", "APIConnectionError")


def test_mock_response_makes_no_request_and_no_span(emu: Emulator, telemetry: CapturedTelemetry) -> None:
    """`mock_response=` is answered inside litellm before any request: no span, as for a cache hit."""
    response = litellm.responses(model=f"openai/{PLAIN}", input="hi", mock_response="Hello.", api_key="k")
    assert response.output
    assert len(emu.requests) == 0
    assert telemetry.spans() == []


def test_uninstrument_restores_litellm_and_suppression_is_honoured(emu: Emulator) -> None:
    """`uninstrument()` puts back litellm's own functions and handler methods; inside
    `suppress_instrumentation()` a call records nothing."""
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    handler = litellm.llms.custom_httpx.llm_http_handler.BaseLLMHTTPHandler
    before = (litellm.responses, litellm.aresponses, handler.__dict__["response_api_handler"])
    options = {"api_base": emu.base_url, "api_key": "emulator-key"}
    with capture() as telemetry:
        assert litellm.responses is not before[0]
        with suppress_instrumentation():
            litellm.responses(model=f"openai/{PLAIN}", input=PROMPTS[0], **options)
        assert telemetry.spans() == []
        litellm.responses(model=f"openai/{PLAIN}", input=PROMPTS[0], **options)
        assert len(telemetry.spans()) == 1
    assert (litellm.responses, litellm.aresponses, handler.__dict__["response_api_handler"]) == before


@pytest.mark.parametrize("api_version", ["2025-04-01-preview", "v1"])
def test_azure(emu: Emulator, telemetry: CapturedTelemetry, api_version: str) -> None:
    """`azure/<deployment>` models: litellm posts to Azure's paths (the dated API, or the v1 one); recorded as
    `azure.ai.openai`, the model being the deployment."""
    options = {"api_base": emu.azure_endpoint, "api_key": "k", "api_version": api_version}
    first = litellm.responses(model="azure/my-gpt-41", input=PROMPTS[0], instructions=INSTRUCTIONS, **options)
    litellm.responses(model="azure/my-gpt-41", input="What is the marker?", previous_response_id=first.id, **options)
    assert all(r.path.startswith("/openai/") for r in emu.requests)
    spans = telemetry.chat_spans()
    assert [(s.attributes or {})["gen_ai.provider.name"] for s in spans] == ["azure.ai.openai"] * 2
    assert [(s.attributes or {})["gen_ai.request.model"] for s in spans] == ["my-gpt-41"] * 2
    assert [signals_of(s) for s in spans] == [set(), {"instructions_dropped"}]


# -- providers without the Responses API (litellm bridges to Chat Completions) -----------------------------------

BRIDGED = "deepseek/deepseek-chat"  # a provider litellm 1.81+ has no Responses config for


def _bridged(mode: str, **options: Any) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    """The support conversation through a bridged provider (a Chat Completions stub): answers off and on, the
    spans, the chat requests."""
    answers, spans, requests = [], [], []
    for on in (False, True):
        with ChatStub() as stub, maybe_capture(on) as captured:
            answers.append(Flow(stub, BRIDGED, mode, **options).run())
            requests.append(stub.requests)
            if captured is not None:
                spans = captured.chat_spans()
    assert requests[0] == requests[1]
    assert answers[0] == answers[1]
    return answers, spans, requests[1]


def test_bridged_replay() -> None:
    """The app replays litellm's output items to a provider without the Responses API: recorded with that
    provider's name, its state mode, item types and usage, one span per chat request; no signal (the replay is
    whole). The items go back as dicts: litellm's bridge cannot read its own output objects
    (`'ResponseFunctionToolCall' object has no attribute 'get'`)."""
    answers, spans, requests = _bridged("replay", as_dicts=True)
    assert len(spans) == len(requests) == 5
    assert {s.attributes["gen_ai.provider.name"] for s in spans} == {"deepseek"}
    assert [s.attributes["openai_responses.state.mode"] for s in spans] == ["single_turn"] + ["client_replay"] * 4
    types = spans[2].attributes["openai_responses.input.item_types"]  # 1.81 adds an empty assistant message
    assert types[:3] == ("message",) * 3
    assert types[-2:] == ("function_call", "function_call_output")
    assert all(s.attributes["gen_ai.usage.input_tokens"] == 10 for s in spans)
    assert [signals_of(s) for s in spans] == [set()] * 5
    if LITELLM < (1, 100):  # 1.81's bridge moves the replayed call and its tool result after the last user message
        assert [m["role"] for m in requests[-1]["messages"]][-2:] == ["assistant", "tool"]
        assert answers[1] == "Tool lookup_weather returned sunny."
    else:
        assert answers[1] == "marker=M-1; tool=sunny; code_word=unknown"


def test_bridged_chain_is_not_held_by_a_server() -> None:
    """`previous_response_id` (and `store=False`) to a bridged provider: litellm resolves the chain from its own
    store (its proxy's spend logs), which a plain process does not have, so the earlier turns never reach the model
    (the answer has no marker). No signal rests on the Responses server's store: `unstored_parent`, which the
    same chain raises against the Responses API, is not raised; the request-structure ones still are
    (`instructions_dropped` for the chain without instructions)."""
    answers, spans, requests = _bridged("previous_response_id", store=False, drop_instructions=True)
    assert len(spans) == len(requests) == 5
    assert [s.attributes["openai_responses.state.mode"] for s in spans] == ["single_turn"] + ["server_chain"] * 4
    assert [signals_of(s) for s in spans] == [set()] + [{"instructions_dropped"} for _ in range(4)]
    assert answers[1] == "marker=unknown; tool=unknown; code_word=unknown"
    # The same chain against the Responses API: refused (400), and named.
    with Emulator() as emu, capture() as telemetry, pytest.raises(Exception, match="not found"):
        Flow(emu, PLAIN, "previous_response_id", store=False).run()
    assert signals_of(telemetry.chat_spans()[1]) == {"unstored_parent"}
