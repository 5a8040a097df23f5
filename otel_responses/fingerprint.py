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


class Fingerprinter:
    """Keyed BLAKE2b: 16 hex characters for the exported instructions hash, 64-bit ints for internal use."""

    __slots__ = ("_internal", "_key", "_last")

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key else secrets.token_bytes(KEY_BYTES)
        # Apps pass the same instructions object turn after turn: remember the last one by identity.
        self._last: tuple[str, str] | None = None
        # The keyed state after the key block: copying it skips the key setup on every internal fingerprint.
        self._internal = hashlib.blake2b(key=self._key, digest_size=8, person=_INTERNAL)

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

    def number(self, value: str) -> int:
        """Internal 64-bit fingerprint of a payload (assistant text, encrypted content); never exported."""
        digest = self._internal.copy()
        try:
            data = value.encode()
        except UnicodeEncodeError:  # a lone surrogate: still a fingerprint, never an error
            data = value.encode("utf-8", "surrogatepass")
        digest.update(data)
        return int.from_bytes(digest.digest(), "big")


def key_from_text(text: str) -> bytes:
    """Derive a BLAKE2b key from a configured secret of any length."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()
