"""The pure core on its own, table-driven from item shapes: `items` (what an item is), `facts` and `analysis`
(a request against a ledger) and `checks` (which signal that gives). No client, no server, no telemetry: each row
is the shape the real API or a real client library sends, and the signals the catalogue's definitions give it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_responses._analysis.analysis import Analysis, analyse
from otel_responses._analysis.checks import Situation, accepted_by_api, confirmed_by_api, run_request_checks
from otel_responses._analysis.facts import (
    RequestFacts,
    ResponseFacts,
    conversation_facts,
    request_facts,
    response_facts,
    target_facts,
    with_stream_items,
)
from otel_responses._analysis.held import Held, held_after
from otel_responses._analysis.lineage import Lineage, lineage_of
from otel_responses._calls.operations import (
    OPERATIONS,
    remember_conversation_items,
    remember_created,
    remember_deleted,
    remember_fetched,
)
from otel_responses._items import (
    MAX_NAME,
    SHAPE_FOREIGN,
    SHAPE_STANDARD,
    SHAPE_URLSAFE,
    ItemMeta,
    item_meta,
    payload_shape,
    reshaped,
)
from otel_responses.config import Settings, settings_from
from otel_responses.ledger import MAX_GIVEN_OUTPUTS, MAX_HELD_CALLS, MAX_OUTPUT_ITEMS, Entry, InMemoryLedger
from otel_responses.signals import CATALOGUE, ERROR, SHARED_FACT, Signal

from ..ledger_scenarios import user

SETTINGS = settings_from({"hash_key": "core-tests"})
FP = SETTINGS.fingerprinter
TOKEN = "gAAAAABo" + "Zx9_Kq-" * 40  # a Fernet-like url-safe base64 payload, as the real API returns


def meta(item: dict[str, Any], sent: bool = True) -> ItemMeta:
    return item_meta(item, FP, sent=sent)


# -- items: what each item type is ------------------------------------------------------------------------------

# (item, call_id the pairing uses, awaits an output from the app)
PAIRING: list[tuple[dict[str, Any], str | None, bool]] = [
    ({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}, "c1", True),
    ({"type": "function_call", "call_id": "c1", "status": "incomplete"}, "c1", False),
    ({"type": "function_call_output", "call_id": "c1", "output": "x"}, "c1", False),
    ({"type": "custom_tool_call", "call_id": "c2", "input": "x"}, "c2", True),
    ({"type": "custom_tool_call_output", "call_id": "c2", "output": "x"}, "c2", False),
    ({"type": "computer_call", "call_id": "c3", "action": {"type": "click"}}, "c3", True),
    ({"type": "computer_call_output", "call_id": "c3"}, "c3", False),
    ({"type": "shell_call", "call_id": "c4", "action": {"commands": ["ls"]}}, "c4", True),
    ({"type": "shell_call_output", "call_id": "c4", "output": []}, "c4", False),
    ({"type": "apply_patch_call", "call_id": "c5", "operation": {"type": "delete_file"}}, "c5", True),
    ({"type": "apply_patch_call_output", "call_id": "c5", "status": "completed"}, "c5", False),
    ({"type": "local_shell_call", "id": "lsc_1", "call_id": "c6", "action": {"type": "exec"}}, "c6", True),
    ({"type": "local_shell_call_output", "id": "c6", "output": "{}"}, "c6", False),  # paired by its id
    ({"type": "tool_search_call", "call_id": "c7", "execution": "client", "arguments": {}}, "c7", True),
    ({"type": "tool_search_call", "call_id": "c8", "execution": "server", "arguments": {}}, "c8", False),
    ({"type": "tool_search_output", "call_id": "c8", "execution": "server", "tools": []}, "c8", False),
    ({"type": "program", "id": "pg_1", "call_id": "c9", "code": "x", "fingerprint": TOKEN}, "c9", False),
    ({"type": "program_output", "call_id": "c9", "result": "x", "status": "completed"}, "c9", False),
    ({"type": "multi_agent_call", "call_id": "c10", "action": "spawn_agent", "arguments": "{}"}, "c10", False),
    ({"type": "multi_agent_call_output", "call_id": "c10", "action": "spawn_agent", "output": []}, "c10", False),
    ({"type": "mcp_approval_request", "id": "mcpr_1", "name": "x", "server_label": "s"}, "mcpr_1", False),
    ({"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}, "mcpr_1", False),
    ({"type": "mcp_call", "id": "mcp_1", "name": "x", "server_label": "s", "arguments": "{}"}, None, False),
    ({"type": "web_search_call", "id": "ws_1", "status": "completed"}, None, False),
    ({"type": "image_generation_call", "id": "ig_1", "result": "aGVsbG8="}, None, False),
    ({"type": "brand_new_call", "call_id": "c11"}, "c11", False),  # unknown: never a call to answer
]


@pytest.mark.parametrize(("item", "call_id", "awaits"), PAIRING, ids=lambda v: v["type"] if isinstance(v, dict) else "")
def test_every_item_type_pairs_by_the_apis_rule(item: dict[str, Any], call_id: str | None, awaits: bool) -> None:
    got = meta(item)
    assert got.type == item["type"]
    assert got.call_id == call_id
    assert got.awaits is awaits


@pytest.mark.parametrize(
    ("item", "encrypted"),
    [
        ({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": TOKEN}, True),
        ({"type": "reasoning", "id": "rs_1", "summary": []}, False),
        ({"type": "compaction", "encrypted_content": TOKEN}, True),
        ({"type": "program", "id": "pg_1", "call_id": "c", "code": "x", "fingerprint": TOKEN}, True),
    ],
)
def test_opaque_payloads_keep_only_their_shape(item: dict[str, Any], encrypted: bool) -> None:
    got = meta(item)
    assert got.encrypted is encrypted
    assert got.shape == (payload_shape(TOKEN) if encrypted else None)
    assert got.fingerprint is None  # no hash of an opaque payload is kept
    assert TOKEN not in repr(got)


def test_payload_shape_is_length_and_alphabet() -> None:
    assert payload_shape("abc") >> 3 == 3
    assert payload_shape("ab-_") & 7 == SHAPE_URLSAFE
    assert payload_shape("ab+/") & 7 == SHAPE_STANDARD
    assert payload_shape('ab"\\') & 7 == SHAPE_FOREIGN


@pytest.mark.parametrize(
    ("sent", "returned", "changed"),
    [
        ("Zx9_Kq-a", "Ab3-Yy_z", False),  # a fresh encryption: other bytes, same length and alphabet
        ("Zx9aKqaa", "Ab3-Yy_z", False),  # no alphabet-specific character by chance
        ("Zx9_Kq-", "Ab3-Yy_z", True),  # truncated
        ("Zx9+Kq/a", "Ab3-Yy_z", True),  # re-encoded as standard base64
        ("Zx9_Kq-\\", "Ab3-Yy_z", True),  # escaped
        ("Zx9+Kq/a", "Ab3+Yy/z", False),
        ("Zx9_Kq-a", "Ab3+Yy/z", True),
        ("Zx9.Kq.a", "Ab3.Yy.z", False),  # not base64 at all (a JWT-like token): only the length is judged
    ],
)
def test_reshaped_tells_tampering_from_a_fresh_encryption(sent: str, returned: str, changed: bool) -> None:
    assert reshaped(payload_shape(sent), payload_shape(returned)) is changed


def test_message_text_is_fingerprinted_where_a_check_compares_it() -> None:
    assert meta(user("hi")).fingerprint == meta(user("hi")).fingerprint is not None
    assert meta({"role": "developer", "content": "hi"}).fingerprint is not None
    assert meta(user("hi"), sent=False).fingerprint == meta(user("hi")).fingerprint  # kept by responses.compact
    assert meta({"role": "system", "content": "hi"}, sent=False).fingerprint is None
    assert meta({"role": "assistant", "content": "hi", "id": "msg_1"}).fingerprint is None  # known by its id


# -- a request against a ledger ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Ended:
    """What a call's end tells the ledger from (``operations.CallState``), without a call around it."""

    ledger: InMemoryLedger
    req: RequestFacts
    analysis: Analysis
    settings: Settings = SETTINGS
    lineage: Lineage = dataclasses.field(default_factory=Lineage)


def ledger_with(*responses: tuple[str, list[dict[str, Any]], dict[str, Any]]) -> InMemoryLedger:
    """A ledger that saw each (response id, output items, request kwargs) created, in order."""
    ledger = InMemoryLedger()
    for response_id, output, kwargs in responses:
        req = request_facts("chat", {"model": "m", **kwargs}, SETTINGS)
        resp = response_facts(_Response(response_id, output, kwargs.get("body_store")), SETTINGS)
        remember_created(Ended(ledger, req, analyse(req, ledger)), resp)
    return ledger


class _Response:
    def __init__(
        self, response_id: str, output: list[dict[str, Any]], store: bool | None = None, status: str = "completed"
    ) -> None:
        self.id, self.output, self.status = response_id, output, status
        self.__pydantic_extra__ = {"store": store} if store is not None else {}


def signals(ledger: InMemoryLedger, **kwargs: Any) -> set[str]:
    req = request_facts("chat", {"model": "m", **kwargs}, SETTINGS)
    return {s.name for s in run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False))}


CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"}
STRIPPED_CALL = {k: v for k, v in CALL.items() if k != "id"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "42"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": TOKEN}
ANSWER = {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
# Habits of clients and compatible servers with ids (see the README's known client and server behaviours):
LOCAL_ANSWER = {**ANSWER, "id": "msg_local_1"}  # a streamed answer kept under the client's own id
OTHER_LOCAL_ANSWER = {**LOCAL_ANSWER, "content": [{"type": "output_text", "text": "not what was said"}]}
TOKEN_2 = "gAAAAABo" + "Yy8-Lm_" * 25  # another payload, of another length
REPEATED = {**REASONING, "encrypted_content": TOKEN_2}  # a second reasoning item under the same id `rs_1`
REWRITTEN_CALL = {"type": "function_call", "call_id": "fc_1", "name": "f", "arguments": "{}"}  # call_id := item id
REWRITTEN_OUTPUT = {"type": "function_call_output", "call_id": "fc_1", "output": "42"}
SYSTEM = {"role": "system", "content": "Be brief."}
SYSTEM_EMPTY = {"role": "system", "content": ""}  # what a prompt middleware sends after the first turn

ROWS: list[tuple[str, list[Any], dict[str, Any], set[str]]] = [
    # (name, outputs of resp_1 (asked with `input=[user("q")]`), the next request, expected signals)
    (
        "replay with the call's id stripped is whole, but its reasoning keeps its id: the API misses the call after it",
        [REASONING, CALL],
        {"input": [user("q"), REASONING, STRIPPED_CALL, OUTPUT]},
        {"reasoning_pair_broken"},
    ),
    (
        "near miss: replay with the call's id stripped, of an unstored response (nothing pairs by id)",
        [REASONING, CALL],
        {"input": [user("q"), REASONING, STRIPPED_CALL, OUTPUT], "parent_store": False},
        set(),
    ),
    (
        "stripped call without its reasoning",
        [REASONING, CALL],
        {"input": [user("q"), STRIPPED_CALL, OUTPUT]},
        {"reasoning_dropped"},
    ),
    ("call with an unknown id, known call_id", [CALL], {"input": [user("q"), {**CALL, "id": "fc_new"}, OUTPUT]}, set()),
    (
        "reasoning replayed without its id",
        [REASONING, ANSWER],
        {"input": [user("q"), {k: v for k, v in REASONING.items() if k != "id"}, ANSWER, user("n")]},
        set(),
    ),
    (
        "reasoning without id, truncated",
        [REASONING, ANSWER],
        {"input": [user("q"), {**REASONING, "id": None, "encrypted_content": TOKEN[:-4]}, ANSWER, user("n")]},
        {"encrypted_content_modified"},
    ),
    (
        "output without its call in a replay",
        [REASONING, CALL],
        {"input": [user("q"), REASONING, OUTPUT]},
        {"replay_incomplete", "orphan_tool_output", "reasoning_pair_broken"},
    ),
    ("chained output answers the parent's call", [CALL], {"previous_response_id": "resp_1", "input": [OUTPUT]}, set()),
    (
        "chained turn leaves the call unanswered",
        [CALL],
        {"previous_response_id": "resp_1", "input": [user("next")]},
        {"missing_tool_output"},
    ),
    (
        "hosted shell answered in the same response",
        [{"type": "shell_call", "call_id": "s1"}, {"type": "shell_call_output", "call_id": "s1"}],
        {"previous_response_id": "resp_1", "input": [user("next")]},
        set(),
    ),
    (
        "server tool search needs no answer",
        [{"type": "tool_search_call", "call_id": "t1", "execution": "server"}],
        {"previous_response_id": "resp_1", "input": [user("next")]},
        set(),
    ),
    (
        "client tool search answered by a function_call_output",
        [{"type": "tool_search_call", "call_id": "t2", "execution": "client"}],
        {
            "previous_response_id": "resp_1",
            "input": [{"type": "function_call_output", "call_id": "t2", "output": "[]"}],
        },
        set(),
    ),
    (
        "client tool search left unanswered",
        [{"type": "tool_search_call", "call_id": "t2", "execution": "client"}],
        {"previous_response_id": "resp_1", "input": [user("next")]},
        {"missing_tool_output"},
    ),
    (
        "local shell output pairs by its id",
        [{"type": "local_shell_call", "id": "lsc_1", "call_id": "ls1"}],
        {"previous_response_id": "resp_1", "input": [{"type": "local_shell_call_output", "id": "ls1", "output": "{}"}]},
        set(),
    ),
    (
        "mcp approval may go unanswered",
        [{"type": "mcp_approval_request", "id": "mcpr_1", "name": "x", "server_label": "s"}],
        {"previous_response_id": "resp_1", "input": [user("next")]},
        set(),
    ),
    (
        "mcp approval response pairs by request id",
        [{"type": "mcp_approval_request", "id": "mcpr_1", "name": "x", "server_label": "s"}],
        {
            "previous_response_id": "resp_1",
            "input": [{"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}],
        },
        set(),
    ),
    (
        "program runs on the server",
        [{"type": "program", "id": "pg_1", "call_id": "p1", "fingerprint": TOKEN}],
        {"previous_response_id": "resp_1", "input": [user("next")]},
        set(),
    ),
    (
        "an unknown item type is never an error",
        [{"type": "brand_new_call", "call_id": "n1"}],
        {"previous_response_id": "resp_1", "input": [{"type": "brand_new_output", "call_id": "n2"}]},
        set(),
    ),
    (
        "output answering an unknown-type item of the input",
        [],
        {
            "input": [
                user("q"),
                {"type": "brand_new_call", "call_id": "n1"},
                {"type": "function_call_output", "call_id": "n1", "output": "x"},
            ]
        },
        set(),
    ),
    (
        "replay without instructions the turn had",
        [ANSWER],
        {"input": [user("q"), ANSWER, user("again")], "parent_instructions": "be brief"},
        {"instructions_dropped"},
    ),
    (
        "replay with a developer message instead",
        [ANSWER],
        {
            "input": [{"role": "developer", "content": "be brief"}, user("q"), ANSWER, user("again")],
            "parent_instructions": "be brief",
        },
        set(),
    ),
    (
        "library sending each message twice",
        [ANSWER],
        {"input": [user("q"), ANSWER, user("again"), user("again")], "first_input": [user("q"), user("q")]},
        set(),
    ),
    (
        "history really cut",
        [ANSWER],
        {"input": [ANSWER, user("again")], "first_input": [user("a"), user("q")]},
        {"history_truncated"},
    ),
    (
        "chain re-sending the last turn",
        [ANSWER],
        {"previous_response_id": "resp_1", "input": [user("q"), ANSWER, user("next")]},
        {"context_duplicated"},
    ),
    (
        "chain re-sending a progress update without its phase",
        [{**ANSWER, "phase": "commentary"}, CALL],
        {"previous_response_id": "resp_1", "input": [user("q"), {"role": "assistant", "content": "ok"}, OUTPUT]},
        {"context_duplicated", "phase_dropped"},
    ),
    (
        "chain re-sending one output item",
        [REASONING, ANSWER],
        {"previous_response_id": "resp_1", "input": [REASONING, user("next")]},
        {"context_duplicated"},
    ),
    (
        "chain with the same words as last turn",
        [ANSWER],
        {"previous_response_id": "resp_1", "input": [user("q")]},
        set(),
    ),
    # An assistant message under an id the API never returned is known by its text, as one without an id is.
    (
        "a streamed answer replayed under the client's own id (unstored: nothing pairs by id)",
        [REASONING, ANSWER],
        {"input": [user("q"), REASONING, LOCAL_ANSWER, user("n")], "parent_store": False},
        set(),
    ),
    (
        "the same, stored: the reasoning keeps its server id, and the API misses the message after it",
        [REASONING, ANSWER],
        {"input": [user("q"), REASONING, LOCAL_ANSWER, user("n")]},
        {"reasoning_pair_broken"},
    ),
    (
        "another text under the client's own id",
        [REASONING, ANSWER],
        {"input": [user("q"), REASONING, OTHER_LOCAL_ANSWER, user("n")], "parent_store": False},
        {"replay_incomplete"},
    ),
    (
        "the client's own id after a tool round trip",
        [REASONING, CALL, ANSWER],
        {"input": [user("q"), REASONING, CALL, OUTPUT, LOCAL_ANSWER, user("n")]},
        set(),
    ),
    (
        "the client's own id, its reasoning dropped: the text links as a text without an id does",
        [REASONING, ANSWER],
        {"input": [user("q"), LOCAL_ANSWER, user("n")]},
        {"reasoning_dropped"},
    ),
    (
        "near miss: the same without an id",
        [REASONING, ANSWER],
        {"input": [user("q"), {"role": "assistant", "content": "ok"}, user("n")]},
        {"reasoning_dropped"},
    ),
    (
        "near miss: the client's own id on a text no response of this conversation said",
        [REASONING, ANSWER],
        {"input": [user("q"), OTHER_LOCAL_ANSWER, user("n")]},
        set(),
    ),
    (
        "near miss: a call under an unknown id stays a fallback, linking nothing",
        [REASONING, CALL],
        {"input": [user("q"), {**CALL, "id": "fc_renumbered"}, OUTPUT]},
        set(),
    ),
    # One id at two positions of a response (a compatible server's habit): consumed in order, judged against both.
    (
        "a repeated reasoning id replayed byte for byte",
        [REASONING, REPEATED, ANSWER],
        {"input": [user("q"), REASONING, REPEATED, ANSWER, user("n")]},
        set(),
    ),
    (
        "a repeated reasoning id replayed in the other order",
        [REASONING, REPEATED, ANSWER],
        {"input": [user("q"), REPEATED, REASONING, ANSWER, user("n")]},
        set(),
    ),
    (
        "one of a repeated reasoning id dropped",
        [REASONING, REPEATED, ANSWER],
        {"input": [user("q"), REASONING, ANSWER, user("n")]},
        {"reasoning_dropped"},
    ),
    (
        "one of a repeated reasoning id truncated",
        [REASONING, REPEATED, ANSWER],
        {"input": [user("q"), REASONING, {**REPEATED, "encrypted_content": TOKEN_2[:-4]}, ANSWER, user("n")]},
        {"encrypted_content_modified"},
    ),
    # A call_id rewritten on both sides (to the item's id), the item id dropped: the call found by type and position.
    (
        "a call id rewritten on the call and its output",
        [REASONING, CALL],
        {"input": [user("q"), REASONING, REWRITTEN_CALL, REWRITTEN_OUTPUT], "parent_store": False},
        set(),
    ),
    (
        "a rewritten call id, the call itself dropped",
        [REASONING, CALL],
        {"input": [user("q"), REASONING, REWRITTEN_OUTPUT], "parent_store": False},
        {"replay_incomplete", "orphan_tool_output"},
    ),
    # A system or developer message the replayed response was given, dropped or emptied: history lost; changed: not.
    (
        "a system message emptied on replay",
        [ANSWER],
        {"input": [SYSTEM_EMPTY, user("q"), ANSWER, user("n")], "first_input": [SYSTEM, user("q")]},
        {"history_truncated"},
    ),
    (
        "a system message dropped on replay",
        [ANSWER],
        {"input": [user("q"), ANSWER, user("n")], "first_input": [SYSTEM, user("q")]},
        {"history_truncated"},
    ),
    (
        "a system message replaced by another user message",
        [ANSWER],
        {"input": [user("earlier"), user("q"), ANSWER, user("n")], "first_input": [SYSTEM, user("q")]},
        {"history_truncated"},
    ),
    (
        "a developer message emptied on replay",
        [ANSWER],
        {
            "input": [{"role": "developer", "content": [{"type": "input_text", "text": ""}]}, user("q"), ANSWER],
            "first_input": [{"role": "developer", "content": "Be brief."}, user("q")],
        },
        {"history_truncated"},
    ),
    (
        "near miss: the same system message re-sent",
        [ANSWER],
        {"input": [SYSTEM, user("q"), ANSWER, user("n")], "first_input": [SYSTEM, user("q")]},
        set(),
    ),
    (
        "near miss: a new system message beside the old one",
        [ANSWER],
        {
            "input": [SYSTEM, {"role": "developer", "content": "Use metric units."}, user("q"), ANSWER, user("n")],
            "first_input": [SYSTEM, user("q")],
        },
        set(),
    ),
    (
        "near miss: a system message whose text changes every turn (a date in it)",
        [ANSWER],
        {
            "input": [{"role": "system", "content": "Today is 2026-12-02."}, user("q"), ANSWER, user("n")],
            "first_input": [{"role": "system", "content": "Today is 2026-12-01."}, user("q")],
        },
        set(),
    ),
    (
        "near miss: an empty system message the response was given too",
        [ANSWER],
        {"input": [SYSTEM_EMPTY, user("q"), ANSWER, user("n")], "first_input": [SYSTEM_EMPTY, user("q")]},
        set(),
    ),
    (
        "an empty system message is no instructions",
        [ANSWER],
        {"input": [SYSTEM_EMPTY, user("q"), ANSWER, user("again")], "parent_instructions": "be brief"},
        {"instructions_dropped"},
    ),
    (
        "chain re-sending the system message each turn",
        [ANSWER],
        {
            "previous_response_id": "resp_1",
            "input": [{"role": "system", "content": "s"}, user("next")],
            "first_input": [{"role": "system", "content": "s"}, user("q")],
        },
        set(),
    ),
]


@pytest.mark.parametrize(("name", "outputs", "request_kwargs", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_request_against_the_ledger(
    name: str, outputs: list[Any], request_kwargs: dict[str, Any], expected: set[str]
) -> None:
    kwargs = dict(request_kwargs)
    first: dict[str, Any] = {"input": kwargs.pop("first_input", [user("q")])}
    if "parent_instructions" in kwargs:
        first["instructions"] = kwargs.pop("parent_instructions")
    if "parent_store" in kwargs:
        first["store"] = kwargs.pop("parent_store")
    ledger = ledger_with(("resp_1", outputs, first))
    assert signals(ledger, **kwargs) == expected


def test_no_error_signal_from_an_unknown_item_type_anywhere() -> None:
    unknown = [{"type": "brand_new_item", "call_id": "x1", "id": "bn_1"}, {"type": "brand_new_output", "call_id": "x2"}]
    ledger = ledger_with(("resp_1", unknown, {"input": [user("q")]}))
    for kwargs in (
        {"input": [user("q"), *unknown, user("next")]},
        {"previous_response_id": "resp_1", "input": unknown},
        {"input": unknown},
    ):
        assert not {n for n in signals(ledger, **kwargs) if CATALOGUE[n].severity == ERROR}


def test_sequential_turns_with_stripped_ids_link_to_the_latest_response() -> None:
    """pydantic-ai strips ids from replayed calls: turn 3 must be linked to turn 2's response, not turn 1's."""
    call_2 = {**CALL, "id": "fc_2", "call_id": "call_2"}
    ledger = ledger_with(
        ("resp_1", [CALL], {"input": [user("q")]}),
        ("resp_2", [call_2], {"input": [user("q"), STRIPPED_CALL, OUTPUT]}),
    )
    req = request_facts(
        "chat",
        {
            "model": "m",
            "input": [user("q"), STRIPPED_CALL, OUTPUT, {**call_2, "id": None}, {**OUTPUT, "call_id": "call_2"}],
        },
        SETTINGS,
    )
    an = analyse(req, ledger)
    assert an.parent is not None
    assert an.parent.response_id == "resp_2"
    assert not run_request_checks(req, an, Situation(zdr=False, concurrent=False))


def test_stream_copies_of_a_payload_are_all_accepted() -> None:
    """A copy of another shape seen in the stream (`output_item.done`) counts as returned too."""
    final = response_facts(_Response("resp_1", [REASONING, ANSWER]), SETTINGS)
    other = "x" * 10
    streamed = with_stream_items(final, (meta({**REASONING, "encrypted_content": other}, sent=False),))
    assert streamed.copies == ((0, payload_shape(other)),)
    ledger = InMemoryLedger()
    req = request_facts("chat", {"model": "m", "input": [user("q")]}, SETTINGS)
    remember_created(Ended(ledger, req, analyse(req, ledger)), streamed)
    for payload in (TOKEN, other):
        sent = {**REASONING, "encrypted_content": payload}
        assert signals(ledger, input=[user("q"), sent, ANSWER, user("n")]) == set()
    assert signals(ledger, input=[user("q"), {**REASONING, "encrypted_content": "y" * 11}, ANSWER, user("n")]) == {
        "encrypted_content_modified"
    }


def test_the_bodys_store_is_the_effective_one() -> None:
    ledger = ledger_with(("resp_1", [ANSWER], {"input": [user("q")], "body_store": False}))
    entry = ledger.get("resp_1")
    assert entry is not None
    assert entry.store is False
    assert signals(ledger, previous_response_id="resp_1", input=[user("next")]) == {"unstored_parent"}


def test_response_facts_read_an_undeclared_store_without_raising() -> None:
    assert response_facts(_Response("r", [], False), SETTINGS).store is False
    assert response_facts(_Response("r", []), SETTINGS).store is None
    assert response_facts({"id": "r", "store": True}, SETTINGS).store is True
    assert ResponseFacts.empty().store is None


def test_entry_pending_calls_skip_what_the_response_answered_itself() -> None:
    outputs = tuple(
        meta(i, sent=False)
        for i in (
            {"type": "shell_call", "call_id": "s1"},
            {"type": "shell_call_output", "call_id": "s1"},
            {"type": "function_call", "call_id": "f1"},
        )
    )
    entry = Entry("r", 1, True, None, None, outputs, 0, 0)
    assert entry.pending_calls == ("f1",)


def test_messages_without_text_count_but_leave_no_fingerprint() -> None:
    """An image-only message is a distinct message, and nothing negative reaches the (shared) ledger's fields."""
    image = {"role": "user", "content": [{"type": "input_image", "image_url": "https://example.invalid/a.png"}]}
    req = request_facts("chat", {"model": "m", "input": [image, image, user("q")]}, SETTINGS)
    assert req.app_messages == 3
    assert req.last_messages == (meta(user("q")).fingerprint,)


# -- what strict mode may refuse --------------------------------------------------------------------------------


def shared_copy(ledger: InMemoryLedger) -> InMemoryLedger:
    """The same entries, as a process that read them from a shared store holds them."""
    other = InMemoryLedger()
    for response_id in list(ledger._entries):
        entry = ledger.get(response_id)
        assert entry is not None
        other.cache(dataclasses.replace(entry, shared=True))
    return other


# (case, parent's output and request, this request, signal expected, refusable when the parent was recorded here)
REFUSALS: list[tuple[str, list[Any], dict[str, Any], dict[str, Any], str, bool]] = [
    ("unstored_parent", [ANSWER], {"store": False}, {"previous_response_id": "resp_1"}, "unstored_parent", True),
    ("pending_call", [CALL], {}, {"previous_response_id": "resp_1", "input": "next"}, "missing_tool_output", True),
    (
        "orphan_output",
        [ANSWER],
        {},
        {"previous_response_id": "resp_1", "input": [{**OUTPUT, "call_id": "call_9"}]},
        "orphan_tool_output",
        True,
    ),
    (
        "reference_to_a_call",
        [CALL],
        {"store": True},
        {"input": [user("q"), {"type": "item_reference", "id": "fc_1"}, user("next")]},
        "missing_tool_output",
        True,
    ),
    (
        "conflict",
        [ANSWER],
        {},
        {"previous_response_id": "resp_1", "conversation": "conv_1"},
        "state_mode_conflict",
        True,
    ),
    (
        "before_call",
        [ANSWER],
        {},
        {"input": [user("q"), OUTPUT, CALL]},
        "tool_output_before_call",
        True,
    ),
]
# What the request itself proves stays refusable whatever the ledger holds.
REQUEST_ONLY = {"state_mode_conflict", "tool_output_before_call"}


@pytest.mark.parametrize(
    ("case", "outputs", "first", "kwargs", "name", "local"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_strict_mode_refuses_on_the_request_and_this_processs_records_only(
    case: str, outputs: list[Any], first: dict[str, Any], kwargs: dict[str, Any], name: str, local: bool
) -> None:
    ledger = ledger_with(("resp_1", outputs, {"input": [user("q")], **first}))
    for shared, target in ((False, ledger), (True, shared_copy(ledger))):
        req = request_facts("chat", {"model": "m", **kwargs}, SETTINGS)
        raised = run_request_checks(req, analyse(req, target), Situation(zdr=False, concurrent=False))
        (signal,) = [s for s in raised if s.name == name]
        expected = local if not shared else name in REQUEST_ONLY
        assert signal.refusable is expected, (shared, signal)
        assert (signal.detail.get(SHARED_FACT) is True) is (shared and name not in REQUEST_ONLY)


def test_zdr_makes_an_unstored_parent_refusable_whatever_the_ledger_holds() -> None:
    ledger = shared_copy(ledger_with(("resp_1", [ANSWER], {"input": [user("q")], "store": False})))
    req = request_facts("chat", {"model": "m", "previous_response_id": "resp_1"}, SETTINGS)
    (signal,) = [
        s
        for s in run_request_checks(req, analyse(req, ledger), Situation(zdr=True, concurrent=False))
        if s.name == "unstored_parent"
    ]
    assert signal.refusable


def test_overlong_item_fields_are_cut_alike_on_both_sides() -> None:
    """The ledger keeps item types, ids and call ids for as long as it keeps a response: a megabyte one is cut, the
    same way in an output recorded and in its replay, so the two still match."""
    huge = "x" * 1_000_000
    item = {"type": "function_call", "id": "fc_" + huge, "call_id": "call_" + huge, "name": "f", "arguments": "{}"}
    returned, sent = meta(item, sent=False), meta(item)
    assert returned == sent
    assert all(len(value) <= MAX_NAME for value in (returned.type, returned.id, returned.call_id) if value)
    odd = meta({"type": huge, "role": huge, "phase": huge})
    assert len(odd.type) == MAX_NAME
    assert odd.role is not None
    assert len(odd.role) == MAX_NAME


def conversation_ledger(outputs: list[Any]) -> InMemoryLedger:
    """A conversation created here (so its state is known from its start), and one response written to it."""
    ledger = InMemoryLedger()
    created = conversation_facts("create_conversation", None, ())
    remember_conversation_items(Ended(ledger, created, analyse(created, ledger)), _conversation_made("conv_1"))
    req = request_facts("chat", {"model": "m", "input": [user("q")], "conversation": "conv_1"}, SETTINGS)
    remember_created(Ended(ledger, req, analyse(req, ledger)), response_facts(_Response("resp_1", outputs), SETTINGS))
    return ledger


def _conversation_made(conversation_id: str) -> ResponseFacts:
    return dataclasses.replace(ResponseFacts.empty(), conversation_id=conversation_id)


# (case, the conversation's latest outputs, this request's input, signal, settled)
SETTLED: list[tuple[str, list[Any], Any, str, bool]] = [
    ("pending_in_the_latest_turn", [CALL], "next", "missing_tool_output", False),
    ("unanswered_call_in_the_input", [ANSWER], [{**CALL, "id": "fc_9", "call_id": "call_9"}],
     "missing_tool_output", True),
    ("output_for_no_known_call", [ANSWER], [{**OUTPUT, "call_id": "call_9"}], "orphan_tool_output", False),
]  # fmt: skip


@pytest.mark.parametrize(("case", "outputs", "sent", "name", "settled"), SETTLED, ids=[r[0] for r in SETTLED])
def test_a_conversations_latest_turn_may_be_stale(
    case: str, outputs: list[Any], sent: Any, name: str, settled: bool
) -> None:
    """What rests on a conversation's latest turn as this process knows it is not settled: never refused, and dropped
    once the API accepts the request; what the request itself shows stays."""
    ledger = conversation_ledger(outputs)
    req = request_facts("chat", {"model": "m", "conversation": "conv_1", "input": sent}, SETTINGS)
    raised = run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False))
    (signal,) = [s for s in raised if s.name == name]
    assert signal.settled is settled
    assert signal.refusable is settled
    assert (signal in accepted_by_api(raised)) is settled
    assert confirmed_by_api(raised, "server_error") == raised  # a refusal keeps them all


def test_a_text_returned_to_another_conversation_is_not_this_replays_parent() -> None:
    """Two conversations get the same short answer; the newer one also reasoned. A replay of the older one's text,
    after its own prompt, must not be read as a replay of the newer one (it would look like reasoning was dropped)."""
    other = {**ANSWER, "id": "msg_b"}
    ledger = ledger_with(
        ("resp_a", [{**ANSWER, "id": "msg_a"}], {"input": [user("Is order 7 shipped?")]}),
        ("resp_b", [REASONING, other], {"input": [user("Can you check the weather?")]}),
    )
    text_only = {"role": "assistant", "content": "ok"}
    assert signals(ledger, input=[user("Is order 7 shipped?"), text_only, user("Thanks.")]) == set()
    # The newer conversation's own replay still links (and its dropped reasoning is seen).
    assert signals(ledger, input=[user("Can you check the weather?"), text_only, user("Ok.")]) == {"reasoning_dropped"}


def test_a_replayed_text_is_the_response_whose_calls_the_replay_carries() -> None:
    """Two conversations send the same prompt and get the same words with a tool call each (a scripted app). A replay
    that keeps its own call by call_id and the text alone is that response's, not the newer twin's (whose call it
    does not carry: a false `replay_incomplete`)."""
    prompt = "Please use lookup_order for order 42."
    said = {**ANSWER, "id": "msg_a", "content": [{"type": "output_text", "text": "Looking that up."}]}
    mine: Any = ("resp_a", [said, CALL], {"input": [user(prompt)]})
    twin_call = {**CALL, "id": "fc_b", "call_id": "call_b"}
    twin: Any = ("resp_b", [{**said, "id": "msg_b"}, twin_call], {"input": [user(prompt)]})
    ledger = ledger_with(mine, twin)
    text_only = {"role": "assistant", "content": "Looking that up."}
    replay = [user(prompt), text_only, STRIPPED_CALL, OUTPUT, user("Thanks.")]
    assert signals(ledger, input=replay) == set()


# -- items the app writes to a conversation, and responses it deletes -------------------------------------------


def written_to_conversation(ledger: InMemoryLedger, items: list[dict[str, Any]], conversation: str = "conv_1") -> None:
    """What `conversations.items.create(conversation_id=..., items=...)` remembers (the OpenAI Agents SDK's
    `OpenAIConversationsSession` writes each turn so, then replays `conversations.items.list(...)`)."""
    req = conversation_facts("create_conversation_items", conversation, tuple(meta(i) for i in items))
    remember_conversation_items(Ended(ledger, req, analyse(req, ledger)), ResponseFacts.empty())


def test_items_the_app_wrote_never_stand_for_the_response_they_copy() -> None:
    ledger = ledger_with(("resp_1", [REASONING, CALL], {"input": [user("q")]}))
    written_to_conversation(ledger, [user("q"), REASONING, CALL, OUTPUT])
    # The session's replay: every item as the conversation lists it. The call is the response's, not the write's.
    assert signals(ledger, input=[user("q"), REASONING, CALL, OUTPUT, user("n")]) == set()
    # Near miss: the reasoning really dropped, the call replayed without its id: still the response's call, and the
    # response's reasoning is missed.
    assert signals(ledger, input=[user("q"), STRIPPED_CALL, OUTPUT, user("n")]) == {"reasoning_dropped"}


def test_items_the_app_wrote_still_answer_conversation_questions() -> None:
    """The write is the conversation's latest turn: its calls are pending until an output is written."""
    ledger = InMemoryLedger()
    written_to_conversation(ledger, [user("q"), CALL])
    assert signals(ledger, conversation="conv_1", input=[user("next")]) == {"missing_tool_output"}
    written_to_conversation(ledger, [OUTPUT])
    assert signals(ledger, conversation="conv_1", input=[user("next")]) == set()


def deleted(ledger: InMemoryLedger, response_id: str) -> None:
    """What a successful `responses.delete(response_id)` remembers."""
    req = target_facts("delete_response", response_id, {})
    remember_deleted(Ended(ledger, req, analyse(req, ledger)), ResponseFacts.empty())


def read_signals(ledger: InMemoryLedger, operation: str, response_id: str) -> list[Signal]:
    req = target_facts(operation, response_id, {})
    return run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False))


@pytest.mark.parametrize("known", [True, False], ids=["seen-created", "never-seen"])
def test_a_deleted_response_is_gone_by_the_apps_choice(known: bool) -> None:
    ledger = ledger_with(("resp_1", [ANSWER], {"input": [user("q")]})) if known else InMemoryLedger()
    deleted(ledger, "resp_1")
    assert read_signals(ledger, "fetch_response", "resp_1") == []
    assert read_signals(ledger, "list_input_items", "resp_1") == []
    req = request_facts("chat", {"model": "m", "input": "n", "previous_response_id": "resp_1"}, SETTINGS)
    (signal,) = run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False))
    assert (signal.name, signal.detail) == (
        "unstored_parent",
        {"openai_responses.parent.id": "resp_1", "openai_responses.parent.deleted": True},
    )
    assert signal.refusable  # this process saw the delete succeed
    assert "deleted" in signal.meaning
    assert "store the parent" not in signal.fix


def test_an_unstored_response_retrieved_is_still_an_error() -> None:
    """The near miss of a deleted one: created with `store=false`, it never was kept."""
    ledger = ledger_with(("resp_1", [ANSWER], {"input": [user("q")], "store": False}))
    assert [s.name for s in read_signals(ledger, "fetch_response", "resp_1")] == ["unstored_retrieve"]


# -- instructions across the whole lineage ----------------------------------------------------------------------


def turns(*requests: dict[str, Any]) -> list[list[Signal]]:
    """Each request in order against one ledger, as the wrappers run it: checks, then its response remembered in its
    lineage (``resp_1``, ``resp_2``, ...; each answers "ok"). A request may name ``previous`` (the response it chains
    to: "resp_N"), or replay with ``input``."""
    ledger = InMemoryLedger()
    raised: list[list[Signal]] = []
    for number, kwargs in enumerate(requests, 1):
        req = request_facts("chat", {"model": "m", **kwargs}, SETTINGS)
        an = analyse(req, ledger)
        raised.append(run_request_checks(req, an, Situation(zdr=False, concurrent=False)))
        answer = {**ANSWER, "id": f"msg_{number}", "content": [{"type": "output_text", "text": f"ok {number}"}]}
        resp = response_facts(_Response(f"resp_{number}", [answer]), SETTINGS)
        remember_created(Ended(ledger, req, an, lineage=lineage_of(req, an)), resp)
    return raised


def named(raised: list[list[Signal]]) -> list[list[tuple[str, dict[str, Any]]]]:
    return [[(s.name, s.detail) for s in call] for call in raised]


def dropped(parent: int, last: int) -> tuple[str, dict[str, Any]]:
    return (
        "instructions_dropped",
        {
            "openai_responses.parent.id": f"resp_{parent}",
            "openai_responses.instructions.last_response.id": f"resp_{last}",
            "openai_responses.instructions.last_turn": last,
        },
    )


def test_every_turn_after_the_instructions_were_lost_is_named() -> None:
    raised = turns(
        {"input": "q", "instructions": "be brief"},
        {"input": "n", "previous_response_id": "resp_1"},
        {"input": "n", "previous_response_id": "resp_2"},
        {"input": "n", "previous_response_id": "resp_3"},
    )
    assert named(raised) == [[], [dropped(1, 1)], [dropped(2, 1)], [dropped(3, 1)]]


def test_instructions_sent_again_end_the_loss() -> None:
    raised = turns(
        {"input": "q", "instructions": "be brief"},
        {"input": "n", "previous_response_id": "resp_1"},
        {"input": "n", "previous_response_id": "resp_2", "instructions": "be brief"},
        {"input": "n", "previous_response_id": "resp_3"},
    )
    assert named(raised) == [[], [dropped(1, 1)], [], [dropped(3, 3)]]


def test_a_system_message_held_in_server_state_needs_no_instructions() -> None:
    system = {"role": "system", "content": "be brief"}
    raised = turns(
        {"input": [system, user("q")], "instructions": "be brief"},
        {"input": "n", "previous_response_id": "resp_1"},
        {"input": "n", "previous_response_id": "resp_2"},
    )
    assert named(raised) == [[], [], []]


def test_a_replay_holds_no_server_state() -> None:
    """The near miss: the system message was sent once, then a replay leaves it out; the replay's context is its
    input, so the instructions are gone (and the history with them: the system message was one of its messages)."""
    system = {"role": "system", "content": "be brief"}
    first_answer = {**ANSWER, "content": [{"type": "output_text", "text": "ok 1"}]}
    raised = turns(
        {"input": [system, user("q")], "instructions": "be brief"},
        {"input": [user("q"), first_answer, user("n")]},
    )
    cut = {
        "openai_responses.parent.id": "resp_1",
        "openai_responses.history.expected_app_messages": 2,
        "openai_responses.history.app_messages": 1,
    }
    assert named(raised) == [[], [dropped(1, 1), ("history_truncated", cut)]]


# -- scripted conversations that say the same words ----------------------------------------------------------------


def scripted(ledger: InMemoryLedger, tag: str, reasoning: bool) -> list[dict[str, Any]]:
    """Two turns of a scripted conversation (the same prompts and answers as any other run of it), replayed in full:
    its history as the client keeps it, the answers as text."""
    history: list[dict[str, Any]] = []
    for turn, prompt in enumerate(("q", "n"), 1):
        history.append(user(prompt))
        req = request_facts("chat", {"model": "m", "input": list(history)}, SETTINGS)
        an = analyse(req, ledger)
        answer: Any = {**ANSWER, "id": f"msg_{tag}{turn}", "content": [{"type": "output_text", "text": f"ok {turn}"}]}
        call: Any = {**CALL, "id": f"fc_{tag}{turn}", "call_id": f"call_{tag}{turn}"}
        outputs = [{**REASONING, "id": f"rs_{tag}{turn}"}] if reasoning else []
        outputs += [answer, call] if turn == 1 else [answer]  # a tool call on turn 1 only
        resp = response_facts(_Response(f"resp_{tag}{turn}", outputs), SETTINGS)
        remember_created(Ended(ledger, req, an, lineage=lineage_of(req, an)), resp)
        history.append({"role": "assistant", "content": f"ok {turn}"})
        if turn == 1:
            history.append({k: v for k, v in call.items() if k != "id"})
            history.append({"type": "function_call_output", "call_id": call["call_id"], "output": "x"})
    return history


def test_the_same_words_are_the_copy_of_the_conversation_the_replay_carries() -> None:
    """Run B said what run A said, turn for turn, but A's responses also reasoned: B's replay (its calls known by
    their call ids, its answers by their text) is B's, and loses nothing; A's own replay still names its lost
    reasoning."""
    ledger = InMemoryLedger()
    a = scripted(ledger, "a", reasoning=True)
    b = scripted(ledger, "b", reasoning=False)
    assert signals(ledger, input=[*b, user("m")]) == set()
    assert signals(ledger, input=[*a, user("m")]) == {"reasoning_dropped"}
    # Turn 2's words are known by their text alone: each replay continues its own conversation's turn 2.
    for tag, history in (("a", a), ("b", b)):
        req = request_facts("chat", {"model": "m", "input": [*history, user("m")]}, SETTINGS)
        parent = analyse(req, ledger).parent
        assert parent is not None
        assert (parent.response_id, parent.turn) == (f"resp_{tag}2", 2)


# -- the calls a chain's or a conversation's state holds, carried entry to entry ---------------------------------

CALL_2 = {**CALL, "id": "fc_2", "call_id": "call_2"}
OUTPUT_2 = {**OUTPUT, "call_id": "call_2"}
UNKNOWN_OUTPUT = {**OUTPUT, "call_id": "call_9"}  # answers no call anyone made
UNKNOWN_REFERENCE = {"type": "item_reference", "id": "fc_elsewhere"}  # an item of a response this process never saw


def session(*steps: tuple[dict[str, Any], list[Any]]) -> list[list[str]]:
    """Each request in order against one ledger, as the wrappers run it (checks, then its response remembered in its
    lineage), with the response's output items given: ``resp_1``, ``resp_2``, ... The names raised by each, in order.
    A request may be ``{"create_conversation": "conv_1"}``: the conversation made here (its state known from the
    start), or ``{"conversation_items": "conv_1"}``: items written to it; either may carry ``items``, read as the
    Conversations methods' wrappers read them."""
    return session_in(InMemoryLedger(), *steps)


def session_in(ledger: InMemoryLedger, *steps: tuple[dict[str, Any], list[Any]]) -> list[list[str]]:
    """``session`` against a given ledger. A step may also be ``{"delete_item": "msg_1", "conversation_id":
    "conv_1"}`` (a conversation item the app deleted); a request may name its ``operation`` (`chat` unless said) and
    its response's ``status`` (`completed` unless said)."""
    raised: list[list[str]] = []
    for number, (step, outputs) in enumerate(steps, 1):
        kwargs = dict(step)
        if "delete_item" in kwargs:
            deleting = OPERATIONS["delete_conversation_item"]
            facts = deleting.facts((kwargs["delete_item"],), {"conversation_id": kwargs["conversation_id"]}, SETTINGS)
            assert deleting.remember is not None
            deleting.remember(Ended(ledger, facts, analyse(facts, ledger)), ResponseFacts.empty())
            raised.append([])
            continue
        if "create_conversation" in kwargs or "conversation_items" in kwargs:
            written = {"items": kwargs["items"]} if "items" in kwargs else {}
            if "create_conversation" in kwargs:
                created = OPERATIONS["create_conversation"].facts((), written, SETTINGS)
                made = _conversation_made(kwargs["create_conversation"])
            else:
                by_app = (kwargs["conversation_items"],)
                created, made = (
                    OPERATIONS["create_conversation_items"].facts(by_app, written, SETTINGS),
                    ResponseFacts.empty(),
                )
            remember_conversation_items(Ended(ledger, created, analyse(created, ledger)), made)
            raised.append([])
            continue
        operation, status = kwargs.pop("operation", "chat"), kwargs.pop("status", "completed")
        req = request_facts(operation, {"model": "m", **kwargs}, SETTINGS)
        an = analyse(req, ledger)
        raised.append([s.name for s in run_request_checks(req, an, Situation(zdr=False, concurrent=False))])
        if operation == "chat":
            resp = response_facts(_Response(f"resp_{number}", outputs, status=status), SETTINGS)
            remember_created(Ended(ledger, req, an, lineage=lineage_of(req, an)), resp)
    return raised


HELD: list[tuple[str, list[tuple[dict[str, Any], list[Any]]], list[str]]] = [
    # (case, the session's requests and their responses' outputs, what the last request raises)
    (
        "an output sent again, its call two turns back (the issue's message window)",
        [({"input": [user("q")]}, [CALL]), ({"previous_response_id": "resp_1", "input": [OUTPUT]}, [ANSWER]),
         ({"previous_response_id": "resp_2", "input": [OUTPUT]}, [ANSWER])],
        ["context_duplicated"],
    ),
    (
        "near miss: an output whose call no turn made",
        [({"input": [user("q")]}, [CALL]), ({"previous_response_id": "resp_1", "input": [OUTPUT]}, [ANSWER]),
         ({"previous_response_id": "resp_2", "input": [UNKNOWN_OUTPUT]}, [ANSWER])],
        ["orphan_tool_output"],
    ),
    (
        "a call of the grandparent answered two turns later",
        [({"input": [user("q")]}, [CALL, CALL_2]),
         ({"previous_response_id": "resp_1", "input": [OUTPUT, user("the other later")]}, [ANSWER]),
         ({"previous_response_id": "resp_2", "input": [OUTPUT_2]}, [ANSWER])],
        [],
    ),
    (
        "the call and its output both sent again beside the chain",
        [({"input": [user("q")]}, [CALL]), ({"previous_response_id": "resp_1", "input": [OUTPUT]}, [ANSWER]),
         ({"previous_response_id": "resp_2", "input": [CALL, OUTPUT]}, [ANSWER])],
        ["context_duplicated"],
    ),
    (
        "a chain whose start this process never saw: nothing is said beyond the parent",
        [({"previous_response_id": "resp_elsewhere", "input": [user("q")]}, [CALL]),
         ({"previous_response_id": "resp_1", "input": [OUTPUT]}, [ANSWER]),
         ({"previous_response_id": "resp_2", "input": [UNKNOWN_OUTPUT]}, [ANSWER])],
        [],
    ),
    (
        "near miss: the parent's own calls are still known",
        [({"previous_response_id": "resp_elsewhere", "input": [user("q")]}, [CALL]),
         ({"previous_response_id": "resp_1", "input": [OUTPUT]}, [ANSWER])],
        [],
    ),
    (
        "a conversation made here: an output sent again",
        [({"create_conversation": "conv_1"}, []), ({"conversation": "conv_1", "input": [user("q")]}, [CALL]),
         ({"conversation": "conv_1", "input": [OUTPUT]}, [ANSWER]),
         ({"conversation": "conv_1", "input": [OUTPUT]}, [ANSWER])],
        ["context_duplicated"],
    ),
    (
        "a conversation made here: an output for no call",
        [({"create_conversation": "conv_1"}, []), ({"conversation": "conv_1", "input": [user("q")]}, [CALL]),
         ({"conversation": "conv_1", "input": [OUTPUT]}, [ANSWER]),
         ({"conversation": "conv_1", "input": [UNKNOWN_OUTPUT]}, [ANSWER])],
        ["orphan_tool_output"],
    ),
    (
        "a conversation this process joined late: nothing is said beyond what it saw",
        [({"conversation": "conv_1", "input": [user("q")]}, [ANSWER]),
         ({"conversation": "conv_1", "input": [UNKNOWN_OUTPUT]}, [ANSWER])],
        [],
    ),
    (
        "an item reference the ledger could not resolve may be a call: an output beside it is no orphan",
        [({"input": [user("q")]}, [ANSWER]),
         ({"previous_response_id": "resp_1", "input": [UNKNOWN_REFERENCE, UNKNOWN_OUTPUT]}, [ANSWER])],
        [],
    ),
    (
        "an unresolved item reference leaves the state's calls partial: its output a turn later is no orphan",
        [({"input": [user("q")]}, [ANSWER]),
         ({"previous_response_id": "resp_1", "input": [UNKNOWN_REFERENCE]}, [ANSWER]),
         ({"previous_response_id": "resp_2", "input": [UNKNOWN_OUTPUT]}, [ANSWER])],
        [],
    ),
    (
        "near miss: a replayed item reference resolved to a message holds no call",
        [({"input": [user("q")]}, [ANSWER]),
         ({"input": [user("q"), {"type": "item_reference", "id": "msg_1"}, UNKNOWN_OUTPUT]}, [ANSWER])],
        ["orphan_tool_output"],
    ),
    (
        "a replay holds no server state: its calls must be in its input",
        [({"input": [user("q")]}, [CALL]), ({"input": [user("q"), OUTPUT]}, [ANSWER])],
        ["orphan_tool_output"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("case", "steps", "expected"), HELD, ids=[r[0] for r in HELD])
def test_an_output_is_judged_against_every_call_the_state_holds(
    case: str, steps: list[tuple[dict[str, Any], list[Any]]], expected: list[str]
) -> None:
    raised = session(*steps)
    assert raised[-1] == expected
    assert all(not earlier or earlier == ["missing_tool_output"] for earlier in raised[:-1]), raised


DEVELOPER = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]}
DEVELOPER_EMPTY = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": ""}]}

INSTRUCTED: list[tuple[str, list[tuple[dict[str, Any], list[Any]]], list[str]]] = [
    # (case, the session's steps, what the last request raises): a conversation whose first turn had instructions
    (
        "a developer message written with conversations.create is held in the state",
        [({"create_conversation": "conv_1", "items": [DEVELOPER]}, []),
         ({"conversation": "conv_1", "input": [user("q")], "instructions": "X"}, [ANSWER]),
         ({"conversation": "conv_1", "input": [user("n")]}, [ANSWER])],
        [],
    ),
    (
        "a system message written with conversations.items.create is held in the state",
        [({"create_conversation": "conv_1"}, []),
         ({"conversation_items": "conv_1", "items": [SYSTEM]}, []),
         ({"conversation": "conv_1", "input": [user("q")], "instructions": "X"}, [ANSWER]),
         ({"conversation": "conv_1", "input": [user("n")]}, [ANSWER])],
        [],
    ),
    (
        "near miss: only a user message written, the instructions are gone",
        [({"create_conversation": "conv_1", "items": [user("hello")]}, []),
         ({"conversation": "conv_1", "input": [user("q")], "instructions": "X"}, [ANSWER]),
         ({"conversation": "conv_1", "input": [user("n")]}, [ANSWER])],
        ["instructions_dropped"],
    ),
    (
        "near miss: an empty developer message in the input counts as none",
        [({"create_conversation": "conv_1"}, []),
         ({"conversation": "conv_1", "input": [user("q")], "instructions": "X"}, [ANSWER]),
         ({"conversation": "conv_1", "input": [DEVELOPER_EMPTY, user("n")]}, [ANSWER])],
        ["instructions_dropped"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("case", "steps", "expected"), INSTRUCTED, ids=[r[0] for r in INSTRUCTED])
def test_a_system_message_the_app_wrote_to_a_conversation_holds_the_instructions(
    case: str, steps: list[tuple[dict[str, Any], list[Any]]], expected: list[str]
) -> None:
    raised = session(*steps)
    assert raised == [[]] * (len(steps) - 1) + [expected]


@pytest.mark.parametrize(
    ("operation", "expected"),
    [("count_input_tokens", []), ("compact_response", []), ("chat", ["context_duplicated"])],
)
def test_only_a_turn_sends_an_output_again(operation: str, expected: list[str]) -> None:
    """An output the chain's state already holds, sent beside `previous_response_id`: a turn gives it to the model
    twice; counting the input's tokens or compacting it sends nothing to the model's context."""
    ledger = ledger_with(
        ("resp_1", [CALL], {"input": [user("q")]}),
        ("resp_2", [ANSWER], {"previous_response_id": "resp_1", "input": [OUTPUT]}),
    )
    req = request_facts(operation, {"model": "m", "previous_response_id": "resp_2", "input": [OUTPUT]}, SETTINGS)
    raised = run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False))
    assert [s.name for s in raised] == expected


def test_held_calls_are_bounded_and_say_when_older_ones_were_dropped() -> None:
    def calls(prefix: str, count: int) -> list[dict[str, Any]]:
        return [{**CALL, "id": f"fc_{prefix}{n}", "call_id": f"call_{prefix}{n}"} for n in range(count)]

    ledger = ledger_with(("resp_1", calls("a", MAX_HELD_CALLS), {"input": [user("q")]}))
    full = ledger.get("resp_1")
    assert full is not None
    assert full.held_calls == tuple(f"call_a{n}" for n in range(MAX_HELD_CALLS))
    assert full.held_partial is False
    ledger = ledger_with(("resp_1", calls("b", MAX_HELD_CALLS + 1), {"input": [user("q")]}))
    over = ledger.get("resp_1")
    assert over is not None
    assert over.held_calls == tuple(f"call_b{n}" for n in range(1, MAX_HELD_CALLS + 1))  # the newest
    assert over.held_partial is True
    # The oldest call was dropped from both the entry's outputs and its held calls: its output is not called an orphan.
    assert len(over.outputs) == MAX_OUTPUT_ITEMS
    assert signals(ledger, previous_response_id="resp_1", input=[{**OUTPUT, "call_id": "call_b0"}]) == {
        "missing_tool_output"
    }
    # Near miss: with every call held, an output for none of them is one.
    ledger = ledger_with(("resp_1", calls("a", MAX_HELD_CALLS), {"input": [user("q")]}))
    assert signals(ledger, previous_response_id="resp_1", input=[UNKNOWN_OUTPUT]) == {
        "orphan_tool_output",
        "missing_tool_output",
    }


@pytest.mark.parametrize("count", [MAX_OUTPUT_ITEMS + 1, MAX_OUTPUT_ITEMS], ids=["past-the-bound", "within-it"])
def test_a_background_responses_calls_retrieved_are_held(count: int) -> None:
    """A background response's output arrives on `retrieve`: its calls are held from then on, and past the bound the
    entry says older ones were dropped, so an output for one of those is no orphan."""
    calls = [{**CALL, "id": f"fc_b{n}", "call_id": f"call_b{n}"} for n in range(count)]
    ledger = ledger_with(("resp_1", [], {"input": [user("q")], "background": True}))
    fetch = target_facts("fetch_response", "resp_1", {})
    remember_fetched(Ended(ledger, fetch, analyse(fetch, ledger)), response_facts(_Response("resp_1", calls), SETTINGS))
    entry = ledger.get("resp_1")
    assert entry is not None
    assert entry.held_partial is (count > MAX_HELD_CALLS)
    newest = {**OUTPUT, "call_id": f"call_b{count - 1}"}  # the call past `outputs`' bound when there is one
    assert signals(ledger, previous_response_id="resp_1", input=[newest]) == {"missing_tool_output"}
    # Near miss: with every call held, an output for none of them is one.
    expected = {"missing_tool_output"} if count > MAX_HELD_CALLS else {"orphan_tool_output", "missing_tool_output"}
    assert signals(ledger, previous_response_id="resp_1", input=[UNKNOWN_OUTPUT]) == expected


def test_held_calls_are_carried_from_the_parent_and_stop_reading_once_full() -> None:
    parent = Entry(
        "resp_1", 1, True, None, None, (meta(CALL, sent=False),), 1, 0,
        held_calls=("call_0", "call_1"), held_outputs=("call_0",), held_partial=False,
    )  # fmt: skip
    held = held_after(parent, True, [meta(OUTPUT)], (meta(CALL_2, sent=False),))
    assert held == Held(("call_0", "call_1", "call_2"), ("call_0", "call_1"), False)
    assert held_after(parent, False, [meta(OUTPUT)], ()) == Held((), ("call_1",), False)  # a replay: its own input
    assert held_after(None, True, [meta(OUTPUT)], ()) == Held((), ("call_1",), True)  # a state never seen begin
    # An item reference the ledger could not resolve may be any call; one resolved is the item it names.
    assert held_after(parent, True, [meta(UNKNOWN_REFERENCE)], ()).partial is True
    assert held_after(parent, True, [meta(CALL_2, sent=False)], ()).partial is False
    assert held_after(None, False, [meta(UNKNOWN_REFERENCE)], ()).partial is True
    older = dataclasses.replace(parent, held_calls=(), held_outputs=(), held_partial=True)  # of an older format
    assert held_after(older, True, [], ()) == Held(("call_1",), (), True)
    read: list[int] = []

    def sent() -> Iterator[ItemMeta]:
        for n in range(1000):
            read.append(n)
            yield meta({**OUTPUT, "call_id": f"c{n}"}) if n % 2 else meta({**CALL, "call_id": f"c{n}"})

    held = held_after(None, False, sent(), ())
    assert (len(held.calls), len(held.outputs), held.partial) == (MAX_HELD_CALLS, MAX_HELD_CALLS, True)
    assert len(read) < 2 * MAX_HELD_CALLS + 4  # the rest of a long replay is not read


# -- a replayed tool output against the copy first sent -------------------------------------------------------------

RESULT = "Order 7 shipped on Monday; tracking 1Z999."
CLEARED = "[cleared]"  # what langchain's ClearToolUsesEdit puts in place of an old result
IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}


def sent_then_replayed(first: Any, again: Any, kind: str = "function_call_output") -> list[str]:
    """A tool round trip replayed (``first``: the output as first sent), then the next turn's replay carrying
    ``again`` in its place: what that replay raises."""
    call = {**CALL, "type": kind.removesuffix("_output")} if kind != "function_call_output" else CALL
    output = {"type": kind, "call_id": "call_1", "output": first}
    replayed = {**output, "output": again}
    return session(
        ({"input": [user("q")]}, [call]),
        ({"input": [user("q"), call, output]}, [ANSWER]),
        ({"input": [user("q"), call, replayed, ANSWER, user("n")]}, [{**ANSWER, "id": "msg_3"}]),
    )[-1]


MODIFIED: list[tuple[str, Any, Any, list[str]]] = [
    # (case, the output first sent, the copy replayed, what the replay raises)
    ("cleared on replay", RESULT, CLEARED, ["tool_output_modified"]),
    ("truncated on replay", RESULT, RESULT[:20], ["tool_output_modified"]),
    ("one character changed, the length kept", RESULT, RESULT.replace("7", "8"), ["tool_output_modified"]),
    ("near miss: replayed as first sent", RESULT, RESULT, []),
    ("near miss: the same string object", RESULT, "".join([RESULT]), []),
    ("near miss: the same text as a text part", RESULT, [{"type": "input_text", "text": RESULT}], []),
    ("text parts, one edited", [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
     [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "c"}], ["tool_output_modified"]),
    ("near miss: an output with an image is never read", [{"type": "input_text", "text": "a"}, IMAGE],
     [{"type": "input_text", "text": "b"}, IMAGE], []),
    ("near miss: an output that is not text", {"type": "computer_screenshot", "image_url": "x"},
     {"type": "computer_screenshot", "image_url": "y"}, []),
]  # fmt: skip


@pytest.mark.parametrize(("case", "first", "again", "expected"), MODIFIED, ids=[r[0] for r in MODIFIED])
def test_a_replayed_tool_output_is_compared_with_the_copy_first_sent(
    case: str, first: Any, again: Any, expected: list[str]
) -> None:
    assert sent_then_replayed(first, again) == expected


def test_every_tool_output_with_text_is_compared() -> None:
    assert sent_then_replayed(RESULT, CLEARED, "custom_tool_call_output") == ["tool_output_modified"]
    assert sent_then_replayed(RESULT, RESULT, "custom_tool_call_output") == []


def test_the_copy_first_sent_is_carried_forward_turn_after_turn() -> None:
    """Cleared once, the output stays cleared: each later replay still differs from what was first sent (the model
    has not seen the result since); the result sent back as it was is no change."""
    output = {**OUTPUT, "output": RESULT}
    cleared = {**output, "output": CLEARED}
    history = [user("q"), CALL, output, ANSWER, user("n")]
    raised = session(
        ({"input": [user("q")]}, [CALL]),
        ({"input": [user("q"), CALL, output]}, [ANSWER]),
        ({"input": [user("q"), CALL, cleared, ANSWER, user("n")]}, [{**ANSWER, "id": "msg_3"}]),
        ({"input": [user("q"), CALL, cleared, ANSWER, user("n"), {**ANSWER, "id": "msg_3"}, user("m")]},
         [{**ANSWER, "id": "msg_4"}]),
        ({"input": [*history, {**ANSWER, "id": "msg_3"}, user("m"), {**ANSWER, "id": "msg_4"}, user("o")]}, []),
    )  # fmt: skip
    assert raised == [[], [], ["tool_output_modified"], ["tool_output_modified"], []]


def test_tool_output_modified_names_the_calls_and_rests_on_a_shared_entry_when_read_from_one() -> None:
    output = {**OUTPUT, "output": RESULT}
    ledger = ledger_with(
        ("resp_1", [CALL], {"input": [user("q")]}), ("resp_2", [ANSWER], {"input": [user("q"), CALL, output]})
    )
    remembered = ledger.get("resp_2")
    assert remembered is not None
    (given,) = remembered.given_outputs
    assert (given.call_id, given.length, given.fingerprint) == ("call_1", len(RESULT), FP.number(RESULT))
    assert RESULT not in repr(remembered)
    for target, shared in ((ledger, False), (shared_copy(ledger), True)):
        if shared:  # as another process reads it: no hash of this process's
            for response_id in ("resp_1", "resp_2"):
                entry = target.get(response_id)
                assert entry is not None
                kept = tuple(g._replace(local=None) for g in entry.given_outputs)
                target.cache(dataclasses.replace(entry, given_outputs=kept))
        for replayed, expected in ((CLEARED, True), (RESULT.replace("7", "8"), True), (RESULT, False)):
            req = request_facts(
                "chat", {"model": "m", "input": [user("q"), CALL, {**output, "output": replayed}, ANSWER]}, SETTINGS
            )
            raised = run_request_checks(req, analyse(req, target), Situation(zdr=False, concurrent=False))
            assert [s.name for s in raised] == (["tool_output_modified"] if expected else [])
            if expected:
                detail: dict[str, Any] = {"openai_responses.call.ids": ["call_1"]}
                if shared:
                    detail[SHARED_FACT] = True
                assert raised[0].detail == detail
                assert not raised[0].refusable


def test_a_new_output_is_remembered_and_an_old_one_past_the_bound_is_not() -> None:
    calls = [{**CALL, "id": f"fc_{n}", "call_id": f"call_{n}"} for n in range(MAX_GIVEN_OUTPUTS + 2)]
    outputs = [{**OUTPUT, "call_id": f"call_{n}", "output": f"result {n}"} for n in range(MAX_GIVEN_OUTPUTS + 2)]
    ledger = ledger_with(
        ("resp_1", calls, {"input": [user("q")]}),
        ("resp_2", [ANSWER], {"input": [user("q"), *(i for pair in zip(calls, outputs, strict=True) for i in pair)]}),
    )
    entry = ledger.get("resp_2")
    assert entry is not None
    assert [g.call_id for g in entry.given_outputs] == [f"call_{n}" for n in range(2, MAX_GIVEN_OUTPUTS + 2)]


# -- reasoning left out of a replay: could it ever have been replayed? ----------------------------------------------

BARE_REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}  # store=false without include: no payload


