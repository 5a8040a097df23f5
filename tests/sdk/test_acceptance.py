"""Acceptance tests of the troubleshooting flow (docs/troubleshooting.md): three turns per state mode done right and
done wrong, strict mode, a long session with compaction, and concurrency."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from otel_responses import ContextLossError, ResponsesInstrumentor
from otel_responses.docs_links import signal_doc_url
from otel_responses.emulator import Emulator
from otel_responses.ledger import InMemoryLedger
from otel_responses.signals import CATALOGUE, STRICT
from otel_responses.tools import scenarios as sc

from ..conftest import Captured, new_captured

LOSS = ("error", "warning")


def signals_of(spans: Any) -> list[str]:
    return [name for span in spans for name in span.attributes.get("openai_responses.signals", ())]


def loss_signals(spans: Any) -> list[str]:
    return [name for name in signals_of(spans) if CATALOGUE[name].severity in LOSS]


def per_span(spans: Any) -> list[tuple[str, ...]]:
    """The signals of each span, in the order the spans ended: exact, so a false signal anywhere shows."""
    return [tuple(span.attributes.get("openai_responses.signals", ())) for span in spans]


# What each scripted session raises, span by span (a conversation's first span is its create_conversation). Beside
# the mistake's own signal: an unstored turn of a reasoning model is not replayable; a progress update re-sent as
# text loses its phase; a replay that drops a call is incomplete as well as orphaning its output.
SCENARIO_SPANS: dict[str, list[tuple[str, ...]]] = {
    "server_chain": [(), (), (), ()],
    "conversation": [(), (), (), (), ()],
    "client_replay": [(), (), (), ()],
    "client_replay_compacted": [(), ("compaction",), ("compaction",), ("compaction",)],
    "chain_unstored_parent": [("reasoning_not_replayable",), ("unstored_parent",)],
    "chain_instructions_dropped": [(), ("instructions_dropped",), ("instructions_dropped",), ("instructions_dropped",)],
    "chain_tool_output_missing": [(), (), ("missing_tool_output",)],
    "chain_context_duplicated": [(), (), ("phase_dropped", "context_duplicated"), ()],
    "conversation_and_previous_id": [(), (), ("state_mode_conflict",)],
    "replay_output_text_only": [
        (),
        ("reasoning_dropped", "phase_dropped"),
        ("reasoning_dropped", "phase_dropped"),
        ("reasoning_dropped", "phase_dropped"),
    ],
    "replay_reasoning_altered": [(), ("encrypted_content_modified",)],
    "replay_phase_lost": [(), ("phase_dropped",), ("phase_dropped",), ("phase_dropped",)],
    "replay_tool_pair_broken": [(), (), ("replay_incomplete", "orphan_tool_output")],
    # Cutting the oldest turn also edits what every later reasoning item followed: the API withholds them.
    "replay_history_cut": [(), (), (), ("history_truncated", "reasoning_withheld")],
    # Only the user's messages and the tool call kept: both later replays continue the tool turn (a second child).
    "replay_user_messages_only": [
        (),
        ("replay_incomplete",),
        ("reasoning_dropped", "replay_incomplete"),
        ("reasoning_dropped", "replay_incomplete", "concurrent_branch"),
    ],
    # The API refuses the request that breaks its rules on replayed items: the session ends there.
    "replay_stored_reasoning_dropped": [(), ("reasoning_dropped", "reasoning_pair_broken")],
    "replay_foreign_call_ids": [(), (), ("malformed_item_id",)],
    "conversation_items_resent": [(), (), (), ("duplicate_item_id",)],
    # From the tool turn's second call on, every earlier payload was made by the other model: named before the request
    # leaves, then withheld by the API (all_turns: the model would have read it).
    "replay_model_switched": [
        (),
        (),
        ("encrypted_content_foreign", "reasoning_withheld"),
        ("encrypted_content_foreign", "reasoning_withheld"),
    ],
}


def test_every_scenario_has_its_exact_spans() -> None:
    """The table covers every scripted session, and names at least the signals its mistake must raise."""
    assert set(SCENARIO_SPANS) == {s.name for s in sc.SCENARIOS}
    for scenario in sc.SCENARIOS:
        assert set(scenario.raises) <= {name for names in SCENARIO_SPANS[scenario.name] for name in names}


@pytest.mark.parametrize("scenario", sc.SCENARIOS, ids=lambda s: s.name)
def test_scenario_done_right_or_wrong(emulator: Emulator, captured: Captured, scenario: sc.Scenario) -> None:
    transcript = sc.run(emulator.client(), scenario, "MK-31337")
    spans = captured.spans()
    assert per_span(spans) == SCENARIO_SPANS[scenario.name]
    assert set(scenario.raises) <= set(signals_of(spans))
    if scenario.mistake is None:
        assert transcript.error is None
        assert transcript.remembered == {"marker": True, "tool": True, "constraints": True, "code word": True}
        assert loss_signals(spans) == []
        assert not any((span.attributes or {})["openai_responses.context_loss"] for span in spans)
    else:
        raised = set(signals_of(spans))
        assert set(scenario.raises) <= raised
        # ... and the model's answer is visibly wrong: an API error, or a fact it no longer knows.
        assert transcript.error is not None or not all(transcript.remembered.values())
        assert any((span.attributes or {})["openai_responses.context_loss"] for span in spans)


@pytest.fixture
def strict_emulator() -> Iterator[tuple[Emulator, Captured]]:
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, strict=True)
    try:
        with Emulator() as emulator:
            yield emulator, cap
    finally:
        instrumentor.uninstrument()


STRICT_SCENARIOS = [s for s in sc.SCENARIOS if STRICT & set(s.raises)]


@pytest.mark.parametrize("scenario", STRICT_SCENARIOS, ids=lambda s: s.name)
def test_strict_mode_refuses_before_anything_is_sent(
    strict_emulator: tuple[Emulator, Captured], scenario: sc.Scenario
) -> None:
    emulator, cap = strict_emulator
    transcript = sc.run(emulator.client(), scenario, "MK-1")
    assert transcript.error == "ContextLossError"
    refused = [s for s in cap.spans() if (s.attributes or {}).get("error.type") == "ContextLossError"]
    assert len(refused) == 1
    sent = [r for r in emulator.requests if r.method == "POST" and r.path == "/v1/responses"]
    created = [s for s in cap.spans() if "gen_ai.response.id" in (s.attributes or {})]
    assert len(sent) == len(created)  # the refused request never reached the emulator


def test_strict_error_names_the_signal_and_the_fix(strict_emulator: tuple[Emulator, Captured]) -> None:
    emulator, cap = strict_emulator
    client = emulator.client()
    conversation = client.conversations.create()
    first = client.responses.create(model=sc.MODEL, input="hi")
    before = len(emulator.requests)
    with pytest.raises(ContextLossError) as info:
        client.responses.create(model=sc.MODEL, input="hi", conversation=conversation.id, previous_response_id=first.id)
    assert len(emulator.requests) == before
    error = info.value
    assert error.signal == "state_mode_conflict"
    assert error.signals == ("state_mode_conflict",)
    assert str(error).startswith("state_mode_conflict: ")
    assert "Fix: choose one state mode per session" in str(error)
    assert str(error).endswith(" See https://otel-responses.github.io/otel-responses/signals/#state_mode_conflict")
    assert error.doc_url == signal_doc_url("state_mode_conflict")
    span = cap.spans()[-1]
    assert (span.attributes or {})["openai_responses.signals"] == ("state_mode_conflict",)
    assert (span.attributes or {})["error.type"] == "ContextLossError"


def test_strict_mode_lets_warnings_through(strict_emulator: tuple[Emulator, Captured]) -> None:
    emulator, cap = strict_emulator
    transcript = sc.run(emulator.client(), sc.BY_NAME["chain_instructions_dropped"], "MK-2")
    assert transcript.error is None
    assert per_span(cap.spans()) == SCENARIO_SPANS["chain_instructions_dropped"]
    assert transcript.remembered["constraints"] is False


def test_strict_mode_from_the_environment(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_OPENAI_RESPONSES_STRICT", "true")
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    try:
        client = emulator.client()
        first = client.responses.create(model=sc.MODEL, input="hi", store=False)
        with pytest.raises(ContextLossError, match=r"^unstored_parent: "):
            client.responses.create(model=sc.MODEL, input="again", previous_response_id=first.id)
    finally:
        instrumentor.uninstrument()


# -- a long session: compaction versus cutting ---------------------------------------------------------


def long_session(client: openai.OpenAI, *, compact: bool, turns: int = 12) -> tuple[str, list[str]]:
    """A stateless session past a low compaction threshold: the app either keeps the window from the latest
    compaction item on (as the API allows), or cuts the oldest items to a fixed size (the mistake)."""
    history: list[Any] = [{"role": "user", "content": "Remember this: the marker is LONG-7."}]
    extra: dict[str, Any] = {"store": False, "include": ["reasoning.encrypted_content"]}
    if compact:
        # extra_body: the parameter is not in the oldest supported SDK's signature
        extra["extra_body"] = {"context_management": [{"type": "compaction", "compact_threshold": 120}]}
    compactions = 0
    for turn in range(turns):
        response = client.responses.create(model=sc.MODEL, input=history, **extra)
        types = [item.type for item in response.output]
        if "compaction" in types:
            compactions += 1
            history = list(response.output[types.index("compaction") :])
        else:
            history += response.output
        if not compact and len(history) > 9:
            history = history[-9:]
        history.append({"role": "user", "content": f"Turn {turn}: noted?"})
    history[-1] = {"role": "user", "content": "What is the marker?"}
    answer = client.responses.create(model=sc.MODEL, input=history, **extra).output_text
    return answer, ["compaction"] * compactions


def test_long_session_compacted_keeps_context_without_truncation_signal(emulator: Emulator, captured: Captured) -> None:
    answer, compactions = long_session(emulator.client(), compact=True)
    raised = signals_of(captured.spans())
    assert compactions, "the low threshold must trigger compaction"
    # The info signal on each call whose response compacted (the final answer's too), nothing else. (Under the
    # model's default, current_turn, no earlier turn's reasoning is rendered: the input reaches the threshold on the
    # eighth call.)
    assert per_span(captured.spans()) == [()] * 7 + [("compaction",)] * 6
    assert raised == [*compactions, "compaction"]
    assert loss_signals(captured.spans()) == []
    assert answer == "marker=LONG-7"
    compacted = [s for s in captured.spans() if (s.attributes or {})["openai_responses.compaction"]]
    assert all((s.attributes or {})["gen_ai.conversation.compacted"] is True for s in compacted)


def test_long_session_cut_raises_history_truncated(emulator: Emulator, captured: Captured) -> None:
    answer, _ = long_session(emulator.client(), compact=False)
    # Every call from the first cut on, the final question's too.
    assert per_span(captured.spans()) == [()] * 4 + [("history_truncated",)] * 9
    assert answer == "marker=unknown"


# -- concurrency ---------------------------------------------------------------------------------------

HEALTHY = [s for s in sc.SCENARIOS if s.mistake is None]


def test_threads_raise_no_false_signal(emulator: Emulator, captured: Captured) -> None:
    transcripts: list[sc.Transcript] = []
    barrier = threading.Barrier(12)

    def worker(index: int) -> None:
        client = emulator.client()
        barrier.wait()
        transcripts.append(sc.run(client, HEALTHY[index % len(HEALTHY)], f"T-{index}"))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(transcripts) == 12
    assert all(t.error is None and all(t.remembered.values()) for t in transcripts)
    spans = captured.chat_spans()
    assert len(spans) == 12 * 4
    # Only the compacted sessions' own info signal (3 sessions, on each turn after their first); not even
    # concurrent_branch: no two sessions share a parent.
    assert Counter(per_span(spans)) == {(): 12 * 4 - 3 * 3, ("compaction",): 3 * 3}


async def async_replay_session(client: openai.AsyncOpenAI, marker: str) -> str:
    extra: dict[str, Any] = {"store": False, "include": ["reasoning.encrypted_content"], "model": sc.MODEL}
    history: list[Any] = [{"role": "user", "content": f"Remember this: the marker is {marker}."}]
    first = await client.responses.create(input=history, **extra)
    history += [*first.output, {"role": "user", "content": "Please use lookup_order for order 7."}]
    await asyncio.sleep(0)  # let the other sessions interleave
    second = await client.responses.create(input=history, tools=sc.TOOLS, **extra)
    call = next(item for item in second.output if item.type == "function_call")
    history += [*second.output, {"type": "function_call_output", "call_id": call.call_id, "output": marker[::-1]}]
    await asyncio.sleep(0)
    third = await client.responses.create(input=history, tools=sc.TOOLS, **extra)
    history += [*third.output, {"role": "user", "content": "What is the marker and what did the tool return?"}]
    fourth = await client.responses.create(input=history, **extra)
    return str(fourth.output_text)


async def async_chain_session(client: openai.AsyncOpenAI, marker: str) -> str:
    first = await client.responses.create(model=sc.MODEL, input=f"Remember this: the marker is {marker}.")
    await asyncio.sleep(0)
    second = await client.responses.create(model=sc.MODEL, previous_response_id=first.id, input="Noted?")
    await asyncio.sleep(0)
    third = await client.responses.create(model=sc.MODEL, previous_response_id=second.id, input="Marker?")
    return third.output_text


def test_asyncio_tasks_raise_no_false_signal(emulator: Emulator, captured: Captured) -> None:
    async def main() -> list[str]:
        client = emulator.async_client()
        try:
            sessions = [(async_replay_session if i % 2 else async_chain_session)(client, f"A-{i}") for i in range(20)]
            return list(await asyncio.gather(*sessions))
        finally:
            await client.close()

    answers = asyncio.run(main())
    for i, answer in enumerate(answers):
        assert f"marker=A-{i}" in answer
        if i % 2:
            assert f"tool={f'A-{i}'[::-1]}" in answer
    spans = captured.spans()
    assert len(spans) == 10 * 3 + 10 * 4
    assert signals_of(spans) == []


# -- the ledger's bounds -------------------------------------------------------------------------------


def test_ledger_keeps_at_most_its_capacity_and_cleans_its_indexes(emulator: Emulator) -> None:
    ledger = InMemoryLedger(capacity=5)
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, ledger=ledger)
    try:
        client = emulator.client()
        ids = [client.responses.create(model=sc.MODEL, input=f"The marker is M{i}.").id for i in range(20)]
        assert len(ledger) == 5
        assert [e for e in (ledger.get(i) for i in ids[:15]) if e is not None] == []
        assert all(ledger.get(i) is not None for i in ids[15:])
        # 5 entries x (reasoning id + message id + message text fingerprint + the messages the turn was given)
        assert len(ledger._locations) == 20
        # An evicted parent is unknown: chaining to it raises nothing, even when it was unstored.
        unstored = client.responses.create(model=sc.MODEL, input="x", store=False)
        for i in range(5):
            client.responses.create(model=sc.MODEL, input=f"push {i}")
        cap.exporter.clear()
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=sc.MODEL, input="y", previous_response_id=unstored.id)
        assert (cap.spans()[0].attributes or {})["openai_responses.signals"] == ()
    finally:
        instrumentor.uninstrument()


def test_ledger_entry_size_does_not_grow_with_history(emulator: Emulator) -> None:
    ledger = InMemoryLedger(capacity=10)
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, ledger=ledger)
    try:
        client = emulator.client()
        small = client.responses.create(model="gpt-4.1-mini", input=[{"role": "user", "content": "a"}] * 2)
        history: Any = [{"role": "user", "content": f"message {n}"} for n in range(5000)]
        big = client.responses.create(model="gpt-4.1-mini", input=history)
    finally:
        instrumentor.uninstrument()
    small_entry, big_entry = ledger.get(small.id), ledger.get(big.id)
    assert small_entry is not None
    assert big_entry is not None
    assert len(big_entry.outputs) == len(small_entry.outputs) == 1
    assert big_entry.input_app_messages == 5000  # a count of distinct messages, not a list
    assert small_entry.input_app_messages == 1  # the same message twice is one
    assert len(big_entry.input_messages) == len(small_entry.input_messages) + 2 == 4  # the last few only
    assert {type(v) for v in vars_of(big_entry).values()} <= {str, int, bool, tuple, type(None)}


def vars_of(entry: Any) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in entry.__slots__}


def test_bad_ledger_setting_is_a_clear_error() -> None:
    from otel_responses import ConfigError

    with pytest.raises(ConfigError, match="ledger must implement"):
        ResponsesInstrumentor().instrument(ledger=object())
    with pytest.raises(ConfigError, match="ledger_capacity must be a positive integer"):
        ResponsesInstrumentor().instrument(ledger_capacity="many")
