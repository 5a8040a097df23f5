"""The Codex CLI through ``otel-responses proxy``, as docs/codex.md sets it up: ``codex exec`` and ``codex exec
resume --last`` sessions against the emulator, over HTTP (server-sent events) and over WebSocket mode, once straight
and once through the proxy.

Per session and transport: each model call Codex makes raises exactly the signals of its row below (a healthy
session: none of severity error or warning); the proxy forwards none of them unrecorded; the emulator receives the
same requests with and without the proxy (Codex's own per-run ids and times masked); Codex answers each turn the
same with and without it, and as the emulator's model answers that turn; nothing goes off the machine. Each run
starts on a reset emulator, so the emulator's ids repeat from one run to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from otel_responses.emulator import Emulator
from otel_responses.signals import CATALOGUE, INFO

from ..proxy.support import Proxied, proxied
from .support import SessionRun, Trap, call_kind, masked_output, masked_requests, model_calls, run_session

pytest.importorskip("websockets")  # the emulator's WebSocket mode


@dataclass(frozen=True)
class Session:
    """A session a user runs: its turns, each a ``codex exec`` of its own; ``compact``: a low auto-compact limit."""

    turns: tuple[str, ...]
    compact: bool = False


SESSIONS = {
    # A fact, then a shell command through Codex's own tool, then a question the answer needs both for.
    "tools": Session(
        (
            "The marker is M-7.",
            "Run `echo tool-out-7` with exec_command.",
            "What is the marker, and what did the tool return?",
        )
    ),
    # The resumed turn starts with Codex's local compaction (the history saved passes the limit): its summary, in a
    # user message, replaces the turns before.
    "compaction": Session(("The marker is M-8.", "What is the marker?"), compact=True),
}
TRANSPORTS = {"http": False, "websocket": True}

# What Codex answers each turn: the emulator's model reading what Codex sent it (the tool's output as Codex reports
# it, its chunk id and wall time masked).
TOOL_OUTPUT = (
    "Chunk ID: <chunk>\nWall time: <seconds>\nProcess exited with code 0\nOriginal token count: 3\n"
    "Output:\ntool-out-7\n"
)
ANSWERS = {
    "tools": [
        "Noted marker M-7.\n",
        f"Tool exec_command returned {TOOL_OUTPUT}.\n",
        f"marker=M-7; tool={TOOL_OUTPUT}\n",
    ],
    "compaction": ["Noted marker M-8.\n", "marker=M-8\n"],
}

# Each model call Codex makes, in order, and the exact signals the proxy records for it. Over HTTP every call
# replays the whole history; over WebSocket mode each `codex exec` opens a connection, warms it up
# (`generate: false`, its base instructions only), then continues that warm-up with `previous_response_id` and the
# rest, and after a tool call sends only the tool's output. A compaction call replays the history and asks for a
# summary; the next call carries the summary in a user message in place of the turns before it (no compaction item:
# nothing to signal).
Calls = list[tuple[str, tuple[str, ...]]]
NONE: tuple[str, ...] = ()
EXPECTED: dict[tuple[str, str], Calls] = {
    ("tools", "http"): [("turn", NONE), ("turn", NONE), ("tool output", NONE), ("turn", NONE)],
    ("tools", "websocket"): [
        ("warm-up", NONE),
        ("turn", NONE),
        ("warm-up", NONE),
        ("turn", NONE),
        ("tool output", NONE),
        ("warm-up", NONE),
        ("turn", NONE),
    ],
    ("compaction", "http"): [("turn", NONE), ("compaction", NONE), ("turn", NONE)],
    ("compaction", "websocket"): [
        ("warm-up", NONE),
        ("turn", NONE),
        ("warm-up", NONE),
        ("compaction", NONE),
        ("turn", NONE),
    ],
}
CASES = [
    pytest.param(session, transport, id=f"{session}-{transport}") for session in SESSIONS for transport in TRANSPORTS
]


@dataclass
class Outcome:
    """A session run straight and through the proxy."""

    direct: SessionRun
    proxied: SessionRun
    bodies: list[dict[str, Any]]  # each model call's body as Codex sent it, straight
    direct_requests: list[tuple[str, str, str]]
    proxied_requests: list[tuple[str, str, str]]
    calls: Calls  # each model call through the proxy: its kind and the signals recorded for it
    unrecorded: dict[str, int] | None  # the proxy's count of calls forwarded unrecorded, by reason, when it has one
    off_the_machine: list[str]  # what Codex tried to reach beyond loopback, either run


@pytest.fixture(scope="module")
def codex_emulator() -> Iterator[Emulator]:
    """An emulator of this module's own: every run resets it."""
    with Emulator() as emulator:
        yield emulator


@pytest.fixture(scope="module")
def outcomes(codex_emulator: Emulator) -> Callable[[str, str], Outcome]:
    done: dict[tuple[str, str], Outcome] = {}

    def outcome(session: str, transport: str) -> Outcome:
        if (session, transport) not in done:
            done[session, transport] = _outcome(codex_emulator, SESSIONS[session], TRANSPORTS[transport])
        return done[session, transport]

    return outcome


