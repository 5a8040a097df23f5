"""``otel-responses doctor``: the minimal troubleshooting flow for lost context as one command.

Each step uses one state mode on its own, asks a fixed question whose answer shows whether the context
survived, and reports pass or fail with the signals the instrumentation raised and the fix. Nothing it
prints is a key, a header or a payload: only step names, checks, signal names and fixes.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from ..attributes import SIGNALS
from ..signals import CATALOGUE, LOSS_SEVERITIES

if TYPE_CHECKING:
    from openai import OpenAI

ENCRYPTED = "reasoning.encrypted_content"
INSTRUCTIONS = "Answer briefly."
TOOL = "lookup_order"
TOOLS: Any = [
    {
        "type": "function",
        "name": TOOL,
        "description": "Look up an order's status.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]


class Unreachable(Exception):
    """The endpoint could not be reached at all."""


class Refused(Exception):
    """The endpoint refused the key."""


class NoApi(Exception):
    """The first request got a 404 that names no API error: nothing answers the Responses API at the base URL
    (a `--base-url` without its `/v1`, say). Every later step would fail the same way, so the run stops there."""


@dataclass
class Check:
    """What a step found: whether the context survived, and what it would take to fix."""

    passed: bool
    finding: str
    fix: str = ""


@dataclass
class Probe:
    """What one step needs: the client, the models, and a fresh marker."""

    client: OpenAI
    model: str
    marker: str = field(default_factory=lambda: f"DR-{secrets.token_hex(3).upper()}")

    def remember(self) -> str:
        return f"Remember this: the marker is {self.marker}."

    QUESTION = "What is the marker? Reply with the marker only."

    def knows(self, text: str) -> bool:
        return self.marker.lower() in text.lower()


def _verdict(probe: Probe, answer: str, lost_fix: str) -> Check:
    if probe.knows(answer):
        return Check(True, "the model still knew the marker")
    return Check(False, "the model lost the marker", lost_fix)


def baseline(p: Probe) -> Check:
    """Two turns of plain text in one request, continuing no earlier response: no state involved, so a failure here
    is the model or the endpoint, not the state handling. (Sent after an answer to the first turn, the same input
    would be a replay that kept only the user's messages.)"""
    history: Any = [{"role": "user", "content": p.remember()}, {"role": "user", "content": Probe.QUESTION}]
    answer = p.client.responses.create(model=p.model, instructions=INSTRUCTIONS, input=history).output_text
    return _verdict(p, answer, "the endpoint or model ignores the history it is given: check the model and proxy")


def server_chain(p: Probe) -> Check:
    """`previous_response_id` alone, instructions re-sent."""
    first = p.client.responses.create(model=p.model, instructions=INSTRUCTIONS, input=p.remember())
    answer = p.client.responses.create(
        model=p.model, instructions=INSTRUCTIONS, previous_response_id=first.id, input=Probe.QUESTION
    ).output_text
    return _verdict(p, answer, "the chain does not carry context: is the parent stored (store=true, no ZDR)?")


def conversation(p: Probe) -> Check:
    """A Conversation alone."""
    conv = p.client.conversations.create()
    p.client.responses.create(model=p.model, instructions=INSTRUCTIONS, conversation=conv.id, input=p.remember())
    answer = p.client.responses.create(
        model=p.model, instructions=INSTRUCTIONS, conversation=conv.id, input=Probe.QUESTION
    ).output_text
    return _verdict(p, answer, "the conversation does not carry context: are both turns written to the same id?")


def _replay(p: Probe, **extra: Any) -> tuple[str, Any]:
    history: list[Any] = [{"role": "user", "content": p.remember()}]
    first = p.client.responses.create(model=p.model, instructions=INSTRUCTIONS, input=history, **extra)
    history += [*first.output, {"role": "user", "content": Probe.QUESTION}]
    second = p.client.responses.create(model=p.model, instructions=INSTRUCTIONS, input=history, **extra)
    return second.output_text, first


def client_replay(p: Probe) -> Check:
    """The app replays every output item; the server keeps nothing it needs."""
    answer, _ = _replay(p)
    return _verdict(p, answer, "replay every output item, not just the text")


def store_false_replay(p: Probe) -> Check:
    """`store=false` with the whole history replayed: nothing may depend on the server keeping it (a
    reasoning model's items can then only come back with their encrypted content)."""
    answer, _ = _replay(p, store=False, include=[ENCRYPTED])
    return _verdict(p, answer, "with store=false the app must keep and replay every output item itself")


def encrypted_reasoning(p: Probe) -> Check:
    """Stateless reasoning: `include` asks for encrypted reasoning, which is replayed unchanged."""
    answer, first = _replay(p, store=False, include=[ENCRYPTED])
    reasoning = [item for item in first.output if getattr(item, "type", None) == "reasoning"]
    if not reasoning:
        return Check(False, "the model returned no reasoning item", "use a reasoning model for this step (--model)")
    if not all(getattr(item, "encrypted_content", None) for item in reasoning):
        return Check(False, "reasoning came back without encrypted_content", CATALOGUE["reasoning_not_replayable"].fix)
    return _verdict(p, answer, CATALOGUE["reasoning_dropped"].fix)


def function_call(p: Probe) -> Check:
    """One tool call round trip: the call item and its output stay linked by `call_id`."""
    history: list[Any] = [{"role": "user", "content": f"Please use {TOOL} for order {p.marker}."}]
    first = p.client.responses.create(
        model=p.model,
        instructions=INSTRUCTIONS,
        input=history,
        tools=TOOLS,
        tool_choice={"type": "function", "name": TOOL},
    )
    calls: list[Any] = [item for item in first.output if getattr(item, "type", None) == "function_call"]
    if not calls:
        return Check(False, "the model made no tool call", "check that the model supports function tools")
    result = f"shipped-{p.marker}"
    history += [*first.output, {"type": "function_call_output", "call_id": calls[0].call_id, "output": result}]
    history.append({"role": "user", "content": "What did the tool return? Reply with its result only."})
    answer = p.client.responses.create(model=p.model, instructions=INSTRUCTIONS, input=history, tools=TOOLS).output_text
    if result.lower() in answer.lower():
        return Check(True, "the tool result reached the model")
    return Check(False, "the model lost the tool result", CATALOGUE["orphan_tool_output"].fix)


def _compact(p: Probe, history: list[Any]) -> list[Any]:
    """The compacted window: through `responses.compact` (openai >= 2.9), or the same endpoint directly."""
    compact = getattr(p.client.responses, "compact", None)
    if compact is not None:
        compacted = compact(model=p.model, input=history)
        # As the SDK would send them, minus its serializer's warnings about user messages in an output union.
        return [item.model_dump(warnings=False, exclude_none=True) for item in compacted.output]
    sent = [item.model_dump(exclude_none=True) if hasattr(item, "model_dump") else item for item in history]
    body: Any = p.client.post("/responses/compact", body={"model": p.model, "input": sent}, cast_to=object)
    return list(body["output"])


def compaction(p: Probe) -> Check:
    """A long history compacted, the same fixed question asked before and after."""
    history: list[Any] = [{"role": "user", "content": p.remember()}]
    stateless: Any = {"store": False, "include": [ENCRYPTED]}
    for turn in range(6):
        reply = p.client.responses.create(model=p.model, instructions=INSTRUCTIONS, input=history, **stateless)
        history += [*reply.output, {"role": "user", "content": f"Note {turn}: nothing else to remember."}]
    before = p.client.responses.create(
        model=p.model,
        instructions=INSTRUCTIONS,
        input=[*history, {"role": "user", "content": Probe.QUESTION}],
        **stateless,
    ).output_text
    window = [*_compact(p, history), {"role": "user", "content": Probe.QUESTION}]
    after = p.client.responses.create(model=p.model, instructions=INSTRUCTIONS, input=window, **stateless).output_text
    if not p.knows(before):
        return Check(False, "the model lost the marker before compaction", "the history itself is incomplete")
    return _verdict(p, after, "replay the compaction output unchanged, not a summary of it")


@dataclass(frozen=True)
class Step:
    name: str
    title: str
    run: Callable[[Probe], Check]


STEPS: tuple[Step, ...] = (
    Step("baseline", "two-turn text baseline", baseline),
    Step("server_chain", "previous_response_id alone", server_chain),
    Step("conversation", "conversation alone", conversation),
    Step("client_replay", "client replay alone", client_replay),
    Step("store_false_replay", "store=false with full replay", store_false_replay),
    Step("encrypted_reasoning", "encrypted reasoning requested and replayed", encrypted_reasoning),
    Step("function_call", "one function call round trip", function_call),
    Step("compaction", "compaction, same question before and after", compaction),
)


@dataclass
class Result:
    step: Step
    check: Check
    signals: list[str]


def _loss_signals(spans: Any) -> list[str]:
    names: list[str] = []
    for span in spans:
        for name in (span.attributes or {}).get(SIGNALS, ()):
            if CATALOGUE[name].severity in LOSS_SEVERITIES and name not in names:
                names.append(str(name))
    return names


def _run_step(step: Step, probe: Probe, *, first: bool = False) -> Check:
    import openai

    try:
        return step.run(probe)
    except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
        raise Refused(type(error).__name__) from None
    except openai.APIConnectionError as error:
        raise Unreachable(type(error).__name__) from None
    except openai.APIStatusError as error:
        if first and error.status_code == 404 and not isinstance(error.code, str):  # `model_not_found` has a code
            raise NoApi(f"{error.request.method} {error.request.url.path}") from None
        code = error.code if isinstance(error.code, str) else str(error.status_code)
        return Check(False, f"the API refused a request ({code})", "see the signals and their fixes")


def diagnose(client: OpenAI, model: str, memory: Any, out: TextIO) -> list[Result]:
    """Run every step; print one line per step as it completes."""
    results: list[Result] = []
    width = max(len(s.name) for s in STEPS)
    for number, step in enumerate(STEPS, 1):
        memory.clear()
        check = _run_step(step, Probe(client, model), first=number == 1)
        signals = _loss_signals(memory.get_finished_spans())
        fix = check.fix or (CATALOGUE[signals[0]].fix if signals else "")
        if not check.passed and signals and check.fix == "see the signals and their fixes":
            fix = CATALOGUE[signals[0]].fix
        results.append(Result(step, Check(check.passed, check.finding, fix), signals))
        verdict = "PASS" if check.passed and not signals else "FAIL"
        out.write(f"  {number} {step.name:<{width}}  {verdict}  {step.title}: {check.finding}\n")
        if signals:
            out.write(f"    signals: {', '.join(signals)}\n")
        if verdict == "FAIL" and fix:
            out.write(f"    fix: {fix}\n")
        out.flush()
    return results
