"""The pytest kit's reports: a failing kit assertion writes the test's conversations as a page and names it; options
write one for every test, into a folder, or none. Run as a user's project runs it: pytest in a fresh directory,
the plugin found through its entry point."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ..report_support import conversations, parse
from ..support import user_pytest_env

PROJECT = """
from otel_responses.testing import assert_no_context_loss, assert_signal, capture


def chat(client, history, text):
    history.append({"role": "user", "content": text})
    response = client.responses.create(
        model="gpt-5.4",
        input=history,
        store=False,
        include=["reasoning.encrypted_content"],
        reasoning={"context": "all_turns"},
    )
    history.append({"role": "assistant", "content": response.output_text})  # the text only: context lost


def test_text_only_replay(responses_client, responses_telemetry):
    history = []
    chat(responses_client, history, "Remember this: the marker is M-7.")
    chat(responses_client, history, "Now choose a code word.")
    chat(responses_client, history, "What is the marker?")
    assert_no_context_loss(responses_telemetry)


def test_with_its_own_tmp_path(responses_client, tmp_path):
    print(f"TMP_PATH={tmp_path}")
    with capture() as telemetry:
        responses_client.responses.create(model="gpt-5.4", input="hi")
    assert_signal(telemetry, "unstored_parent")


def test_healthy(responses_client, responses_telemetry):
    responses_client.responses.create(model="gpt-5.4", input="hi")


def test_without_spans():
    assert True
"""
LINE = re.compile(r"^E\s+See the conversations turn by turn: (\S+)$", re.M)


def _pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (directory / "test_app.py").write_text(PROJECT)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={directory / 'tmp'}", *args],
        cwd=directory,
        env=user_pytest_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _turns(page: Path) -> list[list[tuple[str, tuple[str, ...]]]]:
    return [[(c.turn, c.signals) for c in calls] for calls in conversations(parse(page.read_text())).values()]


TEXT_ONLY = [
    [
        ("1", ()),
        ("2", ("reasoning_dropped", "phase_dropped")),
        ("3", ("reasoning_dropped", "phase_dropped")),
    ]
]


def test_a_failing_assertion_writes_the_tests_conversations_and_names_the_page(tmp_path: Path) -> None:
    result = _pytest(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^2 failed, 2 passed in ", result.stdout, re.M), result.stdout
    pages = [Path(p) for p in LINE.findall(result.stdout)]
    assert len(pages) == 2, result.stdout
    text_only, own = pages
    assert text_only.is_relative_to(tmp_path / "tmp")  # under pytest's base temporary directory
    assert text_only.name == "otel-responses-report.html"
    assert _turns(text_only) == TEXT_ONLY
    # A test with a tmp_path of its own gets its report there; an assert_signal failure writes one too.
    (own_tmp,) = re.findall(r"^TMP_PATH=(\S+)$", result.stdout, re.M)
    assert own == Path(own_tmp) / "otel-responses-report.html"
    assert _turns(own) == [[("1", ())]]
    # The summary lists them, and the failure still points at the user's line.
    assert f"otel-responses: 2 conversation reports:\n  {text_only}\n  {own}\n" in result.stdout
    assert re.search(r"^>\s+assert_no_context_loss\(responses_telemetry\)", result.stdout, re.M)


def test_every_test_that_captured_spans_gets_a_report_in_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    result = _pytest(tmp_path, "--otel-responses-report=all", f"--otel-responses-report-dir={folder}")
    assert result.returncode == 1, result.stdout + result.stderr
    assert sorted(p.name for p in folder.iterdir()) == [
        "test_app.py_test_healthy.html",
        "test_app.py_test_text_only_replay.html",
        "test_app.py_test_with_its_own_tmp_path.html",
    ]
    assert _turns(folder / "test_app.py_test_text_only_replay.html") == TEXT_ONLY
    assert _turns(folder / "test_app.py_test_healthy.html") == [[("1", ())]]
    assert [Path(p) for p in LINE.findall(result.stdout)] == [
        folder / "test_app.py_test_text_only_replay.html",
        folder / "test_app.py_test_with_its_own_tmp_path.html",
    ]


def test_reports_can_be_turned_off(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "--otel-responses-report=off")
    assert result.returncode == 1
    assert LINE.findall(result.stdout) == []
    assert "conversation report" not in result.stdout
    assert list((tmp_path / "tmp").rglob("*.html")) == []
    assert "AssertionError: context lost: 4 signals of severity error or warning:" in result.stdout
