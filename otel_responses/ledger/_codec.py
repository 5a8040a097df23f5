"""The values the shared ledger keeps in Redis: their key names, their one versioned format, the MAC that
authenticates them, and the rules every field must pass, on write as on read.

Anyone who can write to the shared Redis could otherwise plant a fact: a parent stored with ``store=false``, a call
left pending in a conversation, an item whose payload had another length. So every value of every key kind
(entries ``r``, item locations ``i`` ``t`` ``f``, conversation pointers ``c``, continued-markers ``k``) is
sealed with a keyed BLAKE2b under a key derived from the fleet's hash key (derived in each process, never written
anywhere). The MAC covers the format version, the full key name and the content: a value copied to another key
fails, and a value that fails is absent (and counted), as a malformed one always was. Without the hash key a
writer can still delete values or put back an older genuine value under its own key; it cannot make one up.

Whatever passes the MAC is still checked against the shapes the API gives (ids, enum-like tokens, the instructions
hash, bounded counts and lists) before it can reach a check or a span, and the same rules decide on write: a
response whose fields would not pass stays in its process's local tier, so no process writes what another would
reject.

Formats are read through one table, ``FORMATS``: a value starts with ``v{version}.`` and, for a signed format,
its MAC; a value without that header is of format 2, the last unsigned one (written by the previous release), read
only when the ledger is built with ``accept_unsigned=True``. Format 1 (two releases back) no longer decodes.

Format 7 adds the tool calls an entry's server-side state holds (carried forward turn after turn, with whether older
ones were dropped), the tool outputs a replay gave (call_id, length, keyed fingerprint) and the system messages its
input counted. Format 6 added what an entry says beyond its items (deleted by the app, written by the app into a
conversation, the latest turn of its lineage that sent instructions, a system message held in server-side state) and
let one item location name several positions of one response (an id a server repeats). Key names (formats 5 to 7) carry
a Redis Cluster hash tag: ``{prefix}:{key id}:{tag}:{kind}``, the tag being what the key is about (a response id for its
entry ``r`` and continued-marker ``k``, a conversation id for its pointer ``c``, an item id ``i``, a call ``t`` or a
text fingerprint ``f`` for a location). One layout on a single node and on a cluster.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._items import ItemMeta
from . import (
    MAX_GIVEN_OUTPUTS,
    MAX_HELD_CALLS,
    MAX_INPUT_MESSAGES,
    MAX_OUTPUT_ITEMS,
    Entry,
    GivenOutput,
    Key,
    location_keys,
)

if TYPE_CHECKING:
    from .._fingerprint import Fingerprinter

DEFAULT_MAX_ENTRY_BYTES = 8192
# Version 7 adds an entry's held calls (`[calls, answered, dropped]`), the tool outputs its request gave
# (`[[call_id, length, fingerprint], ...]`) and its input's system messages; an entry of an older format holds no
# calls and says so (dropped: its state beyond its own outputs is unknown). Version 6 added an entry's facts field
# (deleted, written by the app, the last instructed turn, a system message in server state) and locations of several
# positions (`i,j:response_id`); version 5 is version 4's values under the
# hash-tagged key layout (``{prefix}:{key id}:{tag}:kind``, for Redis Cluster); version 4 added the lineage, version 3
# sealed every value; version 2 (entries as compact JSON with the version inside, locations as `index:response_id`,
# markers as `1`, none authenticated) is older still. Values of formats 6, 5, 4 and 3 still decode, but only under the
# keys they are read from: the key names of format 4 and before (``{prefix}:{key id}:r:{id}``) are not asked for.
# 0.1.0 reads none of format 7 (an unknown version: counted ``undecodable``, treated as absent), so during a
# rolling deploy each side checks turns the other made against what it knows itself: missed signals, never false ones.
# The id rule (``_ID``) is not part of a format: a wider one parses every value the same way, and a reader whose rule
# is narrower (0.1.0's: 128 characters without `+`, `/`, `=`) names no key by a longer id and counts a value
# holding one undecodable, as absent.
FORMAT = 7
MAC_BYTES = 16
MAC_PURPOSE = b"ledger-mac"  # Fingerprinter.derive: the MAC key is the fleet key's, for this use only
_MAC_PERSON = b"otelr-ledger"
_MAC_CHARS = 22  # base64url of 16 bytes, unpadded

# What a shared value may hold. Ids: what the API makes (`resp_…`, `msg_…`, `call_…`, `conv_…`, at most 55 characters
# in the recorded traffic), what client libraries make up (uuids, `__fake_id__`) and what gateways wrap the API's in:
# litellm's `resp_` + standard base64 (`+`, `/`, `=`) of its provider, deployment and the upstream id (237 to 249
# characters with the Router's 64-hex deployment ids and the API's ids), its `encitem_` item ids (about 200), and
# the ids LiteLLM Proxy hands its HTTP clients, litellm's id encrypted with the caller's user and team (`resp_` +
# base64url: 453 characters without a user, about 550 with a uuid of each), with room to spare. Never a brace (a key's
# Redis Cluster hash tag is what lies between them), a space, a control or a non-ASCII character. Item types, roles
# and phases: short lowercase tokens. The instructions hash: the 16 hex characters ``Fingerprinter.text`` makes.
MAX_ID_CHARS = 1024
_ID = re.compile(rf"[A-Za-z0-9_.:+/=-]{{1,{MAX_ID_CHARS}}}")
_TOKEN = re.compile(r"[a-z][a-z0-9_]{0,63}")
_HASH = re.compile(r"[0-9a-f]{16}")
_MAX_SEQUENCE = 2**63 - 1  # wall-clock nanoseconds until 2262
_MAX_COUNT = 2**32 - 1
_MAX_FINGERPRINT = 2**64 - 1
_MAX_SHAPE = 2**40
# Values longer than these are rejected unread (before their MAC is computed).
_MAX_LOCATION_BYTES = 128 + MAX_ID_CHARS  # a header (26 bytes), up to 32 positions (85) and a colon, then an id
_MAX_MARKER_BYTES = 64
_MARKER = b"1"
_ENTRY_FIELDS = 16  # of format 7: format 6's thirteen, the held calls, the given outputs, the system messages
_V6_FIELDS = 13  # format 4's twelve and the entry's facts
_V4_FIELDS = 12  # format 3's eleven and the lineage (format 2 is format 3's with its version in front)
_V3_FIELDS = 11
# The previous releases wrote the items an app wrote to a conversation as entries named so (format 6 says it).
_WRITTEN_BY_APP_PREFIX = "conversation-items:"
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")


# -- key names -----------------------------------------------------------------------------------------------


def is_id(value: object) -> bool:
    """An id a shared value may hold and a key may be named by."""
    return type(value) is str and _ID.fullmatch(value) is not None


def _optional_id(value: object) -> bool:
    return value is None or is_id(value)


def _token(value: object) -> bool:
    return type(value) is str and _TOKEN.fullmatch(value) is not None


def _optional_token(value: object) -> bool:
    return value is None or _token(value)


def _tagged(namespace: str, tag: str, kind: str) -> str:
    """``{namespace}:{{tag}}:{kind}``: the braces are a Redis Cluster hash tag, so only ``tag`` picks the slot. Keys
    about one thing share it (a response's entry and its continued-marker); keys about different things spread over
    the cluster (no tag common to every key: that would put the whole ledger on one shard)."""
    return f"{namespace}:{{{tag}}}:{kind}"


def legacy_key(key: str) -> str | None:
    """The name the previous release (format 2, before hash tags) gave the same key: ``{namespace}:{kind}:{tag}``;
    None for a name not of this layout. Read only while ``accept_unsigned`` is on (a rolling deploy)."""
    head, brace, rest = key.partition(":{")
    tag, close, kind = rest.rpartition("}:")
    if not brace or not close or len(kind) != 1:
        return None
    return f"{head}:{kind}:{tag}"


def entry_key(namespace: str, response_id: str) -> str:
    """A response's entry, tagged by its id (the slot of its continued-marker)."""
    return _tagged(namespace, response_id, "r")


def conversation_key(namespace: str, conversation_id: str) -> str:
    """The conversation's latest entry (a copy of it, sealed under this name), tagged by the conversation id."""
    return _tagged(namespace, conversation_id, "c")


def marker_key(namespace: str, response_id: str) -> str:
    """Says the response was continued (for ``concurrent_branch``); in the slot of the response's entry."""
    return _tagged(namespace, response_id, "k")


def location_key(namespace: str, key: Key) -> str | None:
    """The Redis key locating an output item, tagged by what names it: its text fingerprint (``f``), its call
    (``t``: type and call_id), its id (``i``); None for a name no shared value may hold (it is never written, so
    never asked for)."""
    if isinstance(key, int):
        return _tagged(namespace, f"{key:016x}", "f")
    if isinstance(key, tuple):
        item_type, call_id = key
        return _tagged(namespace, f"{item_type}:{call_id}", "t") if _token(item_type) and is_id(call_id) else None
    return _tagged(namespace, key, "i") if is_id(key) else None


# -- entries -------------------------------------------------------------------------------------------------


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= _MAX_COUNT


def _flag(value: object) -> bool:
    return type(value) is int and value in (0, 1)


def _fingerprint(value: object) -> bool:
    return type(value) is int and 0 <= value <= _MAX_FINGERPRINT


def _shape(value: object) -> bool:
    return type(value) is int and 0 <= value < _MAX_SHAPE


def _meta(raw: object) -> ItemMeta | None:
    if type(raw) is not list or len(raw) != 9:
        return None
    item_type, item_id, call_id, role, phase, encrypted, fingerprint, awaits, shape = raw
    if not _token(item_type) or not _optional_id(item_id) or not _optional_id(call_id):
        return None
    if not _optional_token(role) or not _optional_token(phase) or not _flag(encrypted) or not _flag(awaits):
        return None
    if (fingerprint is not None and not _fingerprint(fingerprint)) or (shape is not None and not _shape(shape)):
        return None
    return ItemMeta(item_type, item_id, call_id, role, phase, bool(encrypted), fingerprint, bool(awaits), shape)


def _copy(raw: object) -> bool:
    return type(raw) is list and len(raw) == 2 and _count(raw[0]) and raw[0] < MAX_OUTPUT_ITEMS and _shape(raw[1])


def _lineage(raw: object) -> dict[str, Any] | None:
    """The lineage fields ``[turn, lineage id, trace id, span id]`` (ids as lowercase hex), or None when malformed;
    ``null`` (none known) gives all four as None."""
    if raw is None:
        return {"turn": None, "lineage_id": None, "trace_id": None, "span_id": None}
    if type(raw) is not list or len(raw) != 4:
        return None
    turn, lineage_id, trace_id, span_id = raw
    if (turn is not None and not _count(turn)) or not _optional_id(lineage_id):
        return None
    if (trace_id is None) != (span_id is None):
        return None
    if trace_id is not None and not (
        type(trace_id) is str and _TRACE_ID.fullmatch(trace_id) and type(span_id) is str and _SPAN_ID.fullmatch(span_id)
    ):
        return None
    return {
        "turn": turn,
        "lineage_id": lineage_id,
        "trace_id": int(trace_id, 16) if trace_id is not None else None,
        "span_id": int(span_id, 16) if span_id is not None else None,
    }


def _lineage_field(entry: Entry) -> list[Any] | None:
    if entry.turn is None and entry.lineage_id is None and entry.trace_id is None:
        return None
    span = entry.trace_id is not None and entry.span_id is not None
    return [
        entry.turn,
        entry.lineage_id,
        f"{entry.trace_id:032x}" if span else None,
        f"{entry.span_id:016x}" if span else None,
    ]


def _facts(raw: object, response_id: str) -> dict[str, Any] | None:
    """The entry's facts ``[deleted, written by the app, instructed id, instructed turn, system in state]``, or None
    when malformed; ``null`` (an entry of format 5 or older) gives their defaults, and tells an entry of the previous
    releases' app-written kind by its name."""
    if raw is None:
        return {"written_by_app": response_id.startswith(_WRITTEN_BY_APP_PREFIX)}
    if type(raw) is not list or len(raw) != 5:
        return None
    deleted, written_by_app, instructed_id, instructed_turn, system_in_state = raw
    if not _flag(deleted) or not _flag(written_by_app) or not _flag(system_in_state):
        return None
    if not _optional_id(instructed_id) or (instructed_turn is not None and not _count(instructed_turn)):
        return None
    if instructed_id is None and instructed_turn is not None:
        return None
    return {
        "deleted": bool(deleted),
        "written_by_app": bool(written_by_app),
        "instructed_id": instructed_id,
        "instructed_turn": instructed_turn,
        "system_in_state": bool(system_in_state),
    }


def _facts_field(entry: Entry) -> list[Any] | None:
    if not (entry.deleted or entry.written_by_app or entry.instructed_id is not None or entry.system_in_state):
        return None
    return [
        int(entry.deleted),
        int(entry.written_by_app),
        entry.instructed_id,
        entry.instructed_turn if entry.instructed_id is not None else None,
        int(entry.system_in_state),
    ]


def _ids(raw: object) -> bool:
    return type(raw) is list and len(raw) <= MAX_HELD_CALLS and all(map(is_id, raw))


def _held(raw: object) -> dict[str, Any] | None:
    """The held calls ``[calls, answered, dropped]``, or None when malformed; ``null``: none, and none dropped."""
    if raw is None:
        return {"held_calls": (), "held_outputs": (), "held_partial": False}
    if type(raw) is not list or len(raw) != 3:
        return None
    calls, answered, dropped = raw
    if not _ids(calls) or not _ids(answered) or not _flag(dropped):
        return None
    return {"held_calls": tuple(calls), "held_outputs": tuple(answered), "held_partial": bool(dropped)}


def _held_field(entry: Entry) -> list[Any] | None:
    """The held calls as shared. They carry the app's own call_ids (from its inputs): one that fails the id rule is
    left out, and the value then says the state may hold calls it does not list, rather than the entry (and every
    later entry of its chain, which carries it) staying unshared."""
    if not (entry.held_calls or entry.held_outputs or entry.held_partial):
        return None
    held_calls, held_outputs = entry.held_calls[-MAX_HELD_CALLS:], entry.held_outputs[-MAX_HELD_CALLS:]
    calls = [call_id for call_id in held_calls if is_id(call_id)]
    answered = [call_id for call_id in held_outputs if is_id(call_id)]
    left_out = len(calls) < len(held_calls) or len(answered) < len(held_outputs)
    return [calls, answered, int(entry.held_partial or left_out)]


def _given(raw: object) -> tuple[GivenOutput, ...] | None:
    """The given outputs ``[[call_id, length, fingerprint], ...]``, or None when malformed; ``null``: none."""
    if raw is None:
        return ()
    if type(raw) is not list or len(raw) > MAX_GIVEN_OUTPUTS:
        return None
    given = []
    for output in raw:
        if type(output) is not list or len(output) != 3:
            return None
        call_id, length, fingerprint = output
        if not is_id(call_id) or not _count(length) or not _fingerprint(fingerprint):
            return None
        given.append(GivenOutput(call_id, length, fingerprint))
    return tuple(given)


def _given_field(entry: Entry) -> list[Any] | None:
    """The given outputs as shared: one under a call_id that fails the id rule (the app's own) is left out; no copy
    first sent is then known to compare a replay's with."""
    given = [[g.call_id, g.length, g.fingerprint] for g in entry.given_outputs[-MAX_GIVEN_OUTPUTS:] if is_id(g.call_id)]
    return given or None


# What an entry of a format before 7 says of the server-side state's calls: nothing beyond its own outputs.
_HELD_UNKNOWN: dict[str, Any] = {"held_calls": (), "held_outputs": (), "held_partial": True}


def entry_from_fields(doc: object) -> Entry | None:
    """The entry a format-7 field list holds (a format-6 one: without its held calls, given outputs and system
    messages; a format-4 one: without its facts either; a format-3 one: without its lineage either), or None unless
    every field passes: the one set of rules for what a shared entry may hold, applied to what is written and to what
    is read. Built ``shared``: another writer may have put it there."""
    if type(doc) is not list or len(doc) not in (_ENTRY_FIELDS, _V6_FIELDS, _V4_FIELDS, _V3_FIELDS):
        return None
    place = _lineage(doc[11] if len(doc) >= _V4_FIELDS else None)
    if place is None:
        return None
    if not is_id(doc[0]):
        return None
    facts = _facts(doc[12] if len(doc) >= _V6_FIELDS else None, doc[0])
    if facts is None:
        return None
    if len(doc) == _ENTRY_FIELDS:
        held, given, systems = _held(doc[13]), _given(doc[14]), doc[15]
        if held is None or given is None or not _count(systems):
            return None
    else:
        held, given, systems = _HELD_UNKNOWN, (), 0
    response_id, sequence, store, instructions_hash, conversation_id, app_messages, compactions = doc[:7]
    raw_outputs, parent_id, raw_messages, raw_copies = doc[7:11]
    if not is_id(response_id) or type(sequence) is not int or not 0 <= sequence <= _MAX_SEQUENCE:
        return None
    if not _flag(store) or not _optional_id(conversation_id) or not _optional_id(parent_id):
        return None
    if instructions_hash is not None and (type(instructions_hash) is not str or not _HASH.fullmatch(instructions_hash)):
        return None
    if not _count(app_messages) or not _count(compactions):
        return None
    if type(raw_messages) is not list or len(raw_messages) > MAX_INPUT_MESSAGES:
        return None
    if not all(map(_fingerprint, raw_messages)):
        return None
    if type(raw_copies) is not list or len(raw_copies) > MAX_OUTPUT_ITEMS or not all(map(_copy, raw_copies)):
        return None
    if type(raw_outputs) is not list or len(raw_outputs) > MAX_OUTPUT_ITEMS:
        return None
    outputs = []
    for raw in raw_outputs:
        meta = _meta(raw)
        if meta is None:
            return None
        outputs.append(meta)
    return Entry(
        response_id=response_id,
        sequence=sequence,
        store=bool(store),
        instructions_hash=instructions_hash,
        conversation_id=conversation_id,
        outputs=tuple(outputs),
        input_app_messages=app_messages,
        input_compactions=compactions,
        parent_id=parent_id,
        input_messages=tuple(raw_messages),
        copies=tuple((index, shape) for index, shape in raw_copies),
        shared=True,
        given_outputs=given,
        input_system_messages=systems,
        **place,
        **facts,
        **held,
    )


def entry_fields(entry: Entry) -> list[Any]:
    """The entry's fields in format 7's order, as JSON takes them."""
    return [
        entry.response_id,
        entry.sequence,
        int(entry.store),
        entry.instructions_hash,
        entry.conversation_id,
        entry.input_app_messages,
        entry.input_compactions,
        [
            [m.type, m.id, m.call_id, m.role, m.phase, int(m.encrypted), m.fingerprint, int(m.awaits), m.shape]
            for m in entry.outputs[:MAX_OUTPUT_ITEMS]
        ],
        entry.parent_id,
        list(entry.input_messages[-MAX_INPUT_MESSAGES:]),
        [list(copy) for copy in entry.copies[:MAX_OUTPUT_ITEMS]],
        _lineage_field(entry),
        _facts_field(entry),
        _held_field(entry),
        _given_field(entry),
        entry.input_system_messages,
    ]


def shareable(entry: Entry, parent_id: str | None = None) -> bool:
    """Whether every field of the entry (and the parent it continued) passes the rules a reader applies: an entry
    that does not is kept local rather than written for other processes to reject."""
    return _optional_id(parent_id) and entry_from_fields(entry_fields(entry)) is not None


# Where format 7's fields are that may be left out of an entry too big for the limit, least needed first.
_OUTPUTS, _COPIES, _HELD, _GIVEN = 7, 10, 13, 14
_DROPPED_HELD = [[], [], 1]  # none listed, and the state may hold calls: an output is then no orphan


def _fit(fields: list[Any], max_bytes: int) -> tuple[bytes, int, bool] | None:
    """Compact JSON of ``fields`` within ``max_bytes``, how many output items it kept, and whether it kept everything.
    Past the limit it leaves out, in turn: the given outputs; the held calls (saying the state may hold others); then
    the output items past it (and the other copies' shapes, which name output indexes). None when it cannot fit even
    without them."""
    data = _dumps(fields)
    outputs = fields[_OUTPUTS]
    if len(data) <= max_bytes:
        return data, len(outputs), True
    fields = [*fields[:_GIVEN], None, *fields[_GIVEN + 1 :]]
    data = _dumps(fields)
    if len(data) <= max_bytes:
        return data, len(outputs), False
    fields = [*fields[:_HELD], _DROPPED_HELD, *fields[_HELD + 1 :]]
    data = _dumps(fields)
    if len(data) <= max_bytes:
        return data, len(outputs), False
    bare = [*fields[:_OUTPUTS], [], *fields[_OUTPUTS + 1 : _COPIES], [], *fields[_COPIES + 1 :]]
    size = len(_dumps(bare))
    if size > max_bytes:
        return None
    kept = 0
    for output in outputs:
        size += len(_dumps(output)) + (1 if kept else 0)
        if size > max_bytes:
            break
        kept += 1
    return _dumps([*bare[:_OUTPUTS], outputs[:kept], *bare[_OUTPUTS + 1 :]]), kept, False


def encode_entry(entry: Entry, max_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> tuple[bytes, int] | None:
    """The entry as a sealed value's content (format 7: compact JSON of its fields only) and how many output items
    it kept: the whole value (header and MAC included) stays within ``max_bytes``, what does not fit left out (see
    ``_fit``). None for an entry that cannot fit even without its output items, or that a reader would reject (see
    ``shareable``)."""
    if not shareable(entry):
        return None
    fitted = _fit(entry_fields(entry), max_bytes - _HEADER_BYTES)
    return (fitted[0], fitted[1]) if fitted is not None else None


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("ascii"))
    except Exception:  # not ASCII, not JSON, nested past the recursion limit, an int of too many digits
        return None


def _entry_v7(body: bytes) -> Entry | None:
    doc = _json(body)
    return entry_from_fields(doc) if type(doc) is list and len(doc) == _ENTRY_FIELDS else None


def _entry_v6(body: bytes) -> Entry | None:
    doc = _json(body)
    return entry_from_fields(doc) if type(doc) is list and len(doc) == _V6_FIELDS else None


def _entry_v4(body: bytes) -> Entry | None:
    doc = _json(body)
    return entry_from_fields(doc) if type(doc) is list and len(doc) == _V4_FIELDS else None


def _entry_v3(body: bytes) -> Entry | None:
    doc = _json(body)
    return entry_from_fields(doc) if type(doc) is list and len(doc) == _V3_FIELDS else None


def _entry_v2(body: bytes) -> Entry | None:
    doc = _json(body)
    if type(doc) is not list or len(doc) != _V3_FIELDS + 1 or type(doc[0]) is not int or doc[0] != 2:
        return None
    return entry_from_fields(doc[1:])


# -- item locations and markers ------------------------------------------------------------------------------


Location = tuple[str, tuple[int, ...]]  # a response id and the output indexes a key names in it, ascending


def encode_location(indexes: tuple[int, ...] | list[int], response_id: str) -> bytes:
    """``index,index...:response_id``: where an output item is (one index, as in formats 2 to 5, but for an id a
    response holds at several positions)."""
    return f"{','.join(map(str, indexes))}:{response_id}".encode("ascii")


def _index(raw: bytes) -> int | None:
    return int(raw) if raw.isdigit() and len(raw) <= 2 and int(raw) < MAX_OUTPUT_ITEMS else None


def _response_id(raw: bytes) -> str | None:
    try:
        name = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    return name if is_id(name) else None


def _location(body: bytes) -> Location | None:
    """``index:response_id`` (formats 2 to 5) -> (response id, (output index,)), or None."""
    index, colon, response_id = body.partition(b":")
    number = _index(index) if colon else None
    name = _response_id(response_id) if number is not None else None
    return (name, (number,)) if name is not None and number is not None else None


def _location_v6(body: bytes) -> Location | None:
    """``index,index...:response_id`` -> (response id, output indexes), or None (indexes must ascend)."""
    raw_indexes, colon, response_id = body.partition(b":")
    if not colon:
        return None
    indexes: list[int] = []
    for raw in raw_indexes.split(b","):
        number = _index(raw)
        if number is None or (indexes and number <= indexes[-1]):
            return None
        indexes.append(number)
    name = _response_id(response_id)
    return (name, tuple(indexes)) if name is not None else None


def _marker(body: bytes) -> bool:
    return body == _MARKER


# -- the formats ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Format:
    """How the values of one format version are read. ``signed``: its values carry a MAC (a value of an unsigned
    format is read only by a ledger built with ``accept_unsigned=True``)."""

    version: int
    signed: bool
    entry: Callable[[bytes], Entry | None]
    location: Callable[[bytes], Location | None]
    marker: Callable[[bytes], bool]


# Every format this release reads, and how: the one place to change when a format is added (trace ids, turn numbers,
# a Redis Cluster key layout) or dropped. A version missing here is unreadable, as this release's values are to a
# reader of the previous one.
FORMATS: dict[int, Format] = {
    7: Format(7, signed=True, entry=_entry_v7, location=_location_v6, marker=_marker),
    6: Format(6, signed=True, entry=_entry_v6, location=_location_v6, marker=_marker),
    5: Format(5, signed=True, entry=_entry_v4, location=_location, marker=_marker),
    4: Format(4, signed=True, entry=_entry_v4, location=_location, marker=_marker),
    3: Format(3, signed=True, entry=_entry_v3, location=_location, marker=_marker),
    2: Format(2, signed=False, entry=_entry_v2, location=_location, marker=_marker),
}
# A value without a `v{version}.` header.
UNVERSIONED = 2
_HEADER = f"v{FORMAT}.".encode("ascii")
_HEADER_BYTES = len(_HEADER) + _MAC_CHARS + 1


def _ignore(name: str) -> None:
    """Counts nothing (a codec used outside a ledger)."""


class Codec:
    """Seals and opens the values of one fleet key: ``v7.{MAC}.{content}``, the MAC a 16-byte keyed BLAKE2b
    (base64url) of the format version, the key name and the content, keyed with ``fingerprinter.derive``.

    Opening a value costs one MAC; what fails is None and counted through ``count``: ``forged`` (a MAC that does
    not verify: made without the key, or copied from another key), ``unsigned`` (no header: a format-2 value, or
    junk, while ``accept_unsigned`` is off) or ``undecodable`` (anything else: malformed, oversized, of an unknown
    format, or a field outside the rules).
    """

    __slots__ = ("_mac", "accept_unsigned", "count", "max_entry_bytes")

    def __init__(
        self,
        fingerprinter: Fingerprinter,
        *,
        accept_unsigned: bool = False,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        count: Callable[[str], None] = _ignore,
    ) -> None:
        # The keyed state after the key block: copying it saves a compression per value.
        self._mac = hashlib.blake2b(key=fingerprinter.derive(MAC_PURPOSE), digest_size=MAC_BYTES, person=_MAC_PERSON)
        self.accept_unsigned = accept_unsigned
        self.max_entry_bytes = max_entry_bytes
        self.count = count

    def _tag(self, version: int, key: str, content: bytes) -> bytes:
        name = key.encode("utf-8", "surrogatepass")
        digest = self._mac.copy()
        digest.update(version.to_bytes(2, "big") + len(name).to_bytes(4, "big"))
        digest.update(name)
        digest.update(content)
        return base64.urlsafe_b64encode(digest.digest())[:_MAC_CHARS]

    def seal(self, key: str, content: bytes) -> bytes:
        """The value to store under ``key``."""
        return b"".join((_HEADER, self._tag(FORMAT, key, content), b".", content))

    def open(self, key: str, raw: object, limit: int) -> tuple[Format, bytes] | None:
        """The format and content of the value read from ``key``, once authenticated; None (counted) otherwise."""
        if isinstance(raw, str):  # a client made with decode_responses=True
            try:
                raw = raw.encode("ascii")
            except UnicodeEncodeError:
                raw = None
        if not isinstance(raw, bytes) or len(raw) > limit:
            self.count("undecodable")
            return None
        if raw[:1] != b"v":
            if not self.accept_unsigned:
                self.count("unsigned")
                return None
            return FORMATS[UNVERSIONED], raw
        dot = raw.find(b".", 1, 8)
        digits = raw[1:dot]
        form = FORMATS.get(int(digits)) if dot > 0 and digits.isdigit() else None
        if form is None or not form.signed:
            self.count("undecodable")
            return None
        tag, content = raw[dot + 1 : dot + 1 + _MAC_CHARS], raw[dot + 2 + _MAC_CHARS :]
        if raw[dot + 1 + _MAC_CHARS : dot + 2 + _MAC_CHARS] != b"." or not hmac.compare_digest(
            tag, self._tag(form.version, key, content)
        ):
            self.count("forged")
            return None
        return form, content

    def entry(self, key: str, raw: object) -> Entry | None:
        opened = self.open(key, raw, max(self.max_entry_bytes, DEFAULT_MAX_ENTRY_BYTES) * 2)
        if opened is None:
            return None
        entry = opened[0].entry(opened[1])
        if entry is None:
            self.count("undecodable")
        return entry

    def location(self, key: str, raw: object) -> Location | None:
        opened = self.open(key, raw, _MAX_LOCATION_BYTES)
        if opened is None:
            return None
        place = opened[0].location(opened[1])
        if place is None:
            self.count("undecodable")
        return place

    def marker(self, key: str, raw: object) -> bool:
        opened = self.open(key, raw, _MAX_MARKER_BYTES)
        if opened is None:
            return False
        if not opened[0].marker(opened[1]):
            self.count("undecodable")
            return False
        return True

    def commands(self, namespace: str, entry: Entry, parent_id: str | None) -> list[tuple[str, bytes]]:
        """The keys and sealed values recording ``entry``: the entry, the locations of its output items (by id, by
        call, and by text fingerprint for assistant messages; none for items the app wrote), its conversation's
        latest entry, and its parent's
        continued-marker. None of them (counted ``local_only``) for an entry a reader would reject, nor (counted
        ``dropped``) for one too big even without its output items; ``trimmed`` counts those that lost some."""
        if not shareable(entry, parent_id):
            self.count("local_only")
            return []
        fitted = _fit(entry_fields(entry), self.max_entry_bytes - _HEADER_BYTES)
        if fitted is None:
            self.count("dropped")
            return []
        content, kept, whole = fitted
        if not whole:
            self.count("trimmed")
        name = entry_key(namespace, entry.response_id)
        commands = [(name, self.seal(name, content))]
        if not entry.written_by_app:  # never a place a replayed item is found (see ``Entry.written_by_app``)
            positions: dict[Key, list[int]] = {}
            for index, meta in enumerate(entry.outputs[:kept]):
                for key in location_keys(meta):
                    positions.setdefault(key, []).append(index)
            for key, indexes in positions.items():
                located = location_key(namespace, key)
                if located is not None:
                    commands.append((located, self.seal(located, encode_location(indexes, entry.response_id))))
        if entry.conversation_id is not None:
            name = conversation_key(namespace, entry.conversation_id)
            commands.append((name, self.seal(name, content)))
        if parent_id is not None:
            name = marker_key(namespace, parent_id)
            commands.append((name, self.seal(name, _MARKER)))
        return commands


def decode_entry(body: object, max_bytes: int = DEFAULT_MAX_ENTRY_BYTES, *, version: int = FORMAT) -> Entry | None:
    """The entry an already authenticated content of format ``version`` holds, or None for anything malformed,
    oversized or outside the rules. (Values read from Redis go through ``Codec.entry``, which authenticates first.)"""
    form = FORMATS.get(version)
    if form is None or not isinstance(body, bytes) or len(body) > max(max_bytes, DEFAULT_MAX_ENTRY_BYTES) * 2:
        return None
    return form.entry(body)
