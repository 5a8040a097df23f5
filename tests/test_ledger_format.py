"""The shared ledger's value format: every value sealed with a MAC under a key derived from the fleet's
hash key, one table of readable formats, and every field checked against the API's shapes on read and on write.

Against a real `redis-server` on 127.0.0.1 (as in tests/test_redis_ledger.py). The previous release's format (2) is
written and read here by a frozen copy of its encoder and decoder (byte-exact to the release's `encode_entry`,
location values `index:response_id` and continued-marker `1`), so a rolling deploy is tested both ways without the
old release installed.
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
    FORMAT,
    FORMATS,
    MAC_PURPOSE,
    MAX_ID_CHARS,
    Codec,
    conversation_key,
    decode_entry,
    encode_entry,
    entry_fields,
    entry_key,
    is_id,
    legacy_key,
    location_key,
    marker_key,
    shareable,
)
from otel_responses.ledger.redis import COUNTS, RedisLedger
from otel_responses.testing import CapturedTelemetry, capture

from .ledger_scenarios import INSTRUCTIONS, MODEL, TOOLS, tool_request
from .shared_ledger import KEY, RedisServer, server_fixture

CASSETTES = Path(__file__).parent / "real_traffic" / "cassettes"
FLEET = Fingerprinter(key_from_text(KEY))
ATTACKER = Fingerprinter(key_from_text("not-the-fleet-key"))


# -- the previous release's format 2, frozen -----------------------------------------------------------------
# Copied from otel_responses/redis_ledger.py at the release that wrote format 2 (commit 4742b30; checked byte for
# byte against it, by hand, from a worktree of that commit, with trimmed and untrimmed entries). Do not "fix" it:
# it is what the old processes of a rolling deploy run.

V2_MAX_INPUT_MESSAGES = 4
V2_MAX_OUTPUT_ITEMS = 32
V2_MAX_ENTRY_BYTES = 8192
V2_ENTRY_FIELDS = {1: 9, 2: 12}
V2_META_FIELDS = {1: 7, 2: 9}
V2_V1_CALLS = frozenset({"function_call", "custom_tool_call", "computer_call", "shell_call", "apply_patch_call"})
V2_MARKER = b"1"


def _v2_dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def v2_encode_entry(entry: Entry, max_bytes: int = V2_MAX_ENTRY_BYTES) -> tuple[bytes, int] | None:
    head: list[Any] = [
        2,
        entry.response_id,
        entry.sequence,
        int(entry.store),
        entry.instructions_hash,
        entry.conversation_id,
        entry.input_app_messages,
        entry.input_compactions,
    ]
    tail: list[Any] = [entry.parent_id, list(entry.input_messages[-V2_MAX_INPUT_MESSAGES:])]
    outputs = [
        [m.type, m.id, m.call_id, m.role, m.phase, int(m.encrypted), m.fingerprint, int(m.awaits), m.shape]
        for m in entry.outputs[:V2_MAX_OUTPUT_ITEMS]
    ]
    copies = [list(copy) for copy in entry.copies[:V2_MAX_OUTPUT_ITEMS]]
    data = _v2_dumps([*head, outputs, *tail, copies])
    if len(data) <= max_bytes:
        return data, len(outputs)
    size = len(_v2_dumps([*head, [], *tail, []]))
    if size > max_bytes:
        return None
    kept = 0
    for output in outputs:
        size += len(_v2_dumps(output)) + (1 if kept else 0)
        if size > max_bytes:
            break
        kept += 1
    return _v2_dumps([*head, outputs[:kept], *tail, []]), kept


def v2_location(index: int, response_id: str) -> bytes:
    return f"{index}:{response_id}".encode()


def _v2_optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def _v2_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _v2_flag(value: object) -> bool:
    return type(value) is int and value in (0, 1)


def _v2_fingerprint(value: object) -> bool:
    return type(value) is int and 0 <= value <= 2**64 - 1


def _v2_shape(value: object) -> bool:
    return type(value) is int and 0 <= value < 2**40


def _v2_meta(raw: object, version: int) -> ItemMeta | None:
    if not isinstance(raw, list) or len(raw) != V2_META_FIELDS[version]:
        return None
    item_type, item_id, call_id, role, phase, encrypted, fingerprint = raw[:7]
    awaits, shape = raw[7:] if version >= 2 else (0, None)
    if not isinstance(item_type, str) or not all(map(_v2_optional_str, (item_id, call_id, role, phase))):
        return None
    if not _v2_flag(encrypted) or not _v2_flag(awaits):
        return None
    if fingerprint is not None and not _v2_fingerprint(fingerprint):
        return None
    if shape is not None and not _v2_shape(shape):
        return None
    if version == 1:
        awaits = int(item_type in V2_V1_CALLS and call_id is not None)
    return ItemMeta(item_type, item_id, call_id, role, phase, bool(encrypted), fingerprint, bool(awaits), shape)


def v2_decode_entry(raw: object, max_bytes: int = V2_MAX_ENTRY_BYTES) -> Entry | None:
    if not isinstance(raw, (bytes, str)) or len(raw) > max(max_bytes, V2_MAX_ENTRY_BYTES) * 2:
        return None
    try:
        doc = json.loads(raw)
    except Exception:
        return None
    if not isinstance(doc, list) or not doc or type(doc[0]) is not int or doc[0] not in V2_ENTRY_FIELDS:
        return None
    version = doc[0]
    if len(doc) != V2_ENTRY_FIELDS[version]:
        return None
    _, response_id, sequence, store, instructions_hash, conversation_id, app_messages, compactions = doc[:8]
    raw_outputs = doc[8]
    parent_id, raw_messages, raw_copies = doc[9:] if version >= 2 else (None, [], [])
    if not _v2_optional_str(parent_id) or not isinstance(raw_messages, list) or not isinstance(raw_copies, list):
        return None
    if len(raw_messages) > V2_MAX_INPUT_MESSAGES or not all(map(_v2_fingerprint, raw_messages)):
        return None
    if len(raw_copies) > V2_MAX_OUTPUT_ITEMS or not all(
        isinstance(c, list) and len(c) == 2 and _v2_count(c[0]) and c[0] < V2_MAX_OUTPUT_ITEMS and _v2_shape(c[1])
        for c in raw_copies
    ):
        return None
    if not isinstance(response_id, str) or not response_id or type(sequence) is not int:
        return None
    if store not in (0, 1) or type(store) is not int:
        return None
    if not _v2_optional_str(instructions_hash) or not _v2_optional_str(conversation_id):
        return None
    if not _v2_count(app_messages) or not _v2_count(compactions):
        return None
    if not isinstance(raw_outputs, list) or len(raw_outputs) > V2_MAX_OUTPUT_ITEMS:
        return None
    outputs = [_v2_meta(item, version) for item in raw_outputs]
    if any(meta is None for meta in outputs):
        return None
    return Entry(
        response_id=response_id,
        sequence=sequence,
        store=bool(store),
        instructions_hash=instructions_hash,
        conversation_id=conversation_id,
        outputs=tuple(meta for meta in outputs if meta is not None),
        input_app_messages=app_messages,
        input_compactions=compactions,
        parent_id=parent_id,
        input_messages=tuple(raw_messages),
        copies=tuple((index, shape) for index, shape in raw_copies),
    )


def v2_decode_location(raw: object) -> tuple[str, int] | None:
    try:
        text = raw.decode("ascii") if isinstance(raw, bytes) else raw
        if not isinstance(text, str):
            return None
        index, response_id = text.split(":", 1)
        position = int(index)
    except Exception:
        return None
    return (response_id, position) if 0 <= position < V2_MAX_OUTPUT_ITEMS and response_id else None


def v2_commands(namespace: str, entry: Entry, parent_id: str | None) -> dict[str, bytes]:
    """What a process of the previous release writes for one entry (its `_commands`, for ids it made keys of)."""
    encoded = v2_encode_entry(entry)
    assert encoded is not None
    data, kept = encoded
    out = {f"{namespace}:r:{entry.response_id}": data}  # its names, before hash tags (see `legacy_key`)
    for index, meta in enumerate(entry.outputs[:kept]):
        if meta.id is not None:
            out[f"{namespace}:i:{meta.id}"] = v2_location(index, entry.response_id)
        if meta.call_id is not None:
            out[f"{namespace}:t:{meta.type}:{meta.call_id}"] = v2_location(index, entry.response_id)
        if meta.role == "assistant" and meta.fingerprint is not None:
            out[f"{namespace}:f:{meta.fingerprint:016x}"] = v2_location(index, entry.response_id)
    if entry.conversation_id is not None:
        out[f"{namespace}:c:{entry.conversation_id}"] = data
    if parent_id is not None:
        out[f"{namespace}:k:{parent_id}"] = V2_MARKER
    return out


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
        given_outputs=(GivenOutput("call_old", 4096, 2**64 - 1),), input_system_messages=2,
    )  # fmt: skip
    return dataclasses.replace(entry, **changes)


# What an entry of format 5 or older says of the facts format 6 added: none of them.
NO_FACTS: dict[str, Any] = {"instructed_id": None, "instructed_turn": None, "system_in_state": False}
# What an entry of format 6 or older says of the server state's calls, the outputs given and the system messages
# (format 7): no call known beyond its own outputs, none given, no system message counted.
NO_STATE: dict[str, Any] = {
    "held_calls": (),
    "held_outputs": (),
    "held_partial": True,
    "given_outputs": (),
    "input_system_messages": 0,
}


def keys_and_values(admin: redis.Redis) -> dict[str, bytes]:
    names = [key.decode() for key in admin.scan_iter(match="*", count=1000)]
    values = admin.mget(names) if names else []
    return {name: value for name, value in zip(names, values, strict=True) if isinstance(value, bytes)}


def counts(ledger: RedisLedger, *names: str) -> dict[str, int]:
    return {name: ledger.stats()[name] for name in names}


# -- the byte layout -----------------------------------------------------------------------------------------


def expected_mac(key: str, content: bytes, fingerprinter: Fingerprinter = FLEET, version: int = 7) -> bytes:
    """The MAC as documented, computed here independently of the codec."""
    digest = hashlib.blake2b(key=fingerprinter.derive(MAC_PURPOSE), digest_size=16, person=b"otelr-ledger")
    name = key.encode()
    digest.update(version.to_bytes(2, "big") + len(name).to_bytes(4, "big") + name + content)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=")


def test_every_value_kind_is_sealed_as_documented(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    """`v7.{22-char base64url MAC}.{content}`: entries (and conversation pointers) compact JSON of their fields,
    locations `index,index...:response_id`, markers `1`; the MAC over the version, the full key name and the
    content."""
    assert FORMAT == 7
    ledger = make()
    entry = rich_entry()
    ledger.record(entry, "resp_parent")
    assert ledger.flush(5)
    stored = keys_and_values(admin)
    ns = ledger.namespace
    kinds = {name.rsplit(":", 1)[1] for name in stored}
    assert kinds == {"r", "i", "t", "f", "c", "k"}
    layout = re.compile(rb"v7\.([A-Za-z0-9_-]{22})\.(.+)", re.S)
    for name, value in stored.items():
        match = layout.fullmatch(value)
        assert match is not None, (name, value)
        assert match[1] == expected_mac(name, match[2]), name
    content = json.dumps(entry_fields(entry), separators=(",", ":")).encode()
    assert stored[f"{ns}:{{resp_rich}}:r"] == b"v7." + expected_mac(f"{ns}:{{resp_rich}}:r", content) + b"." + content
    assert stored[f"{ns}:{{conv_1}}:c"].endswith(b"." + content)
    assert stored[f"{ns}:{{msg_1}}:i"].endswith(b".1:resp_rich")
    assert stored[f"{ns}:{{rs_1}}:i"].endswith(b".0,4:resp_rich")  # both positions of the repeated id
    assert stored[f"{ns}:{{function_call:call_abc}}:t"].endswith(b".2:resp_rich")
    assert stored[f"{ns}:{{{2**64 - 1:016x}}}:f"].endswith(b".1:resp_rich")
    assert stored[f"{ns}:{{resp_parent}}:k"].endswith(b".1")
    assert ledger.stats()["writes"] == 1
    # Read back by another process of the fleet: every field, marked as read from a shared store.
    reader = make()
    assert reader.get("resp_rich") == dataclasses.replace(entry, shared=True)
    assert reader.has_child("resp_parent") is True
    assert set(COUNTS) >= {"forged", "unsigned", "local_only", "undecodable"}
    assert counts(reader, "forged", "unsigned", "undecodable") == {"forged": 0, "unsigned": 0, "undecodable": 0}


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


def test_the_format_table_says_what_decodes() -> None:
    assert sorted(FORMATS) == [2, 3, 4, 5, 6, 7]
    assert FORMATS[7].signed is True
    assert FORMATS[6].signed is True
    assert FORMATS[5].signed is True
    assert FORMATS[4].signed is True
    assert FORMATS[3].signed is True
    assert FORMATS[2].signed is False
    codec = Codec(FLEET, accept_unsigned=True)
    seen: list[str] = []
    codec.count = seen.append
    key = "otel-responses:abc:{resp_rich}:r"
    content = json.dumps(entry_fields(rich_entry())).encode()
    sealed = codec.seal(key, content)
    assert codec.entry(key, sealed) is not None
    for other in (b"v8.", b"v2.", b"v.", b"vx.", b"v99999999."):  # unknown version, or no signed format of it
        assert codec.entry(key, other + sealed[3:]) is None
    assert seen == ["undecodable"] * 5
    seen.clear()
    assert codec.entry(key, sealed.decode()) is not None  # a client with decode_responses=True
    assert codec.entry(key, 12) is None
    assert seen == ["undecodable"]


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
    assert counts(reader, "forged", "undecodable", "unsigned") == {"forged": 7, "undecodable": 0, "unsigned": 0}
    # The genuine values under their own names still read.
    assert reader.get("resp_rich") is not None
    assert reader.has_child("resp_parent") is True


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda key, content: Codec(ATTACKER).seal(key, content), id="sealed-with-another-key"),
        pytest.param(lambda key, content: b"v3." + b"A" * 22 + b"." + content, id="made-up-mac"),
        pytest.param(lambda key, content: b"v3." + b"A" * 21 + b"." + content, id="short-mac"),
        pytest.param(lambda key, content: b"v3.." + content, id="no-mac"),
        pytest.param(
            lambda key, content: Codec(FLEET).seal(key, b"[]")[:26] + content, id="a-real-mac-of-other-content"
        ),
    ],
)
def test_a_forged_value_of_every_kind_is_ignored_and_counted(
    forge: Callable[[str, bytes], bytes], admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    reader = make()
    ns = reader.namespace
    assert ns is not None
    entry = rich_entry()
    content = json.dumps(entry_fields(entry)).encode()
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
    assert counts(reader, "forged", "undecodable", "unsigned") == {"forged": 6, "undecodable": 0, "unsigned": 0}
    assert view.unavailable is False  # forged is not unreachable


# -- hostile content under a valid MAC ----------------------------------------------------------------------
# What a buggy writer holding the key, or a forger while `accept_unsigned` is on, could put there: each is
# rejected and counted, whether sealed (format 4) or unsigned (format 2 — format 4's fields without the lineage,
# the version in front — read with accept_unsigned=True).

GOOD = entry_fields(rich_entry("resp_h"))


def with_field(index: int, value: object) -> list[Any]:
    fields: list[Any] = json.loads(json.dumps(GOOD))
    fields[index] = value
    return fields


def with_output(position: int, value: object) -> list[Any]:
    fields: list[Any] = json.loads(json.dumps(GOOD))
    fields[7][0][position] = value
    return fields


HOSTILE_FIELDS: dict[str, object] = {
    "not-a-list": {"response_id": "resp_h"},
    "missing-field": GOOD[:-1],
    "extra-field": [*GOOD, None],
    "id-overlong": with_field(0, "resp_" + "a" * (MAX_ID_CHARS - 4)),
    "id-telemetry-injection": with_field(0, "resp_h\nopenai_responses.signals=unstored_parent"),
    "id-spaces": with_field(0, "resp h"),
    "id-brace": with_field(0, "resp_{h}"),  # a Redis Cluster hash tag inside a key name
    "id-unicode": with_field(0, "resp_\u0570"),
    "id-empty": with_field(0, ""),
    "id-number": with_field(0, 12),
    "sequence-string": with_field(1, "1"),
    "sequence-negative": with_field(1, -1),
    "sequence-huge": with_field(1, 2**63),
    "sequence-float": with_field(1, 1.5),
    "store-bool": with_field(2, True),
    "store-two": with_field(2, 2),
    "hash-uppercase": with_field(3, "0123456789ABCDEF"),
    "hash-short": with_field(3, "0123456789abcde"),
    "hash-long": with_field(3, "0123456789abcdef0"),
    "hash-text": with_field(3, "the instructions"),
    "conversation-overlong": with_field(4, "conv_" + "x" * MAX_ID_CHARS),
    "conversation-brace": with_field(4, "conv}1"),
    "count-negative": with_field(5, -3),
    "count-huge": with_field(6, 2**40),
    "count-nested": with_field(5, [1]),
    "outputs-too-many": with_field(7, [GOOD[7][1]] * (MAX_OUTPUT_ITEMS + 1)),
    "outputs-object": with_field(7, {"0": GOOD[7][0]}),
    "parent-bad-charset": with_field(8, "resp_<script>"),
    "messages-too-many": with_field(9, [1, 2, 3, 4, 5]),
    "messages-fingerprint-too-big": with_field(9, [2**64]),
    "copies-index-past-outputs": with_field(10, [[MAX_OUTPUT_ITEMS, 8]]),
    "copies-shape-negative": with_field(10, [[0, -8]]),
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
    "item-short": with_field(7, [GOOD[7][0][:8]]),
}
HOSTILE_BYTES: dict[str, bytes] = {
    "not-json": b"not json at all",
    "not-ascii": b'["resp_h\xff"]',
    "deep": b"[" * 5000 + b"]" * 5000,
    "huge": b"[" + b"1," * 20_000 + b"1]",
    "int-of-5000-digits": b"[" + b"9" * 5000 + b"]",
    "nan": json.dumps(with_field(1, float("nan"))).encode(),
    "empty": b"",
}


def _json_list(content: bytes) -> list[Any] | None:
    try:
        doc = json.loads(content)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, list) else None


def _hostile_cases() -> list[Any]:
    cases = [pytest.param(json.dumps(doc).encode(), id=name) for name, doc in HOSTILE_FIELDS.items()]
    return cases + [pytest.param(raw, id=name) for name, raw in HOSTILE_BYTES.items()]


@pytest.mark.parametrize("content", _hostile_cases())
def test_hostile_entry_content_is_rejected_and_counted(
    content: bytes, admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    assert decode_entry(content) is None
    reader = make(accept_unsigned=True)
    ns = reader.namespace
    assert ns is not None
    v2 = content
    doc = _json_list(content)
    if doc is not None and doc:  # format 2 has none of format 7's last five fields, its version in front
        v2 = json.dumps([2, *doc[: len(doc) - 5]]).encode()
    elif content.startswith(b"[") and not content.startswith(b"[["):
        v2 = b"[2," + content[1:] if content != b"[]" else content
    sealed = Codec(FLEET).seal(f"{ns}:{{resp_h}}:r", content)
    admin.set(f"{ns}:{{resp_h}}:r", sealed)
    assert reader.get("resp_h") is None
    admin.set(f"{ns}:{{resp_h}}:r", v2)
    assert reader.get("resp_h") is None
    assert counts(reader, "undecodable", "forged", "unsigned") == {"undecodable": 2, "forged": 0, "unsigned": 0}


def test_the_hostile_table_starts_from_a_good_entry(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    """The cases above fail for what they change, not for the base they change."""
    good = json.dumps(GOOD).encode()
    assert decode_entry(good) == dataclasses.replace(rich_entry("resp_h"), shared=True)
    reader = make(accept_unsigned=True)
    ns = reader.namespace
    admin.set(f"{ns}:{{resp_h}}:r", Codec(FLEET).seal(f"{ns}:{{resp_h}}:r", good))
    assert reader.get("resp_h") is not None
    reader = make(accept_unsigned=True)
    admin.set(f"{ns}:{{resp_h}}:r", json.dumps([2, *GOOD[:11]]).encode())
    assert reader.get("resp_h") is not None


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
    reader = make(accept_unsigned=True)
    ns = reader.namespace
    genuine = make()
    genuine.record(rich_entry("resp_h"), None)
    assert genuine.flush(5)
    admin.set(f"{ns}:{{item_h}}:i", Codec(FLEET).seal(f"{ns}:{{item_h}}:i", content))
    admin.set(f"{ns}:{{item_u}}:i", content)
    assert reader.places(["item_h", "item_u"]) == [(), ()]
    assert counts(reader, "undecodable", "forged", "unsigned") == {"undecodable": 2, "forged": 0, "unsigned": 0}


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


# -- a rolling deploy ----------------------------------------------------------------------------------------


def chat_signals(cap: CapturedTelemetry) -> list[tuple[str, ...]]:
    return [tuple(dict(span.attributes or {})["openai_responses.signals"]) for span in cap.chat_spans()]  # type: ignore[arg-type]


def test_an_old_writer_and_a_new_reader_share_one_redis(
    admin: redis.Redis, make: Callable[..., RedisLedger], client: openai.OpenAI
) -> None:
    """The previous release's processes write format 2 under their key names (no hash tags). By default this release
    does not read them: checks against the old writers' responses are silent, never wrong. With accept_unsigned=True
    (a single node: the previous release had no cluster support) the old names are asked in the same round trip, and
    the values read (marked shared) and checked as before."""
    with capture(hash_key=KEY):  # the old processes, as far as the API is concerned
        called = client.responses.create(model=MODEL, input=[tool_request()], tools=TOOLS)
        unstored = client.responses.create(model=MODEL, input="The marker is V-2.", store=False)
    call = next(item for item in called.output if item.type == "function_call")
    old: dict[str, bytes] = {}
    namespace = f"otel-responses:{FLEET.key_id()}"
    calls = (ItemMeta("function_call", call.id, call.call_id, None, None, False, None, True),)
    old |= v2_commands(namespace, Entry(called.id, 1, True, None, "conv_old", calls, 1, 0), None)
    old |= v2_commands(namespace, Entry(unstored.id, 2, False, None, None, (), 1, 0), "resp_old_parent")
    admin.mset(old)

    strict_reader = make()
    assert strict_reader.get(called.id) is None
    assert strict_reader.latest_in_conversation("conv_old") is None
    assert strict_reader.places([call.id or "", ("function_call", call.call_id)]) == [(), ()]
    assert strict_reader.has_child("resp_old_parent") is False
    # Its values live under the previous release's names (no hash tags): not even read.
    assert counts(strict_reader, "unsigned", "forged", "undecodable") == {"unsigned": 0, "forged": 0, "undecodable": 0}
    with capture(ledger=make(), hash_key=KEY) as cap:
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="next", previous_response_id=called.id, tools=TOOLS)
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="marker?", previous_response_id=unstored.id)
    assert chat_signals(cap) == [(), ()]  # silent during the deploy

    lenient = make(accept_unsigned=True)
    entry = lenient.get(called.id)
    assert entry is not None
    assert entry.shared is True
    assert entry.pending_calls == (call.call_id,)
    assert lenient.places([call.id or ""])[0] == ((entry, 0),)
    assert lenient.has_child("resp_old_parent") is True
    with capture(ledger=make(accept_unsigned=True), hash_key=KEY) as cap:
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="next", previous_response_id=called.id, tools=TOOLS)
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="marker?", previous_response_id=unstored.id)
    assert chat_signals(cap) == [("missing_tool_output",), ("unstored_parent",)]


def test_an_old_reader_ignores_new_values(admin: redis.Redis, make: Callable[..., RedisLedger]) -> None:
    """The previous release's decoder, given every value this release writes, returns None and never raises (its
    continued-marker check only asks whether the key exists, and a format-3 marker means the same thing)."""
    writer = make()
    writer.record(rich_entry(), "resp_parent")
    writer.record(
        rich_entry("resp_plain", outputs=(ItemMeta("message", "msg_2", None, "assistant", None, False, 7),)), None
    )
    assert writer.flush(5)
    stored = keys_and_values(admin)
    assert len(stored) > 6
    for name, value in stored.items():
        assert v2_decode_entry(value) is None, name
        assert v2_decode_location(value) is None, name


def test_the_frozen_format_2_encoder_matches_what_this_release_reads_with_accept_unsigned() -> None:
    """The frozen encoder and this release's format-2 reader agree on every field (format 2 had no lineage)."""
    entry = rich_entry(turn=None, lineage_id=None, trace_id=None, span_id=None, **NO_FACTS, **NO_STATE)
    encoded = v2_encode_entry(entry)
    assert encoded is not None
    assert encoded[0].startswith(b"[2,")
    assert v2_decode_entry(encoded[0]) == entry
    assert decode_entry(encoded[0], version=2) == dataclasses.replace(entry, shared=True)
    assert decode_entry(encoded[0]) is None  # not format 7
    # Format 1 (two releases back) no longer decodes.
    assert decode_entry(b'[1,"resp_1",1,1,null,null,1,0,[]]', version=2) is None
    assert decode_entry(b'[1,"resp_1",1,1,null,null,1,0,[]]', version=1) is None


