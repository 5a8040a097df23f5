"""The Redis-backed shared ledger, against a real `redis-server` on 127.0.0.1 started here.

Two OS processes (a subprocess and this one) share one Redis and the real `openai` client talks to the emulator:
checks that need a parent created in the other process raise what they raise in one process. Redis stopped or
hung mid-run never reaches the app nor slows a call past the read timeout, the span says the ledger was
unavailable, and checks resume when Redis is back. Entries expire; nothing in Redis holds a planted secret. What a
value forged in Redis can and cannot do: tests/ledger/test_forged_ledger_values.py.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import openai
import pytest
import redis

from otel_responses import ConfigError, ContextLossError, ResponsesInstrumentor
from otel_responses._fingerprint import Fingerprinter, key_from_text
from otel_responses.attributes import LEDGER_UNAVAILABLE
from otel_responses.config import ENV_PREFIX, settings_from
from otel_responses.emulator import Emulator
from otel_responses.ledger import MAX_OUTPUT_ITEMS, Entry, InMemoryLedger
from otel_responses.ledger._codec import Codec, conversation_key, decode_entry, encode_entry, entry_key, location_key
from otel_responses.ledger.redis import RedisLedger
from otel_responses.signals import SHARED_FACT
from otel_responses.testing import capture
from otel_responses.version import install_hint

from ..corpus import EMULATOR_SAFE_UNITS, PARAMS, WINDOW, Secrets, client_kwargs, emulator_session
from ..ledger_scenarios import (
    INSTRUCTIONS,
    MODEL,
    REASONING_MODEL,
    REPLAYS,
    TOOL_NAME,
    TOOLS,
    first_turns,
    tool_request,
    user,
)
from ..shared_ledger import (
    KEY,
    OTHER_KEY,
    RedisServer,
    Store,
    all_keys,
    chain_turns,
    chained,
    entry_with_calls,
    new_ledger,
    replay_turns,
)
from ..support import attrs, chat_signals, closing, free_port

# -- two OS processes ----------------------------------------------------------------------------------------


def test_two_processes_raise_unstored_parent_and_instructions_dropped(
    process_a: dict[str, Any], client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    ledger = new_ledger(ledgers, process_a["url"], **process_a["options"])
    with capture(ledger=ledger, hash_key=KEY) as cap:
        raised = chain_turns(client, process_a, cap)
    assert raised == {"unstored": ("unstored_parent",), "instructions": ("instructions_dropped",)}
    unstored, dropped = cap.chat_spans()
    assert LEDGER_UNAVAILABLE not in attrs(unstored)
    assert LEDGER_UNAVAILABLE not in attrs(dropped)
    assert ledger.stats()["reads"] >= 2


def test_replay_across_processes_is_analysed_as_in_one(
    process_a: dict[str, Any], client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    # The same turns in one process, in-process ledger: what B must match.
    with capture(hash_key=KEY) as one:
        alone = replay_turns(client, first_turns(client), one)
    assert alone == REPLAYS
    ledger = new_ledger(ledgers, process_a["url"], **process_a["options"])
    with capture(ledger=ledger, hash_key=KEY) as cap:
        across = replay_turns(client, process_a, cap)
    assert across == alone
    assert not [span for span in cap.spans() if LEDGER_UNAVAILABLE in attrs(span)]


# -- strict mode on a shared parent ---------------------------------------------------------------------------


def _chained_tool_requests(pending: str) -> dict[str, list[dict[str, Any]]]:
    """Turns chained to a parent with the call ``pending``: what each one's input proves by itself."""
    own_call = {"type": "function_call", "call_id": "call_own", "name": TOOL_NAME, "arguments": "{}"}
    own_output = {"type": "function_call_output", "call_id": "call_own", "output": "x"}
    answer = {"type": "function_call_output", "call_id": pending, "output": "shipped"}
    return {
        "tool_output_before_call": [answer, own_output, own_call],  # the input's own order
        "missing_tool_output": [answer, own_call],  # the input's own call, left unanswered
        "missing_tool_output on the parent": [user("next")],  # rests on the shared parent: recorded, never refused
    }


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_strict_mode_refuses_what_a_chained_request_proves_whatever_its_shared_parent(
    store: Store, emulator: Emulator, client: openai.OpenAI, ledgers: list[RedisLedger], asynchronous: bool
) -> None:
    """Worker A makes the parent, worker B chains to it (the parent read from the shared store). Strict mode in B
    refuses, before sending, what B's own input proves; what rests on the shared parent alone is sent and recorded."""
    a = new_ledger(ledgers, store.url, **store.options)
    with capture(ledger=a, hash_key=KEY):
        parent = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
    assert a.flush(5)
    pending = next(item.call_id for item in parent.output if item.type == "function_call")
    b = new_ledger(ledgers, store.url, **store.options)
    refused: dict[str, str | None] = {}
    with capture(ledger=b, hash_key=KEY, strict=True) as cap:
        for case, items in _chained_tool_requests(pending).items():
            sent = len(emulator.requests)
            kwargs: dict[str, Any] = {"model": MODEL, "input": items, "previous_response_id": parent.id, "tools": TOOLS}
            try:
                if asynchronous:
                    asyncio.run(_create_async(emulator, kwargs))
                else:
                    client.responses.create(**kwargs)
                refused[case] = None
            except ContextLossError as error:
                refused[case] = error.signal
                assert len(emulator.requests) == sent, case  # refused before sending
            except openai.BadRequestError:
                refused[case] = None  # sent: the API refused it itself
    assert refused == {
        "tool_output_before_call": "tool_output_before_call",
        "missing_tool_output": "missing_tool_output",
        "missing_tool_output on the parent": None,
    }
    spans = cap.chat_spans()
    assert [tuple(attrs(span)["openai_responses.signals"]) for span in spans] == [
        ("tool_output_before_call",),
        ("missing_tool_output",),
        ("missing_tool_output",),
    ]
    shared = [
        [(event.attributes or {}).get(SHARED_FACT) for event in span.events if event.name == "openai_responses.signal"]
        for span in spans
    ]
    assert shared == [[None], [None], [True]]
    assert b.stats()["reads"] >= 1  # the parent came from the shared store


