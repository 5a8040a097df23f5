"""Every context-loss signal of DESIGN.md section 4, raised by a real mistake and silent on its near miss.

The real `openai` client talks to the emulator over loopback; assertions read the spans, events and metric
points the SDK exporters received. API errors (400/404) are the expected outcome of several mistakes: the
span must carry the signal all the same.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest
from openai.resources.responses import Responses

from otel_responses import ResponsesInstrumentor
from otel_responses.emulator import Emulator, EmulatorConfig
from otel_responses.signals import CATALOGUE, ERROR, INFO, TOOL_SIGNALS, WARNING

from ..conftest import Captured, new_captured
from ..ledger_scenarios import MODEL, REASONING_MODEL, TOOL_NAME, TOOLS, Item, user

ENCRYPTED: Any = ["reasoning.encrypted_content"]
# Every turn's reasoning rendered back: reasoning left out of a replay is then lost on any turn (the model's default,
# current_turn, withholds an earlier turn's anyway).
ALL_TURNS: Any = {"context": "all_turns"}
# Sent through extra_body: `context_management` is not in the oldest supported SDK's signature.
COMPACT_EARLY: Any = [{"type": "compaction", "compact_threshold": 10}]

# Planted payload: none of it may ever appear in exported telemetry.
USER_SECRET = "ZEBRA-PAYLOAD-4417"
TOOL_SECRET = "TOOL-SECRET-9931"
INSTRUCTIONS_SECRET = "INSTR-SECRET-5521"
INSTRUCTIONS = f"Answer briefly. Internal policy {INSTRUCTIONS_SECRET}."

SIGNALS = "openai_responses.signals"
CONTEXT_LOSS = "openai_responses.context_loss"
TOOL_CHECK = "openai_responses.tool_calls.check"
EVENT = "openai_responses.signal"
TURN = "openai_responses.turn"
TURN_DEPTH = "openai_responses.turn.depth"
NAME = "openai_responses.signal.name"
SEVERITY = "openai_responses.signal.severity"
MODE = "openai_responses.state.mode"
REQUEST_MODEL = "gen_ai.request.model"


# -- helpers -------------------------------------------------------------------------------------------


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def signals_of(span: Any) -> tuple[str, ...]:
    return tuple(attrs(span)[SIGNALS])


def _depth(turn: int | None) -> str | None:
    if turn is None:
        return None
    return "1" if turn == 1 else "2-4" if turn <= 4 else "5-16" if turn <= 16 else "17+"


def assert_signal(captured: Captured, span: Any, name: str, *, mode: str | None, model: str | None) -> None:
    """``name`` is on the span (attribute and event, with its catalogue severity) and counted in the metric."""
    severity = CATALOGUE[name].severity
    a = attrs(span)
    assert name in a[SIGNALS], a[SIGNALS]
    events = [e for e in span.events if e.name == EVENT and (e.attributes or {}).get(NAME) == name]
    assert len(events) == 1, [dict(e.attributes or {}) for e in span.events]
    assert events[0].attributes[SEVERITY] == severity
    # One event per raised signal, no more.
    assert sorted(e.attributes[NAME] for e in span.events if e.name == EVENT) == sorted(a[SIGNALS])
    raised_severities = {CATALOGUE[n].severity for n in a[SIGNALS]}
    assert a[CONTEXT_LOSS] is bool(raised_severities & {ERROR, WARNING})
    if severity in (ERROR, WARNING):
        assert a[CONTEXT_LOSS] is True
    expected: dict[str, Any] = {NAME: name, SEVERITY: severity}
    if mode is not None:
        expected[MODE] = mode
    if model is not None:
        expected[REQUEST_MODEL] = model
    depth = _depth(a.get(TURN))
    if depth is not None:  # the turn-depth bucket of the span's turn, when known
        expected[TURN_DEPTH] = depth
    points = [p for p in captured.metric_points("openai_responses.signals") if p.attributes.get(NAME) == name]
    assert any(dict(p.attributes) == expected and p.value >= 1 for p in points), [dict(p.attributes) for p in points]
    if mode is not None:
        assert a[MODE] == mode


def assert_clean(span: Any, *, tool_check: str | None = "none") -> None:
    """The span of a correct call: no signal, no event, no context loss. A call whose response returned a
    function call is ``pending`` rather than ``none``: the app owes its output."""
    a = attrs(span)
    assert a[SIGNALS] == ()
    assert a[CONTEXT_LOSS] is False
    assert not [e for e in span.events if e.name == EVENT]
    if tool_check == "none" and "function_call" in a.get("openai_responses.output.item_types", ()):
        tool_check = "pending"
    if tool_check is not None:
        assert a[TOOL_CHECK] == tool_check


def exported_values(captured: Captured) -> list[str]:
    """Every attribute value of every span, span event and metric point, as text."""
    values: list[str] = []
    for span in captured.spans():
        values += [str(v) for v in attrs(span).values()]
        for event in span.events:
            values.append(event.name)
            values += [str(v) for v in (event.attributes or {}).values()]
    for metric in ("openai_responses.signals", "openai_responses.calls", "gen_ai.client.operation.duration"):
        for point in captured.metric_points(metric):
            values += [str(v) for v in point.attributes.values()]
    return values


def assert_no_payload(captured: Captured, *needles: str) -> None:
    assert needles
    values = exported_values(captured)
    assert values
    for needle in needles:
        assert needle
        leaked = [v for v in values if needle in v]
        assert not leaked, (needle, leaked)


def tool_output(call_id: str, output: str = TOOL_SECRET) -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def function_call(response: Any) -> Any:
    return next(item for item in response.output if item.type == "function_call")


def tool_request() -> Item:
    return user(f"Please use {TOOL_NAME} for order {USER_SECRET}.")


@contextmanager
def instrumented(**config: Any) -> Iterator[Captured]:
    """The instrumentation with custom settings; do not combine with the ``captured`` fixture."""
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, **config)
    try:
        yield cap
    finally:
        instrumentor.uninstrument()


def test_catalogue_matches_the_design_table() -> None:
    """The 25 names and severities of DESIGN.md section 4: the signals every test below raises."""
    assert {name: kind.severity for name, kind in CATALOGUE.items()} == {
        "state_mode_conflict": ERROR,
        "unstored_parent": ERROR,
        "unstored_retrieve": ERROR,
        "instructions_dropped": WARNING,
        "instructions_changed": INFO,
        "reasoning_not_replayable": WARNING,
        "reasoning_dropped": WARNING,
        "replay_incomplete": WARNING,
        "reasoning_pair_broken": WARNING,
        "reasoning_withheld": WARNING,
        "encrypted_content_foreign": WARNING,
        "encrypted_content_modified": ERROR,
        "phase_dropped": WARNING,
        "orphan_tool_output": ERROR,
        "missing_tool_output": ERROR,
        "tool_output_before_call": ERROR,
        "duplicate_call_id": WARNING,
        "duplicate_item_id": ERROR,
        "malformed_item_id": WARNING,
        "history_truncated": WARNING,
        "concurrent_branch": INFO,
        "response_incomplete": WARNING,
        "compaction": INFO,
        "tool_output_modified": INFO,
        "context_duplicated": WARNING,
    }
    assert TOOL_SIGNALS == ("orphan_tool_output", "missing_tool_output", "tool_output_before_call", "duplicate_call_id")


# -- state_mode_conflict --------------------------------------------------------------------------------


def test_state_mode_conflict(client: openai.OpenAI, captured: Captured) -> None:
    conv = client.conversations.create()
    first = client.responses.create(model=MODEL, input=f"Hello {USER_SECRET}.")
    captured.exporter.clear()
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(
            model=MODEL, input=f"Again {USER_SECRET}.", conversation=conv.id, previous_response_id=first.id
        )
    assert info.value.code == "mutually_exclusive_parameters"
    span = captured.only_span()
    assert signals_of(span) == ("state_mode_conflict",)
    assert_signal(captured, span, "state_mode_conflict", mode="conflict", model=MODEL)
    assert attrs(span)[TOOL_CHECK] == "none"
    assert attrs(span)["error.type"] == "BadRequestError"
    assert_no_payload(captured, USER_SECRET)


def test_state_mode_conflict_near_miss_one_mode_per_session(client: openai.OpenAI, captured: Captured) -> None:
    conv = client.conversations.create()
    client.responses.create(model=MODEL, input="Hello.", conversation=conv.id)
    client.responses.create(model=MODEL, input="Again.", conversation={"id": conv.id})
    first = client.responses.create(model=MODEL, input="Hello.")
    client.responses.create(model=MODEL, input="Again.", previous_response_id=first.id)
    spans = captured.chat_spans()
    assert [attrs(s)[MODE] for s in spans] == ["conversation", "conversation", "single_turn", "server_chain"]
    for span in spans:
        assert_clean(span)
    assert captured.metric_points("openai_responses.signals") == []


# -- unstored_parent ------------------------------------------------------------------------------------


def test_unstored_parent(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input="Remember this: the marker is U-1.", store=False)
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=first.id)
    assert info.value.code == "previous_response_not_found"
    parent_span, span = captured.spans()
    assert_clean(parent_span)
    assert signals_of(span) == ("unstored_parent",)
    assert_signal(captured, span, "unstored_parent", mode="server_chain", model=MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.parent.id"] == first.id


def test_unstored_parent_near_miss_stored_parent(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input="Remember this: the marker is U-2.", store=True)
    second = client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=first.id)
    assert "marker=U-2" in second.output_text
    for span in captured.spans():
        assert_clean(span)


def test_zdr_chain_raises_unstored_parent_and_unreplayable_reasoning(client: openai.OpenAI) -> None:
    with instrumented(zdr=True) as cap:
        first = client.responses.create(model=MODEL, input="Remember this: the marker is Z-1.")
        client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=first.id)
        client.responses.create(model=REASONING_MODEL, input="Please choose a code word.")
    first_span, chained, reasoning = cap.spans()
    assert attrs(chained)["openai_responses.zdr"] is True
    assert_clean(first_span)
    assert signals_of(chained) == ("unstored_parent",)
    assert_signal(cap, chained, "unstored_parent", mode="server_chain", model=MODEL)
    # Under ZDR nothing is stored, whatever `store` says: reasoning must come back encrypted.
    assert attrs(reasoning)["openai_responses.store"] is True
    assert signals_of(reasoning) == ("reasoning_not_replayable",)
    assert_signal(cap, reasoning, "reasoning_not_replayable", mode="single_turn", model=REASONING_MODEL)


def test_zdr_near_miss_client_replay_with_encrypted_reasoning(client: openai.OpenAI) -> None:
    with instrumented(zdr=True) as cap:
        history: list[Any] = [user("Remember this: the marker is Z-2. Now choose a code word.")]
        first = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
        history += first.output
        history.append(user("What is the marker and what is the code word?"))
        second = client.responses.create(
            model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, reasoning=ALL_TURNS
        )
    assert "marker=Z-2" in second.output_text
    assert "code_word=CW-" in second.output_text
    spans = cap.spans()
    assert [attrs(s)[MODE] for s in spans] == ["single_turn", "client_replay"]
    for span in spans:
        assert attrs(span)["openai_responses.zdr"] is True
        assert_clean(span)


# -- unstored_retrieve ----------------------------------------------------------------------------------


def test_unstored_retrieve_and_input_items(client: openai.OpenAI, captured: Captured) -> None:
    created = client.responses.create(model=MODEL, input=f"Hello {USER_SECRET}.", store=False)
    captured.exporter.clear()
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list(created.id)
    fetch, items = captured.spans()
    assert fetch.name == "fetch_response"
    assert items.name == "list_input_items"
    for span in (fetch, items):
        assert signals_of(span) == ("unstored_retrieve",)
        # Retrieve has no state mode nor request model: the metric point carries name and severity only.
        assert_signal(captured, span, "unstored_retrieve", mode=None, model=None)
        assert attrs(span)["gen_ai.response.id"] == created.id
        assert attrs(span)["http.response.status_code"] == 404
        assert TOOL_CHECK not in attrs(span)
        (event,) = span.events
        assert (event.attributes or {})["openai_responses.parent.id"] == created.id
    (point,) = captured.metric_points("openai_responses.signals")
    assert point.value == 2
    assert_no_payload(captured, USER_SECRET)


def test_unstored_retrieve_near_miss_stored_response(client: openai.OpenAI, captured: Captured) -> None:
    created = client.responses.create(model=MODEL, input="Hello.", store=True)
    fetched = client.responses.retrieve(created.id)
    listed = client.responses.input_items.list(created.id)
    assert fetched.id == created.id
    assert len(listed.data) == 1
    _, fetch, items = captured.spans()
    for span in (fetch, items):
        assert_clean(span, tool_check=None)
        assert TOOL_CHECK not in attrs(span)


# -- instructions_dropped -------------------------------------------------------------------------------


def test_instructions_dropped_server_chain(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
    second = client.responses.create(model=MODEL, input="What are the constraints?", previous_response_id=first.id)
    assert "constraints=none" in second.output_text  # the model really lost them
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("instructions_dropped",)
    assert_signal(captured, span, "instructions_dropped", mode="server_chain", model=MODEL)
    assert_no_payload(captured, INSTRUCTIONS_SECRET)


def test_instructions_dropped_conversation(client: openai.OpenAI, captured: Captured) -> None:
    conv = client.conversations.create()
    client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS, conversation=conv.id)
    client.responses.create(model=MODEL, input="What are the constraints?", conversation=conv.id)
    first_span, span = captured.chat_spans()
    assert_clean(first_span)
    assert signals_of(span) == ("instructions_dropped",)
    assert_signal(captured, span, "instructions_dropped", mode="conversation", model=MODEL)
    assert_no_payload(captured, INSTRUCTIONS_SECRET)


def test_instructions_dropped_near_miss_system_message_written_to_the_conversation(
    client: openai.OpenAI, captured: Captured
) -> None:
    """A developer message the app wrote with `conversations.create` (or a system one with `items.create`) is in the
    conversation's state: a turn without instructions still has them. The near miss: a user message written so."""
    developer: Any = {"type": "message", "role": "developer", "content": INSTRUCTIONS}
    system: Any = {"type": "message", "role": "system", "content": INSTRUCTIONS}
    with_developer = client.conversations.create(items=[developer]).id
    with_system = client.conversations.create().id
    client.conversations.items.create(with_system, items=[system])
    with_user = client.conversations.create(items=[user("Hello.")]).id
    for conversation in (with_developer, with_system, with_user):
        client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS, conversation=conversation)
        client.responses.create(model=MODEL, input="Again.", conversation=conversation)
    # Three creates and one items write, then the six turns: every call's exact signals.
    assert [signals_of(s) for s in captured.spans()] == [()] * 9 + [("instructions_dropped",)]
    assert len(captured.chat_spans()) == 6
    assert_signal(captured, captured.chat_spans()[-1], "instructions_dropped", mode="conversation", model=MODEL)
    assert_no_payload(captured, INSTRUCTIONS_SECRET)


