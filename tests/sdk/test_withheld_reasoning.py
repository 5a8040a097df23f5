"""What a response says the model saw: `input_transformations` (the replayed reasoning the API withheld, and why),
the effective `reasoning.context`, `prompt_cache_diagnostics`. Read from the SDK's types and from an SDK that does
not declare them (plain attribute and dict access), recorded on the span and on a metric counting withheld items by
reason, in both convention dialects; `reasoning_withheld` for every reason but `turn_boundary`.

No public recording holds `input_transformations` yet (none in tests/real_traffic): the shapes are the SDK's types
(openai-python 3.57 and later), and the end-to-end rows run against the emulator, which withholds as the API does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from otel_responses import attributes as a
from otel_responses._analysis.analysis import Analysis
from otel_responses._analysis.checks import Situation, reasoning_withheld, run_response_checks
from otel_responses._analysis.facts import CacheDiagnostic, ResponseFacts, request_facts, response_facts
from otel_responses.config import settings_from
from otel_responses.emulator import Emulator, replay_rules
from otel_responses.emulator.rendering import prefix_digests
from otel_responses.emulator.state import Caller, Entry, Minted
from otel_responses.signals import CATALOGUE, WITHHELD_FIXES, Signal
from otel_responses.testing import CapturedTelemetry, assert_no_reasoning_withheld, capture
from otel_responses.tools.report import from_sdk, render

from ..report_support import parse
from ..support import attrs, chat_signals, signal_events, withheld, withheld_reasons

SETTINGS = settings_from({"hash_key": "withheld-tests"})
SITUATION = Situation(zdr=False, concurrent=False)
REASONER = "gpt-5-mini"  # current_turn unless asked otherwise
ENCRYPTED = ["reasoning.encrypted_content"]
ALL_TURNS = {"context": "all_turns"}


def removed(reason: Any, item_id: str = "rs_1", **extra: Any) -> dict[str, Any]:
    """One `input_transformations` entry as the SDK types it (`InputTransformation`)."""
    return {"id": item_id, "type": "reasoning", "action": "removed", "reason": reason, **extra}


class _Undeclared:
    """A response as an SDK that does not declare the fields parses it: they sit in `__pydantic_extra__`, and nested
    values are plain dicts."""

    def __init__(self, **fields: Any) -> None:
        self.id, self.status, self.model = "resp_1", "completed", "gpt-5-mini"
        self.output: list[Any] = []
        self.__pydantic_extra__ = fields


# -- reading ----------------------------------------------------------------------------------------------------

# (`input_transformations` as the response carries it, what is read of it, the SDK's types accept it) — each row
# beside its near miss.
TRANSFORMATION_ROWS: list[tuple[Any, tuple[tuple[str, int], ...], bool]] = [
    (
        [removed("turn_boundary"), removed("model_mismatch", "rs_2"), removed("turn_boundary", "rs_3")],
        (("turn_boundary", 2), ("model_mismatch", 1)),
        True,
    ),
    ([], (), True),  # the API withheld nothing
    (None, (), True),  # an SDK or a server that says nothing
    ("removed", (), False),  # not a list
    ([removed("model_mismatch", action="summarized")], (), False),  # an action that withholds nothing
    ([{"id": "rs_1", "reason": "organization_mismatch"}], (("organization_mismatch", 1),), False),  # fields left out
    ([removed("Model Mismatch!")], (("unknown", 1),), False),  # no enum-like token: counted, never recorded as sent
    ([removed(None), removed(7)], (("unknown", 2),), False),
    ([removed("policy_mismatch")], (("policy_mismatch", 1),), False),  # a reason the SDK does not know yet
]


@pytest.mark.parametrize(("raw", "read", "typed"), TRANSFORMATION_ROWS)
def test_input_transformations_are_counted_by_reason(raw: Any, read: tuple[tuple[str, int], ...], typed: bool) -> None:
    assert response_facts(_Undeclared(input_transformations=raw), SETTINGS).withheld == read  # an SDK without it
    if typed and hasattr(openai.types.responses.response, "InputTransformation"):
        response = openai.types.responses.Response.model_validate(_body(input_transformations=raw))
        assert response_facts(response, SETTINGS).withheld == read  # the SDK's own types


# (`reasoning` as the response returns it, the effective context read)
CONTEXT_ROWS: list[tuple[Any, str | None]] = [
    ({"effort": "low", "context": "current_turn"}, "current_turn"),
    ({"effort": "low", "context": "all_turns"}, "all_turns"),
    ({"effort": "low"}, None),  # a response that does not say
    (None, None),  # a model that does not reason
    ({"context": 3}, None),
    ({"context": "<all turns>"}, None),  # never text
]


@pytest.mark.parametrize(("reasoning", "context"), CONTEXT_ROWS)
def test_the_effective_reasoning_context_is_read_from_the_response(reasoning: Any, context: str | None) -> None:
    assert response_facts(_Undeclared(reasoning=reasoning), SETTINGS).reasoning_context == context


def test_the_sdks_own_reasoning_type_is_read_alike() -> None:
    response = openai.types.responses.Response.model_validate(
        _body(reasoning={"effort": "low", "context": "all_turns"})
    )
    assert response_facts(response, SETTINGS).reasoning_context == "all_turns"


# (`prompt_cache_diagnostics`, what is read)
DIAGNOSTIC_ROWS: list[tuple[Any, CacheDiagnostic | None]] = [
    (
        {"type": "cache_miss", "reason": "tools_changed", "cache_missed_tokens": 1200},
        CacheDiagnostic("cache_miss", "tools_changed", 1200),
    ),
    ({"type": "cache_hit"}, CacheDiagnostic("cache_hit", None, None)),
    ({"type": "comparison_response_not_found"}, CacheDiagnostic("comparison_response_not_found", None, None)),
    ({"type": "unavailable"}, CacheDiagnostic("unavailable", None, None)),
    (None, None),  # not asked for
    ({"reason": "tools_changed", "cache_missed_tokens": 3}, None),  # no type: nothing to say
    (
        {"type": "cache_miss", "reason": "input changed!", "cache_missed_tokens": -4},
        CacheDiagnostic("cache_miss", None, None),
    ),
    (
        {"type": "cache_miss", "reason": "input_changed", "cache_missed_tokens": True},
        CacheDiagnostic("cache_miss", "input_changed", None),
    ),
]


@pytest.mark.parametrize(("raw", "read"), DIAGNOSTIC_ROWS)
def test_prompt_cache_diagnostics_are_read_as_type_reason_and_missed_tokens(
    raw: Any, read: CacheDiagnostic | None
) -> None:
    assert response_facts(_Undeclared(prompt_cache_diagnostics=raw), SETTINGS).cache_diagnostic == read


def _body(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-5-mini",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    return {**body, **{k: v for k, v in fields.items() if v is not None}}


# -- the signal -------------------------------------------------------------------------------------------------

# (what the API withheld, by reason; the signal's count and reasons, or None) — each row beside its near miss.
SIGNAL_ROWS: list[tuple[tuple[tuple[str, int], ...], tuple[int, list[str]] | None]] = [
    ((("model_mismatch", 1),), (1, ["model_mismatch"])),
    ((("turn_boundary", 3),), None),  # the reasoning context at work: recorded, never a signal
    ((("turn_boundary", 2), ("prefix_mismatch", 1)), (1, ["prefix_mismatch"])),
    ((("organization_mismatch", 2), ("end_user_mismatch", 1)), (3, ["organization_mismatch", "end_user_mismatch"])),
    ((("unknown", 1),), (1, ["unknown"])),  # a reason not read: still a mismatch the API reports
    ((), None),
]


@pytest.mark.parametrize(("withheld", "raised"), SIGNAL_ROWS)
def test_reasoning_withheld_for_every_reason_but_the_turn_boundary(
    withheld: tuple[tuple[str, int], ...], raised: tuple[int, list[str]] | None
) -> None:
    req = request_facts("chat", {"model": REASONER, "input": "q"}, SETTINGS)
    resp = dataclasses.replace(ResponseFacts.empty(), withheld=withheld)
    found = reasoning_withheld(req, Analysis(), resp, SITUATION)
    if raised is None:
        assert found is None
        assert [s.name for s in run_response_checks(req, Analysis(), resp, SITUATION)] == []
        return
    assert found is not None
    assert found.detail == {
        a.REASONING_WITHHELD: raised[0],
        a.REASONING_WITHHELD_REASONS: raised[1],
        a.CONFIRMED: True,
    }
    assert found.severity == "warning"
    assert [s.name for s in run_response_checks(req, Analysis(), resp, SITUATION)] == ["reasoning_withheld"]


def test_the_fix_names_each_reasons_own() -> None:
    kind = CATALOGUE["reasoning_withheld"]
    assert set(WITHHELD_FIXES) == {"model_mismatch", "organization_mismatch", "end_user_mismatch", "prefix_mismatch"}
    one = Signal("reasoning_withheld", {a.REASONING_WITHHELD_REASONS: ["end_user_mismatch"]})
    assert one.fix == WITHHELD_FIXES["end_user_mismatch"]
    assert "safety_identifier" in one.fix
    two = Signal("reasoning_withheld", {a.REASONING_WITHHELD_REASONS: ["model_mismatch", "prefix_mismatch"]})
    assert two.fix == f"{WITHHELD_FIXES['model_mismatch']}; {WITHHELD_FIXES['prefix_mismatch']}"
    unknown = Signal("reasoning_withheld", {a.REASONING_WITHHELD_REASONS: ["unknown"]})
    assert unknown.fix == kind.fix  # no reason known: the catalogue's own
    assert Signal("reasoning_withheld").fix == kind.fix


# -- end to end, against the emulator ----------------------------------------------------------------------------


@pytest.fixture
def emulated() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


def _two_turns(
    client: openai.OpenAI,
    reasoning: dict[str, Any] | None = None,
    first: dict[str, Any] | None = None,
    prefix: list[Any] | None = None,
    **second: Any,
) -> Any:
    """A code word chosen on turn 1 (kept only in its reasoning), asked for on turn 2: the whole history replayed,
    reasoning included (`store=False`, its payload kept). ``first`` and ``second``: what each turn sends besides;
    ``prefix``: what turn 2 replays before the reasoning instead of turn 1's message."""
    options: dict[str, Any] = {"store": False, "include": ENCRYPTED}
    if reasoning is not None:
        options["reasoning"] = reasoning
    opening: list[Any] = [{"role": "user", "content": "Choose a code word."}]
    chose = client.responses.create(model=REASONER, input=opening, **options, **(first or {}))
    history = [*(opening if prefix is None else prefix), *(item.model_dump(exclude_none=True) for item in chose.output)]
    history.append({"role": "user", "content": "What is the code word?"})
    return client.responses.create(model=REASONER, input=history, **{**options, **second})


