"""Keyed short hashes: comparable inside the process (or a fleet sharing a key), useless to anyone else.

A plain digest of short instructions or a marker could be reversed by guessing; a keyed BLAKE2b cannot
without the key, and the default key is random per process and never leaves it. Each use has its own
personalisation, so an internal fingerprint never equals an exported hash of the same text.
"""

from __future__ import annotations

import hashlib
import secrets

KEY_BYTES = 32
_EXPORTED = b"otelr-instr"
_INTERNAL = b"otelr-item"
_KEY_ID = b"otelr-keyid"
_DERIVE = b"otelr-derive"


class Fingerprinter:
    """Keyed BLAKE2b: 16 hex characters for the exported instructions hash, 64-bit ints for internal use."""

    __slots__ = ("_internal", "_key", "_last", "empty")

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key else secrets.token_bytes(KEY_BYTES)
        # Apps pass the same instructions object turn after turn: remember the last one by identity.
        self._last: tuple[str, str] | None = None
        # The keyed state after the key block: copying it skips the key setup on every internal fingerprint.
        self._internal = hashlib.blake2b(key=self._key, digest_size=8, person=_INTERNAL)
        # The internal fingerprint of an empty text: an empty system message counts as none, as `instructions=""` does.
        self.empty = self.number("")

    def text(self, value: str) -> str:
        """Short hex fingerprint of ``value``; the only fingerprint that is ever exported."""
        last = self._last
        if last is not None and last[0] is value:
            return last[1]
        digest = hashlib.blake2b(
            value.encode("utf-8", "surrogatepass"), key=self._key, digest_size=8, person=_EXPORTED
        ).hexdigest()
        self._last = (value, digest)
        return digest

    def key_id(self) -> str:
        """A short id of the key (a keyed hash of nothing): processes sharing a key share it, and it says
        nothing about the key. A shared ledger namespaces its entries with it, so a rotated key never
        compares fingerprints made under the old one."""
        return hashlib.blake2b(b"", key=self._key, digest_size=6, person=_KEY_ID).hexdigest()

    def derive(self, purpose: bytes) -> bytes:
        """A key of its own for ``purpose`` (1 to 16 bytes), derived from this one: a keyed hash of nothing, with a
        personalisation no other use shares and the purpose as salt. It tells nothing about this key, nor about a key
        derived for another purpose, and like this key it is never written anywhere: the shared ledger seals its
        values with one, so a writer to Redis without the fleet's key cannot forge them."""
        # BLAKE2b pads a short salt with zero bytes: without them in a purpose, two purposes never share a key.
        if not isinstance(purpose, bytes) or not 0 < len(purpose) <= hashlib.blake2b.SALT_SIZE or b"\0" in purpose:
            raise ValueError(f"purpose must be 1 to {hashlib.blake2b.SALT_SIZE} bytes, none of them zero")
        return hashlib.blake2b(b"", key=self._key, digest_size=KEY_BYTES, person=_DERIVE, salt=purpose).digest()

    def number(self, value: str) -> int:
        """Internal 64-bit fingerprint of a payload (assistant text, encrypted content); never exported."""
        digest = self._internal.copy()
        try:
            data = value.encode()
        except UnicodeEncodeError:  # a lone surrogate: still a fingerprint, never an error
            data = value.encode("utf-8", "surrogatepass")
        digest.update(data)
        return int.from_bytes(digest.digest(), "big")


# A sequence of keyed fingerprints folded into one (the app messages a request was given, in order): multiply-xor on
# 64 bits, so the order counts and two sequences share a value only by chance (the fingerprints folded are keyed,
# so nobody without the key can aim at one). Cheap enough for every request: a few integer operations per message.
SEQUENCE_START = 0x6A09E667F3BCC909
_SEQUENCE_FACTOR = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def next_in_sequence(sequence: int, fingerprint: int) -> int:
    """The fold of a sequence (``SEQUENCE_START`` when empty) with one more keyed fingerprint after it."""
    return ((sequence ^ fingerprint) * _SEQUENCE_FACTOR + 1) & _MASK


def key_from_text(text: str) -> bytes:
    """Derive a BLAKE2b key from a configured secret of any length."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()
