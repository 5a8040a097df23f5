"""Spans into conversations: turns in order whatever the clocks say, gaps where turns are missing, a conversation
served by two processes, branches, the instructions hash marked where it changes or is gone, and the order of the
summary. The spans come from the real instrumentation (real client, emulator, SDK); only their selection, order and
times are changed here, as sampling, exporters and clocks change them."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

import openai
import pytest

from otel_responses import attributes as a
from otel_responses.testing import capture
from otel_responses.tools import scenarios
from otel_responses.tools.report import from_sdk
from otel_responses.tools.report.model import (
    CHANGED,
    CONTINUES,
    DROPPED,
    FIRST,
    LINEAGE,
    NONE,
    SAME,
    Call,
    Conversation,
    Gap,
    conversations,
)
from otel_responses.tools.report.records import EventRecord, SpanRecord

MODEL = "gpt-5.4"


def _run(emulator: Any, name: str) -> list[SpanRecord]:
    client = emulator.client()
    try:
        with capture() as telemetry:
            scenarios.run(client, scenarios.BY_NAME[name], f"MK-{name}")
        return list(from_sdk(telemetry.spans()))
    finally:
        client.close()


@pytest.fixture(scope="module")
def chain(emulator: Any) -> list[SpanRecord]:
    """Four turns of a healthy server chain."""
    records = _run(emulator, "server_chain")
    assert [r.number(a.TURN) for r in records] == [1, 2, 3, 4]
    return records


def _shape(conversation: Conversation) -> list[Any]:
    return [(e.turn, e.turn_inferred) if isinstance(e, Call) else (e.first, e.last) for e in conversation.entries]


def _only(records: list[SpanRecord]) -> Conversation:
    (conversation,) = conversations(records)
    return conversation


def test_turns_follow_their_numbers_not_the_clocks_nor_the_file(chain: list[SpanRecord]) -> None:
    # Each turn from another host: turn 3's clock an hour behind, the file in the order the exporters flushed.
    skewed = [dataclasses.replace(chain[2], start_ns=chain[2].start_ns - 3600 * 10**9), *chain[:2][::-1], chain[3]]
    conversation = _only(skewed)
    assert [e.span.span_id for e in conversation.calls] == [r.span_id for r in chain]
    assert conversation.gaps == []
    assert (conversation.kind, conversation.key) == (LINEAGE, chain[0].text(a.GEN_AI_RESPONSE_ID))


@pytest.mark.parametrize(
    ("dropped", "shape"),
    [
        ((1,), [(1, False), (2, 2), (3, False), (4, False)]),
        ((0,), [(1, 1), (2, False), (3, False), (4, False)]),
        ((1, 2), [(1, False), (2, 3), (4, False)]),
        ((3,), [(1, False), (2, False), (3, False)]),  # the last turn missing: nothing says it was there
    ],
    ids=["turn 2", "turn 1", "turns 2-3", "turn 4"],
)
def test_a_turn_missing_from_the_input_is_a_gap(
    chain: list[SpanRecord], dropped: tuple[int, ...], shape: list[Any]
) -> None:
    kept = [r for i, r in enumerate(chain) if i not in dropped]
    conversation = _only(kept)
    assert _shape(conversation) == shape
    # A turn whose linked span is missing says so.
    assert [c.link_missing for c in conversation.calls] == [
        any(link not in {(r.trace_id, r.span_id) for r in kept} for link in r.links) for r in kept
    ]


def test_a_conversation_served_by_two_processes_is_one(emulator: Any) -> None:
    """Turns 1-2 in one process, 3-4 in another that never saw turn 2 (no shared ledger): the second process's
    spans carry neither turn nor lineage, yet continue the first's responses."""
    client: openai.OpenAI = emulator.client()
    try:
        with capture() as first:
            one = client.responses.create(model=MODEL, input="Remember this: the marker is M-2.")
            two = client.responses.create(model=MODEL, input="Choose a code word.", previous_response_id=one.id)
        with capture() as second:
            three = client.responses.create(model=MODEL, input="And?", previous_response_id=two.id)
            client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=three.id)
    finally:
        client.close()
    ours = [dataclasses.replace(r, service="web") for r in from_sdk(first.spans())]
    theirs = [dataclasses.replace(r, service="worker") for r in from_sdk(second.spans())]
    assert [r.number(a.TURN) for r in theirs] == [None, None]
    assert [r.text(a.LINEAGE_ID) for r in theirs] == [None, None]
    conversation = _only([*theirs, *ours])
    assert _shape(conversation) == [(1, False), (2, False), (3, True), (4, True)]
    assert conversation.services == ["web", "worker"]
    assert conversation.key == one.id
    # Without the first process's spans: one conversation, named by the response it continues.
    alone = _only(theirs)
    assert (alone.kind, alone.key) == (CONTINUES, two.id)
    assert _shape(alone) == [(None, False), (None, False)]


