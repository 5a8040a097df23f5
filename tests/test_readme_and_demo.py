"""The README's commands and examples stay true, and the demo runs as the README writes it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from otel_responses.tools import scenarios

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, re.S)


def test_readme_starts_with_the_two_commands_and_ci_runs_the_test_command_verbatim() -> None:
    (lang1, run_cmd), (lang2, test_cmd) = BLOCKS[:2]
    assert lang1 == lang2 == "bash"
    assert "otel-responses demo" in run_cmd
    assert "pytest" in test_cmd
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd.strip() in ci


def test_readme_emulator_example_runs() -> None:
    example = next(code for lang, code in BLOCKS if lang == "python" and "Emulator()" in code)
    namespace: dict[str, object] = {}
    exec(compile(example, "README.md", "exec"), namespace)
    assert namespace["again"].output_text == "marker=M-1"  # type: ignore[attr-defined]


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


def test_readme_documents_every_signal_with_its_severity_and_fix() -> None:
    from otel_responses.signals import CATALOGUE

    for kind in CATALOGUE.values():
        section = README.split(f"\n### {kind.name}\n", 1)[1].split("\n### ", 1)[0]
        assert f"Severity: **{kind.severity}**" in section
        assert "Why context is lost:" in section
        assert kind.fix in section
        assert f"| [`{kind.name}`](#{kind.name}) | {kind.severity} |" in README


def test_readme_documents_every_setting() -> None:
    from otel_responses.config import ENV_PREFIX

    for name in (
        "ZDR",
        "INSTRUCTIONS_VERSION",
        "MAX_ITEM_TYPES",
        "HASH_KEY",
        "STRICT",
        "LEDGER_CAPACITY",
        "LEDGER_URL",
        "LEDGER_TTL",
        "LEDGER_TIMEOUT",
        "LEDGER_ACCEPT_UNSIGNED",
        "PRICES",
        "CHUNK_TIMING",
        "LEDGER_CLUSTER",
    ):
        assert f"`{ENV_PREFIX}{name}`" in README


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_command_section_documents_version_and_every_exit_code() -> None:
    from otel_responses.tools import cli

    section = _section("The `otel-responses` command")
    assert "otel-responses --version" in section
    codes = [value for name, value in vars(cli).items() if name.startswith("EXIT_")]
    own = sorted(code for code in codes if code != cli.EXIT_INTERRUPTED)  # 130 is the shell's, for Ctrl-C
    assert own == list(range(len(own)))
    for code in codes:
        assert f"`{code}`" in section.split("Exit codes", 1)[1], code
    assert "pip install 'otel-responses[cli]'" in section
    assert "Ctrl-C or SIGTERM stops it at once" in section
    assert "DESIGN.md" not in section  # users do not have it
    assert "[signal](#signals)" in section


def _console_command() -> str:
    enable = _section("Enable it")
    lines = [line for lang, code in re.findall(r"```(\w+)\n(.*?)```", enable, re.S) for line in code.splitlines()]
    return str(next(line for line in lines if line.startswith("opentelemetry-instrument") and "console" in line))


def _instrumented(command: str, app: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    argv = [*command.split()[:-1], str(app)]  # `... python your_app.py`: the venv's python, this app
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "EMULATOR_URL": base_url},
    )


def test_readme_console_auto_instrumentation_example_prints_spans(tmp_path: Path) -> None:
    """The README's console variant, run as written (opentelemetry-distro is in the test extra; the OTLP
    exporter package is not, as for a user trying the console first)."""
    from otel_responses.emulator import Emulator

    command = _console_command()
    assert command.endswith(" python your_app.py")
    app = tmp_path / "your_app.py"
    app.write_text(
        "import os\nimport openai\n"
        "client = openai.OpenAI(base_url=os.environ['EMULATOR_URL'], api_key='emulator-key', max_retries=0)\n"
        "print(client.responses.create(model='gpt-5-mini', input='Remember this: the marker is M-1.').output_text)\n"
    )
    with Emulator() as emulator:
        result = _instrumented(command, app, emulator.base_url)
        if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is None:
            # Why the README adds `--logs_exporter none`: without it, nothing is recorded.
            without = _instrumented(command.replace(" --logs_exporter none", ""), app, emulator.base_url)
            assert "Noted marker M-1." in without.stdout
            assert '"openai_responses.state.mode"' not in without.stdout
            assert "Requested component 'otlp_proto_grpc' not found" in without.stderr
    assert result.returncode == 0, result.stderr
    assert "Noted marker M-1." in result.stdout
    assert '"name": "chat gpt-5-mini"' in result.stdout
    assert '"openai_responses.state.mode": "single_turn"' in result.stdout  # the span, from this package
    assert '"name": "openai_responses.calls"' in result.stdout  # and the metrics
    assert "Traceback" not in result.stderr
