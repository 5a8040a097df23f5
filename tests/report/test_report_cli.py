"""`otel-responses report` and `otel-responses demo --report`, run as a user runs them (a subprocess), on files the
OTLP/JSON exporters write, from real spans."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from otel_responses.testing import capture
from otel_responses.tools import scenarios
from otel_responses.tools.report.page import DOCS_URL
from otel_responses.version import install_hint

from ..otlp_lines import to_json_line, write_lines
from ..project.test_cli import run
from ..report_support import conversations, parse
from ..support import run_python

SCENARIO = "chain_unstored_parent"


@pytest.fixture(scope="module")
def traces(emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file of OTLP/JSON lines: one scripted session (two turns, two signals), one line per span."""
    client = emulator.client()
    try:
        with capture() as telemetry:
            scenarios.run(client, scenarios.BY_NAME[SCENARIO], "MK-cli")
    finally:
        client.close()
    path = tmp_path_factory.mktemp("traces") / "traces.jsonl"
    path.write_text("".join(to_json_line([span]) + "\n" for span in telemetry.spans()))
    return path


def _turns(page: Path) -> list[tuple[str, tuple[str, ...]]]:
    (calls,) = conversations(parse(page.read_text())).values()
    return [(c.turn, c.signals) for c in calls]


EXPECTED = [("1", ("reasoning_not_replayable",)), ("2", ("unstored_parent",))]


def test_a_file_of_traces_becomes_a_page(traces: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = run("report", str(traces), "--out", str(page), "--trace-url", "http://127.0.0.1:16686/trace/{trace_id}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote {page}: 1 conversation (1 with context loss) from 2 spans; open it in a browser\n"
    assert result.stderr == ""
    assert _turns(page) == EXPECTED
    html = page.read_text()
    assert f'href="{DOCS_URL}signals/#unstored_parent"' in html
    assert 'href="http://127.0.0.1:16686/trace/' in html
    assert "default-src 'none'" in html


def test_standard_input_and_standard_output(traces: Path) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "otel-responses"), "report", "-", "--out", "-"],
        input=gzip.compress(traces.read_bytes()),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"<!DOCTYPE html>")
    root = parse(result.stdout.decode())
    assert [(c.turn, c.signals) for calls in conversations(root).values() for c in calls] == EXPECTED


