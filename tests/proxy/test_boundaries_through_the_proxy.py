"""Reasoning the API withheld and payloads replayed across a boundary, through the proxy: the proxy reads whom a call
is made as from its headers (``OpenAI-Organization``, ``OpenAI-Project``, the credential by its digest only), so a
model switch, an organization switch, a changed ``safety_identifier``, a key pool across organizations and the turn
boundary are recorded as the SDK instrumented in-process records them — span for span, against the same reset
emulator: the effective reasoning context, the withheld count and reasons, ``encrypted_content_foreign`` and
``reasoning_withheld``, the metric of withheld items by reason — over HTTP and over a WebSocket, and in the command's
own analysis process (exported over OTLP), where no organization, key or digest reaches an export.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from multidict import CIMultiDict
from openai.resources.responses.responses import Responses

from otel_responses import attributes as a
from otel_responses._patching.identity import credential_digest
from otel_responses.emulator import Emulator, EmulatorConfig
from otel_responses.proxy.headers import CREDENTIAL_DIGEST, caller
from otel_responses.testing import CapturedTelemetry, capture

from ..sdk.test_payload_boundaries import ALL_TURNS, ENCRYPTED, _switch
from ..support import withheld_reasons
from .support import KEY, proxied
from .test_proxy_command import _stopped, started
from .test_scenarios_through_the_proxy import _events, _record

# -- the rows: what the relay hands the analysis of whom a call is made as -----------------------------------------

SHA = credential_digest
CALLERS: list[tuple[dict[str, str], list[tuple[str, str]]]] = [
    ({"Authorization": "Bearer sk-1"}, [(CREDENTIAL_DIGEST, SHA("sk-1"))]),  # the SDK's key, its digest only
    ({"authorization": "bearer sk-1"}, [(CREDENTIAL_DIGEST, SHA("sk-1"))]),  # the scheme's name is any case
    ({"api-key": "az-1"}, [(CREDENTIAL_DIGEST, SHA("az-1"))]),  # Azure's key
    ({"Authorization": "Basic dTpw"}, []),  # near miss: another scheme is no key the SDK sends
    ({"Authorization": "Bearer "}, []),  # near miss: an empty token
    (
        {"OpenAI-Organization": "org-a", "OpenAI-Project": "proj-a", "Authorization": "Bearer sk-1"},
        [("openai-organization", "org-a"), ("openai-project", "proj-a"), (CREDENTIAL_DIGEST, SHA("sk-1"))],
    ),
    ({"OpenAI-Organization": ""}, []),  # near miss: a header that names nothing
    ({"X-Organization": "org-a"}, []),  # near miss: not the SDK's header
]


@pytest.mark.parametrize(("sent", "read"), CALLERS)
def test_whom_a_call_is_made_as_is_read_from_its_headers_and_the_key_never_crosses(
    sent: dict[str, str], read: list[tuple[str, str]]
) -> None:
    assert caller(CIMultiDict(sent)) == read


ORGANIZATIONS = {"key-a": "org-a", "key-b": "org-b"}
Clients = Callable[..., openai.OpenAI]


def model_switch(clients: Clients) -> Any:
    with clients() as client:
        return _switch(client, client, ("gpt-5.4", "gpt-5.5"))


def organization_switch(clients: Clients) -> Any:
    with clients(organization="org-a") as one, clients(organization="org-b") as other:
        return _switch(one, other)


def organization_kept(clients: Clients) -> Any:
    with clients(organization="org-a") as one, clients(organization="org-a") as same:
        return _switch(one, same)


def end_user_changed(clients: Clients) -> Any:
    with clients() as client:
        opening: Any = {"role": "user", "content": "Choose a code word."}
        options: Any = {"store": False, "include": ENCRYPTED, "reasoning": ALL_TURNS}
        chose = client.responses.create(model="gpt-5.4", input=[opening], safety_identifier="user-a", **options)
        history: Any = [opening, *(item.model_dump(exclude_none=True) for item in chose.output)]
        history.append({"role": "user", "content": "What is the code word?"})
        return client.responses.create(model="gpt-5.4", input=history, safety_identifier="user-b", **options)


def key_pool_across_organizations(clients: Clients) -> Any:
    with clients(api_key="key-a") as one, clients(api_key="key-b") as other:
        return _switch(one, other)


def turn_boundary(clients: Clients) -> Any:
    with clients() as client:
        return _switch(client, client, reasoning={})  # the model's default: current_turn


# (the flow, the signals of its two chat spans, the reasons the second answer withheld reasoning for)
CASES: dict[str, tuple[Callable[[Clients], Any], list[tuple[str, ...]], list[str]]] = {
    "model switch": (model_switch, [(), ("encrypted_content_foreign", "reasoning_withheld")], ["model_mismatch"]),
    "organization switch": (
        organization_switch,
        [(), ("encrypted_content_foreign", "reasoning_withheld")],
        ["organization_mismatch"],
    ),
    "organization kept (near miss)": (organization_kept, [(), ()], []),
    "end user changed": (end_user_changed, [(), ("reasoning_withheld",)], ["end_user_mismatch"]),
    # Nothing named before sending: the answer confirms the crossing, the credential its detail.
    "key pool across organizations": (
        key_pool_across_organizations,
        [(), ("reasoning_withheld", "encrypted_content_foreign")],
        ["organization_mismatch"],
    ),
    "turn boundary": (turn_boundary, [(), ()], ["turn_boundary"]),
}


@pytest.fixture(scope="module")
def emulated() -> Iterator[Emulator]:
    with Emulator(EmulatorConfig(key_organizations=ORGANIZATIONS)) as run:
        yield run


def _signals(spans: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return [tuple(s["attributes"]["openai_responses.signals"]) for s in spans if s["name"].startswith("chat")]


def _withheld(captured: CapturedTelemetry) -> dict[str, int]:
    points = captured.metric_points(a.METRIC_WITHHELD_ITEMS)
    return {p.attributes[a.WITHHELD_REASON]: p.value for p in points}


@pytest.mark.parametrize("case", list(CASES))
def test_a_crossing_is_recorded_through_the_proxy_as_in_process(emulated: Emulator, case: str) -> None:
    flow, signals, reasons = CASES[case]
    emulated.reset()
    with capture(hash_key=KEY) as captured:
        direct = flow(emulated.client)
        theirs, their_events, their_withheld = _record(captured.spans()), _events(captured), _withheld(captured)
    emulated.reset()
    with proxied(emulated.base_url) as through:
        relayed = flow(through.client)
        ours = _record(through.wait_for_spans(len(theirs)))
        our_events, our_withheld = _events(through.captured), _withheld(through.captured)
    assert relayed.output_text == direct.output_text
    assert withheld_reasons(relayed) == reasons
    assert _signals(ours) == signals
    for number, (want, got) in enumerate(zip(theirs, ours, strict=True)):
        assert got == want, f"span {number + 1}"
    assert our_events == their_events
    assert our_withheld == their_withheld == dict.fromkeys(reasons, 1)
    second = ours[-1]["attributes"]
    assert second.get(a.REASONING_WITHHELD_REASONS) == (tuple(reasons) if reasons else None)
    assert second[a.RESPONSE_REASONING_CONTEXT] == ("current_turn" if case == "turn boundary" else "all_turns")


@pytest.mark.skipif(not hasattr(Responses, "connect"), reason="responses.connect() is openai 2.22+")
def test_an_organization_switch_between_sockets_is_recorded_through_the_proxy_as_in_process(
    emulated: Emulator,
) -> None:
    """Each socket is made as the organization its handshake names: the proxy names the crossing before the
    request leaves."""

    def switched(clients: Clients) -> list[str]:
        opening: Any = {"role": "user", "content": "Choose a code word."}
        options: Any = {"model": "gpt-5.4", "store": False, "include": ENCRYPTED, "reasoning": ALL_TURNS}
        with clients(organization="org-a") as one, one.responses.connect() as first:
            first.response.create(input=[opening], **options)
            chose = _done(first)
        history: Any = [opening, *(item.model_dump(exclude_none=True) for item in chose.response.output)]
        history.append({"role": "user", "content": "What is the code word?"})
        with clients(organization="org-b") as other, other.responses.connect() as second:
            second.response.create(input=history, **options)
            answer = _done(second)
        return withheld_reasons(answer.response)

    emulated.reset()
    with capture(hash_key=KEY) as captured:
        direct = switched(emulated.client)
        theirs = _record(captured.spans())
    emulated.reset()
    with proxied(emulated.base_url) as through:
        relayed = switched(through.client)
        ours = _record(through.wait_for_spans(len(theirs)))
    assert relayed == direct == ["organization_mismatch"]
    # The proxy reads whom each socket is made as from its handshake; in-process, the SDK's connection keeps no
    # reference to its client: the crossing is the API's report alone there (reasoning_withheld).
    assert _signals(ours) == [(), ("encrypted_content_foreign", "reasoning_withheld")]
    assert _signals(theirs) == [(), ("reasoning_withheld",)]
    for record in ours:  # the proxy knows its upstream; an SDK socket does not say where it goes
        record["attributes"].pop("server.address")
        record["attributes"].pop("server.port")
    for record in (*ours, *theirs):
        record["attributes"].pop("openai_responses.signals")
        record["events"] = [e for e in record["events"] if "encrypted_content_foreign" not in str(e)]
    for number, (want, got) in enumerate(zip(theirs, ours, strict=True)):
        assert got == want, f"span {number + 1}"


def _done(connection: Any) -> Any:
    for event in connection:
        if event.type in ("response.completed", "response.incomplete", "response.failed", "error"):
            return event
    raise AssertionError("the connection closed first")


# -- the command: its analysis in a process of its own ------------------------------------------------------------


def test_the_commands_analysis_process_reads_whom_each_call_is_made_as() -> None:
    from ..hostile import LoopbackAPI, Reply

    flows = ("model switch", "organization switch", "organization kept (near miss)", "key pool across organizations")
    with (
        Emulator(EmulatorConfig(key_organizations=ORGANIZATIONS)) as emulator,
        LoopbackAPI(lambda received, index: Reply(200, b"")) as collector,
    ):
        with started(
            "--upstream",
            emulator.base_url,
            "--listen",
            "127.0.0.1:0",
            "--otlp-endpoint",
            collector.base_url.removesuffix("/v1"),
            env={"OTEL_INSTRUMENTATION_OPENAI_RESPONSES_HASH_KEY": KEY},
        ) as (process, base_url):

            def clients(**options: Any) -> openai.OpenAI:
                return openai.OpenAI(**{"base_url": base_url, "api_key": "key-a", "max_retries": 0, **options})

            for flow in flows:
                CASES[flow][0](clients)
            code, _ = _stopped(process)  # the batch processors flush as it stops
        received = list(collector.received)
    assert code == 0
    spans = [span for r in received if r.path == "/v1/traces" for span in _spans(r.body)]
    chat = sorted((s for s in spans if s["name"].startswith("chat")), key=lambda s: s["start"])
    assert [tuple(s["attributes"].get("openai_responses.signals", ())) for s in chat] == [
        signal for flow in flows for signal in CASES[flow][1]
    ]
    assert [s["attributes"].get(a.REASONING_WITHHELD_REASONS) for s in chat[1::2]] == [
        ("model_mismatch",),
        ("organization_mismatch",),
        None,
        ("organization_mismatch",),
    ]
    withheld = [p for r in received if r.path == "/v1/metrics" for p in _points(r.body, a.METRIC_WITHHELD_ITEMS)]
    assert withheld[-1] == {"model_mismatch": 1, "organization_mismatch": 2}  # cumulative: the last export
    exported = b"".join(gzip.decompress(r.body) if r.body[:2] == b"\x1f\x8b" else r.body for r in received)
    digests = [_digest(key) for key in ORGANIZATIONS]
    for secret in (b"org-a", b"org-b", b"key-a", b"key-b", *digests):
        assert secret not in exported


def _digest(key: str) -> bytes:
    return credential_digest(key).encode()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind) if kind is not None else None


def _spans(body: bytes) -> list[dict[str, Any]]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
    return [
        {
            "name": span.name,
            "start": span.start_time_unix_nano,
            "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
        }
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def _points(body: bytes, name: str) -> list[dict[str, int]]:
    """Each export's data points of the counter ``name``, by withheld reason."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    request = ExportMetricsServiceRequest.FromString(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
    found = []
    for resource in request.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found.append(
                        {
                            str(_value(kv.value)): point.as_int
                            for point in metric.sum.data_points
                            for kv in point.attributes
                            if kv.key == a.WITHHELD_REASON
                        }
                    )
    return found
