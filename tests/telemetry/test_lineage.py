"""Turns linked across traces: each chat span links to the span of the turn it continues and carries
`openai_responses.turn` and `openai_responses.lineage.id`, in every state mode, across processes through the shared
ledger, and for a replay that skips turns; an unknown parent gives neither (never a false turn 1). The metrics carry
a turn-depth bucket."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_responses._analysis.analysis import Analysis
from otel_responses._analysis.facts import request_facts
from otel_responses._analysis.lineage import DEPTHS, Lineage, lineage_of
from otel_responses.config import ENV_PREFIX, settings_from
from otel_responses.emulator import Emulator
from otel_responses.ledger import Entry
from otel_responses.ledger.redis import RedisLedger
from otel_responses.testing import capture

from ..conftest import Captured
from ..ledger_scenarios import user
from ..shared_ledger import KEY, RedisServer
from ..support import json_from_python

MODEL = "gpt-4.1-mini"
TURN = "openai_responses.turn"
LINEAGE = "openai_responses.lineage.id"
DEPTH = "openai_responses.turn.depth"
SETTINGS = settings_from({"hash_key": "lineage-tests"})


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def ids(span: ReadableSpan) -> tuple[int, int]:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id, context.span_id


def linked(span: ReadableSpan) -> list[tuple[int, int]]:
    return [(link.context.trace_id, link.context.span_id) for link in span.links]


# -- the pure rule ----------------------------------------------------------------------------------------------


def parent(turn: int | None, lineage: str | None = "resp_1", span: tuple[int, int] | None = (5, 6)) -> Entry:
    return Entry(
        "resp_9", 1, True, None, None, (), 1, 0,
        turn=turn, lineage_id=lineage, trace_id=span[0] if span else None, span_id=span[1] if span else None,
    )  # fmt: skip


# (case, request kwargs, operation, the parent the ledger knows, expected lineage)
RULES: list[tuple[str, dict[str, Any], str, Entry | None, Lineage]] = [
    ("first_turn", {"input": "hi"}, "chat", None, Lineage(1)),
    ("chain", {"input": "hi", "previous_response_id": "resp_9"}, "chat", parent(3), Lineage(4, "resp_1", (5, 6))),
    ("chain_unknown_parent", {"input": "hi", "previous_response_id": "resp_9"}, "chat", None, Lineage()),
    ("chain_parent_turn_unknown", {"input": "hi", "previous_response_id": "resp_9"}, "chat", parent(None), Lineage()),
    ("chain_parent_without_span", {"input": "hi", "previous_response_id": "r"}, "chat", parent(1, span=None),
     Lineage(2, "resp_1")),
    ("conversation", {"input": "hi", "conversation": "conv_1"}, "chat", parent(2, "conv_1"),
     Lineage(3, "conv_1", (5, 6))),
    ("conversation_unknown", {"input": "hi", "conversation": "conv_1"}, "chat", None, Lineage(None, "conv_1")),
    ("replay", {"input": [user("a"), user("b")]}, "chat", parent(16), Lineage(17, "resp_1", (5, 6))),
    ("replay_unknown", {"input": [user("a"), user("b")]}, "chat", None, Lineage()),
    ("compact", {"input": [user("a"), user("b")]}, "compact_response", parent(2), Lineage(3, "resp_1", (5, 6))),
    ("conflict", {"input": "hi", "conversation": "c", "previous_response_id": "r"}, "chat", parent(2), Lineage()),
    ("count_tokens", {"input": "hi"}, "count_input_tokens", None, Lineage()),
]  # fmt: skip


@pytest.mark.parametrize(("case", "kwargs", "operation", "known", "expected"), RULES, ids=[r[0] for r in RULES])
def test_the_turn_follows_the_parent_the_ledger_knows(
    case: str, kwargs: dict[str, Any], operation: str, known: Entry | None, expected: Lineage
) -> None:
    req = request_facts(operation, {"model": MODEL, **kwargs}, SETTINGS)
    assert lineage_of(req, Analysis(parent=known)) == expected


@pytest.mark.parametrize(
    ("turn", "depth"), [(None, None), (1, "1"), (2, "2-4"), (4, "2-4"), (5, "5-16"), (16, "5-16"), (17, "17+")]
)
def test_turn_depth_buckets(turn: int | None, depth: str | None) -> None:
    assert Lineage(turn).depth() == depth
    assert depth is None or depth in DEPTHS


def test_a_first_turn_names_its_lineage_by_its_response() -> None:
    assert Lineage(1).of_response("resp_a") == "resp_a"
    assert Lineage(2, "resp_first").of_response("resp_b") == "resp_first"
    assert Lineage().of_response("resp_c") is None  # unknown: never starts a lineage


# -- every state mode, end to end --------------------------------------------------------------------------------


def assert_linked_turns(spans: list[ReadableSpan], lineage_id: str) -> None:
    """Turns 1, 2, 3…, one lineage id, each linking to the span of the one before (the first to none)."""
    assert [attrs(s).get(TURN) for s in spans] == list(range(1, len(spans) + 1))
    assert {attrs(s).get(LINEAGE) for s in spans} == {lineage_id}
    assert linked(spans[0]) == []
    for before, after in itertools.pairwise(spans):
        assert linked(after) == [ids(before)]
        assert ids(after)[0] != ids(before)[0]  # each turn its own trace: the link is what joins them


def test_server_chain_turns_link(client: openai.OpenAI, captured: Captured) -> None:
    first = client.responses.create(model=MODEL, input="Remember: M-1.")
    second = client.responses.create(model=MODEL, input="And?", previous_response_id=first.id)
    client.responses.create(model=MODEL, input="The marker?", previous_response_id=second.id)
    assert_linked_turns(captured.chat_spans(), first.id)


def test_conversation_turns_link(client: openai.OpenAI, captured: Captured) -> None:
    conversation = client.conversations.create()
    for text in ("Remember: M-2.", "And?", "The marker?"):
        client.responses.create(model=MODEL, input=text, conversation=conversation.id)
    assert_linked_turns(captured.chat_spans(), conversation.id)


def test_client_replay_turns_link_and_a_replay_that_skips_turns(client: openai.OpenAI, captured: Captured) -> None:
    history: list[Any] = [user("Remember: M-3.")]
    first = client.responses.create(model=MODEL, input=history, store=False)
    history += [*first.output, user("And?")]
    second = client.responses.create(model=MODEL, input=history, store=False)
    history += [*second.output, user("The marker?")]
    third = client.responses.create(model=MODEL, input=history, store=False)
    spans = captured.chat_spans()
    assert_linked_turns(spans, first.id)
    # Turn 2's output left out: the latest response the replay carries is turn 3, so this is turn 4.
    skipping = [user("Remember: M-3."), *first.output, user("The marker?"), *third.output, user("Again?")]
    client.responses.create(model=MODEL, input=skipping, store=False)
    last = captured.chat_spans()[-1]
    assert attrs(last)[TURN] == 4
    assert attrs(last)[LINEAGE] == first.id
    assert linked(last) == [ids(spans[2])]


def test_an_unknown_parent_gives_no_turn_and_no_lineage(client: openai.OpenAI) -> None:
    made_elsewhere = client.responses.create(model=MODEL, input="hi")  # the instrumentation is off: never seen
    with capture() as cap:
        client.responses.create(model=MODEL, input="and?", previous_response_id=made_elsewhere.id)
    (span,) = cap.chat_spans()
    assert TURN not in attrs(span)
    assert LINEAGE not in attrs(span)
    assert linked(span) == []
    (calls,) = cap.metric_points("openai_responses.calls")
    assert DEPTH not in calls.attributes


def test_calls_and_signals_carry_the_turn_depth(client: openai.OpenAI, captured: Captured) -> None:
    response = client.responses.create(model=MODEL, input="Remember: M-4.", instructions="Be brief.")
    for _ in range(4):
        response = client.responses.create(model=MODEL, input="And?", previous_response_id=response.id)
    depths: dict[str, int] = {}
    for point in captured.metric_points("openai_responses.calls"):
        if point.attributes.get("gen_ai.operation.name") == "chat":
            depths[point.attributes[DEPTH]] = depths.get(point.attributes[DEPTH], 0) + point.value
    assert depths == {"1": 1, "2-4": 3, "5-16": 1}
    # Every turn after the first runs without the instructions turn 1 had: each is named, at its own depth.
    signals = {
        (point.attributes["openai_responses.signal.name"], point.attributes[DEPTH]): point.value
        for point in captured.metric_points("openai_responses.signals")
    }
    assert signals == {("instructions_dropped", "2-4"): 3, ("instructions_dropped", "5-16"): 1}


# -- across processes, through the shared ledger -----------------------------------------------------------------

PROCESS_A = """
import json, sys
import openai
from otel_responses.testing import capture

