"""A decompressed copy of a compressed body, for the analysis only: the client receives the bytes as they came.

Every decompressor here is bounded: it never produces more than one byte past the room left under the limit, since a
few bytes may stand for gigabytes (a decompression bomb). A stage is never asked for "at most 0 bytes": to zlib a bound
of 0 means no bound at all, so a body that filled the room exactly would let the next chunk's bomb
through; asked for one byte, a stage that gives it shows the copy is over the limit. ``gzip`` and ``deflate`` with
the standard library; ``zstd`` with Python 3.14's ``compression.zstd`` or ``zstandard`` (the ``zstd`` extra); ``br``
with a Brotli module whose decompressor takes an output limit. A body in another coding, a corrupt one, or one whose
copy would pass the limit is not analysed: the call is recorded without what its body says, and the body is relayed
all the same.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from typing import Any

Decode = Callable[[bytes], bytes]
Stage = Callable[[bytes, int], bytes]  # (a chunk, the most bytes it may give, never 0) -> the decompressed bytes
_ZSTD_SLICE = 256  # zstandard has no output bound: fed this much at a time, a slice gives at most ~8 MiB


_OVER = "over the limit"
_UNBOUNDED = "no output limit"


class NotAnalysed(Exception):
    """The body cannot be decoded within the limit (an unknown coding, a corrupt stream, too large)."""

    @property
    def over_limit(self) -> bool:
        """The copy would pass the limit (rather than the stream being corrupt)."""
        return self.args == (_OVER,)

    @property
    def unsupported(self) -> bool:
        """The coding's module cannot decode within a bound (rather than the stream being corrupt)."""
        return self.args == (_UNBOUNDED,)


def _bounded_zlib(obj: Any, chunk: bytes, most: int) -> bytes:
    out = obj.decompress(chunk, most)
    if obj.unconsumed_tail:  # more than the room left
        raise NotAnalysed(_OVER)
    return bytes(out)


def _zlib(coding: str) -> Stage:
    """gzip or zlib (told apart by the stream's header). ``deflate`` is a zlib stream, but some servers send it raw:
    the first chunk tells."""
    state: list[Any] = [zlib.decompressobj(zlib.MAX_WBITS | 32), coding == "deflate"]

    def decompress(chunk: bytes, most: int) -> bytes:
        if state[1]:
            state[1] = False
            try:
                return _bounded_zlib(state[0], chunk, most)
            except zlib.error:
                state[0] = zlib.decompressobj(-zlib.MAX_WBITS)
        return _bounded_zlib(state[0], chunk, most)

    return decompress


def _zstd(coding: str) -> Stage | None:
    try:
        module: Any = importlib.import_module("compression.zstd")
    except ImportError:
        module = None
    if module is not None:
        obj = module.ZstdDecompressor()

        def bounded(chunk: bytes, most: int) -> bytes:
            out = obj.decompress(chunk, most)
            if not obj.needs_input and not obj.eof:  # output left over: more than the room
                raise NotAnalysed(_OVER)
            return bytes(out)

        return bounded
    try:
        zstandard: Any = importlib.import_module("zstandard")
    except ImportError:
        return None
    sliced = zstandard.ZstdDecompressor().decompressobj()

    def by_slices(chunk: bytes, most: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        for start in range(0, len(chunk), _ZSTD_SLICE):
            part = sliced.decompress(chunk[start : start + _ZSTD_SLICE])
            size += len(part)
            if size > most:
                raise NotAnalysed(_OVER)
            parts.append(part)
        return b"".join(parts)

    return by_slices


def _brotli(coding: str) -> Stage | None:
    for name in ("brotli", "brotlicffi"):
        try:
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        return _bounded_brotli(module.Decompressor())
    return None


def _bounded_brotli(obj: Any) -> Stage:
    def bounded(chunk: bytes, most: int) -> bytes:
        try:
            out = obj.process(chunk, output_buffer_limit=most)
        except TypeError:  # a release without the bound: a bomb could not be stopped
            raise NotAnalysed(_UNBOUNDED) from None
        if not obj.can_accept_more_data():
            raise NotAnalysed(_OVER)
        return bytes(out)

    return bounded


_STAGES: dict[str, Callable[[str], Stage | None]] = {
    "gzip": _zlib,
    "x-gzip": _zlib,
    "deflate": _zlib,
    "zstd": _zstd,
    "br": _brotli,
}


def decoder(content_encoding: str | None, limit: int) -> Decode | None:
    """What turns the body's chunks into the decompressed copy, raising ``NotAnalysed`` past ``limit`` bytes of it
    or on a corrupt stream; None for a coding this cannot decode. Codings listed in the order they were applied
    (``gzip, br``) are undone in reverse."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    stages: list[Stage] = []
    for coding in reversed(codings):
        if coding == "identity":
            continue
        make = _STAGES.get(coding)
        stage = make(coding) if make is not None else None
        if stage is None:
            return None
        stages.append(stage)
    total = 0

    def decode(chunk: bytes) -> bytes:
        nonlocal total
        most = limit - total + 1  # the room, and the one byte that shows it is passed (never 0: "no limit")
        try:
            for stage in stages:
                chunk = stage(chunk, most)
        except NotAnalysed:
            raise
        except Exception as exc:  # zlib.error, brotli.error, ZstdError: the copy is unusable, not the relay
            raise NotAnalysed(type(exc).__name__) from None
        total += len(chunk)
        if total > limit:
            raise NotAnalysed(_OVER)
        return chunk

    return decode
