"""The hot path's shortcuts against the general code they stand for: each shortcut must give exactly what
the general path gives, on every input it takes. Pure core, no client: the end-to-end suites prove the wiring."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_responses._analysis.analysis import analyse
from otel_responses._analysis.checks import REQUEST_CHECKS, SINGLE_TURN_CHECKS, Situation, run_request_checks
from otel_responses._analysis.facts import SINGLE_TURN, ResponseFacts, request_facts, response_facts, with_stream_items
from otel_responses._analysis.lineage import Lineage
from otel_responses._calls.observer import as_fields, streamed_items
from otel_responses._calls.operations import remember_created
from otel_responses._items import item_meta
from otel_responses.config import settings_from
from otel_responses.ledger import InMemoryLedger

from .test_core import Ended

SETTINGS = settings_from({"hash_key": "hot-path-tests"})
FP = SETTINGS.fingerprinter
TOKEN = "gAAAAABo" + "Zx9_Kq-" * 40


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_a_string_input_has_the_facts_of_one_user_message(text: str) -> None:
    """`input="..."` skips the item scan: the facts equal those of the same text sent as one user message."""
    as_string = request_facts("chat", {"model": "m", "input": text}, SETTINGS)
    as_list = request_facts("chat", {"model": "m", "input": [{"role": "user", "content": text}]}, SETTINGS)
    assert as_string == as_list
    assert as_string.input_items[0].awaits is False
    assert as_string.input_items[0].shape is None


def _ledger_with_history() -> InMemoryLedger:
    """A ledger that knows a response with instructions, a pending call and an unstored reasoning item: what the
    checks of a continuing turn would compare a request with."""
    ledger = InMemoryLedger()
    req = request_facts("chat", {"model": "m", "input": "hello", "instructions": "be brief", "store": False}, SETTINGS)
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": TOKEN},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
    ]
    resp = response_facts(as_fields({"id": "resp_1", "model": "m", "status": "completed", "output": output}), SETTINGS)
    remember_created(Ended(ledger, req, analyse(req, ledger), SETTINGS, Lineage(1)), resp)
    return ledger


SINGLE_TURN_REQUESTS: list[dict[str, Any]] = [
    {"input": "hello"},
    {"input": "hi", "instructions": "be brief", "store": False},
    {"input": [{"role": "user", "content": "hello"}]},
    {"input": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]},
    {"input": [{"role": "developer", "content": "x"}, {"type": "message", "role": "user", "content": "hi"}]},
    {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}, {"type": "input_image"}]}]},
    {"input": [{"role": "system", "content": "only instructions"}]},
    {"input": []},
    {"input": "hi", "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "high"}},
    {"input": "hi", "store": False, "background": True},
    # Ids on the messages (the Codex CLI gives every message one): checked by shape and for duplicates (what they
    # raise under `raises`).
    {"input": [{"type": "message", "id": "msg_0199a6b2", "role": "user", "content": "hi"}]},
    {
        "input": [{"type": "message", "id": "review_rollout_user", "role": "user", "content": "hi"}],
        "raises": ["malformed_item_id"],
    },
    {
        "input": [
            {"role": "developer", "id": "msg_1", "content": "x"},
            {"role": "user", "id": "msg_1", "content": "y"},
        ],
        "raises": ["duplicate_item_id"],
    },
]


@pytest.mark.parametrize("zdr", [False, True])
@pytest.mark.parametrize("concurrent", [False, True])
@pytest.mark.parametrize("kwargs", SINGLE_TURN_REQUESTS)
def test_only_the_single_turn_checks_can_raise_on_a_single_turn_request(
    kwargs: dict[str, Any], zdr: bool, concurrent: bool
) -> None:
    sent = dict(kwargs)
    raises = sent.pop("raises", [])
    req = request_facts("chat", {"model": "m", **sent}, SETTINGS)
    assert req.state_mode == SINGLE_TURN
    analysis = analyse(req, _ledger_with_history())
    situation = Situation(zdr, concurrent)
    everything = [s for check in REQUEST_CHECKS if (s := check(req, analysis, situation)) is not None]
    assert run_request_checks(req, analysis, situation) == everything
    assert [s.name for s in everything] == raises + (["concurrent_branch"] if concurrent else [])
    assert set(SINGLE_TURN_CHECKS) <= set(REQUEST_CHECKS)


def test_a_request_that_continues_runs_the_whole_catalogue() -> None:
    """The shortcut is for single-turn requests only: a chained turn that drops instructions still raises."""
    req = request_facts("chat", {"model": "m", "input": "next", "previous_response_id": "resp_1"}, SETTINGS)
    analysis = analyse(req, _ledger_with_history())
    names = {s.name for s in run_request_checks(req, analysis, Situation(False, False))}
    assert {"instructions_dropped", "unstored_parent", "missing_tool_output"} <= names


def test_tool_pairing_is_skipped_only_when_there_is_nothing_to_pair() -> None:
    """No tool item and no parent: empty pairing, as the full pass gives; a parent's pending call still counts."""
    ledger = _ledger_with_history()
    alone = analyse(request_facts("chat", {"model": "m", "input": "hi"}, SETTINGS), ledger)
    assert dataclasses.astuple(alone.tools) == (False, [], [], [], [], False, 0, set(), {})
    chained = analyse(
        request_facts("chat", {"model": "m", "input": "x", "previous_response_id": "resp_1"}, SETTINGS), ledger
    )
    assert chained.tools.present
    assert chained.tools.missing == ["call_1"]