@pytest.mark.parametrize(
    ("case", "reasoning", "stored", "unreplayable"),
    [
        ("unstored, no payload: it never could be", BARE_REASONING, False, True),
        ("near miss: unstored, with its payload", REASONING, False, False),
        ("near miss: stored, the API finds it by id", BARE_REASONING, True, False),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_reasoning_dropped_says_when_the_reasoning_could_never_be_replayed(
    case: str, reasoning: dict[str, Any], stored: bool, unreplayable: bool
) -> None:
    ledger = ledger_with(("resp_1", [reasoning, ANSWER], {"input": [user("q")], "store": stored}))
    req = request_facts("chat", {"model": "m", "input": [user("q"), ANSWER, user("n")]}, SETTINGS)
    raised = run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False))
    # A stored response's message under its id, without its reasoning: the API refuses that pair too.
    assert [s.name for s in raised] == ["reasoning_dropped"] + (["reasoning_pair_broken"] if stored else [])
    signal = raised[0]
    expected: dict[str, Any] = {"openai_responses.missing.count": 1}
    if unreplayable:
        expected["openai_responses.reasoning.unreplayable"] = True
    assert (signal.name, signal.detail) == ("reasoning_dropped", expected)
    assert ('include=["reasoning.encrypted_content"]' in signal.fix) is unreplayable
    assert ("could never be replayed" in signal.meaning) is unreplayable
    assert (signal.fix == CATALOGUE["reasoning_dropped"].fix) is not unreplayable