def test_a_duplicate_id_resting_on_a_shared_entry_is_raised_never_refused(
    store: Store, emulator: Emulator, client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    """Worker A writes a turn to a conversation; worker B, in strict mode, re-sends that turn's items under their ids
    beside the conversation. Only the shared entry says the conversation holds them: raised (the API then refuses
    it), never refused. One id twice in B's own input is refused before sending, whatever the ledger holds."""
    a = new_ledger(ledgers, store.url, **store.options)
    conversation = client.conversations.create().id
    with capture(ledger=a, hash_key=KEY):
        first: Any = client.responses.create(model=MODEL, input="Remember: M-1.", conversation=conversation)
    assert a.flush(5)
    b = new_ledger(ledgers, store.url, **store.options)
    with capture(ledger=b, hash_key=KEY, strict=True) as cap:
        with pytest.raises(openai.BadRequestError, match="Duplicate item found"):
            client.responses.create(model=MODEL, conversation=conversation, input=[*first.output, user("And?")])
        said: Any = {"type": "message", "id": "msg_4", "role": "assistant", "content": "Noted."}
        sent = len(emulator.requests)
        with pytest.raises(ContextLossError) as refused:
            client.responses.create(model=MODEL, input=[user("Hi."), said, user("And?"), said, user("Bye.")])
        assert refused.value.signal == "duplicate_item_id"
        assert len(emulator.requests) == sent
    (held, twice) = cap.chat_spans()
    events = [
        [dict(e.attributes or {}) for e in span.events if e.name == "openai_responses.signal"] for span in (held, twice)
    ]
    assert [[e["openai_responses.signal.name"] for e in span] for span in events] == [["duplicate_item_id"]] * 2
    assert events[0][0].get(SHARED_FACT) is True
    assert events[0][0]["openai_responses.duplicate.held_by"] == ("conversation",)
    assert SHARED_FACT not in events[1][0]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_replay_of_the_users_messages_alone_is_named_across_processes(
    store: Store, emulator: Emulator, client: openai.OpenAI, ledgers: list[RedisLedger], asynchronous: bool
) -> None:
    """Worker A answers a turn; worker B gets the replay that kept only the user's messages. The messages A's turn was
    given are a key of its shared entry: B finds it (a sync read, or the async call's awaited ones) and names it."""
    a = new_ledger(ledgers, store.url, **store.options)
    ask = user("Remember this: the marker is S-9.")
    with capture(ledger=a, hash_key=KEY):
        first = client.responses.create(model=MODEL, input=[ask])
    assert a.flush(5)
    b = new_ledger(ledgers, store.url, **store.options)
    kwargs: dict[str, Any] = {"model": MODEL, "input": [ask, user("The marker?")]}
    with capture(ledger=b, hash_key=KEY) as cap:
        if asynchronous:
            asyncio.run(_create_async(emulator, kwargs))
        else:
            client.responses.create(**kwargs)
    (span,) = cap.chat_spans()
    (event,) = [dict(e.attributes or {}) for e in span.events if e.name == "openai_responses.signal"]
    assert event == {
        "openai_responses.signal.name": "replay_incomplete",
        "openai_responses.signal.severity": "warning",
        "openai_responses.parent.id": first.id,
        "openai_responses.missing.count": 1,
        "openai_responses.missing.item_types": ("message",),
        "openai_responses.replay.messages_only": True,
        SHARED_FACT: True,
    }


async def _create_async(emulator: Emulator, kwargs: dict[str, Any]) -> None:
    async with emulator.async_client() as client:
        await client.responses.create(**kwargs)


def test_a_process_with_another_key_sees_nothing(
    process_a: dict[str, Any], client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    """A rotated key: entries made under the old one are invisible (silent, never compared), then expire."""
    ledger = new_ledger(ledgers, process_a["url"], **process_a["options"])
    with capture(ledger=ledger, hash_key=OTHER_KEY) as cap:
        raised = {**chain_turns(client, process_a, cap), **replay_turns(client, process_a, cap)}
    assert set(raised) == {"unstored", "instructions", *REPLAYS}
    # Nothing is compared across keys; only the API's own `invalid_encrypted_content` answer names a modification.
    confirmed = raised.pop("truncated_encrypted_content")
    assert confirmed == ("encrypted_content_modified",)
    assert set(raised.values()) == {()}
    old = f"otel-responses:{Fingerprinter(key_from_text(KEY)).key_id()}:"
    new = f"otel-responses:{Fingerprinter(key_from_text(OTHER_KEY)).key_id()}:"
    assert ledger.namespace == new[:-1]
    assert ledger.flush(5)
    with process_a["admin"]() as admin:
        keys = [key.decode() for key in all_keys(admin)]
    assert any(key.startswith(old) for key in keys)
    assert any(key.startswith(new) for key in keys)
    assert all(key.startswith((old, new)) for key in keys)


# -- conversations and fast paths across two ledgers in this process -----------------------------------------


def test_conversation_turns_across_processes_raise_no_false_signal(
    redis_url: str, client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    """Turn 1 on A returns a tool call; B answers it in the conversation; A's next turn must see B's turn as the
    latest (its own older entry, with the call pending, would raise a false missing_tool_output)."""
    a, b = new_ledger(ledgers, redis_url), new_ledger(ledgers, redis_url)
    conversation = client.conversations.create()
    with capture(ledger=a, hash_key=KEY) as cap_a:
        first = client.responses.create(
            model=MODEL, input=[tool_request()], tools=TOOLS, conversation=conversation.id, instructions=INSTRUCTIONS
        )
    assert a.flush(5)
    call = next(item for item in first.output if item.type == "function_call")
    with capture(ledger=b, hash_key=KEY) as cap_b:
        client.responses.create(
            model=MODEL,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}],
            tools=TOOLS,
            conversation=conversation.id,
            instructions=INSTRUCTIONS,
        )
    assert b.flush(5)
    with capture(ledger=a, hash_key=KEY) as cap_a:
        client.responses.create(model=MODEL, input="And now?", conversation=conversation.id, instructions=INSTRUCTIONS)
        client.responses.create(model=MODEL, input="Constraints?", conversation=conversation.id)
    assert chat_signals(cap_b) == [()]  # the output answers the call pending in A's turn
    assert chat_signals(cap_a) == [(), ("instructions_dropped",)]


def test_sequences_order_entries_across_processes() -> None:
    a = RedisLedger("redis://127.0.0.1:1/0")
    b = RedisLedger("redis://127.0.0.1:1/0")
    first = a.next_sequence()
    second = b.next_sequence()
    third = a.next_sequence()
    assert first < second < third
    assert abs(first - time.time_ns()) < 60 * 10**9
    burst = [a.next_sequence() for _ in range(1000)]
    assert burst == sorted(set(burst))


# -- Redis slow, down, and back ------------------------------------------------------------------------------


def test_redis_hung_or_stopped_mid_run_never_reaches_the_app(
    tmp_path: Path, client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    timeout, backoff = 0.05, 0.4
    server = RedisServer(tmp_path)
    server.start()
    try:
        a = new_ledger(ledgers, server.url(), backoff_seconds=backoff)
        b = new_ledger(ledgers, server.url(), timeout_seconds=timeout, backoff_seconds=backoff)
        with capture(ledger=a, hash_key=KEY):
            parents = [
                client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS).id for _ in range(3)
            ]
        assert a.flush(5)

        with capture(ledger=b, hash_key=KEY) as cap:
            healthy = chained(client, cap, parents[0])
            assert healthy[:2] == (("instructions_dropped",), False)

            server.pause()  # hung: the read waits out the timeout, once
            hung = chained(client, cap, parents[1])
            within_backoff = chained(client, cap, parents[1])  # Redis not asked again until the backoff ends
            server.resume()
            assert hung[:2] == ((), True)
            assert within_backoff[:2] == ((), True)
            assert timeout <= hung[2] < healthy[2] + timeout + 0.5
            assert within_backoff[2] < healthy[2] + 0.25
            assert b.stats()["read_failures"] == 1
            assert b.stats()["reads_skipped"] >= 1

            server.stop()  # down: refused at once
            time.sleep(backoff + 0.1)
            down = chained(client, cap, parents[2])
            assert down[:2] == ((), True)
            assert down[2] < healthy[2] + timeout + 0.5
            assert b.stats()["read_failures"] == 2
        # A writes while Redis is down: the call goes on, the write is tried twice and dropped.
        with capture(ledger=a, hash_key=KEY) as cap_a:
            client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
        assert a.flush(5)
        assert a.stats()["write_failures"] == 1
        assert chat_signals(cap_a) == [()]

        server.start()  # the same port, empty: checks resume and the writer reconnects
        time.sleep(backoff + 0.1)
        with capture(ledger=a, hash_key=KEY):
            late = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS).id
        assert a.flush(5)
        with capture(ledger=b, hash_key=KEY) as cap:
            resumed = chained(client, cap, late)
        assert resumed[:2] == (("instructions_dropped",), False)
    finally:
        server.stop()