client = openai.OpenAI(base_url=sys.argv[1], api_key="emulator-key", max_retries=0)
with capture() as cap:  # the ledger URL and hash key come from the environment
    first = client.responses.create(model="gpt-4.1-mini", input="Remember: M-5.")
    second = client.responses.create(model="gpt-4.1-mini", input="And?", previous_response_id=first.id)
span = cap.chat_spans()[-1].get_span_context()
print(json.dumps({"first": first.id, "second": second.id, "trace": span.trace_id, "span": span.span_id}))
"""


def test_a_turn_served_by_another_process_links_back(
    redis_server: RedisServer, emulator: Emulator, client: openai.OpenAI
) -> None:
    url = redis_server.url(db=4)
    with redis_server.client(db=4) as admin:
        admin.flushdb()
    env = {**os.environ, f"{ENV_PREFIX}LEDGER_URL": url, f"{ENV_PREFIX}HASH_KEY": KEY}
    a = json_from_python(PROCESS_A, emulator.base_url, env=env)

    ledger = RedisLedger(url)
    try:
        with capture(ledger=ledger, hash_key=KEY) as cap:
            client.responses.create(model=MODEL, input="The marker?", previous_response_id=a["second"])
    finally:
        ledger.close(1)
    (span,) = cap.chat_spans()
    assert attrs(span)[TURN] == 3
    assert attrs(span)[LINEAGE] == a["first"]
    assert linked(span) == [(a["trace"], a["span"])]


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object printed in ``text`` (the console exporter's spans, between other output)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        index = text.find("{", end)
    return found


def test_the_demo_console_prints_linked_turns() -> None:
    command = Path(sys.executable).with_name("otel-responses")
    done = subprocess.run([command, "demo", "--console"], capture_output=True, text=True, timeout=120, check=False)
    spans = [s for s in _json_objects(done.stdout) if "context" in s and "links" in s]
    by_id = {s["context"]["span_id"]: s for s in spans}
    links = [(s, link["context"]) for s in spans for link in s["links"]]
    assert len(links) >= 10, len(links)
    for span, target in links:
        parent = by_id[target["span_id"]]  # every link leads to a span the demo printed: the turn before
        assert parent["context"]["trace_id"] == target["trace_id"] != span["context"]["trace_id"]
        assert span["attributes"]["openai_responses.turn"] == parent["attributes"]["openai_responses.turn"] + 1
        assert span["attributes"]["openai_responses.lineage.id"] == parent["attributes"]["openai_responses.lineage.id"]
