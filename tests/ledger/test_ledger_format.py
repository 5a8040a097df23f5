"""The shared ledger's value format: every value sealed with a MAC under a key derived from the fleet's hash key; an
entry a JSON object keyed by short field names, one row per field, where a reader ignores a key it does not know and
gives a key it misses the field's default; every field checked against the API's shapes on read and on write.

Against a real `redis-server` on 127.0.0.1 (as in tests/ledger/test_redis_ledger.py).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import redis
from redis.crc import key_slot

from otel_responses._fingerprint import Fingerprinter, key_from_text
from otel_responses._items import ItemMeta, payload_shape
from otel_responses.ledger import MAX_GIVEN_OUTPUTS, MAX_HELD_CALLS, MAX_OUTPUT_ITEMS, Entry, GivenOutput
from otel_responses.ledger._codec import (
    DEFAULT_MAX_ENTRY_BYTES,
    FIELDS,
    FORMAT,
    MAC_PURPOSE,
    MAX_ID_CHARS,
    NOT_SHARED,
    Codec,
    conversation_key,
    decode_entry,
    encode_entry,
    entry_fields,
    entry_from_fields,
    entry_key,
    is_id,
    location_key,
    marker_key,
    shareable,
)
from otel_responses.ledger.redis import COUNTS, RedisLedger

from ..ledger_scenarios import INSTRUCTIONS, MODEL, TOOLS, tool_request
from ..shared_ledger import KEY, RedisServer, server_fixture

CASSETTES = Path(__file__).parents[1] / "real_traffic" / "cassettes"
FLEET = Fingerprinter(key_from_text(KEY))
ATTACKER = Fingerprinter(key_from_text("not-the-fleet-key"))


# -- fixtures ------------------------------------------------------------------------------------------------


server = server_fixture(name="server")


@pytest.fixture
def admin(server: RedisServer) -> Iterator[redis.Redis]:
    with server.client() as client:
        client.flushdb()
        yield client


@pytest.fixture
def make(server: RedisServer) -> Iterator[Callable[..., RedisLedger]]:
    """Ledgers bound to the fleet key, closed after the test."""
    made: list[RedisLedger] = []

    def new(fingerprinter: Fingerprinter = FLEET, **options: Any) -> RedisLedger:
        ledger = RedisLedger(server.url(), **options)
        ledger.bind(fingerprinter)
        made.append(ledger)
        return ledger

    yield new
    for ledger in made:
        ledger.close(timeout=1)


def rich_entry(response_id: str = "resp_rich", **changes: Any) -> Entry:
    """An entry with every kind of field filled in."""
    outputs = (
        ItemMeta("reasoning", "rs_1", None, None, None, True, None, False, payload_shape("QUJD" * 300)),
        ItemMeta("message", "msg_1", None, "assistant", "commentary", False, 2**64 - 1),
        ItemMeta("function_call", "fc_1", "call_abc", None, None, False, None, True),
        ItemMeta("mcp_approval_request", "mcpr_1", "mcpr_1", None, None, False),
        # A server that repeats an id within one response: one location names both positions.
        ItemMeta("reasoning", "rs_1", None, None, None, True, None, False, payload_shape("QUJD" * 200)),
    )
    entry = Entry(
        response_id, 1_760_000_000_000_000_000, True, "0123456789abcdef", "conv_1", outputs, 3, 1,
        parent_id="resp_parent", input_messages=(1, 2, 2**64 - 1), copies=((0, payload_shape("QUJD" * 300)),),
        turn=7, lineage_id="conv_1", trace_id=2**128 - 1, span_id=2**64 - 1,
        instructed_id="resp_first", instructed_turn=1, system_in_state=True,
        held_calls=("call_old", "call_abc"), held_outputs=("call_old",), held_partial=False,
        given_outputs=(GivenOutput("call_old", 4096, 2**64 - 1),), input_system_messages=2, given_messages=2**63 + 5,
        model="gpt-5.4", resolved_model="gpt-5.4-2026-03-05", reasoning_context="current_turn", input_tokens=1200,
        output_tokens=340, reasoning_held=900, reasoning_turn=300, tools_fingerprint=2**64 - 1,
        organization=2**32 - 1, project=7, credential=8, endpoint=9,
    )  # fmt: skip
    return dataclasses.replace(entry, **changes)


def keys_and_values(admin: redis.Redis) -> dict[str, bytes]:
    names = [key.decode() for key in admin.scan_iter(match="*", count=1000)]
    values = admin.mget(names) if names else []
    return {name: value for name, value in zip(names, values, strict=True) if isinstance(value, bytes)}


def counts(ledger: RedisLedger, *names: str) -> dict[str, int]:
    return {name: ledger.stats()[name] for name in names}


def content_of(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def as_shared(entry: Entry) -> Entry:
    return dataclasses.replace(entry, shared=True)


# -- the byte layout -----------------------------------------------------------------------------------------


def expected_mac(key: str, content: bytes, fingerprinter: Fingerprinter = FLEET, version: int = 1) -> bytes:
    """The MAC as documented, computed here independently of the codec."""
    digest = hashlib.blake2b(key=fingerprinter.derive(MAC_PURPOSE), digest_size=16, person=b"otelr-ledger")
    name = key.encode()
    digest.update(version.to_bytes(2, "big") + len(name).to_bytes(4, "big") + name + content)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=")


def test_every_value_kind_is_sealed_as_documented(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    """`v1.{22-char base64url MAC}.{content}`: entries (and conversation pointers) a compact JSON object of their
    fields, locations `index,index...:response_id`, markers `1`; the MAC over the version, the full key name and the
    content."""
    assert FORMAT == 1
    ledger = make()
    entry = rich_entry()
    ledger.record(entry, "resp_parent")
    assert ledger.flush(5)
    stored = keys_and_values(admin)
    ns = ledger.namespace
    kinds = {name.rsplit(":", 1)[1] for name in stored}
    assert kinds == {"r", "i", "t", "f", "c", "k"}
    layout = re.compile(rb"v1\.([A-Za-z0-9_-]{22})\.(.+)", re.S)
    for name, value in stored.items():
        match = layout.fullmatch(value)
        assert match is not None, (name, value)
        assert match[1] == expected_mac(name, match[2]), name
    content = content_of(entry_fields(entry))
    assert content.startswith(b'{"id":"resp_rich","s":1760000000000000000,"h":"0123456789abcdef","c":"conv_1","o":[')
    assert stored[f"{ns}:{{resp_rich}}:r"] == b"v1." + expected_mac(f"{ns}:{{resp_rich}}:r", content) + b"." + content
    assert stored[f"{ns}:{{conv_1}}:c"].endswith(b"." + content)
    assert stored[f"{ns}:{{msg_1}}:i"].endswith(b".1:resp_rich")
    assert stored[f"{ns}:{{rs_1}}:i"].endswith(b".0,4:resp_rich")  # both positions of the repeated id
    assert stored[f"{ns}:{{function_call:call_abc}}:t"].endswith(b".2:resp_rich")
    assert stored[f"{ns}:{{{2**64 - 1:016x}}}:f"].endswith(b".1:resp_rich")
    assert stored[f"{ns}:{{{2**63 + 5:016x}}}:f"].endswith(b".0:resp_rich")  # the messages it was given: the entry
    assert stored[f"{ns}:{{resp_parent}}:k"].endswith(b".1")
    assert ledger.stats()["writes"] == 1
    # Read back by another process of the fleet: every field, marked as read from a shared store.
    reader = make()
    assert reader.get("resp_rich") == as_shared(entry)
    assert reader.has_child("resp_parent") is True
    assert set(COUNTS) >= {"forged", "local_only", "undecodable"}
    assert counts(reader, "forged", "undecodable") == {"forged": 0, "undecodable": 0}


def test_the_mac_key_is_derived_per_use_and_never_written(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    derived = FLEET.derive(MAC_PURPOSE)
    assert len(derived) == 32
    assert derived != FLEET.derive(b"another-use")
    assert derived != key_from_text(KEY)
    assert derived != Fingerprinter(key_from_text("another key")).derive(MAC_PURPOSE)
    assert FLEET.derive(MAC_PURPOSE) == derived  # the same in every process of the fleet
    for bad in (b"", b"x" * 17, b"a\x00"):
        with pytest.raises(ValueError, match="purpose"):
            FLEET.derive(bad)
    ledger = make()
    ledger.record(rich_entry(), "resp_parent")
    assert ledger.flush(5)
    everything = b"\x00".join(name.encode() + b"\x00" + value for name, value in keys_and_values(admin).items())
    for form in (derived, derived.hex().encode(), base64.b64encode(derived), base64.urlsafe_b64encode(derived)):
        assert form[:12] not in everything
    for key in (key_from_text(KEY), key_from_text(KEY).hex().encode(), KEY.encode()):
        assert key[:12] not in everything


def test_a_value_of_another_version_or_none_is_undecodable() -> None:
    """The version is read from the header and bound by the MAC: a value of any other version, or without a header
    (raw JSON, the bare content), is of no format this reader knows."""
    seen: list[str] = []
    codec = Codec(FLEET, count=seen.append)
    key = "otel-responses:abc:{resp_rich}:r"
    content = content_of(entry_fields(rich_entry()))
    sealed = codec.seal(key, content)
    assert codec.entry(key, sealed) is not None
    for other in (b"v2.", b"v0.", b"v.", b"vx.", b"v99999999.", b"V1."):
        assert codec.entry(key, other + sealed[3:]) is None
    assert codec.entry(key, content) is None
    assert seen == ["undecodable"] * 7
    seen.clear()
    assert codec.entry(key, sealed.decode()) is not None  # a client with decode_responses=True
    assert codec.entry(key, 12) is None
    assert seen == ["undecodable"]


# -- the keyed shape -------------------------------------------------------------------------------------------


def test_every_entry_field_has_one_row() -> None:
    """The table is the one list of shared fields: every `Entry` field but the reader's own mark has a row, once,
    under a key of its own."""
    names = [row.name for row in FIELDS]
    assert sorted(names) == sorted(f.name for f in dataclasses.fields(Entry) if f.name not in NOT_SHARED)
    assert len(set(names)) == len(names)
    keys = [row.key for row in FIELDS]
    assert len(set(keys)) == len(keys)
    assert all(re.fullmatch(r"[a-z]{1,2}", key) for key in keys)
    assert [f.name for f in dataclasses.fields(Entry) if f.default is dataclasses.MISSING] == ["response_id"]


# Each field's value away from its default; a field that needs another to be valid brings it along.
SAMPLE = rich_entry(store=False, deleted=True, written_by_app=True)
COMPANIONS = {"trace_id": ("span_id",), "span_id": ("trace_id",), "instructed_turn": ("instructed_id",)}


@pytest.mark.parametrize("row", FIELDS, ids=[row.name for row in FIELDS])
def test_every_field_round_trips_alone(row: Any) -> None:
    """An entry whose only field away from its default is this one: written under its key alone (beside the id), read
    back equal."""
    names = (row.name, *COMPANIONS.get(row.name, ()))
    entry = Entry("resp_1", **{name: getattr(SAMPLE, name) for name in names if name != "response_id"})
    assert getattr(entry, row.name) != getattr(Entry("resp_0"), row.name) or row.name == "response_id"
    doc = entry_fields(entry)
    assert set(doc) == {"id"} | {r.key for r in FIELDS if r.name in names}
    encoded = encode_entry(entry)
    assert encoded is not None
    assert decode_entry(encoded[0]) == as_shared(entry)


def test_a_field_at_its_default_is_left_out() -> None:
    assert entry_fields(Entry("resp_1")) == {"id": "resp_1"}
    assert decode_entry(b'{"id":"resp_1"}') == Entry("resp_1", shared=True)
    # Near miss: the same fields away from their default are written.
    assert set(entry_fields(Entry("resp_1", store=False, held_partial=False, turn=0))) == {"id", "st", "hp", "t"}


def test_a_key_no_row_knows_is_ignored() -> None:
    """A newer writer's field: the entry is read without it, whatever the key's value."""
    doc = entry_fields(rich_entry())
    for value in (1, "text", None, [1, [2]], {"nested": {"deeper": [0]}}):
        assert entry_from_fields({**doc, "zz": value, "new_field": value}) == as_shared(rich_entry())


def test_a_missing_key_gives_the_fields_default() -> None:
    """An older writer's entry, without a field it did not know: read with that field's default. Without its held
    calls, it says its state may hold calls it does not list (an output is then no orphan)."""
    doc = entry_fields(rich_entry())
    for row in FIELDS:
        if row.name in ("response_id", "span_id", "trace_id", "instructed_id"):
            continue
        fewer = {key: value for key, value in doc.items() if key != row.key}
        default = getattr(Entry("resp_rich"), row.name)
        assert entry_from_fields(fewer) == dataclasses.replace(as_shared(rich_entry()), **{row.name: default}), row
    without_held = {key: value for key, value in doc.items() if key not in ("hc", "ho", "hp")}
    read = entry_from_fields(without_held)
    assert read is not None
    assert (read.held_calls, read.held_outputs, read.held_partial) == ((), (), True)
    without_lineage = {key: value for key, value in doc.items() if key not in ("t", "l", "tr", "sp")}
    assert entry_from_fields(without_lineage) == as_shared(
        rich_entry(turn=None, lineage_id=None, trace_id=None, span_id=None)
    )


def test_an_entry_of_a_newer_and_an_older_writer_share_one_redis(
    admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    """Through Redis, sealed as any writer of the fleet seals them: an entry with a key this reader does not know is
    read without it; one missing its held calls (a writer that did not know them) reads as knowing no call beyond its
    own outputs. Neither is counted undecodable."""
    reader = make()
    ns = reader.namespace
    assert ns is not None
    codec = Codec(FLEET)
    newer = {**entry_fields(rich_entry("resp_newer")), "zz": [1, 2, 3]}
    older = {
        key: value for key, value in entry_fields(rich_entry("resp_older")).items() if key not in ("hc", "ho", "hp")
    }
    for name, doc in (("resp_newer", newer), ("resp_older", older)):
        admin.set(entry_key(ns, name), codec.seal(entry_key(ns, name), content_of(doc)))
    assert reader.get("resp_newer") == as_shared(rich_entry("resp_newer"))
    assert reader.get("resp_older") == as_shared(
        rich_entry("resp_older", held_calls=(), held_outputs=(), held_partial=True)
    )
    assert counts(reader, "undecodable", "forged") == {"undecodable": 0, "forged": 0}


# -- forged and moved values ---------------------------------------------------------------------------------


def test_a_genuine_value_moved_to_another_key_is_rejected(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    """The MAC binds the full key name: a value copied under another name is forged, whatever its content."""
    writer = make()
    older = rich_entry("resp_older", sequence=1, conversation_id="conv_2", parent_id=None)
    writer.record(older, None)
    writer.record(rich_entry(), "resp_parent")
    assert writer.flush(5)
    ns = writer.namespace
    stored = keys_and_values(admin)
    moves = {
        f"{ns}:{{resp_rich}}:r": f"{ns}:{{conv_1}}:c",  # an entry as its conversation's latest
        f"{ns}:{{resp_older}}:r": f"{ns}:{{conv_2}}:c",
        f"{ns}:{{conv_1}}:c": f"{ns}:{{conv_9}}:c",
        f"{ns}:{{msg_1}}:i": f"{ns}:{{msg_9}}:i",  # a location under another item
        f"{ns}:{{function_call:call_abc}}:t": f"{ns}:{{custom_tool_call:call_abc}}:t",
        f"{ns}:{{{2**64 - 1:016x}}}:f": f"{ns}:{{{12345:016x}}}:f",
        f"{ns}:{{resp_parent}}:k": f"{ns}:{{resp_rich}}:k",  # a continued-marker on another response
    }
    admin.mset({target: stored[source] for source, target in moves.items()})
    reader = make()
    assert reader.latest_in_conversation("conv_1") is None
    assert reader.latest_in_conversation("conv_2") is None
    assert reader.latest_in_conversation("conv_9") is None
    assert reader.has_child("resp_rich") is False
    found = reader.places(["msg_9", ("custom_tool_call", "call_abc"), 12345])
    assert found == [(), (), ()]
    assert counts(reader, "forged", "undecodable") == {"forged": 7, "undecodable": 0}
    # The genuine values under their own names still read.
    assert reader.get("resp_rich") is not None
    assert reader.has_child("resp_parent") is True


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda key, content: Codec(ATTACKER).seal(key, content), id="sealed-with-another-key"),
        pytest.param(lambda key, content: b"v1." + b"A" * 22 + b"." + content, id="made-up-mac"),
        pytest.param(lambda key, content: b"v1." + b"A" * 21 + b"." + content, id="short-mac"),
        pytest.param(lambda key, content: b"v1.." + content, id="no-mac"),
        pytest.param(
            lambda key, content: Codec(FLEET).seal(key, b"{}")[:26] + content, id="a-real-mac-of-other-content"
        ),
    ],
)
def test_a_forged_value_of_every_kind_is_ignored_and_counted(
    forge: Callable[[str, bytes], bytes], admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    reader = make()
    ns = reader.namespace
    assert ns is not None
    content = content_of(entry_fields(rich_entry()))
    admin.mset(
        {
            f"{ns}:{{resp_rich}}:r": forge(f"{ns}:{{resp_rich}}:r", content),
            f"{ns}:{{conv_1}}:c": forge(f"{ns}:{{conv_1}}:c", content),
            f"{ns}:{{msg_1}}:i": forge(f"{ns}:{{msg_1}}:i", b"1:resp_rich"),
            f"{ns}:{{function_call:call_abc}}:t": forge(f"{ns}:{{function_call:call_abc}}:t", b"2:resp_rich"),
            f"{ns}:{{{2**64 - 1:016x}}}:f": forge(f"{ns}:{{{2**64 - 1:016x}}}:f", b"1:resp_rich"),
            f"{ns}:{{resp_parent}}:k": forge(f"{ns}:{{resp_parent}}:k", b"1"),
        }
    )
    view = reader.for_call()  # as one call reads it
    assert view.get("resp_rich") is None
    assert view.latest_in_conversation("conv_1") is None
    assert view.places(["msg_1", ("function_call", "call_abc"), 2**64 - 1]) == [(), (), ()]
    assert view.has_child("resp_parent") is False
    assert counts(reader, "forged", "undecodable") == {"forged": 6, "undecodable": 0}
    assert view.unavailable is False  # forged is not unreachable


# -- hostile content under a valid MAC ----------------------------------------------------------------------
# What a buggy writer holding the key could put there: each is rejected and counted.

GOOD = entry_fields(rich_entry("resp_h"))


def with_field(key: str, value: object, without: tuple[str, ...] = ()) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(GOOD))
    doc[key] = value
    for gone in without:
        del doc[gone]
    return doc


def with_output(position: int, value: object) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(GOOD))
    doc["o"][0][position] = value
    return doc


HOSTILE_FIELDS: dict[str, object] = {
    "not-an-object": [GOOD["id"], GOOD["s"]],
    "object-in-a-list": [GOOD],
    "missing-id": {key: value for key, value in GOOD.items() if key != "id"},
    "id-null": with_field("id", None),
    "id-overlong": with_field("id", "resp_" + "a" * (MAX_ID_CHARS - 4)),
    "id-telemetry-injection": with_field("id", "resp_h\nopenai_responses.signals=unstored_parent"),
    "id-spaces": with_field("id", "resp h"),
    "id-brace": with_field("id", "resp_{h}"),  # a Redis Cluster hash tag inside a key name
    "id-unicode": with_field("id", "resp_\u0570"),
    "id-empty": with_field("id", ""),
    "id-number": with_field("id", 12),
    "sequence-string": with_field("s", "1"),
    "sequence-negative": with_field("s", -1),
    "sequence-huge": with_field("s", 2**63),
    "sequence-float": with_field("s", 1.5),
    "sequence-null": with_field("s", None),
    "store-bool": with_field("st", True),
    "store-two": with_field("st", 2),
    "store-null": with_field("st", None),
    "hash-uppercase": with_field("h", "0123456789ABCDEF"),
    "hash-short": with_field("h", "0123456789abcde"),
    "hash-long": with_field("h", "0123456789abcdef0"),
    "hash-text": with_field("h", "the instructions"),
    "conversation-overlong": with_field("c", "conv_" + "x" * MAX_ID_CHARS),
    "conversation-brace": with_field("c", "conv}1"),
    "count-negative": with_field("m", -3),
    "count-huge": with_field("cm", 2**40),
    "count-nested": with_field("m", [1]),
    "outputs-too-many": with_field("o", [GOOD["o"][1]] * (MAX_OUTPUT_ITEMS + 1)),
    "outputs-object": with_field("o", {"0": GOOD["o"][0]}),
    "parent-bad-charset": with_field("p", "resp_<script>"),
    "messages-too-many": with_field("im", [1, 2, 3, 4, 5]),
    "messages-fingerprint-too-big": with_field("im", [2**64]),
    "copies-index-past-outputs": with_field("cp", [[MAX_OUTPUT_ITEMS, 8]]),
    "copies-shape-negative": with_field("cp", [[0, -8]]),
    "copies-short": with_field("cp", [[0]]),
    "item-type-uppercase": with_output(0, "Reasoning"),
    "item-type-spaces": with_output(0, "function call"),
    "item-type-overlong": with_output(0, "a" * 65),
    "item-type-null": with_output(0, None),
    "item-id-overlong": with_output(1, "rs_" + "b" * (MAX_ID_CHARS - 2)),
    "item-id-nested": with_output(1, ["rs_1"]),
    "call-id-bad": with_output(2, "call 1"),
    "role-uppercase": with_output(3, "Assistant"),
    "phase-text": with_output(4, "the final answer"),
    "encrypted-two": with_output(5, 2),
    "fingerprint-negative": with_output(6, -1),
    "awaits-bool": with_output(7, True),
    "shape-huge": with_output(8, 2**40),
    "item-short": with_field("o", [GOOD["o"][0][:8]]),
    "item-long": with_field("o", [[*GOOD["o"][0], None]]),
    "item-object": with_field("o", [{"type": "message"}]),
    # The lineage: its turn, its id, the span that made it (a trace and a span id, both or neither).
    "lineage-object": with_field("t", {"turn": 1}),
    "turn-negative": with_field("t", -1),
    "turn-string": with_field("t", "1"),
    "turn-huge": with_field("t", 2**40),
    "lineage-injection": with_field("l", "conv_1\nopenai_responses.turn=1"),
    "lineage-overlong": with_field("l", "conv_" + "x" * MAX_ID_CHARS),
    "trace-uppercase": with_field("tr", "F" * 32),
    "trace-short": with_field("tr", "f" * 31),
    "trace-without-span": with_field("tr", "f" * 32, without=("sp",)),
    "span-long": with_field("sp", "f" * 17),
    "span-without-trace": with_field("sp", "f" * 16, without=("tr",)),
    "trace-number": with_field("tr", 2**100),
    # What an entry says beyond its items.
    "deleted-object": with_field("d", {"deleted": 1}),
    "deleted-list": with_field("d", [1]),
    "deleted-bool": with_field("d", True),
    "written-two": with_field("w", 2),
    "system-string": with_field("ss", "1"),
    "instructed-injection": with_field("ii", "resp_1\nopenai_responses.signals=x"),
    "instructed-turn-negative": with_field("it", -1),
    "turn-without-response": with_field("it", 3, without=("ii",)),
    # The calls the state holds, the outputs a replay gave, the system messages.
    "held-not-a-list": with_field("hc", {"calls": []}),
    "held-partial-list": with_field("hp", [1]),
    "held-partial-bool": with_field("hp", True),
    "held-partial-two": with_field("hp", 2),
    "held-call-id-bad": with_field("hc", ["call 1"]),
    "held-call-id-injection": with_field("hc", ["call_1\nopenai_responses.signals=x"]),
    "held-call-id-number": with_field("hc", [1]),
    "held-too-many-calls": with_field("hc", [f"call_{n}" for n in range(MAX_HELD_CALLS + 1)]),
    "held-too-many-answered": with_field("ho", [f"call_{n}" for n in range(MAX_HELD_CALLS + 1)]),
    "given-not-a-list": with_field("g", {"call_1": [1, 2]}),
    "given-too-many": with_field("g", [[f"call_{n}", 1, 1] for n in range(MAX_GIVEN_OUTPUTS + 1)]),
    "given-short": with_field("g", [["call_1", 1]]),
    "given-call-id-bad": with_field("g", [["call{1}", 1, 1]]),
    "given-length-negative": with_field("g", [["call_1", -1, 1]]),
    "given-length-huge": with_field("g", [["call_1", 2**33, 1]]),
    "given-fingerprint-too-big": with_field("g", [["call_1", 1, 2**64]]),
    "given-fingerprint-string": with_field("g", [["call_1", 1, "ffff"]]),
    "systems-negative": with_field("sy", -1),
    "systems-null": with_field("sy", None),
    "systems-bool": with_field("sy", True),
    # The app messages the request was given, one keyed fingerprint.
    "given-messages-too-big": with_field("gm", 2**64),
    "given-messages-negative": with_field("gm", -1),
    "given-messages-string": with_field("gm", "ffffffffffffffff"),
    "given-messages-list": with_field("gm", [1]),
    "given-messages-bool": with_field("gm", True),
    # What the response was made by and what its usage said.
    "model-brace": with_field("md", "gpt-{5}"),
    "model-injection": with_field("md", "gpt-5\nopenai_responses.signals=x"),
    "resolved-model-number": with_field("rm", 5),
    "context-text": with_field("rc", "all turns"),
    "context-uppercase": with_field("rc", "ALL_TURNS"),
    "input-tokens-negative": with_field("ti", -1),
    "output-tokens-string": with_field("to", "340"),
    "tokens-huge": with_field("ti", 2**40),
    "reasoning-held-float": with_field("rh", 1.5),
    "reasoning-turn-null": with_field("rt", None),
    "tools-fingerprint-too-big": with_field("tf", 2**64),
    "tools-fingerprint-hex": with_field("tf", "ffff"),
    # Whom the request was made as: keyed fingerprints of 32 bits.
    "organization-too-big": with_field("og", 2**32),
    "project-string": with_field("pj", "proj_1"),
    "credential-negative": with_field("cr", -1),
    "endpoint-list": with_field("ep", [1]),
}
HOSTILE_BYTES: dict[str, bytes] = {
    "not-json": b"not json at all",
    "not-ascii": b'{"id":"resp_h\xff"}',
    "deep": b"[" * 5000 + b"]" * 5000,
    "deep-object": b'{"zz":' * 5000 + b"1" + b"}" * 5000,
    "huge": b'{"id":"resp_h","zz":[' + b"1," * 20_000 + b"1]}",
    "int-of-5000-digits": b'{"id":"resp_h","s":' + b"9" * 5000 + b"}",
    "nan": content_of(with_field("s", float("nan"))),
    "empty": b"",
}


def _hostile_cases() -> list[Any]:
    cases = [pytest.param(content_of(doc), id=name) for name, doc in HOSTILE_FIELDS.items()]
    return cases + [pytest.param(raw, id=name) for name, raw in HOSTILE_BYTES.items()]


@pytest.mark.parametrize("content", _hostile_cases())
def test_hostile_entry_content_is_rejected_and_counted(
    content: bytes, admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    assert decode_entry(content) is None
    reader = make()
    ns = reader.namespace
    assert ns is not None
    admin.set(f"{ns}:{{resp_h}}:r", Codec(FLEET).seal(f"{ns}:{{resp_h}}:r", content))
    assert reader.get("resp_h") is None
    assert counts(reader, "undecodable", "forged") == {"undecodable": 1, "forged": 0}


def test_the_hostile_table_starts_from_a_good_entry(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    """The cases above fail for what they change, not for the base they change."""
    good = content_of(GOOD)
    assert decode_entry(good) == as_shared(rich_entry("resp_h"))
    reader = make()
    ns = reader.namespace
    admin.set(f"{ns}:{{resp_h}}:r", Codec(FLEET).seal(f"{ns}:{{resp_h}}:r", good))
    assert reader.get("resp_h") is not None
    # Their near misses decode: the bounds themselves, a field's null where it may be none.
    for doc in (
        with_field("o", [GOOD["o"][1]] * MAX_OUTPUT_ITEMS),
        with_field("hc", [f"call_{n}" for n in range(MAX_HELD_CALLS)]),
        with_field("g", [[f"call_{n}", 2**32 - 1, 2**64 - 1] for n in range(MAX_GIVEN_OUTPUTS)]),
        with_field("cp", [[MAX_OUTPUT_ITEMS - 1, 2**40 - 1]]),
        with_field("s", 2**63 - 1),
        with_field("im", [1, 2, 3, 2**64 - 1]),
        with_field("id", "resp_" + "a" * (MAX_ID_CHARS - 5)),
        with_field("h", None),
        with_field("p", None),
        with_field("tr", None, without=("sp",)),
        with_field("ii", None, without=("it",)),
    ):
        assert entry_from_fields(doc) is not None, doc


@pytest.mark.parametrize(
    "content",
    [
        b"99:resp_h",
        b"32:resp_h",
        b"-1:resp_h",
        b"+1:resp_h",
        b"1_0:resp_h",
        b" 1:resp_h",
        b"007:resp_h",
        b"0:",
        b":resp_h",
        b"0",
        b"0:resp h",
        b"0:resp_h\n",
        b"0:" + b"r" * (MAX_ID_CHARS + 1),
        b"0:resp_\xc3\xa9",
        "\uff10:resp_h".encode(),  # a fullwidth digit, which int() takes
        b"0:" + b"r" * 3000,
        b"1,0:resp_h",  # several positions must ascend
        b"0,0:resp_h",
        b"0,:resp_h",
        b",0:resp_h",
        b"0,32:resp_h",
    ],
)
def test_hostile_location_content_is_rejected_and_counted(
    content: bytes, admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    reader = make()
    ns = reader.namespace
    genuine = make()
    genuine.record(rich_entry("resp_h"), None)
    assert genuine.flush(5)
    admin.set(f"{ns}:{{item_h}}:i", Codec(FLEET).seal(f"{ns}:{{item_h}}:i", content))
    admin.set(f"{ns}:{{item_u}}:i", content)  # not sealed at all
    assert reader.places(["item_h", "item_u"]) == [(), ()]
    assert counts(reader, "undecodable", "forged") == {"undecodable": 2, "forged": 0}


def test_hostile_marker_content_is_rejected(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    reader = make()
    ns = reader.namespace
    for n, content in enumerate((b"0", b"", b"11", b"1" * 100, b"yes")):
        admin.set(f"{ns}:{{resp_{n}}}:k", Codec(FLEET).seal(f"{ns}:{{resp_{n}}}:k", content))
        assert reader.has_child(f"resp_{n}") is False
    assert counts(reader, "undecodable", "forged") == {"undecodable": 5, "forged": 0}


# -- the same rules on write ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"response_id": "resp_" + "a" * (MAX_ID_CHARS - 4)},
        {"response_id": "resp with spaces"},
        {"conversation_id": "conv{1}"},
        {"instructions_hash": "not-a-hash"},
        {"input_app_messages": 2**33},
        {"outputs": (ItemMeta("message", "msg 1", None, "assistant", None, False),)},
        {"outputs": (ItemMeta("message", "msg_1", None, "Assistant", None, False),)},
        {"outputs": (ItemMeta("Odd Type", "x_1", None, None, None, False),)},
        {"outputs": (ItemMeta("function_call", "fc_1", "call 1", None, None, False, None, True),)},
        {"parent_id": "resp\u00e9"},
        {"span_id": None},
        {"instructed_id": None},
    ],
    ids=lambda changes: next(iter(changes)),
)
def test_an_entry_a_reader_would_reject_is_kept_local(
    changes: dict[str, Any], admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    entry = rich_entry(**changes)
    assert not shareable(entry)
    assert encode_entry(entry) is None
    ledger = make()
    ledger.record(entry, None)
    assert ledger.flush(5)
    assert keys_and_values(admin) == {}
    assert ledger.get(entry.response_id) == entry  # the local tier has it, as recorded
    assert counts(ledger, "local_only", "writes", "dropped") == {"local_only": 1, "writes": 0, "dropped": 0}


def test_a_parent_id_a_reader_would_reject_keeps_the_entry_local(
    admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    ledger = make()
    ledger.record(rich_entry(parent_id=None), "resp with spaces")
    assert ledger.flush(5)
    assert keys_and_values(admin) == {}
    assert ledger.stats()["local_only"] == 1


def test_what_one_process_writes_another_reads(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    """Whatever passes the write rules decodes whole on the other side, trimmed or not."""
    variants = [
        rich_entry(),
        rich_entry("resp_min", instructions_hash=None, conversation_id=None, parent_id=None, outputs=(), copies=()),
        rich_entry("resp_" + "a" * (MAX_ID_CHARS - 5), sequence=2**63 - 1, input_app_messages=2**32 - 1),
        rich_entry(
            "a.b:c-D_9", outputs=tuple(ItemMeta("x" * 64, f"i_{n}", None, "z" * 64, None, False) for n in range(3))
        ),
        Entry("resp_bare"),
        rich_entry("resp_app", written_by_app=True, deleted=True, store=False, turn=0),
    ]
    writer = make()
    for entry in variants:
        assert shareable(entry), entry.response_id
        writer.record(dataclasses.replace(entry, conversation_id=None), None)
    assert writer.flush(5)
    reader = make()
    for entry in variants:
        assert reader.get(entry.response_id) == dataclasses.replace(entry, conversation_id=None, shared=True)
    assert counts(reader, "undecodable", "forged") == {"undecodable": 0, "forged": 0}


def test_ids_of_the_recorded_api_traffic_and_the_emulator_pass(client: openai.OpenAI) -> None:
    """Every id in the recorded traffic (responses, items, calls, conversations) may be shared; so may every id the
    emulator makes, and every item type, role and phase the API returns."""
    pattern = re.compile(
        r'\\?"(id|call_id|previous_response_id|conversation|response_id|item_id|approval_request_id)\\?"\s*:'
        r'\s*\\?"([^"\\]*)\\?"'
    )
    ids = {
        match[2]
        for path in CASSETTES.rglob("*")
        if path.is_file()
        for match in pattern.finditer(path.read_text(errors="replace"))
    }
    assert len(ids) > 1000
    assert [value for value in ids if not is_id(value)] == []
    conversation = client.conversations.create()
    response = client.responses.create(
        model=MODEL, input=[tool_request()], tools=TOOLS, conversation=conversation.id, instructions=INSTRUCTIONS
    )
    made = [conversation.id, response.id, *(item.id for item in response.output)]
    made += [getattr(item, "call_id", None) or "call_x" for item in response.output]
    assert all(map(is_id, made)), made
    tokens = {"reasoning", "message", "function_call", "assistant", "commentary", "final_answer", "compaction"}
    entry = rich_entry(outputs=tuple(ItemMeta(t, None, None, t, t, False) for t in tokens))
    assert shareable(entry)


# -- the key layout ------------------------------------------------------------------------------------------


def test_key_names_carry_a_hash_tag_of_their_own() -> None:
    """`{prefix}:{key id}:{tag}:{kind}`: one tag per response (entry and continued-marker in one slot), per
    conversation, per item; never one tag common to every key (a single hot shard)."""
    ns = "otel-responses:0123456789ab"
    assert entry_key(ns, "resp_1") == "otel-responses:0123456789ab:{resp_1}:r"
    assert marker_key(ns, "resp_1") == "otel-responses:0123456789ab:{resp_1}:k"
    assert conversation_key(ns, "conv_1") == "otel-responses:0123456789ab:{conv_1}:c"
    assert location_key(ns, "msg_1") == "otel-responses:0123456789ab:{msg_1}:i"
    assert location_key(ns, ("function_call", "call_1")) == "otel-responses:0123456789ab:{function_call:call_1}:t"
    assert location_key(ns, 2**64 - 1) == "otel-responses:0123456789ab:{ffffffffffffffff}:f"
    assert location_key(ns, "msg{1}") is None  # no brace ever reaches a key name from an id
    assert key_slot(entry_key(ns, "resp_1").encode()) == key_slot(marker_key(ns, "resp_1").encode())
    slots = {key_slot(entry_key(ns, f"resp_{n}").encode()) for n in range(64)}
    assert len(slots) > 32  # spread over the cluster, not one slot


def test_an_entry_the_app_wrote_is_never_a_place(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    """Items the app wrote into a conversation answer conversation-mode questions, never where a replayed item came
    from: none of their locations is written, and a location naming such an entry finds nothing."""
    writer = make()
    written = rich_entry("conversation-items:conv_1:9", parent_id=None, written_by_app=True)
    writer.record(written, None)
    assert writer.flush(5)
    ns = writer.namespace
    assert ns is not None
    assert {name.rsplit(":", 1)[1] for name in keys_and_values(admin)} == {"r", "c"}
    call = location_key(ns, ("function_call", "call_abc"))
    assert call is not None
    admin.set(call, Codec(FLEET).seal(call, f"2:{written.response_id}".encode()))
    fresh = make()
    got = fresh.get(written.response_id)
    assert got is not None
    assert got.written_by_app is True
    assert fresh.places([("function_call", "call_abc")]) == [()]


# -- the calls the state holds, the outputs a replay gave ------------------------------------------------------


def test_the_held_calls_and_given_outputs_are_written_as_documented() -> None:
    entry = rich_entry()
    doc = entry_fields(entry)
    assert (doc["hc"], doc["ho"], doc["hp"], doc["g"], doc["sy"]) == (
        ["call_old", "call_abc"],
        ["call_old"],
        0,
        [["call_old", 4096, 2**64 - 1]],
        2,
    )
    # Nothing held and nothing dropped (a first turn without tools): said; nothing known: left out (the default).
    bare = rich_entry(held_calls=(), held_outputs=(), held_partial=False, given_outputs=(), input_system_messages=0)
    assert [entry_fields(bare).get(key) for key in ("hc", "ho", "hp", "g", "sy")] == [None, None, 0, None, None]
    assert decode_entry(content_of(entry_fields(bare))) == as_shared(bare)
    unknown = rich_entry(held_calls=(), held_outputs=(), held_partial=True)
    assert "hp" not in entry_fields(unknown)
    # The hash this process keeps of a given output's text is never written.
    local = rich_entry(given_outputs=(GivenOutput("call_old", 4096, 7, local=-12345),))
    assert entry_fields(local)["g"] == [["call_old", 4096, 7]]
    read = decode_entry(content_of(entry_fields(local)))
    assert read is not None
    assert read.given_outputs == (GivenOutput("call_old", 4096, 7, None),)


def test_an_apps_own_call_id_a_reader_would_reject_is_left_out_of_the_shared_value(
    admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    """The held calls and the given outputs carry the app's own call_ids from its inputs, turn after turn: one that
    fails the id rule is left out of the shared value (the held calls then say the state may hold others), so the
    entry and the chain after it are still shared. The local tier keeps the entry as recorded."""
    odd = rich_entry(
        "resp_odd",
        held_calls=("call_old", "call 1"),
        held_outputs=("call{1}", "call_old"),
        given_outputs=(GivenOutput("call 1", 4096, 7), GivenOutput("call_old", 4096, 2**64 - 1)),
    )
    later = rich_entry("resp_later", parent_id="resp_odd", held_calls=("call 1", "call_new"), held_outputs=())
    whole = rich_entry("resp_whole")  # near miss: every id passes, the value is whole
    writer = make()
    for entry in (odd, later, whole):
        assert shareable(entry), entry.response_id
        writer.record(entry, entry.parent_id)
    assert writer.flush(5)
    assert writer.get("resp_odd") == odd
    reader = make()
    read = [reader.get(name) for name in ("resp_odd", "resp_later", "resp_whole")]
    assert [(e.held_calls, e.held_outputs, e.held_partial) if e else None for e in read] == [
        (("call_old",), ("call_old",), True),
        (("call_new",), (), True),
        (("call_old", "call_abc"), ("call_old",), False),
    ]
    assert [e.given_outputs if e else None for e in read] == [
        (GivenOutput("call_old", 4096, 2**64 - 1),),
        whole.given_outputs,
        whole.given_outputs,
    ]
    assert counts(reader, "undecodable", "forged") == {"undecodable": 0, "forged": 0}


def test_an_entry_that_lists_no_held_calls_knows_no_call_beyond_its_own(
    admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    """An entry without the held calls (a writer that did not know them, or one that left them out for size) says
    its state may hold others: an output whose call is not among its own outputs is then no orphan (its chain may hold
    it); an entry that holds the chain's calls still names one."""
    reader = make()
    ns = reader.namespace
    assert ns is not None
    answer = ItemMeta("message", "msg_9", None, "assistant", None, False, 9)
    entry = rich_entry("resp_few", outputs=(answer,), copies=(), held_calls=("call_old",), held_outputs=("call_old",))
    doc = {key: value for key, value in entry_fields(entry).items() if key not in ("hc", "ho", "hp")}
    name = entry_key(ns, "resp_few")
    admin.set(name, Codec(FLEET).seal(name, content_of(doc)))
    read = reader.get("resp_few")
    assert read == as_shared(dataclasses.replace(entry, held_calls=(), held_outputs=(), held_partial=True))
    whole = make()
    whole.record(dataclasses.replace(entry, response_id="resp_whole"), None)
    assert whole.flush(5)
    for parent, orphan, resent in (
        ("resp_few", [], []),
        ("resp_whole", ["orphan_tool_output"], ["context_duplicated"]),
    ):
        assert chained_signals(make(), parent, "call_9") == orphan, parent
        # An output the chain already answered (held by the whole entry only) is sent twice.
        assert chained_signals(make(), parent, "call_old") == resent, parent


