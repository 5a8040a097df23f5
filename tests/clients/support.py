"""What every client-library flow shares: the conversation, the tool, the expected signals per model call, and a
failure report that shows what the library actually sent.

No client library is imported here: each test module imports its own library with `pytest.importorskip`, so
this module (and the suite) loads in an environment without them.

The conversation (four user turns, five model calls):

1. "Remember: the marker is M-1."                      -> "Noted marker M-1."
2. "Please call lookup_weather for Paris."             -> a function_call; the library runs the tool ("sunny") and
                                                          sends its output -> "Tool lookup_weather returned sunny."
3. "Now choose a code word."                           -> a reasoning model keeps the word in its reasoning item only
4. "What is the marker, the code word, and what did the tool return?"
                                                       -> "marker=M-1; tool=sunny; code_word=CW-......" when every
                                                          bit of context reached the model

The code word lives in turn 3's reasoning only, so turn 4's model sees it only under `reasoning.context: all_turns`
(the default from gpt-5.6 on); under `current_turn` the API drops an earlier turn's reasoning, whatever the library
replays, and the answer says `code_word=unknown` with no signal (nothing the app sent was lost).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from otel_responses.emulator import Emulator
from otel_responses.emulator.config import ALL_TURNS, default_reasoning_context
from otel_responses.testing import CapturedTelemetry, capture

MARKER = "M-1"
TOOL_NAME = "lookup_weather"
TOOL_RESULT = "sunny"
INSTRUCTIONS = "Be brief."
PROMPTS = (
    f"Remember: the marker is {MARKER}.",
    f"Please call {TOOL_NAME} for Paris.",
    "Now choose a code word.",
    "What is the marker, the code word, and what did the tool return?",
)
CALLS = 5  # model calls of the conversation: one per turn, two in the tool turn

# The models the flows run on: a model without reasoning, a reasoning model (no `phase`), and a reasoning model
# whose assistant messages carry `phase` (the real API's rule, mirrored by the emulator: gpt-5.4 and later).
PLAIN = "gpt-4.1"
REASONING = "gpt-5-mini"
PHASED = "gpt-5.4-mini"
ENCRYPTED = "reasoning.encrypted_content"
# What a flow that proves replayed reasoning reaches the model asks for: every turn's reasoning in view, so the code
# word of turn 3 can come back in turn 4.
ALL_TURNS_REASONING = {"context": ALL_TURNS}

_CODE_WORD = re.compile(r"^CW-[0-9a-f]{6}$")


def lookup_weather(query: str) -> str:
    """Look up the weather for a place."""
    return TOOL_RESULT


def is_reasoning(model: str) -> bool:
    return model.startswith(("o1", "o3", "o4", "gpt-5", "codex"))


def keeps_code_word(model: str, context: str | None = None) -> bool:
    """Whether turn 4's model can see the code word turn 3's reasoning holds: a reasoning model whose effective
    `reasoning.context` (``context`` as the library sends it, else the model's default) keeps earlier turns."""
    return is_reasoning(model) and (context or default_reasoning_context(model)) == ALL_TURNS


# -- expectations -----------------------------------------------------------------------------------------------


def clean() -> list[set[str]]:
    """No signal on any of the five calls."""
    return [set() for _ in range(CALLS)]


TOOL_LOOP = 2  # the call that sends the tool's output: the only later call whose turn is the one before it


def calls(first: Iterable[str] = (), rest: Iterable[str] = (), *, loop: Iterable[str] = ()) -> list[set[str]]:
    """The first call raises ``first``, each later call (every one continues the conversation) ``rest``, and the
    tool loop's second call ``loop`` beside it: what only the current turn's replay can lose (its reasoning, which
    the model sees under every `reasoning.context`)."""
    expected = [set(first)] + [set(rest) for _ in range(CALLS - 1)]
    expected[TOOL_LOOP] |= set(loop)
    return expected


def answer_facts(answer: object) -> dict[str, str]:
    """``marker=M-1; tool=sunny; code_word=CW-...`` as a dict (empty when the answer is not of that shape)."""
    text = str(answer).strip()
    facts: dict[str, str] = {}
    for part in text.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep:
            facts[key.strip()] = value.strip().rstrip(".")
    return facts


def assert_final_answer(answer: object, *, tool: str = TOOL_RESULT, code_word: bool) -> None:
    """The last answer shows which context reached the model: the marker (turn 1), the tool result (turn 2) and,
    when ``code_word``, the code word a reasoning model kept in its reasoning item (turn 3)."""
    facts = answer_facts(answer)
    assert facts.get("marker") == MARKER, f"the marker of turn 1 was lost: {answer!r}"
    assert facts.get("tool") == tool, f"expected tool={tool}: {answer!r}"
    word = facts.get("code_word", "")
    if code_word:
        assert _CODE_WORD.match(word), f"the code word kept in reasoning was lost: {answer!r}"
    else:
        assert word == "unknown", f"expected code_word=unknown: {answer!r}"


def sent_context(emulator: Emulator) -> str | None:
    """The `reasoning.context` the library's last request asked for (None when it sent none)."""
    reasoning = responses_requests(emulator)[-1].get("reasoning") or {}
    context = reasoning.get("context")
    return context if isinstance(context, str) else None


# -- what was sent, what was raised --------------------------------------------------------------------------------


def responses_requests(emulator: Emulator) -> list[dict[str, Any]]:
    """The bodies of the create requests the emulator received, in order: `POST /v1/responses`, and the
    `response.create` events sent over a WebSocket."""
    found = []
    for r in emulator.requests:
        if not isinstance(r.body, dict) or not r.path.rstrip("/").endswith("/responses"):
            continue
        if r.method == "POST" or (r.method == "WEBSOCKET" and r.body.get("type") == "response.create"):
            found.append(r.body)
    return found


def signals_of(span: Any) -> set[str]:
    return set((span.attributes or {}).get("openai_responses.signals", ()) or ())


class ChatSpans(Protocol):
    """What has chat spans: captured telemetry, or a view of some of its spans."""

    def chat_spans(self) -> list[Any]: ...


def expect_signals(telemetry: ChatSpans, emulator: Emulator, expected: Sequence[set[str]]) -> None:
    """Each model call raised exactly the expected signals (info ones included): no false signal, and every real
    habit named. Also: every request that reached the emulator produced a chat span."""
    __tracebackhide__ = True
    spans = telemetry.chat_spans()
    requests = responses_requests(emulator)
    problems = []
    if len(spans) != len(requests):
        problems.append(
            f"{len(requests)} create requests reached the emulator, but {len(spans)} chat spans were exported"
        )
    got = [signals_of(s) for s in spans]
    if got != [set(e) for e in expected]:
        problems.append("signals per model call differ from the expected ones")
    if problems:
        raise AssertionError("\n".join([*problems, report(spans, requests, expected)]))


def report(spans: Sequence[Any], requests: Sequence[dict[str, Any]], expected: Sequence[set[str]]) -> str:
    """Per call: what was expected, what was raised (with the signal events' metadata), and the shape of what the
    library sent (item types, ids, phases, call ids, encrypted payloads; no text)."""
    lines = []
    for i in range(max(len(spans), len(requests), len(expected))):
        want = sorted(expected[i]) if i < len(expected) else "-"
        if i < len(spans):
            span = spans[i]
            raised: list[str] | str = sorted(signals_of(span))
            details = [
                {k.removeprefix("openai_responses."): _plain(v) for k, v in (e.attributes or {}).items()}
                for e in span.events
                if e.name == "openai_responses.signal"
            ]
            mode = (span.attributes or {}).get("openai_responses.state.mode")
        else:
            raised, details, mode = "(no span)", [], None
        lines.append(f"call {i + 1}: expected {want}, raised {raised} [{mode}]")
        for detail in details:
            lines.append(f"    {detail}")
        if i < len(requests):
            lines.append(f"    sent: {describe_request(requests[i])}")
    return "\n".join(lines)


def describe_request(body: dict[str, Any]) -> str:
    """A one-line shape of a create request: state fields, store, include, reasoning, stream and its items."""
    head = []
    for key in ("previous_response_id", "conversation", "store", "include", "reasoning", "stream"):
        if key in body and body[key] not in (None, []):
            head.append(f"{key}={json.dumps(body[key])}")
    if body.get("instructions"):
        head.append("instructions")
    raw = body.get("input")
    items = [describe_item(raw)] if isinstance(raw, str) else [describe_item(i) for i in raw or []]
    return " ".join(head) + " input=[" + ", ".join(items) + "]"


def describe_item(item: Any) -> str:
    if isinstance(item, str):
        return "text"
    if not isinstance(item, dict):
        return type(item).__name__
    kind = item.get("type") or ("message" if "role" in item else "reference" if "id" in item else "?")
    out = kind
    if kind == "message":
        content = item.get("content")
        out += f"({item.get('role')}{', text' if isinstance(content, str) else ''})"
    if "id" in item:
        out += f"#{item['id']}"
    if item.get("phase"):
        out += f" phase={item['phase']}"
    if item.get("call_id"):
        out += f" call_id={item['call_id']}"
    if isinstance(item.get("encrypted_content"), str):
        out += f" enc[{len(item['encrypted_content'])}]"
    return out


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# -- instrumentation on and off --------------------------------------------------------------------------------


@dataclass
class Run:
    """One run of a flow: the final answer (the library's own object), the request bodies, and the telemetry (None
    when it was off)."""

    answer: Any
    requests: list[dict[str, Any]]
    telemetry: CapturedTelemetry | None

    @property
    def captured(self) -> CapturedTelemetry:
        """The telemetry of the run with the instrumentation on."""
        assert self.telemetry is not None, "the instrumentation was off for this run"
        return self.telemetry


@contextmanager
def maybe_capture(on: bool) -> Iterator[CapturedTelemetry | None]:
    if on:
        with capture() as telemetry:
            yield telemetry
    else:
        yield None


def comparable(requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Request bodies with each `encrypted_content` replaced by its length: the API (and the emulator) encrypts
    afresh on every serialisation, so only the bytes differ between two otherwise identical runs."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (f"<{len(v)} chars>" if k == "encrypted_content" and isinstance(v, str) else walk(v))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return [walk(r) for r in requests]


def assert_same_behaviour(off: Run, on: Run) -> None:
    """The app behaves as without the instrumentation: same answer, same requests on the wire."""
    __tracebackhide__ = True
    assert on.answer == off.answer
    assert comparable(on.requests) == comparable(off.requests)