def test_reasoning_dropped_under_zdr_is_never_replayable_without_its_payload() -> None:
    """Under zero data retention nothing is stored, whatever the request said: the ledger keeps it unstored."""
    zdr = settings_from({"hash_key": "core-tests", "zdr": True})
    ledger = InMemoryLedger()
    req = request_facts("chat", {"model": "m", "input": [user("q")]}, zdr)
    resp = response_facts(_Response("resp_1", [BARE_REASONING, ANSWER]), zdr)
    remember_created(Ended(ledger, req, analyse(req, ledger), settings=zdr), resp)
    req = request_facts("chat", {"model": "m", "input": [user("q"), ANSWER, user("n")]}, zdr)
    (signal,) = run_request_checks(req, analyse(req, ledger), Situation(zdr=True, concurrent=False))
    assert signal.detail.get("openai_responses.reasoning.unreplayable") is True


# -- the API's rules on replayed items: ids and reasoning pairs ------------------------------------------------------

CODEX_MESSAGE = {  # the Codex CLI gives every input message an id of its own
    "type": "message",
    "id": "msg_0199a6b2-6f4e-7c21-9d3a-2b8f5e1c4a70",
    "role": "user",
    "content": [{"type": "input_text", "text": "q"}],
}
CODEX_OUTPUT = {**OUTPUT, "id": "fco_0199a6b2-7a10-7e55-8c2d-91f0aa3b6c11"}  # and every function call output
COLLIDING = {"type": "message", "id": "msg_4", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]}

