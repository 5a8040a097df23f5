"""The `otel-responses` command, run as a subprocess exactly as a user runs it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import openai
import pytest

from dashboards import build
from otel_responses.docs_links import DOCS_URL
from otel_responses.tools import dashboard_files, scenarios
from otel_responses.tools.demo import _paused_until_stopped
from otel_responses.tools.doctor import STEPS
from otel_responses.version import __version__, install_hint

from ..servers import QuietHTTPServer
from ..support import free_port, prometheus_binary

COMMAND = str(Path(sys.executable).parent / "otel-responses")
REPO = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def emulator_process(request: pytest.FixtureRequest) -> Iterator[str]:
    """`python -m otel_responses.emulator` in its own process, with the flags the test asks for."""
    flags: list[str] = getattr(request, "param", [])
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_responses.emulator", "--port", str(port), *flags],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "EMULATOR_KEY": "sk-the-right-key"},
    )
    assert process.stdout is not None
    base_url = process.stdout.readline().strip()
    try:
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_demo_shows_progress_and_exporters_on_the_console() -> None:
    result = run("demo", "--console")
    assert result.returncode == 0, result.stderr
    assert f"[1/{len(scenarios.SCENARIOS)}] server_chain" in result.stderr
    assert '"openai_responses.state.mode": "client_replay"' in result.stdout
    assert scenarios.INSTRUCTIONS not in result.stdout
    assert "marker is" not in result.stdout


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[dict[str, list[bytes]]] = {}

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_demo_exports_over_otlp() -> None:
    _Collector.received = {}
    server = QuietHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = run("demo", "--otlp-endpoint", f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    traces = b"".join(_Collector.received.get("/v1/traces", []))
    metrics = b"".join(_Collector.received.get("/v1/metrics", []))
    assert b"openai_responses.state.mode" in traces
    assert b"openai_responses.signals" in metrics
    assert scenarios.INSTRUCTIONS.encode() not in traces + metrics
    assert b"marker is" not in traces + metrics


@pytest.mark.parametrize("signal_path", ["/v1/traces", "/v1/metrics/"])
def test_demo_takes_a_signal_url_as_the_otlp_base_and_says_so(signal_path: str) -> None:
    _Collector.received = {}
    server = QuietHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    where = f"127.0.0.1:{server.server_address[1]}"
    try:
        result = run("demo", "--otlp-endpoint", f"http://user:pw-secret@{where}{signal_path}")
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert sorted(_Collector.received) == ["/v1/metrics", "/v1/traces"]
    assert result.stderr.startswith(
        f"otel-responses demo: --otlp-endpoint takes the base URL, so its {signal_path.rstrip('/')} is dropped:"
        f" traces go to {where}/v1/traces, metrics to {where}/v1/metrics\n"
    )
    assert "pw-secret" not in result.stdout + result.stderr


def test_demo_serves_metrics_for_scraping_until_stopped() -> None:
    port = free_port()
    process = subprocess.Popen(
        [COMMAND, "demo", "--prometheus-port", str(port), "--serve", "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        body = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "openai_responses_signals_total" not in body:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    body = response.read().decode()
            except OSError:
                continue
        assert "openai_responses_signals_total{" in body
        assert re.search(r'openai_responses_calls_total\{[^}]*openai_responses_state_mode="client_replay"', body)
        assert "gen_ai_client_operation_duration_seconds_bucket" in body
        _read_until(process, "round 1 done")  # a signal during a round ends it unshown
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "every healthy session kept its context" in out


def test_demo_names_its_metrics_url_and_that_it_ends_without_serve() -> None:
    port = free_port()
    result = run("demo", "--prometheus-port", str(port))
    assert result.returncode == 0, result.stderr
    assert (
        f"metrics on http://127.0.0.1:{port}/metrics until this run ends; give --serve to keep serving them"
        " for a scraper\n" in result.stderr
    )


def test_demo_names_a_prometheus_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("demo", "--prometheus-port", str(port), timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"otel-responses demo: port {port} (--prometheus-port) is in use\n"


def _read_until(process: subprocess.Popen[str], text: str, timeout: float = 60) -> str:
    """Read the process's standard error (where progress goes) through a line containing `text`; return it all."""
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    for line in process.stderr:
        lines.append(line)
        if text in line or time.monotonic() > deadline:
            break
    assert lines, "no output on stderr"
    assert text in lines[-1], f"no {text!r} on stderr: {''.join(lines)}"
    return "".join(lines)


