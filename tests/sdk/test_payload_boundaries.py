"""The boundaries an encrypted payload cannot cross: a reasoning or compaction payload replayed to another model, or
under another organization or project than the one that minted it. The API withholds such reasoning from the model
(`input_transformations`) or refuses the request (400 `invalid_encrypted_content` naming the organization or the
caller): `encrypted_content_foreign` (warning, never refused) names it before the request leaves, from what the
ledger knows of whom each payload was minted for (keyed fingerprints, never exported). Another endpoint or credential
is no evidence before sending (key pools, two base URLs of one organization): it appears only as detail once the
API confirms a crossing. A `previous_response_id` of another organization is an `unstored_parent` variant.

Rows first (each beside its near miss), then end to end against the emulator, whose organization is the
`OpenAI-Organization` header (or the API key's, `EmulatorConfig.key_organizations`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from otel_responses import ContextLossError
from otel_responses import attributes as a
from otel_responses._analysis.boundaries import crossed, same_model
from otel_responses._analysis.checks import confirmed_by_api
from otel_responses._analysis.facts import Identity
from otel_responses.emulator import Emulator, EmulatorConfig
from otel_responses.ledger import Entry
from otel_responses.signals import Signal
from otel_responses.testing import CapturedTelemetry, capture

from ..support import chat_signals, signal_events, withheld_reasons

ENCRYPTED: Any = ["reasoning.encrypted_content"]
ALL_TURNS: Any = {"context": "all_turns"}


# -- the rows ------------------------------------------------------------------------------------------------------

# (asked, minted by (model asked, model answered), the same model?)
MODELS: list[tuple[str | None, tuple[str | None, str | None], bool | None]] = [
    ("gpt-5.4", ("gpt-5.4", "gpt-5.4-2026-03-05"), True),
    ("gpt-5.4-2026-03-05", ("gpt-5.4", None), True),  # a dated snapshot of the alias
    ("gpt-5.4", ("gpt-5.4-2026-03-05", None), True),
    ("gpt-5.4", (None, "gpt-5.4-2026-03-05"), True),  # only the answering model known
    ("openai/gpt-5.4", ("gpt-5.4", None), True),  # a gateway's provider prefix
    ("gpt-5.5", ("gpt-5.4", "gpt-5.4-2026-03-05"), False),  # a model switch
    ("gpt-5.4-mini", ("gpt-5.4", None), False),  # another model of the family
    ("gpt-5.4-mini-2026-03-17", ("gpt-5.4", None), False),
    (None, ("gpt-5.4", None), None),  # nothing known: never a crossing
    ("gpt-5.4", (None, None), None),
]


@pytest.mark.parametrize(("asked", "minted", "same"), MODELS)
def test_a_model_is_the_one_a_payload_was_made_by_or_a_snapshot_of_it(
    asked: str | None, minted: tuple[str | None, str | None], same: bool | None
) -> None:
    assert same_model(asked, Entry("resp_1", model=minted[0], resolved_model=minted[1])) is same


MINTED = Entry("resp_1", model="gpt-5.4", organization=1, project=2, credential=3, endpoint=4)

# (the request's identity, the boundaries crossed) — each beside its near miss.
IDENTITIES: list[tuple[Identity | None, list[str]]] = [
    (Identity(1, 2, 3, 4), []),
    (Identity(9, 2, 3, 4), ["organization"]),
    (Identity(1, 9, 3, 4), ["project"]),
    (Identity(None, None, 3, 4), []),  # names no organization: its key's default, which nothing here can tell
    (Identity(1, 2, 9, 4), ["credential"]),  # a key pool: evidence only once the API confirms a crossing
    (Identity(1, 2, 3, 9), ["endpoint"]),  # another base URL of the same organization, likewise
    (None, []),  # a library's own transport: nothing known
]


@pytest.mark.parametrize(("identity", "kinds"), IDENTITIES)
def test_the_boundaries_a_request_crosses(identity: Identity | None, kinds: list[str]) -> None:
    assert crossed("gpt-5.4", identity, [MINTED]) == kinds
    assert crossed("gpt-5.5", identity, [MINTED]) == ["model", *kinds]


ORGANIZATION_ANSWER = (
    "The encrypted content gAAA...Zx== could not be verified. Reason: Encrypted content organization_id did not "
    "match the target organization."
)
CALLER_ANSWER = (
    "Upstream request failed: [invalid_request_error] reasoning `encrypted_content` was not issued to this caller"
)
REWRITTEN_ANSWER = (
    "The encrypted content could not be verified. Reason: Encrypted content item_id did not match the target item id."
)
PARSE_ANSWER = (
    "The encrypted content for item rs_1 could not be verified. Reason: Encrypted content could not be decrypted or "
    "parsed."
)
FOREIGN = Signal("encrypted_content_foreign", {a.ITEM_IDS: ["rs_1"], a.ENCRYPTED_CROSSED: ["model"]})
MODIFIED = Signal("encrypted_content_modified", {a.ITEM_IDS: ["rs_1"]})

# (signals before sending, the API's answer, the boundaries the analysis found, the signals after it: name and
# crossed)
ANSWERS: list[tuple[list[Signal], str | None, list[str], list[tuple[str, Any]]]] = [
    ([], ORGANIZATION_ANSWER, [], [("encrypted_content_foreign", None)]),
    ([], ORGANIZATION_ANSWER, ["credential"], [("encrypted_content_foreign", ("credential",))]),
    ([], CALLER_ANSWER, ["endpoint"], [("encrypted_content_foreign", ("endpoint",))]),
    ([], PARSE_ANSWER, ["credential"], [("encrypted_content_modified", None)]),  # names no boundary
    ([FOREIGN], PARSE_ANSWER, [], [("encrypted_content_foreign", ("model",))]),  # a crossing seen before sending
    ([FOREIGN], PARSE_ANSWER, ["model", "credential"], [("encrypted_content_foreign", ("model", "credential"))]),
    (
        [FOREIGN],
        REWRITTEN_ANSWER,
        [],
        [("encrypted_content_foreign", ("model",)), ("encrypted_content_modified", None)],
    ),
    ([], REWRITTEN_ANSWER, ["credential"], [("encrypted_content_modified", None)]),  # the client rewrote the id
    ([MODIFIED], ORGANIZATION_ANSWER, [], [("encrypted_content_modified", None), ("encrypted_content_foreign", None)]),
    ([], None, [], [("encrypted_content_modified", None)]),  # a stream's error event: its code alone
]


@pytest.mark.parametrize(("before", "answer", "found", "after"), ANSWERS)
def test_an_invalid_encrypted_content_naming_a_boundary_confirms_a_crossing(
    before: list[Signal], answer: str | None, found: list[str], after: list[tuple[str, Any]]
) -> None:
    confirmed = confirmed_by_api(before, "invalid_encrypted_content", answer, found)
    assert [(s.name, _crossed(s)) for s in confirmed] == after
    assert all(s.detail.get(a.CONFIRMED) is True for s in confirmed if s not in before)
    assert confirmed_by_api(before, "previous_response_not_found", answer, found) == before  # another refusal


def _crossed(signal: Signal) -> Any:
    value = signal.detail.get(a.ENCRYPTED_CROSSED)
    return tuple(value) if isinstance(value, (list, tuple)) else None


# -- end to end --------------------------------------------------------------------------------------------------


@pytest.fixture
def emulated() -> Iterator[Emulator]:
    with Emulator(EmulatorConfig(key_organizations={"key-a": "org-a", "key-b": "org-b", "key-a2": "org-a"})) as run:
        yield run


def _switch(
    first: openai.OpenAI, second: openai.OpenAI, models: tuple[str, str] = ("gpt-5.4", "gpt-5.4"), **options: Any
) -> Any:
    """A code word chosen on turn 1 (in its reasoning only) by ``first``; turn 2 replays everything through
    ``second``, with `all_turns` so the earlier turn's reasoning is rendered back where nothing crosses."""
    options = {"store": False, "include": ENCRYPTED, "reasoning": ALL_TURNS, **options}
    opening: Any = {"role": "user", "content": "Choose a code word."}
    chose = first.responses.create(model=models[0], input=[opening], **options)
    history: Any = [opening, *(item.model_dump(exclude_none=True) for item in chose.output)]
    history.append({"role": "user", "content": "What is the code word?"})
    return second.responses.create(model=models[1], input=history, **options)