def test_redis_down_at_startup_breaks_nothing(client: openai.OpenAI) -> None:
    nothing_there = f"redis://127.0.0.1:{free_port()}/0"
    with capture(ledger=RedisLedger(nothing_there, timeout_seconds=0.05), hash_key=KEY) as cap:
        first = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
        started = time.perf_counter()
        client.responses.create(model=MODEL, input="Again.", previous_response_id=first.id)
        elapsed = time.perf_counter() - started
    single, chained = cap.chat_spans()
    assert LEDGER_UNAVAILABLE not in attrs(single)  # no check needed a parent: Redis was not asked
    # The parent is known here; Redis was asked whether it already had a child, and could not answer.
    assert attrs(chained)[LEDGER_UNAVAILABLE] is True
    assert attrs(chained)["openai_responses.signals"] == ("instructions_dropped",)  # from local knowledge
    assert elapsed < 1.0


def test_a_failed_read_marks_its_own_call_only() -> None:
    """Each call reads through a view of its own: a read that fails marks that call's view, not the next call's (a
    read at the end of a call, after its span began, stays with that call)."""
    ledger = RedisLedger(f"redis://127.0.0.1:{free_port()}/0", backoff_seconds=0)
    ledger.bind(Fingerprinter(key_from_text(KEY)))
    try:
        ending = ledger.for_call()
        assert ending.latest_in_conversation("conv_1") is None
        ending.record(entry_with_calls(1), None)
        assert ending.unavailable is True
        nxt = ledger.for_call()
        assert nxt.unavailable is False
        assert nxt.get("resp_elsewhere") is None
        assert nxt.unavailable is True  # a read for this call: it says so
        assert ledger.for_call().unavailable is False
        assert ledger.stats()["read_failures"] == 2
    finally:
        ledger.close(timeout=3)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_worker_writes_through_its_own_writer(redis_url: str, ledgers: list[RedisLedger]) -> None:
    """A pre-forking server builds the ledger in its master: each worker needs a writer thread of its own."""
    ledger = new_ledger(ledgers, redis_url)
    ledger.bind(Fingerprinter(key_from_text(KEY)))
    ledger.record(entry_with_calls(1), None)  # the writer thread starts in the parent
    assert ledger.flush(5)
    child = entry_with_calls(1)
    child = Entry("resp_from_child", 2, True, None, None, child.outputs, 1, 0)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 2
        try:
            ledger.record(child, None)
            code = 0 if ledger.flush(5) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with redis.Redis.from_url(redis_url) as admin:
        assert admin.exists(f"{ledger.namespace}:{{resp_from_child}}:r") == 1