def _outcome(emulator: Emulator, session: Session, websockets: bool) -> Outcome:
    with Trap() as trap:
        emulator.reset()
        direct = run_session(emulator.base_url, session.turns, trap, websockets=websockets, compact=session.compact)
        bodies = model_calls(emulator.requests.snapshot())
        direct_requests = masked_requests(emulator.requests.snapshot(), direct.paths)
        emulator.reset()
        with proxied(emulator.base_url) as proxy:
            via = run_session(proxy.base_url, session.turns, trap, websockets=websockets, compact=session.compact)
            received = emulator.requests.snapshot()
            kinds = [call_kind(body) for body in model_calls(received)]
            signals = _signals(proxy, len(kinds))
            assert len(signals) == len(kinds), f"{len(kinds)} model calls, {len(signals)} spans"
            calls = list(zip(kinds, signals, strict=True))
            unrecorded = _unrecorded(proxy)
        proxied_requests = masked_requests(received, via.paths)
    return Outcome(
        direct,
        via,
        bodies,
        direct_requests,
        proxied_requests,
        calls,
        unrecorded,
        trap.calls,
    )


def _signals(proxy: Proxied, calls: int) -> list[tuple[str, ...]]:
    """The signals of each chat span the proxy recorded, in the order of the calls (once its analysis has caught up,
    on a proxy that says so)."""
    settle: Any = getattr(proxy.proxy, "settle", None)
    if settle is not None:
        settle()
    spans = [
        span for span in proxy.wait_for_spans(calls) if (span.attributes or {}).get("gen_ai.operation.name") == "chat"
    ]
    spans.sort(key=lambda span: span.start_time or 0)
    return [tuple((span.attributes or {}).get("openai_responses.signals", ())) for span in spans]


def _unrecorded(proxy: Proxied) -> dict[str, int] | None:
    """The proxy's count of calls it forwarded unrecorded (``openai_responses.proxy.unrecorded``), by reason; None
    on a proxy that does not count them."""
    count: Any = getattr(proxy.proxy, "unrecorded", None)
    return None if count is None else dict(count())


@pytest.mark.parametrize(("session", "transport"), CASES)
def test_each_call_raises_exactly_the_signals_of_its_row(
    outcomes: Callable[[str, str], Outcome], session: str, transport: str
) -> None:
    outcome = outcomes(session, transport)
    assert outcome.calls == EXPECTED[session, transport], outcome.calls
    raised = {name for _, signals in outcome.calls for name in signals}
    assert all(CATALOGUE[name].severity == INFO for name in raised)  # a healthy session: nothing more than info


@pytest.mark.parametrize(("session", "transport"), CASES)
def test_codex_sends_the_same_requests_through_the_proxy(
    outcomes: Callable[[str, str], Outcome], session: str, transport: str
) -> None:
    outcome = outcomes(session, transport)
    assert len(outcome.proxied_requests) == len(outcome.direct_requests)
    for number, (straight, via) in enumerate(zip(outcome.direct_requests, outcome.proxied_requests, strict=True)):
        assert via == straight, f"request {number + 1}"


@pytest.mark.parametrize(("session", "transport"), CASES)
def test_codex_answers_each_turn_as_without_the_proxy(
    outcomes: Callable[[str, str], Outcome], session: str, transport: str
) -> None:
    outcome = outcomes(session, transport)
    direct = [masked_output(answer) for answer in outcome.direct.answers]
    assert [masked_output(answer) for answer in outcome.proxied.answers] == direct
    assert direct == ANSWERS[session]


@pytest.mark.parametrize(("session", "transport"), CASES)
def test_nothing_goes_off_the_machine(outcomes: Callable[[str, str], Outcome], session: str, transport: str) -> None:
    """Codex's own calls (update check, analytics, plugins) are off: none reached the trap standing for the
    network, so none could have waited on it."""
    assert outcomes(session, transport).off_the_machine == []


@pytest.mark.parametrize(("session", "transport"), CASES)
def test_the_proxy_records_every_call(outcomes: Callable[[str, str], Outcome], session: str, transport: str) -> None:
    outcome = outcomes(session, transport)
    if outcome.unrecorded is None:  # the proxy of this tree has no such counter
        pytest.skip("the proxy counts no unrecorded calls (openai_responses.proxy.unrecorded) in this tree")
    assert outcome.unrecorded == {}


@pytest.mark.parametrize(("session", "transport"), CASES)
def test_codex_sends_the_state_its_sessions_are_known_by(
    outcomes: Callable[[str, str], Outcome], session: str, transport: str
) -> None:
    """What the signals' rules must keep healthy (docs/codex.md): unstored, streamed calls asking for encrypted
    reasoning, no `instructions`, a client-made id of its type's prefix on every item Codex writes (its compaction
    prompt alone goes without), and over WebSocket mode every call but a warm-up and a compaction (on a connection of
    its own, the whole history) continuing the connection's latest response."""
    for body in outcomes(session, transport).bodies:
        assert (body["store"], body["stream"], body["include"]) == (False, True, ["reasoning.encrypted_content"])
        assert "instructions" not in body
        written = [
            item
            for item in body["input"]
            if item.get("role") in ("developer", "user") or item["type"] == "function_call_output"
        ]
        unnamed = [item for item in written if "id" not in item]
        assert unnamed == ([written[-1]] if call_kind(body) == "compaction" else [])
        for item in written:
            prefix = "fco_" if item["type"] == "function_call_output" else "msg_"
            assert "id" not in item or item["id"].startswith(prefix), item
        if TRANSPORTS[transport]:
            assert ("previous_response_id" in body) == (call_kind(body) not in ("warm-up", "compaction"))