def _reasoning_only(span: Any) -> dict[str, Any]:
    keys = (a.RESPONSE_REASONING_CONTEXT, a.REASONING_WITHHELD, a.REASONING_WITHHELD_REASONS, a.REASONING_CONTEXT)
    return {key: attrs(span)[key] for key in keys if key in attrs(span)}


def _withheld_points(telemetry: CapturedTelemetry) -> dict[str, int]:
    return {p.attributes[a.WITHHELD_REASON]: p.value for p in telemetry.metric_points(a.METRIC_WITHHELD_ITEMS)}


@pytest.mark.parametrize("dialect", [None, "gen_ai_latest_experimental"])
def test_an_earlier_turns_reasoning_is_withheld_at_the_turn_boundary_and_recorded_without_a_signal(
    emulated: Emulator, dialect: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if dialect:
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", dialect)
    with capture() as telemetry, emulated.client() as client:
        second = _two_turns(client)
    assert second.output_text == "code_word=unknown"  # under current_turn the model no longer sees it
    assert [(reason, id.startswith("rs_")) for id, reason in withheld(second)] == [("turn_boundary", True)]
    assert chat_signals(telemetry) == [(), ()]
    first_span, second_span = telemetry.chat_spans()
    assert _reasoning_only(first_span) == {a.RESPONSE_REASONING_CONTEXT: "current_turn"}
    assert _reasoning_only(second_span) == {
        a.RESPONSE_REASONING_CONTEXT: "current_turn",
        a.REASONING_WITHHELD: 1,
        a.REASONING_WITHHELD_REASONS: ("turn_boundary",),
    }
    assert _withheld_points(telemetry) == {"turn_boundary": 1}


def test_all_turns_renders_the_earlier_turn_back(emulated: Emulator) -> None:
    """The near miss: the request asks for `all_turns`: nothing withheld, the code word answered."""
    with capture() as telemetry, emulated.client() as client:
        second = _two_turns(client, ALL_TURNS)
    assert second.output_text.startswith("code_word=CW-")
    assert withheld(second) == []
    assert chat_signals(telemetry) == [(), ()]
    assert _reasoning_only(telemetry.chat_spans()[1]) == {
        a.RESPONSE_REASONING_CONTEXT: "all_turns",
        a.REASONING_CONTEXT: "all_turns",
    }
    assert _withheld_points(telemetry) == {}


def test_a_changed_safety_identifier_is_named_with_its_fix(emulated: Emulator) -> None:
    with capture() as telemetry, emulated.client() as client:
        changed = _two_turns(client, ALL_TURNS, {"safety_identifier": "user-a"}, safety_identifier="user-b")
        same = _two_turns(client, ALL_TURNS, {"safety_identifier": "user-a"}, safety_identifier="user-a")
        unnamed = _two_turns(client, ALL_TURNS, {"safety_identifier": "user-a"})  # names none: no mismatch
    assert changed.output_text == "code_word=unknown"
    assert withheld_reasons(changed) == ["end_user_mismatch"]
    assert same.output_text.startswith("code_word=CW-")
    assert unnamed.output_text.startswith("code_word=CW-")
    assert chat_signals(telemetry) == [(), ("reasoning_withheld",), (), (), (), ()]
    (event,) = signal_events(telemetry.chat_spans()[1], "reasoning_withheld")
    assert event[a.REASONING_WITHHELD_REASONS] == ("end_user_mismatch",)
    assert event[a.REASONING_WITHHELD] == 1
    assert event[a.CONFIRMED] is True
    exported = str([attrs(span) for span in telemetry.chat_spans()]) + str(event)
    assert "user-a" not in exported
    assert "user-b" not in exported
    assert _withheld_points(telemetry) == {"end_user_mismatch": 1}


def test_an_edited_prefix_has_the_reasoning_withheld(emulated: Emulator) -> None:
    with capture() as telemetry, emulated.client() as client:
        greeting = {"role": "user", "content": "Hello."}
        opening = {"role": "user", "content": "Choose a code word."}
        edited = _two_turns(client, ALL_TURNS, prefix=[greeting, opening])  # an item put before the reasoning
        same = _two_turns(client, ALL_TURNS, prefix=[opening])
        # Instructions sent as a message each turn are no prefix of it (as `instructions` is none).
        instructed = _two_turns(client, ALL_TURNS, prefix=[{"role": "developer", "content": "Be brief."}, opening])
    assert withheld_reasons(edited) == ["prefix_mismatch"]
    assert edited.output_text == "code_word=unknown"
    assert same.output_text.startswith("code_word=CW-")
    assert instructed.output_text.startswith("code_word=CW-")
    assert chat_signals(telemetry) == [(), ("reasoning_withheld",), (), (), (), ()]
    (event,) = signal_events(telemetry.chat_spans()[1], "reasoning_withheld")
    assert Signal("reasoning_withheld", event).fix == WITHHELD_FIXES["prefix_mismatch"]


def _said(role: str, text: str, compacted: str | None = None) -> Entry:
    return Entry({"type": "message", "role": role, "content": text}, compacted=compacted)


_ASKED, _ANSWERED, _NEXT = _said("user", "Choose a code word."), _said("assistant", "Chosen."), _said("user", "Next?")
_HELD = [_said("user", "Choose a code word.", "cmp_1"), _said("assistant", "Chosen.", "cmp_1")]
_COMPACTED = Entry({"type": "compaction", "id": "cmp_1"})
_REASONING = Entry({"type": "reasoning"})


# What the reasoning after a compaction followed when it was made (the response returned the compaction item, then
# the reasoning), and a replay of it; whether the API would read the replay's prefix as edited.
COMPACTION_PREFIXES = [
    ("the compaction replayed: its entries", [*_HELD, _REASONING], False),
    ("the compacting turn's message sent again after it (the AI SDK)", [*_HELD, _ASKED, _REASONING], False),
    ("near miss: a new message after it", [*_HELD, _NEXT, _REASONING], True),
    ("near miss: the compacted items sent without it", [_ASKED, _ANSWERED, _REASONING], True),
]


@pytest.mark.parametrize(("case", "replayed", "edited"), COMPACTION_PREFIXES, ids=[c[0] for c in COMPACTION_PREFIXES])
def test_a_compaction_item_starts_the_prefix_afresh(case: str, replayed: list[Entry], edited: bool) -> None:
    minted = prefix_digests([_ASKED, _ANSWERED, _COMPACTED, _REASONING])[-1]
    assert (prefix_digests(replayed)[-1] != minted) is edited


def test_reasoning_held_in_a_compaction_is_not_judged_by_its_prefix() -> None:
    """Reasoning a replayed compaction holds is beyond the client's reach: its prefix is never read as edited."""
    (rule,) = [rule for rule in replay_rules.RULES if rule.name == "prefix_mismatch"]
    assert rule.withholds is not None
    caller = Caller("org-a")
    made = Minted(REASONER, caller, prefix="0" * 16)
    for compacted, edited in ((None, True), ("cmp_1", False)):  # the near miss first: replayed by the client
        entry = Entry({"type": "reasoning"}, minted=made, compacted=compacted)
        reading = replay_rules.Reading(REASONER, caller, "all_turns", [entry], ["1" * 16], 0)
        assert rule.withholds(reading, 0, entry) is edited


# -- the report and the pytest kit -------------------------------------------------------------------------------


def test_the_report_shows_the_reasoning_withheld_and_the_context_used(emulated: Emulator) -> None:
    with capture() as telemetry, emulated.client() as client:
        _two_turns(client)  # turn_boundary
        _two_turns(client, ALL_TURNS, {"safety_identifier": "user-a"}, safety_identifier="user-b")
    root = parse(render(list(from_sdk(telemetry.spans()))))
    cells = [" ".join(td.text().split()) for td in root.find_all("td") if "context" in td.text()]
    assert any("withheld 1 turn_boundary" in cell and "context current_turn" in cell for cell in cells)
    assert any("withheld 1 end_user_mismatch" in cell and "context all_turns" in cell for cell in cells)


def test_the_kit_fails_on_withheld_reasoning_but_the_turn_boundary(emulated: Emulator) -> None:
    with capture() as by_design, emulated.client() as client:
        _two_turns(client)
    assert_no_reasoning_withheld(by_design)  # an earlier turn's reasoning, under current_turn: allowed
    with pytest.raises(AssertionError, match="turn_boundary"):
        assert_no_reasoning_withheld(by_design, allow=())
    with capture() as crossed, emulated.client() as client:
        _two_turns(client, ALL_TURNS, {"safety_identifier": "user-a"}, safety_identifier="user-b")
    with pytest.raises(AssertionError) as failed:
        assert_no_reasoning_withheld(crossed)
    message = str(failed.value)
    assert "1 reasoning item(s) withheld, reasons end_user_mismatch" in message
    assert WITHHELD_FIXES["end_user_mismatch"] in message
    with pytest.raises(AssertionError, match="no span to check"):
        assert_no_reasoning_withheld([])
