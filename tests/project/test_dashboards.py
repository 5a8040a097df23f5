"""The Grafana dashboard and the Prometheus alert rules of dashboards/: built from code, documented, and true.

The end-to-end test runs the demo workload with the real Prometheus exporter, a real ``prometheus`` scraping it
with the alert rules loaded, and evaluates every PromQL expression of the dashboard and of the rules through the
HTTP API: each must return data, so every metric and label name is one the exporter really produces.
``promtool`` and ``prometheus`` come from Debian's ``prometheus`` package (.ci/run installs it): without them the
tests that need them skip locally and fail in CI.
"""

from __future__ import annotations

import inspect
import json
import os
import re
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
from otel_responses import attributes
from otel_responses.signals import CATALOGUE

from ..support import free_port, prometheus_binary

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "dashboards"
ALERTS = DASHBOARDS / "alerts"
STACK = DASHBOARDS / "stack"
# The documentation pages whose sections the rules link to and the dashboard is described in.
SIGNALS_PAGE = (ROOT / "docs" / "signals.md").read_text()
GRAFANA_PAGE = (ROOT / "docs" / "grafana.md").read_text()
DASHBOARD = json.loads(build.DASHBOARD_FILE.read_text())
# The dashboard of each dialect of the GenAI conventions (the latest: OTEL_SEMCONV_STABILITY_OPT_IN=
# gen_ai_latest_experimental); the rules are one file for both.
DIALECTS = tuple(build.DASHBOARD_FILES)
DASHBOARDS = {dialect: json.loads(path.read_text()) for dialect, path in build.DASHBOARD_FILES.items()}
LATEST_ENV = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
RULES = yaml.safe_load(build.RULES_FILE.read_text())
ALERT_RULES = [rule for group in RULES["groups"] for rule in group["rules"]]
SIGNAL_LABEL = "{{ $labels.openai_responses_signal_name }}"

# The demo has no compaction scenario: this runs the doctor's compaction step (a long history compacted with
# responses.compact against the emulator) with the instrumentation on and serves its metrics like the demo does;
# and a retrieve of a response that does not exist, a failed call that is not inference (in the latest dialect its
# error has a histogram of its own, gen_ai.client.operation.duration, read by the errors panel's second query).
COMPACTION_WORKLOAD = """
import sys, time
import openai
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server
from otel_responses import ResponsesInstrumentor
from otel_responses.tools.doctor import Probe, compaction
from otel_responses.emulator import Emulator

start_http_server(int(sys.argv[1]), addr="127.0.0.1")
meters = MeterProvider(metric_readers=[PrometheusMetricReader()])
ResponsesInstrumentor().instrument(tracer_provider=TracerProvider(), meter_provider=meters)
with Emulator() as emulator:
    while True:
        compaction(Probe(emulator.client(), "gpt-5-mini"))
        try:
            emulator.client().responses.retrieve("resp_that_does_not_exist")
        except openai.NotFoundError:
            pass
        time.sleep(1)
"""


# Two models no one has used yet, once the test says so (a trigger file): one call on NEW_MODEL that raises one error
# signal (conversation and previous_response_id together: state_mode_conflict, a 400), and a priced four-turn chain
# on PRICED_MODEL (cost, cached input, turn depths 1 and 2-4), sent with truncation="auto" (the server-side
# truncation panel). Every series they make is brand new.
NEW_MODEL = "gpt-brand-new"
PRICED_MODEL = "gpt-brand-new-priced"
NEW_MODEL_WORKLOAD = """
import os, sys, time
import openai
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server
from otel_responses import ResponsesInstrumentor
from otel_responses.emulator import Emulator

port, trigger, new, priced = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
start_http_server(port, addr="127.0.0.1")
meters = MeterProvider(metric_readers=[PrometheusMetricReader()])
prices = {"currency": "USD", "models": {priced: {"input": 1.0, "cached_input": 0.25, "output": 4.0}}}
ResponsesInstrumentor().instrument(tracer_provider=TracerProvider(), meter_provider=meters, prices=prices)
with Emulator() as emulator:
    client = emulator.client()
    while not os.path.exists(trigger):
        time.sleep(0.1)
    try:
        client.responses.create(model=new, input="Hi", conversation="conv_new", previous_response_id="resp_new")
    except openai.BadRequestError:
        pass
    response = client.responses.create(
        model=priced, instructions="Be brief.", input="My name is Ada.", truncation="auto"
    )
    for question in ("What is my name?", "Say it again.", "Once more."):
        response = client.responses.create(
            model=priced,
            instructions="Be brief.",
            input=question,
            previous_response_id=response.id,
            truncation="auto",
        )
    open(trigger + ".done", "w").close()
    while True:
        time.sleep(1)
"""