def test_instructions_dropped_near_miss_resent_every_turn(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
    second = client.responses.create(
        model=MODEL, input="What are the constraints?", previous_response_id=first.id, instructions=INSTRUCTIONS
    )
    assert f"constraints={INSTRUCTIONS}" in second.output_text
    conv = client.conversations.create()
    client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS, conversation=conv.id)
    client.responses.create(model=MODEL, input="Again.", instructions=INSTRUCTIONS, conversation=conv.id)
    # A parent without instructions: nothing to drop.
    bare = client.responses.create(model=MODEL, input="Hello.")
    client.responses.create(model=MODEL, input="Again.", previous_response_id=bare.id)
    spans = captured.chat_spans()
    assert len(spans) == 6
    for span in spans:
        assert_clean(span)


def test_instructions_dropped_client_replay(client: openai.OpenAI, captured: Captured) -> None:
    """Instructions are not carried over in any mode: a replay that sends neither them nor a system message
    runs without them."""
    history: list[Any] = [user("Hello.")]
    first = client.responses.create(model=MODEL, input=history, store=False, instructions=INSTRUCTIONS)
    history += [*first.output, user("Again.")]
    client.responses.create(model=MODEL, input=history, store=False)
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("instructions_dropped",)
    assert_signal(captured, span, "instructions_dropped", mode="client_replay", model=MODEL)
    assert (span.events[0].attributes or {})["openai_responses.parent.id"] == first.id


def test_instructions_dropped_near_miss_replay_with_system_message_or_instructions(
    client: openai.OpenAI, captured: Captured
) -> None:
    for resent in ({"instructions": INSTRUCTIONS}, {}):
        history: list[Any] = [user("Hello.")]
        first = client.responses.create(model=MODEL, input=history, store=False, instructions=INSTRUCTIONS)
        history += [*first.output, user("Again.")]
        if not resent:
            history.insert(0, {"role": "system", "content": INSTRUCTIONS})
        client.responses.create(model=MODEL, input=history, store=False, **resent)  # type: ignore[call-overload]
    assert len(captured.spans()) == 4
    for span in captured.spans():
        assert_clean(span)


