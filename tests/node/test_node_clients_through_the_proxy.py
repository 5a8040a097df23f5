"""Clients of another language through ``otel-responses proxy``: openai-node and the Vercel AI SDK (its OpenAI
provider's Responses model), the newest releases on Node 22 and the floors on Node 20, and curl, each running the
demo's flows (every scenario of ``otel_responses/tools/scenarios.py`` and a stream) with its own API against the
emulator, once straight and once through the proxy.

Per flow: the proxy records, call for call, exactly the signals the in-process instrumentation records for the Python
SDK running the same flow (for openai-node and curl: the scenario itself; for the AI SDK, whose requests are its own:
the Python SDK sending the very requests it sent); what the client receives is the same bytes with and without the
proxy (encrypted payloads by length); a stream's first event reaches the client while the upstream still holds the
rest. Each run starts on a reset emulator, so ids repeat from one run to the next.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from otel_responses.emulator import Emulator
from otel_responses.testing import capture
from otel_responses.tools.scenarios import SCENARIOS

from ..proxy.support import KEY, proxied
from ..sdk.test_acceptance import SCENARIO_SPANS
from .support import (
    SETS,
    STREAM,
    Run,
    Worker,
    received,
    replay_requests,
    run_curl,
    run_scenario,
    scenario_of,
    signals_per_call,
    upstream_for,
)

FLOWS = (*(scenario.name for scenario in SCENARIOS), STREAM)
NODE_CLIENTS = ("openai", "ai-sdk")
CASES = [
    *(pytest.param(s, c, f, id=f"{s}-{c}-{f}") for s in SETS for c in NODE_CLIENTS for f in FLOWS),
    *(pytest.param("curl", "curl", f, id=f"curl-{f}") for f in FLOWS),
]

# The signals per model call of each AI SDK flow: what its habits make of the demo's flows (docs/proxy.md, "Vercel AI
# SDK"). Its system prompt is a `developer` input item, so a chain keeps it: sent on the first turn only, nothing is
# lost (no instructions_dropped). The tool loop runs inside one generateText, so breaking the tool pair shows on
# the replay after it. @ai-sdk/openai 3.0.0 (the floor) replays assistant text without its `phase` (phase_dropped,
# and the emulator's model then reads the progress update as the final answer: tool=unknown) and knows no
# contextManagement (no compaction) nor reasoningContext: its model keeps its default (current_turn), whose earlier
# turns' reasoning the API withholds anyway (no reasoning_dropped for a replay that leaves it out, no
# reasoning_withheld for a cut history). The Python SDK's twin, sending the same requests, raises the same.
NONE: list[tuple[str, ...]] = [(), (), (), ()]
PHASE = ("phase_dropped",)
TEXT_ONLY = [(), *[("reasoning_dropped", "phase_dropped")] * 3]
AI_SDK: dict[str, list[tuple[str, ...]]] = {
    "server_chain": NONE,
    "conversation": NONE,
    "client_replay": NONE,
    "client_replay_compacted": [(), ("compaction",), ("compaction",), ("compaction",)],
    "chain_unstored_parent": [(), ("unstored_parent",)],
    "chain_instructions_dropped": NONE,
    "chain_tool_output_missing": [(), (), ("missing_tool_output",)],
    # Its items come back as item references beside previousResponseId: a duplicate the API refuses.
    "chain_context_duplicated": [(), (), ("duplicate_item_id", "context_duplicated")],
    "conversation_and_previous_id": [(), ("state_mode_conflict",)],
    "replay_output_text_only": TEXT_ONLY,
    "replay_reasoning_altered": [(), ("encrypted_content_modified",)],
    "replay_phase_lost": [(), PHASE, PHASE, PHASE],
    "replay_tool_pair_broken": [(), (), (), ("replay_incomplete", "orphan_tool_output")],
    # Cutting the oldest turn edits what later reasoning followed: the API withholds it (as the Python scenario).
    "replay_history_cut": [(), (), (), ("history_truncated", "reasoning_withheld")],
    # Its tool loop replays the call and its result itself: the turns after it keep only the user's messages.
    "replay_user_messages_only": [(), ("replay_incomplete",), (), ("replay_incomplete",)],
    # It sends a stored item whose reasoning was left out inline, not by reference: nothing the API pairs.
    "replay_stored_reasoning_dropped": [(), *[("reasoning_dropped",)] * 3],
    # It sends no item id of a tool call but the one the OpenAI provider itself made, and beside a conversation only
    # the new items.
    "replay_foreign_call_ids": NONE,
    "conversation_items_resent": NONE,
    # Its tool turn is one generateText: the switch reaches the last question, whose replayed reasoning was all made
    # by the other model (named before sending, withheld by the API under all_turns).
    "replay_model_switched": [(), (), (), ("encrypted_content_foreign", "reasoning_withheld")],
    STREAM: NONE,
}
AI_SDK_FLOOR: dict[str, list[tuple[str, ...]]] = {
    "client_replay": [(), PHASE, PHASE, PHASE],
    "client_replay_compacted": [(), PHASE, PHASE, PHASE],
    "replay_reasoning_altered": [(), ("phase_dropped", "encrypted_content_modified")],
    "replay_tool_pair_broken": [(), PHASE, PHASE, ("replay_incomplete", "phase_dropped", "orphan_tool_output")],
    "replay_history_cut": [(), PHASE, PHASE, ("phase_dropped", "history_truncated")],
    "replay_output_text_only": [(), PHASE, PHASE, PHASE],
    "chain_context_duplicated": [(), (), ("duplicate_item_id",)],
    "replay_user_messages_only": [(), ("replay_incomplete",), PHASE, ("replay_incomplete",)],
    # The floor replays a stored message by reference, its reasoning left out: the API refuses the pair (an earlier
    # turn's reasoning: not one the model would have seen).
    "replay_stored_reasoning_dropped": [(), ("reasoning_pair_broken",)],
    "replay_foreign_call_ids": [(), PHASE, PHASE, ("phase_dropped", "malformed_item_id")],
    # The floor re-sends a conversation's items by reference beside it: a duplicate the API refuses.
    "conversation_items_resent": [(), (), ("duplicate_item_id",)],
    # The payloads were made by the other model (named); under current_turn the API withholds them for the turn.
    "replay_model_switched": [(), PHASE, PHASE, ("encrypted_content_foreign", "phase_dropped")],
    STREAM: [(), PHASE, PHASE, PHASE],
}


@dataclass
class Outcome:
    """A flow run straight and through the proxy, and its Python twin's signals."""

    direct: Run
    proxied: Run
    signals: list[tuple[str, ...]]
    twin: list[tuple[str, ...]]
    held: tuple[list[bool], list[bool]]