# responses.compact came with openai 2.9.0: with an older SDK (the CI run at the supported floor) nothing can
# raise the compaction signal, and the Compactions panel's query is only checked to be valid.
HAS_COMPACT = hasattr(openai.resources.responses.Responses, "compact")


def _panels(board: dict[str, Any] = DASHBOARD) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _expressions(board: dict[str, Any] = DASHBOARD) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every Prometheus target of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in _panels(board)
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def substitute(expr: str, model: str = ".*") -> str:
    """A dashboard expression as Grafana sends it: every variable at "All" unless ``model`` is given, a 5-minute range
    and a 1-minute rate interval (Grafana's at a 15 s scrape interval). ``_ms`` first, as Grafana does."""
    for variable, value in (
        ("${service}", ".*"),
        ("$service", ".*"),
        ("${model}", model),
        ("$model", model),
        ("$__rate_interval_ms", "60000"),
        ("$__rate_interval", "1m"),
        ("$__range", "5m"),
    ):
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


# A counter's events in a window, a series' first sample included (promql.fresh); the test replaces it with the
# counter itself, which is what it counted when the series was born inside the window.
FRESH = re.compile(
    r"\(\((?P<s>[a-z_]+\{[^{}]*\}) unless last_over_time\((?P=s)\[2m\] offset (?P<w>[$\w]+)\)\)"
    r" or increase\((?P=s)\[(?P=w)\]\)\)"
)
COUNTER_SELECTOR = re.compile(r"\b(?:openai_responses|gen_ai)_\w+_(?:total|count|sum|bucket)\{")


def _targets(board: dict[str, Any] = DASHBOARD) -> list[tuple[str, dict[str, Any]]]:
    """(panel title, target) for every Prometheus target of every panel."""
    return [
        (panel["title"], target) for panel in _panels(board) for target in panel.get("targets", []) if "expr" in target
    ]


# --- built from code ------------------------------------------------------------------------------------------


def test_committed_dashboard_and_rules_are_what_the_code_builds() -> None:
    """Rebuild with `python -m dashboards.build` when this fails."""
    assert build.DASHBOARD_FILE.read_text() == build.render_dashboard()
    assert build.RULES_FILE.read_text() == build.render_rules()
    assert build.LATEST_DASHBOARD_FILE.read_text() == build.render_dashboard(semconv="latest")
    assert build.main(["--check"]) == 0
    assert build.main(["--check", "--semconv", "latest"]) == 0