def test_bad_input_is_named_and_the_rest_is_still_reported(traces: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n" + traces.read_text() + '{"resourceSpans": 7}\n')
    missing = tmp_path / "missing.jsonl"
    page = tmp_path / "report.html"
    result = run("report", str(broken), str(missing), "--out", str(page))
    assert result.returncode == 1
    problems = [
        f"{broken}:4: resourceSpans: not a list",
        f"{missing}: cannot read it: No such file or directory",
    ]
    note = f"{broken}: 1 line that is not JSON skipped (the app's own output, beside the spans?)"
    assert result.stderr.splitlines() == [
        *(f"otel-responses report: {problem}" for problem in problems),
        f"otel-responses report: note: {note}",
    ]
    assert _turns(page) == EXPECTED
    root = parse(page.read_text())
    assert [li.text() for li in root.find_all("section", id="problems")[0].find_all("li")] == problems
    assert [li.text() for li in root.find_all("section", id="notes")[0].find_all("li")] == [note]


def test_no_span_of_this_package_is_a_failure(tmp_path: Path) -> None:
    empty = tmp_path / "other.jsonl"
    empty.write_text('{"resourceSpans": [{"scopeSpans": [{"scope": {"name": "my.app"}, "spans": [{}, {}]}]}]}\n')
    result = run("report", str(empty), "--out", str(tmp_path / "report.html"))
    assert result.returncode == 1
    assert result.stderr == (
        "otel-responses report: no span of otel-responses in the input (instrumentation scope otel_responses.*; "
        "2 spans of other instrumentations)\n"
    )
    assert (tmp_path / "report.html").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace-url", "javascript:alert(1)//{trace_id}"], "not an http(s) URL"),
        (["--trace-url", "http://jaeger/trace/"], "no {trace_id} in"),
        (["--docs-url", "file:///etc/passwd"], "not an http(s) URL"),
        (["--docs-url", "https://docs.example/it's/"], "not a documentation site's URL"),
        (["--out", ""], "must not be empty"),
    ],
    ids=["javascript", "no trace id", "docs", "docs with a quote", "empty out"],
)
def test_bad_usage(traces: Path, tmp_path: Path, args: list[str], message: str) -> None:
    out = [] if "--out" in args else ["--out", str(tmp_path / "r.html")]
    result = run("report", str(traces), *out, *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_stdin_once_and_an_unwritable_page(traces: Path, tmp_path: Path) -> None:
    result = run("report", "-", "-", "--out", str(tmp_path / "r.html"))
    assert result.returncode == 2
    assert result.stderr == "otel-responses report: standard input (-) can be read only once\n"
    nowhere = tmp_path / "no" / "such" / "dir" / "r.html"
    result = run("report", str(traces), "--out", str(nowhere))
    assert result.returncode == 1
    assert result.stderr == f"otel-responses report: cannot write {nowhere}: No such file or directory\n"
    assert not (tmp_path / "no").exists()


def test_the_apps_own_output_beside_the_spans_is_a_note(traces: Path, tmp_path: Path) -> None:
    """Standard output of an app whose spans were written there: its prints skipped, named once, exit 0."""
    run_out = tmp_path / "run.jsonl"
    lines = traces.read_text().splitlines()
    run_out.write_text("\n".join(["Starting...", lines[0], "marker=M-1", *lines[1:], "bye"]) + "\n")
    page = tmp_path / "report.html"
    result = run("report", str(run_out), "--out", str(page))
    assert (result.returncode, result.stderr) == (
        0,
        f"otel-responses report: note: {run_out}: 3 lines that are not JSON skipped (the app's own output, beside "
        "the spans?)\n",
    )
    assert result.stdout == f"wrote {page}: 1 conversation (1 with context loss) from 2 spans; open it in a browser\n"
    assert _turns(page) == EXPECTED


def test_console_exporter_output_says_so_in_one_line_and_writes_no_page(emulator: Any, tmp_path: Path) -> None:
    """The quick start's console output given to the report: one line saying what it is and what to do, not a
    problem per line; nothing could be read, so no page."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    client = emulator.client()
    try:
        with capture() as telemetry:
            scenarios.run(client, scenarios.BY_NAME[SCENARIO], "MK-console")
    finally:
        client.close()
    console = tmp_path / "console.txt"
    with console.open("w") as out:
        out.write("marker=M-1\n")
        ConsoleSpanExporter(out=out).export(telemetry.spans())
    page = tmp_path / "report.html"
    result = run("report", str(console), "--out", str(page))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [
        f"otel-responses report: {console}: the console exporter's output (an indented JSON object per span), not "
        "OTLP/JSON: write OTLP/JSON lines instead, e.g. `opentelemetry-instrument --traces_exporter otlp_json_file` "
        "(pip install opentelemetry-exporter-otlp-json-file), its FileSpanExporter in code, or the Collector's file "
        "exporter",
        "otel-responses report: nothing could be read from the input: no page written",
    ]
    assert not page.exists()


def test_a_run_whose_every_input_failed_writes_no_page(traces: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = run("report", str(tmp_path / "missing.jsonl"), "--out", str(page))
    assert result.returncode == 1
    assert result.stderr.endswith("otel-responses report: nothing could be read from the input: no page written\n")
    assert not page.exists()
    # Its near miss: one input read, one failed: the page holds what was read, exit 1.
    result = run("report", str(tmp_path / "missing.jsonl"), str(traces), "--out", str(page))
    assert result.returncode == 1
    assert _turns(page) == EXPECTED


BLOCKER = """
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, Block())
from otel_responses.tools.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _blocked(blocked: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    code = f"BLOCKED = {blocked!r}\n" + BLOCKER
    return run_python(code, *args)


def test_the_base_install_is_enough(traces: Path, tmp_path: Path) -> None:
    """No openai, no SDK, no protobuf, no exporter: reading and writing need the standard library."""
    blocked = ["openai", "google", "opentelemetry.sdk", "opentelemetry.proto", "opentelemetry.exporter", "zstandard"]
    result = _blocked(blocked, "report", str(traces), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stderr
    assert _turns(tmp_path / "r.html") == EXPECTED


def test_a_zstd_file_without_a_zstd_reader_exits_5(traces: Path, tmp_path: Path) -> None:
    import zstandard

    zst = tmp_path / "traces.jsonl.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(traces.read_bytes()))
    result = _blocked(["zstandard", "compression"], "report", str(zst), str(traces), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 5, result.stderr
    assert result.stderr == (
        f"otel-responses report: {zst}: zstd-compressed: reading it needs Python 3.14 or the `zstandard` package "
        f"({install_hint('zstd')})\n"
    )
    assert _turns(tmp_path / "r.html") == EXPECTED  # the other input is reported
    result = run("report", str(zst), "--out", str(tmp_path / "z.html"))  # with the package: read
    assert result.returncode == 0, result.stderr
    assert _turns(tmp_path / "z.html") == EXPECTED


def test_help_lists_the_exit_codes() -> None:
    result = run("report", "--help", timeout=60)
    assert result.returncode == 0
    assert "exit codes: 0 written; 1 an INPUT could not be read in full" in result.stdout
    assert "5 a zstd-compressed INPUT needs Python 3.14 or the zstandard package" in result.stdout
    top = run("--help", timeout=60)
    assert re.search(r"^    report +write a self-contained HTML page", top.stdout, re.M)


def test_the_demo_writes_the_report_of_its_scenarios(tmp_path: Path) -> None:
    page = tmp_path / "demo.html"
    result = run("demo", "--report", str(page))
    assert result.returncode == 0, result.stderr
    assert f"report of the scenarios' conversations: {page}\n" in result.stderr
    root = parse(page.read_text())
    labels = [s.attrs.get("data-label") for s in root.find_all("section", class_="conv")]
    assert sorted(labels) == sorted(s.name for s in scenarios.SCENARIOS)  # type: ignore[type-var]
    result = run("demo", "--report", str(tmp_path / "missing" / "demo.html"))
    assert result.returncode == 1
    assert result.stderr == f"otel-responses demo: cannot write the report {tmp_path / 'missing'}: no such directory\n"


# -- the documentation's own examples ------------------------------------------------------------------------------

DOCS = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", DOCS, re.S)


def test_the_documented_command_reports_the_documented_apps_calls(emulator: Any, tmp_path: Path) -> None:
    """The documented app's two calls, written as its exporter writes them (the app itself runs beside that exporter:
    tests/clients/test_zero_code_report.py), then `otel-responses report traces.jsonl --out report.html`."""
    (snippet,) = [code for lang, code in BLOCKS if lang == "python"]
    assert 'client.responses.create(model="gpt-5.4", input="Remember this: the marker is M-1.", store=False)' in snippet
    client = emulator.client()
    with capture() as telemetry:
        first = client.responses.create(model="gpt-5.4", input="Remember this: the marker is M-1.", store=False)
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model="gpt-5.4", input="What is the marker?", previous_response_id=first.id)
    write_lines(telemetry.spans(), tmp_path / "traces.jsonl")
    command = next(code for lang, code in BLOCKS if lang == "bash" and code.startswith("otel-responses report")).strip()
    assert command == "otel-responses report traces.jsonl --out report.html"
    result = run("report", str(tmp_path / "traces.jsonl"), "--out", str(tmp_path / "report.html"))
    assert result.returncode == 0, result.stderr
    assert _turns(tmp_path / "report.html") == EXPECTED


def test_the_documented_collector_configuration() -> None:
    (config,) = [yaml.safe_load(code) for lang, code in BLOCKS if lang == "yaml"]
    pipeline = config["service"]["pipelines"]["traces/otel-responses"]
    assert pipeline == {
        "receivers": ["otlp"],
        "processors": ["filter/otel-responses", "batch"],
        "exporters": ["file/otel-responses"],
    }
    assert set(config["receivers"]) == {"otlp"}
    assert set(config["processors"]) == {"batch", "filter/otel-responses"}
    exporter = config["exporters"]["file/otel-responses"]
    assert exporter["format"] == "json"  # one JSON object per line: what the report reads
    assert exporter["path"].endswith(".jsonl")
    # The optional filter drops every span but this package's (OTTL's IsMatch finds a match anywhere, like search).
    (condition,) = config["processors"]["filter/otel-responses"]["traces"]["span"]
    found = re.fullmatch(r'not IsMatch\(instrumentation_scope\.name, "(.+)"\)', condition)
    assert found is not None
    dropped = [not re.search(found.group(1), scope) for scope in ("otel_responses.instrumentor", "my.app")]
    assert dropped == [False, True]