Runner = Callable[[str, str | None], Run]
Through = Callable[[str], contextlib.AbstractContextManager[Any]]


@pytest.fixture(scope="module")
def node_emulator() -> Iterator[Emulator]:
    """An emulator of this module's own: every run resets it."""
    with Emulator() as emulator:
        yield emulator


@pytest.fixture(scope="module")
def through() -> Through:
    """How a run goes through the proxy: a fresh proxy (its own telemetry and ledger) to the given upstream, for one
    run; its ``base_url`` is the client's, ``wait_for_spans`` what it recorded."""
    return lambda upstream: proxied(upstream)


@pytest.fixture(scope="module")
def outcomes(node_emulator: Emulator, through: Through) -> Iterator[Callable[[str, str, str], Outcome]]:
    workers: dict[str, Worker] = {}
    done: dict[tuple[str, str, str], Outcome] = {}

    def runner(client_set: str, client: str, flow: str) -> Runner:
        if client == "curl":
            return lambda base_url, release: run_curl(flow, base_url, release)
        if client_set not in workers:
            workers[client_set] = Worker(client_set)
            node = workers[client_set].versions["node"]
            assert node.startswith(SETS[client_set]), f"{client_set} runs on Node {SETS[client_set]}x, not {node}"
        worker = workers[client_set]
        return lambda base_url, release: worker.run(client, flow, base_url, release)

    def outcome(client_set: str, client: str, flow: str) -> Outcome:
        key = (client_set, client, flow)
        if key not in done:
            done[key] = _outcome(node_emulator, through, runner(client_set, client, flow), client, flow)
        return done[key]

    try:
        yield outcome
    finally:
        for worker in workers.values():
            worker.close()


