"""Async reads of the shared ledger, against a real `redis-server` on 127.0.0.1.

An async call awaits with `redis.asyncio` the shared-ledger reads its own analysis asks for, then analyses what they
found: the event loop keeps running while Redis is slow, the signals are those of the synchronous path, and Redis
slow, hung or down never reaches the app. One client per event loop, a fresh one after a fork.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import openai
import pytest
import redis

from otel_responses._analysis.analysis import analyse
from otel_responses._analysis.facts import request_facts
from otel_responses.attributes import LEDGER_UNAVAILABLE
from otel_responses.config import settings_from
from otel_responses.emulator import Emulator
from otel_responses.ledger import Entry, LedgerView
from otel_responses.ledger import _async as ledger_async
from otel_responses.ledger.redis import RedisLedger
from otel_responses.testing import CapturedTelemetry, capture

from ..ledger_scenarios import (
    ENCRYPTED,
    INSTRUCTIONS,
    MODEL,
    REASONING_MODEL,
    REPLAYS,
    TOOLS,
    replay_input,
    tool_request,
)
from ..shared_ledger import KEY, RedisServer, Store, achained, new_ledger
from ..support import attrs, chat_signals, free_port

# What the slow proxy adds to every command sent to Redis, and the loop's worst lag allowed while an async call waits
# on it: a quarter of the delay, so a blocked loop (the whole delay) fails and a loaded machine's scheduling does not.
DELAY = 0.200
LAG_LIMIT = DELAY / 4


# -- helpers -------------------------------------------------------------------------------------------------


def aclient(emulator: Emulator) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=emulator.base_url, api_key="emulator-key", max_retries=0)


def forbid_sync_reads(ledger: RedisLedger) -> None:
    """A synchronous read of this ledger would now fail, counted ``read_failures`` and marking its call: an async
    call must never make one."""

    def refuse() -> Any:
        raise AssertionError("a synchronous Redis read on the event loop")

    ledger._reader = refuse


async def achain_turns(
    client: openai.AsyncOpenAI, out: dict[str, Any], cap: CapturedTelemetry
) -> dict[str, tuple[str, ...]]:
    """``shared_ledger.chain_turns``, awaited."""
    cap.clear()
    with pytest.raises(openai.BadRequestError):
        await client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=out["unstored"])
    second = await client.responses.create(
        model=MODEL, input="What are the constraints?", previous_response_id=out["instructions"]
    )
    assert "constraints=none" in second.output_text
    unstored, instructions = chat_signals(cap)
    return {"unstored": unstored, "instructions": instructions}


async def areplay_turns(
    client: openai.AsyncOpenAI, out: dict[str, Any], cap: CapturedTelemetry
) -> dict[str, tuple[str, ...]]:
    raised: dict[str, tuple[str, ...]] = {}
    for variant in REPLAYS:
        cap.clear()
        with contextlib.suppress(openai.APIStatusError):
            await client.responses.create(
                model=REASONING_MODEL,
                input=replay_input(variant, out[variant]),
                store=False,
                include=ENCRYPTED,
                tools=TOOLS,
            )
        (raised[variant],) = chat_signals(cap)
    return raised


async def with_lag(action: Awaitable[Any]) -> tuple[Any, float, float]:
    """``action``'s result, how long it took, and the worst lag of a 1 ms ticker running beside it."""
    done = asyncio.Event()
    worst = 0.0

    async def tick() -> None:
        nonlocal worst
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - before - 0.001)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.005)  # the ticker is running
    started = time.perf_counter()
    try:
        result = await action
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        await ticker
    return result, elapsed, worst