# -- bounded: TTL and size -----------------------------------------------------------------------------------


def test_entries_expire(redis_url: str, client: openai.OpenAI, ledgers: list[RedisLedger]) -> None:
    a = new_ledger(ledgers, redis_url, ttl_seconds=1)
    with capture(ledger=a, hash_key=KEY):
        before = client.responses.create(model=MODEL, input="Hello.", store=False)
        after = client.responses.create(model=REASONING_MODEL, input=[tool_request()], store=False, tools=TOOLS)
    assert a.flush(5)
    with redis.Redis.from_url(redis_url) as admin:
        keys = all_keys(admin)
        kinds = {key.decode().rsplit(":", 1)[1] for key in keys}
        assert {"r", "i", "f"} <= kinds
        assert all(0 < admin.pttl(key) <= 1000 for key in keys)  # every key expires
        with capture(ledger=new_ledger(ledgers, redis_url), hash_key=KEY) as cap, pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="Marker?", previous_response_id=before.id)
        assert chat_signals(cap) == [("unstored_parent",)]
        deadline = time.monotonic() + 5
        while admin.exists(*keys) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert admin.exists(*keys) == 0
    with capture(ledger=new_ledger(ledgers, redis_url), hash_key=KEY) as cap, pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="Marker?", previous_response_id=after.id)
    assert chat_signals(cap) == [()]  # gone: the check is silent, not wrong


