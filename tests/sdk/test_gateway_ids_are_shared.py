"""The ids a gateway hands out are shared: litellm's response ids (`resp_` + standard base64 of its provider, its
deployment and the upstream's id), its `encitem_` item ids, and the ids LiteLLM Proxy gives its HTTP clients (litellm's
id encrypted with the caller's user and team, `resp_` + base64url) pass the shared ledger's id rule; the keys they name
carry the id itself as their Redis Cluster hash tag; entries holding them go through a single Redis node and a Redis
Cluster whole, and a turn checked by another process of the fleet against such a parent gets its exact signals. Each
row has its near miss: the same id with a brace, a space, a newline or a non-ASCII character, or one character past
the bound, stays in its process.

The ids are built as litellm 1.110.2 builds them (`ResponsesAPIRequestUtils._build_responses_api_response_id`,
`_build_encrypted_item_id`; the proxy's `ResponsesIDSecurity` through `encrypt_value_helper`, whose ciphertext is random
bytes to anyone without the salt key). The gateway itself, two workers sharing one Redis, and the ids it really makes:
tests/clients/test_litellm_proxy.py.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from typing import Any

import pytest
from redis.crc import key_slot

from otel_responses._analysis.analysis import analyse
from otel_responses._analysis.checks import Situation, run_request_checks
from otel_responses._analysis.facts import request_facts
from otel_responses._fingerprint import Fingerprinter, key_from_text
from otel_responses._items import ItemMeta
from otel_responses.config import settings_from
from otel_responses.ledger import Entry
from otel_responses.ledger._codec import MAX_ID_CHARS, entry_key, is_id, location_key, marker_key, shareable
from otel_responses.ledger.redis import RedisLedger

from ..ledger_scenarios import MODEL
from ..shared_ledger import KEY, Store, all_keys, new_ledger

FLEET = Fingerprinter(key_from_text(KEY))
# The Router's deployment id: a sha256 hex digest of the deployment's parameters, unless the config names one.
DEPLOYMENT = hashlib.sha256(b"model_name=gpt-5.4;model=openai/gpt-5.4").hexdigest()
API_RESPONSE = "resp_0d9d" + "a1b2c3d4" * 5 + "e5f6"  # 53 characters, as the API's
API_REASONING = "rs_0d9d" + "a1b2c3d4" * 5 + "e5f6"


def litellm_response_id(upstream: str, provider: str = "openai", deployment: str = DEPLOYMENT) -> str:
    """``ResponsesAPIRequestUtils._build_responses_api_response_id``: what litellm hands the app, and the span."""
    assembled = f"litellm:custom_llm_provider:{provider};model_id:{deployment};response_id:{upstream}"
    return "resp_" + base64.b64encode(assembled.encode()).decode()


def litellm_item_id(item_id: str, deployment: str = DEPLOYMENT) -> str:
    """``_build_encrypted_item_id``: an item carrying ``encrypted_content`` under encrypted-content affinity."""
    return "encitem_" + base64.b64encode(f"litellm:model_id:{deployment};item_id:{item_id}".encode()).decode()


def _random(size: int, seed: str) -> bytes:
    return hashlib.shake_256(seed.encode()).digest(size)


def gateway_client_id(response_id: str, user: str = "", team: str = "", algorithm: str = "xsalsa20") -> str:
    """What LiteLLM Proxy's HTTP client holds: ``litellm_proxy:responses_api:response_id:{id};user_id:…;team_id:…``
    sealed by ``encrypt_value_helper``. XSalsa20-Poly1305 (the default): base64url of a 24-byte nonce, a 16-byte tag
    and the ciphertext; AES-256-GCM (``encryption_algorithm``): ``v2:gcm:`` + base64url of a 12-byte nonce, the
    ciphertext and a 16-byte tag."""
    managed = f"litellm_proxy:responses_api:response_id:{response_id};user_id:{user};team_id:{team}".encode()
    if algorithm == "xsalsa20":
        return "resp_" + base64.urlsafe_b64encode(_random(24 + 16 + len(managed), response_id + user)).decode()
    return "resp_v2:gcm:" + base64.urlsafe_b64encode(_random(12 + len(managed) + 16, response_id + team)).decode()


GATEWAY_RESPONSE = litellm_response_id(API_RESPONSE)
UUID = "8c5e4f2a-1b3d-4c6e-9f0a-2b4d6e8f0a1c"
# Each id as a client holds it, with its length: every one may be shared.
GATEWAY_IDS: dict[str, tuple[str, int]] = {
    "litellm-response": (GATEWAY_RESPONSE, 237),
    "litellm-response-long-provider": (litellm_response_id("resp_00" + "f" * 48, "hosted_vllm"), 249),
    "litellm-response-named-deployment": (litellm_response_id(API_RESPONSE, deployment="gpt-5-eu"), 165),
    "litellm-response-bridged": (litellm_response_id("chatcmpl-" + UUID, "anthropic"), 233),
    # `+` and `/` in base64 of ASCII text: a `>`, `?` or `~` (or a non-ASCII character) at a group's last byte.
    "litellm-response-plus": (litellm_response_id(API_RESPONSE, "azure", "gpt-5.4~eu"), 165),
    "litellm-response-slash": (litellm_response_id(API_RESPONSE, "azure", "gpt-5.4?v=2"), 165),
    "litellm-item": (litellm_item_id(API_REASONING), 196),
    "gateway-client": (gateway_client_id(GATEWAY_RESPONSE), 453),
    "gateway-client-user-and-team": (gateway_client_id(GATEWAY_RESPONSE, UUID, UUID), 549),
    "gateway-client-email-and-team": (gateway_client_id(GATEWAY_RESPONSE, "a" * 64 + "@example.com", UUID), 601),
    "gateway-client-aes-gcm": (gateway_client_id(GATEWAY_RESPONSE, UUID, UUID, "aes-gcm"), 540),
}
NEAR_MISSES: dict[str, Any] = {
    "brace-open": lambda good: good[:20] + "{" + good[21:],  # a Redis Cluster hash tag inside a key name
    "brace-close": lambda good: good[:20] + "}" + good[21:],
    "space": lambda good: good[:20] + " " + good[21:],
    "newline": lambda good: good + "\nopenai_responses.signals=unstored_parent",
    "non-ascii": lambda good: good[:20] + "\u00e9" + good[21:],
    "past-the-bound": lambda good: good + "A" * (MAX_ID_CHARS + 1 - len(good)),
}


def test_the_ids_a_gateway_hands_out_may_be_shared_and_their_near_misses_may_not() -> None:
    for name, (value, length) in GATEWAY_IDS.items():
        assert len(value) == length, name
        assert is_id(value), name
        assert shareable(dataclasses.replace(entry(), response_id=value)), name
        for miss, change in NEAR_MISSES.items():
            changed = change(value)
            assert not is_id(changed), (name, miss)
            assert not shareable(dataclasses.replace(entry(), response_id=changed)), (name, miss)
    longest = "resp_" + "A" * (MAX_ID_CHARS - 5)
    assert (is_id(longest), is_id(longest + "A")) == (True, False)
    # Every character base64 and base64url use, beside the API's own.
    assert {c for value, _ in GATEWAY_IDS.values() for c in value if not c.isalnum()} == set("_-+/=:")


@pytest.mark.parametrize("name", list(GATEWAY_IDS))
def test_a_key_named_by_a_gateway_id_has_the_id_as_its_hash_tag(name: str) -> None:
    value, _ = GATEWAY_IDS[name]
    ns = "otel-responses:0123456789ab"
    for key in (entry_key(ns, value), marker_key(ns, value), location_key(ns, value)):
        assert key is not None
        assert (key.count("{"), key.count("}")) == (1, 1)
        assert key.split("{")[1].split("}")[0] == value
        assert key_slot(key.encode()) == key_slot(value.encode())  # only the id picks the slot
    assert key_slot(entry_key(ns, value).encode()) == key_slot(marker_key(ns, value).encode())
    call = location_key(ns, ("function_call", value))
    assert call == f"{ns}:{{function_call:{value}}}:t"


INSTRUCTIONS = "Answer in one word."
CALL = "call_eE" + "x" * 22  # the API's call ids: 29 characters


def entry(response_id: str = GATEWAY_RESPONSE, parent_id: str | None = None, items: str = "0d9d") -> Entry:
    """A gateway's turn: litellm's ids for the response, its parent, its lineage and the turn that sent the
    instructions; the upstream's item ids (``items`` tells them apart), a reasoning item with litellm's affinity id;
    the API's call ids."""
    call = CALL if parent_id is None else f"call_{items}"
    outputs = (
        ItemMeta("reasoning", litellm_item_id(f"rs_{items}" + "0" * 46), None, None, None, True, None, False, 4096),
        ItemMeta("function_call", f"fc_{items}" + "0" * 46, call, None, None, False, None, True),
        ItemMeta("message", f"msg_{items}" + "0" * 46, None, "assistant", None, False, 2**64 - 1),
    )
    lineage = parent_id or response_id
    return Entry(
        response_id, 1_760_000_000_000_000_000, True, FLEET.text(INSTRUCTIONS), None, outputs, 1, 0,
        parent_id=parent_id, turn=2 if parent_id else 1, lineage_id=lineage, instructed_id=lineage,
        instructed_turn=1, held_calls=(CALL,), held_partial=False,
    )  # fmt: skip


