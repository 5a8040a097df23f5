"""``otel-responses proxy`` as a script starts it: the base URL for clients is the first line of standard output (and
the bound port is in ``--port-file``) once it listens, ``--listen 127.0.0.1:0`` takes a free port, instrumentation
settings come from the environment, SIGTERM lets in-flight streams finish and exits 0. What it will not use is one
line and exit code 2; a wider address than loopback is said aloud; a missing extra names its install command."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from otel_responses.emulator import Emulator
from otel_responses.tools.cli import main

from ..support import free_port, run_python
from .support import LAST_CHUNK, Connection, RawUpstream, Request, chunk, chunked_head

COMMAND = str(Path(sys.executable).parent / "otel-responses")
STARTED_WITHIN = 30.0  # seconds: a cold start imports the SDK and OpenTelemetry (about a second here)


def _line(stream: object, timeout: float) -> str:
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)  # type: ignore[arg-type]
    if not selector.select(timeout):
        raise AssertionError(f"nothing on standard output within {timeout}s")
    return stream.readline()  # type: ignore[attr-defined, no-any-return]


@contextmanager
def started(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The command, running: its process and the first line it printed (the base URL)."""
    process = subprocess.Popen(
        [COMMAND, "proxy", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        line = _line(process.stdout, STARTED_WITHIN).strip()
        assert line, process.stderr.read() if process.poll() is not None and process.stderr else "no line"
        yield process, line
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _stopped(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    code = process.wait(30)
    assert process.stderr is not None
    return code, process.stderr.read()


def test_a_script_reads_the_base_url_and_the_port_and_sigterm_exits_0(emulator: Emulator, tmp_path: Path) -> None:
    port_file = tmp_path / "proxy.port"
    with started(
        "--upstream", emulator.base_url, "--listen", "127.0.0.1:0", "--port-file", str(port_file), "--console"
    ) as (process, base_url):
        port = int(port_file.read_text())
        assert base_url == f"http://127.0.0.1:{port}/v1"
        with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            answer = client.responses.create(model="gpt-5.4", input="Remember this: the marker is CLI-1.")
        code, err = _stopped(process)
        assert process.stdout is not None
        printed = process.stdout.read()
    assert answer.output_text == "Noted marker CLI-1."
    assert code == 0
    assert f"forwarding to {emulator.base_url} (strict mode off)" in err
    assert "stopping; in-flight requests get 30s to finish" in err
    assert '"name": "chat gpt-5.4"' in printed  # --console: the span, as the console exporter prints it
    assert "CLI-1" not in printed + err  # no payload, in a span or a line


def test_settings_come_from_the_environment_and_a_wider_address_is_said_aloud(emulator: Emulator) -> None:
    env = {"OTEL_INSTRUMENTATION_OPENAI_RESPONSES_STRICT": "true"}
    with started("--upstream", emulator.base_url, "--listen", "0.0.0.0:0", env=env) as (process, base_url):
        local = base_url.replace("0.0.0.0", "127.0.0.1")
        with (
            openai.OpenAI(base_url=local, api_key="k", max_retries=0) as client,
            pytest.raises(openai.BadRequestError) as refused,
        ):
            client.responses.create(model="gpt-5.4", input="x", conversation="conv_1", previous_response_id="r")
        code, err = _stopped(process)
    assert base_url.startswith("http://0.0.0.0:")
    assert refused.value.code == "state_mode_conflict"
    assert (code, "(strict mode on)" in err) == (0, True)
    assert "listening on 0.0.0.0, not loopback: other machines can reach it" in err
    assert "no exporter: give --otlp-endpoint, --prometheus-port or --console" in err


def test_sigterm_lets_a_stream_in_flight_finish_and_takes_no_new_connection() -> None:
    sent_first = threading.Event()
    terminated = threading.Event()
    events = [
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {"id": "resp_slow", "status": "in_progress", "output": []},
        }
    ]
    events += [{"type": "response.output_text.delta", "sequence_number": n, "delta": "x"} for n in range(1, 6)]
    events += [
        {
            "type": "response.completed",
            "sequence_number": 6,
            "response": {"id": "resp_slow", "status": "completed", "output": []},
        }
    ]

    def script(request: Request, connection: Connection) -> bool:
        connection.send(chunked_head(200, {"content-type": "text/event-stream"}))
        for number, event in enumerate(events):
            connection.send(chunk(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()))
            if number == 0:
                sent_first.set()
                terminated.wait(10)
            time.sleep(0.1)
        connection.send(LAST_CHUNK)
        return True

    with (
        RawUpstream(script) as upstream,
        started("--upstream", upstream.base_url, "--listen", "127.0.0.1:0", "--grace", "20") as (process, base_url),
    ):
        seen: list[str] = []
        with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            stream = client.responses.create(model="gpt-5.4", input="hi", stream=True)
            for event in stream:
                seen.append(event.type)
                if len(seen) == 1:
                    assert sent_first.wait(10)
                    process.send_signal(signal.SIGTERM)
                    time.sleep(0.3)
                    terminated.set()
                    with (
                        openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, timeout=5) as late,
                        pytest.raises(openai.APIConnectionError),
                    ):
                        late.models.list()
        code = process.wait(30)
    assert seen == ["response.created", *["response.output_text.delta"] * 5, "response.completed"]
    assert code == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--upstream", "http://10.0.0.8/v1"], "plain http would send the clients' keys unencrypted"),
        (["--upstream", "https://user:pw@api.example/v1"], "must not carry credentials"),
        (["--upstream", "http://user:SECRET@127.0.0.1:99999/v1"], "not a URL (its host or port cannot be read)"),
        (["--upstream", "ftp://user:SECRET@127.0.0.1/v1"], "must be an http(s) URL, got ftp://***@127.0.0.1/v1"),
        (["--upstream", "http://[::1:SECRET]/v1"], "not a URL (its host or port cannot be read): http://***/v1"),
        (["--listen", "localhost"], "--listen takes HOST:PORT"),
        (["--max-body-bytes", "0"], "must be positive"),
    ],
)
def test_what_it_will_not_use_is_one_line_and_exit_code_2(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) if args[0] == "--max-body-bytes" else contextlib.nullcontext() as usage:
        code = main(["proxy", *args])
    out, err = capsys.readouterr()
    assert (usage.value.code if usage is not None else code) == 2
    assert said in err
    assert "Traceback" not in err
    assert "SECRET" not in err
    assert out == ""