def test_entry_size_is_capped(redis_url: str, ledgers: list[RedisLedger]) -> None:
    entry = entry_with_calls(MAX_OUTPUT_ITEMS, id_chars=100)
    whole = encode_entry(entry, 1 << 20)
    assert whole is not None
    assert whole[1] == MAX_OUTPUT_ITEMS
    assert len(whole[0]) > 1024
    data, kept = encode_entry(entry, 1024) or (b"", 0)
    assert 0 < kept < MAX_OUTPUT_ITEMS
    assert len(data) <= 1024
    assert len(data) <= 1024 - len("v1.") - 22 - len(".")  # the whole value, sealed, within the cap
    trimmed = decode_entry(data, 1024)
    assert trimmed is not None
    assert trimmed.outputs == entry.outputs[:kept]

    ledger = new_ledger(ledgers, redis_url, max_entry_bytes=1024)
    ledger.bind(Fingerprinter(key_from_text(KEY)))
    ledger.record(entry, None)
    assert ledger.flush(5)
    assert ledger.stats()["trimmed"] == 1
    with redis.Redis.from_url(redis_url) as admin:
        stored = admin.get(f"{ledger.namespace}:{{resp_big}}:r")
        assert stored is not None
        assert len(stored) <= 1024
        located = sum(1 for key in all_keys(admin) if key.endswith(b":i"))
    assert located == kept
    reader = new_ledger(ledgers, redis_url, max_entry_bytes=1024)
    reader.bind(Fingerprinter(key_from_text(KEY)))
    found = reader.places([entry.outputs[0].id or "", entry.outputs[-1].id or ""])
    assert found[0] != ()
    assert found[1] == ()  # dropped past the cap: absent, not an error