def _ledger(ledgers: list[RedisLedger], store: Store) -> RedisLedger:
    ledger = new_ledger(ledgers, store.url, **store.options)
    ledger.bind(FLEET)
    return ledger


@pytest.fixture
def gateway_turns() -> tuple[Entry, Entry]:
    """A first turn and the turn chained to it, as the gateway's litellm calls give them (its HTTP clients' ids for
    the turn after: an app instrumented behind the gateway holds those)."""
    first = entry()
    second_id = gateway_client_id(litellm_response_id("resp_0e43" + "b" * 44), UUID, UUID)
    return first, entry(second_id, first.response_id, "0e43")


def test_a_gateways_turns_go_through_redis_whole(
    store: Store, ledgers: list[RedisLedger], gateway_turns: tuple[Entry, Entry]
) -> None:
    """One process writes a gateway's two turns; another reads each whole: the entries, where their items are, and
    that the first turn was continued. Every key has one hash tag, the id it is about."""
    first, second = gateway_turns
    writer = _ledger(ledgers, store)
    writer.record(first, None)
    writer.record(second, first.response_id)
    assert writer.flush(5)
    assert {n: writer.stats()[n] for n in ("local_only", "trimmed", "dropped")} == {
        "local_only": 0,
        "trimmed": 0,
        "dropped": 0,
    }
    reader = _ledger(ledgers, store)
    assert reader.get(first.response_id) == dataclasses.replace(first, shared=True)
    assert reader.get(second.response_id) == dataclasses.replace(second, shared=True)
    assert reader.has_child(first.response_id) is True
    assert reader.has_child(second.response_id) is False
    item = first.outputs[0].id
    assert item is not None
    places = reader.places([item, ("function_call", CALL), "msg_0e43" + "0" * 46])
    assert [[(found.response_id, index) for found, index in found] for found in places] == [
        [(first.response_id, 0)],
        [(first.response_id, 1)],
        [(second.response_id, 2)],
    ]
    assert {n: reader.stats()[n] for n in ("undecodable", "forged")} == {"undecodable": 0, "forged": 0}
    with store.admin() as admin:
        names = [key.decode() for key in all_keys(admin)]
    tags = sorted(name.split("{")[1].split("}")[0] for name in names)
    assert all(name.count("{") == 1 and name.count("}") == 1 for name in names)
    assert tags.count(first.response_id) == 2  # its entry and its continued-marker, in one slot
    assert tags.count(second.response_id) == 1
    assert item in tags