def _crossed_of(telemetry: CapturedTelemetry, span: int) -> list[Any]:
    return [
        (tuple(e.get(a.ENCRYPTED_CROSSED, ())), e.get(a.CONFIRMED))
        for e in signal_events(telemetry.chat_spans()[span], "encrypted_content_foreign")
    ]


def test_a_model_switch_mid_conversation(emulated: Emulator) -> None:
    with capture() as telemetry, emulated.client() as client:
        switched = _switch(client, client, ("gpt-5.4", "gpt-5.5"))
        kept = _switch(client, client)
    assert switched.output_text == "code_word=unknown"  # another model's reasoning is withheld from it
    assert withheld_reasons(switched) == ["model_mismatch"]
    assert kept.output_text.startswith("code_word=CW-")
    assert chat_signals(telemetry) == [(), ("encrypted_content_foreign", "reasoning_withheld"), (), ()]
    assert _crossed_of(telemetry, 1) == [(("model",), True)]  # named before it left, confirmed by the answer


def test_an_organization_switch(emulated: Emulator) -> None:
    with capture() as telemetry:
        with emulated.client(organization="org-a") as a_client, emulated.client(organization="org-b") as b_client:
            switched = _switch(a_client, b_client)
        with emulated.client(organization="org-a") as one, emulated.client(organization="org-a") as same:
            kept = _switch(one, same)
    assert withheld_reasons(switched) == ["organization_mismatch"]
    assert switched.output_text == "code_word=unknown"
    assert kept.output_text.startswith("code_word=CW-")
    assert chat_signals(telemetry) == [(), ("encrypted_content_foreign", "reasoning_withheld"), (), ()]
    assert _crossed_of(telemetry, 1) == [(("organization",), True)]
    assert "org-a" not in str([dict(s.attributes or {}) for s in telemetry.spans()])


