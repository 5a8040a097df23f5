"""LiteLLM Proxy (the gateway) as the way in: litellm's proxy server started as its users start it,
`opentelemetry-instrument litellm -c CONFIG --port P --host 127.0.0.1 --num_workers 1`, exporting over OTLP to a
receiver here, its model list pointing at the emulator, no database, the master key as the client's API key. The
real Python SDK sends the demo's flows through it (HTTP, streamed, and a WebSocket session, which the gateway
relays itself): one span per upstream call, each with exactly the signals the same flow raises in-process, and
neither key in anything exported. docs/litellm-proxy.md says what these tests hold.

Installed only in the gateway's virtualenv (tests/clients/requirements-gateway.txt, .ci/run): elsewhere the module
skips. litellm 1.110.2 opens the upstream WebSocket with an SSL context whatever the URL's scheme, which `websockets`
refuses for `ws://`: the emulator is reached through a TLS front (tls_front.py) whose certificate the gateway trusts
(`SSL_CERT_FILE`), over HTTP and the WebSocket alike.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("litellm")
pytest.importorskip("fastapi")  # the gateway's dependencies: in the gateway's virtualenv only
pytest.importorskip("cryptography")

import openai

from otel_responses._fingerprint import Fingerprinter, key_from_text
from otel_responses.emulator import Emulator
from otel_responses.ledger._codec import entry_key, is_id, marker_key
from otel_responses.testing import capture
from otel_responses.tools import scenarios

from ..support import free_port
from .otlp_receiver import OTLPReceiver, ReceivedSpan
from .support import responses_requests, signals_of
from .tls_front import TLSFront, self_signed

MODEL = scenarios.MODEL
MASTER_KEY = f"sk-gateway-master-{secrets.token_hex(8)}"
UPSTREAM_KEY = f"sk-upstream-{secrets.token_hex(8)}"
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")
# A worker writes its ledger entries to Redis in the background, off the call path; another worker reading a parent
# sooner than that finds nothing (a missed signal, never a false one). A turn of the fleet waits for its parent's entry
# (at most this long: generous, for a machine shared with other jobs; on a quiet one it is there within milliseconds).
LEDGER_WRITE_SECONDS = 10.0
# The fleet's hash key (every worker has it, as docs/ledger.md asks): the ledger's key names derive from it.
FLEET_HASH_KEY = secrets.token_hex(16)
# Generous: the gateway imports the whole proxy (several seconds on a quiet machine) on a machine shared with others.
STARTUP_SECONDS = 120
# The demo's flows (each with a marker of its own), each call's signals as the same flows raise them in-process. The
# two conversation flows are out of the gateway's reach: it has no Conversations API route; the model switch too (the
# gateway serves one model).
EXPECTED: dict[str, list[set[str]]] = {
    "server_chain": [set(), set(), set(), set()],
    "client_replay": [set(), set(), set(), set()],
    "client_replay_compacted": [set(), {"compaction"}, {"compaction"}, {"compaction"}],
    "chain_unstored_parent": [{"reasoning_not_replayable"}, {"unstored_parent"}],
    "chain_instructions_dropped": [set(), {"instructions_dropped"}, {"instructions_dropped"}, {"instructions_dropped"}],
    "chain_tool_output_missing": [set(), set(), {"missing_tool_output"}],
    "chain_context_duplicated": [set(), set(), {"phase_dropped", "context_duplicated"}, set()],
    "replay_output_text_only": [set(), *[{"reasoning_dropped", "phase_dropped"}] * 3],
    "replay_reasoning_altered": [set(), {"encrypted_content_modified"}],
    "replay_phase_lost": [set(), {"phase_dropped"}, {"phase_dropped"}, {"phase_dropped"}],
    "replay_tool_pair_broken": [set(), set(), {"replay_incomplete", "orphan_tool_output"}],
    "replay_history_cut": [set(), set(), set(), {"history_truncated", "reasoning_withheld"}],
}
CONVERSATIONS = [s for s in scenarios.SCENARIOS if s.mode == "conversation"]


@dataclass
class Gateway:
    url: str
    upstream_port: int  # the TLS front's, which the gateway calls its upstream
    emulator: Emulator
    receiver: OTLPReceiver
    log: Path

    def client(self) -> openai.OpenAI:
        """The app's client: the gateway's address, its master key as the API key."""
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=MASTER_KEY, max_retries=0)

    def chat_spans(self, since: int, count: int) -> list[ReceivedSpan]:
        """This package's chat spans exported after the first ``since`` spans, once ``count`` of them arrived (and
        any that came late or twice), in the order the calls were made."""

        return _chat(self.receiver.wait_for(_has(count), since))

    def roots(self, spans: list[ReceivedSpan]) -> list[str]:
        """The name of each span's trace root: the gateway's request span, when the chat span is nested in it."""
        everything = self.receiver.wait_for(lambda _: True)
        root = {s.trace_id: s.name for s in everything if s.parent_id is None}
        return [root.get(s.trace_id, "(no root)") for s in spans]


def _has(count: int) -> Callable[[list[ReceivedSpan]], bool]:
    """Whether ``count`` chat spans have arrived."""
    return lambda spans: len(_chat(spans)) >= count


def _chat(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_ns)


def _config(api_base: str) -> dict[str, Any]:
    """The gateway's config (JSON is YAML): one model pointing at the emulator, a master key, no database."""
    deployment = {"model": f"openai/{MODEL}", "api_base": api_base, "api_key": UPSTREAM_KEY}
    return {
        "model_list": [{"model_name": MODEL, "litellm_params": deployment}],
        "general_settings": {"master_key": MASTER_KEY},
    }