def _outcome(emulator: Emulator, through: Through, run: Runner, client: str, flow: str) -> Outcome:
    with upstream_for(flow, emulator.base_url) as (upstream, pacer):
        release = pacer.release_url if pacer is not None else None
        emulator.reset()
        direct = run(upstream, release)
        held_direct = list(pacer.held) if pacer is not None else []
        emulator.reset()
        with through(upstream) as proxy:
            via = run(proxy.base_url, release)
            calls = sum(1 for e in via.exchanges if e["path"].split("?")[0].endswith("/responses"))
            signals = signals_per_call(proxy.wait_for_spans(calls + _others(via)))
        held_proxied = list(pacer.held[len(held_direct) :]) if pacer is not None else []
    emulator.reset()
    with capture(hash_key=KEY) as captured, emulator.client() as python:
        if client == "ai-sdk":
            replay_requests(python, direct.exchanges)
        else:
            run_scenario(python, flow)
        twin = signals_per_call(captured.spans())
    return Outcome(direct, via, signals, twin, (held_direct, held_proxied))


def _others(run: Run) -> int:
    """Spans of calls that are not chat calls (conversations.create)."""
    return sum(1 for e in run.exchanges if e["path"].split("?")[0].endswith("/conversations"))


@pytest.mark.parametrize(("client_set", "client", "flow"), CASES)
def test_the_proxy_records_the_python_sdk_s_signals(
    outcomes: Callable[[str, str, str], Outcome], client_set: str, client: str, flow: str
) -> None:
    outcome = outcomes(client_set, client, flow)
    assert outcome.signals == outcome.twin, _story(outcome)
    if client == "ai-sdk":
        expected = AI_SDK_FLOOR.get(flow, AI_SDK[flow]) if client_set == "floor" else AI_SDK[flow]
        assert outcome.signals == expected, _story(outcome)
    else:  # the demo's own scenario: exactly the in-process acceptance table's signals, call by call
        scenario = scenario_of(flow)
        spans = SCENARIO_SPANS[scenario.name]
        expected = spans[1:] if scenario.mode == "conversation" else spans  # its first span: create_conversation
        assert outcome.signals == expected, _story(outcome)


@pytest.mark.parametrize(("client_set", "client", "flow"), CASES)
def test_the_client_receives_what_it_would_without_the_proxy(
    outcomes: Callable[[str, str, str], Outcome], client_set: str, client: str, flow: str
) -> None:
    outcome = outcomes(client_set, client, flow)
    assert outcome.proxied.transcript == outcome.direct.transcript
    assert len(outcome.proxied.exchanges) == len(outcome.direct.exchanges)
    for number, (straight, via) in enumerate(zip(outcome.direct.exchanges, outcome.proxied.exchanges, strict=True)):
        assert received(via) == received(straight), f"exchange {number + 1}"


@pytest.mark.parametrize(
    ("client_set", "client"),
    [*((s, c) for s in SETS for c in NODE_CLIENTS), ("curl", "curl")],
    ids=lambda value: str(value),
)
def test_a_stream_s_first_event_is_not_held_back(
    outcomes: Callable[[str, str, str], Outcome], client_set: str, client: str
) -> None:
    outcome = outcomes(client_set, client, STREAM)
    held_direct, held_proxied = outcome.held
    streams = sum(1 for e in outcome.direct.exchanges if e["path"].endswith("/responses"))
    assert streams == len(SCENARIO_SPANS["client_replay"])  # every turn of the flow streamed, none left out
    assert held_direct == [True] * streams  # the client acknowledged each stream's first event straight
    assert held_proxied == [True] * streams, _arrivals(outcome)  # and through the proxy, the rest still held


def _arrivals(outcome: Outcome) -> str:
    times = [
        (straight.get("first_event_ms"), via.get("first_event_ms"))
        for straight, via in zip(outcome.direct.exchanges, outcome.proxied.exchanges, strict=False)
    ]
    return f"first event's arrival (ms, straight vs through the proxy): {times}"


def _story(outcome: Outcome) -> str:
    lines = [f"through the proxy: {outcome.signals}", f"the Python SDK:    {outcome.twin}"]
    lines += [f"  {e['method']} {e['path']} {e['status']}" for e in outcome.proxied.exchanges]
    lines.append(f"transcript: {outcome.proxied.transcript}")
    return "\n".join(lines)
