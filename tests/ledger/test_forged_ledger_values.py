"""Values in the shared ledger that nobody vouches for: anyone who can write to the shared Redis without the hash
key, one key per victim. Sealed with a guessed key or not sealed at all, a forged fact is ignored and counted, and no
signal is raised. The same value sealed with the fleet's key (a writer holding it) is read: the proof each scenario
does raise its signal when the fact is believed. An older genuine value put back raises what it says, but strict mode
never refuses on it. Against a real `redis-server` on 127.0.0.1, a single node and a Redis Cluster (``store``).
"""

from __future__ import annotations

import json
import time
from typing import Any

import openai
import pytest

from otel_responses._fingerprint import Fingerprinter, key_from_text
from otel_responses._items import ItemMeta, payload_shape
from otel_responses.ledger import Entry
from otel_responses.ledger._codec import Codec, entry_fields
from otel_responses.ledger.redis import RedisLedger
from otel_responses.testing import CapturedTelemetry, capture

from ..ledger_scenarios import ENCRYPTED, INSTRUCTIONS, MODEL, REASONING_MODEL, TOOLS, replay, tool_request
from ..shared_ledger import KEY, RedisServer, Store, new_ledger
from ..support import chat_signals, function_call

GUESSED = Codec(Fingerprinter(key_from_text("an attacker's guess at the fleet key")))
GENUINE = Codec(Fingerprinter(key_from_text(KEY)))
# How the value is written, and what it is counted as when read (None: believed, a writer holding the key).
FORGERS = [
    pytest.param("guessed", "forged", id="sealed-with-a-guessed-key"),
    pytest.param("unsealed", "undecodable", id="not-sealed"),
    pytest.param("genuine", None, id="sealed-with-the-fleet-key"),
]


def forge(admin: Any, how: str, key: str, content: bytes) -> None:
    """Plant ``content`` under ``key`` as a writer without the hash key can (``genuine``: as one holding it)."""
    if how == "unsealed":
        admin.set(key, content)
    else:
        admin.set(key, (GUESSED if how == "guessed" else GENUINE).seal(key, content))


def forged_entry(entry: Entry) -> bytes:
    return json.dumps(entry_fields(entry), separators=(",", ":")).encode()


def forged_ledger(ledgers: list[RedisLedger], store: Store) -> RedisLedger:
    ledger = new_ledger(ledgers, store.url, **store.options)
    ledger.bind(Fingerprinter(key_from_text(KEY)))
    return ledger


def assert_ignored(ledger: RedisLedger, cap: CapturedTelemetry, count: str | None, signal: str) -> None:
    if count is None:  # genuine: the fact is believed
        assert chat_signals(cap) == [(signal,)]
        return
    assert chat_signals(cap) == [()]
    other = {"forged": "undecodable", "undecodable": "forged"}[count]
    assert (ledger.stats()[count] >= 1, ledger.stats()[other]) == (True, 0)


@pytest.mark.parametrize(("how", "count"), FORGERS)
def test_a_forged_unstored_parent_raises_nothing(
    how: str,
    count: str | None,
    store: Store,
    client: openai.OpenAI,
    ledgers: list[RedisLedger],
) -> None:
    """`r:<id>` with store=0: a false `unstored_parent` (refused in strict mode) on a parent that was stored."""
    with capture(hash_key=KEY):
        parent = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
    ledger = forged_ledger(ledgers, store)
    key = f"{ledger.namespace}:{{{parent.id}}}:r"
    with store.admin() as admin:
        forge(admin, how, key, forged_entry(Entry(parent.id, 1, False, None, None, (), 1, 0)))
    with capture(ledger=ledger, hash_key=KEY) as cap:
        client.responses.create(model=MODEL, input="Again.", previous_response_id=parent.id, instructions=INSTRUCTIONS)
    assert_ignored(ledger, cap, count, "unstored_parent")
    if count is None:
        entry = ledger.get(parent.id)
        assert entry is not None
        assert entry.shared is True  # read from a shared store: strict mode never refuses on it


@pytest.mark.parametrize(("how", "count"), FORGERS)
def test_a_forged_pending_call_in_a_conversation_raises_nothing(
    how: str,
    count: str | None,
    store: Store,
    client: openai.OpenAI,
    ledgers: list[RedisLedger],
) -> None:
    """`c:<conversation>` naming a turn with a call pending: a false `missing_tool_output` on the next turn."""
    conversation = client.conversations.create()
    ledger = forged_ledger(ledgers, store)
    call = ItemMeta("function_call", "fc_forged", "call_forged", None, None, False, None, True)
    turn = Entry("resp_forged", time.time_ns(), True, None, conversation.id, (call,), 1, 0)
    with store.admin() as admin:
        forge(admin, how, f"{ledger.namespace}:{{{conversation.id}}}:c", forged_entry(turn))
    with capture(ledger=ledger, hash_key=KEY) as cap:
        client.responses.create(model=MODEL, input="Hello.", conversation=conversation.id)
    # Believed, the pending call rests on the conversation's latest turn: when the API accepts the request, it is
    # dropped as stale rather than recorded. Ignored, it is counted.
    assert chat_signals(cap) == [()]
    if count is not None:
        assert ledger.stats()[count] >= 1