STREAMED: list[dict[str, Any]] = [
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": TOKEN},
    {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": TOKEN + "AA"},
]


def test_streamed_items_stand_for_a_terminal_response_without_output() -> None:
    """Read at the end, the stream's items are the output when the terminal response lacks it: as if read at once."""
    bare = response_facts(as_fields({"id": "resp_1", "status": "completed", "output": []}), SETTINGS)
    resp = with_stream_items(bare, streamed_items(list(STREAMED), bare, FP))
    eager = with_stream_items(bare, tuple(item_meta(item, FP) for item in STREAMED))
    assert resp == eager
    assert [m.type for m in resp.output_items] == ["reasoning", "message", "compaction"]
    assert resp.encrypted_output_count == 1
    assert resp.compaction


def test_streamed_items_give_the_copies_of_opaque_payloads_only() -> None:
    """With the output in the terminal response, only the opaque payloads' other copies are read from the stream,
    and the result equals reading every streamed item."""
    copy = {**STREAMED[0], "encrypted_content": TOKEN[::-1]}  # a fresh encryption: same length, other bytes
    longer = {**STREAMED[2], "encrypted_content": TOKEN + "AAAA"}
    terminal = response_facts(as_fields({"id": "resp_1", "status": "completed", "output": STREAMED}), SETTINGS)
    streamed = [copy, STREAMED[1], longer]
    read = streamed_items(streamed, terminal, FP)
    assert [m.type for m in read] == ["reasoning", "compaction"]
    assert with_stream_items(terminal, read) == with_stream_items(terminal, tuple(item_meta(i, FP) for i in streamed))
    assert with_stream_items(terminal, read).copies == ((2, item_meta(longer, FP).shape),)


def test_streamed_items_of_sdk_models_are_read_like_dicts() -> None:
    """The SDK's own event items (pydantic models) take the same path as dicts."""
    from openai.types.responses import ResponseReasoningItem

    model = ResponseReasoningItem.model_construct(type="reasoning", id="rs_1", summary=[], encrypted_content=TOKEN)
    bare = ResponseFacts.empty()
    assert streamed_items([model], bare, FP) == (item_meta(STREAMED[0], FP),)
    terminal = response_facts(as_fields({"id": "r", "output": [STREAMED[1]]}), SETTINGS)
    assert streamed_items([model, STREAMED[1]], terminal, FP) == (item_meta(STREAMED[0], FP),)