def test_two_calls_continuing_one_turn_are_branches(emulator: Any) -> None:
    client: openai.OpenAI = emulator.client()
    try:
        with capture() as telemetry:
            root = client.responses.create(model=MODEL, input="Remember this: the marker is M-3.")
            client.responses.create(model=MODEL, input="One way", previous_response_id=root.id)
            client.responses.create(model=MODEL, input="Another way", previous_response_id=root.id)
    finally:
        client.close()
    conversation = _only(list(from_sdk(telemetry.spans())))
    assert [(c.turn, c.branch) for c in conversation.calls] == [(1, False), (2, True), (2, True)]
    assert [s.name for s in conversation.signals] == ["concurrent_branch"]


def test_the_instructions_hash_is_marked_where_it_changes_or_is_gone(emulator: Any) -> None:
    client: openai.OpenAI = emulator.client()
    turns = ["Be brief.", "Be brief.", None, "Be verbose.", None]
    try:
        with capture() as telemetry:
            previous: str | None = None
            for number, instructions in enumerate(turns):
                extra: dict[str, Any] = {"instructions": instructions} if instructions else {}
                previous = client.responses.create(
                    model=MODEL, input=f"Turn {number}.", previous_response_id=previous, **extra
                ).id
    finally:
        client.close()
    conversation = _only(list(from_sdk(telemetry.spans())))
    assert [c.instructions for c in conversation.calls] == [FIRST, SAME, DROPPED, CHANGED, DROPPED]
    assert [[s.name for s in c.signals] for c in conversation.calls] == [
        [],
        [],
        ["instructions_dropped"],
        [],  # the signal compares with the parent, which sent none; the page with the latest that did
        ["instructions_dropped"],
    ]
    hashes = [c.span.text(a.INSTRUCTIONS_HASH) for c in conversation.calls]
    assert hashes[0] == hashes[1] != hashes[3]
    assert hashes[2] is None
    # A conversation that never had instructions marks none.
    bare = [dataclasses.replace(c.span, attributes=_without_hash(c.span)) for c in conversation.calls]
    assert [c.instructions for c in _only(bare).calls] == [NONE] * len(bare)


def _without_hash(record: SpanRecord) -> dict[str, Any]:
    return {k: v for k, v in record.attributes.items() if k != a.INSTRUCTIONS_HASH}


def test_conversations_are_ordered_by_the_context_they_lost(emulator: Any) -> None:
    names = ["server_chain", "replay_phase_lost", "chain_unstored_parent", "client_replay_compacted"]
    records = [r for name in names for r in _run(emulator, name)]
    found = conversations(records, labels={})
    summary = [(c.count("error"), c.count("warning"), c.count("info")) for c in found]
    assert summary == [(1, 1, 0), (0, 3, 0), (0, 0, 3), (0, 0, 0)]
    assert [c.first_loss.turn if c.first_loss else None for c in found] == [1, 2, None, None]


def test_a_signal_listed_without_its_event_is_still_shown(chain: list[SpanRecord]) -> None:
    """An event dropped (a span's event limit): the name in the span's signal list is enough, with the catalogue's
    severity; an event's own severity and metadata are shown as they are."""
    event = EventRecord(
        a.SIGNAL_EVENT,
        0,
        {a.SIGNAL_NAME: "history_truncated", a.SIGNAL_SEVERITY: "warning", "openai_responses.history.app_messages": 1},
    )
    with_signals: Callable[[SpanRecord], SpanRecord] = lambda r: dataclasses.replace(  # noqa: E731
        r,
        attributes={**r.attributes, a.SIGNALS: ("history_truncated", "unstored_parent", "from_a_newer_release")},
        events=(event,),
    )
    (call, *_) = _only([with_signals(chain[0]), *chain[1:]]).calls
    assert [(s.name, s.severity, s.detail, s.known) for s in call.signals] == [
        ("history_truncated", "warning", (("history.app_messages", 1),), True),
        ("unstored_parent", "error", (), True),
        ("from_a_newer_release", "unknown", (), False),
    ]