def test_a_key_pool_and_two_base_urls_of_one_organization_cross_nothing(emulated: Emulator) -> None:
    local = emulated.base_url.replace("127.0.0.1", "localhost")
    with capture() as telemetry, emulated.client(api_key="key-a") as one, emulated.client(api_key="key-a2") as two:
        pooled = _switch(one, two)
        with emulated.client(api_key="key-a", base_url=local) as elsewhere:
            moved = _switch(one, elsewhere)
    assert pooled.output_text.startswith("code_word=CW-")
    assert moved.output_text.startswith("code_word=CW-")
    assert chat_signals(telemetry) == [(), (), (), ()]


def test_a_key_pool_across_organizations_is_confirmed_by_the_api_with_the_credential(emulated: Emulator) -> None:
    """No request names an organization: the keys' own differ. Nothing shows before sending; the answer withholds
    the reasoning, and the crossing is named with what changed: the credential."""
    with capture() as telemetry, emulated.client(api_key="key-a") as one, emulated.client(api_key="key-b") as other:
        pooled = _switch(one, other)
    assert withheld_reasons(pooled) == ["organization_mismatch"]
    assert chat_signals(telemetry) == [(), ("reasoning_withheld", "encrypted_content_foreign")]  # in that order
    assert _crossed_of(telemetry, 1) == [(("credential",), True)]


@pytest.fixture
def refusing() -> Iterator[Emulator]:
    config = EmulatorConfig(foreign_reasoning="refuse", key_organizations={"key-a": "org-a", "key-b": "org-b"})
    with Emulator(config) as run:
        yield run