# (case, outputs of resp_1 (asked `[user("q")]`, stored unless said), the next request, the signals it raises)
ITEM_RULES: list[tuple[str, list[Any], dict[str, Any], list[str]]] = [
    # One id twice in one input.
    ("a client's fallback id colliding with a kept one (pi's `msg_${index}`)", [ANSWER],
     {"input": [user("q"), COLLIDING, user("n"), {**COLLIDING, "content": "b"}, user("m")]}, ["duplicate_item_id"]),
    ("near miss: the fallback ids distinct", [ANSWER],
     {"input": [user("q"), COLLIDING, user("n"), {**COLLIDING, "id": "msg_5", "content": "b"}, user("m")]}, []),
    ("one reasoning item copied into two history messages (a cache kept its id)", [REASONING, ANSWER],
     {"input": [user("q"), REASONING, ANSWER, user("n"), REASONING, ANSWER, user("m")], "parent_store": False},
     ["duplicate_item_id"]),
    ("an item and an item reference to it", [REASONING, ANSWER],
     {"input": [user("q"), REASONING, ANSWER, {"type": "item_reference", "id": "msg_1"}, user("n")]},
     ["duplicate_item_id"]),
    ("near miss: an id a server returned twice in one response, replayed twice", [REASONING, REPEATED, ANSWER],
     {"input": [user("q"), REASONING, REPEATED, ANSWER, user("n")]}, []),
    ("the same id on two calls (two histories merged)", [CALL],
     {"input": [user("q"), CALL, OUTPUT, user("n"), {**CALL, "call_id": "call_2"}, OUTPUT_2]},
     ["duplicate_item_id"]),
    # A follower under its server id without its reasoning; a reasoning item without its follower.
    ("a function call under its server id, its reasoning dropped", [REASONING, CALL],
     {"input": [user("q"), CALL, OUTPUT]}, ["reasoning_dropped", "reasoning_pair_broken"]),
    ("near miss: the reasoning sent without its id (the Agents SDK's `omit` policy)", [REASONING, CALL],
     {"input": [user("q"), {k: v for k, v in REASONING.items() if k != "id"}, CALL, OUTPUT]}, []),
    ("near miss: the call's id dropped with its reasoning (replayed as a new item)", [REASONING, CALL],
     {"input": [user("q"), STRIPPED_CALL, OUTPUT]}, ["reasoning_dropped"]),
    ("near miss: the response unstored (the API holds nothing to pair by id)", [REASONING, CALL],
     {"input": [user("q"), CALL, OUTPUT], "parent_store": False}, ["reasoning_dropped"]),
    ("an item reference to a message, its reasoning left out (the AI SDK with store)", [REASONING, ANSWER],
     {"input": [user("q"), {"type": "item_reference", "id": "msg_1"}, user("n")]},
     ["reasoning_dropped", "reasoning_pair_broken"]),
    ("the message after a reasoning item replaced by other text (pydantic-ai's modified history)", [REASONING, ANSWER],
     {"input": [user("q"), REASONING, {"role": "assistant", "content": "The meaning of life is 42"}, user("n")]},
     ["replay_incomplete", "reasoning_pair_broken"]),
    ("a turn stored after its reasoning item was cut", [REASONING],
     {"input": [user("q"), REASONING, user("n")]}, ["reasoning_pair_broken"]),
    ("near miss: the same turn unstored", [REASONING],
     {"input": [user("q"), REASONING, user("n")], "parent_store": False}, []),
    ("near miss: reasoning and its call in order, each under its id", [REASONING, CALL],
     {"input": [user("q"), REASONING, CALL, OUTPUT]}, []),
    # Ids of a shape the API refuses.
    ("a call under another provider's id", [ANSWER],
     {"input": [user("q"), ANSWER, user("n"), {**CALL, "id": "toolu_01A09q90qw90lq917835lq9", "call_id": "c9"},
                {**OUTPUT, "call_id": "c9"}]}, ["malformed_item_id"]),
    ("the Agents SDK's placeholder id on a call", [ANSWER],
     {"input": [user("q"), ANSWER, user("n"), {**CALL, "id": "__fake_id__", "call_id": "c9"},
                {**OUTPUT, "call_id": "c9"}]}, ["malformed_item_id"]),
    ("a gateway's `item_…` id on a reasoning item", [ANSWER],
     {"input": [user("q"), ANSWER, {**REASONING, "id": "item_df7e40c3f04fc8ade5c3800e"}, user("n")]},
     ["malformed_item_id"]),
    ("a message id with a character the API refuses", [ANSWER],
     {"input": [user("q"), ANSWER, {**user("n"), "type": "message", "id": "msg.local.2"}]}, ["malformed_item_id"]),
    ("a message id over 64 characters", [ANSWER],
     {"input": [user("q"), ANSWER, {**user("n"), "type": "message", "id": "msg_" + "a" * 61}]},
     ["malformed_item_id"]),
    ("near miss: the Codex CLI's own ids on every message and function call output", [CALL],
     {"input": [CODEX_MESSAGE, CALL, CODEX_OUTPUT, {**CODEX_MESSAGE, "id": "msg_0199a6b2-8b3c-7f00-a1e4-5d6c7b8a"}]},
     []),
    ("near miss: an empty id (the Codex CLI on a message it writes after compacting)", [ANSWER],
     {"input": [{**CODEX_MESSAGE, "id": ""}, ANSWER, {**CODEX_MESSAGE, "id": "", "content": "n"}]}, []),
    ("near miss: a custom tool call's output under Codex's `ctco_…` id", [ANSWER],
     {"input": [user("q"), ANSWER, {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c5", "input": "x"},
                {"type": "custom_tool_call_output", "id": "ctco_019ff2c9", "call_id": "c5", "output": "y"}]}, []),
]  # fmt: skip


@pytest.mark.parametrize(("case", "outputs", "request_kwargs", "expected"), ITEM_RULES, ids=[r[0] for r in ITEM_RULES])
def test_the_apis_rules_on_replayed_items(
    case: str, outputs: list[Any], request_kwargs: dict[str, Any], expected: list[str]
) -> None:
    kwargs = dict(request_kwargs)
    first: dict[str, Any] = {"input": [user("q")], "store": kwargs.pop("parent_store", True)}
    ledger = ledger_with(("resp_1", outputs, first))
    req = request_facts("chat", {"model": "m", **kwargs}, SETTINGS)
    raised = run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False))
    assert [s.name for s in raised] == expected