def test_malformed_or_foreign_values_are_absent(
    redis_url: str, client: openai.OpenAI, ledgers: list[RedisLedger]
) -> None:
    """Junk of every kind: not sealed (no format at all, or another version's header), sealed with the fleet's key
    but malformed (a writer's bug), or sealed for another key name. Each is absent and counted; none is an error."""
    ledger = new_ledger(ledgers, redis_url)
    ledger.bind(Fingerprinter(key_from_text(KEY)))
    ns = ledger.namespace
    assert ns is not None
    codec = Codec(Fingerprinter(key_from_text(KEY)))
    good = encode_entry(entry_with_calls(2), 8192)
    assert good is not None

    def sealed(key: str, content: bytes) -> bytes:
        return codec.seal(key, content)

    def r(response_id: str) -> str:
        return entry_key(ns, response_id)

    def item(item_id: str) -> str:
        return location_key(ns, item_id) or ""

    unsealed: dict[str, bytes] = {
        r("resp_junk"): b"not json at all",
        r("resp_bare"): b'{"id":"resp_bare","s":1}',
        r("resp_v2"): b"v2." + b"A" * 22 + b'.{"id":"resp_v2"}',
        r("resp_deep"): b"[" * 5000 + b"]" * 5000,
        item("item_junk"): b"\xff\xfe",
        item("item_index"): b"99:resp_big",
        conversation_key(ns, "conv_junk"): b"{}",
    }
    malformed: dict[str, bytes] = {
        r("resp_short"): sealed(r("resp_short"), b"[1]"),
        r("resp_types"): sealed(r("resp_types"), b'{"id":"resp_types","s":"seq"}'),
        r("resp_badcopy"): sealed(r("resp_badcopy"), b'{"id":"resp_badcopy","cp":[[99,8]]}'),
        r("resp_other"): sealed(r("resp_other"), good[0]),  # a valid entry of another response
        r("resp_huge"): b"v1." + b"A" * 22 + b"." + b"[" + b"1," * 200_000 + b"1]",  # too long to be read
        # an entry of conversation conv_big
        conversation_key(ns, "conv_other"): sealed(conversation_key(ns, "conv_other"), good[0]),
    }
    moved = {r("resp_moved"): sealed(r("resp_big"), good[0])}
    # A genuine location of an entry that is junk: the entry is read (and counted) again, the item is not found.
    points_to_junk = {item("item_points_to_junk"): sealed(item("item_points_to_junk"), b"0:resp_junk")}
    with redis.Redis.from_url(redis_url) as admin:
        admin.mset({**unsealed, **malformed, **moved, **points_to_junk})
    for response_id in ("resp_junk", "resp_bare", "resp_v2", "resp_deep", "resp_short", "resp_types", "resp_badcopy"):
        assert ledger.get(response_id) is None, response_id
    for response_id in ("resp_other", "resp_huge", "resp_moved"):
        assert ledger.get(response_id) is None, response_id
    assert ledger.places(["item_junk", "item_index", "item_points_to_junk", 12345]) == [()] * 4
    assert ledger.latest_in_conversation("conv_junk") is None
    assert ledger.latest_in_conversation("conv_other") is None
    stats = ledger.stats()
    assert (stats["undecodable"], stats["forged"]) == (len(unsealed) + 1 + len(malformed), len(moved))
    view = ledger.for_call()
    assert view.get("resp_junk") is None
    assert view.unavailable is False  # malformed is not unreachable
    with capture(ledger=ledger, hash_key=KEY) as cap, pytest.raises(openai.APIStatusError):
        client.responses.create(model=MODEL, input="Hi.", previous_response_id="resp_junk")
    assert chat_signals(cap) == [()]


# -- nothing in Redis but metadata ---------------------------------------------------------------------------