def test_a_refused_organization_switch_is_foreign_not_modified(refusing: Emulator) -> None:
    with capture() as telemetry:
        with (
            refusing.client(organization="org-a") as a_client,
            refusing.client(organization="org-b") as b_client,
            pytest.raises(openai.BadRequestError) as refused,
        ):
            _switch(a_client, b_client)
        with (
            refusing.client(api_key="key-a") as one,
            refusing.client(api_key="key-b") as other,
            pytest.raises(openai.BadRequestError) as pooled,
        ):
            _switch(one, other)
    assert refused.value.code == pooled.value.code == "invalid_encrypted_content"
    assert "organization_id did not match the target organization" in refused.value.message
    assert chat_signals(telemetry) == [(), ("encrypted_content_foreign",), (), ("encrypted_content_foreign",)]
    assert _crossed_of(telemetry, 1) == [(("organization",), True)]
    assert _crossed_of(telemetry, 3) == [(("credential",), True)]  # nothing showed before sending


def test_a_refused_model_switch_is_foreign_and_a_cut_payload_modified(refusing: Emulator) -> None:
    with capture() as telemetry, refusing.client() as client:
        with pytest.raises(openai.BadRequestError) as refused:
            _switch(client, client, ("gpt-5.4", "gpt-5.5"))
        opening: Any = {"role": "user", "content": "Choose a code word."}
        chose = client.responses.create(model="gpt-5.4", input=[opening], store=False, include=ENCRYPTED)
        items: Any = [item.model_dump(exclude_none=True) for item in chose.output]
        items[0]["encrypted_content"] = items[0]["encrypted_content"][:-8]
        with pytest.raises(openai.BadRequestError) as cut:
            client.responses.create(model="gpt-5.4", input=[opening, *items, {"role": "user", "content": "?"}])
    assert "could not be decrypted or parsed" in refused.value.message
    assert cut.value.code == "invalid_encrypted_content"
    assert chat_signals(telemetry) == [(), ("encrypted_content_foreign",), (), ("encrypted_content_modified",)]


def test_a_parent_of_another_organization_is_named_and_never_refused(emulated: Emulator) -> None:
    with (
        capture(strict=True) as telemetry,
        emulated.client(organization="org-a") as a_client,
        emulated.client(organization="org-b") as b_client,
    ):
        first = a_client.responses.create(model="gpt-4.1", input="Remember this: the marker is O-1.")
        with pytest.raises(openai.BadRequestError) as refused:  # the API's own answer, not strict mode's
            b_client.responses.create(model="gpt-4.1", input="What is the marker?", previous_response_id=first.id)
        same = a_client.responses.create(model="gpt-4.1", input="What is the marker?", previous_response_id=first.id)
    assert not isinstance(refused.value, ContextLossError)
    assert refused.value.code == "previous_response_not_found"
    assert same.output_text == "marker=O-1"
    assert chat_signals(telemetry) == [(), ("unstored_parent",), ()]
    (event,) = signal_events(telemetry.chat_spans()[1], "unstored_parent")
    assert event[a.PARENT_OTHER_ORGANIZATION] is True
    assert "another organization" in Signal("unstored_parent", event).meaning


@pytest.mark.skipif(not hasattr(openai.resources.responses.Responses, "compact"), reason="compact: openai 2.9.0")
def test_a_compaction_item_of_another_organization_is_refused(emulated: Emulator) -> None:
    with (
        capture() as telemetry,
        emulated.client(organization="org-a") as a_client,
        emulated.client(organization="org-b") as b_client,
    ):
        first = a_client.responses.create(model="gpt-5.4", input="Remember this: the marker is C-1.")
        compacted = a_client.responses.compact(model="gpt-5.4", previous_response_id=first.id)
        window: Any = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
        window.append({"role": "user", "content": "What is the marker?"})
        with pytest.raises(openai.BadRequestError) as refused:
            b_client.responses.create(model="gpt-5.4", input=window, store=False, include=ENCRYPTED)
        kept = a_client.responses.create(model="gpt-5.4", input=window, store=False, include=ENCRYPTED)
    assert kept.output_text == "marker=C-1"
    assert "organization_id did not match the target organization" in refused.value.message
    assert chat_signals(telemetry)[-2:] == [("encrypted_content_foreign",), ()]