CODEX_REQUESTS = Path(__file__).resolve().parents[1] / "codex" / "requests"


@pytest.mark.parametrize("recorded", sorted(p.name for p in CODEX_REQUESTS.glob("*.json")))
def test_the_codex_clis_own_ids_on_its_recorded_requests_are_healthy(recorded: str) -> None:
    """The Codex CLI's real requests (tests/codex/requests): an id of its own on every input message and tool output,
    the server's on every item it replays, an empty one after a local compaction: none the API refuses."""
    ledger = InMemoryLedger()
    calls = json.loads((CODEX_REQUESTS / recorded).read_text())["calls"]
    assert calls
    for call in calls:
        body = call["body"]
        assert any(isinstance(item, dict) and item.get("id") for item in body["input"])
        req = request_facts("chat", body, SETTINGS)
        assert run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False)) == []


def raised_by(ledger: InMemoryLedger, **kwargs: Any) -> list[Signal]:
    req = request_facts("chat", {"model": "m", **kwargs}, SETTINGS)
    return run_request_checks(req, analyse(req, ledger), Situation(zdr=False, concurrent=False))


def test_each_rule_names_the_items_and_never_a_clients_odd_id() -> None:
    ledger = ledger_with(("resp_1", [REASONING, CALL], {"input": [user("q")]}))
    (dropped, broken) = raised_by(ledger, input=[user("q"), CALL, OUTPUT])
    assert dropped.name == "reasoning_dropped"
    assert (broken.name, broken.detail) == (
        "reasoning_pair_broken",
        {"openai_responses.item.ids": ["fc_1"], "openai_responses.pair.missing": ["reasoning"]},
    )
    odd = {**COLLIDING, "id": "msg john@example.com"}
    (duplicate, bad) = raised_by(ledger, input=[user("q"), odd, user("n"), odd, COLLIDING, COLLIDING, user("m")])
    assert (duplicate.name, duplicate.detail) == (
        "duplicate_item_id",
        {"openai_responses.item.ids": ["(malformed id)", "msg_4"], "openai_responses.duplicate.held_by": ["input"]},
    )
    assert (bad.name, bad.detail) == (
        "malformed_item_id",
        {
            "openai_responses.malformed.positions": [1, 3],
            "openai_responses.malformed.item_types": ["message", "message"],
            "openai_responses.malformed.problems": ["characters", "characters"],
        },
    )
    assert "john" not in repr([s.detail for s in (duplicate, bad)])