@pytest.mark.parametrize("store", [True, False])
def test_redis_holds_no_secret_nor_payload(
    store: bool, redis_url: str, emulator: Emulator, ledgers: list[RedisLedger]
) -> None:
    """Secrets planted in instructions, user and assistant text, tool arguments and outputs, metadata, MCP
    credentials, every emulator-safe item type; the emulator's encrypted content and replies. Every key and value
    is then read back and searched for them, their 12-character pieces, base64 and hex digests."""
    ledger = new_ledger(ledgers, redis_url)
    secrets = []
    with capture(ledger=ledger, hash_key=KEY):
        for n, model in enumerate((REASONING_MODEL, MODEL)):
            s = Secrets(f"redis-{store}-{n}".encode(), ("Remember this: the marker is ", "\n"))
            with closing(emulator.client(**client_kwargs(s))) as planted_client:
                emulator_session(planted_client, s, model, store, set(PARAMS), list(EMULATOR_SAFE_UNITS))
                conversation = planted_client.conversations.create()
                planted_client.responses.create(
                    model=model,
                    input=s.text("conversation.turn") + " Please use lookup.",
                    conversation=conversation.id,
                    instructions=s.text("conversation.instructions"),
                    metadata={"k": s.text("conversation.metadata")},
                )
            secrets.append(s)
    assert ledger.flush(5)
    haystack: list[tuple[str, str]] = []
    with redis.Redis.from_url(redis_url) as admin:
        for key in all_keys(admin):
            value = admin.get(key)
            assert value is not None
            assert admin.ttl(key) > 0
            haystack.append(("key", key.decode("utf-8", "replace")))
            haystack.append((key.decode("utf-8", "replace"), value.decode("utf-8", "replace")))
    kinds = {text.rsplit(":", 1)[1] for place, text in haystack if place == "key"}
    assert {"r", "i", "f", "c"} <= kinds, kinds  # entries, item and text locations, conversations were written
    assert len(haystack) > 20
    for s in secrets:
        needles = s.needles()
        assert len(needles) > 100
        leaks = _leaks(haystack, needles)
        assert not leaks, [(needles[n], [p for p, t in haystack if n in t][:3]) for n in leaks[:5]]
    # The search would see one: the emulator's encrypted content, or a piece of a planted secret.
    observed = next(value for name, value in secrets[0].observed.items() if "encrypted" in name)
    assert _leaks([*haystack, ("planted", json.dumps([1, observed]))], secrets[0].needles())
    core = next(iter(secrets[1].cores.values()))
    assert _leaks([*haystack, ("planted", f"0:resp_{core[3:16]}")], secrets[1].needles())


def _leaks(haystack: list[tuple[str, str]], needles: dict[str, tuple[str, str]]) -> list[str]:
    joined = "\x00".join(text for _, text in haystack)
    grams = {joined[i : i + WINDOW] for i in range(len(joined) - WINDOW + 1)}
    return [needle for needle in needles if needle[:WINDOW] in grams and needle in joined]


# -- configuration -------------------------------------------------------------------------------------------


def test_ledger_url_from_the_environment(
    redis_url: str, client: openai.OpenAI, monkeypatch: pytest.MonkeyPatch, ledgers: list[RedisLedger]
) -> None:
    env = {
        f"{ENV_PREFIX}LEDGER_URL": redis_url,
        f"{ENV_PREFIX}HASH_KEY": KEY,
        f"{ENV_PREFIX}LEDGER_TTL": "120",
        f"{ENV_PREFIX}LEDGER_TIMEOUT": "0.2",
    }
    settings = settings_from({}, env)
    assert isinstance(settings.ledger, RedisLedger)
    ledgers.append(settings.ledger)
    assert settings.ledger.ttl_seconds == 120
    assert math.isclose(settings.ledger.timeout_seconds, 0.2)
    assert settings.ledger.namespace == f"otel-responses:{settings.fingerprinter.key_id()}"
    keyword = settings_from({"ledger_url": f"{redis_url}?cluster=false"}, env).ledger
    assert isinstance(keyword, RedisLedger)
    ledgers.append(keyword)
    assert (keyword.ttl_seconds, keyword.cluster) == (120, False)  # the keyword's URL, the variables' tuning
    assert isinstance(settings_from({}, {}).ledger, InMemoryLedger)  # the default stays in-process

    other = new_ledger(ledgers, redis_url)
    with capture(ledger=other, hash_key=KEY):
        parent = client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS)
    assert other.flush(5)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with capture() as cap:
        child = client.responses.create(model=MODEL, input="Constraints?", previous_response_id=parent.id)
    assert chat_signals(cap) == [("instructions_dropped",)]
    with redis.Redis.from_url(redis_url) as admin:
        deadline = time.monotonic() + 5
        written = f"{settings.ledger.namespace}:{{{child.id}}}:r"
        while not admin.exists(written) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert 0 < admin.ttl(written) <= 120


