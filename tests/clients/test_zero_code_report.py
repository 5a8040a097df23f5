"""The quick start's zero-code way to the report page, as the README writes it: the app under `opentelemetry-instrument`
with the upstream `opentelemetry-exporter-otlp-json-file` (`--traces_exporter otlp_json_file`: OTLP/JSON lines on
standard output, beside the app's own prints), then `otel-responses report`. Run again against a restarted emulator,
whose ids start over, and appended to the same file: two conversations, told apart by their span links.

The exporter pins the OpenTelemetry SDK release it was built with, so it lives in this folder's virtualenv
(tests/clients/requirements.txt), not in the test extra, whose floor pass runs an older SDK."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from otel_responses.emulator import Emulator

from ..report_support import parse
from ..support import free_port

pytest.importorskip("opentelemetry.exporter.otlp.json.file")

ROOT = Path(__file__).resolve().parents[2]
QUICK_START = (ROOT / "README.md").read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
# The report block is fenced `shell`, not `bash`: tests/project/test_readme_and_demo.py runs the bash blocks in the main
# virtualenv, which lacks the exporter.
(REPORT_BLOCK,) = re.findall(r"```shell\n(.*?)```", QUICK_START, re.S)
(APP,) = re.findall(r"cat > app.py <<'EOF'\n(.*?)\nEOF\n", QUICK_START, re.S)


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )


def _wrote(result: subprocess.CompletedProcess[str]) -> str:
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("wrote ")]
    return line


def test_the_quick_starts_zero_code_way_to_the_report_page(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "app.py").write_text(APP.replace("127.0.0.1:8080", f"127.0.0.1:{port}") + "\n")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    page = tmp_path / "report.html"
    note = "otel-responses report: note: run.jsonl: {} not JSON skipped (the app's own output, beside the spans?)"

    with Emulator(port=port):
        first = _bash(REPORT_BLOCK, tmp_path)  # as written
    assert first.returncode == 0, first.stdout + first.stderr
    assert _wrote(first) == f"wrote {page}: 1 conversation (1 with context loss) from 2 spans; open it in a browser"
    assert note.format("1 line that is") in first.stderr.splitlines()  # the app's print
    assert "Traceback" not in first.stderr

    # The app again, against the emulator started anew (its response ids repeat), appended to the same file.
    (run_line,) = [line for line in REPORT_BLOCK.split("\n.venv/bin/") if "opentelemetry-instrument" in line]
    with Emulator(port=port):
        again = _bash(".venv/bin/" + run_line.replace("> run.jsonl", ">> run.jsonl"), tmp_path)
    assert again.returncode == 0, again.stderr
    report = _bash(".venv/bin/otel-responses report run.jsonl --out report.html", tmp_path)
    assert report.returncode == 0, report.stderr
    assert _wrote(report) == f"wrote {page}: 2 conversations (2 with context loss) from 4 spans; open it in a browser"
    assert report.stderr == note.format("2 lines that are") + "\n"
    sections = parse(page.read_text()).find_all("section", class_="conv")
    assert [s.attrs.get("data-run") for s in sections] == ["1", "2"]
    assert len({s.attrs["data-key"] for s in sections}) == 1  # one lineage id, two runs
    for section in sections:
        assert [body.attrs["data-turn"] for body in section.find_all("tbody", class_="call")] == ["1", "2"]
        assert "branch" not in section.text()


def test_the_report_pages_app_writes_what_the_report_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report page's way from code, as written: the upstream exporter's ``FileSpanExporter`` behind a
    ``BatchSpanProcessor``, the instrumentation on, the provider shut down at exit; the report reads the file."""
    from otel_responses import ResponsesInstrumentor
    from otel_responses import attributes as a
    from otel_responses.tools.report.otlp_json import read

    page = (ROOT / "docs" / "report.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", page.split("## From an app, without a Collector", 1)[1], re.S)
    app = snippet.replace("client = openai.OpenAI()", "client = EMULATOR.client()")
    assert app != snippet
    monkeypatch.chdir(tmp_path)
    with Emulator() as emulator:
        try:
            exec(compile(app, "docs/report.md", "exec"), {"EMULATOR": emulator})
        finally:
            ResponsesInstrumentor().uninstrument()
    reading = read([str(tmp_path / "traces.jsonl")])
    assert (reading.problems, reading.notes) == ([], [])
    assert [(r.service, r.texts(a.SIGNALS)) for r in reading.spans] == [
        ("my-app", ("reasoning_not_replayable",)),
        ("my-app", ("unstored_parent",)),
    ]
