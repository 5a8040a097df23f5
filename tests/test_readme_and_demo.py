"""The README's commands and examples stay true, and the demo runs as the README writes it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from otel_responses import scenarios

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
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for mode in scenarios.STATE_MODES:
        assert f"== {mode}: marker kept, tool kept, constraints kept" in out
    rows = [line.split() for line in out.splitlines() if re.match(r"^  \d ", line)]
    assert len(rows) == 12
    assert [row[1] for row in rows] == ["single_turn"] + ["server_chain"] * 3 + ["conversation"] * 4 + [
        "single_turn"
    ] + ["client_replay"] * 3
    assert scenarios.INSTRUCTIONS not in out
    assert "all facts kept in every state mode" in out