@pytest.mark.parametrize(
    ("endpoint", "code", "said"),
    [
        ("http://127.0.0.1:99999", 2, "--otlp-endpoint: not a valid port in URL: 'http://127.0.0.1:99999'"),
        ("http://127.0.0.1:port", 2, "--otlp-endpoint: not a valid port in URL: 'http://127.0.0.1:port'"),
        ("http://127.0.0.1:{free}", 3, "cannot reach the OTLP endpoint"),  # the near miss: a port, nobody there
        (
            "http://user:SECRET@127.0.0.1:99999",
            2,
            "--otlp-endpoint: not a valid port in URL: 'http://***@127.0.0.1:99999'",
        ),
    ],
    ids=["out-of-range", "not-a-number", "valid-port", "credentials"],
)
def test_an_otlp_endpoint_with_a_bad_port_is_a_usage_error(endpoint: str, code: int, said: str) -> None:
    done = subprocess.run(
        [COMMAND, "proxy", "--upstream", "http://127.0.0.1:9/v1", "--otlp-endpoint", endpoint.format(free=free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == code
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert "SECRET" not in done.stderr
    assert done.stdout == ""


def test_a_port_in_use_is_one_line_and_exit_code_2(emulator: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    port = emulator.port
    assert main(["proxy", "--upstream", emulator.base_url, "--listen", f"127.0.0.1:{port}"]) == 2
    assert f"127.0.0.1:{port} (--listen) is in use" in capsys.readouterr().err


def test_an_unreachable_otlp_endpoint_is_exit_code_3(emulator: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["proxy", "--upstream", emulator.base_url, "--listen", "127.0.0.1:0", "--otlp-endpoint", url]) == 3
    assert "cannot reach the OTLP endpoint" in capsys.readouterr().err


def test_a_missing_extra_names_its_install_command() -> None:
    done = run_python(
        "import sys; sys.modules['aiohttp'] = None\n"
        "from otel_responses.tools.cli import main\n"
        "sys.exit(main(['proxy']))"
    )
    assert done.returncode == 5
    assert "the module 'aiohttp' is missing; it comes with the 'proxy' extra" in done.stderr
    assert "pip install '.[proxy]'" in done.stderr


def test_the_help_lists_the_command_and_its_options() -> None:
    top = subprocess.run([COMMAND, "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    own = subprocess.run([COMMAND, "proxy", "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "    proxy        forward an app's Responses API traffic to its upstream" in top
    for option in ("--upstream", "--listen", "--otlp-endpoint", "--prometheus-port", "--port-file", "--grace"):
        assert option in own


@pytest.mark.parametrize(
    ("env", "service"),
    [("", "otel-responses-proxy"), ("proxy-under-test", "proxy-under-test")],
    ids=["default-name", "named-by-the-environment"],
)
def test_an_otlp_endpoint_gets_the_spans_the_metrics_and_the_signals_log_events(
    emulator: Emulator, env: str, service: str
) -> None:
    from ..hostile import LoopbackAPI, Reply

    with LoopbackAPI(lambda received, index: Reply(200, b"")) as collector:
        base = collector.base_url.removesuffix("/v1")
        with started(
            "--upstream",
            emulator.base_url,
            "--listen",
            "127.0.0.1:0",
            "--otlp-endpoint",
            base,
            env={"OTEL_SERVICE_NAME": env},
        ) as (process, base_url):
            with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
                first = client.responses.create(model="gpt-5.4", instructions="Be brief.", input="The marker is O-1.")
                client.responses.create(model="gpt-5.4", input="The marker?", previous_response_id=first.id)
            code, _ = _stopped(process)  # the batch processors flush as it stops
        received = list(collector.received)
    assert code == 0
    assert {r.path for r in received} == {"/v1/traces", "/v1/metrics", "/v1/logs"}
    services = {(r.path, name) for r in received for name in _service_names(r.path, r.body)}
    assert services == {(path, service) for path in ("/v1/traces", "/v1/metrics", "/v1/logs")}


def _service_names(path: str, body: bytes) -> list[str]:
    """The ``service.name`` of each resource in an OTLP/HTTP protobuf export."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    kinds: dict[str, tuple[Any, str]] = {
        "/v1/traces": (ExportTraceServiceRequest, "resource_spans"),
        "/v1/metrics": (ExportMetricsServiceRequest, "resource_metrics"),
        "/v1/logs": (ExportLogsServiceRequest, "resource_logs"),
    }
    kind, field = kinds[path]
    request = kind.FromString(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
    return [
        attribute.value.string_value
        for each in getattr(request, field)
        for attribute in each.resource.attributes
        if attribute.key == "service.name"
    ]


def test_a_healthy_call_is_answered_while_a_million_item_request_is_analysed() -> None:
    """The analysis runs in a worker process of its own: a request of 10^6 items (about 30 MB, analysed for
    seconds: the bound raised past it) holds no other client up. The healthy call is answered before either call is
    recorded (nothing printed yet), and both are recorded, in order, before the command exits."""
    import http.client

    items = [{"role": "user", "content": "x"}] * 1_000_000
    big = json.dumps({"model": "gpt-5.4", "input": items, "store": False}).encode()
    healthy_body = json.dumps({"model": "gpt-5.4", "input": "hi"}).encode()
    answer = json.dumps({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.4"}).encode()

    def script(request: Request, connection: Connection) -> bool:
        connection.send(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + chunked(answer))
        return True

    def chunked(body: bytes) -> bytes:
        return b"transfer-encoding: chunked\r\n\r\n" + chunk(body) + LAST_CHUNK

    limits = ("--max-body-bytes", "67108864", "--max-analysed-bytes", "67108864")
    with (
        RawUpstream(script) as upstream,
        started("--upstream", upstream.base_url, "--listen", "127.0.0.1:0", "--console", *limits) as (
            process,
            base_url,
        ),
    ):
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])

        def post(body: bytes) -> int:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            connection.request("POST", "/v1/responses", body, {"Content-Type": "application/json"})
            status = connection.getresponse().status
            connection.close()
            return status

        statuses: list[int] = []
        sender = threading.Thread(target=lambda: statuses.append(post(big)))
        sender.start()
        deadline = time.monotonic() + 60
        while not upstream.received and time.monotonic() < deadline:  # forwarded: its analysis has begun
            time.sleep(0.01)
        started_at = time.monotonic()
        healthy = post(healthy_body)
        took = time.monotonic() - started_at
        assert process.stdout is not None
        printed_meanwhile = selectors.DefaultSelector()
        printed_meanwhile.register(process.stdout, selectors.EVENT_READ)
        nothing_printed = not printed_meanwhile.select(0)
        sender.join(120)
        code, _ = _stopped(process)
        printed = process.stdout.read()
    assert (statuses, healthy, code) == ([200], 200, 0)
    assert took < 1.0, f"a healthy call took {took:.2f}s beside the analysis"
    assert nothing_printed  # neither call was recorded yet when the healthy one was answered
    assert printed.count('"name": "chat gpt-5.4"') == 2
    assert printed.index('"openai_responses.input.item_count": 1000000') < printed.index(
        '"openai_responses.input.item_count": 1,'
    )


def test_a_metrics_port_in_use_is_one_line_and_exit_code_2(emulator: Emulator) -> None:
    """The exporters live in the analysis worker: its failure to start is the command's, said in one line."""
    args = ["--upstream", emulator.base_url, "--listen", "127.0.0.1:0", "--prometheus-port", str(emulator.port)]
    done = subprocess.run(
        [COMMAND, "proxy", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"port {emulator.port} (--prometheus-port) is in use" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_worker_that_dies_stops_the_command_with_exit_code_1(emulator: Emulator) -> None:
    """A proxy that records nothing must not go on unseen: the relay stops, and says why."""
    with started("--upstream", emulator.base_url, "--listen", "127.0.0.1:0") as (process, base_url):
        with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            client.responses.create(model="gpt-5.4", input="hi")
        children = [
            int(child)
            for task in Path(f"/proc/{process.pid}/task").iterdir()
            for child in (task / "children").read_text().split()
        ]
        assert len(children) == 1  # the analysis worker
        os.kill(children[0], signal.SIGKILL)
        code = process.wait(30)
        assert process.stderr is not None
        err = process.stderr.read()
    assert code == 1
    assert "the analysis worker exited; stopping" in err
