"""The values the shared ledger keeps in Redis: their key names, their one format, the MAC that authenticates them,
and the rules every field must pass, on write as on read.

Anyone who can write to the shared Redis could otherwise plant a fact: a parent stored with ``store=false``, a call
left pending in a conversation, an item whose payload had another length. So every value of every key kind
(entries ``r``, item locations ``i`` ``t`` ``f``, conversation pointers ``c``, continued-markers ``k``) is
sealed with a keyed BLAKE2b under a key derived from the fleet's hash key (derived in each process, never written
anywhere). The MAC covers the format version, the full key name and the content: a value copied to another key
fails, and a value that fails is absent (and counted), as a malformed one is. Without the hash key a writer can
still delete values or put back an older genuine value under its own key; it cannot make one up.

An entry is a JSON object keyed by short field names, one row of ``FIELDS`` per ``Entry`` field: its key, the rule
that reads it and how it is written. Only the response id is required; a field at its default is left out. A reader
ignores a key it does not know (a field a newer writer added) and gives a key it misses the field's default (an
older writer's entry, or a field left out), so adding a field is one row, never a new format. Whatever passes the
MAC is still checked field by field against the shapes the API gives (ids, enum-like tokens, the instructions hash,
bounded counts and lists) before it can reach a check or a span, and the same rules decide on write: a response
whose fields would not pass stays in its process's local tier, so no process writes what another would reject.
Item locations are ``index,index...:response_id``, continued-markers ``1``.

Key names carry a Redis Cluster hash tag: ``{prefix}:{key id}:{tag}:{kind}``, the tag being what the key is about (a
response id for its entry ``r`` and continued-marker ``k``, a conversation id for its pointer ``c``, an item id
``i``, a call ``t`` or a text fingerprint ``f`` for a location). One layout on a single node and on a cluster.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Sequence
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
    entry_keys,
)

if TYPE_CHECKING:
    from .._fingerprint import Fingerprinter

DEFAULT_MAX_ENTRY_BYTES = 8448  # every field at its bound with the API's ids takes 8,241 bytes
# The version every value is sealed with: a value of another is of no format this reader knows (counted
# ``undecodable``, treated as absent). A field added to ``FIELDS`` is no new version.
FORMAT = 1
MAC_BYTES = 16
MAC_PURPOSE = b"ledger-mac"  # Fingerprinter.derive: the MAC key is the fleet key's, for this use only
_MAC_PERSON = b"otelr-ledger"
_MAC_CHARS = 22  # base64url of 16 bytes, unpadded
_HEADER = f"v{FORMAT}.".encode("ascii")
_HEADER_BYTES = len(_HEADER) + _MAC_CHARS + 1

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
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_MAX_SEQUENCE = 2**63 - 1  # wall-clock nanoseconds until 2262
_MAX_COUNT = 2**32 - 1
_MAX_FINGERPRINT = 2**64 - 1
_MAX_SHAPE = 2**40 - 1
# Values longer than these are rejected unread (before their MAC is computed).
_MAX_LOCATION_BYTES = 128 + MAX_ID_CHARS  # a header (26 bytes), up to 32 positions (85) and a colon, then an id
_MAX_MARKER_BYTES = 64
_MARKER = b"1"


# -- key names -----------------------------------------------------------------------------------------------


def is_id(value: object) -> bool:
    """An id a shared value may hold and a key may be named by."""
    return type(value) is str and _ID.fullmatch(value) is not None


def _is_token(value: object) -> bool:
    return type(value) is str and _TOKEN.fullmatch(value) is not None


def _tagged(namespace: str, tag: str, kind: str) -> str:
    """``{namespace}:{{tag}}:{kind}``: the braces are a Redis Cluster hash tag, so only ``tag`` picks the slot. Keys
    about one thing share it (a response's entry and its continued-marker); keys about different things spread over
    the cluster (no tag common to every key: that would put the whole ledger on one shard)."""
    return f"{namespace}:{{{tag}}}:{kind}"


def entry_key(namespace: str, response_id: str) -> str:
    """A response's entry, tagged by its id (the slot of its continued-marker)."""
    return _tagged(namespace, response_id, "r")


def conversation_key(namespace: str, conversation_id: str) -> str:
    """The conversation's latest entry (a copy of it, sealed under this name), tagged by the conversation id."""
    return _tagged(namespace, conversation_id, "c")


def marker_key(namespace: str, response_id: str) -> str:
    """Says the response was continued (for ``concurrent_branch``); in the slot of the response's entry."""
    return _tagged(namespace, response_id, "k")


def marker_of(key: str) -> str | None:
    """The continued-marker of the response whose entry ``key`` names (the same slot); None for another kind."""
    return key[:-1] + "k" if key.endswith("}:r") else None


def location_key(namespace: str, key: Key) -> str | None:
    """The Redis key locating an output item, tagged by what names it: its text fingerprint (``f``), its call
    (``t``: type and call_id), its id (``i``); None for a name no shared value may hold (it is never written, so
    never asked for)."""
    if isinstance(key, int):
        return _tagged(namespace, f"{key:016x}", "f")
    if isinstance(key, tuple):
        item_type, call_id = key
        return _tagged(namespace, f"{item_type}:{call_id}", "t") if _is_token(item_type) and is_id(call_id) else None
    return _tagged(namespace, key, "i") if is_id(key) else None


# -- the rules of a field: a JSON value in, the field's value out, ``_Refused`` outside the rules -------------------


class _Refused(ValueError):
    """A field of a shared value outside the rules: the whole value is refused."""


Read = Callable[[Any], Any]


def _matching(pattern: re.Pattern[str]) -> Read:
    """A string that ``pattern`` matches whole (an id, a token, the instructions hash)."""

    def read(raw: object) -> str:
        if type(raw) is str and pattern.fullmatch(raw):
            return raw
        raise _Refused

    return read


def _hex_number(pattern: re.Pattern[str]) -> Read:
    """Lowercase hex of a fixed length, read as its number (a trace or span id)."""
    text = _matching(pattern)
    return lambda raw: int(text(raw), 16)


def _upto(top: int) -> Read:
    """An integer from 0 to ``top`` (never a bool, a float or a string of digits)."""

    def read(raw: object) -> int:
        if type(raw) is int and 0 <= raw <= top:
            return raw
        raise _Refused

    return read


def _flag(raw: object) -> bool:
    """``0`` or ``1`` (never JSON's ``true``)."""
    if type(raw) is int and (raw == 0 or raw == 1):
        return raw == 1
    raise _Refused


def _optional(read: Read) -> Read:
    return lambda raw: None if raw is None else read(raw)


def _list(read: Read, most: int) -> Read:
    """A JSON list of at most ``most`` values, each passing ``read``: a tuple of what they read as."""

    def read_list(raw: object) -> tuple[Any, ...]:
        if type(raw) is list and len(raw) <= most:
            return tuple(map(read, raw))
        raise _Refused

    return read_list


def _record(*reads: Read) -> Callable[[object], list[Any]]:
    """A JSON list of exactly one value per rule, each passing its own: what they read as."""

    def read(raw: object) -> list[Any]:
        if type(raw) is list and len(raw) == len(reads):
            return [rule(value) for rule, value in zip(reads, raw, strict=True)]
        raise _Refused

    return read


_id = _matching(_ID)
_token = _matching(_TOKEN)
_count = _upto(_MAX_COUNT)
_fingerprint = _upto(_MAX_FINGERPRINT)
_shape = _upto(_MAX_SHAPE)
_optional_id = _optional(_id)
_copy_fields = _record(_upto(MAX_OUTPUT_ITEMS - 1), _shape)  # output index, shape
_given_fields = _record(_id, _count, _fingerprint)  # call_id, length, fingerprint


def _item(raw: object) -> ItemMeta:
    """``[type, id, call_id, role, phase, encrypted, fingerprint, awaits, shape]`` (the hot path of a read: an entry
    holds up to 32, so its rules are spelt out here rather than composed)."""
    if type(raw) is list and len(raw) == 9:
        item_type, item_id, call_id, role, phase, encrypted, fingerprint, awaits, shape = raw
        if (
            _is_token(item_type)
            and (item_id is None or is_id(item_id))
            and (call_id is None or is_id(call_id))
            and (role is None or _is_token(role))
            and (phase is None or _is_token(phase))
            and (encrypted == 0 or encrypted == 1)
            and type(encrypted) is int
            and (awaits == 0 or awaits == 1)
            and type(awaits) is int
            and (fingerprint is None or (type(fingerprint) is int and 0 <= fingerprint <= _MAX_FINGERPRINT))
            and (shape is None or (type(shape) is int and 0 <= shape <= _MAX_SHAPE))
        ):
            return ItemMeta(item_type, item_id, call_id, role, phase, encrypted == 1, fingerprint, awaits == 1, shape)
    raise _Refused


def _copy(raw: object) -> tuple[int, ...]:
    return tuple(_copy_fields(raw))


def _given(raw: object) -> GivenOutput:
    return GivenOutput(*_given_fields(raw))


def _same(value: Any) -> Any:
    return value


def _write_items(items: tuple[ItemMeta, ...]) -> list[list[Any]]:
    return [
        [m.type, m.id, m.call_id, m.role, m.phase, int(m.encrypted), m.fingerprint, int(m.awaits), m.shape]
        for m in items[:MAX_OUTPUT_ITEMS]
    ]


def _write_messages(fingerprints: tuple[int, ...]) -> list[int]:
    return list(fingerprints[-MAX_INPUT_MESSAGES:])


def _write_copies(copies: tuple[tuple[int, int], ...]) -> list[list[int]]:
    return [list(copy) for copy in copies[:MAX_OUTPUT_ITEMS]]


def _write_held(call_ids: tuple[str, ...]) -> list[str]:
    """Held calls as shared. They carry the app's own call_ids (from its inputs): one that fails the id rule is left
    out (``entry_fields`` then says the state may hold calls the value does not list), rather than the entry, and
    every later entry of its chain, which carries it, staying unshared."""
    return [call_id for call_id in call_ids[-MAX_HELD_CALLS:] if is_id(call_id)]


def _write_given(given: tuple[GivenOutput, ...]) -> list[list[Any]]:
    """The given outputs as shared: one under a call_id that fails the id rule (the app's own) is left out; no copy
    first sent is then known to compare a replay's with. The local hash of its text is never written."""
    return [[g.call_id, g.length, g.fingerprint] for g in given[-MAX_GIVEN_OUTPUTS:] if is_id(g.call_id)]


def _id_or_none(value: str) -> str | None:
    """A name the app chose (a model, a deployment) as shared: left out (none known) when it fails the id rule,
    rather than the entry staying unshared for it."""
    return value if is_id(value) else None


# -- the table: one row per shared field of ``Entry`` -------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    """One ``Entry`` field in a shared value: its short key, the rule that reads its JSON value (``_Refused``
    outside the rules) and how the field's value is written. Its default is the ``Entry``'s: left out when the value
    is the default, given when the key is missing."""

    name: str
    key: str
    read: Read
    write: Callable[[Any], Any] = _same


FIELDS: tuple[Field, ...] = (
    Field("response_id", "id", _id),
    Field("sequence", "s", _upto(_MAX_SEQUENCE)),
    Field("store", "st", _flag, int),
    Field("instructions_hash", "h", _optional(_matching(_HASH))),
    Field("conversation_id", "c", _optional_id),
    Field("outputs", "o", _list(_item, MAX_OUTPUT_ITEMS), _write_items),
    Field("input_app_messages", "m", _count),
    Field("input_compactions", "cm", _count),
    Field("parent_id", "p", _optional_id),
    Field("input_messages", "im", _list(_fingerprint, MAX_INPUT_MESSAGES), _write_messages),
    Field("copies", "cp", _list(_copy, MAX_OUTPUT_ITEMS), _write_copies),
    Field("turn", "t", _optional(_count)),
    Field("lineage_id", "l", _optional_id),
    Field("trace_id", "tr", _optional(_hex_number(_TRACE_ID)), lambda number: f"{number:032x}"),
    Field("span_id", "sp", _optional(_hex_number(_SPAN_ID)), lambda number: f"{number:016x}"),
    Field("deleted", "d", _flag, int),
    Field("written_by_app", "w", _flag, int),
    Field("instructed_id", "ii", _optional_id),
    Field("instructed_turn", "it", _optional(_count)),
    Field("system_in_state", "ss", _flag, int),
    Field("held_calls", "hc", _list(_id, MAX_HELD_CALLS), _write_held),
    Field("held_outputs", "ho", _list(_id, MAX_HELD_CALLS), _write_held),
    Field("held_partial", "hp", _flag, int),
    Field("given_outputs", "g", _list(_given, MAX_GIVEN_OUTPUTS), _write_given),
    Field("input_system_messages", "sy", _count),
    Field("given_messages", "gm", _optional(_fingerprint)),
    Field("model", "md", _optional_id, _id_or_none),
    Field("resolved_model", "rm", _optional_id, _id_or_none),
    Field("reasoning_context", "rc", _optional(_token)),
    Field("input_tokens", "ti", _optional(_count)),
    Field("output_tokens", "to", _optional(_count)),
    Field("reasoning_held", "rh", _optional(_count)),
    Field("reasoning_turn", "rt", _count),
    Field("tools_fingerprint", "tf", _optional(_fingerprint)),
    Field("organization", "og", _optional(_count)),
    Field("project", "pj", _optional(_count)),
    Field("credential", "cr", _optional(_count)),
    Field("endpoint", "ep", _optional(_count)),
)
# Entry fields no shared value holds: ``shared`` is the reader's own mark.
NOT_SHARED = frozenset({"shared"})
_READS = {row.key: (row.name, row.read) for row in FIELDS}
_DEFAULTS = {field.name: field.default for field in dataclasses.fields(Entry)}
_WRITES = tuple((row.name, row.key, row.write, _DEFAULTS[row.name]) for row in FIELDS)
_KEY = {row.name: row.key for row in FIELDS}
_OUTPUTS, _COPIES, _GIVEN = _KEY["outputs"], _KEY["copies"], _KEY["given_outputs"]
_HELD_CALLS, _HELD_OUTPUTS, _HELD_PARTIAL = _KEY["held_calls"], _KEY["held_outputs"], _KEY["held_partial"]


def entry_fields(entry: Entry) -> dict[str, Any]:
    """The entry as a shared value holds it: its fields keyed by ``FIELDS``, those at their default left out."""
    doc: dict[str, Any] = {}
    for name, key, write, default in _WRITES:
        value = getattr(entry, name)
        if value != default:
            doc[key] = write(value)
    if (entry.held_calls or entry.held_outputs) and (
        len(doc.get(_HELD_CALLS, ())) < len(entry.held_calls[-MAX_HELD_CALLS:])
        or len(doc.get(_HELD_OUTPUTS, ())) < len(entry.held_outputs[-MAX_HELD_CALLS:])
    ):
        doc.pop(_HELD_PARTIAL, None)  # a call_id left out: the state may hold calls the value does not list
    return doc


def entry_from_fields(doc: object) -> Entry | None:
    """The entry a shared value's object holds, or None unless it names a response and every field it holds passes
    its rule: the one set of rules for what a shared entry may hold, applied to what is written and to what is read.
    A key no row knows is ignored; a field without its key takes its default. Built ``shared``: another writer may
    have put it there."""
    if type(doc) is not dict or "id" not in doc:
        return None
    values: dict[str, Any] = {"shared": True}
    reads = _READS
    try:
        for key, raw in doc.items():
            known = reads.get(key)
            if known is not None:
                values[known[0]] = known[1](raw)
    except _Refused:
        return None
    entry = Entry(**values)
    if (entry.trace_id is None) != (entry.span_id is None):
        return None  # a span is named by both
    if entry.instructed_turn is not None and entry.instructed_id is None:
        return None  # a turn of no response
    return entry


def shareable(entry: Entry, parent_id: str | None = None) -> bool:
    """Whether every field of the entry (and the parent it continued) passes the rules a reader applies: an entry
    that does not is kept local rather than written for other processes to reject."""
    return _shared(entry, parent_id) is not None


def _shared(entry: Entry, parent_id: str | None) -> dict[str, Any] | None:
    """The entry's fields as written, or None when a reader would refuse them (or the parent's id)."""
    if parent_id is not None and not is_id(parent_id):
        return None
    doc = entry_fields(entry)
    return doc if entry_from_fields(doc) is not None else None


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


# What an entry too big for the limit leaves out, least needed first: the given outputs; the held calls (with their
# partial flag: the state may then hold calls the entry does not list, so an output is no orphan); then the output
# items past the limit, with the other copies' shapes (they name output indexes).
_LEFT_OUT_FIRST = ((_GIVEN,), (_HELD_CALLS, _HELD_OUTPUTS, _HELD_PARTIAL))


def _fit(doc: dict[str, Any], max_bytes: int) -> tuple[bytes, int, bool] | None:
    """Compact JSON of ``doc`` within ``max_bytes``, how many output items it kept, and whether it kept everything;
    None when it cannot fit even without its output items."""
    outputs: list[Any] = doc.get(_OUTPUTS, [])
    data = _dumps(doc)
    if len(data) <= max_bytes:
        return data, len(outputs), True
    for keys in _LEFT_OUT_FIRST:
        for key in keys:
            doc.pop(key, None)
        data = _dumps(doc)
        if len(data) <= max_bytes:
            return data, len(outputs), False
    doc.pop(_OUTPUTS, None)
    doc.pop(_COPIES, None)
    size = len(_dumps(doc)) + len(f',"{_OUTPUTS}":[]')
    if size > max_bytes:
        return None
    kept = 0
    for output in outputs:
        size += len(_dumps(output)) + (1 if kept else 0)
        if size > max_bytes:
            break
        kept += 1
    if kept:
        doc[_OUTPUTS] = outputs[:kept]
    return _dumps(doc), kept, False


def encode_entry(entry: Entry, max_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> tuple[bytes, int] | None:
    """The entry as a sealed value's content and how many output items it kept: the whole value (header and MAC
    included) stays within ``max_bytes``, what does not fit left out (see ``_fit``). None for an entry that cannot fit
    even without its output items, or that a reader would reject (see ``shareable``)."""
    doc = _shared(entry, None)
    fitted = _fit(doc, max_bytes - _HEADER_BYTES) if doc is not None else None
    return (fitted[0], fitted[1]) if fitted is not None else None


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("ascii"))
    except Exception:  # not ASCII, not JSON, nested past the recursion limit, an int of too many digits
        return None


def decode_entry(body: object, max_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> Entry | None:
    """The entry an already authenticated content holds, or None for anything malformed, oversized or outside the
    rules. (Values read from Redis go through ``Codec.entry``, which authenticates first.)"""
    if not isinstance(body, bytes) or len(body) > max(max_bytes, DEFAULT_MAX_ENTRY_BYTES) * 2:
        return None
    return entry_from_fields(_json(body))


# -- item locations and markers ------------------------------------------------------------------------------


Location = tuple[str, tuple[int, ...]]  # a response id and the output indexes a key names in it, ascending


def encode_location(indexes: Sequence[int], response_id: str) -> bytes:
    """``index,index...:response_id``: where an output item is (several indexes for an id a response holds at
    several positions)."""
    return f"{','.join(map(str, indexes))}:{response_id}".encode("ascii")


def _index(raw: bytes) -> int | None:
    return int(raw) if raw.isdigit() and len(raw) <= 2 and int(raw) < MAX_OUTPUT_ITEMS else None


def decode_location(body: bytes) -> Location | None:
    """``index,index...:response_id`` -> (response id, output indexes), or None (indexes must ascend)."""
    raw_indexes, colon, raw_id = body.partition(b":")
    if not colon:
        return None
    indexes: list[int] = []
    for raw in raw_indexes.split(b","):
        number = _index(raw)
        if number is None or (indexes and number <= indexes[-1]):
            return None
        indexes.append(number)
    try:
        response_id = raw_id.decode("ascii")
    except UnicodeDecodeError:
        return None
    return (response_id, tuple(indexes)) if is_id(response_id) else None


# -- sealing ---------------------------------------------------------------------------------------------------


def _ignore(name: str) -> None:
    """Counts nothing (a codec used outside a ledger)."""


class Codec:
    """Seals and opens the values of one fleet key: ``v1.{MAC}.{content}``, the MAC a 16-byte keyed BLAKE2b
    (base64url) of the format version, the key name and the content, keyed with ``fingerprinter.derive``.

    Opening a value costs one MAC; what fails is None and counted through ``count``: ``forged`` (a MAC that does
    not verify: made without the key, or copied from another key) or ``undecodable`` (anything else: no header or
    another version's, malformed, oversized, or a field outside the rules).
    """

    __slots__ = ("_mac", "count", "max_entry_bytes")

    def __init__(
        self,
        fingerprinter: Fingerprinter,
        *,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        count: Callable[[str], None] = _ignore,
    ) -> None:
        # The keyed state after the key block: copying it saves a compression per value.
        self._mac = hashlib.blake2b(key=fingerprinter.derive(MAC_PURPOSE), digest_size=MAC_BYTES, person=_MAC_PERSON)
        self.max_entry_bytes = max_entry_bytes
        self.count = count

    def _tag(self, key: str, content: bytes) -> bytes:
        name = key.encode("utf-8", "surrogatepass")
        digest = self._mac.copy()
        digest.update(FORMAT.to_bytes(2, "big") + len(name).to_bytes(4, "big"))
        digest.update(name)
        digest.update(content)
        return base64.urlsafe_b64encode(digest.digest())[:_MAC_CHARS]

    def seal(self, key: str, content: bytes) -> bytes:
        """The value to store under ``key``."""
        return b"".join((_HEADER, self._tag(key, content), b".", content))

    def open(self, key: str, raw: object, limit: int) -> bytes | None:
        """The content of the value read from ``key``, once authenticated; None (counted) otherwise."""
        if isinstance(raw, str):  # a client made with decode_responses=True
            try:
                raw = raw.encode("ascii")
            except UnicodeEncodeError:
                raw = None
        if not isinstance(raw, bytes) or len(raw) > limit or not raw.startswith(_HEADER):
            self.count("undecodable")
            return None
        mac_end = len(_HEADER) + _MAC_CHARS
        tag, dot, content = raw[len(_HEADER) : mac_end], raw[mac_end : mac_end + 1], raw[mac_end + 1 :]
        if dot != b"." or not hmac.compare_digest(tag, self._tag(key, content)):
            self.count("forged")
            return None
        return content

    def entry(self, key: str, raw: object) -> Entry | None:
        content = self.open(key, raw, max(self.max_entry_bytes, DEFAULT_MAX_ENTRY_BYTES) * 2)
        entry = entry_from_fields(_json(content)) if content is not None else None
        if entry is None and content is not None:
            self.count("undecodable")
        return entry

    def location(self, key: str, raw: object) -> Location | None:
        content = self.open(key, raw, _MAX_LOCATION_BYTES)
        place = decode_location(content) if content is not None else None
        if place is None and content is not None:
            self.count("undecodable")
        return place

    def marker(self, key: str, raw: object) -> bool:
        content = self.open(key, raw, _MAX_MARKER_BYTES)
        if content is not None and content != _MARKER:
            self.count("undecodable")
        return content == _MARKER

    def commands(self, namespace: str, entry: Entry, parent_id: str | None) -> list[tuple[str, bytes]]:
        """The keys and sealed values recording ``entry``: the entry, the locations of its output items (by id, by
        call, and by text fingerprint for assistant messages; none for items the app wrote), its conversation's
        latest entry, and its parent's continued-marker. None of them (counted ``local_only``) for an entry a reader
        would reject, nor (counted ``dropped``) for one too big even without its output items; ``trimmed`` counts
        those that lost some."""
        doc = _shared(entry, parent_id)
        if doc is None:
            self.count("local_only")
            return []
        fitted = _fit(doc, self.max_entry_bytes - _HEADER_BYTES)
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
            for key, index in entry_keys(entry):
                if index < kept:
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
