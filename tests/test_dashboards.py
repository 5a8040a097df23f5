"""The Grafana dashboard and the Prometheus alert rules of dashboards/: built from code, documented, and true.

The end-to-end test runs the demo workload with the real Prometheus exporter, a real ``prometheus`` scraping it
with the alert rules loaded, and evaluates every PromQL expression of the dashboard and of the rules through the
HTTP API: each must return data, so every metric and label name is one the exporter really produces.
``promtool`` and ``prometheus`` come from Debian's ``prometheus`` package (.ci/run installs it): without them the
tests that need them skip locally and fail in CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai.resources.responses
import pytest
import yaml

if sys.version_info < (3, 11):
    pytest.skip("grafana-foundation-sdk needs Python 3.11", allow_module_level=True)

from dashboards import build
from otel_responses.signals import CATALOGUE

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
ALERTS = DASHBOARDS / "alerts"
STACK = DASHBOARDS / "stack"
README = (ROOT / "README.md").read_text()
DASHBOARD = json.loads(build.DASHBOARD_FILE.read_text())
RULES = yaml.safe_load(build.RULES_FILE.read_text())
ALERT_RULES = [rule for group in RULES["groups"] for rule in group["rules"]]
SIGNAL_LABEL = "{{ $labels.openai_responses_signal_name }}"

# The demo has no compaction scenario: this runs the doctor's compaction step (a long history compacted with
# responses.compact against the emulator) with the instrumentation on and serves its metrics like the demo does.
COMPACTION_WORKLOAD = """
import sys, time
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server
from otel_responses import ResponsesInstrumentor
from otel_responses.doctor import Probe, compaction
from otel_responses.emulator import Emulator

start_http_server(int(sys.argv[1]), addr="127.0.0.1")
meters = MeterProvider(metric_readers=[PrometheusMetricReader()])
ResponsesInstrumentor().instrument(tracer_provider=TracerProvider(), meter_provider=meters)
with Emulator() as emulator:
    while True:
        compaction(Probe(emulator.client(), "gpt-5-mini"))
        time.sleep(1)