def test_a_shared_ledger_needs_a_hash_key(
    redis_url: str, ledgers: list[RedisLedger], caplog: pytest.LogCaptureFixture
) -> None:
    """From keywords, an error; from the environment, a warning naming the variable and the in-process ledger
    (auto-instrumentation goes on). Neither repeats the URL, which may hold a password."""
    for config in ({"ledger_url": redis_url}, {"ledger": new_ledger(ledgers, redis_url)}):
        with pytest.raises(ConfigError, match="same hash_key in every process") as info:
            settings_from(config, {})
        assert f"{ENV_PREFIX}HASH_KEY" in str(info.value)
    password_url = "redis://:hunter2-not-to-be-echoed@127.0.0.1:1/0"
    with caplog.at_level("WARNING", logger="otel_responses.config"):
        settings = settings_from({}, {f"{ENV_PREFIX}LEDGER_URL": password_url})
    assert isinstance(settings.ledger, InMemoryLedger)
    [warning] = [record.getMessage() for record in caplog.records if record.name == "otel_responses.config"]
    assert warning.startswith(f"otel-responses: {ENV_PREFIX}LEDGER_URL: a shared ledger needs the same hash_key")
    assert warning.endswith("; using the in-process ledger instead")
    assert "hunter2" not in warning
    with pytest.raises(ConfigError, match="hash_key"):
        ResponsesInstrumentor().instrument(ledger_url=redis_url)
    assert not ResponsesInstrumentor().is_instrumented_by_opentelemetry
    assert isinstance(settings_from({"ledger_url": redis_url, "hash_key": KEY}, {}).ledger, RedisLedger)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"ledger_ttl": 60}, "ledger_ttl \\(pass ledger=RedisLedger\\(url, ttl_seconds=...\\)"),
        ({"ledger_timeout": 0.1}, "ledger_timeout \\(pass ledger=RedisLedger\\(url, timeout_seconds=...\\)"),
        ({"ledger_url": "http://:hunter2@cache:6379"}, "redis://, rediss:// or unix://"),
        ({"ledger_url": "cache:6379"}, "redis://, rediss:// or unix://"),
        ({"ledger_url": 6379}, "redis://, rediss:// or unix://"),
        ({"ledger_url": "redis://127.0.0.1:1", "ledger": object()}, "either ledger or ledger_url"),
    ],
)
def test_bad_ledger_settings_are_config_errors(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        ResponsesInstrumentor().instrument(hash_key=KEY, **config)
    assert "hunter2" not in str(info.value)
    assert not ResponsesInstrumentor().is_instrumented_by_opentelemetry


@pytest.mark.parametrize(
    ("name", "value", "warning"),
    [
        ("LEDGER_TTL", "-1", "ledger_ttl must be a positive integer; using the default (`3600`) instead"),
        (
            "LEDGER_TIMEOUT",
            "0",
            "ledger_timeout must be a positive number of seconds; using the default (`0.05`) instead",
        ),
        (
            "LEDGER_URL",
            "memcached://:hunter2@x",
            "ledger_url: the Redis ledger URL must start with redis://, rediss:// or unix://; "
            "using the in-process ledger instead",
        ),
    ],
)
def test_bad_ledger_settings_from_the_environment_warn_and_fall_back(
    redis_url: str, name: str, value: str, warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    environ = {f"{ENV_PREFIX}{name}": value}
    if name != "LEDGER_URL":
        environ[f"{ENV_PREFIX}LEDGER_URL"] = redis_url
    with caplog.at_level("WARNING", logger="otel_responses.config"):
        settings = settings_from({"hash_key": KEY}, environ)
    assert [record.getMessage() for record in caplog.records if record.name == "otel_responses.config"] == [
        f"otel-responses: {ENV_PREFIX}{name}: {warning}"
    ]
    ledger = settings.ledger
    if name == "LEDGER_URL":
        assert isinstance(ledger, InMemoryLedger)
    else:
        assert isinstance(ledger, RedisLedger)
        assert (ledger.ttl_seconds, ledger.timeout_seconds) == (3600, 0.05)
        ledger.close(timeout=1)


def test_redis_package_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # `import redis` now fails as if not installed
    with pytest.raises(ConfigError, match=re.escape(install_hint("redis"))):
        settings_from({"ledger_url": "redis://127.0.0.1:1/0", "hash_key": KEY}, {})
    with pytest.raises(ImportError, match=re.escape(install_hint("redis"))):
        RedisLedger("redis://127.0.0.1:1/0")
    assert settings_from({}, {}).ledger.for_call().unavailable is False  # the in-process default needs no redis
