"""The shared ledger's writer: a background thread that drains a bounded queue into Redis, so a write never waits
on the call path.

Batches go out as one pipeline each (no MULTI: the keys are independent, and on a Redis Cluster in many slots),
every key with a TTL. A failed batch is retried once after the backoff (a restarted Redis is reconnected to), then
dropped and counted; a full queue drops the write and counts it, never blocks the app. The thread ends when idle
and starts again on demand, and a forked child (a pre-forking server) gets a fresh one: no thread, nor a lock held
by one, comes along through ``fork``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

_BATCH = 256  # jobs per pipeline
_IDLE_SECONDS = 10.0  # the thread ends after this long without work (a new one starts on demand)

_log = logging.getLogger(__name__)

Job = TypeVar("Job")
# A batch of jobs -> the (key, value) pairs to set, and how many jobs they hold (counted as written or failed).
Build = Callable[[list[Job]], tuple[list[tuple[str, bytes]], int]]


class Writer(Generic[Job]):
    """At most ``queue_size`` jobs queued or being written; ``build`` turns a batch into keys and values (on this
    thread: encoding and sealing stay off the call path), ``count(name, by)`` counts ``writes``,
    ``write_failures`` and ``dropped``. ``client()`` gives the Redis client, made on first use (a cluster client
    asks for the topology as it is made, which fails while no node answers: then the batch fails as a write
    would)."""

    def __init__(
        self,
        client: Callable[[], Any],
        build: Build[Job],
        count: Callable[[str, int], None],
        *,
        ttl_seconds: int,
        backoff_seconds: float,
        queue_size: int,
    ) -> None:
        self._client = client
        self._build = build
        self._count = count
        self.ttl_seconds = ttl_seconds
        self.backoff_seconds = backoff_seconds
        self.queue_size = queue_size
        self._jobs: deque[Job] = deque()
        self._pending = 0  # queued or being written
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, job: Job) -> None:
        """Queue a job; a full queue drops it (counted)."""
        with self._cond:
            if self._closed:
                return
            if self._pending >= self.queue_size:
                self._count("dropped", 1)
                return
            self._jobs.append(job)
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="otel-responses-ledger", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        """Batches of queued jobs, one pipeline each, a failed one retried once after the backoff; ends when idle
        or closed."""
        while True:
            with self._cond:
                if not self._jobs:
                    self._cond.wait(_IDLE_SECONDS)
                if not self._jobs:
                    self._thread = None
                    self._cond.notify_all()
                    return
                batch = [self._jobs.popleft() for _ in range(min(len(self._jobs), _BATCH))]
            failed = False
            written = 0
            try:
                commands, written = self._build(batch)
                for _attempt in range(2):
                    try:
                        if commands:
                            self._send(commands)
                        failed = False
                        break
                    except Exception as error:  # Redis down or refusing: never the app's problem
                        failed = True
                        _log.debug("otel-responses: shared ledger write failed (%s)", type(error).__name__)
                        self._pause()
                self._count("write_failures" if failed else "writes", written)
            except Exception:  # a bug in building a batch must not kill the thread with jobs still counted
                _log.debug("otel-responses: building a shared ledger batch failed", exc_info=True)
                self._count("dropped", len(batch))
            finally:
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()

    def _send(self, commands: list[tuple[str, bytes]]) -> None:
        """One pipelined round trip (on a cluster, one per node: the pipeline routes each key to its slot's
        master); every key expires."""
        pipe = self._client().pipeline(transaction=False)
        for key, value in commands:
            pipe.set(key, value, ex=self.ttl_seconds)
        pipe.execute()

    def _pause(self) -> None:
        """Wait out the backoff (close() ends it early)."""
        resume = time.monotonic() + self.backoff_seconds
        with self._cond:
            while not self._closed and (left := resume - time.monotonic()) > 0:
                self._cond.wait(left)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued job was sent (or failed); False if ``timeout`` ran out first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Flush, then stop the thread; later jobs are ignored."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout)

    def after_fork(self) -> None:
        """In a forked child: no thread came along, nor may a lock held by one; the parent's queue is its own."""
        self._cond = threading.Condition()
        self._jobs.clear()
        self._pending = 0
        self._thread = None