"""


# responses.compact came with openai 2.9.0: with an older SDK (the CI run at the supported floor) nothing can
# raise the compaction signal, and the Compactions panel's query is only checked to be valid.
HAS_COMPACT = hasattr(openai.resources.responses.Responses, "compact")


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"`{name}` is not installed (Debian package prometheus; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _panels() -> Iterator[dict[str, Any]]:
    for panel in DASHBOARD["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every Prometheus target of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in _panels()
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def substitute(expr: str) -> str:
    """A dashboard expression as Grafana would send it with every variable at "All"."""
    for variable, value in {
        "${service}": ".*",
        "$service": ".*",
        "${model}": ".*",
        "$model": ".*",
        "$__rate_interval": "1m",
        "$__range": "5m",
    }.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


# --- built from code ------------------------------------------------------------------------------------------


def test_committed_dashboard_and_rules_are_what_the_code_builds() -> None:
    """Rebuild with `python -m dashboards.build` when this fails."""
    assert build.DASHBOARD_FILE.read_text() == build.render_dashboard()
    assert build.RULES_FILE.read_text() == build.render_rules()
    assert build.main(["--check"]) == 0


def test_dashboard_has_the_promised_panels_and_variables() -> None:
    assert DASHBOARD["title"] == "OpenAI Responses — context health"
    titles = {panel["title"] for panel in _panels() if panel["type"] != "row"}
    for title in (
        "Signal rate by name, severity and model",
        "Share of calls with context loss",
        "State-mode mix",
        "store=false share",
        "Encrypted reasoning round trips",
        "Tool-call check failures",
        "Compactions",
        "Token usage",
        "Cache hit ratio",
        "Latency p50 / p95 / p99 by model",
        "Errors by error.type",
        "Spans that lost context (Tempo)",
    ):
        assert title in titles
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["tempo"]["query"] == "tempo"
    assert variables["service"]["query"] == "label_values(openai_responses_calls_total, job)"
    assert "gen_ai_request_model" in variables["model"]["query"]
    for name in ("service", "model"):
        assert variables[name]["includeAll"] is True
        assert variables[name]["allValue"] == ".*"


def test_every_panel_has_a_description_and_uses_the_datasource_variables() -> None:
    for panel in _panels():
        if panel["type"] == "row":
            continue
        assert len(panel.get("description", "")) > 80, panel["title"]
        assert panel["datasource"]["uid"] in ("${datasource}", "${tempo}"), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
    filters = re.escape('{job=~"$service", gen_ai_request_model=~"$model"')
    unfiltered = re.compile(rf"\b(?:openai_responses|gen_ai)_\w+_(?:total|bucket|count|sum)\b(?!{filters})")
    for title, expr in _expressions():
        assert any(f"_{suffix}{{" in expr for suffix in ("total", "bucket", "count", "sum")), title
        assert not unfiltered.search(expr), (title, expr)


def test_tempo_panel_lists_spans_with_context_loss() -> None:
    [panel] = [p for p in _panels() if p.get("datasource", {}).get("uid") == "${tempo}"]
    [target] = panel["targets"]
    assert target["queryType"] == "traceql"
    assert "span.openai_responses.context_loss = true" in target["query"]
    assert "resource.service.name" in target["query"]


def test_every_alert_is_documented_and_links_to_its_readme_section() -> None:
    assert {rule["alert"] for rule in ALERT_RULES} == {
        "OpenAIResponsesErrorSignal",
        "OpenAIResponsesWarningSignalRatioHigh",
        "OpenAIResponsesStateModeConflictAndUnstoredParent",
        "OpenAIResponsesInstructionsDropped",
        "OpenAIResponsesContextDuplicated",
        "OpenAIResponsesReasoningDropped",
        "OpenAIResponsesToolOutputMissingOrOrphaned",
    }
    headings = set(re.findall(r"^#+ (.+)$", README, re.M))
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
    for rule in ALERT_RULES:
        annotations = rule["annotations"]
        assert annotations["summary"], rule["alert"]
        assert annotations["description"], rule["alert"]
        url = annotations["runbook_url"]
        base, anchor = url.split("#")
        assert base == build.RUNBOOK_BASE
        if anchor == SIGNAL_LABEL:
            # One section per signal: every signal the rule can match must have its section.
            matched = [name for name in CATALOGUE if re.search(rf"\b{name}\b|severity=\"error\"", rule["expr"])]
            names = CATALOGUE if 'severity="error"' in rule["expr"] else matched
            assert names, rule["alert"]
            for name in names:
                assert name in anchors, (rule["alert"], name)
        else:
            assert anchor in anchors, (rule["alert"], anchor)
        assert rule["labels"]["severity"] in ("critical", "warning")


# --- promtool -------------------------------------------------------------------------------------------------


def _run(*args: str, cwd: Path = ROOT) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False, cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    promtool = _binary("promtool")
    assert "SUCCESS: 7 rules found" in _run(promtool, "check", "rules", str(build.RULES_FILE))
    tests = sorted(ALERTS.glob("*_test.yaml"))
    assert tests
    output = _run(promtool, "test", "rules", *map(str, tests), cwd=ALERTS)
    assert "SUCCESS" in output
    assert "FAILED" not in output
    # Each alert is tested both firing and quiet.
    text = "\n".join(path.read_text() for path in tests)
    for rule in ALERT_RULES:
        cases = re.findall(rf"alertname: {rule['alert']}\n\s+exp_alerts:(.*)", text)
        assert any(case.strip() == "[]" for case in cases), rule["alert"]
        assert any(case.strip() == "" for case in cases), rule["alert"]


def test_promtool_checks_the_stack_prometheus_config() -> None:
    promtool = _binary("promtool")
    output = _run(promtool, "check", "config", str(STACK / "prometheus.yml"))
    assert "is valid prometheus config file syntax" in output
    assert "SUCCESS: 7 rules found" in output


# --- the compose stack, offline -------------------------------------------------------------------------------

# Component types of opentelemetry-collector-contrib 0.147.0 that the stack uses (checked against its docs).
COLLECTOR_COMPONENTS = {
    "receivers": {"otlp"},
    "processors": {"batch"},
    "exporters": {"otlp_grpc", "otlp_http", "prometheus", "debug"},
}


def test_compose_stack_provisions_collector_prometheus_tempo_and_grafana() -> None:
    compose = yaml.safe_load((STACK / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"otel-collector", "prometheus", "tempo", "grafana"}
    assert services["otel-collector"]["image"].startswith("otel/opentelemetry-collector-contrib:")
    assert services["grafana"]["image"] == f"grafana/grafana:{build.GRAFANA_VERSION}.0"
    assert "127.0.0.1:4318:4318" in services["otel-collector"]["ports"]
    for service in services.values():
        for volume in service.get("volumes", []):
            source = (STACK / volume.split(":")[0]).resolve()
            assert source.exists(), volume
    # Prometheus sees the rules where its config says they are.
    [config_flag] = [f for f in services["prometheus"]["command"] if f.startswith("--config.file=")]
    mount = next(v for v in services["prometheus"]["volumes"] if v.startswith("..:"))
    container_root = mount.split(":")[1]
    assert config_flag == f"--config.file={container_root}/stack/prometheus.yml"

    collector = yaml.safe_load((STACK / "otelcol.yaml").read_text())
    used: set[str] = set()
    for pipeline in collector["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in collector[kind], component
                used.add(component)
    for kind, known in COLLECTOR_COMPONENTS.items():
        for component in collector[kind]:
            assert component.split("/")[0] in known, component
            assert component in used, component
    assert collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "0.0.0.0:4318"

    prometheus_config = yaml.safe_load((STACK / "prometheus.yml").read_text())
    [scrape] = prometheus_config["scrape_configs"]
    assert scrape["honor_labels"] is True
    exporter_port = collector["exporters"]["prometheus"]["endpoint"].split(":")[1]
    assert scrape["static_configs"][0]["targets"] == [f"otel-collector:{exporter_port}"]

    datasources = yaml.safe_load((STACK / "grafana/provisioning/datasources/datasources.yaml").read_text())
    assert {d["type"] for d in datasources["datasources"]} == {"prometheus", "tempo"}
    providers = yaml.safe_load((STACK / "grafana/provisioning/dashboards/dashboards.yaml").read_text())
    dashboard_dir = providers["providers"][0]["options"]["path"]
    assert any(v.endswith(f"{dashboard_dir}/context-health.json:ro") for v in services["grafana"]["volumes"])


def test_readme_shows_the_stack_commands() -> None:
    section = README.split("\n## See it in Grafana\n", 1)[1].split("\n## ", 1)[0]
    assert "docker compose -f dashboards/stack/compose.yaml up" in section
    assert "otel-responses demo --otlp-endpoint http://127.0.0.1:4318 --serve" in section
    assert "python -m dashboards.build" in section
    assert README.index("\n## See it in Grafana\n") < README.index("\n## The emulator\n")


# --- end to end: a real Prometheus scraping the real exporter -------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _query(base: str, expr: str) -> list[Any]:
    answer = _get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    assert answer["status"] == "success", answer
    result: list[Any] = answer["data"]["result"]
    return result


def _names(alerts: list[dict[str, Any]]) -> set[str]:
    return {alert["labels"]["openai_responses_signal_name"] for alert in alerts}


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_every_dashboard_and_alert_expression_returns_data_from_the_demo(tmp_path: Path) -> None:
    prometheus = _binary("prometheus")
    demo_port, compaction_port, web_port = _free_port(), _free_port(), _free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(build.RULES_FILE)],
        "scrape_configs": [
            {
                "job_name": "otel-responses-demo",
                "static_configs": [{"targets": [f"127.0.0.1:{demo_port}", f"127.0.0.1:{compaction_port}"]}],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    script = Path(sys.executable).parent / "otel-responses"
    processes: list[subprocess.Popen[bytes]] = []
    logs = {name: (tmp_path / f"{name}.log").open("wb") for name in ("demo", "compaction", "prometheus")}
    base = f"http://127.0.0.1:{web_port}"
    expressions = [(title, substitute(expr)) for title, expr in _expressions()]
    expressions += [(rule["alert"], rule["expr"]) for rule in ALERT_RULES]
    pending = dict.fromkeys(expressions)
    optional = [item for item in expressions if item[0] == "Compactions" and not HAS_COMPACT]
    try:
        demo_args = ["demo", "--prometheus-port", str(demo_port), "--serve", "--interval", "1"]
        for name, args in (
            ("demo", [str(script), *demo_args]),
            ("compaction", [sys.executable, "-c", COMPACTION_WORKLOAD, str(compaction_port)]),
            (
                "prometheus",
                [
                    prometheus,
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'data'}",
                    f"--web.listen-address=127.0.0.1:{web_port}",
                ],
            ),
        ):
            processes.append(subprocess.Popen(args, stdout=logs[name], stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        # The broken scenarios' error signals, each on a brand-new series that increase() alone would miss.
        expected = {"unstored_parent", "state_mode_conflict", "missing_tool_output", "orphan_tool_output"}
        firing: list[dict[str, Any]] = []
        while time.monotonic() < deadline and (pending or not expected <= _names(firing)):
            time.sleep(1)
            for name, process in zip(logs, processes, strict=True):
                log = (tmp_path / f"{name}.log").read_text(errors="replace")[-2000:]
                assert process.poll() is None, f"{name} exited with {process.returncode}:\n{log}"
            try:
                for item in list(pending):
                    if _query(base, item[1]) or item in optional:
                        del pending[item]
                alerts = _get(f"{base}/api/v1/alerts")["data"]["alerts"]
            except (urllib.error.URLError, ConnectionError):
                continue  # Prometheus still starting
            firing = [
                a for a in alerts if a["labels"]["alertname"] == "OpenAIResponsesErrorSignal" and a["state"] == "firing"
            ]
        assert not pending, "no data for:\n" + "\n\n".join(f"{title}:\n{expr}" for title, expr in pending)
        assert expected <= _names(firing), firing
        for alert in firing:
            assert alert["labels"]["job"] == "otel-responses-demo"
            name = alert["labels"]["openai_responses_signal_name"]
            assert alert["annotations"]["runbook_url"] == f"{build.RUNBOOK_BASE}#{name}"
        # The template variables' own queries find the service and the model.
        jobs = _get(f"{base}/api/v1/label/job/values?match[]=openai_responses_calls_total")["data"]
        models = _get(f"{base}/api/v1/label/gen_ai_request_model/values?match[]=openai_responses_calls_total")["data"]
        assert "otel-responses-demo" in jobs
        assert "gpt-5-mini" in models
    finally:
        for process in processes:
            _stop(process)
        for log in logs.values():
            log.close()