def chained_signals(ledger: RedisLedger, parent: str, call_id: str) -> list[str]:
    """The request-side signals of a request chained to ``parent`` that sends one tool output, as a call of another
    process of the fleet checks it."""
    from otel_responses._analysis.analysis import analyse
    from otel_responses._analysis.checks import Situation, run_request_checks
    from otel_responses._analysis.facts import request_facts
    from otel_responses.config import settings_from

    output = {"type": "function_call_output", "call_id": call_id, "output": "x"}
    req = request_facts(
        "chat", {"model": MODEL, "previous_response_id": parent, "input": [output]}, settings_from({"hash_key": KEY})
    )
    raised = run_request_checks(req, analyse(req, ledger.for_call()), Situation(False, False))
    assert all(not s.refusable for s in raised)  # facts read from a shared store
    return [s.name for s in raised]


# -- the size bound --------------------------------------------------------------------------------------------


def api_sized_entry(id_chars: int = 55, call_id_chars: int = 29) -> Entry:
    """An entry with every bounded field full: 32 output items, 32 held calls and answered calls, 16 given outputs,
    4 input messages, ids of ``id_chars`` (the longest of the recorded traffic: 55) and call ids of ``call_id_chars``
    (the API's: 29)."""

    def named(prefix: str, chars: int, n: int) -> str:
        return f"{prefix}_{n:02d}".ljust(chars, "x")

    outputs = tuple(
        ItemMeta(
            "function_call", named("fc", id_chars, n), named("call", call_id_chars, n), None, None, False, None, True
        )
        for n in range(MAX_OUTPUT_ITEMS)
    )
    held = tuple(named("call_h", call_id_chars, n) for n in range(MAX_HELD_CALLS))
    given = tuple(
        GivenOutput(named("call_g", call_id_chars, n), 2**32 - 1, 2**64 - 1) for n in range(MAX_GIVEN_OUTPUTS)
    )
    return rich_entry(
        named("resp", id_chars, 0), sequence=2**63 - 1, conversation_id=named("conv", id_chars, 0), outputs=outputs,
        copies=(), parent_id=named("resp_p", id_chars, 0), input_messages=(2**64 - 1,) * 4, turn=2**32 - 1,
        lineage_id=named("resp_l", id_chars, 0), instructed_id=named("resp_i", id_chars, 0),
        instructed_turn=2**32 - 1, held_calls=held, held_outputs=held, given_outputs=given,
        input_system_messages=2**32 - 1, input_app_messages=2**32 - 1, input_compactions=2**32 - 1,
        store=False, deleted=True, written_by_app=True, model="gpt-5.4-mini-2026-03-17",
        resolved_model="gpt-5.4-mini-2026-03-17", reasoning_context="current_turn", input_tokens=2**32 - 1,
        output_tokens=2**32 - 1, reasoning_held=2**32 - 1, reasoning_turn=2**32 - 1, tools_fingerprint=2**64 - 1,
        organization=2**32 - 1, project=2**32 - 1, credential=2**32 - 1, endpoint=2**32 - 1,
    )  # fmt: skip