def test_labels_caption_conversations(chain: list[SpanRecord]) -> None:
    key = chain[0].text(a.GEN_AI_RESPONSE_ID)
    assert key is not None
    (conversation,) = conversations(chain, labels={key: "checkout flow"})
    assert conversation.label == "checkout flow"
    assert isinstance(conversation.entries[0], Call)
    assert not isinstance(conversation.entries[0], Gap)


# -- one lineage id, several runs ---------------------------------------------------------------------------------


def _quick_start_run(parent_span: bool = False) -> list[SpanRecord]:
    """The quick start's app once against a freshly started emulator, whose ids start over on every start: two
    turns, the second chained to the first without its instructions. ``parent_span``: both calls in one trace."""
    from otel_responses.emulator import Emulator

    with Emulator() as fresh, capture() as telemetry:
        client: openai.OpenAI = fresh.client()
        try:
            run = telemetry.tracer_provider.get_tracer("app").start_as_current_span("run")
            with run if parent_span else contextlib.nullcontext():
                first = client.responses.create(
                    model="gpt-5-mini", instructions="Answer in one line.", input="Remember this: the marker is M-1."
                )
                client.responses.create(model="gpt-5-mini", previous_response_id=first.id, input="What is the marker?")
        finally:
            client.close()
        return list(from_sdk(telemetry.spans()))


def _unlinked(records: list[SpanRecord]) -> list[SpanRecord]:
    return [dataclasses.replace(r, links=()) for r in records]


def test_two_runs_against_a_restarted_emulator_are_two_conversations() -> None:
    """The same lineage id, response ids and turn numbers in both runs: told apart by each second turn's link to
    the span it continues (every call a trace of its own here)."""
    one, two = _quick_start_run(), _quick_start_run()
    assert [r.text(a.GEN_AI_RESPONSE_ID) for r in one] == [r.text(a.GEN_AI_RESPONSE_ID) for r in two]
    assert len({r.trace_id for r in one + two}) == 4
    found = conversations(two + one)  # the file's order does not matter
    assert [(c.kind, c.key, c.run, c.note) for c in found] == [
        (LINEAGE, one[0].text(a.GEN_AI_RESPONSE_ID), (1, 2), None),
        (LINEAGE, one[0].text(a.GEN_AI_RESPONSE_ID), (2, 2), None),
    ]
    assert [[c.span.span_id for c in conversation.calls] for conversation in found] == [
        [r.span_id for r in one],
        [r.span_id for r in two],
    ]
    assert [[(c.turn, c.branch) for c in conversation.calls] for conversation in found] == [
        [(1, False), (2, False)]
    ] * 2
    assert [[s.name for s in conversation.signals] for conversation in found] == [["instructions_dropped"]] * 2
    # Its near miss: one run is one conversation, not split.
    assert [(c.run, c.note) for c in conversations(one)] == [(None, None)]


def test_runs_without_links_are_told_apart_by_their_traces() -> None:
    one, two = _quick_start_run(parent_span=True), _quick_start_run(parent_span=True)
    found = conversations(_unlinked(one + two))
    assert [([c.span.span_id for c in x.calls], x.run, x.note) for x in found] == [
        ([r.span_id for r in one], (1, 2), None),
        ([r.span_id for r in two], (2, 2), None),
    ]


def test_a_turn_no_link_nor_trace_ties_to_a_run_is_placed_by_time_and_said() -> None:
    """Without links, every call a trace of its own: the second turns are placed in the run of the latest first
    turn before them, and each run says so."""
    one, two = _quick_start_run(), _quick_start_run()
    found = conversations(_unlinked(one + two))
    assert [[c.span.span_id for c in x.calls] for x in found] == [[r.span_id for r in one], [r.span_id for r in two]]
    assert [x.note for x in found] == [
        "1 call of this lineage id (shared by 2 runs: the server's ids repeat) links to no turn in the input: placed "
        "in this run by time"
    ] * 2
    # Two first turns in one trace: nothing tells them apart, one conversation whose first turns are branches.
    same_trace = [dataclasses.replace(r, trace_id=one[0].trace_id) for r in _unlinked(one + two)]
    (whole,) = conversations(same_trace)
    assert (whole.run, whole.note, [(c.turn, c.branch) for c in whole.calls]) == (
        None,
        None,
        [(1, True), (1, True), (2, True), (2, True)],
    )