# -- format 4: the lineage -------------------------------------------------------------------------------------


def test_a_format_3_value_of_the_previous_release_still_decodes(
    admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    """Format 3 (sealed, no lineage) is read during a rolling deploy: the entry is whole, its lineage unknown."""
    reader = make()
    ns = reader.namespace
    assert ns is not None
    entry = rich_entry()
    fields = entry_fields(entry)[:11]
    content = json.dumps(fields, separators=(",", ":")).encode()
    name = f"{ns}:{{resp_rich}}:r"
    admin.set(name, b"v3." + expected_mac(name, content, version=3) + b"." + content)
    read = reader.get("resp_rich")
    assert read == dataclasses.replace(
        entry, shared=True, turn=None, lineage_id=None, trace_id=None, span_id=None, **NO_FACTS, **NO_STATE
    )
    # A format-3 MAC does not open a format-4 value, nor the other way round: the version is bound.
    admin.set(name, b"v4." + expected_mac(name, content, version=3) + b"." + content)
    assert make().get("resp_rich") is None


def test_the_lineage_round_trips_and_none_is_null() -> None:
    entry = rich_entry()
    assert entry_fields(entry)[11] == [7, "conv_1", "f" * 32, "f" * 16]
    assert decode_entry(json.dumps(entry_fields(entry)).encode()) == dataclasses.replace(entry, shared=True)
    bare = rich_entry(turn=None, lineage_id=None, trace_id=None, span_id=None)
    assert entry_fields(bare)[11] is None
    assert decode_entry(json.dumps(entry_fields(bare)).encode()) == dataclasses.replace(bare, shared=True)


HOSTILE_LINEAGE: dict[str, object] = {
    "not-a-list": {"turn": 1},
    "short": [1, "conv_1", "f" * 32],
    "turn-negative": [-1, "conv_1", "f" * 32, "f" * 16],
    "turn-string": ["1", "conv_1", "f" * 32, "f" * 16],
    "turn-huge": [2**40, "conv_1", "f" * 32, "f" * 16],
    "lineage-injection": [1, "conv_1\nopenai_responses.turn=1", "f" * 32, "f" * 16],
    "lineage-overlong": [1, "conv_" + "x" * MAX_ID_CHARS, "f" * 32, "f" * 16],
    "trace-uppercase": [1, "conv_1", "F" * 32, "f" * 16],
    "trace-short": [1, "conv_1", "f" * 31, "f" * 16],
    "span-long": [1, "conv_1", "f" * 32, "f" * 17],
    "span-without-trace": [1, "conv_1", None, "f" * 16],
    "trace-number": [1, "conv_1", 2**100, "f" * 16],
}


@pytest.mark.parametrize("lineage", list(HOSTILE_LINEAGE.values()), ids=list(HOSTILE_LINEAGE))
def test_a_hostile_lineage_is_rejected(lineage: object) -> None:
    assert decode_entry(json.dumps(with_field(11, lineage)).encode()) is None


# -- format 5: the hash-tagged key layout ----------------------------------------------------------------------


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


def test_a_format_4_value_still_decodes_under_the_new_key_name(
    admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    """Format 4 is format 5's content: a value sealed as v4 under a format-5 key name decodes (the version is bound
    by the MAC). Values under the old layout's names (`{ns}:r:{id}`) are not asked for: silent, never false."""
    reader = make()
    ns = reader.namespace
    assert ns is not None
    entry = rich_entry()
    content = json.dumps(entry_fields(entry)[:12], separators=(",", ":")).encode()
    name = entry_key(ns, "resp_rich")
    admin.set(name, b"v4." + expected_mac(name, content, version=4) + b"." + content)
    assert reader.get("resp_rich") == dataclasses.replace(entry, shared=True, **NO_FACTS, **NO_STATE)
    admin.delete(name)
    old = f"{ns}:r:resp_rich"
    admin.set(old, b"v4." + expected_mac(old, content, version=4) + b"." + content)
    assert make().get("resp_rich") is None


@pytest.mark.parametrize(
    ("key", "legacy"),
    [
        ("otel-responses:abc:{resp_1}:r", "otel-responses:abc:r:resp_1"),
        ("otel-responses:abc:{resp_1}:k", "otel-responses:abc:k:resp_1"),
        ("otel-responses:abc:{conv_1}:c", "otel-responses:abc:c:conv_1"),
        ("otel-responses:abc:{msg_1}:i", "otel-responses:abc:i:msg_1"),
        ("otel-responses:abc:{function_call:call_1}:t", "otel-responses:abc:t:function_call:call_1"),
        ("otel-responses:abc:{00000000000000ff}:f", "otel-responses:abc:f:00000000000000ff"),
        ("otel-responses:abc:r:resp_1", None),
    ],
)
def test_the_previous_releases_key_names(key: str, legacy: str | None) -> None:
    assert legacy_key(key) == legacy


# -- format 6: the entry's facts and several positions per item -----------------------------------------------


def test_a_format_5_value_of_the_previous_release_still_decodes(
    admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    """During a rolling deploy this release reads what the previous one writes (format 5): entries without facts,
    single-position locations, and its entries of items the app wrote to a conversation, known by their name, which
    are never a place an item is found."""
    reader = make()
    ns = reader.namespace
    assert ns is not None
    entry = rich_entry()
    content = json.dumps(entry_fields(entry)[:12], separators=(",", ":")).encode()
    name = entry_key(ns, "resp_rich")
    location = location_key(ns, "msg_1")
    assert location is not None
    admin.set(name, b"v5." + expected_mac(name, content, version=5) + b"." + content)
    admin.set(location, b"v5." + expected_mac(location, b"1:resp_rich", version=5) + b".1:resp_rich")
    read = dataclasses.replace(entry, shared=True, **NO_FACTS, **NO_STATE)
    assert reader.get("resp_rich") == read
    assert reader.places(["msg_1"]) == [((read, 1),)]
    # The previous release's entry of app-written items, with the location of its call it also wrote.
    written = rich_entry("conversation-items:conv_1:9", parent_id=None)
    content = json.dumps(entry_fields(written)[:12], separators=(",", ":")).encode()
    name, call = entry_key(ns, written.response_id), location_key(ns, ("function_call", "call_abc"))
    assert call is not None
    place = f"2:{written.response_id}".encode()
    admin.set(name, b"v5." + expected_mac(name, content, version=5) + b"." + content)
    admin.set(call, b"v5." + expected_mac(call, place, version=5) + b"." + place)
    fresh = make()
    got = fresh.get(written.response_id)
    assert got is not None
    assert got.written_by_app is True
    assert fresh.places([("function_call", "call_abc")]) == [()]


def test_the_facts_round_trip_and_none_is_null() -> None:
    entry = rich_entry(deleted=True)
    assert entry_fields(entry)[12] == [1, 0, "resp_first", 1, 1]
    assert decode_entry(json.dumps(entry_fields(entry)).encode()) == dataclasses.replace(entry, shared=True)
    bare = rich_entry(**NO_FACTS)
    assert entry_fields(bare)[12] is None
    assert decode_entry(json.dumps(entry_fields(bare)).encode()) == dataclasses.replace(bare, shared=True)


HOSTILE_FACTS: dict[str, object] = {
    "not-a-list": {"deleted": 1},
    "short": [0, 0, None, None],
    "long": [0, 0, None, None, 0, 0],
    "deleted-bool": [True, 0, None, None, 0],
    "written-two": [0, 2, None, None, 0],
    "system-string": [0, 0, None, None, "1"],
    "instructed-injection": [0, 0, "resp_1\nopenai_responses.signals=x", 1, 0],
    "instructed-turn-negative": [0, 0, "resp_1", -1, 0],
    "turn-without-response": [0, 0, None, 3, 0],
}


@pytest.mark.parametrize("facts", list(HOSTILE_FACTS.values()), ids=list(HOSTILE_FACTS))
def test_hostile_facts_are_rejected(facts: object) -> None:
    assert decode_entry(json.dumps(with_field(12, facts)).encode()) is None


def test_the_previous_release_ignores_format_7(
    admin: redis.Redis, make: Callable[..., RedisLedger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The previous release's format table ends at 6: every value this one writes is of a version it does not know,
    counted undecodable and treated as absent (its checks against this release's turns are silent, never false)."""
    writer = make()
    writer.record(rich_entry(), "resp_parent")
    assert writer.flush(5)
    monkeypatch.delitem(FORMATS, 7)  # the previous release's table
    old = make()
    assert old.get("resp_rich") is None
    assert old.places(["msg_1", "rs_1", ("function_call", "call_abc")]) == [(), (), ()]
    assert old.latest_in_conversation("conv_1") is None
    assert old.has_child("resp_parent") is False
    assert old.stats()["undecodable"] == 6


# -- format 7: the calls the state holds, the outputs a replay gave, the system messages -------------------------


def test_the_held_calls_given_outputs_and_system_messages_round_trip_and_none_is_null() -> None:
    entry = rich_entry()
    fields = entry_fields(entry)
    assert fields[13:] == [[["call_old", "call_abc"], ["call_old"], 0], [["call_old", 4096, 2**64 - 1]], 2]
    assert decode_entry(json.dumps(fields).encode()) == dataclasses.replace(entry, shared=True)
    # Nothing held and nothing dropped (a first turn without tools): null. Nothing known: said so.
    bare = rich_entry(held_calls=(), held_outputs=(), held_partial=False, given_outputs=(), input_system_messages=0)
    assert entry_fields(bare)[13:] == [None, None, 0]
    assert decode_entry(json.dumps(entry_fields(bare)).encode()) == dataclasses.replace(bare, shared=True)
    unknown = rich_entry(held_calls=(), held_outputs=(), held_partial=True)
    assert entry_fields(unknown)[13] == [[], [], 1]
    # The hash this process keeps of a given output's text is never written.
    local = rich_entry(given_outputs=(GivenOutput("call_old", 4096, 7, local=-12345),))
    assert entry_fields(local)[14] == [["call_old", 4096, 7]]
    read = decode_entry(json.dumps(entry_fields(local)).encode())
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


HOSTILE_STATE: dict[str, tuple[int, object]] = {
    "held-not-a-list": (13, {"calls": []}),
    "held-short": (13, [[], []]),
    "held-dropped-bool": (13, [[], [], True]),
    "held-dropped-two": (13, [[], [], 2]),
    "held-call-id-bad": (13, [["call 1"], [], 0]),
    "held-call-id-injection": (13, [["call_1\nopenai_responses.signals=x"], [], 0]),
    "held-call-id-number": (13, [[1], [], 0]),
    "held-too-many-calls": (13, [[f"call_{n}" for n in range(MAX_HELD_CALLS + 1)], [], 0]),
    "held-too-many-answered": (13, [[], [f"call_{n}" for n in range(MAX_HELD_CALLS + 1)], 0]),
    "given-not-a-list": (14, {"call_1": [1, 2]}),
    "given-too-many": (14, [[f"call_{n}", 1, 1] for n in range(MAX_GIVEN_OUTPUTS + 1)]),
    "given-short": (14, [["call_1", 1]]),
    "given-call-id-bad": (14, [["call{1}", 1, 1]]),
    "given-length-negative": (14, [["call_1", -1, 1]]),
    "given-length-huge": (14, [["call_1", 2**33, 1]]),
    "given-fingerprint-too-big": (14, [["call_1", 1, 2**64]]),
    "given-fingerprint-string": (14, [["call_1", 1, "ffff"]]),
    "systems-negative": (15, -1),
    "systems-null": (15, None),
    "systems-bool": (15, True),
}


@pytest.mark.parametrize(("index", "value"), list(HOSTILE_STATE.values()), ids=list(HOSTILE_STATE))
def test_hostile_held_calls_given_outputs_and_system_counts_are_rejected(index: int, value: object) -> None:
    assert decode_entry(json.dumps(with_field(index, value)).encode()) is None


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
        input_system_messages=2**32 - 1,
    )  # fmt: skip


def test_an_entry_with_every_bound_full_and_the_apis_ids_fits_whole() -> None:
    entry = api_sized_entry()
    encoded = encode_entry(entry)
    assert encoded is not None
    content, kept = encoded
    sealed = Codec(FLEET).seal("otel-responses:abc:{resp}:r", content)
    assert len(sealed) <= DEFAULT_MAX_ENTRY_BYTES
    assert kept == MAX_OUTPUT_ITEMS
    assert decode_entry(content) == dataclasses.replace(entry, shared=True)  # nothing left out


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
    items = entry_fields(entry)[7]
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


def test_a_format_6_value_of_the_previous_release_still_decodes_and_knows_no_call_beyond_its_own(
    admin: redis.Redis, make: Callable[..., RedisLedger]
) -> None:
    """During a rolling deploy an entry of the previous release (format 6) holds no calls: an output whose call is not
    among its own outputs is then no orphan (its chain may hold it); an entry of this release that holds the chain's
    calls still names one."""
    reader = make()
    ns = reader.namespace
    assert ns is not None
    answer = ItemMeta("message", "msg_9", None, "assistant", None, False, 9)
    entry = rich_entry("resp_v6", outputs=(answer,), copies=(), held_calls=("call_old",), held_outputs=("call_old",))
    content = json.dumps(entry_fields(entry)[:13], separators=(",", ":")).encode()
    name = entry_key(ns, "resp_v6")
    admin.set(name, b"v6." + expected_mac(name, content, version=6) + b"." + content)
    read = reader.get("resp_v6")
    assert read == dataclasses.replace(entry, shared=True, **NO_STATE)
    newer = make()
    newer.record(dataclasses.replace(entry, response_id="resp_v7"), None)
    assert newer.flush(5)
    for parent, orphan, resent in (("resp_v6", [], []), ("resp_v7", ["orphan_tool_output"], ["context_duplicated"])):
        assert chained_signals(make(), parent, "call_9") == orphan, parent
        # An output the chain already answered (held by the newer entry only) is sent twice.
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
