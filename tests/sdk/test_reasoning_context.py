"""Which earlier reasoning a model is shown: a request's effective `reasoning.context` (as sent when explicit, else
its model's default), where its turn begins, the emulator's defaults per model family and the value it returns, and
the table held to the recorded traffic: every recorded response that returns a `reasoning.context`. Then
`reasoning_dropped` where the model would have seen the reasoning: under `current_turn` an earlier, finished turn's
reasoning left out is no loss (said on the span), the current turn's tool loop and `all_turns` keep the signal; the
turn rule held to the emulator's `turn_boundary` reports on full replays (the oracle)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import openai
import pytest

from otel_responses._analysis.analysis import analyse
from otel_responses._analysis.checks import Situation, run_request_checks
from otel_responses._analysis.facts import request_facts, response_facts
from otel_responses._analysis.reasoning_context import (
    ALL_TURNS,
    CURRENT_TURN,
    effective_context,
    latest_user_message,
    model_default,
)
from otel_responses._calls.operations import remember_created
from otel_responses.config import settings_from
from otel_responses.emulator import Emulator
from otel_responses.ledger import Entry, InMemoryLedger

from ..core.test_core import Ended
from ..real_traffic.replay import all_cassettes, load
from ..support import sdk_field, withheld

SETTINGS = settings_from({"hash_key": "reasoning-context-tests"})

# (model as sent, its default) — each row beside its near miss.
DEFAULTS: list[tuple[str | None, str | None]] = [
    ("gpt-5", CURRENT_TURN),
    ("gpt-5-mini", CURRENT_TURN),
    ("gpt-5-2025-08-07", CURRENT_TURN),
    ("gpt-5.2", CURRENT_TURN),
    ("gpt-5.4-mini", CURRENT_TURN),
    ("gpt-5.5", CURRENT_TURN),
    ("gpt-5.3-codex", CURRENT_TURN),
    ("gpt-5.6", ALL_TURNS),
    ("gpt-5.6-mini", ALL_TURNS),
    ("gpt-5.6-2026-04-01", ALL_TURNS),
    ("gpt-5.7", None),  # later than the table: no default known
    ("gpt-55", None),
    ("o3", CURRENT_TURN),
    ("o4-mini", CURRENT_TURN),
    ("o3-pro-2025-06-10", CURRENT_TURN),
    ("o30", None),
    ("codex-mini-latest", CURRENT_TURN),
    ("openai/gpt-5-mini", CURRENT_TURN),  # a gateway's provider prefix
    ("azure/my-deployment", None),  # a deployment's own name says nothing
    ("gpt-4.1", None),  # does not reason
    ("", None),
    (None, None),
]


@pytest.mark.parametrize(("model", "default"), DEFAULTS)
def test_each_model_family_has_its_default(model: str | None, default: str | None) -> None:
    assert model_default(model) == default


def _req(**kwargs: Any) -> Any:
    return request_facts("chat", {"input": "q", **kwargs}, SETTINGS)


def test_the_effective_context_is_the_requests_else_its_models_default() -> None:
    assert effective_context(_req(model="gpt-5-mini")) == CURRENT_TURN
    assert effective_context(_req(model="gpt-5-mini", reasoning={"context": "all_turns"})) == ALL_TURNS
    assert effective_context(_req(model="gpt-5.6", reasoning={"context": "current_turn"})) == CURRENT_TURN
    assert effective_context(_req(model="gpt-5.6", reasoning={"context": "auto"})) is None  # the model decides
    assert effective_context(_req(model="gpt-5-mini", extra_body={"reasoning": {"context": "all_turns"}})) == ALL_TURNS
    assert effective_context(_req(model="my-deployment")) is None


def test_a_model_the_table_does_not_know_takes_what_the_api_returned_to_it_before() -> None:
    earlier = Entry("resp_1", model="my-deployment", reasoning_context=ALL_TURNS)
    assert effective_context(_req(model="my-deployment"), earlier) == ALL_TURNS
    assert effective_context(_req(model="other-deployment"), earlier) is None  # another model: nothing known
    assert effective_context(_req(model="my-deployment"), Entry("resp_1", model="my-deployment")) is None
    odd = Entry("resp_1", model="my-deployment", reasoning_context="auto")
    assert effective_context(_req(model="my-deployment"), odd) is None


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# (input, where the current turn begins)
TURNS: list[tuple[Any, int | None]] = [
    ("q", 0),
    ([user("a"), {"type": "reasoning", "id": "rs_1"}, user("b")], 2),
    ([user("a"), {"type": "function_call", "call_id": "c"}, {"type": "function_call_output", "call_id": "c"}], 0),
    ([{"type": "function_call_output", "call_id": "c", "output": "x"}], None),  # a tool loop's next step
    ([{"role": "developer", "content": "be brief"}], None),  # instructions are no turn
    ([user("a"), {"role": "assistant", "content": "b"}], 0),
]


@pytest.mark.parametrize(("sent", "start"), TURNS)
def test_a_turn_begins_at_the_latest_user_message(sent: Any, start: int | None) -> None:
    assert latest_user_message(_req(model="gpt-5", input=sent)) == start


# -- the emulator ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client() -> Iterator[openai.OpenAI]:
    with Emulator() as emulator, emulator.client() as sdk:
        yield sdk


@pytest.mark.parametrize(
    ("model", "reasoning", "returned"),
    [
        ("gpt-5-mini", None, CURRENT_TURN),
        ("gpt-5.4", {"context": "all_turns"}, ALL_TURNS),
        ("gpt-5.4", {"context": "auto"}, CURRENT_TURN),
        ("gpt-5.6", None, ALL_TURNS),
        ("gpt-5.6", {"context": "current_turn"}, CURRENT_TURN),
        ("o4-mini", {"effort": "low"}, CURRENT_TURN),
        ("gpt-4.1", {"context": "all_turns"}, None),  # a model that does not reason reports none
    ],
)
def test_the_emulator_returns_the_effective_context(
    client: openai.OpenAI, model: str, reasoning: dict[str, Any] | None, returned: str | None
) -> None:
    options: dict[str, Any] = {"reasoning": reasoning} if reasoning else {}
    response = client.responses.create(model=model, input="Hi.", **options)
    got = sdk_field(response.reasoning, "context")
    assert got == returned


# -- the recorded traffic ----------------------------------------------------------------------------------------


def _recorded() -> list[tuple[str, str, Any, str]]:
    """(cassette, model asked for, reasoning.context sent, reasoning.context returned) of every recorded response
    that returns one."""
    found = []
    for path in all_cassettes():
        for call in load(path)["calls"]:
            body = call.get("request_body")
            if not isinstance(body, dict) or not isinstance(body.get("model"), str):
                continue
            returned = _returned(call)
            if returned is None:
                continue
            sent = (body.get("reasoning") or {}).get("context") if isinstance(body.get("reasoning"), dict) else None
            found.append((path.stem, body["model"], sent, returned))
    return found


def _returned(call: dict[str, Any]) -> str | None:
    response = call.get("response_body")
    if response is None and isinstance(call.get("response_sse"), str):
        for line in call["response_sse"].splitlines():
            if line.startswith("data: ") and '"response.completed"' in line:
                response = json.loads(line[6:]).get("response")
    reasoning = response.get("reasoning") if isinstance(response, dict) else None
    context = reasoning.get("context") if isinstance(reasoning, dict) else None
    return context if isinstance(context, str) else None


def test_the_table_agrees_with_every_recorded_response() -> None:
    """79 recorded responses return a context: the defaults of gpt-5, 5-mini, 5.2, 5.4, 5.5, o3, o4-mini
    (`current_turn`) and of gpt-5.6 (`all_turns`), an explicit `all_turns` honoured, `auto` left to the model."""
    recorded = _recorded()
    omitted = {model for _, model, sent, _ in recorded if sent is None}
    assert {"gpt-5", "gpt-5-mini", "gpt-5.2", "gpt-5.4", "gpt-5.5", "gpt-5.6", "o3", "o4-mini"} <= omitted
    assert any(sent == "auto" for _, _, sent, _ in recorded)
    for stem, model, sent, returned in recorded:
        expected = sent if sent in (CURRENT_TURN, ALL_TURNS) else model_default(model)
        assert expected == returned, (stem, model, sent, returned)


# -- reasoning_dropped where the model would have seen the reasoning --------------------------------------------------

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAABo" + "Zx9_Kq-" * 40}
ANSWER = {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "42"}


def _after(
    output: list[Any], model: str, request: dict[str, Any], returned: str | None = None, provider: str = "openai"
) -> tuple[list[str], int]:
    """The request-side signals of ``request`` (on ``model``) after `resp_1` (unstored) returned ``output`` to
    `input=[q]` (reporting ``returned`` as its reasoning context), and the reasoning it left out that was not rendered
    anyway."""
    ledger = InMemoryLedger()
    unstored = {"store": False, "include": ["reasoning.encrypted_content"]}  # stateless: ids name nothing held
    first = request_facts("chat", {"model": model, "input": [user("q")], **unstored}, SETTINGS)
    response = SimpleNamespace(
        id="resp_1", model=model, output=output, status="completed", reasoning={"context": returned}
    )
    remember_created(Ended(ledger, first, analyse(first, ledger)), response_facts(response, SETTINGS))
    req = request_facts("chat", {"model": model, "store": False, **request}, SETTINGS)
    req.provider = provider
    analysis = analyse(req, ledger)
    return [
        s.name for s in run_request_checks(req, analysis, Situation(zdr=False, concurrent=False))
    ], analysis.not_replayed


NEXT_TURN = {"input": [user("q"), ANSWER, user("next")]}  # turn 1's reasoning left out, then a new user turn
TOOL_LOOP = {"input": [user("q"), CALL, OUTPUT]}  # the call's reasoning left out, within the turn

# (name, resp_1's output, model, the next request, what resp_1 reported, provider, signals, not replayed)
DROPPED: list[tuple[str, list[Any], str, dict[str, Any], str | None, str, list[str], int]] = [
    ("an earlier turn's, under current_turn", [REASONING, ANSWER], "gpt-5-mini", NEXT_TURN, None, "openai", [], 1),
    (
        "the current turn's tool loop",
        [REASONING, CALL],
        "gpt-5-mini",
        TOOL_LOOP,
        None,
        "openai",
        ["reasoning_dropped"],
        0,
    ),
    (
        "an earlier turn's, asked to render all turns",
        [REASONING, ANSWER],
        "gpt-5-mini",
        {**NEXT_TURN, "reasoning": {"context": "all_turns"}},
        None,
        "openai",
        ["reasoning_dropped"],
        0,
    ),
    (
        "an earlier turn's, on gpt-5.6",
        [REASONING, ANSWER],
        "gpt-5.6",
        NEXT_TURN,
        None,
        "openai",
        ["reasoning_dropped"],
        0,
    ),
    (
        "the model decides (auto)",
        [REASONING, ANSWER],
        "gpt-5-mini",
        {**NEXT_TURN, "reasoning": {"context": "auto"}},
        None,
        "openai",
        ["reasoning_dropped"],
        0,
    ),
    (
        "a model the table does not know",
        [REASONING, ANSWER],
        "my-model",
        NEXT_TURN,
        None,
        "openai",
        ["reasoning_dropped"],
        0,
    ),
    (
        "a model the table does not know, that answered current_turn",
        [REASONING, ANSWER],
        "my-model",
        NEXT_TURN,
        "current_turn",
        "openai",
        [],
        1,
    ),
    ("Azure OpenAI", [REASONING, ANSWER], "gpt-5-mini", NEXT_TURN, None, "azure.ai.openai", [], 1),
    ("a compatible server", [REASONING, ANSWER], "gpt-5-mini", NEXT_TURN, None, "ollama", ["reasoning_dropped"], 0),
    (
        "a tool output is no user message",
        [REASONING, CALL],
        "gpt-5-mini",
        {"input": [user("q"), CALL, OUTPUT, {"type": "function_call_output", "call_id": "call_9", "output": "x"}]},
        None,
        "openai",
        ["reasoning_dropped", "orphan_tool_output"],
        0,
    ),
]


@pytest.mark.parametrize(
    ("output", "model", "request_kwargs", "returned", "provider", "signals", "not_replayed"),
    [row[1:] for row in DROPPED],
    ids=[row[0] for row in DROPPED],
)
def test_reasoning_dropped_only_where_the_model_would_have_seen_it(
    output: list[Any],
    model: str,
    request_kwargs: dict[str, Any],
    returned: str | None,
    provider: str,
    signals: list[str],
    not_replayed: int,
) -> None:
    assert _after(output, model, request_kwargs, returned, provider) == (signals, not_replayed)


# -- the turn rule against the emulator's own report (the oracle) --------------------------------------------------

WEATHER: Any = {"type": "function", "name": "lookup_weather", "parameters": {"type": "object", "properties": {}}}


def _earlier_turns_reasoning(analysis: Any) -> set[str]:
    """The ids of the reasoning items the analysis holds for earlier turns' (not rendered under current_turn)."""
    return {
        m.id or ""
        for replayed in analysis.replayed
        if replayed.entry.response_id in analysis.earlier_turns
        for m in replayed.entry.outputs
        if m.type == "reasoning"
    }