def test_each_dashboard_reads_its_dialects_names_and_the_rules_neither() -> None:
    """The latest dashboard reads the usage counters and the inference duration and none of the default dialect's
    GenAI names, the default one the reverse; the one row that differs is the tokens one. The rules read no GenAI
    metric: one rule file serves both dialects."""
    latest_only = ("gen_ai_client_inference_", "gen_ai_token_modality")
    default_only = ("gen_ai_client_token_usage", "openai_responses_tokens_total", "gen_ai_token_type")
    exprs = {d: "\n".join(expr for _, expr in _expressions(board)) for d, board in DASHBOARDS.items()}
    assert all(
        name in exprs["latest"] for name in ("gen_ai_client_inference_usage_", "gen_ai_client_inference_duration")
    )
    assert not [name for name in default_only if name in exprs["latest"]]
    assert all(name in exprs["default"] for name in default_only[:2])
    assert not [name for name in latest_only if name in exprs["default"]]
    assert "gen_ai_client_operation_duration_seconds_count" in exprs["latest"]  # errors of the other operations
    by_panel = {
        dialect: {p["title"]: [t.get("expr") for t in p.get("targets", [])] for p in _panels(board)}
        for dialect, board in DASHBOARDS.items()
    }
    assert by_panel["default"].keys() == by_panel["latest"].keys()
    differing = {title for title, exprs in by_panel["default"].items() if exprs != by_panel["latest"][title]}
    assert differing == {"Token usage", "Cache hit ratio", "Latency p50 / p95 / p99 by model", "Errors by error.type"}
    rules = "\n".join(rule["expr"] for rule in ALERT_RULES)
    assert "gen_ai_client" not in rules
    assert set(re.findall(r"\b([a-z_]+)_total\b", rules)) == {"openai_responses_signals", "openai_responses_calls"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dashboard_has_the_promised_panels_and_variables(dialect: str) -> None:
    board = DASHBOARDS[dialect]
    assert board["title"] == "OpenAI Responses — context health"
    titles = {panel["title"] for panel in _panels(board) if panel["type"] != "row"}
    for title in (
        "Signal rate by name, severity and model",
        "Share of calls with context loss",
        "State-mode mix",
        "store=false share",
        "Encrypted reasoning round trips",
        "Tool-call check failures",
        "Compactions",
        TRUNCATION_PANEL,
        "Token usage",
        "Cache hit ratio",
        "Latency p50 / p95 / p99 by model",
        "Errors by error.type",
        "Spans that lost context (Tempo)",
        "Signals by depth in the chain",
        "Share of calls with context loss by depth in the chain",
        "Context loss by depth in the chain (selected range)",
        "Cost (selected range)",
        "Cost per hour by model",
        "Share saved by cached input",
        "Responses of the conversation, tool round trips included (Tempo)",
    ):
        assert title in titles
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["tempo"]["query"] == "tempo"
    assert variables["service"]["query"] == "label_values(openai_responses_calls_total, job)"
    assert "gen_ai_request_model" in variables["model"]["query"]
    for name in ("service", "model"):
        assert variables[name]["includeAll"] is True
        assert variables[name]["allValue"] == ".*"
    assert variables["lineage"]["type"] == "textbox"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_panel_has_a_description_and_uses_the_datasource_variables(dialect: str) -> None:
    for panel in _panels(DASHBOARDS[dialect]):
        if panel["type"] == "row":
            continue
        assert len(panel.get("description", "")) > 80, panel["title"]
        assert panel["datasource"]["uid"] in ("${datasource}", "${tempo}"), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
    filters = re.escape('{job=~"$service", gen_ai_request_model=~"$model"')
    unfiltered = re.compile(rf"\b(?:openai_responses|gen_ai)_\w+_(?:total|bucket|count|sum)\b(?!{filters})")
    for title, expr in _expressions(DASHBOARDS[dialect]):
        assert any(f"_{suffix}{{" in expr for suffix in ("total", "bucket", "count", "sum")), title
        assert not unfiltered.search(expr), (title, expr)


def _tempo_panels() -> dict[str, dict[str, Any]]:
    return {p["title"]: p for p in _panels() if p.get("datasource", {}).get("uid") == "${tempo}"}


def test_tempo_panel_lists_spans_with_context_loss_and_links_to_the_drill_down() -> None:
    panel = _tempo_panels()["Spans that lost context (Tempo)"]
    [target] = panel["targets"]
    assert target["queryType"] == "traceql"
    assert "span.openai_responses.context_loss = true" in target["query"]
    assert "resource.service.name" in target["query"]
    assert "span.openai_responses.lineage.id" in target["query"]  # the column the data link reads
    [override] = panel["fieldConfig"]["overrides"]
    assert override["matcher"] == {"id": "byName", "options": "openai_responses.lineage.id"}
    [links] = override["properties"]
    assert links["id"] == "links"
    [link] = links["value"]
    url = urllib.parse.urlsplit(link["url"])
    assert url.path == f"/d/{DASHBOARD['uid']}/"
    query = url.query.split("&")
    assert "var-lineage=${__value.raw}" in query  # this span's lineage id
    assert {"${__url_time_range}", "${datasource:queryparam}", "${tempo:queryparam}"} <= set(query)


def test_drill_down_lists_the_turns_of_one_conversation_in_order() -> None:
    panel = _tempo_panels()["Responses of the conversation, tool round trips included (Tempo)"]
    [target] = panel["targets"]
    assert target["queryType"] == "traceql"
    assert target["tableType"] == "spans"
    spanset, selected = parse_traceql(target["query"])
    assert spanset == [("span.openai_responses.lineage.id", "=", '"$lineage"')]
    for field in (
        "span.openai_responses.turn",
        "span.openai_responses.state.mode",
        "span.openai_responses.signals",
        "span.gen_ai.usage.input_tokens",
        "span.gen_ai.usage.output_tokens",
    ):
        assert field in selected
    assert panel["options"]["sortBy"] == [{"displayName": "openai_responses.turn", "desc": False}]
    # The row names the conversation; its variable is a text box.
    rows = [p["title"] for p in DASHBOARD["panels"] if p["type"] == "row"]
    assert "Conversation $lineage" in rows


# --- TraceQL, structurally (no Tempo here: its packages are AGPL-licensed and none is installed) ----------------

_KNOWN_ATTRIBUTES = {value for name, value in vars(attributes).items() if name.isupper() and isinstance(value, str)}
_TYPES = {
    attributes.CONTEXT_LOSS: "bool",
    attributes.TURN: "int",
    attributes.LINEAGE_ID: "string",
    attributes.GEN_AI_REQUEST_MODEL: "string",
    "service.name": "string",
}
_CONDITION = re.compile(r'(span|resource)\.([\w.]+) (=|!=|=~|!~|>|<|>=|<=) (true|false|-?\d+|"[^"\\]*")')


def parse_traceql(query: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``{ c && c ... } | select(a, b, ...)`` into its conditions and selected fields, or an AssertionError.

    Only the shape these dashboards use: one spanset filter of ``&&``-joined conditions on span or resource
    attributes, then one ``select``. Each attribute must be one the package writes (or ``resource.service.name``),
    each value of the attribute's type, and each operator one that type takes."""
    match = re.fullmatch(r"\{ (?P<conditions>.+?) \} \| select\((?P<fields>[^()]+)\)", query)
    assert match, query
    conditions = []
    for text in match["conditions"].split(" && "):
        condition = _CONDITION.fullmatch(text)
        assert condition, (text, query)
        scope, name, op, value = condition.groups()
        assert name in _KNOWN_ATTRIBUTES or (scope, name) == ("resource", "service.name"), name
        kind = "string" if value.startswith('"') else "bool" if value in ("true", "false") else "int"
        assert _TYPES.get(name, kind) == kind, (name, value)
        assert op in (("=", "!=", "=~", "!~") if kind == "string" else ("=", "!=") if kind == "bool" else op), op
        if op in ("=~", "!~"):
            re.compile(value[1:-1].replace("${service:regex}", ".*").replace("${model:regex}", ".*"))
        conditions.append((f"{scope}.{name}", op, value))
    fields = match["fields"].split(", ")
    for field in fields:
        scope, _, name = field.partition(".")
        assert scope == "span", field
        assert name in _KNOWN_ATTRIBUTES, field
    assert len(set(fields)) == len(fields), fields
    return conditions, fields


def test_every_traceql_query_is_well_formed() -> None:
    queries = [t["query"] for p in _tempo_panels().values() for t in p["targets"]]
    assert len(queries) == 2
    for query in queries:
        parse_traceql(query)
    # The example of the Grafana page too.
    parse_traceql('{ span.openai_responses.lineage.id = "conv_123" } | select(span.openai_responses.turn)')
    for broken in (
        '{ span.openai_responses.turn = "1" } | select(span.openai_responses.turn)',  # an int attribute
        "{ span.openai_responses.context_loss =~ true } | select(span.openai_responses.turn)",
        '{ span.openai_responses.lineage = "x" } | select(span.openai_responses.turn)',  # no such attribute
        '{ span.openai_responses.lineage.id = "x" | select(span.openai_responses.turn)',
    ):
        with pytest.raises(AssertionError):
            parse_traceql(broken)


# --- first samples and calls without a model ------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_counting_query_counts_the_first_sample_of_a_new_series(dialect: str) -> None:
    """Every counter in every panel is read through promql.fresh(): no bare rate()/increase() left to miss an event."""
    for title, target in _targets(DASHBOARDS[dialect]):
        expr = target["expr"]
        rest = FRESH.sub("X", expr)
        assert FRESH.search(expr), title
        assert not COUNTER_SELECTOR.search(rest), (title, rest)
        assert "rate(" not in rest, (title, rest)
        assert "increase(" not in rest, (title, rest)
        window = "$__range" if target.get("instant") else "$__rate_interval"
        assert {m["w"] for m in FRESH.finditer(expr)} == {window}, title
        if "$__rate_interval_ms" in expr:
            assert not target.get("instant"), title


@pytest.mark.parametrize("dialect", DIALECTS)
def test_per_model_panels_leave_out_or_name_calls_without_a_model(dialect: str) -> None:
    for title, target in _targets(DASHBOARDS[dialect]):
        expr = target["expr"]
        if not re.search(r"by \([^)]*\bgen_ai_request_model\b", expr):
            continue
        named = expr.startswith("label_replace(") and '"gen_ai_request_model", "(no model)"' in expr
        selectors = COUNTER_SELECTOR.findall(expr)
        assert named or expr.count('gen_ai_request_model!=""') == len(selectors), title


def test_every_alert_is_documented_and_links_to_its_signal_section() -> None:
    assert {rule["alert"] for rule in ALERT_RULES} == {
        "OpenAIResponsesErrorSignal",
        "OpenAIResponsesWarningSignalRatioHigh",
        "OpenAIResponsesStateModeConflictAndUnstoredParent",
        "OpenAIResponsesInstructionsDropped",
        "OpenAIResponsesContextDuplicated",
        "OpenAIResponsesDuplicateItemId",
        "OpenAIResponsesReasoningDropped",
        "OpenAIResponsesReasoningAcrossABoundary",
        "OpenAIResponsesToolOutputMissingOrOrphaned",
    }
    # Each section's anchor, explicit (`## name {#name}`) or as mkdocs makes it from the heading (the built site's
    # ids are checked in tests/project/test_docs.py).
    headings = re.findall(r"^#+ (.+?)(?: \{#([\w-]+)\})?$", SIGNALS_PAGE, re.M)
    anchors = {anchor or re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h, anchor in headings}
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
    promtool = prometheus_binary("promtool")
    assert "SUCCESS: 9 rules found" in _run(promtool, "check", "rules", str(build.RULES_FILE))
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


TRUNCATION_PANEL = "Calls with server-side truncation, by state mode"


def _exported_calls(client: openai.OpenAI) -> list[str]:
    """A chain of three turns with ``truncation="auto"``, one call with ``disabled`` and one without, through the
    instrumentation and the real Prometheus exporter: its ``openai_responses_calls_total`` lines, as scraped."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from prometheus_client import CollectorRegistry, generate_latest

    from otel_responses import ResponsesInstrumentor

    if "registry" not in inspect.signature(PrometheusMetricReader).parameters:
        pytest.skip("this opentelemetry-exporter-prometheus writes to the global registry only (a newer one takes one)")
    registry = CollectorRegistry()
    instrumentor = ResponsesInstrumentor()
    meters = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    instrumentor.instrument(tracer_provider=TracerProvider(), meter_provider=meters)
    try:
        previous = None
        for turn in ("Hello.", "And then?", "Go on."):
            kwargs: dict[str, Any] = {"previous_response_id": previous} if previous else {}
            previous = client.responses.create(model="gpt-5-mini", input=turn, truncation="auto", **kwargs).id
        client.responses.create(model="gpt-5-mini", input="Off.", truncation="disabled")
        client.responses.create(model="gpt-5-mini", input="Unset.")
    finally:
        instrumentor.uninstrument()
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if line.startswith("openai_responses_calls_total{")]


def test_promtool_evaluates_the_truncation_panel_on_the_exporters_own_samples(
    client: openai.OpenAI, tmp_path: Path
) -> None:
    """The panel's query, as Grafana sends it, over the series the real exporter wrote (each born at its first
    sample, as a scrape finds it): only calls sent with truncation=auto, by state mode, their first samples
    counted; none once they stop."""
    promtool = prometheus_binary("promtool")
    lines = _exported_calls(client)
    # auto: single_turn (turn 1) at 1, server_chain (turns 2 and 3, both depth 2-4) at 2; disabled; unset.
    assert len(lines) == 4
    assert sum('openai_responses_truncation="auto"' in line for line in lines) == 2
    assert sum('openai_responses_truncation=""' in line for line in lines) == 1  # the exporter fills a label in
    series = []
    for line in lines:
        selector, value = line.rsplit(" ", 1)
        series.append({"series": selector[:-1] + ',job="app"}', "values": f"_x4 {float(value):g}x10"})
    [target] = next(p for p in _panels() if p["title"] == TRUNCATION_PANEL)["targets"]
    expr = substitute(target["expr"])

    def samples(server_chain: float, single_turn: float) -> list[dict[str, Any]]:
        return [
            {"labels": '{openai_responses_state_mode="server_chain"}', "value": server_chain},
            {"labels": '{openai_responses_state_mode="single_turn"}', "value": single_turn},
        ]

    case = {
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {"expr": expr, "eval_time": "3m", "exp_samples": []},
            {"expr": expr, "eval_time": "4m", "exp_samples": samples(2, 1)},  # born: whole values, per minute
            {"expr": expr, "eval_time": "9m", "exp_samples": samples(0, 0)},  # no call since
        ],
    }
    tests = tmp_path / "truncation_test.yaml"
    tests.write_text(yaml.safe_dump({"evaluation_interval": "1m", "tests": [case]}, width=1000))
    output = _run(promtool, "test", "rules", str(tests), cwd=tmp_path)
    assert "SUCCESS" in output


def test_promtool_checks_the_stack_prometheus_config() -> None:
    promtool = prometheus_binary("promtool")
    output = _run(promtool, "check", "config", str(STACK / "prometheus.yml"))
    assert "is valid prometheus config file syntax" in output
    assert "SUCCESS: 9 rules found" in output


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


def test_the_grafana_page_lists_every_alert_with_its_severity() -> None:
    table = GRAFANA_PAGE.split("\n## The alert rules\n", 1)[1].split("\n#", 1)[0]
    rows = {
        row.split(" | ")[0].strip("| `"): row.split(" | ")[2] for row in table.splitlines() if row.startswith("| `")
    }
    assert rows == {rule["alert"]: rule["labels"]["severity"] for rule in ALERT_RULES}


def test_the_grafana_page_shows_the_stack_commands() -> None:
    assert "docker compose -f dashboards/stack/compose.yaml up" in GRAFANA_PAGE
    assert "otel-responses demo --otlp-endpoint http://127.0.0.1:4318 --serve" in GRAFANA_PAGE
    assert "python -m dashboards.build" in GRAFANA_PAGE
    assert '{ span.openai_responses.lineage.id = "conv_' in GRAFANA_PAGE


def test_the_builder_points_the_runbooks_at_another_copy_of_the_documentation() -> None:
    base = "https://docs.example.internal/otel-responses"
    rules = yaml.safe_load(build.render_rules(base))
    urls = [rule["annotations"]["runbook_url"] for group in rules["groups"] for rule in group["rules"]]
    assert urls
    assert all(url.startswith(f"{base}/signals/#") for url in urls)
    dashboard = json.loads(build.render_dashboard(base))
    assert [link["url"] for link in dashboard["links"]] == [f"{base}/signals/#signals"]
    assert build.render_rules() == build.RULES_FILE.read_text()  # the default: the published site


# --- end to end: a real Prometheus scraping the real exporter -------------------------------------------------


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _query(base: str, expr: str, at: float | None = None) -> list[Any]:
    params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
    answer = _get(f"{base}/api/v1/query?{urllib.parse.urlencode(params)}")
    assert answer["status"] == "success", answer
    result: list[Any] = answer["data"]["result"]
    return result


def _as_grafana(base: str, target: dict[str, Any], expr: str, at: float) -> dict[str, float]:
    """The target's values at ``at`` by label set: an instant query for instant targets, else the last point of a
    range query over the two minutes before (a time-series panel's right edge)."""
    if target.get("instant"):
        result = [(r["metric"], r["value"][1]) for r in _query(base, expr, at)]
    else:
        params = {"query": expr, "start": f"{at - 120:.3f}", "end": f"{at:.3f}", "step": "5"}
        answer = _get(f"{base}/api/v1/query_range?{urllib.parse.urlencode(params)}")
        assert answer["status"] == "success", answer
        result = [(r["metric"], r["values"][-1][1]) for r in answer["data"]["result"] if r["values"][-1][0] == at]
    return {json.dumps(metric, sort_keys=True): float(value) for metric, value in result}


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


def _firing(alerts: list[dict[str, Any]], name: str = "OpenAIResponsesErrorSignal") -> list[dict[str, Any]]:
    return [a for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"]


def _expected(base: str, target: dict[str, Any], expr: str, at: float) -> dict[str, float]:
    """What the target must show when every series it reads was born inside its window: each counter at its whole
    value (promql.fresh's first term). A bare rate()/increase() would show nothing for such series."""
    return _as_grafana(base, target, FRESH.sub(lambda m: f"({m['s']})", expr), at)


def _check_new_model(base: str, model: str, at: float, board: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Every Prometheus target of the dashboard, ``$model`` set to ``model``, evaluated as Grafana would at ``at``:
    equal to what it must count, never NaN. Returns the values by panel title."""
    shown: dict[str, dict[str, float]] = {}
    for title, target in _targets(board):
        expr = substitute(target["expr"], model)
        actual, expected = _as_grafana(base, target, expr, at), _expected(base, target, expr, at)
        assert actual.keys() == expected.keys(), (title, model, actual, expected)
        for key, value in actual.items():
            assert value == pytest.approx(expected[key], rel=1e-9), (title, model, key, value, expected[key])
            assert value == value, (title, model, key)  # not NaN
        if actual:
            shown.setdefault(title, {}).update(actual)
    return shown


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dashboard_and_alert_expression_returns_data_from_the_demo(tmp_path: Path, dialect: str) -> None:
    """The demo fills every panel and fires the error alerts; then, on two models never seen before, one error
    signal fires its alert and shows as 1 on every panel that counts it, and a priced chain fills the cost and
    turn-depth panels, first samples included. In each dialect: its dashboard over the series the demo exports in it
    (the workloads run with OTEL_SEMCONV_STABILITY_OPT_IN set for the latest one), the same rules."""
    prometheus = prometheus_binary("prometheus")
    board = DASHBOARDS[dialect]
    env = (
        {**os.environ, **LATEST_ENV}
        if dialect == "latest"
        else {k: v for k, v in os.environ.items() if k != "OTEL_SEMCONV_STABILITY_OPT_IN"}
    )
    demo_port, compaction_port, new_port, web_port = free_port(), free_port(), free_port(), free_port()
    targets = [f"127.0.0.1:{port}" for port in (demo_port, compaction_port, new_port)]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(build.RULES_FILE)],
        "scrape_configs": [{"job_name": "otel-responses-demo", "static_configs": [{"targets": targets}]}],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    script = Path(sys.executable).parent / "otel-responses"
    trigger = tmp_path / "trigger"
    processes: list[subprocess.Popen[bytes]] = []
    logs = {name: (tmp_path / f"{name}.log").open("wb") for name in ("demo", "compaction", "new", "prometheus")}
    base = f"http://127.0.0.1:{web_port}"
    expressions = [(title, substitute(target["expr"])) for title, target in _targets(board)]
    expressions += [(rule["alert"], rule["expr"]) for rule in ALERT_RULES]
    pending = dict.fromkeys(expressions)
    optional = [item for item in expressions if item[0] == "Compactions" and not HAS_COMPACT]
    try:
        demo_args = ["demo", "--prometheus-port", str(demo_port), "--serve", "--interval", "1"]
        new_args = [str(new_port), str(trigger), NEW_MODEL, PRICED_MODEL]
        for name, args in (
            ("demo", [str(script), *demo_args]),
            ("compaction", [sys.executable, "-c", COMPACTION_WORKLOAD, str(compaction_port)]),
            ("new", [sys.executable, "-c", NEW_MODEL_WORKLOAD, *new_args]),
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
            processes.append(subprocess.Popen(args, stdout=logs[name], stderr=subprocess.STDOUT, env=env))
        deadline = time.monotonic() + 90
        # The broken scenarios' error signals, each on a brand-new series that increase() alone would miss.
        expected = {"unstored_parent", "state_mode_conflict", "missing_tool_output", "orphan_tool_output"}
        firing: list[dict[str, Any]] = []
        triggered = at = None
        priced_calls = f'sum(openai_responses_calls_total{{gen_ai_request_model="{PRICED_MODEL}"}})'
        while time.monotonic() < deadline and (pending or not expected <= _names(firing) or at is None):
            time.sleep(1)
            for name, process in zip(logs, processes, strict=True):
                log = (tmp_path / f"{name}.log").read_text(errors="replace")[-2000:]
                assert process.poll() is None, f"{name} exited with {process.returncode}:\n{log}"
            try:
                if triggered is None and _query(base, f'up{{instance="127.0.0.1:{new_port}"}} == 1'):
                    trigger.touch()  # scraped before: its next series are new to a running Prometheus
                    triggered = time.time()
                for item in list(pending):
                    if _query(base, item[1]) or item in optional:
                        del pending[item]
                alerts = _get(f"{base}/api/v1/alerts")["data"]["alerts"]
                now = float(int(time.time()))
                if (
                    at is None
                    and any(a["labels"]["gen_ai_request_model"] == NEW_MODEL for a in _firing(alerts))
                    and [r["value"][1] for r in _query(base, priced_calls, now)] == ["4"]
                ):
                    at = now  # within a minute (the rate interval) of every new series' birth
            except (urllib.error.URLError, ConnectionError):
                continue  # Prometheus still starting
            firing = _firing(alerts)
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
        assert {"gpt-5-mini", NEW_MODEL, PRICED_MODEL} <= set(models)

        # One error signal on a model never seen before: its alert fired, and every panel that counts it shows 1.
        assert at is not None, "the new model's alert or the priced calls never showed"
        assert triggered is not None
        assert at - triggered < 45, "too slow to evaluate inside the rate interval"
        shown = _check_new_model(base, NEW_MODEL, at, board)
        ones = {
            "Error signals",
            "Calls",
            "Calls with context loss",
            "Signal rate by name, severity and model",
            "Signals in the selected range",
            "Share of calls with context loss",
            "Errors by error.type",
        }
        for title in ones:
            assert list(shown.get(title, {}).values()) == [1.0], (title, shown.get(title))
        counting = {
            title
            for title, target in _targets(board)
            if not re.search(r"_(?:bucket|sum)\{|cost|tokens", target["expr"])
        }
        for title in counting & shown.keys():
            assert set(shown[title].values()) <= {0.0, 1.0}, (title, shown[title])  # one call, one signal
        # The priced chain's first samples: cost, cost saved, turn depths, tokens, latency, all there.
        shown = _check_new_model(base, PRICED_MODEL, at, board)
        for title in (
            "Cost (selected range)",
            "Cost per hour by model",
            "Share saved by cached input",
            "Share of calls with context loss by depth in the chain",
            "Context loss by depth in the chain (selected range)",
            "Token usage",
            "Cache hit ratio",
            "Latency p50 / p95 / p99 by model",
        ):
            assert shown.get(title), title
        assert all(0 < v < 1 for v in shown["Share saved by cached input"].values()), shown
        by_mode = {json.loads(key)["openai_responses_state_mode"]: v for key, v in shown[TRUNCATION_PANEL].items()}
        assert by_mode == {"single_turn": 1.0, "server_chain": 3.0}  # the chain's first turn, then three chained

        # Calls without a model (conversations.create and items in the demo, retrieve) exist, and no per-model
        # panel shows them as an empty model.
        assert _query(base, 'openai_responses_calls_total{gen_ai_request_model=""}'), "the demo made none"
        for title, target in _targets(board):
            if "gen_ai_request_model" not in target["expr"].split("(", 1)[0] + "".join(
                re.findall(r"by \(([^)]*)\)", target["expr"])
            ):
                continue
            for key in _as_grafana(base, target, substitute(target["expr"]), float(int(time.time()))):
                assert json.loads(key).get("gen_ai_request_model", "") != "", (title, key)
    finally:
        for process in processes:
            _stop(process)
        for log in logs.values():
            log.close()
