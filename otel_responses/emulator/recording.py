"""A thread-safe log of the requests the emulator received, for tests to assert on."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as it arrived: `body` is the parsed JSON (None when absent or invalid)."""

    method: str
    path: str
    body: Any
    query: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


class RequestLog(Sequence[RecordedRequest]):
    """Append-only from the server threads, read-only (plus `clear`) for everyone else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []

    def append(self, request: RecordedRequest) -> None:
        """Record a request (called by the server)."""
        with self._lock:
            self._items.append(request)

    def clear(self) -> None:
        """Forget every recorded request."""
        with self._lock:
            self._items.clear()

    def snapshot(self) -> list[RecordedRequest]:
        """A copy that will not change under the caller."""
        with self._lock:
            return list(self._items)

    @overload
    def __getitem__(self, index: int) -> RecordedRequest: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RecordedRequest]: ...

    def __getitem__(self, index: int | slice) -> RecordedRequest | Sequence[RecordedRequest]:
        with self._lock:
            return self._items[index]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __iter__(self) -> Iterator[RecordedRequest]:
        return iter(self.snapshot())

    def __repr__(self) -> str:
        return f"RequestLog({self.snapshot()!r})"
