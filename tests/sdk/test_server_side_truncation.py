"""`history_truncated` read from numbers: under `truncation: "auto"` the server drops the oldest items itself when
the context overflows, and says nothing. A chained or conversation turn whose `usage.input_tokens` is below what
the state it continues already held (the parent's input and output tokens, less the reasoning the effective
reasoning context does not render back) had items dropped: `history_truncated`, severity info, with a detail that
says the server did it. Each row beside its near miss; then end to end against the emulator, whose context window
is configurable.

The recorded chains cannot prove it yet (11 chained pairs in tests/real_traffic, none with `truncation: "auto"`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import openai
import pytest

from otel_responses import attributes as a
from otel_responses._analysis.analysis import analyse
from otel_responses._analysis.checks import Situation, run_response_checks
from otel_responses._analysis.facts import request_facts, response_facts
from otel_responses._calls.operations import remember_created
from otel_responses.config import settings_from
from otel_responses.emulator import Emulator, EmulatorConfig
from otel_responses.ledger import InMemoryLedger
from otel_responses.signals import INFO, Signal
from otel_responses.testing import capture

from ..core.test_core import Ended
from ..support import chat_signals, signal_events

SETTINGS = settings_from({"hash_key": "truncation-tests"})
SITUATION = Situation(zdr=False, concurrent=False)
MODEL = "gpt-5-mini"  # current_turn: earlier turns' reasoning is not rendered back
TOOL = {"type": "function", "name": "lookup_weather", "parameters": {"type": "object", "properties": {}}}
ANSWER = {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup_weather", "arguments": "{}"}
COMPACTION = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAABo" + "Zx9_Kq-" * 20}
SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _response(response_id: str, output: list[Any], usage: tuple[int, int, int]) -> Any:
    """A response as the SDK builds one (attributes), its output items as dicts."""
    given, made, reasoning = usage
    return SimpleNamespace(
        id=response_id,
        model=MODEL,
        output=output,
        status="completed",
        usage=SimpleNamespace(
            input_tokens=given,
            output_tokens=made,
            input_tokens_details=SimpleNamespace(cached_tokens=0),
            output_tokens_details=SimpleNamespace(reasoning_tokens=reasoning),
        ),
    )


INSTRUCTIONS = "Be brief."
PARENT: dict[str, Any] = {
    "model": MODEL,
    "input": "Remember this.",
    "truncation": "auto",
    "tools": [TOOL],
    "instructions": INSTRUCTIONS,
}


def raised(
    parent_output: list[Any], parent_usage: tuple[int, int, int], request: dict[str, Any], given: int
) -> list[Signal]:
    """The response-side signals of ``request`` (continuing `resp_1`, with the parent's instructions and tools unless
    it says otherwise) whose response read ``given`` input tokens, after `resp_1` returned ``parent_output`` with
    ``parent_usage``."""
    ledger = InMemoryLedger()
    first = request_facts("chat", PARENT, SETTINGS)
    remember_created(
        Ended(ledger, first, analyse(first, ledger)),
        response_facts(_response("resp_1", parent_output, parent_usage), SETTINGS),
    )
    sent = {"model": MODEL, "tools": [TOOL], "truncation": "auto", "instructions": INSTRUCTIONS, **request}
    req = request_facts("chat", {k: v for k, v in sent.items() if v is not None}, SETTINGS)
    analysis = analyse(req, ledger)
    resp = response_facts(_response("resp_2", [ANSWER], (given, 5, 0)), SETTINGS)
    return run_response_checks(req, analysis, resp, SITUATION)


CHAINED: dict[str, Any] = {"previous_response_id": "resp_1", "input": [user("And now?")]}

# (name, the parent's output, its usage (input, output, reasoning), the next request, its input tokens, raised)
ROWS: list[tuple[str, list[Any], tuple[int, int, int], dict[str, Any], int, bool]] = [
    ("the usage fell below the state", [ANSWER], (1000, 50, 0), CHAINED, 600, True),
    ("the usage grew", [ANSWER], (1000, 50, 0), CHAINED, 1070, False),
    ("exactly what the state held", [ANSWER], (1000, 50, 0), CHAINED, 1050, False),
    ("truncation left at disabled", [ANSWER], (1000, 50, 0), {**CHAINED, "truncation": "disabled"}, 600, False),
    ("a compaction returned by the parent", [COMPACTION, ANSWER], (1000, 50, 0), CHAINED, 600, False),
    (
        "a compaction item sent between",
        [ANSWER],
        (1000, 50, 0),
        {**CHAINED, "input": [COMPACTION, user("And now?")]},
        600,
        False,
    ),
    ("another model", [ANSWER], (1000, 50, 0), {**CHAINED, "model": "gpt-5.4"}, 600, False),
    (
        "instructions not sent again (never inherited)",
        [ANSWER],
        (1000, 50, 0),
        {**CHAINED, "instructions": None},
        600,
        False,
    ),
    ("other tool definitions", [ANSWER], (1000, 50, 0), {**CHAINED, "tools": []}, 600, False),
    # The parent's reasoning is an earlier turn's once the next request sends a user message (current_turn).
    ("reasoning not rendered back, less than that", [REASONING, ANSWER], (1000, 350, 300), CHAINED, 1000, True),
    ("reasoning not rendered back", [REASONING, ANSWER], (1000, 350, 300), CHAINED, 1060, False),
    (
        "reasoning of the turn a tool output continues",
        [REASONING, CALL],
        (1000, 350, 300),
        {
            "previous_response_id": "resp_1",
            "input": [{"type": "function_call_output", "call_id": "call_1", "output": "x"}],
        },
        1300,
        True,
    ),
    (
        "all_turns renders it back",
        [REASONING, ANSWER],
        (1000, 350, 300),
        {**CHAINED, "reasoning": {"context": "all_turns"}},
        1300,
        True,
    ),
    ("a hosted tool's item renders as it likes", [SEARCH, ANSWER], (1000, 500, 0), CHAINED, 1200, False),
    ("a hosted tool's item, the input itself shrank", [SEARCH, ANSWER], (1000, 500, 0), CHAINED, 900, True),
]


@pytest.mark.parametrize(
    ("parent_output", "usage", "sent", "given", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_the_server_dropped_items_when_the_usage_says_fewer_than_the_state_held(
    parent_output: list[Any], usage: tuple[int, int, int], sent: dict[str, Any], given: int, expected: bool
) -> None:
    found = raised(parent_output, usage, sent, given)
    assert [s.name for s in found] == (["history_truncated"] if expected else [])
    if expected:
        (signal,) = found
        assert signal.severity == INFO
        assert signal.detail[a.HISTORY_SERVER_TRUNCATED] is True
        assert signal.detail[a.PARENT_ID] == "resp_1"
        held = signal.detail[a.HISTORY_HELD_TOKENS]
        assert isinstance(held, int)
        assert held > given
        assert "truncation" in signal.meaning


# -- end to end, against the emulator ----------------------------------------------------------------------------

PLAIN = "gpt-4.1"
OPENING = "Remember this: the marker is T-1. " + "Background. " * 60


def _chain(client: openai.OpenAI, truncation: str) -> list[Any]:
    """A long first message holding the marker, a short second turn, then the question: each turn chained."""
    options: dict[str, Any] = {"model": PLAIN, "truncation": truncation}
    first = client.responses.create(input=OPENING, **options)
    second = client.responses.create(input="Noted?", previous_response_id=first.id, **options)
    third = client.responses.create(input="What is the marker?", previous_response_id=second.id, **options)
    return [first, second, third]


@pytest.fixture(scope="module")
def window() -> int:
    """A context window the second turn just fits in: its state and output together overflow it."""
    with Emulator() as unlimited, unlimited.client() as client:
        second = _chain(client, "auto")[1]
    assert second.usage is not None
    return int(second.usage.input_tokens)


def test_the_server_dropped_the_oldest_items_and_the_usage_shows_it(window: int) -> None:
    with (
        Emulator(EmulatorConfig(context_window=window)) as emulator,
        capture() as telemetry,
        emulator.client() as client,
    ):
        third = _chain(client, "auto")[2]
    assert third.output_text == "marker=unknown"  # the opening message is gone: the server dropped it
    assert chat_signals(telemetry) == [(), (), ("history_truncated",)]
    (event,) = signal_events(telemetry.chat_spans()[2], "history_truncated")
    assert event[a.SIGNAL_SEVERITY] == INFO
    assert event[a.HISTORY_SERVER_TRUNCATED] is True
    assert third.usage is not None
    held = event[a.HISTORY_HELD_TOKENS]
    assert isinstance(held, int)
    assert held > third.usage.input_tokens


def test_within_the_window_nothing_is_dropped_nor_said(window: int) -> None:
    with (
        Emulator(EmulatorConfig(context_window=window * 2)) as emulator,
        capture() as telemetry,
        emulator.client() as client,
    ):
        third = _chain(client, "auto")[2]
    assert third.output_text == "marker=T-1"
    assert chat_signals(telemetry) == [(), (), ()]


def test_without_auto_truncation_an_overflow_is_refused(window: int) -> None:
    with (
        Emulator(EmulatorConfig(context_window=window)) as emulator,
        capture() as telemetry,
        emulator.client() as client,
        pytest.raises(openai.BadRequestError) as refused,
    ):
        _chain(client, "disabled")
    assert refused.value.code == "context_length_exceeded"
    assert chat_signals(telemetry) == [(), (), ()]


def _conversation(client: openai.OpenAI, delete_opening: bool) -> Any:
    """The same three turns in a conversation; with ``delete_opening`` the app deletes the opening message from it
    before the question."""
    conversation = client.conversations.create()
    options: dict[str, Any] = {"model": PLAIN, "truncation": "auto", "conversation": conversation.id}
    client.responses.create(input=OPENING, **options)
    client.responses.create(input="Noted?", **options)
    if delete_opening:
        items = client.conversations.items.list(conversation.id, order="asc")
        opening: Any = next(item for item in items if getattr(item, "role", None) == "user")
        client.conversations.items.delete(opening.id, conversation_id=conversation.id)
    return client.responses.create(input="What is the marker?", **options)


def test_a_conversation_the_server_cut_says_so(window: int) -> None:
    with (
        Emulator(EmulatorConfig(context_window=window)) as emulator,
        capture() as telemetry,
        emulator.client() as client,
    ):
        third = _conversation(client, delete_opening=False)
    assert third.output_text == "marker=unknown"
    assert chat_signals(telemetry) == [(), (), ("history_truncated",)]


def test_items_the_app_deleted_from_a_conversation_are_no_truncation(window: int) -> None:
    """The near miss: the conversation holds fewer tokens than its latest response said, by the app's own doing."""
    with Emulator() as emulator, capture() as telemetry, emulator.client() as client:
        third = _conversation(client, delete_opening=True)
    assert third.output_text == "marker=unknown"  # the app deleted the message that held it
    assert chat_signals(telemetry) == [(), (), ()]
