"""The one channel between the relay and the analysis: a stream socket (a socket pair, to a thread or to a worker
process) carrying length-prefixed ``marshal`` frames, each a tuple ``(kind, id, *fields)`` of plain values (bytes,
strings, numbers, lists).

One channel, read in order by one reader: what the relay sends is analysed in the order it was sent, so a
connection's calls are recorded in order, and a turn's end (sent right after its last bytes are relayed, before the
client's next request is read) is handled before its next turn is. The relay never waits for the analysis, except
for the verdicts strict mode asks (:meth:`Channel.ask`). Frames go out in groups, a few milliseconds apart. What the
analysis has not yet taken waits in the relay's own queue, handed to the socket a slice at a time as it drains: the
event loop's transport keeps its backlog in one buffer that it shifts after every send, which would cost the relay
time in proportion to the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import marshal
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

_HEADER: Final = struct.Struct("!I")
REPLY: Final = "reply"
_SLICE: Final = 256 * 1024  # the most handed to the transport at once
_TRANSPORT_HIGH: Final = 1024 * 1024  # the transport's own buffer stays under about this
# How long a frame may wait for others to go out with it: each write wakes the analysis, and on a busy machine a
# wake-up costs more than the write (the order of frames is the same however they are grouped).
LINGER: Final = 0.002

Message = tuple[Any, ...]


def frame(message: Message) -> list[bytes]:
    payload = marshal.dumps(message)
    return [_HEADER.pack(len(payload)), payload]


class Frames:
    """Frames from a byte stream, as they complete."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Message]:
        buffer = self._buffer
        buffer += data
        messages: list[Message] = []
        start, size = 0, len(buffer)
        while size - start >= 4:
            (length,) = _HEADER.unpack_from(buffer, start)
            end = start + 4 + length
            if end > size:
                break
            messages.append(marshal.loads(memoryview(buffer)[start + 4 : end]))
            start = end
        if start:
            del buffer[:start]
        return messages


class _Reader(asyncio.Protocol):
    """Either end's receiving side: complete frames handed on as they arrive; ``lost`` once the peer closed."""

    def __init__(self, received: Callable[[list[Message]], None] | None = None) -> None:
        self.writable: Callable[[bool], None] | None = None  # told when the transport's buffer fills and drains
        self._frames = Frames()
        self._early: list[Message] = []  # arrived before anyone listened
        self._received = received
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        messages = self._frames.feed(data)
        if not messages:
            return
        if self._received is None:
            self._early += messages
        else:
            self._received(messages)

    def listen(self, received: Callable[[list[Message]], None]) -> None:
        self._received = received
        early, self._early = self._early, []
        if early:
            received(early)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        if self.writable is not None:
            self.writable(False)

    def resume_writing(self) -> None:
        if self.writable is not None:
            self.writable(True)


class ChannelClosed(ConnectionError):
    """The analysis side is gone: no verdict will come."""