@pytest.mark.parametrize("model", ["gpt-5-mini", "gpt-5.4", "gpt-5.6"])
def test_the_turn_rule_is_the_apis_on_every_step_of_a_full_replay(client: openai.OpenAI, model: str) -> None:
    """Every item replayed, each step: the reasoning the analysis holds for earlier, finished turns is exactly what the
    emulator reports withheld at the turn boundary (none on gpt-5.6, whose default renders every turn)."""
    ledger = InMemoryLedger()
    options: dict[str, Any] = {"model": model, "store": False, "include": ["reasoning.encrypted_content"]}
    history: list[Any] = []
    steps: list[Any] = [
        user("Remember this: the marker is T-1."),
        user("Please call lookup_weather for Paris."),
        "tool output",
        user("And what is the marker?"),
        "tool output",  # no call pending: skipped
        user("Please call lookup_weather for Rome."),
        "tool output",
    ]
    compared = 0
    for step in steps:
        if step == "tool output":
            calls = [i for i in history if i.get("type") == "function_call"]
            if not calls or any(
                i.get("call_id") == calls[-1]["call_id"] for i in history if i.get("type") == "function_call_output"
            ):
                continue
            history.append({"type": "function_call_output", "call_id": calls[-1]["call_id"], "output": "sunny"})
        else:
            history.append(step)
        kwargs = {**options, "input": list(history), "tools": [WEATHER]}
        req = request_facts("chat", kwargs, SETTINGS)
        analysis = analyse(req, ledger)
        response = client.responses.create(**kwargs)
        at_boundary = {id for id, reason in withheld(response) if reason == "turn_boundary"}
        assert _earlier_turns_reasoning(analysis) == at_boundary, (model, len(history))
        compared += len(at_boundary)
        remember_created(Ended(ledger, req, analysis), response_facts(response, SETTINGS))
        history += [item.model_dump(exclude_none=True) for item in response.output]
    assert (compared > 0) is (model != "gpt-5.6")