def test_an_entry_with_every_bound_full_and_the_apis_ids_fits_whole() -> None:
    """Every field but the copies' shapes away from its default, every bound full, every number at its largest: the
    whole entry fits under the entry size limit."""
    entry = api_sized_entry()
    assert [row.key for row in FIELDS if row.key not in entry_fields(entry)] == ["cp"]
    encoded = encode_entry(entry)
    assert encoded is not None
    content, kept = encoded
    sealed = Codec(FLEET).seal("otel-responses:abc:{resp}:r", content)
    assert len(sealed) <= DEFAULT_MAX_ENTRY_BYTES
    assert kept == MAX_OUTPUT_ITEMS
    assert decode_entry(content) == as_shared(entry)  # nothing left out


def test_an_entry_with_every_bound_full_and_a_gateways_ids_keeps_what_the_rules_keep() -> None:
    """The same entry behind a gateway: its response, parent, lineage and instructed turn named by litellm's ids (249
    characters: the longest with the Router's deployment ids and the API's), its items and calls the API's. It leaves
    out only the given outputs; with the ids LiteLLM Proxy gives its HTTP clients (about 600 characters) the held calls
    too (saying the state may hold others). Every output item is kept."""
    api = api_sized_entry()
    for chars, held in ((249, True), (601, False)):
        response, parent, lineage = (f"resp_{n}".ljust(chars, "x") for n in ("r", "p", "l"))
        entry = dataclasses.replace(
            api, response_id=response, parent_id=parent, lineage_id=lineage, instructed_id=lineage, conversation_id=None
        )
        seen: list[str] = []
        codec = Codec(FLEET, count=seen.append)
        name, value = codec.commands("otel-responses:abc", entry, None)[0]
        assert len(value) <= DEFAULT_MAX_ENTRY_BYTES
        read = codec.entry(name, value)
        assert read is not None
        assert seen == ["trimmed"]
        assert (read.outputs, read.given_outputs) == (entry.outputs, ())
        assert (read.held_calls, read.held_partial) == ((entry.held_calls, False) if held else ((), True)), chars