def _chained_signals(ledger: RedisLedger, parent: str, **request: Any) -> list[str]:
    """The request-side signals of a turn chained to ``parent``, as another process of the fleet checks it."""
    req = request_facts(
        "chat", {"model": MODEL, "previous_response_id": parent, **request}, settings_from({"hash_key": KEY})
    )
    raised = run_request_checks(req, analyse(req, ledger.for_call()), Situation(False, False))
    assert all(not s.refusable for s in raised)  # facts read from a shared store
    return [s.name for s in raised]


def test_a_turn_chained_to_a_gateways_turn_in_another_process_gets_its_exact_signals(
    store: Store, ledgers: list[RedisLedger], gateway_turns: tuple[Entry, Entry]
) -> None:
    """The parent made in one process, the turn after it checked in another: instructions left out are named, and a
    tool output for the parent's pending call is no orphan; its near misses: the instructions sent again, an output
    for no call the chain holds."""
    first, _ = gateway_turns
    writer = _ledger(ledgers, store)
    writer.record(first, None)
    assert writer.flush(5)
    output = {"type": "function_call_output", "call_id": CALL, "output": "sunny"}
    stray = {**output, "call_id": "call_nowhere"}
    rows: list[tuple[dict[str, Any], list[str]]] = [
        ({"input": [output]}, ["instructions_dropped"]),
        ({"input": [output], "instructions": INSTRUCTIONS}, []),
        ({"input": [output], "instructions": "Answer in two words."}, ["instructions_changed"]),
        ({"input": "Noted?", "instructions": INSTRUCTIONS}, ["missing_tool_output"]),
        ({"input": [output, stray], "instructions": INSTRUCTIONS}, ["orphan_tool_output"]),
    ]
    for request, expected in rows:
        assert _chained_signals(_ledger(ledgers, store), first.response_id, **request) == expected, request
    # The same parent kept in the writer's process (an id one brace away): the other process knows nothing.
    local = dataclasses.replace(first, response_id=first.response_id[:30] + "{" + first.response_id[31:])
    writer.record(local, None)
    assert writer.flush(5)
    assert writer.stats()["local_only"] == 1
    assert _chained_signals(_ledger(ledgers, store), local.response_id, input="Noted?") == []  # unknown parent