def _environment(receiver: OTLPReceiver, cert: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_SERVICE_NAME="litellm-gateway",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_METRIC_EXPORT_INTERVAL="1000",
        SSL_CERT_FILE=str(cert),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_TELEMETRY="False",
    )
    return env


def _wait_until_up(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the gateway exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    pytest.fail(f"the gateway did not answer within {STARTUP_SECONDS} s:\n{log.read_text()[-3000:]}")


def _tool(name: str) -> Path:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} is not installed beside this interpreter (the gateway's virtualenv has it)")
    return path


@contextmanager
def _running(directory: Path, workers: int = 1, **settings: str) -> Iterator[Gateway]:
    """The gateway as its users start it, its upstream the emulator behind TLS, its exports received here;
    ``settings``: more of its environment (this package's settings). Afterwards: nothing it exported held a key."""
    instrument, litellm_cli = _tool("opentelemetry-instrument"), _tool("litellm")
    cert, key = self_signed(directory)
    with Emulator() as emulator, TLSFront(emulator.port, cert, key) as front, OTLPReceiver() as receiver:
        config = directory / "config.yaml"
        config.write_text(json.dumps(_config(f"https://127.0.0.1:{front.port}/v1")))
        port = free_port()
        log = directory / "gateway.log"
        where = ["--port", str(port), "--host", "127.0.0.1", "--num_workers", str(workers)]
        command = [str(instrument), str(litellm_cli), "-c", str(config), *where]
        with log.open("wb") as output:
            process = subprocess.Popen(
                command,
                env={**_environment(receiver, cert), **settings},
                cwd=directory,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_until_up(process, port, log)
            yield Gateway(f"http://127.0.0.1:{port}", front.port, emulator, receiver, log)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
    raw = receiver.raw()
    assert raw, "the gateway exported nothing"
    assert MASTER_KEY.encode() not in raw
    assert UPSTREAM_KEY.encode() not in raw


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with _running(tmp_path_factory.mktemp("gateway")) as running:
        yield running


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, redis_server: Any) -> Iterator[Gateway]:
    """Two workers sharing one ledger in Redis, as docs/ledger.md sets a fleet up."""
    shared = {
        "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_LEDGER_URL": redis_server.url(3),
        "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_HASH_KEY": FLEET_HASH_KEY,
    }
    with _running(tmp_path_factory.mktemp("fleet"), workers=2, **shared) as running:
        yield running


@pytest.fixture(scope="module")
def strict_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with _running(tmp_path_factory.mktemp("strict"), OTEL_INSTRUMENTATION_OPENAI_RESPONSES_STRICT="true") as running:
        yield running


def _responses_route(gateway: Gateway) -> list[str]:
    """How the upstream's Responses route was reached (the gateway also asks for the model list on its own)."""
    return [r.method for r in gateway.emulator.requests if r.path == "/v1/responses"]


def _no_key_exported(gateway: Gateway) -> None:
    raw = gateway.receiver.raw()
    assert MASTER_KEY.encode() not in raw
    assert UPSTREAM_KEY.encode() not in raw


def test_the_demo_flows_through_the_gateway(gateway: Gateway) -> None:
    """Every flow of the demo the gateway can carry, from the real SDK: one span per upstream call, nested in the
    gateway's request span, each with exactly the signals of the same flow in-process; the app sees what it sees
    in-process (the same facts remembered, the same exception where a flow breaks)."""
    gateway.emulator.requests.clear()
    since = len(gateway.receiver.spans)
    client = gateway.client()
    flows = [s for s in scenarios.SCENARIOS if s.name in EXPECTED]
    through = {s.name: scenarios.run(client, s, marker=f"G-{i}") for i, s in enumerate(flows)}
    calls = len(responses_requests(gateway.emulator))
    spans = gateway.chat_spans(since, calls)

    assert [span.signals() for span in spans] == [signals for s in flows for signals in EXPECTED[s.name]]
    assert len(spans) == calls == sum(len(signals) for signals in EXPECTED.values())
    assert set(gateway.roots(spans)) == {"POST /v1/responses"}
    with Emulator() as alone, capture() as captured:
        in_process = {s.name: scenarios.run(alone.client(), s, marker=f"G-{i}") for i, s in enumerate(flows)}
    assert [signals_of(span) for span in captured.chat_spans()] == [span.signals() for span in spans]
    assert {name: t.remembered for name, t in through.items()} == {name: t.remembered for name, t in in_process.items()}
    # Where the API refuses a request, the client gets the same exception, its `code` the status rather than the API's.
    refused = {
        "chain_unstored_parent",
        "chain_tool_output_missing",
        "replay_reasoning_altered",
        "replay_tool_pair_broken",
    }
    assert {name: t.error for name, t in through.items()} == {
        name: "BadRequestError: 400" if name in refused else None for name in through
    }
    assert {name for name, t in in_process.items() if t.error} == refused
    _no_key_exported(gateway)


def test_conversations_are_out_of_the_gateways_reach(gateway: Gateway) -> None:
    """The two conversation flows: the gateway answers `conversations.create()` with 404 (it has no Conversations
    API route), so no model call is made and no span is recorded."""
    gateway.emulator.requests.clear()
    since = len(gateway.receiver.spans)
    errors = [scenarios.run(gateway.client(), s, marker="G-C").error for s in CONVERSATIONS]
    assert errors == ["NotFoundError"] * len(CONVERSATIONS)
    assert [r.path for r in gateway.emulator.requests if r.path != "/v1/models"] == []
    assert _chat(gateway.receiver.wait_for(lambda _: True, since)) == []


def _streamed(client: openai.OpenAI, **request: Any) -> Any:
    final = None
    with client.responses.create(model=MODEL, stream=True, **request) as stream:
        for event in stream:
            if event.type == "response.completed":
                final = event.response
    assert final is not None
    return final


def test_a_streamed_chain(gateway: Gateway) -> None:
    """`stream=True` through the gateway, chained by `previous_response_id` (the ids the client holds): the span
    ends with the stream, and the chain is followed (the turn without instructions is named)."""
    gateway.emulator.requests.clear()
    since = len(gateway.receiver.spans)
    client = gateway.client()
    first = _streamed(client, input="Remember this: the marker is S-1.", instructions=scenarios.INSTRUCTIONS)
    second = _streamed(client, input="Noted?", previous_response_id=first.id)
    third = _streamed(
        client, input="What is the marker?", previous_response_id=second.id, instructions=scenarios.INSTRUCTIONS
    )
    assert third.output_text == "marker=S-1"
    spans = gateway.chat_spans(since, 3)
    assert [span.signals() for span in spans] == [set(), {"instructions_dropped"}, set()]
    assert [span.attributes["openai_responses.state.mode"] for span in spans] == ["single_turn", *["server_chain"] * 2]
    assert all(span.attributes["gen_ai.response.time_to_first_chunk"] > 0 for span in spans)
    assert len(responses_requests(gateway.emulator)) == 3
    _no_key_exported(gateway)


def _until_done(connection: Any) -> Any:
    for event in connection:
        if event.type in TERMINAL:
            return event
    raise AssertionError("the connection closed first")


def _session(client: openai.OpenAI) -> list[Any]:
    """Three turns over one socket: the first unstored, the second chained to it without instructions, the third
    with them again; each turn's terminal event."""
    ends = []
    with client.responses.connect() as connection:
        connection.response.create(
            model=MODEL, input="Remember this: the marker is W-1.", instructions=scenarios.INSTRUCTIONS, store=False
        )
        ends.append(_until_done(connection))
        connection.response.create(model=MODEL, input="Noted?", previous_response_id=ends[-1].response.id)
        ends.append(_until_done(connection))
        connection.response.create(
            model=MODEL,
            input="What is the marker?",
            previous_response_id=ends[-1].response.id,
            instructions=scenarios.INSTRUCTIONS,
        )
        ends.append(_until_done(connection))
    return ends


def test_a_websocket_session(gateway: Gateway) -> None:
    """`client.responses.connect()` to the gateway, which relays the session to the upstream's WebSocket: one span
    per `response.create`, ended by its terminal event, with the signals of the same session in-process: the
    unstored reasoning, the turn without instructions, and not the connection's own unstored response continued.
    Over the socket the client holds the ids the span carries."""
    gateway.emulator.requests.clear()
    since = len(gateway.receiver.spans)
    ends = _session(gateway.client())
    assert [end.type for end in ends] == ["response.completed"] * 3
    assert ends[-1].response.output_text == "marker=W-1"
    spans = gateway.chat_spans(since, 3)
    assert [span.signals() for span in spans] == [{"reasoning_not_replayable"}, {"instructions_dropped"}, set()]
    with Emulator() as alone, capture() as captured:
        _session(alone.client())
    assert [signals_of(span) for span in captured.chat_spans()] == [span.signals() for span in spans]
    assert [span.attributes["gen_ai.response.id"] for span in spans] == [end.response.id for end in ends]
    assert [span.attributes["openai_responses.store"] for span in spans] == [False, True, True]
    assert [span.attributes["server.port"] for span in spans] == [gateway.upstream_port] * 3
    assert set(gateway.roots(spans)) == {"WS /v1/responses"}
    assert _responses_route(gateway) == ["GET"] + ["WEBSOCKET"] * 3  # one upstream socket
    frames = responses_requests(gateway.emulator)
    assert [frame.get("instructions") for frame in frames] == [scenarios.INSTRUCTIONS, None, scenarios.INSTRUCTIONS]
    _no_key_exported(gateway)


def test_three_ids_for_one_response_and_how_they_join(gateway: Gateway) -> None:
    """The client holds the gateway's encrypted id, the span litellm's encoded one, the upstream its raw one. The
    span's id decodes (base64) to the upstream's; the upstream's request id comes back to the client in a header
    and is on the span; the client's `traceparent` is the span's trace."""
    gateway.emulator.requests.clear()
    since = len(gateway.receiver.spans)
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    raw = gateway.client().responses.with_raw_response.create(
        model=MODEL, input="hi", extra_headers={"traceparent": f"00-{trace_id}-{parent_id}-01"}
    )
    client_id = raw.parse().id
    (span,) = gateway.chat_spans(since, 1)
    span_id = span.attributes["gen_ai.response.id"]
    assert client_id != span_id
    # A shared ledger takes both: the gateway's ledger the span's, the ledger of an app in front of it the client's.
    assert (is_id(span_id), is_id(client_id)) == (True, True)
    decoded = base64.b64decode(span_id.removeprefix("resp_")).decode()
    assert decoded.startswith("litellm:custom_llm_provider:openai;model_id:")
    upstream_id = decoded.rpartition(";response_id:")[2]
    assert gateway.emulator.client().responses.retrieve(upstream_id).id == upstream_id
    assert raw.headers["llm_provider-x-request-id"] == span.attributes["openai_responses.request_id"]
    assert raw.request_id is None  # the SDK reads `x-request-id`, which the gateway does not send
    assert span.trace_id == trace_id
    # Whoever holds the gateway's salt key (its master key, here) turns the client's id back into the span's.
    from litellm.proxy.common_utils.encrypt_decrypt_utils import (  # type: ignore[import-not-found]
        decrypt_if_encrypted_with,
    )

    managed = decrypt_if_encrypted_with(client_id.removeprefix("resp_"), MASTER_KEY)
    assert managed is not None
    assert managed.startswith(f"litellm_proxy:responses_api:response_id:{span_id};user_id:")


def test_opentelemetry_instrument_takes_config_for_one_of_its_own_options() -> None:
    """The pitfall the command avoids: `--config` after `opentelemetry-instrument litellm` is read by
    opentelemetry-instrument (a prefix of two of its options), which exits; `-c` reaches litellm."""
    instrument, litellm_cli = _tool("opentelemetry-instrument"), _tool("litellm")
    done = subprocess.run(
        [str(instrument), str(litellm_cli), "--config", "config.yaml"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "ambiguous option: --config could match --configurator, --config_file" in done.stderr


def test_strict_mode_refuses_a_frame_and_the_session_goes_on(strict_gateway: Gateway) -> None:
    """Strict mode in the gateway: a `response.create` that would lose context is answered on the socket with an
    `error` event naming the signal, as the gateway answers a frame its guardrails refuse; the upstream never sees
    it, and the session goes on. Over HTTP the refused request fails (a 500) and reaches no upstream either."""
    gateway = strict_gateway
    since = len(gateway.receiver.spans)
    with gateway.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="Remember this: the marker is W-2.")
        first = _until_done(connection)
        connection.response.create(
            model=MODEL, input="Marker?", previous_response_id=first.response.id, conversation="conv_elsewhere"
        )
        refused = _until_done(connection)
        connection.response.create(model=MODEL, input="What is the marker?", previous_response_id=first.response.id)
        answered = _until_done(connection)
    assert refused.type == "error"
    assert (refused.error.type, refused.error.code) == ("invalid_request_error", "state_mode_conflict")
    assert "Fix:" in refused.error.message
    assert answered.response.output_text == "marker=W-2"
    with pytest.raises(openai.InternalServerError, match="state_mode_conflict") as http_refusal:
        gateway.client().responses.create(
            model=MODEL, input="Marker?", previous_response_id=first.response.id, conversation="conv_elsewhere"
        )
    assert http_refusal.value.status_code == 500  # an exception the gateway does not know
    # Over HTTP the gateway's Router retries a failure it does not know (twice, by default): each attempt refused.
    spans = gateway.chat_spans(since, 6)
    refusal = ({"state_mode_conflict"}, "ContextLossError")
    assert [(span.signals(), span.attributes.get("error.type")) for span in spans] == [
        (set(), None),
        refusal,
        (set(), None),
        *[refusal] * 3,
    ]
    assert len({span.trace_id for span in spans[3:]}) == 1
    assert _responses_route(gateway) == ["GET", "WEBSOCKET", "WEBSOCKET"]


def _written(shared: Any, key: str) -> None:
    """Waits for the worker that answered a turn to have written its entry to Redis (off the call path)."""
    deadline = time.monotonic() + LEDGER_WRITE_SECONDS
    while not shared.exists(key):
        if time.monotonic() > deadline:
            pytest.fail(f"no entry {key} in Redis after {LEDGER_WRITE_SECONDS} s")
        time.sleep(0.02)


def test_two_workers_share_the_ledger_and_check_every_turn(fleet: Gateway, redis_server: Any) -> None:
    """`--num_workers 2` with the ledger in Redis: each worker is instrumented on its own (a `service.instance.id`
    each) and takes its share of the requests; litellm's response ids (`resp_` + base64, over 128 characters) go
    into the shared ledger, so every turn is checked against its parent whichever worker answered it: each turn after
    the first is named `instructions_dropped`, across the workers as within one. Each turn on a new connection, as
    separate clients' requests arrive, until the chain has crossed between the workers both ways; each sent once the
    previous turn's entry is in Redis, as a person's next turn comes seconds later."""
    since = len(fleet.receiver.spans)
    namespace = f"otel-responses:{Fingerprinter(key_from_text(FLEET_HASH_KEY)).key_id()}"
    previous = fleet.client().responses.create(
        model=MODEL, input="Remember this: the marker is F-1.", instructions=scenarios.INSTRUCTIONS
    )
    turns, crossings = 1, 0
    with redis_server.client(3) as shared:
        while crossings < 2 and turns < 40:
            (latest,) = fleet.chat_spans(since, turns)[-1:]
            _written(shared, entry_key(namespace, latest.attributes["gen_ai.response.id"]))
            previous = fleet.client().responses.create(model=MODEL, input="Noted?", previous_response_id=previous.id)
            turns += 1
            spans = _chat(fleet.receiver.wait_for(_has(turns), since, settle=0))
            crossings = sum(a.instance != b.instance for a, b in itertools.pairwise(spans))
        spans = fleet.chat_spans(since, turns)
        assert crossings >= 2, f"{turns} turns, the chain crossed between the workers {crossings} times"
        assert len({span.instance for span in spans}) == 2
        ids = [span.attributes["gen_ai.response.id"] for span in spans]
        assert all(len(i) > 128 and is_id(i) for i in ids)
        assert [span.attributes.get("gen_ai.request.previous_response.id") for span in spans] == [None, *ids[:-1]]
        assert [span.signals() for span in spans] == [set()] + [{"instructions_dropped"}] * (turns - 1)
        # Each turn's entry is in Redis under its litellm id, each parent's continued-marker beside it.
        _written(shared, entry_key(namespace, ids[-1]))
        assert [bool(shared.exists(entry_key(namespace, i))) for i in ids] == [True] * turns
        assert [bool(shared.exists(marker_key(namespace, i))) for i in ids] == [True] * (turns - 1) + [False]