def test_empty_instructions_count_as_none(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
    client.responses.create(model=MODEL, input="Again.", previous_response_id=first.id, instructions="")
    first_span, span = captured.spans()
    assert "openai_responses.instructions.hash" in attrs(first_span)
    assert "openai_responses.instructions.hash" not in attrs(span)
    assert signals_of(span) == ("instructions_dropped",)


# -- instructions_changed -------------------------------------------------------------------------------


def test_instructions_changed_is_info(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
    client.responses.create(
        model=MODEL, input="Again.", previous_response_id=first.id, instructions="Always answer in uppercase."
    )
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("instructions_changed",)
    assert_signal(captured, span, "instructions_changed", mode="server_chain", model=MODEL)
    assert attrs(span)[CONTEXT_LOSS] is False
    assert_no_payload(captured, INSTRUCTIONS_SECRET, "uppercase")


def test_instructions_changed_near_miss_same_instructions(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
    second = client.responses.create(
        model=MODEL, input="Again.", previous_response_id=first.id, instructions=str(INSTRUCTIONS)
    )
    client.responses.create(model=MODEL, input="Once more.", previous_response_id=second.id, instructions=INSTRUCTIONS)
    for span in captured.spans():
        assert_clean(span)


# -- reasoning_not_replayable ---------------------------------------------------------------------------


def test_reasoning_not_replayable(client: openai.OpenAI, captured: Captured) -> None:
    response = client.responses.create(model=REASONING_MODEL, input="Please choose a code word.", store=False)
    assert response.output[0].type == "reasoning"
    assert response.output[0].encrypted_content is None
    span = captured.only_span()
    assert signals_of(span) == ("reasoning_not_replayable",)
    assert_signal(captured, span, "reasoning_not_replayable", mode="single_turn", model=REASONING_MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.reasoning.count"] == 1


def test_reasoning_not_replayable_near_misses(client: openai.OpenAI, captured: Captured) -> None:
    # store=false with the encrypted payload requested.
    encrypted: Any = client.responses.create(
        model=REASONING_MODEL, input="Please choose a code word.", store=False, include=ENCRYPTED
    )
    assert encrypted.output[0].encrypted_content
    # store=true: the server keeps the reasoning, no payload needed.
    client.responses.create(model=REASONING_MODEL, input="Please choose a code word.")
    # store=false on a model that does not reason.
    client.responses.create(model=MODEL, input="Please choose a code word.", store=False)
    for span in captured.spans():
        assert_clean(span)


# -- reasoning_dropped ----------------------------------------------------------------------------------


def test_reasoning_dropped(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [user(f"Remember {USER_SECRET}. Please choose a code word.")]
    first: Any = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    assert [item.type for item in first.output] == ["reasoning", "message"]
    history += [item for item in first.output if item.type != "reasoning"]
    history.append(user("What is the code word?"))
    second = client.responses.create(
        model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, reasoning=ALL_TURNS
    )
    assert "code_word=unknown" in second.output_text  # the model really lost it
    # The near miss: the model's default, current_turn, would not have rendered that earlier turn's reasoning back.
    again: list[Any] = [user("Please choose a code word again.")]
    other: Any = client.responses.create(model=REASONING_MODEL, input=again, store=False, include=ENCRYPTED)
    again += [*(item for item in other.output if item.type != "reasoning"), user("What is the code word?")]
    client.responses.create(model=REASONING_MODEL, input=again, store=False, include=ENCRYPTED)
    first_span, span, _, by_default = captured.spans()
    assert_clean(first_span)
    assert signals_of(by_default) == ()
    assert attrs(by_default)["openai_responses.reasoning.not_replayed"] == 1
    assert "openai_responses.reasoning.not_replayed" not in attrs(span)
    assert signals_of(span) == ("reasoning_dropped",)
    assert_signal(captured, span, "reasoning_dropped", mode="client_replay", model=REASONING_MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.missing.count"] == 1
    assert_no_payload(captured, USER_SECRET, first.output[0].encrypted_content)


def test_reasoning_dropped_near_miss_every_item_replayed(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [user("Please choose a code word.")]
    first = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    history += [*first.output, user("What is the code word?")]
    options: dict[str, Any] = {"store": False, "include": ENCRYPTED, "reasoning": ALL_TURNS}
    second = client.responses.create(model=REASONING_MODEL, input=history, **options)
    assert "code_word=CW-" in second.output_text
    history += [*second.output, user("And again, what is the code word?")]
    client.responses.create(model=REASONING_MODEL, input=history, **options)
    for span in captured.spans():
        assert_clean(span)


def test_reasoning_dropped_when_it_could_never_be_replayed(client: openai.OpenAI, captured: Captured) -> None:
    """store=false without `include=["reasoning.encrypted_content"]`: the reasoning came back without its payload, so no
    replay could carry it (the API answers 404 for it by id). The event says so, and the fix points at the cause."""
    from otel_responses.signals import Signal

    history: list[Any] = [user("Please choose a code word.")]
    first: Any = client.responses.create(model=REASONING_MODEL, input=history, store=False)
    history += [item for item in first.output if item.type != "reasoning"]
    history.append(user("What is the code word?"))
    with pytest.raises(openai.NotFoundError):  # the reasoning item replayed as it came back
        client.responses.create(model=REASONING_MODEL, input=[*history[:1], *first.output], store=False)
    client.responses.create(model=REASONING_MODEL, input=history, store=False, reasoning=ALL_TURNS)
    first_span, _, span = captured.spans()
    assert signals_of(first_span) == ("reasoning_not_replayable",)
    assert signals_of(span) == ("reasoning_dropped", "reasoning_not_replayable")
    assert_signal(captured, span, "reasoning_dropped", mode="client_replay", model=REASONING_MODEL)
    (event,) = [e for e in span.events if (e.attributes or {})[NAME] == "reasoning_dropped"]
    detail = {k: v for k, v in (event.attributes or {}).items() if k not in (NAME, SEVERITY)}
    assert detail == {"openai_responses.missing.count": 1, "openai_responses.reasoning.unreplayable": True}
    told = Signal("reasoning_dropped", detail)
    assert 'include=["reasoning.encrypted_content"]' in told.fix
    assert told.fix != CATALOGUE["reasoning_dropped"].fix


# -- replay_incomplete ----------------------------------------------------------------------------------


def test_replay_incomplete(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first: Any = client.responses.create(
        model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS
    )
    assert [item.type for item in first.output] == ["reasoning", "message", "function_call"]
    assert first.output[1].phase == "commentary"
    history += [item for item in first.output if item.type != "message"]  # the progress update is lost
    history.append(tool_output(function_call(first).call_id))
    client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("replay_incomplete",)
    assert_signal(captured, span, "replay_incomplete", mode="client_replay", model=REASONING_MODEL)
    assert attrs(span)[TOOL_CHECK] == "ok"
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.missing.count"] == 1
    assert (event.attributes or {})["openai_responses.missing.item_types"] == ("message",)
    assert_no_payload(captured, USER_SECRET, TOOL_SECRET, "Looking that up")


def test_replay_incomplete_near_miss_whole_output(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
    history += first.output
    history.append(tool_output(function_call(first).call_id))
    second = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
    assert f"returned {TOOL_SECRET}" in second.output_text
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert_clean(span, tool_check="ok")


# -- encrypted_content_modified -------------------------------------------------------------------------


def test_encrypted_content_modified_truncated(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [user("Please choose a code word.")]
    first: Any = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    reasoning = first.output[0].model_dump(exclude_none=True)
    reasoning["encrypted_content"] = reasoning["encrypted_content"][:64]
    history += [reasoning, first.output[1], user("What is the code word?")]
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    assert info.value.code == "invalid_encrypted_content"
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("encrypted_content_modified",)
    assert_signal(captured, span, "encrypted_content_modified", mode="client_replay", model=REASONING_MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.item.ids"] == (first.output[0].id,)
    assert_no_payload(captured, first.output[0].encrypted_content, reasoning["encrypted_content"])


def test_encrypted_content_modified_stripped_from_unstored_reasoning(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [user("Please choose a code word.")]
    first = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    stripped = first.output[0].model_dump(exclude_none=True, exclude={"encrypted_content"})
    history += [stripped, first.output[1], user("What is the code word?")]
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    span = captured.spans()[1]
    assert signals_of(span) == ("encrypted_content_modified",)
    assert_signal(captured, span, "encrypted_content_modified", mode="client_replay", model=REASONING_MODEL)


def test_encrypted_content_modified_compaction_item_confirmed_by_the_api(
    client: openai.OpenAI, captured: Captured
) -> None:
    """A change of the right length and alphabet is not visible before sending: the API's own
    `invalid_encrypted_content` answer is the proof, recorded as confirmed."""
    history: list[Any] = [user("Remember this: the marker is E-1."), user("Remember this too: it is important.")]
    first: Any = client.responses.create(
        model=MODEL, input=history, store=False, extra_body={"context_management": COMPACT_EARLY}
    )
    assert [item.type for item in first.output] == ["compaction", "message"]
    compaction: Any = first.output[0].model_dump(exclude_none=True)
    compaction["encrypted_content"] = compaction["encrypted_content"][:-8] + "AAAAAAA="
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model=MODEL, input=[compaction, first.output[1], user("What is the marker?")], store=False
        )
    assert refused.value.code == "invalid_encrypted_content"
    span = captured.spans()[1]
    assert signals_of(span) == ("encrypted_content_modified",)
    assert_signal(captured, span, "encrypted_content_modified", mode="client_replay", model=MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.confirmed"] is True


def test_encrypted_content_modified_re_encoded(client: openai.OpenAI, captured: Captured) -> None:
    """Same length, the other base64 alphabet: re-encoding, which a fresh encryption never does."""
    history: list[Any] = [user("Please choose a code word.")]
    for _ in range(20):  # a random payload may hold neither `+` nor `/` (then both alphabets read it): draw again
        first = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
        reasoning = first.output[0].model_dump(exclude_none=True)
        payload = reasoning["encrypted_content"]
        if "+" in payload or "/" in payload:
            break
    assert "+" in payload or "/" in payload  # the emulator's tokens are standard base64
    captured.clear()
    reasoning["encrypted_content"] = payload.replace("+", "-").replace("/", "_")
    history += [reasoning, first.output[1], user("What is the code word?")]
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    (span,) = captured.spans()
    assert signals_of(span) == ("encrypted_content_modified",)
    (event,) = span.events
    assert "openai_responses.confirmed" in (event.attributes or {})


def test_encrypted_content_modified_near_miss_stream_copy(client: openai.OpenAI, captured: Captured) -> None:
    """The API encrypts afresh each time it serialises an item: an app that keeps the `output_item.done` copy
    replays other bytes than `response.completed` carried, and the API accepts them."""
    history: list[Any] = [user("Please choose a code word.")]
    with client.responses.create(
        model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, stream=True
    ) as stream:
        done = [e.item for e in stream if e.type == "response.output_item.done"]
    final = captured.spans()[0]
    assert done[0].type == "reasoning"
    history += [item.model_dump(exclude_none=True) for item in done]
    history.append(user("What is the code word?"))
    second = client.responses.create(
        model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, reasoning=ALL_TURNS
    )
    assert "code_word=CW-" in second.output_text
    # A copy this process never saw (a later retrieve, another worker's stream): the same length and alphabet.
    stored: Any = client.responses.create(model=REASONING_MODEL, input="Please choose a code word.", include=ENCRYPTED)
    unseen: Any = client.responses.retrieve(stored.id, include=ENCRYPTED).output
    assert unseen[0].encrypted_content != stored.output[0].encrypted_content
    third = client.responses.create(
        model=REASONING_MODEL,
        input=[user("Please choose a code word."), *unseen, user("What is the code word?")],
        include=ENCRYPTED,
        reasoning=ALL_TURNS,
    )
    assert "code_word=CW-" in third.output_text
    assert_clean(final)
    for span in captured.chat_spans():
        assert_clean(span)


def test_encrypted_content_modified_is_never_refused_by_strict_mode(client: openai.OpenAI) -> None:
    """Strict mode refuses only what the request proves: a modified payload is recorded, the API decides."""
    captured = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(
        tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider, strict=True
    )
    try:
        history: list[Any] = [user("Please choose a code word.")]
        first: Any = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
        reasoning: Any = first.output[0].model_dump(exclude_none=True)
        reasoning["encrypted_content"] = reasoning["encrypted_content"][:64]
        with pytest.raises(openai.BadRequestError):  # sent, and refused by the API: not by the instrumentation
            client.responses.create(
                model=REASONING_MODEL, input=[*history, reasoning, first.output[1], user("Code word?")], store=False
            )
    finally:
        instrumentor.uninstrument()
    assert signals_of(captured.spans()[1]) == ("encrypted_content_modified",)


def test_encrypted_content_modified_near_miss_byte_for_byte(client: openai.OpenAI, captured: Captured) -> None:
    # Re-serialised through a dict (as a database would store it), but byte for byte the same payload.
    history: list[Any] = [user("Please choose a code word.")]
    first: Any = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append(user("What is the code word?"))
    second = client.responses.create(
        model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, reasoning=ALL_TURNS
    )
    assert "code_word=CW-" in second.output_text
    # store=true: the reasoning item may be sent by id, without its payload.
    stored: Any = client.responses.create(model=REASONING_MODEL, input="Please choose a code word.", include=ENCRYPTED)
    by_id: Any = stored.output[0].model_dump(exclude_none=True, exclude={"encrypted_content"})
    third = client.responses.create(
        model=REASONING_MODEL,
        input=[user("Please choose a code word."), by_id, stored.output[1], user("What is the code word?")],
        reasoning=ALL_TURNS,
    )
    assert "code_word=CW-" in third.output_text
    for span in captured.spans():
        assert_clean(span)


# -- phase_dropped --------------------------------------------------------------------------------------


def test_phase_dropped(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
    commentary: Any = first.output[1]
    assert commentary.phase == "commentary"
    history += [first.output[0], commentary.model_dump(exclude={"phase"}, exclude_none=True), first.output[2]]
    history.append(tool_output(function_call(first).call_id))
    client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("phase_dropped",)
    assert_signal(captured, span, "phase_dropped", mode="client_replay", model=REASONING_MODEL)
    assert attrs(span)[TOOL_CHECK] == "ok"
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.item.ids"] == (commentary.id,)


def test_phase_dropped_rebuilt_role_content_message(client: openai.OpenAI, captured: Captured) -> None:
    """Rebuilding the answer as ``{role, content}`` from ``output_text`` keeps the text, loses the phase."""
    history: list[Any] = [user("Remember this: the marker is P-1.")]
    first = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    reasoning, message = first.output
    assert message.type == "message"
    assert message.phase == "final_answer"
    history += [reasoning, {"role": "assistant", "content": first.output_text}, user("What is the marker?")]
    second = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED)
    assert "marker=P-1" in second.output_text
    first_span, span = captured.spans()
    assert_clean(first_span)
    # The text is recognised as that message (by fingerprint): nothing is missing, only the phase.
    assert signals_of(span) == ("phase_dropped",)
    assert_signal(captured, span, "phase_dropped", mode="client_replay", model=REASONING_MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.item.ids"] == (message.id,)


def test_phase_dropped_near_miss_model_without_phase(client: openai.OpenAI, captured: Captured) -> None:
    """Models before gpt-5.4 return no `phase`: a message rebuilt as ``{role, content}`` loses nothing."""
    history: list[Any] = [user("Remember this: the marker is P-3.")]
    first = client.responses.create(model=MODEL, input=history, store=False)
    assert getattr(first.output[0], "phase", None) is None
    history += [{"role": "assistant", "content": first.output_text}, user("What is the marker?")]
    second = client.responses.create(model=MODEL, input=history, store=False)
    assert "marker=P-3" in second.output_text
    for span in captured.spans():
        assert_clean(span)


def test_phase_dropped_near_miss_item_reference(client: openai.OpenAI, captured: Captured) -> None:
    """store=true: an item reference stands for the stored item, phase included."""
    first = client.responses.create(model=MODEL, input="Remember this: the marker is P-2.")
    reference: Any = {"type": "item_reference", "id": first.output[0].id}
    second = client.responses.create(
        model=MODEL, input=[user("Remember this: the marker is P-2."), reference, user("What is the marker?")]
    )
    assert "marker=P-2" in second.output_text
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert_clean(span)


def test_phase_dropped_near_miss_message_as_returned(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
    # As a plain dict, phase kept.
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append(tool_output(function_call(first).call_id))
    second = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
    history += [*second.output, user("What did the tool return?")]
    third = client.responses.create(model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS)
    assert f"tool={TOOL_SECRET}" in third.output_text
    spans = captured.spans()
    assert_clean(spans[0])
    assert_clean(spans[1], tool_check="ok")
    assert_clean(spans[2], tool_check="ok")


# -- tool signals ---------------------------------------------------------------------------------------


def test_tool_round_trip_is_ok(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    history += [*first.output, tool_output(function_call(first).call_id)]
    second = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    assert f"returned {TOOL_SECRET}" in second.output_text
    # Server chain: only the output is sent, the call is pending in the parent.
    chained = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    after = client.responses.create(
        model=MODEL,
        input=[tool_output(function_call(chained).call_id)],
        previous_response_id=chained.id,
        tools=TOOLS,
    )
    client.responses.create(model=MODEL, input="Thanks.", previous_response_id=after.id, tools=TOOLS)
    spans = captured.spans()
    assert [attrs(s)[TOOL_CHECK] for s in spans] == ["pending", "ok", "pending", "ok", "none"]
    for span in spans:
        assert_clean(span, tool_check=None)
    assert_no_payload(captured, USER_SECRET, TOOL_SECRET)


def test_orphan_tool_output(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    call = function_call(first)
    history.append(tool_output(call.call_id))  # the call item itself was not kept
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("orphan_tool_output",)
    assert_signal(captured, span, "orphan_tool_output", mode="client_replay", model=MODEL)
    assert attrs(span)[TOOL_CHECK] == "orphan_tool_output"
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.call.ids"] == (call.call_id,)
    assert_no_payload(captured, USER_SECRET, TOOL_SECRET)


def test_orphan_tool_output_near_miss_call_pending_in_parent(client: openai.OpenAI, captured: Captured) -> None:
    """With previous_response_id the call lives in the parent: an output alone is not an orphan."""
    first = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    second = client.responses.create(
        model=MODEL, input=[tool_output(function_call(first).call_id)], previous_response_id=first.id, tools=TOOLS
    )
    assert f"returned {TOOL_SECRET}" in second.output_text
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert_clean(span, tool_check="ok")


def test_orphan_tool_output_near_miss_parent_unknown(client: openai.OpenAI, captured: Captured) -> None:
    """A parent this process never saw (evicted, made elsewhere) may hold the call: silence, not an orphan."""
    ResponsesInstrumentor().uninstrument()
    first = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    ResponsesInstrumentor().instrument(tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider)
    client.responses.create(
        model=MODEL, input=[tool_output(function_call(first).call_id)], previous_response_id=first.id, tools=TOOLS
    )
    (span,) = captured.spans()
    assert_clean(span, tool_check="ok")


def test_orphan_tool_output_near_miss_call_by_item_reference(client: openai.OpenAI, captured: Captured) -> None:
    """store=true: the call may be sent as an item reference; the API resolves it and accepts the output."""
    first = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    call = function_call(first)
    second = client.responses.create(
        model=MODEL,
        input=[tool_request(), {"type": "item_reference", "id": call.id}, tool_output(call.call_id)],
        tools=TOOLS,
    )
    assert f"returned {TOOL_SECRET}" in second.output_text  # the API found the call
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert_clean(span, tool_check="ok")


def test_orphan_tool_output_near_miss_call_by_item_reference_the_ledger_never_saw(
    client: openai.OpenAI, captured: Captured
) -> None:
    """A chain's turn refers to a call of a response this process never saw and answers it: the reference may be any
    call, so neither that output nor the same output a turn later is an orphan (the later one is sent again)."""
    ResponsesInstrumentor().uninstrument()
    elsewhere = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    ResponsesInstrumentor().instrument(tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider)
    call = function_call(elsewhere)
    first = client.responses.create(model=MODEL, input="Hello.")
    reference: Any = {"type": "item_reference", "id": call.id}
    second = client.responses.create(
        model=MODEL, previous_response_id=first.id, input=[reference, tool_output(call.call_id)], tools=TOOLS
    )
    assert f"returned {TOOL_SECRET}" in second.output_text  # the API resolved the reference
    client.responses.create(model=MODEL, previous_response_id=second.id, input=[tool_output(call.call_id)], tools=TOOLS)
    assert [signals_of(s) for s in captured.spans()] == [(), (), ("context_duplicated",)]


def test_orphan_tool_output_near_miss_call_deeper_in_the_chain(client: openai.OpenAI, captured: Captured) -> None:
    """A message window beside previous_response_id sends the last tool output again, one turn after it answered a
    call of the response two steps back: the call is in the context, so it is no orphan; the output is there already
    (`context_duplicated`). Strict mode lets it through."""
    first = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    output = tool_output(function_call(first).call_id)
    second = client.responses.create(model=MODEL, previous_response_id=first.id, input=[output], tools=TOOLS)
    third = client.responses.create(model=MODEL, previous_response_id=second.id, input=[output], tools=TOOLS)
    assert f"returned {TOOL_SECRET}" in third.output_text  # the emulator accepted it
    one, two, span = captured.spans()
    assert_clean(one)
    assert_clean(two, tool_check="ok")
    assert signals_of(span) == ("context_duplicated",)
    assert_signal(captured, span, "context_duplicated", mode="server_chain", model=MODEL)
    assert attrs(span)[TOOL_CHECK] == "ok"
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.duplicated.item_types"] == ("function_call_output",)
    assert (event.attributes or {})["openai_responses.duplicated.counts"] == (1,)
    assert_no_payload(captured, USER_SECRET, TOOL_SECRET)


def test_an_output_sent_again_beside_the_chain_is_not_refused_by_strict_mode(client: openai.OpenAI) -> None:
    with instrumented(strict=True) as cap:
        first = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
        output = tool_output(function_call(first).call_id)
        second = client.responses.create(model=MODEL, previous_response_id=first.id, input=[output], tools=TOOLS)
        client.responses.create(model=MODEL, previous_response_id=second.id, input=[output], tools=TOOLS)
    assert [signals_of(s) for s in cap.spans()] == [(), (), ("context_duplicated",)]


def test_orphan_tool_output_deeper_in_the_chain_still_names_an_output_for_no_call(
    client: openai.OpenAI, captured: Captured
) -> None:
    """The near miss of the above: two turns on, an output whose call_id no turn of the chain made."""
    first = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    second = client.responses.create(
        model=MODEL, previous_response_id=first.id, input=[tool_output(function_call(first).call_id)], tools=TOOLS
    )
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model=MODEL, previous_response_id=second.id, input=[tool_output("call_nobody_made")], tools=TOOLS
        )
    span = captured.spans()[-1]
    assert signals_of(span) == ("orphan_tool_output",)
    assert_signal(captured, span, "orphan_tool_output", mode="server_chain", model=MODEL)


def test_missing_tool_output_server_chain(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="Never mind the tool.", previous_response_id=first.id, tools=TOOLS)
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("missing_tool_output",)
    assert_signal(captured, span, "missing_tool_output", mode="server_chain", model=MODEL)
    assert attrs(span)[TOOL_CHECK] == "missing_tool_output"
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.call.ids"] == (function_call(first).call_id,)


def test_missing_tool_output_client_replay(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    history += [*first.output, user("Never mind the tool.")]
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    span = captured.spans()[1]
    assert signals_of(span) == ("missing_tool_output",)
    assert_signal(captured, span, "missing_tool_output", mode="client_replay", model=MODEL)
    assert attrs(span)[TOOL_CHECK] == "missing_tool_output"


def test_missing_tool_output_conversation(client: openai.OpenAI, captured: Captured) -> None:
    conv = client.conversations.create()
    client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS, conversation=conv.id)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="Never mind the tool.", tools=TOOLS, conversation=conv.id)
    span = captured.chat_spans()[1]
    assert signals_of(span) == ("missing_tool_output",)
    assert_signal(captured, span, "missing_tool_output", mode="conversation", model=MODEL)


def test_missing_tool_output_near_miss_answered_then_next_turn(client: openai.OpenAI, captured: Captured) -> None:
    conv = client.conversations.create()
    first = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS, conversation=conv.id)
    client.responses.create(
        model=MODEL, input=[tool_output(function_call(first).call_id)], tools=TOOLS, conversation=conv.id
    )
    third = client.responses.create(model=MODEL, input="What did the tool return?", tools=TOOLS, conversation=conv.id)
    assert f"tool={TOOL_SECRET}" in third.output_text
    spans = captured.chat_spans()
    assert [attrs(s)[TOOL_CHECK] for s in spans] == ["pending", "ok", "none"]
    for span in spans:
        assert_clean(span, tool_check=None)


def test_tool_output_before_call(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    call = function_call(first)
    history += [tool_output(call.call_id), call]
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    span = captured.spans()[1]
    assert signals_of(span) == ("tool_output_before_call",)
    assert_signal(captured, span, "tool_output_before_call", mode="client_replay", model=MODEL)
    assert attrs(span)[TOOL_CHECK] == "tool_output_before_call"
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.call.ids"] == (call.call_id,)


def test_tool_output_before_call_near_miss_call_then_output(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    call = function_call(first)
    history += [call, tool_output(call.call_id)]
    client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    assert_clean(captured.spans()[1], tool_check="ok")


def rebuilt(item: Any) -> Item:
    """An output item as a library rebuilds it: its fields kept, its id not."""
    dumped: Item = item.model_dump(exclude_none=True)
    dumped.pop("id", None)
    return dumped


def test_duplicate_call_id_one_call_sent_twice(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    call = rebuilt(function_call(first))
    history += [call, call, tool_output(call["call_id"])]
    client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    span = captured.spans()[1]
    assert signals_of(span) == ("duplicate_call_id",)
    assert_signal(captured, span, "duplicate_call_id", mode="client_replay", model=MODEL)
    assert attrs(span)[TOOL_CHECK] == "duplicate_call_id"
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.call.ids"] == (call["call_id"],)


def test_duplicate_call_id_the_call_twice_under_its_id_is_a_duplicate_item_too(
    client: openai.OpenAI, captured: Captured
) -> None:
    """Under its server id the same call twice is one id twice: the API refuses it before reading the calls."""
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    call = function_call(first)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model=MODEL, input=[*history, call, call, tool_output(call.call_id)], tools=TOOLS)
    assert refused.value.body == {
        "message": f"Duplicate item found with id {call.id}. Remove duplicate items from your input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }
    span = captured.spans()[1]
    assert signals_of(span) == ("duplicate_call_id", "duplicate_item_id")
    assert attrs(span)[TOOL_CHECK] == "duplicate_call_id"


def test_duplicate_call_id_tool_turn_replayed_twice(client: openai.OpenAI, captured: Captured) -> None:
    """The catalogue's own example: a tool turn replayed twice (call, output, call, output), rebuilt without ids."""
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    call = rebuilt(function_call(first))
    turn = [call, tool_output(call["call_id"])]
    history += [*turn, *turn]
    client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    span = captured.spans()[1]
    assert_signal(captured, span, "duplicate_call_id", mode="client_replay", model=MODEL)
    # Every output follows a call with its call_id: none is placed before its call.
    assert signals_of(span) == ("duplicate_call_id",)
    assert attrs(span)[TOOL_CHECK] == "duplicate_call_id"


def test_duplicate_call_id_near_miss_two_distinct_calls(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    history += [*first.output, tool_output(function_call(first).call_id), tool_request()]
    second = client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    call_ids = {function_call(first).call_id, function_call(second).call_id}
    assert len(call_ids) == 2
    history += [*second.output, tool_output(function_call(second).call_id, "second result")]
    client.responses.create(model=MODEL, input=history, store=False, tools=TOOLS)
    spans = captured.spans()
    assert [attrs(s)[TOOL_CHECK] for s in spans] == ["pending", "pending", "ok"]
    for span in spans:
        assert_clean(span, tool_check=None)


def test_tool_check_reports_the_first_failing_signal_in_catalogue_order(
    client: openai.OpenAI, captured: Captured
) -> None:
    first = client.responses.create(model=MODEL, input=[tool_request()], store=False, tools=TOOLS)
    call = function_call(first)
    # An unanswered call and an output for an unknown call: orphan comes first.
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model=MODEL, input=[tool_request(), call, tool_output("call_unknown")], store=False, tools=TOOLS
        )
    # The call twice and no output: missing comes before duplicate.
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input=[tool_request(), call, call], store=False, tools=TOOLS)
    _, orphan_and_missing, missing_and_duplicate = captured.spans()
    assert signals_of(orphan_and_missing) == ("orphan_tool_output", "missing_tool_output")
    assert attrs(orphan_and_missing)[TOOL_CHECK] == "orphan_tool_output"
    assert signals_of(missing_and_duplicate) == ("missing_tool_output", "duplicate_call_id", "duplicate_item_id")
    assert attrs(missing_and_duplicate)[TOOL_CHECK] == "missing_tool_output"
    for name in ("orphan_tool_output", "missing_tool_output"):
        assert_signal(captured, orphan_and_missing, name, mode="client_replay", model=MODEL)
    for name in ("missing_tool_output", "duplicate_call_id", "duplicate_item_id"):
        assert_signal(captured, missing_and_duplicate, name, mode="client_replay", model=MODEL)


# -- history_truncated ----------------------------------------------------------------------------------


def test_history_truncated(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [user(f"Remember this: the marker is H-1. {USER_SECRET}")]
    first = client.responses.create(model=MODEL, input=history, store=False)
    history += [*first.output, user("Hello again.")]
    second = client.responses.create(model=MODEL, input=history, store=False)
    history += [*second.output, user("What is the marker?")]
    cut = history[2:]  # the oldest user turn and its answer
    third = client.responses.create(model=MODEL, input=cut, store=False)
    assert "marker=unknown" in third.output_text  # the model really lost it
    one, two, span = captured.spans()
    assert_clean(one)
    assert_clean(two)
    assert signals_of(span) == ("history_truncated",)
    assert_signal(captured, span, "history_truncated", mode="client_replay", model=MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.parent.id"] == second.id
    assert (event.attributes or {})["openai_responses.history.expected_app_messages"] == 2
    assert (event.attributes or {})["openai_responses.history.app_messages"] == 1
    assert_no_payload(captured, USER_SECRET, "H-1")


def test_history_truncated_near_miss_cut_before_compaction_item(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [user("Remember this: the marker is H-2.")]
    first = client.responses.create(model=MODEL, input=history, store=False)
    history += [*first.output, user("Hello again, this is a long enough conversation now.")]
    second = client.responses.create(
        model=MODEL, input=history, store=False, extra_body={"context_management": COMPACT_EARLY}
    )
    assert [item.type for item in second.output] == ["compaction", "message"]
    history += second.output
    start = next(i for i, item in enumerate(history) if getattr(item, "type", None) == "compaction")
    history = [*history[start:], user("What is the marker?")]  # everything before the compaction item dropped
    third = client.responses.create(model=MODEL, input=history, store=False)
    assert "marker=H-2" in third.output_text
    history += [*third.output, user("And what is the marker now?")]
    fourth = client.responses.create(model=MODEL, input=history, store=False)
    assert "marker=H-2" in fourth.output_text
    one, two, three, four = captured.spans()
    assert_clean(one)
    assert signals_of(two) == ("compaction",)
    assert_signal(captured, two, "compaction", mode="client_replay", model=MODEL)
    assert_clean(three)
    assert_clean(four)


def test_history_truncated_near_miss_cut_at_older_compaction_item(client: openai.OpenAI, captured: Captured) -> None:
    """The app keeps the whole history a turn longer, then cuts everything before the compaction item."""
    history: list[Any] = [user("Remember this: the marker is H-4.")]
    first = client.responses.create(model=MODEL, input=history, store=False)
    history += [*first.output, user("Hello again, this is a long enough conversation now.")]
    second = client.responses.create(
        model=MODEL, input=history, store=False, extra_body={"context_management": COMPACT_EARLY}
    )
    history += [*second.output, user("Go on.")]
    third = client.responses.create(model=MODEL, input=history, store=False)
    history += [*third.output, user("What is the marker?")]
    start = next(i for i, item in enumerate(history) if getattr(item, "type", None) == "compaction")
    fourth = client.responses.create(model=MODEL, input=history[start:], store=False)
    assert "marker=H-4" in fourth.output_text  # nothing was lost
    one, two, three, four = captured.spans()
    assert signals_of(two) == ("compaction",)
    for span in (one, three, four):
        assert_clean(span)


def test_history_truncated_near_miss_full_history(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [{"role": "system", "content": "Be brief."}, user("Remember this: the marker is H-3.")]
    for text in ("Hello again.", "And again.", "What is the marker?"):
        response = client.responses.create(model=MODEL, input=history, store=False)
        history += [*response.output, user(text)]
    last = client.responses.create(model=MODEL, input=history, store=False)
    assert "marker=H-3" in last.output_text
    spans = captured.spans()
    assert len(spans) == 4
    for span in spans:
        assert_clean(span)


def test_history_truncated_system_message_emptied_on_replay(client: openai.OpenAI, captured: Captured) -> None:
    """A prompt middleware that gives the system prompt on the first turn only, `""` after: the instructions the first
    answer followed are gone from the replay."""
    ask = user("Remember this: the marker is H-4.")
    first = client.responses.create(model=MODEL, input=[{"role": "system", "content": "Be brief."}, ask], store=False)
    replay = [{"role": "system", "content": ""}, ask, *first.output, user("What is the marker?")]
    client.responses.create(model=MODEL, input=replay, store=False)
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("history_truncated",)
    assert_signal(captured, span, "history_truncated", mode="client_replay", model=MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.history.expected_app_messages"] == 2
    assert (event.attributes or {})["openai_responses.history.app_messages"] == 1


def test_history_truncated_near_miss_system_message_changed_or_added(client: openai.OpenAI, captured: Captured) -> None:
    """A system message with today's date in it, a new developer message beside the old system message, the same
    system message again: none is history lost."""
    ask = user("Remember this: the marker is H-5.")
    first = client.responses.create(
        model=MODEL, input=[{"role": "system", "content": "Today is 2026-12-01."}, ask], store=False
    )
    history: list[Any] = [ask, *first.output, user("Hello again.")]
    second = client.responses.create(
        model=MODEL, input=[{"role": "system", "content": "Today is 2026-12-02."}, *history], store=False
    )
    history += [*second.output, user("What is the marker?")]
    both: Any = [{"role": "system", "content": "Today is 2026-12-02."}, {"role": "developer", "content": "Be brief."}]
    third = client.responses.create(model=MODEL, input=[*both, *history], store=False)
    history += [*third.output, user("And again?")]
    client.responses.create(model=MODEL, input=[*both, *history], store=False)
    for span in captured.spans():
        assert_clean(span)


# -- concurrent_branch ----------------------------------------------------------------------------------


def test_concurrent_branch_second_child_of_one_parent(client: openai.OpenAI, captured: Captured) -> None:
    root = client.responses.create(model=MODEL, input="Remember this: the marker is B-1.")
    client.responses.create(model=MODEL, input="Branch one.", previous_response_id=root.id)
    client.responses.create(model=MODEL, input="Branch two.", previous_response_id=root.id)
    root_span, one, two = captured.spans()
    assert_clean(root_span)
    assert_clean(one)
    assert signals_of(two) == ("concurrent_branch",)
    assert_signal(captured, two, "concurrent_branch", mode="server_chain", model=MODEL)
    assert attrs(two)[CONTEXT_LOSS] is False


def _barrier_client(emulator: Emulator, barrier: threading.Barrier) -> openai.OpenAI:
    """A client whose requests wait for each other on the wire: both are in flight at once."""

    def wait(request: Any) -> None:
        if request.url.path.endswith("/responses"):
            barrier.wait()

    return emulator.client(http_client=openai.DefaultHttpxClient(event_hooks={"request": [wait]}))


def _in_threads(*calls: Any) -> None:
    errors: list[BaseException] = []

    def run(call: Any) -> None:
        try:
            call()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not errors, errors


def test_concurrent_branch_two_writes_to_one_conversation_at_once(
    emulator: Emulator, client: openai.OpenAI, captured: Captured
) -> None:
    conv = client.conversations.create()
    racing = _barrier_client(emulator, threading.Barrier(2, timeout=5))
    with racing:
        _in_threads(
            lambda: racing.responses.create(model=MODEL, input="Worker one.", conversation=conv.id),
            lambda: racing.responses.create(model=MODEL, input="Worker two.", conversation=conv.id),
        )
    spans = captured.chat_spans()
    assert len(spans) == 2
    raised = [s for s in spans if signals_of(s)]
    assert len(raised) == 1
    (span,) = raised
    assert signals_of(span) == ("concurrent_branch",)
    assert_signal(captured, span, "concurrent_branch", mode="conversation", model=MODEL)
    assert attrs(span)[CONTEXT_LOSS] is False


def test_concurrent_branch_near_misses(emulator: Emulator, client: openai.OpenAI, captured: Captured) -> None:
    # A linear chain.
    first = client.responses.create(model=MODEL, input="One.")
    second = client.responses.create(model=MODEL, input="Two.", previous_response_id=first.id)
    client.responses.create(model=MODEL, input="Three.", previous_response_id=second.id)
    # Sequential turns on one conversation.
    conv = client.conversations.create()
    client.responses.create(model=MODEL, input="One.", conversation=conv.id)
    client.responses.create(model=MODEL, input="Two.", conversation=conv.id)
    # Two conversations written at the same moment.
    a, b = client.conversations.create(), client.conversations.create()
    with _barrier_client(emulator, threading.Barrier(2, timeout=5)) as racing:
        _in_threads(
            lambda: racing.responses.create(model=MODEL, input="Worker one.", conversation=a.id),
            lambda: racing.responses.create(model=MODEL, input="Worker two.", conversation=b.id),
        )
    spans = captured.chat_spans()
    assert len(spans) == 7
    for span in spans:
        assert_clean(span)


# -- response_incomplete --------------------------------------------------------------------------------


def test_response_incomplete(client: openai.OpenAI, captured: Captured) -> None:
    response = client.responses.create(
        model=MODEL, input=f"Remember this: the marker is {USER_SECRET}.", max_output_tokens=1
    )
    assert response.status == "incomplete"
    span = captured.only_span()
    assert signals_of(span) == ("response_incomplete",)
    assert_signal(captured, span, "response_incomplete", mode="single_turn", model=MODEL)
    assert attrs(span)["gen_ai.response.finish_reasons"] == ("length",)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.incomplete.reason"] == "max_output_tokens"
    assert_no_payload(captured, USER_SECRET)


def test_response_incomplete_near_miss_enough_tokens(client: openai.OpenAI, captured: Captured) -> None:
    response = client.responses.create(model=REASONING_MODEL, input="Please choose a code word.", max_output_tokens=512)
    assert response.status == "completed"
    assert_clean(captured.only_span())


# -- compaction -----------------------------------------------------------------------------------------


def test_compaction_is_info(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input=f"Remember this: the marker is {USER_SECRET}.")
    second = client.responses.create(
        model=MODEL,
        input="Hello again, here is some more context.",
        previous_response_id=first.id,
        extra_body={"context_management": COMPACT_EARLY},
    )
    assert second.output[0].type == "compaction"
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("compaction",)
    assert_signal(captured, span, "compaction", mode="server_chain", model=MODEL)
    assert attrs(span)[CONTEXT_LOSS] is False
    assert attrs(span)["openai_responses.compaction"] is True
    assert attrs(span)["gen_ai.conversation.compacted"] is True
    assert_no_payload(captured, USER_SECRET, second.output[0].encrypted_content)


def test_compaction_near_miss_threshold_not_reached(client: openai.OpenAI, captured: Captured) -> None:
    response = client.responses.create(
        model=MODEL,
        input="Hello.",
        extra_body={"context_management": [{"type": "compaction", "compact_threshold": 100_000}]},
    )
    assert [item.type for item in response.output] == ["message"]
    span = captured.only_span()
    assert_clean(span)
    assert attrs(span)["openai_responses.compaction"] is False


# -- tool_output_modified -------------------------------------------------------------------------------


def test_tool_output_modified_cleared_on_replay(client: openai.OpenAI, captured: Captured) -> None:
    """Old tool results cleared to save tokens (langchain's ClearToolUsesEdit writes `[cleared]`): the next answer no
    longer sees what the first one did."""
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, tools=TOOLS, store=False)
    call = function_call(first)
    history += [*first.output, tool_output(call.call_id)]
    second = client.responses.create(model=MODEL, input=history, tools=TOOLS, store=False)
    history += [*second.output, user("What did the lookup return?")]
    history[history.index(tool_output(call.call_id))] = tool_output(call.call_id, "[cleared]")
    client.responses.create(model=MODEL, input=history, tools=TOOLS, store=False)
    assert f"returned {TOOL_SECRET}" in second.output_text
    one, two, span = captured.spans()
    assert_clean(one)
    assert_clean(two, tool_check="ok")
    assert signals_of(span) == ("tool_output_modified",)
    assert_signal(captured, span, "tool_output_modified", mode="client_replay", model=MODEL)
    assert attrs(span)[CONTEXT_LOSS] is False
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.call.ids"] == (call.call_id,)
    assert_no_payload(captured, USER_SECRET, TOOL_SECRET)


def test_tool_output_modified_near_miss_replayed_as_sent(client: openai.OpenAI, captured: Captured) -> None:
    """Each tool output replayed as first sent, turn after turn, also as a new string of the same text."""
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, tools=TOOLS, store=False)
    call = function_call(first)
    history += [*first.output, tool_output(call.call_id)]
    second = client.responses.create(model=MODEL, input=history, tools=TOOLS, store=False)
    history += [*second.output, user("What did the lookup return?")]
    third = client.responses.create(model=MODEL, input=history, tools=TOOLS, store=False)
    sent = tool_output(call.call_id)
    assert sent in history
    rebuilt: list[Any] = [
        tool_output(call.call_id, "".join(TOOL_SECRET.partition("-"))) if i == sent else i for i in history
    ]
    assert rebuilt[history.index(sent)]["output"] is not TOOL_SECRET  # a new string of the same text
    rebuilt += [*third.output, user("Thanks.")]
    client.responses.create(model=MODEL, input=rebuilt, tools=TOOLS, store=False)
    for span in captured.spans():
        assert_clean(span, tool_check=None)


# -- async ----------------------------------------------------------------------------------------------


def test_async_signals(emulator: Emulator, captured: Captured) -> None:
    async def session() -> None:
        client = emulator.async_client()
        try:
            # Request side: instructions dropped on a chain.
            first = await client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
            await client.responses.create(model=MODEL, input="Again.", previous_response_id=first.id)
            # Response side: cut short.
            await client.responses.create(model=MODEL, input="Hello.", max_output_tokens=1)
            # Tool: the output without its call.
            called = await client.responses.create(model=MODEL, input=[tool_request()], store=False, tools=TOOLS)
            with pytest.raises(openai.BadRequestError):
                await client.responses.create(
                    model=MODEL,
                    input=[tool_request(), tool_output(function_call(called).call_id)],
                    store=False,
                    tools=TOOLS,
                )
            # Near miss: the same chain done right.
            again = await client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
            await client.responses.create(
                model=MODEL, input="Again.", previous_response_id=again.id, instructions=INSTRUCTIONS
            )
        finally:
            await client.close()

    asyncio.run(session())
    first, dropped, incomplete, called, orphan, again, right = captured.spans()
    for span in (first, called, again, right):
        assert_clean(span)
    assert signals_of(dropped) == ("instructions_dropped",)
    assert_signal(captured, dropped, "instructions_dropped", mode="server_chain", model=MODEL)
    assert signals_of(incomplete) == ("response_incomplete",)
    assert_signal(captured, incomplete, "response_incomplete", mode="single_turn", model=MODEL)
    assert signals_of(orphan) == ("orphan_tool_output",)
    assert_signal(captured, orphan, "orphan_tool_output", mode="client_replay", model=MODEL)
    assert attrs(orphan)[TOOL_CHECK] == "orphan_tool_output"
    assert_no_payload(captured, USER_SECRET, TOOL_SECRET, INSTRUCTIONS_SECRET)


def test_async_retrieve_of_unstored_response(emulator: Emulator, captured: Captured) -> None:
    async def session() -> str:
        client = emulator.async_client()
        try:
            created = await client.responses.create(model=MODEL, input="Hello.", store=False)
            with pytest.raises(openai.NotFoundError):
                await client.responses.retrieve(created.id)
            return created.id
        finally:
            await client.close()

    response_id = asyncio.run(session())
    _, fetch = captured.spans()
    assert signals_of(fetch) == ("unstored_retrieve",)
    assert_signal(captured, fetch, "unstored_retrieve", mode=None, model=None)
    assert attrs(fetch)["gen_ai.response.id"] == response_id


def test_async_concurrent_writes_to_one_conversation(emulator: Emulator, captured: Captured) -> None:
    async def session() -> None:
        client = emulator.async_client()
        try:
            conv = await client.conversations.create()
            await asyncio.gather(
                client.responses.create(model=MODEL, input="Task one.", conversation=conv.id),
                client.responses.create(model=MODEL, input="Task two.", conversation=conv.id),
            )
            # Near miss: the next turn waits for both.
            await client.responses.create(model=MODEL, input="Task three.", conversation=conv.id)
        finally:
            await client.close()

    asyncio.run(session())
    spans = captured.chat_spans()
    assert len(spans) == 3
    assert sorted(signals_of(s) for s in spans[:2]) == [(), ("concurrent_branch",)]
    (span,) = [s for s in spans[:2] if signals_of(s)]
    assert_signal(captured, span, "concurrent_branch", mode="conversation", model=MODEL)
    assert_clean(spans[2])


# -- responses this process has not seen ----------------------------------------------------------------


def test_unseen_responses_raise_no_false_signal(client: openai.OpenAI, captured: Captured) -> None:
    ResponsesInstrumentor().uninstrument()
    try:
        # Created while the instrumentation was off (or by another process).
        chained_parent = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
        tool_turn = client.responses.create(
            model=REASONING_MODEL, input=[tool_request()], store=False, include=ENCRYPTED, tools=TOOLS
        )
        unstored = client.responses.create(model=MODEL, input="Hello.", store=False)
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )
    assert captured.spans() == []
    # A correct chain to an unseen parent.
    client.responses.create(
        model=MODEL, input="Again.", previous_response_id=chained_parent.id, instructions=INSTRUCTIONS
    )
    # Replaying an unseen response's items: no link, nothing to compare against.
    history: list[Any] = [tool_request(), *tool_turn.output, tool_output(function_call(tool_turn).call_id)]
    replayed = client.responses.create(
        model=REASONING_MODEL, input=history, store=False, include=ENCRYPTED, tools=TOOLS
    )
    assert f"returned {TOOL_SECRET}" in replayed.output_text
    # The same replay without the progress message: had the response been seen, replay_incomplete (and a
    # second replay of one parent: concurrent_branch); unseen, the checks stay silent rather than guess.
    partial = [item for item in history if getattr(item, "type", None) != "message"]
    client.responses.create(model=REASONING_MODEL, input=partial, store=False, include=ENCRYPTED, tools=TOOLS)
    # Retrieving an unseen unstored response: the 404 is the API's word, not a guess of ours.
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    chain, replay, partial_replay, fetch = captured.spans()
    assert_clean(chain)
    assert_clean(replay, tool_check="ok")
    assert_clean(partial_replay, tool_check="ok")
    assert_clean(fetch, tool_check=None)
    assert captured.metric_points("openai_responses.signals") == []


# -- no payload in telemetry ----------------------------------------------------------------------------


def test_signal_metadata_never_carries_payload(client: openai.OpenAI, captured: Captured) -> None:
    # Many signals in one session, each with its detail attributes.
    first = client.responses.create(
        model=REASONING_MODEL, input=[tool_request()], instructions=INSTRUCTIONS, tools=TOOLS, store=False
    )
    commentary: Any = first.output[1].model_dump(exclude={"phase"}, exclude_none=True)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model=REASONING_MODEL,
            input=[tool_request(), commentary, function_call(first), user(f"Skip it {USER_SECRET}")],
            instructions=INSTRUCTIONS,
            store=False,
            tools=TOOLS,
            reasoning=ALL_TURNS,
        )
    stored = client.responses.create(
        model=MODEL, input=f"Remember {USER_SECRET}.", instructions=INSTRUCTIONS, max_output_tokens=1
    )
    client.responses.create(model=MODEL, input=f"Again {USER_SECRET}.", previous_response_id=stored.id)
    client.responses.create(
        model=MODEL,
        input=f"Once more {USER_SECRET}.",
        previous_response_id=stored.id,
        instructions=f"Changed. {INSTRUCTIONS_SECRET}",
    )
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input=[tool_request(), tool_output("call_nowhere")], tools=TOOLS)
    raised = {name for span in captured.spans() for name in signals_of(span)}
    assert raised == {
        "reasoning_not_replayable",
        "phase_dropped",
        "reasoning_dropped",
        "missing_tool_output",
        "response_incomplete",
        "instructions_dropped",
        "instructions_changed",
        "concurrent_branch",
        "orphan_tool_output",
    }
    allowed = {NAME, SEVERITY}
    for span in captured.spans():
        for event in span.events:
            assert event.name == EVENT
            for key, value in (event.attributes or {}).items():
                assert key in allowed or key.startswith("openai_responses."), key
                assert isinstance(value, (str, int, bool, tuple)), (key, value)
    assert_no_payload(
        captured,
        USER_SECRET,
        TOOL_SECRET,
        INSTRUCTIONS_SECRET,
        "Looking that up",
        function_call(first).arguments,
    )


# -- what real client libraries send ---------------------------------------------------------------------------------


def stripped(item: Any) -> Item:
    """An output item replayed the way pydantic-ai and llama-index rebuild it: without its id."""
    return item.model_dump(exclude={"id", "status"}, exclude_none=True)


def test_calls_replayed_without_ids_are_recognised_by_call_id(client: openai.OpenAI, captured: Captured) -> None:
    """Sequential tool turns whose calls are replayed without ids: no false concurrent_branch (turn 3 linked to
    turn 1's response), no replay_incomplete listing a call that is there."""
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=MODEL, input=history, tools=TOOLS)
    history += [stripped(function_call(first)), tool_output(function_call(first).call_id)]
    second = client.responses.create(model=MODEL, input=history, tools=TOOLS)
    history += [*second.output, tool_request()]
    third = client.responses.create(model=MODEL, input=history, tools=TOOLS)
    history += [stripped(function_call(third)), tool_output(function_call(third).call_id)]
    client.responses.create(model=MODEL, input=history, tools=TOOLS)
    spans = captured.chat_spans()
    assert len(spans) == 4
    for span in spans:
        assert_clean(span, tool_check=None)
    assert attrs(spans[1])[TOOL_CHECK] == attrs(spans[3])[TOOL_CHECK] == "ok"


def test_reasoning_dropped_when_the_call_is_rebuilt_without_id(client: openai.OpenAI, captured: Captured) -> None:
    """A replay that rebuilds the call without its id and leaves the reasoning item out loses the reasoning."""
    history: list[Any] = [tool_request()]
    first = client.responses.create(model=REASONING_MODEL, input=history, tools=TOOLS, store=False, include=ENCRYPTED)
    kept = [
        stripped(item) if item.type == "function_call" else item for item in first.output if item.type != "reasoning"
    ]
    history += [*kept, tool_output(function_call(first).call_id)]
    client.responses.create(model=REASONING_MODEL, input=history, tools=TOOLS, store=False, include=ENCRYPTED)
    span = captured.spans()[1]
    assert signals_of(span) == ("reasoning_dropped",)
    assert_signal(captured, span, "reasoning_dropped", mode="client_replay", model=REASONING_MODEL)


def test_history_truncated_counts_distinct_messages(client: openai.OpenAI, captured: Captured) -> None:
    """A library that sends each new user message twice, then replays one copy, loses nothing."""
    said: Any = user("Remember this: the marker is D-1.")
    first: Any = client.responses.create(model=MODEL, input=[said, said])
    client.responses.create(model=MODEL, input=[said, *first.output, user("What is the marker?")])
    assert_clean(captured.spans()[1])
    # Really cut: the earlier request held two distinct messages, the replay keeps one.
    other: Any = user("Remember this too: it matters.")
    second: Any = client.responses.create(model=MODEL, input=[said, other])
    client.responses.create(model=MODEL, input=[other, *second.output, user("What is the marker?")])
    span = captured.spans()[3]
    assert signals_of(span) == ("history_truncated",)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.history.expected_app_messages"] == 2
    assert (event.attributes or {})["openai_responses.history.app_messages"] == 1


def test_context_duplicated_server_chain(client: openai.OpenAI, captured: Captured) -> None:
    """llama-index's `track_previous_responses=True`: the whole history again beside previous_response_id."""
    history: list[Any] = [user("Remember this: the marker is R-1.")]
    first = client.responses.create(model=MODEL, input=history)
    history += [*first.output, user("What is the marker?")]
    second = client.responses.create(model=MODEL, input=history, previous_response_id=first.id)
    assert "marker=R-1" in second.output_text
    first_span, span = captured.spans()
    assert_clean(first_span)
    assert signals_of(span) == ("context_duplicated",)
    assert_signal(captured, span, "context_duplicated", mode="server_chain", model=MODEL)
    (event,) = span.events
    assert (event.attributes or {})["openai_responses.duplicated.count"] == 2
    assert (event.attributes or {})["openai_responses.duplicated.item_types"] == ("message",)
    assert (event.attributes or {})["openai_responses.duplicated.counts"] == (2,)


def test_context_duplicated_conversation(client: openai.OpenAI, captured: Captured) -> None:
    """The answer rebuilt as text beside the conversation that holds it: accepted, read twice."""
    conversation = client.conversations.create().id
    first: Any = client.responses.create(
        model=MODEL, input="Remember this: the marker is R-2.", conversation=conversation
    )
    rebuilt_answer: Item = {"role": "assistant", "content": first.output_text}
    client.responses.create(model=MODEL, input=[rebuilt_answer, user("What is the marker?")], conversation=conversation)
    span = captured.chat_spans()[1]
    assert signals_of(span) == ("context_duplicated",)
    assert_signal(captured, span, "context_duplicated", mode="conversation", model=MODEL)


def test_context_duplicated_under_the_conversations_ids_is_a_duplicate_item(
    client: openai.OpenAI, captured: Captured
) -> None:
    """The same items under the ids the conversation holds them by: the API refuses them ("Duplicate item found")."""
    conversation = client.conversations.create().id
    first: Any = client.responses.create(
        model=MODEL, input="Remember this: the marker is R-2.", conversation=conversation
    )
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model=MODEL, input=[*first.output, user("What is the marker?")], conversation=conversation
        )
    assert f"Duplicate item found with id {first.output[0].id}." in refused.value.message
    span = captured.chat_spans()[1]
    assert signals_of(span) == ("duplicate_item_id",)
    assert_signal(captured, span, "duplicate_item_id", mode="conversation", model=MODEL)
    (event,) = span.events
    assert dict(event.attributes or {}) == {
        "openai_responses.signal.name": "duplicate_item_id",
        "openai_responses.signal.severity": "error",
        "openai_responses.item.ids": (first.output[0].id,),
        "openai_responses.duplicate.held_by": ("conversation",),
    }


def test_context_duplicated_near_misses(client: openai.OpenAI, captured: Captured) -> None:
    """Only new items beside previous_response_id; a user who says the same word again; the same system message
    each turn."""
    system: Any = {"role": "system", "content": "Be brief."}
    first = client.responses.create(model=MODEL, input=[system, user("yes")])
    second = client.responses.create(model=MODEL, input=[system, user("yes")], previous_response_id=first.id)
    client.responses.create(model=MODEL, input=[system, user("The marker is R-3.")], previous_response_id=second.id)
    for span in captured.spans():
        assert_clean(span)


def test_context_duplicated_is_not_refused_by_strict_mode(client: openai.OpenAI) -> None:
    with instrumented(strict=True) as cap:
        first: Any = client.responses.create(model=MODEL, input="The marker is R-4.")
        client.responses.create(
            model=MODEL, input=[user("The marker is R-4."), *first.output], previous_response_id=first.id
        )
    assert signals_of(cap.spans()[1]) == ("context_duplicated",)


def test_effective_store_comes_from_the_body() -> None:
    """An organisation that does not store: requests that omit `store` get `"store": false` in the body."""
    with Emulator(EmulatorConfig(store_default=False)) as emulator, emulator.client() as sdk, instrumented() as cap:
        first = sdk.responses.create(model=MODEL, input="The marker is O-1.")
        with pytest.raises(openai.BadRequestError):
            sdk.responses.create(model=MODEL, input="What is the marker?", previous_response_id=first.id)
        sdk.responses.create(model=MODEL, input="hi", store=True)
    first_span, chained, stored = cap.spans()
    assert attrs(first_span)["openai_responses.store"] is False
    assert attrs(first_span)["openai_responses.store.requested"] is True
    assert signals_of(chained) == ("unstored_parent",)
    assert attrs(stored)["openai_responses.store"] is True
    assert "openai_responses.store.requested" not in attrs(stored)
    calls = {
        (p.attributes["openai_responses.store"], p.attributes["openai_responses.state.mode"]): p.value
        for p in cap.metric_points("openai_responses.calls")
    }
    assert calls[(False, "single_turn")] == 1
    assert calls[(True, "single_turn")] == 1


def test_organisation_default_store_false_reasoning_not_replayable_and_background_polls() -> None:
    """Recorded traffic: requests that omit `store` came back `"store": false`; reasoning without
    `encrypted_content` then cannot be replayed. A background response of such an organisation is polled with
    answers all the same: no `unstored_retrieve`."""
    with Emulator(EmulatorConfig(store_default=False)) as emulator, emulator.client() as sdk, instrumented() as cap:
        sdk.responses.create(model=REASONING_MODEL, input="Choose a code word.")
        queued = sdk.responses.create(model=MODEL, input="The marker is B-2.", background=True)
        while sdk.responses.retrieve(queued.id).status in ("queued", "in_progress"):
            pass
    reasoning, background, *polls = cap.spans()
    assert signals_of(reasoning) == ("reasoning_not_replayable",)
    assert attrs(reasoning)["openai_responses.store"] is False
    assert signals_of(background) == ()
    assert polls
    for span in polls:
        assert signals_of(span) == ()


@pytest.mark.skipif(not hasattr(Responses, "compact"), reason="responses.compact arrived in openai 2.9.0")
def test_compacted_output_replayed_without_its_user_messages(client: openai.OpenAI, captured: Captured) -> None:
    """`responses.compact` keeps the user messages beside its compaction item: both are the next turn's context."""
    history: Any = [user("Remember this: the marker is K-1."), user("And the colour is teal.")]
    first: Any = client.responses.create(model=MODEL, input=history)
    compacted = client.responses.compact(model=MODEL, input=[*history, *first.output])
    kept: Any = [item for item in compacted.output if item.type == "compaction"]
    assert len(kept) == 1
    assert len(compacted.output) == 3
    client.responses.create(model=MODEL, input=[*kept, user("What is the marker?")])
    # Near misses: the whole output, or the app's own copies of the user messages beside the compaction item.
    returned: Any = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
    client.responses.create(model=MODEL, input=[*returned, user("What is the marker?")])
    client.responses.create(model=MODEL, input=[*history, *kept, user("What is the colour?")])
    _first, compact, cut, whole, own = captured.spans()
    assert signals_of(compact) == ("compaction",)
    assert signals_of(cut) == ("replay_incomplete",)
    (event,) = cut.events
    assert (event.attributes or {})["openai_responses.missing.item_types"] == ("message", "message")
    for span in (whole, own):  # each continues the same compacted context again: a second child, info only
        assert signals_of(span) == ("concurrent_branch",)