class Proxy:
    """A TCP proxy on loopback in front of Redis, in threads: each chunk sent to Redis is held ``delay`` seconds
    first; ``hang`` forwards nothing at all (a Redis that accepts connections and never answers)."""

    def __init__(self, upstream_port: int, delay: float = 0.0, hang: bool = False) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self.hang = hang
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self.closed:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(downstream)
            if self.hang:
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets.append(upstream)
            threading.Thread(target=self._pump, args=(downstream, upstream, self.delay), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, downstream, 0.0), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket, delay: float) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if delay:
                    time.sleep(delay)
                target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


@pytest.fixture
def proxies() -> Iterator[list[Proxy]]:
    made: list[Proxy] = []
    yield made
    for proxy in made:
        proxy.close()


def parents(client: openai.OpenAI, ledger: RedisLedger, count: int = 1) -> list[str]:
    """Responses with instructions, made (synchronously) by another process's worth of ledger, in Redis."""
    with capture(ledger=ledger, hash_key=KEY):
        made = [
            client.responses.create(model=MODEL, input="Hello.", instructions=INSTRUCTIONS).id for _ in range(count)
        ]
    assert ledger.flush(5)
    return made


def run(factory: Callable[[], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        return await factory()

    return asyncio.run(main())


# -- (a) the same signals as the synchronous path ------------------------------------------------------------


def test_async_session_across_processes_raises_what_the_sync_path_raises(
    process_a: dict[str, Any], emulator: Emulator, ledgers: list[RedisLedger]
) -> None:
    """Process A (a subprocess) made the first turns; a fresh ledger here continues them from async calls, and
    never reads Redis synchronously."""
    ledger = new_ledger(ledgers, process_a["url"], **process_a["options"])
    forbid_sync_reads(ledger)

    async def session(cap: CapturedTelemetry) -> dict[str, tuple[str, ...]]:
        client = aclient(emulator)
        try:
            return {**await achain_turns(client, process_a, cap), **await areplay_turns(client, process_a, cap)}
        finally:
            await client.close()

    with capture(ledger=ledger, hash_key=KEY) as cap:
        raised = run(lambda: session(cap))
    assert raised == {"unstored": ("unstored_parent",), "instructions": ("instructions_dropped",), **REPLAYS}
    assert not [span for span in cap.spans() if LEDGER_UNAVAILABLE in attrs(span)]
    stats = ledger.stats()
    assert stats["read_failures"] == 0  # not one synchronous read
    assert stats["reads"] >= 2 + 2 * len(REPLAYS)  # chain: one round trip each; replay: locations, then entries


def test_async_conversation_sees_another_process_turn_as_the_latest(
    store: Store, client: openai.OpenAI, emulator: Emulator, ledgers: list[RedisLedger]
) -> None:
    """``test_conversation_turns_across_processes_raise_no_false_signal`` with B's turn and A's next turns async:
    A must read B's turn (its own older entry, with the call pending, would raise a false missing_tool_output)."""
    a, b = new_ledger(ledgers, store.url, **store.options), new_ledger(ledgers, store.url, **store.options)
    conversation = client.conversations.create()
    with capture(ledger=a, hash_key=KEY):
        first = client.responses.create(
            model=MODEL, input=[tool_request()], tools=TOOLS, conversation=conversation.id, instructions=INSTRUCTIONS
        )
    assert a.flush(5)
    call = next(item for item in first.output if item.type == "function_call")
    forbid_sync_reads(a)
    forbid_sync_reads(b)

    async def answer() -> None:
        async with aclient(emulator) as async_client:
            await async_client.responses.create(
                model=MODEL,
                input=[{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}],
                tools=TOOLS,
                conversation=conversation.id,
                instructions=INSTRUCTIONS,
            )

    async def next_turns() -> None:
        async with aclient(emulator) as async_client:
            await async_client.responses.create(
                model=MODEL, input="And now?", conversation=conversation.id, instructions=INSTRUCTIONS
            )
            await async_client.responses.create(model=MODEL, input="Constraints?", conversation=conversation.id)

    with capture(ledger=b, hash_key=KEY) as cap_b:
        run(answer)
    assert b.flush(5)
    with capture(ledger=a, hash_key=KEY) as cap_a:
        run(next_turns)
    assert chat_signals(cap_b) == [()]
    assert chat_signals(cap_a) == [(), ("instructions_dropped",)]
    assert a.stats()["read_failures"] == b.stats()["read_failures"] == 0
    assert a.stats()["reads"] >= 2
    assert b.stats()["reads"] >= 1


def test_an_async_call_reads_what_the_sync_path_reads_ancestors_included(
    store: Store, ledgers: list[RedisLedger]
) -> None:
    """A turn chained to C, whose chain is C <- B <- A, re-sends the two user messages A was given: the state the
    chain holds has them (``context_duplicated``), which only a walk up the ancestors finds. The async path runs the
    same analysis, so it reads the same entries (each round awaited: C with its continued-marker, then B, then A) and
    finds the same; the synchronous one asks Redis once per read. Near miss: messages no ancestor was given."""
    settings = settings_from({"hash_key": KEY})

    def request(*texts: str) -> Any:
        messages = [{"role": "user", "content": text} for text in texts]
        return request_facts("chat", {"model": MODEL, "previous_response_id": "resp_c", "input": messages}, settings)

    resent, fresh = request("First question.", "Second question.", "Next?"), request("Other.", "Another.", "Next?")
    given = tuple(item.fingerprint for item in resent.input_items[:2])
    writer = new_ledger(ledgers, store.url, **store.options)
    writer.bind(settings.fingerprinter)
    writer.record(Entry("resp_a", 1, input_app_messages=2, input_messages=given), None)
    writer.record(Entry("resp_b", 2, parent_id="resp_a", input_app_messages=1), "resp_a")
    writer.record(Entry("resp_c", 3, parent_id="resp_b", input_app_messages=1), "resp_b")
    assert writer.flush(5)

    def counted(req: Any, awaited: bool) -> tuple[dict[str, int], int]:
        ledger = new_ledger(ledgers, store.url, **{**store.options, "timeout_seconds": 2.0})  # a loaded machine's
        ledger.bind(settings.fingerprinter)
        view = ledger.for_call()
        if awaited:
            forbid_sync_reads(ledger)

            def reads(read_from: LedgerView) -> None:
                analyse(req, read_from)

            run(lambda: view.prefetch(reads))
        duplicated = analyse(req, view).duplicated
        assert (view.unavailable, ledger.stats()["read_failures"]) == (False, 0)
        return duplicated, ledger.stats()["reads"]

    assert counted(resent, awaited=False) == ({"message": 2}, 3)
    assert counted(resent, awaited=True) == ({"message": 2}, 3)
    assert counted(fresh, awaited=False)[0] == counted(fresh, awaited=True)[0] == {}


# -- (b) the event loop keeps running while Redis is slow ----------------------------------------------------


def test_event_loop_keeps_ticking_while_redis_answers_slowly(
    redis_server: RedisServer,
    redis_url: str,
    client: openai.OpenAI,
    emulator: Emulator,
    ledgers: list[RedisLedger],
    proxies: list[Proxy],
    capsys: pytest.CaptureFixture[str],
) -> None:
    parent, again = parents(client, new_ledger(ledgers, redis_url), 2)
    slow = Proxy(redis_server.port, delay=DELAY)
    proxies.append(slow)

    def measured(ledger: RedisLedger, parent: str) -> tuple[tuple[str, ...], bool, float, float]:
        async def main() -> tuple[tuple[str, ...], bool, float, float]:
            async with aclient(emulator) as async_client:
                await async_client.responses.create(model=MODEL, input="Warm up.")  # the SDK's first-call costs
                (signals, unavailable), elapsed, lag = await with_lag(achained(async_client, cap, parent))
            return signals, unavailable, elapsed, lag

        with capture(ledger=ledger, hash_key=KEY) as cap:
            return asyncio.run(main())

    awaited = new_ledger(ledgers, slow.url(), timeout_seconds=3.0)
    forbid_sync_reads(awaited)
    signals, unavailable, elapsed, lag = measured(awaited, parent)
    assert (signals, unavailable) == (("instructions_dropped",), False)
    assert elapsed >= DELAY  # the read went through the slow proxy...
    assert lag < LAG_LIMIT  # ...and the loop ran on meanwhile

    # The synchronous path on the same proxy (a ledger around the app's own client has no async reads) blocks the
    # loop for the whole read: the measure can fail.
    sync_client = redis.Redis(host="127.0.0.1", port=slow.port, socket_timeout=3.0)
    blocking = RedisLedger(client=sync_client)
    ledgers.append(blocking)
    assert blocking.reads_asynchronously is False
    sync_signals, _, sync_elapsed, sync_lag = measured(blocking, again)
    assert sync_signals == ("instructions_dropped",)
    assert sync_lag >= DELAY * 0.8
    with capsys.disabled():
        print(
            f"\n[loop lag] async path: worst {lag * 1000:.1f} ms over {elapsed * 1000:.0f} ms; "
            f"sync path: worst {sync_lag * 1000:.1f} ms over {sync_elapsed * 1000:.0f} ms"
        )


# -- (c) Redis hung or down ----------------------------------------------------------------------------------


def test_redis_hung_or_down_never_reaches_an_async_app(
    redis_server: RedisServer,
    redis_url: str,
    client: openai.OpenAI,
    emulator: Emulator,
    ledgers: list[RedisLedger],
    proxies: list[Proxy],
) -> None:
    timeout, backoff = 0.2, 1.0
    made = parents(client, new_ledger(ledgers, redis_url), 2)
    hung = Proxy(redis_server.port, hang=True)
    proxies.append(hung)
    ledger = new_ledger(ledgers, hung.url(), timeout_seconds=timeout, backoff_seconds=backoff)
    forbid_sync_reads(ledger)

    async def main(cap: CapturedTelemetry) -> list[tuple[tuple[str, ...], bool, float, float]]:
        out = []
        async with aclient(emulator) as async_client:
            _, baseline, _ = await with_lag(async_client.responses.create(model=MODEL, input="Warm up."))
            for parent in made:  # hung: waits out the timeout once; then the backoff: Redis not asked
                (signals, unavailable), elapsed, lag = await with_lag(achained(async_client, cap, parent))
                out.append((signals, unavailable, elapsed - baseline, lag))
        return out

    with capture(ledger=ledger, hash_key=KEY) as cap:
        first, second = asyncio.run(main(cap))
    assert first[:2] == ((), True)  # answered from local knowledge, marked
    assert second[:2] == ((), True)
    assert first[2] < timeout + 0.15
    assert second[2] < 0.1
    # A loop blocked by the hung read would lag the whole timeout; a quarter of it is a loaded machine's scheduling.
    assert first[3] < timeout / 4
    assert second[3] < timeout / 4
    stats = ledger.stats()
    assert stats["read_failures"] == 1
    assert stats["reads_skipped"] >= 1

    # Down: nothing listens. Refused at once, marked, nothing raised.
    down = new_ledger(ledgers, f"redis://127.0.0.1:{free_port()}/0", timeout_seconds=timeout)
    forbid_sync_reads(down)

    async def down_main(cap: CapturedTelemetry) -> tuple[tuple[str, ...], bool, float]:
        async with aclient(emulator) as async_client:
            started = time.perf_counter()
            result = await achained(async_client, cap, made[0])
            return (*result, time.perf_counter() - started)

    with capture(ledger=down, hash_key=KEY) as cap:
        signals, unavailable, elapsed = asyncio.run(down_main(cap))
    assert (signals, unavailable) == ((), True)
    assert elapsed < 1.0
    assert down.stats()["read_failures"] == 1


def test_a_prefetch_that_raises_is_counted_and_the_call_goes_on(
    redis_url: str,
    client: openai.OpenAI,
    emulator: Emulator,
    ledgers: list[RedisLedger],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = new_ledger(ledgers, redis_url)
    (parent,) = parents(client, ledger)  # known here too: the analysis goes on with local knowledge

    async def broken(self: Any, ledger: Any, view: Any, keys: Any) -> None:
        raise RuntimeError("a bug in the prefetch")

    monkeypatch.setattr(ledger_async.AsyncReader, "read", broken)

    async def main(cap: CapturedTelemetry) -> tuple[tuple[str, ...], bool]:
        async with aclient(emulator) as async_client:
            return await achained(async_client, cap, parent)

    with capture(ledger=ledger, hash_key=KEY) as cap:
        signals, unavailable = asyncio.run(main(cap))
        (point,) = [p for p in cap.metric_points("openai_responses.instrumentation.errors") if p.value]
    assert (signals, unavailable) == (("instructions_dropped",), False)
    assert dict(point.attributes)["openai_responses.instrumentation.step"] == "ledger_prefetch"


# -- (d) one client per event loop, a fresh one after a fork -------------------------------------------------


def test_a_client_per_event_loop_and_a_fresh_one_after_fork(
    redis_url: str, client: openai.OpenAI, emulator: Emulator, ledgers: list[RedisLedger]
) -> None:
    made = parents(client, new_ledger(ledgers, redis_url), 5)
    # A timeout a loaded machine does not reach: a timed-out read marks the call unavailable, which is not tested here.
    ledger = new_ledger(ledgers, redis_url, timeout_seconds=1.0)
    forbid_sync_reads(ledger)
    reader = ledger.async_reader()
    assert reader is not None

    async def turn(cap: CapturedTelemetry, parent: str) -> tuple[tuple[str, ...], bool, int]:
        async with aclient(emulator) as async_client:
            result = await achained(async_client, cap, parent)
        return (*result, reader.clients())

    with capture(ledger=ledger, hash_key=KEY) as cap:
        # Two loops in sequence: each gets its client, closed when asyncio.run shuts the loop down.
        assert asyncio.run(turn(cap, made[0])) == (("instructions_dropped",), False, 1)
        assert reader.clients() == 0
        assert asyncio.run(turn(cap, made[1])) == (("instructions_dropped",), False, 1)
        assert reader.clients() == 0

        # A loop kept open, with a connected client, across a fork: the child leaves it alone and makes its own.
        loop = asyncio.new_event_loop()
        try:
            assert loop.run_until_complete(turn(cap, made[2])) == (("instructions_dropped",), False, 1)
            parent_client = next(iter(reader._clients.values())).client
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report, then leave without running the parent's exit handlers
                code = 1
                try:
                    inherited = reader.clients()
                    signals, unavailable, clients = asyncio.run(turn(cap, made[3]))
                    report = {"inherited": inherited, "signals": list(signals), "unavailable": unavailable}
                    os.write(write_end, json.dumps({**report, "clients": clients}).encode())
                    code = 0
                finally:
                    os._exit(code)
            os.close(write_end)
            _, status = os.waitpid(pid, 0)
            with os.fdopen(read_end, "rb") as pipe:
                report = json.loads(pipe.read() or b"{}")
            assert os.waitstatus_to_exitcode(status) == 0
            assert report == {"inherited": 0, "signals": ["instructions_dropped"], "unavailable": False, "clients": 1}
            # The parent's client, on its loop, still works: the child neither used nor closed its connection.
            reads = ledger.stats()["reads"]
            assert loop.run_until_complete(turn(cap, made[4])) == (("instructions_dropped",), False, 1)
            assert next(iter(reader._clients.values())).client is parent_client
            assert ledger.stats()["reads"] == reads + 1
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        assert reader.clients() == 0
    assert ledger.stats()["read_failures"] == 0
