"""Opaque `encrypted_content` for reasoning items.

The real API hands back the model's private reasoning only as an encrypted blob the client
must replay verbatim. The emulator does the same with standard-library primitives: the notes
are XOR-ed with an HMAC-SHA256 keystream and authenticated with HMAC-SHA256, so the plain notes
are neither visible in the token nor recoverable from it without the emulator's secret, and
any alteration is detected.

Like the real API, every serialisation encrypts afresh: a random nonce per token, so two copies of one
item (a stream's ``output_item.done`` and ``response.completed``, a later retrieve) differ in every byte but
have the same length, and each of them verifies.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

_VERSION = b"\x01"
_NONCE_LEN = 16
_TAG_LEN = 32


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


class Sealer:
    """Seals and opens reasoning notes with one per-emulator secret."""

    def __init__(self, secret: bytes) -> None:
        self._enc_key = _hmac(secret, b"otel-responses/encrypt")
        self._mac_key = _hmac(secret, b"otel-responses/authenticate")

    def _keystream(self, nonce: bytes, length: int) -> bytes:
        blocks = [_hmac(self._enc_key, nonce + counter.to_bytes(8, "big")) for counter in range(-(-length // 32))]
        return b"".join(blocks)[:length]

    def seal(self, notes: str) -> str:
        """Encrypt `notes` under a fresh random nonce."""
        nonce = os.urandom(_NONCE_LEN)
        plain = notes.encode("utf-8")
        cipher = bytes(a ^ b for a, b in zip(plain, self._keystream(nonce, len(plain)), strict=True))
        tag = _hmac(self._mac_key, _VERSION + nonce + cipher)
        return base64.b64encode(_VERSION + nonce + cipher + tag).decode("ascii")

    def open(self, token: str) -> str | None:
        """The notes inside `token`, or None when it was not sealed by this secret or was altered."""
        try:
            raw = base64.b64decode(token.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            return None
        if len(raw) < 1 + _NONCE_LEN + _TAG_LEN or raw[:1] != _VERSION:
            return None
        nonce = raw[1 : 1 + _NONCE_LEN]
        cipher = raw[1 + _NONCE_LEN : -_TAG_LEN]
        tag = raw[-_TAG_LEN:]
        if not hmac.compare_digest(tag, _hmac(self._mac_key, _VERSION + nonce + cipher)):
            return None
        plain = bytes(a ^ b for a, b in zip(cipher, self._keystream(nonce, len(cipher)), strict=True))
        try:
            return plain.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def reseal(self, token: str) -> str:
        """The same content encrypted afresh (same length, other bytes); a token that does not open is returned
        as it is."""
        notes = self.open(token)
        return token if notes is None else self.seal(notes)