def test_an_id_the_server_returned_is_never_judged_by_its_shape() -> None:
    """A compatible server's own ids (another prefix, another alphabet) are its to accept: an id the ledger knows is
    one the server made."""
    odd_call = {**CALL, "id": "call.0001", "call_id": "call_1"}
    ledger = ledger_with(("resp_1", [odd_call], {"input": [user("q")]}))
    assert raised_by(ledger, input=[user("q"), odd_call, OUTPUT]) == []
    # Near miss: the same shape under an id no response returned.
    assert [s.name for s in raised_by(ledger, input=[user("q"), odd_call, OUTPUT, {**odd_call, "id": "call.2"}])] == [
        "duplicate_call_id",
        "malformed_item_id",
    ]


def test_a_single_turn_with_ids_is_checked_too() -> None:
    ledger = InMemoryLedger()
    assert [s.name for s in raised_by(ledger, input=[{**CODEX_MESSAGE, "id": "review_rollout_user"}])] == [
        "malformed_item_id"
    ]
    assert raised_by(ledger, input=[CODEX_MESSAGE]) == []
    developer = {**CODEX_MESSAGE, "role": "developer"}
    assert [s.name for s in raised_by(ledger, input=[developer, CODEX_MESSAGE])] == ["duplicate_item_id"]