ROUND_END = f"[{len(scenarios.SCENARIOS)}/{len(scenarios.SCENARIOS)}]"


@pytest.mark.parametrize(
    ("signum", "interval", "during"),
    [(signal.SIGTERM, "0.1", "[2/"), (signal.SIGINT, "0.1", "[2/"), (signal.SIGTERM, "30", "round 1 done")],
    ids=["sigterm-mid-round", "sigint-mid-round", "sigterm-in-the-pause"],
)
def test_demo_serve_stops_promptly_on_a_signal(signum: signal.Signals, interval: str, during: str) -> None:
    process = subprocess.Popen(
        [COMMAND, "demo", "--serve", "--interval", interval], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        seen = _read_until(process, "round 1 done")
        if during != "round 1 done":
            seen += _read_until(process, during)  # round 2 under way
    finally:
        sent = time.monotonic()
        process.send_signal(signum)
        out, rest = process.communicate(timeout=30)
    err = seen + rest
    took = time.monotonic() - sent
    # Promptly: well within the interval (30 s in the pause case) even on a loaded 2-core machine.
    assert took < 5, f"took {took:.1f}s to stop: {err[-2000:]}"
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert "every healthy session kept its context" in out  # round 1 was shown
    assert err.count(ROUND_END) == 1, err  # the round under way stopped unfinished


def test_a_signal_the_kernel_hands_another_thread_still_ends_the_pause() -> None:
    """Only another thread can take the signal (the main thread blocks it; a thread inherits the mask it was
    started with, so that one starts first): the pause still ends promptly, where one long lock wait would sleep
    through the signal until its timeout."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda _signum, _frame: stop.set())
    go = threading.Event()

    def signal_later() -> None:
        go.wait()
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGUSR1)

    sender = threading.Thread(target=signal_later, daemon=True)
    sender.start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        go.set()
        started = time.monotonic()
        stopped = _paused_until_stopped(stop, 20)
        took = time.monotonic() - started
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        signal.signal(signal.SIGUSR1, previous)
        sender.join(5)
    assert stopped
    assert took < 3, f"the pause ran {took:.1f}s after the signal"


def test_ctrl_c_during_a_one_off_demo_is_one_line_and_exit_130() -> None:
    process = subprocess.Popen([COMMAND, "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = _read_until(process, "[2/")  # the scenarios are under way
    finally:
        process.send_signal(signal.SIGINT)
        _out, rest = process.communicate(timeout=30)
    assert process.returncode == 130, seen + rest
    assert "Traceback" not in rest
    assert "interrupted" in rest


def test_doctor_against_the_emulator_passes_every_step() -> None:
    result = run("doctor", env={"OPENAI_API_KEY": ""})
    assert result.returncode == 0, result.stdout + result.stderr
    for number, step in enumerate(STEPS, 1):
        assert re.search(rf"^  {number} {step.name}\s+PASS ", result.stdout, re.M), step.name
    assert f"{len(STEPS)} of {len(STEPS)} steps passed" in result.stdout
    assert "emulator-key" not in result.stdout + result.stderr
    assert "DR-" not in result.stdout  # the probe's marker is payload: never printed


@pytest.mark.parametrize("emulator_process", [["--drop-context"]], indirect=True)
def test_doctor_against_an_endpoint_that_drops_context_fails_the_right_steps(emulator_process: str) -> None:
    secret = "sk-do-not-print-me-1234"
    result = run("doctor", "--base-url", emulator_process, env={"OPENAI_API_KEY": secret})
    assert result.returncode == 1
    verdicts = dict(re.findall(r"^  \d (\w+)\s+(PASS|FAIL) ", result.stdout, re.M))
    failing = {"server_chain", "conversation"}
    assert verdicts == {step.name: "FAIL" if step.name in failing else "PASS" for step in STEPS}
    assert "fix: the chain does not carry context" in result.stdout
    assert secret not in result.stdout + result.stderr
    assert "Authorization" not in result.stdout + result.stderr


@pytest.mark.parametrize("emulator_process", [["--api-key-env", "EMULATOR_KEY"]], indirect=True)
def test_doctor_reports_a_refused_key(emulator_process: str) -> None:
    result = run("doctor", "--base-url", emulator_process, env={"OPENAI_API_KEY": "sk-wrong-key"})
    assert result.returncode == 4
    assert "refused the key" in result.stderr
    assert "sk-wrong-key" not in result.stdout + result.stderr
    accepted = run("doctor", "--base-url", emulator_process, env={"OPENAI_API_KEY": "sk-the-right-key"})
    assert accepted.returncode == 0, accepted.stdout


def test_doctor_names_a_base_url_without_v1_in_one_line(emulator_process: str) -> None:
    """Each step would get the same 404: one line names the missing path and the URL to give instead."""
    host = emulator_process.removesuffix("/v1").removeprefix("http://")
    result = run("doctor", "--base-url", f"http://user:pw-secret@{host}/", env={"OPENAI_API_KEY": "sk-x"})
    assert result.returncode == 2
    assert result.stdout == f"otel-responses doctor: {host}, model gpt-5-mini\n"
    assert result.stderr == (
        f"otel-responses doctor: {host} answered 404 to POST /responses: the URL's path lacks /v1;"
        f" give --base-url http://{host}/v1\n"
    )


def test_doctor_names_a_base_url_with_no_api_behind_it(emulator_process: str) -> None:
    host = emulator_process.removesuffix("/v1").removeprefix("http://")
    result = run("doctor", "--base-url", f"{emulator_process}/elsewhere", env={"OPENAI_API_KEY": "sk-x"})
    assert result.returncode == 2
    assert result.stderr == (
        f"otel-responses doctor: {host} answered 404 to POST /v1/elsewhere/responses: no Responses API at this URL;"
        " give --base-url the URL an OpenAI client takes as its base_url\n"
    )


def test_doctor_reports_an_unreachable_endpoint() -> None:
    result = run("doctor", "--base-url", f"http://127.0.0.1:{free_port()}/v1", env={"OPENAI_API_KEY": "sk-x"})
    assert result.returncode == 3
    assert "cannot reach 127.0.0.1:" in result.stderr


def test_doctor_never_prints_credentials_in_the_url() -> None:
    result = run(
        "doctor", "--base-url", f"http://user:pw-secret@127.0.0.1:{free_port()}/v1", env={"OPENAI_API_KEY": "k"}
    )
    assert result.returncode == 3
    assert "pw-secret" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["doctor", "--base-url", "http://127.0.0.1:9/v1"], {"OPENAI_API_KEY": ""}, "set OPENAI_API_KEY"),
        (["doctor", "--base-url", "ftp://example"], {}, "not an http(s) URL"),
        (["demo", "--prometheus-port", "99999"], {}, "port out of range"),
        (["demo", "--interval", "1"], {}, "--interval only makes sense with --serve"),
        (["demo", "--interval", "-1", "--serve"], {}, "must be positive"),
        (["frobnicate"], {}, "unknown command 'frobnicate' (choose from demo, doctor,"),
        (["doctor", "--model", ""], {}, "argument --model: must not be empty"),
        (["doctor", "--model", "  "], {}, "argument --model: must not be empty"),
        (["doctor", "--base-url", ""], {}, "argument --base-url: not an http(s) URL"),
        (["demo", "--otlp-endpoint", ""], {}, "argument --otlp-endpoint: not an http(s) URL"),
        (["demo", "--prometheus-port", ""], {}, "argument --prometheus-port: not a port number"),
        (["demo", "--serve", "--interval", ""], {}, "argument --interval: not a number"),
        (["doctor", "--base-url", "http://127.0.0.1:9/v1"], {"OPENAI_API_KEY": " "}, "set OPENAI_API_KEY"),
        (["dashboards"], {}, "the following arguments are required: --out"),
        (["dashboards", "--out", ""], {}, "argument --out: must not be empty"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(args: list[str], env: dict[str, str], message: str) -> None:
    result = run(*args, env=env, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr


# A stand-in for an install without the `cli` extra: the listed modules fail to import, as they would if absent.
BLOCKER = """
import importlib.abc, os, sys

BLOCKED = os.environ["BLOCK_MODULES"].split(",")


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
"""


def _path_with(directory: Path) -> str:
    return os.pathsep.join([str(directory), *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.mark.parametrize(
    ("args", "blocked"),
    [
        (["demo"], "openai"),
        (["demo"], "opentelemetry.sdk"),
        (["demo", "--otlp-endpoint", "http://127.0.0.1:9"], "opentelemetry.exporter.otlp"),
        (["demo", "--prometheus-port", "9"], "prometheus_client"),
        (["doctor"], "openai"),
    ],
)
def test_a_missing_extra_is_named_with_its_own_exit_code(tmp_path: Path, args: list[str], blocked: str) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    result = run(*args, env={"PYTHONPATH": _path_with(tmp_path), "BLOCK_MODULES": blocked}, timeout=60)
    assert result.returncode == 5, result.stderr
    assert f"  {install_hint('cli')}\n" in result.stderr  # an install command that works today
    assert blocked in result.stderr
    assert "Traceback" not in result.stderr


def test_the_blocker_really_blocks(tmp_path: Path) -> None:
    """The stand-in above is only evidence if it makes the import fail in a real process."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    result = subprocess.run(
        [sys.executable, "-c", "import openai"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": _path_with(tmp_path), "BLOCK_MODULES": "openai"},
    )
    assert result.returncode == 1
    assert "ModuleNotFoundError: No module named 'openai'" in result.stderr


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_package_version(flag: str) -> None:
    result = run(flag, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"otel-responses {__version__}\n"


def test_no_command_shows_the_help_and_exits_2() -> None:
    result = run(timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == run("--help", timeout=60).stdout


@pytest.mark.parametrize(
    ("args", "prog"),
    [(["--bogus"], "otel-responses"), (["demo", "--bogus"], "otel-responses demo")],
    ids=["top", "demo"],
)
def test_an_unknown_flag_is_named_with_where_the_help_is(args: list[str], prog: str) -> None:
    result = run(*args, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"usage: {prog} [-h] ")
    assert result.stderr.endswith(f"{prog}: error: unrecognized arguments: --bogus\nsee '{prog} --help'\n")


@pytest.mark.parametrize("command", [[], ["demo"], ["doctor"]], ids=["top", "demo", "doctor"])
def test_help_is_plain_text(command: list[str]) -> None:
    result = run(*command, "--help", timeout=60)
    assert result.returncode == 0, result.stderr
    for markup in ("``", ":func:", ":class:", ":meth:", ":mod:", ":ref:"):
        assert markup not in result.stdout, markup
    assert "exit codes:" in result.stdout
    assert "5 a package of the 'cli' extra is missing" in result.stdout


def test_demo_reports_an_unreachable_otlp_endpoint_at_once() -> None:
    started = time.monotonic()
    result = run("demo", "--otlp-endpoint", f"http://user:pw-secret@127.0.0.1:{free_port()}", timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 3, result.stderr
    assert re.fullmatch(r"otel-responses demo: cannot reach the OTLP endpoint 127\.0\.0\.1:\d+ \(.+\)\n", result.stderr)
    assert "pw-secret" not in result.stdout + result.stderr
    assert took < 10, f"took {took:.1f}s"  # the exporters' retries take over 10 s


class _Refusing(_Collector):
    """Listens, but is no OTLP receiver: every export is a 404."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_demo_reports_an_endpoint_that_rejects_the_export() -> None:
    server = QuietHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = run("demo", "--otlp-endpoint", f"http://127.0.0.1:{server.server_address[1]}", timeout=60)
    finally:
        server.shutdown()
    assert result.returncode == 3, result.stderr
    assert (
        f"the OTLP endpoint 127.0.0.1:{server.server_address[1]} did not accept the spans (the reason is above)"
        in result.stderr
    )


# --- otel-responses dashboards ----------------------------------------------------------------------------------

DASHBOARD_FILES = {file.name: REPO / file.source for file in dashboard_files.WRITTEN["default"]}


def _written(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def _committed() -> dict[str, bytes]:
    return {name: path.read_bytes() for name, path in sorted(DASHBOARD_FILES.items())}


def test_dashboards_writes_the_files_into_a_new_directory_and_says_how_to_import_them(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir"
    result = run("dashboards", "--out", str(out), timeout=60)
    assert result.returncode == 0, result.stderr
    assert _written(out) == _committed()
    for name in DASHBOARD_FILES:
        assert re.search(rf"^  written +{re.escape(name)} ", result.stdout, re.M), name
    assert f"upload\n  {out / 'context-health.json'}\n" in result.stdout
    assert "Dashboards > New > Import" in result.stdout
    assert "Prometheus and Tempo data sources" in result.stdout
    assert f"rule_files:\n      - {out / 'otel-responses.rules.yaml'}\n" in result.stdout
    assert f"promtool check rules {out / 'otel-responses.rules.yaml'}\n" in result.stdout
    assert f"promtool test rules {out / 'otel-responses.rules_test.yaml'}\n" in result.stdout
    assert result.stdout.isascii()
    assert not result.stderr


def test_dashboards_for_the_latest_conventions_writes_their_dashboard_and_the_same_rules(tmp_path: Path) -> None:
    """--semconv latest: the dashboard whose queries read the latest dialect's names, beside the rules (which read
    only the package's own counters); the default dashboard is not written, and the two sit side by side."""
    result = run("dashboards", "--out", str(tmp_path), "--semconv", "latest", timeout=60)
    assert result.returncode == 0, result.stderr
    written = _written(tmp_path)
    assert set(written) == {"context-health.latest.json", "otel-responses.rules.yaml", "otel-responses.rules_test.yaml"}
    assert written["context-health.latest.json"] == build.LATEST_DASHBOARD_FILE.read_bytes()
    assert written["otel-responses.rules.yaml"] == build.RULES_FILE.read_bytes()
    assert f"upload\n  {tmp_path / 'context-health.latest.json'}\n" in result.stdout
    assert b"gen_ai_client_inference_usage_input_tokens_total" in written["context-health.latest.json"]
    assert b"gen_ai_client_token_usage" not in written["context-health.latest.json"]
    both = run("dashboards", "--out", str(tmp_path), timeout=60)  # the default one beside it: nothing differs
    assert both.returncode == 0, both.stderr
    assert set(_written(tmp_path)) == {*written, "context-health.json"}
    wrong = run("dashboards", "--out", str(tmp_path), "--semconv", "newest", timeout=60)
    assert wrong.returncode == 2
    assert "invalid choice: 'newest'" in wrong.stderr


def test_dashboards_leaves_the_same_files_alone(tmp_path: Path) -> None:
    assert run("dashboards", "--out", str(tmp_path), timeout=60).returncode == 0
    before = {path.name: path.stat().st_mtime_ns for path in tmp_path.iterdir()}
    time.sleep(0.05)
    again = run("dashboards", "--out", str(tmp_path), timeout=60)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("  unchanged  ") == len(DASHBOARD_FILES)
    assert {path.name: path.stat().st_mtime_ns for path in tmp_path.iterdir()} == before


def test_dashboards_refuses_to_overwrite_a_differing_file_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "otel-responses.rules.yaml").write_text("# my own edits\n")
    result = run("dashboards", "--out", str(tmp_path), timeout=60)
    assert result.returncode == 1
    assert f"  {tmp_path / 'otel-responses.rules.yaml'}\n" in result.stderr
    assert "--force" in result.stderr
    assert "Traceback" not in result.stderr
    assert not result.stdout
    assert _written(tmp_path) == {"otel-responses.rules.yaml": b"# my own edits\n"}  # the others not written either


def test_dashboards_force_replaces_differing_files(tmp_path: Path) -> None:
    (tmp_path / "context-health.json").write_text("{}")
    (tmp_path / "mine.txt").write_text("not ours")
    result = run("dashboards", "--out", str(tmp_path), "--force", timeout=60)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^  replaced +context-health\.json ", result.stdout, re.M)
    assert re.search(r"^  written +otel-responses\.rules\.yaml ", result.stdout, re.M)
    assert _written(tmp_path) == {**_committed(), "mine.txt": b"not ours"}


def test_dashboards_for_a_copy_of_the_documentation_lead_there_and_still_pass_their_unit_tests(tmp_path: Path) -> None:
    """--docs-url: the files are what the builder makes for that URL (the rules' runbook links, the dashboard's
    link), the rules' unit tests expect the same links, and promtool runs them."""
    own = "https://docs.example.internal/otel-responses"  # no trailing slash: taken as the site's root
    result = run("dashboards", "--out", str(tmp_path), "--docs-url", own, timeout=60)
    assert result.returncode == 0, result.stderr
    written = _written(tmp_path)
    assert written["context-health.json"].decode() == build.render_dashboard(own + "/")
    assert written["otel-responses.rules.yaml"].decode() == build.render_rules(own + "/")
    assert [name for name, data in written.items() if DOCS_URL.encode() in data] == []
    assert written["otel-responses.rules_test.yaml"].count(f"{own}/signals/#".encode()) >= 7
    tested = subprocess.run(
        [prometheus_binary("promtool"), "test", "rules", str(tmp_path / "otel-responses.rules_test.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    for bad, said in (
        ("docs.example.internal", "not an http(s) URL: 'docs.example.internal'"),
        ("https://docs.example.internal/a b/", "not a documentation site's URL (no query, fragment, quote or space)"),
        ("https://docs.example.internal/it's/", "not a documentation site's URL"),
        ("https://docs.example.internal/?page=", "not a documentation site's URL"),
    ):
        refused = run("dashboards", "--out", str(tmp_path / "other"), "--docs-url", bad, timeout=60)
        assert refused.returncode == 2, bad
        assert f"--docs-url: {said}" in refused.stderr, bad
        assert "Traceback" not in refused.stderr
    assert not (tmp_path / "other").exists()


def test_dashboards_into_a_path_that_is_a_file_exits_1(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    result = run("dashboards", "--out", str(tmp_path / "taken"), timeout=60)
    assert result.returncode == 1
    assert result.stderr == f"otel-responses dashboards: cannot write {tmp_path / 'taken'}: not a directory\n"


def test_dashboards_needs_no_extra(tmp_path: Path) -> None:
    """Without the `cli` extra, and without even the package's own dependencies: the standard library only."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    blocked = "openai,opentelemetry,wrapt,prometheus_client,yaml"
    out = tmp_path / "out"
    result = run(
        "dashboards", "--out", str(out), env={"PYTHONPATH": _path_with(tmp_path), "BLOCK_MODULES": blocked}, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert _written(out) == _committed()


def test_the_commands_help_does_not_load_the_emulator() -> None:
    """`otel-responses emulator` hands its arguments to the emulator's own parser: the emulator is loaded when it is
    run, not for every command's help (it is most of the command's start-up time)."""
    probe = (
        "import sys\n"
        "from otel_responses.tools import cli\n"
        "cli._parser().format_help()\n"
        "print(sorted(name for name in sys.modules if name.startswith('otel_responses.emulator')))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "[]\n", "")
    listed = run("--help", timeout=60)
    assert re.search(r"^    emulator +serve the built-in Responses API emulator on 127\.0\.0\.1", listed.stdout, re.M)


def test_help_lists_each_command_once() -> None:
    from otel_responses.tools import cli

    listed = run("--help", timeout=60).stdout
    names = list(cli._parser().commands)
    assert {"demo", "doctor", "dashboards", "report", "emulator"} <= set(names)
    assert {name: len(re.findall(rf"^ +{name} ", listed, re.M)) for name in names} == dict.fromkeys(names, 1)


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("reprot", "unknown command 'reprot' (did you mean 'report'?)"),
        ("dashboard", "unknown command 'dashboard' (did you mean 'dashboards'?)"),
        ("serve", "unknown command 'serve' (choose from demo, doctor, dashboards, report, proxy, emulator"),
    ],
)
def test_an_unknown_command_names_the_nearest(typed: str, said: str) -> None:
    result = run(typed, "traces.jsonl", timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("usage: otel-responses [-h] [-V] COMMAND ...\n")
    assert f"otel-responses: error: {said}" in result.stderr
    assert result.stderr.endswith("see 'otel-responses --help'\n")


def test_dashboards_help_is_plain_text() -> None:
    result = run("dashboards", "--help", timeout=60)
    assert result.returncode == 0, result.stderr
    for markup in ("``", ":func:", ":class:", ":meth:", ":mod:", ":ref:"):
        assert markup not in result.stdout, markup
    assert "--out DIR" in result.stdout
    assert "--force" in result.stdout
    assert "exit codes: 0 " in result.stdout
    assert "'cli' extra is missing" not in result.stdout  # it needs none


@pytest.mark.parametrize("emulator_process", [["--context-window", "40", "--refuse-foreign-reasoning"]], indirect=True)
def test_the_emulator_process_takes_a_context_window_and_refuses_foreign_reasoning(emulator_process: str) -> None:
    """Past its 40 tokens, `truncation: "auto"` drops the marker silently and any other request is refused; reasoning
    replayed to another model is refused instead of withheld."""
    with openai.OpenAI(base_url=emulator_process, api_key="x", max_retries=0) as client:
        long = "Remember this: the marker is W-1. " + "Background. " * 5  # 28 tokens: fits alone
        first = client.responses.create(model="gpt-4.1", input=long, truncation="auto")
        cut = client.responses.create(
            model="gpt-4.1", input="What is the marker?", previous_response_id=first.id, truncation="auto"
        )
        assert cut.output_text == "marker=unknown"
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="gpt-4.1", input="What is the marker?", previous_response_id=first.id)
        assert refused.value.code == "context_length_exceeded"
        encrypted: Any = ["reasoning.encrypted_content"]
        chose = client.responses.create(model="gpt-5.4", input="Choose a code word.", store=False, include=encrypted)
        history: Any = [{"role": "user", "content": "Choose a code word."}, *chose.output]
        history.append({"role": "user", "content": "?"})
        with pytest.raises(openai.BadRequestError) as foreign:
            client.responses.create(model="gpt-5.5", input=history, store=False, reasoning={"context": "all_turns"})
        assert "could not be decrypted or parsed" in foreign.value.message


def test_the_emulator_process_names_a_context_window_it_cannot_use() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "otel_responses.emulator", "--context-window", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--context-window 0: give a number of tokens, at least 1" in result.stderr