class Channel:
    """The relay's end. ``send`` queues a frame (flushed once per turn of the event loop); ``ask`` sends one and
    awaits the analysis's reply; ``behind`` says the analysis has not yet taken ``high_water`` bytes sent to it."""

    def __init__(self, protocol: _Reader, high_water: int) -> None:
        assert protocol.transport is not None
        self._transport = protocol.transport
        self._transport.set_write_buffer_limits(high=_TRANSPORT_HIGH)
        self._protocol = protocol
        self._high_water = high_water
        self._pending: deque[bytes | memoryview] = deque()
        self._backlog = 0  # bytes in ``_pending``
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False
        self._drained = asyncio.Event()
        self._drained.set()
        self._loop = asyncio.get_running_loop()
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.closed = False
        protocol.lost.add_done_callback(self._lost)
        protocol.listen(self._replies)
        protocol.writable = self._writable

    @classmethod
    async def open(cls, sock: Any, high_water: int) -> Channel:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_unix_connection(_Reader, sock=sock)
        return cls(protocol, high_water)

    @property
    def lost(self) -> asyncio.Future[None]:
        """Done once the analysis side closed its end."""
        return self._protocol.lost

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, message: Message, now: bool = False) -> None:
        """Queue a frame; it goes out with the others queued within ``LINGER`` seconds (``now``: at the end of this
        turn of the event loop, for a frame the relay awaits an answer to)."""
        if self.closed:
            return
        header, payload = frame(message)
        self._pending += (header, payload)
        self._backlog += len(header) + len(payload)
        self._drained.clear()
        if self._paused:
            return
        if now:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self._flush)
        elif not self._scheduled and self._timer is None:
            self._timer = self._loop.call_later(LINGER, self._linger_over)

    def _linger_over(self) -> None:
        self._timer = None
        if not self._scheduled:
            self._flush()

    def _flush(self) -> None:
        """Hand queued frames to the transport, a slice at a time, until its buffer is full (it says so through
        ``pause_writing``) or nothing is left."""
        self._scheduled = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, transport = self._pending, self._transport
        while pending and not self._paused and not self.closed:
            part = pending.popleft()
            if len(part) > _SLICE:
                pending.appendleft(memoryview(part)[_SLICE:])
                part = memoryview(part)[:_SLICE]
            self._backlog -= len(part)
            transport.write(part)
        if not pending:
            self._drained.set()

    def _writable(self, writable: bool) -> None:
        self._paused = not writable
        if writable and self._pending and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    async def ask(self, message: Message) -> Any:
        """Send ``message`` (its second field is its id) and await the reply; ``ChannelClosed`` when the analysis is
        gone."""
        waiter = self.expect(message[1])
        self.send(message, now=True)
        return await waiter

    def expect(self, reply_id: int) -> asyncio.Future[Any]:
        """The reply to ``reply_id``, when it comes (id 0: the analysis's greeting once it is ready)."""
        waiter = self._loop.create_future()
        if self.closed:
            waiter.set_exception(ChannelClosed())
        else:
            self._waiting[reply_id] = waiter
        return waiter

    def behind(self) -> bool:
        return self._backlog > self._high_water

    def _replies(self, messages: list[Message]) -> None:
        for message in messages:
            waiter = self._waiting.pop(message[1], None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message[2])

    def _lost(self, _: object) -> None:
        self.closed = True
        self._pending.clear()
        self._drained.set()
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            if not waiter.done():
                waiter.set_exception(ChannelClosed())

    async def close(self) -> None:
        """Send what is queued, then close; returns once the analysis side has read everything and closed its end."""
        self._flush()
        await self._drained.wait()
        self.closed = True
        with contextlib.suppress(Exception):
            self._transport.write_eof()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._protocol.lost), 60)
        self._transport.close()


async def serve(
    sock: Any,
    handle: Callable[[Message], Any],
    handle_async: Callable[[Message], Awaitable[Any]],
    greeting: Any = None,
) -> None:
    """The analysis's end: ``greeting`` sent first (the reply to id 0), then every frame, in order, to ``handle``
    (``handle_async`` for a kind it returns ``NotImplemented`` for: a frame that awaits a shared ledger's reads), each
    reply (a frame whose handler returned ``Reply``) written back; returns once the relay closed its end and every
    frame was handled."""
    loop = asyncio.get_running_loop()
    inbox: deque[Message] = deque()
    arrived = asyncio.Event()

    def received(messages: list[Message]) -> None:
        inbox.extend(messages)
        arrived.set()

    transport, protocol = await loop.create_unix_connection(lambda: _Reader(received), sock=sock)
    if greeting is not None:
        transport.writelines(frame((REPLY, 0, greeting)))
    ended = protocol.lost
    while True:
        while inbox:
            message = inbox.popleft()
            result = handle(message)
            if result is NotImplemented:
                result = await handle_async(message)
            if isinstance(result, Reply):
                transport.writelines(frame((REPLY, message[1], result.value)))
        if ended.done() and not inbox:
            break
        arrived.clear()
        waiting: asyncio.Future[Any] = asyncio.ensure_future(arrived.wait())
        await asyncio.wait([waiting, ended], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
    transport.close()


class Reply:
    """What a handler returns for a frame that is answered (a verdict): ``value`` goes back to the relay."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value
