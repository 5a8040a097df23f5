"""The README's commands and its quick start stay true (run as written), it stays short, and the demo runs as the
README writes it. What the documentation pages say is checked in tests/project/test_docs.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from otel_responses.docs_links import DOCS_URL, signal_doc_url
from otel_responses.signals import CATALOGUE
from otel_responses.tools import scenarios

from ..support import free_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, re.S)


def test_readme_starts_with_the_two_commands_and_ci_runs_the_test_command_verbatim() -> None:
    (lang1, run_cmd), (lang2, test_cmd) = BLOCKS[:2]
    assert lang1 == lang2 == "bash"
    assert "otel-responses demo" in run_cmd
    assert "pytest" in test_cmd
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd.strip() in ci


def test_demo_command_as_the_readme_writes_it() -> None:
    script = Path(sys.executable).parent / "otel-responses"
    result = subprocess.run([str(script), "demo"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[2:] if line.strip() and "  " in line}
    for scenario in scenarios.SCENARIOS:
        row = rows[scenario.name]
        assert row.rstrip().endswith("ok"), row
        assert scenario.mode in row
        for signal in scenario.raises:
            assert signal in row, (signal, row)
        if scenario.mistake is None:
            assert " all kept " in row, row
        else:
            assert "all kept" not in row, row
    assert scenarios.INSTRUCTIONS not in result.stdout
    assert "every healthy session kept its context" in result.stdout


def test_demo_spans_option_prints_project_attributes() -> None:
    script = Path(sys.executable).parent / "otel-responses"
    result = subprocess.run([str(script), "demo", "--spans"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "== chain_unstored_parent: turn 1 with store=false, then chained to it" in result.stdout
    assert re.search(r"openai_responses\.signals\s+reasoning_not_replayable", result.stdout)
    assert re.search(r"openai_responses\.state\.mode\s+conflict", result.stdout)


def test_demo_rejects_unknown_arguments() -> None:
    script = Path(sys.executable).parent / "otel-responses"
    result = subprocess.run([str(script), "demo", "--nope"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "unrecognized arguments: --nope" in result.stderr


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_is_short_and_links_every_signal_to_its_section() -> None:
    assert len(README.splitlines()) <= 200
    signals = _section("Signals")
    listed = re.findall(r"^- \[`(\w+)`\]\((\S+)\) \((\w+)\): ", signals, re.M)
    assert [name for name, _, _ in listed] == list(CATALOGUE)
    for name, url, severity in listed:
        assert url == signal_doc_url(name)  # the anchor exists in the built site: tests/project/test_docs.py
        assert severity == CATALOGUE[name].severity
    assert DOCS_URL in README


def test_readme_never_suggests_an_install_command_that_cannot_work() -> None:
    """Not on a package index yet: from the checkout (or a built wheel); `pip install otel-responses` only in the
    Install section, which says it works once a release is published."""
    published = _section("Install")
    assert published.startswith("\nOnce a release is published on PyPI ")
    assert re.findall(r"pip install ['\"]?otel-responses(\[\w+\])?", published) == ["", "[cli]"]
    assert not re.search(r"pip install ['\"]?otel-responses", README.replace(published, ""))
    assert "not on a package index yet" in README


def test_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    """The quick start's commands, literally, in a fresh directory whose `.venv` is this one: the emulator in the
    background, the app zero-code under `opentelemetry-instrument`, then in code. Only the port differs (a free
    one), the script waits for the emulator to listen, and pip runs offline (everything is installed already)."""
    blocks = re.findall(r"```bash\n(.*?)```", _section("Quick start"), re.S)
    assert len(blocks) == 3
    script = "\n".join(blocks)
    assert ".venv/bin/otel-responses emulator --port 8080 &\n" in script
    assert "--traces_exporter console" in script
    assert "--logs_exporter console" in script
    assert "kill %1" in script
    port = free_port()
    wait = f"for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done\n"
    script = script.replace("--port 8080 &\n", f"--port {port} &\n{wait}").replace(
        "127.0.0.1:8080", f"127.0.0.1:{port}"
    )
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        start_new_session=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.count("marker=M-1") == 2  # the app ran twice: zero-code, then in code
    assert out.count('"name": "chat gpt-5-mini"') == 4  # two calls each time, one span per call
    # The second call of each run: a chain that dropped its instructions (metric points carry the mode too).
    assert len(re.findall(r'"openai_responses.signals": \[\s*"instructions_dropped"\s*\]', out)) == 2
    assert len(re.findall(r'"openai_responses.signals": \[\]', out)) == 2  # the first calls raise nothing
    assert '"openai_responses.state.mode": "server_chain"' in out
    assert '"name": "openai_responses.calls"' in out  # the zero-code run's console metrics
    assert "Traceback" not in result.stderr


def _heredoc(text: str, name: str) -> str:
    (body,) = re.findall(rf"cat > {re.escape(name)} <<'EOF'\n(.*?)\nEOF\n", text, re.S)
    return str(body)


def test_readme_and_the_quick_start_page_give_the_same_variants() -> None:
    """The in-code variant, and the zero-code way to the report page, read the same in both places (the README's
    quick start runs in tests above; the report block needs the upstream exporter, tests/clients runs it)."""
    page = (ROOT / "docs" / "quickstart.md").read_text()
    quick_start = _section("Quick start")
    assert _heredoc(quick_start, "app_in_code.py") == _heredoc(page, "app_in_code.py")
    (report_block,) = re.findall(r"```shell\n(.*?)```", quick_start, re.S)
    assert f"```bash\n{report_block}```" in page
    assert "opentelemetry-exporter-otlp-json-file" in report_block


def test_readme_says_what_the_logs_exporter_lacks_and_how_to_serve_the_site() -> None:
    quick_start = _section("Quick start")
    assert (
        "(the logs exporter too: it\ndefaults to OTLP over gRPC, whose exporter is not installed here)" in quick_start
    )
    (line,) = [line for line in README.splitlines() if line.startswith("Until the site is published")]
    assert ".venv/bin/pip install -e '.[docs]' && .venv/bin/mkdocs" in line