@pytest.mark.parametrize(("how", "count"), FORGERS)
def test_a_forged_item_location_raises_nothing(
    how: str,
    count: str | None,
    store: Store,
    client: openai.OpenAI,
    ledgers: list[RedisLedger],
) -> None:
    """`i:<reasoning item>` pointing to a made-up entry whose payload had another length: a false
    `encrypted_content_modified` on a replay that sends the payload unchanged."""
    with capture(hash_key=KEY):
        first = client.responses.create(
            model=REASONING_MODEL, input=[tool_request()], store=False, include=ENCRYPTED, tools=TOOLS
        )
    output = [item.model_dump(mode="json", exclude_none=True) for item in first.output]
    reasoning = output[0]
    shape = payload_shape(reasoning["encrypted_content"] + "QUJD")
    item = ItemMeta("reasoning", reasoning["id"], None, None, None, True, None, False, shape)
    made_up = Entry("resp_forged", 1, False, None, None, (item,), 1, 0)
    ledger = forged_ledger(ledgers, store)
    ns = ledger.namespace
    with store.admin() as admin:
        forge(admin, how, f"{ns}:{{{reasoning['id']}}}:i", b"0:resp_forged")
        forge(admin, how, f"{ns}:{{resp_forged}}:r", forged_entry(made_up))
    with capture(ledger=ledger, hash_key=KEY) as cap:
        replay(client, "whole", output)
    assert_ignored(ledger, cap, count, "encrypted_content_modified")


@pytest.mark.parametrize(("how", "count"), FORGERS)
def test_a_forged_parent_without_the_call_raises_no_orphan_tool_output(
    how: str,
    count: str | None,
    store: Store,
    client: openai.OpenAI,
    ledgers: list[RedisLedger],
) -> None:
    """`r:<parent>` without the call the app answers: a false `orphan_tool_output` (refused in strict mode). Believed,
    the entry lists no held calls: the state beyond its own output items is unknown, so an output whose call is not
    among them is no orphan either."""
    with capture(hash_key=KEY):
        parent = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    call = next(item for item in parent.output if item.type == "function_call")
    ledger = forged_ledger(ledgers, store)
    text = ItemMeta("message", "msg_forged", None, "assistant", None, False)
    made_up = Entry(parent.id, 1, True, None, None, (text,), 1, 0)
    with store.admin() as admin:
        forge(admin, how, f"{ledger.namespace}:{{{parent.id}}}:r", forged_entry(made_up))
    with capture(ledger=ledger, hash_key=KEY) as cap:
        client.responses.create(
            model=MODEL,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}],
            previous_response_id=parent.id,
            tools=TOOLS,
        )
    if count is not None:
        assert_ignored(ledger, cap, count, "orphan_tool_output")
        return
    assert chat_signals(cap) == [()]
    read = ledger.get(parent.id)
    assert read is not None
    assert (read.outputs, read.shared, read.held_partial) == ((text,), True, True)  # believed, and says no more


def test_a_forged_continued_marker_is_ignored(store: Store, ledgers: list[RedisLedger]) -> None:
    """`k:<id>`: a false `concurrent_branch` on the next child of that response."""
    ledger = forged_ledger(ledgers, store)
    with store.admin() as admin:
        forge(admin, "guessed", f"{ledger.namespace}:{{resp_lonely}}:k", b"1")
        forge(admin, "unsealed", f"{ledger.namespace}:{{resp_lonely_2}}:k", b"1")
        forge(admin, "genuine", f"{ledger.namespace}:{{resp_continued}}:k", b"1")  # near miss: believed
    assert ledger.has_child("resp_lonely") is False
    assert ledger.has_child("resp_lonely_2") is False
    assert ledger.has_child("resp_continued") is True
    assert (ledger.stats()["forged"], ledger.stats()["undecodable"]) == (1, 1)


# -- an older genuine value put back -----------------------------------------------------------------------


def test_strict_mode_never_refuses_on_a_stale_fact_read_from_redis(
    redis_server: RedisServer, client: openai.OpenAI
) -> None:
    """A writer without the key can put back an older genuine value: the conversation's pointer to the turn whose
    tool call has since been answered. The next turn then looks like it leaves the call unanswered: the signal is
    recorded (marked as resting on the shared ledger), but the request, which the API accepts, is not refused."""
    url = redis_server.url(db=3)
    with redis_server.client(db=3) as admin:
        admin.flushdb()
        writer = RedisLedger(url)
        with capture(ledger=writer, hash_key=KEY):
            conversation = client.conversations.create()
            asked = client.responses.create(
                model=MODEL, conversation=conversation.id, input="Please use lookup_order for order 7.", tools=TOOLS
            )
            call = function_call(asked)
            assert writer.flush(5)
            (pointer,) = admin.scan_iter(match=f"*:{{{conversation.id}}}:c")
            stale = admin.get(pointer)
            client.responses.create(
                model=MODEL,
                conversation=conversation.id,
                input=[{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}],
                tools=TOOLS,
            )
            assert writer.flush(5)
        writer.close(1)
        admin.set(pointer, stale, keepttl=True)  # an older genuine value put back

        reader = RedisLedger(url)  # another process: knows nothing locally
        try:
            with capture(ledger=reader, hash_key=KEY, strict=True) as cap:
                answer = client.responses.create(
                    model=MODEL, conversation=conversation.id, input="Thanks. What did it say?", tools=TOOLS
                )
        finally:
            reader.close(1)
    assert answer.status == "completed"  # not refused: the API accepts it
    (span,) = cap.chat_spans()
    # The stale turn looked unanswered; the API's acceptance proves it was answered: no false error is recorded.
    assert (span.attributes or {})["openai_responses.signals"] == ()