def test_the_largest_entry_stays_under_the_entry_size_limit() -> None:
    """Every id at the longest a shared value may hold (``MAX_ID_CHARS``): the sealed value stays within the limit,
    leaving out the given outputs, then the held calls (saying the state may hold others), then the output items that
    do not fit; what is read back is then never evidence of an orphan. A limit too small for the entry even without
    its output items (five ids of that length) writes nothing, counted ``dropped``: missed, never false."""
    entry = api_sized_entry(MAX_ID_CHARS, MAX_ID_CHARS)
    items = entry_fields(entry)["o"]
    seen: list[str] = []
    kept: list[int] = []
    for limit in (DEFAULT_MAX_ENTRY_BYTES, 16384, 65536):
        codec = Codec(FLEET, max_entry_bytes=limit, count=seen.append)
        commands = codec.commands("otel-responses:abc", entry, None)
        name, value = commands[0]
        assert name.endswith(":r")
        assert len(value) <= limit
        read = codec.entry(name, value)
        assert read is not None
        assert read.given_outputs == ()
        assert (read.held_calls, read.held_partial) == ((), True)
        assert 0 < len(read.outputs) < MAX_OUTPUT_ITEMS
        assert read.outputs == entry.outputs[: len(read.outputs)]
        assert len(value) + 1 + len(json.dumps(items[len(read.outputs)], separators=(",", ":"))) > limit  # no room
        assert read.input_system_messages == entry.input_system_messages
        kept.append(len(read.outputs))
    assert kept == sorted(set(kept))
    assert seen == ["trimmed"] * 3
    assert Codec(FLEET, max_entry_bytes=4096, count=seen.append).commands("otel-responses:abc", entry, None) == []
    assert seen[3:] == ["dropped"]
    # Given outputs alone too many: only they are left out.
    roomy = api_sized_entry(55, 29)
    roomy = dataclasses.replace(
        roomy, given_outputs=tuple(g._replace(call_id=g.call_id.ljust(128, "y")) for g in roomy.given_outputs)
    )
    encoded = encode_entry(roomy)
    assert encoded is not None
    read = decode_entry(encoded[0])
    assert read is not None
    assert (read.given_outputs, read.held_calls, read.held_partial) == ((), roomy.held_calls, False)
