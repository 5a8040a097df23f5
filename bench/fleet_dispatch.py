"""The dispatcher's side of the fleet: the worker processes, and the scripted sessions sent to them.

Each call of a scenario becomes a turn on a random worker, after a model-like gap, so every phase runs the same
script (scenarios, markers, gaps and worker draws) whatever the ledger.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from fleet_infra import log
from fleet_worker import worker_main

from otel_responses.tools import scenarios


class RemoteError(Exception):
    """A worker's call failed; carries the API error code as the SDK's errors do."""

    def __init__(self, name: str, code: str | None) -> None:
        super().__init__(name)
        self.name = name
        self.code = code


class Fleet:
    """Worker processes, their queues, and a thread that routes their reports back to waiting calls."""

    def __init__(self, workers: int, threads: int, base_url: str, ledger: dict[str, Any] | None, hash_key: str) -> None:
        context = mp.get_context("spawn")
        self.results: Any = context.Queue()
        self.queues: list[Any] = [context.Queue() for _ in range(workers)]
        self.threads = threads
        self.processes = [
            context.Process(
                target=worker_main,
                args=(i, base_url, ledger, hash_key, self.queues[i], self.results, threads),
                daemon=True,
            )
            for i in range(workers)
        ]
        self.waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self.stats: dict[int, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.next_request = 0
        self.done = 0
        self.finished = threading.Event()
        for process in self.processes:
            process.start()
        self.router = threading.Thread(target=self.route, daemon=True)
        self.router.start()

    def route(self) -> None:
        while self.done < len(self.processes):
            message = self.results.get()
            if message[0] == "turn":
                turn = message[1]
                with self.lock:
                    event, box = self.waiting.pop(turn["request"])
                box.append(turn)
                event.set()
            elif message[0] == "done":
                self.stats[message[1]] = message[2]
                self.done += 1
        self.finished.set()

    def call(self, worker: int, kind: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        event, box = threading.Event(), list[dict[str, Any]]()
        with self.lock:
            request = self.next_request
            self.next_request += 1
            self.waiting[request] = (event, box)
        self.queues[worker].put((request, kind, kwargs))
        if not event.wait(120):
            raise RuntimeError(f"worker {worker} did not answer request {request}")
        return box[0]

    def warm_up(self) -> None:
        """One conversation.create per worker thread: imports, connections and the instrumentation warm."""
        threads = [
            threading.Thread(target=self.call, args=(w, "conversation", {}))
            for w in range(len(self.queues))
            for _ in range(self.threads)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def close(self) -> None:
        for q in self.queues:
            for _ in range(self.threads):
                q.put(None)
        self.finished.wait(60)
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()


def jsonable(value: Any) -> Any:
    """Request keywords as JSON: SDK objects as the SDK itself would send them."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


class _Responses:
    def __init__(self, owner: ConversationClient) -> None:
        self.owner = owner

    def create(self, **kwargs: Any) -> Any:
        return self.owner.turn("create", jsonable(kwargs))


class _Conversations:
    def __init__(self, owner: ConversationClient) -> None:
        self.owner = owner

    def create(self) -> Any:
        return self.owner.turn("conversation", {})


class ConversationClient:
    """Stands in for ``openai.OpenAI`` in ``scenarios.run``: every call becomes a turn on a random worker, after
    a model-like gap (none before the first call)."""

    def __init__(self, fleet: Fleet, draws: random.Random, gap_ms: tuple[float, float], workers: int) -> None:
        self.fleet, self.draws, self.gap_ms, self.workers = fleet, draws, gap_ms, workers
        self.responses = _Responses(self)
        self.conversations = _Conversations(self)
        self.turns: list[dict[str, Any]] = []

    def turn(self, kind: str, kwargs: dict[str, Any]) -> Any:
        from openai.types.conversations import Conversation
        from openai.types.responses import Response

        gap = self.draws.uniform(*self.gap_ms) / 1000
        worker = self.draws.randrange(1_000_003) % self.workers  # the same draws whatever the worker count
        if self.turns:
            time.sleep(gap)
        turn = self.fleet.call(worker, kind, kwargs)
        turn["previous_response_id"] = kwargs.get("previous_response_id")
        self.turns.append(turn)
        if turn["error"] is not None:
            raise RemoteError(turn["error"], turn["error_code"])
        if kind == "conversation":
            return Conversation.construct(id=turn["response"]["id"], object="conversation", created_at=0, metadata={})
        return Response.model_validate(turn["response"])


@dataclass
class Conversation:
    index: int
    scenario: str
    transcript_error: str | None
    remembered: dict[str, bool]
    turns: list[dict[str, Any]]


def run_phase(
    name: str,
    fleet: Fleet,
    workers: int,
    conversations: int,
    seed: int,
    gap_ms: tuple[float, float],
    ramp: float,
    midway: Any = None,
) -> tuple[list[Conversation], float]:
    """Runs the script: ``conversations`` sessions, each on its own thread, started over ``ramp`` seconds."""
    done: list[Conversation] = []
    lock = threading.Lock()
    started = threading.Barrier(conversations + 1)
    t0 = time.monotonic()

    def one(i: int) -> None:
        draws = random.Random(seed * 1_000_003 + i)
        delay = draws.uniform(0, ramp)
        scenario = scenarios.SCENARIOS[i % len(scenarios.SCENARIOS)]
        client = ConversationClient(fleet, draws, gap_ms, workers)
        started.wait()
        time.sleep(delay)
        transcript = scenarios.run(client, scenario, f"M-{i}")  # type: ignore[arg-type]
        with lock:
            done.append(Conversation(i, scenario.name, transcript.error, transcript.remembered, client.turns))

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(conversations)]
    for thread in threads:
        thread.start()
    started.wait()
    t0 = time.monotonic()
    if midway is not None:
        midway(t0)
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - t0
    log(f"  {name}: {conversations} conversations, {sum(len(c.turns) for c in done)} calls in {elapsed:.1f} s")
    return sorted(done, key=lambda c: c.index), t0