# (case, the session's steps, what the last request raises): ids the server-side state already holds
HELD_IDS: list[tuple[str, list[tuple[dict[str, Any], list[Any]]], list[str]]] = [
    ("an output re-sent under its server id beside the conversation that holds it (agents SDK before #1827)",
     [({"create_conversation": "conv_1"}, []), ({"conversation": "conv_1", "input": [user("q")]}, [REASONING, CALL]),
      ({"conversation": "conv_1", "input": [REASONING, CALL, OUTPUT]}, [ANSWER])],
     ["duplicate_item_id"]),
    ("near miss: the same rebuilt without its ids (accepted, read twice)",
     [({"create_conversation": "conv_1"}, []), ({"conversation": "conv_1", "input": [user("q")]}, [ANSWER]),
      ({"conversation": "conv_1", "input": [user("q"), {"role": "assistant", "content": "ok"}, user("n")]}, [ANSWER])],
     ["context_duplicated"]),
    ("near miss: only the new items beside the conversation",
     [({"create_conversation": "conv_1"}, []), ({"conversation": "conv_1", "input": [user("q")]}, [REASONING, CALL]),
      ({"conversation": "conv_1", "input": [OUTPUT]}, [ANSWER])],
     []),
    ("near miss: an item the app deleted from the conversation, sent again under its id",
     [({"create_conversation": "conv_1"}, []), ({"conversation": "conv_1", "input": [user("q")]}, [ANSWER]),
      ({"delete_item": "msg_1", "conversation_id": "conv_1"}, []),
      ({"conversation": "conv_1", "input": [ANSWER, user("n")]}, [ANSWER])],
     []),
    ("an item reference to an output the chain holds (the AI SDK with previousResponseId)",
     [({"input": [user("q")]}, [REASONING, ANSWER]),
      ({"previous_response_id": "resp_1", "input": [{"type": "item_reference", "id": "rs_1"},
                                                    {"type": "item_reference", "id": "msg_1"}, user("n")]}, [ANSWER])],
     ["duplicate_item_id"]),
    ("an item reference to an output two turns up the chain",
     [({"input": [user("q")]}, [ANSWER]), ({"previous_response_id": "resp_1", "input": [user("n")]}, [ANSWER]),
      ({"previous_response_id": "resp_2", "input": [{"type": "item_reference", "id": "msg_1"}, user("m")]}, [ANSWER])],
     ["duplicate_item_id"]),
    ("near miss: an item re-sent under its id beside previous_response_id (accepted: the agents SDK's #1827)",
     [({"input": [user("q")]}, [REASONING, ANSWER]),
      ({"previous_response_id": "resp_1", "input": [REASONING, ANSWER, user("n")]}, [ANSWER])],
     ["context_duplicated"]),
    ("near miss: an item reference to a response the chain does not hold",
     [({"input": [user("q")]}, [{**ANSWER, "id": "msg_other"}]), ({"input": [user("p")]}, [ANSWER]),
      ({"previous_response_id": "resp_2", "input": [{"type": "item_reference", "id": "msg_other"}, user("n")]},
       [ANSWER])],
     []),
]  # fmt: skip


@pytest.mark.parametrize(("case", "steps", "expected"), HELD_IDS, ids=[r[0] for r in HELD_IDS])
def test_an_id_the_state_already_holds_is_a_duplicate(
    case: str, steps: list[tuple[dict[str, Any], list[Any]]], expected: list[str]
) -> None:
    raised = session(*steps)
    assert raised[-1] == expected
    assert all(earlier == [] for earlier in raised[:-1]), raised


def test_strict_mode_refuses_a_duplicate_in_the_input_always_and_one_held_by_the_state_when_recorded_here() -> None:
    ledger = ledger_with(("resp_1", [REASONING, ANSWER], {"input": [user("q")]}))
    reference = {"type": "item_reference", "id": "msg_1"}
    for target, shared in ((ledger, False), (shared_copy(ledger), True)):
        (in_input,) = raised_by(target, input=[user("q"), COLLIDING, user("n"), COLLIDING, user("m")])
        assert in_input.name == "duplicate_item_id"
        assert in_input.refusable  # the request itself shows it
        (held,) = raised_by(target, previous_response_id="resp_1", input=[reference, user("n")])
        assert held.detail["openai_responses.duplicate.held_by"] == ["previous_response"]
        assert held.refusable is not shared  # on a shared entry alone it is raised, never refused
        assert (held.detail.get(SHARED_FACT) is True) is shared
    for name in ("reasoning_pair_broken", "malformed_item_id"):
        assert not CATALOGUE[name].strict  # warnings: never refused


# (case, the steps, what each request raises): a replay of the user's messages alone, and its near misses
MESSAGES_ONLY: list[tuple[str, list[tuple[dict[str, Any], list[Any]]], list[list[str]]]] = [
    ("only the user's messages kept (a reasoning model)",
     [({"input": [user("q")]}, [REASONING, ANSWER]), ({"input": [user("q"), user("n")]}, [ANSWER])],
     [[], ["replay_incomplete"]]),
    ("only the user's messages kept (no reasoning), turn after turn",
     [({"input": [SYSTEM, user("q")]}, [ANSWER]), ({"input": [SYSTEM, user("q"), user("n")]}, [ANSWER]),
      ({"input": [SYSTEM, user("q"), user("n"), user("m")]}, [ANSWER])],
     [[], ["replay_incomplete"], ["replay_incomplete"]]),
    ("near miss: the answer replayed", [({"input": [user("q")]}, [ANSWER]),
                                        ({"input": [user("q"), ANSWER, user("n")]}, [ANSWER])],
     [[], []]),
    ("near miss: a response with no output item (Codex's `generate: false` warm-up, a prompt-cache prewarm)",
     [({"input": [user("q")]}, []), ({"input": [user("q"), user("n")]}, [ANSWER])], [[], []]),
    ("near miss: a failed response", [({"input": [user("q")], "status": "failed"}, [ANSWER]),
                                      ({"input": [user("q"), user("n")]}, [ANSWER])], [[], []]),
    ("near miss: a cancelled response", [({"input": [user("q")], "status": "cancelled"}, [REASONING]),
                                         ({"input": [user("q"), user("n")]}, [ANSWER])], [[], []]),
    ("near miss: an incomplete response", [({"input": [user("q")], "status": "incomplete"}, [REASONING, ANSWER]),
                                           ({"input": [user("q"), user("n")]}, [ANSWER])], [[], []]),
    ("near miss: a guardrail call on the same input, then the real call",
     [({"input": [user("q")], "instructions": "Is this safe?"}, [{**ANSWER, "id": "msg_g"}]),
      ({"input": [user("q")]}, [ANSWER])], [[], []]),
    ("near miss: a classifier of the user's messages beside the real call: the opening names two responses",
     [({"input": [user("q")], "instructions": "Classify."}, [{**ANSWER, "id": "msg_c"}]),
      ({"input": [user("q")]}, [ANSWER]),
      ({"input": [user("q"), user("n")], "instructions": "Classify."}, [{**ANSWER, "id": "msg_c2"}])],
     [[], [], []]),
    ("near miss: a query rewrite and a retry on the same input",
     [({"input": [user("q")], "instructions": "Rewrite the query."}, [{**ANSWER, "id": "msg_r"}]),
      ({"input": [user("q")]}, []), ({"input": [user("q")]}, [ANSWER])], [[], [], []]),
    ("near miss: a regenerate", [({"input": [user("q"), user("n")]}, [ANSWER]),
                                 ({"input": [user("q"), user("n")]}, [{**ANSWER, "id": "msg_2"}])], [[], []]),
    ("near miss: a first message reused by a new conversation",
     [({"input": [user("hi")]}, [ANSWER]), ({"input": [user("hi")]}, [{**ANSWER, "id": "msg_2"}]),
      ({"input": [user("hi"), {**ANSWER, "id": "msg_2"}, user("n")]}, [ANSWER])], [[], [], []]),
    ("near miss: an eval harness with a fixed opening", [({"input": [SYSTEM, user("a"), user("case 1")]}, [ANSWER]),
                                                         ({"input": [SYSTEM, user("a"), user("case 2")]}, [ANSWER])],
     [[], []]),
    ("near miss: a batch whose inputs share a prefix", [({"input": [user("doc"), user("summarise")]}, [ANSWER]),
                                                        ({"input": [user("doc"), user("translate")]}, [ANSWER])],
     [[], []]),
    ("near miss: a token count and a compaction of the next input",
     [({"input": [user("q")]}, [ANSWER]), ({"input": [user("q"), user("n")], "operation": "count_input_tokens"}, []),
      ({"input": [user("q"), user("n")], "operation": "compact_response"}, [])], [[], [], []]),
    ("near miss: a client-side summary replacing earlier turns (Codex's local compaction: two new messages)",
     [({"input": [user("q")]}, [ANSWER]), ({"input": [user("q"), user("summary of the turns"), user("n")]}, [ANSWER])],
     [[], []]),
    ("near miss: the new message is not the user's", [({"input": [user("q")]}, [ANSWER]),
                                                      ({"input": [user("q"), SYSTEM]}, [ANSWER])], [[], []]),
    ("near miss: earlier messages changed", [({"input": [user("q"), user("n")]}, [ANSWER]),
                                             ({"input": [user("Q"), user("n"), user("m")]}, [ANSWER])], [[], []]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "steps", "expected"), MESSAGES_ONLY, ids=[r[0] for r in MESSAGES_ONLY])
def test_a_replay_of_the_users_messages_alone(
    case: str, steps: list[tuple[dict[str, Any], list[Any]]], expected: list[list[str]]
) -> None:
    assert session(*steps) == expected


def test_a_messages_only_replay_names_what_it_lost_and_its_own_text() -> None:
    ledger = InMemoryLedger()
    session_in(ledger, ({"input": [user("q")]}, [REASONING, CALL]))
    (signal,) = raised_by(ledger, input=[user("q"), user("n")])
    assert (signal.name, signal.detail) == (
        "replay_incomplete",
        {
            "openai_responses.parent.id": "resp_1",
            "openai_responses.missing.count": 2,
            "openai_responses.missing.item_types": ["reasoning", "function_call"],
            "openai_responses.replay.messages_only": True,
        },
    )
    assert "only the user's messages" in signal.meaning
    assert signal.fix != CATALOGUE["replay_incomplete"].fix
    entry = ledger.get("resp_1")
    assert entry is not None
    assert entry.given_messages is not None
    assert FP.number("q") != entry.given_messages  # a fold of the fingerprints, not one of them
