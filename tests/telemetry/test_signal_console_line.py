"""A signal seen on a console without a backend: one line through the `otel_responses` logger (the `log_signals`
setting), once per signal per process by default, through Python's last-resort handler when the app configured
no logging and through the app's own handlers when it did; never a payload.

The zero-code runs are `opentelemetry-instrument` in a fresh process against the emulator, as the quick start has a
user run them; the rules of the line (once, per lineage at `info`, the bound per minute) are rows on `SignalLog`
with a clock of the test's own.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from otel_responses._analysis.lineage import Lineage
from otel_responses._telemetry.recorded import Outcome
from otel_responses._telemetry.signal_log import PER_MINUTE, SignalLog, parse_level
from otel_responses.docs_links import signal_doc_url
from otel_responses.emulator import Emulator
from otel_responses.signals import CATALOGUE, Signal
from otel_responses.testing import capture

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "docs" / "quickstart.md").read_text()
EXAMPLE_URL = "http://127.0.0.1:8080/v1"
BIN = Path(sys.executable).parent
SECRET_INSTRUCTIONS = "Answer as SECRET-INSTR-5521 would."
SECRET_INPUT = "Remember this: the marker is SECRET-INPUT-7781."


def _line_pattern(name: str, turn: str = r"\d+", once: str = "once per process") -> str:
    kind = CATALOGUE[name]
    return (
        rf"otel-responses: {name} \({kind.severity}\), turn {turn}, response (resp_[0-9a-f]+|none): "
        rf"{re.escape(kind.fix)}\. {re.escape(signal_doc_url(name))} \(logged {once}; see the log_signals setting\)"
    )


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object the console exporters printed, in order (other lines skipped)."""
    decoder = json.JSONDecoder()
    found, i = [], 0
    while (start := text.find("{", i)) != -1:
        try:
            value, i = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            i = start + 1
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


def _zero_code(
    app: str, tmp_path: Path, base_url: str, *exporters: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``app`` run under `opentelemetry-instrument` with ``exporters`` (its options), as a user runs it."""
    script = tmp_path / "app.py"
    script.write_text(app.replace(EXAMPLE_URL, base_url))
    result = subprocess.run(
        [str(BIN / "opentelemetry-instrument"), *exporters, str(BIN / "python"), str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return result


def _quickstart_app() -> str:
    return str(re.findall(r"<!-- runnable -->\n```python\n(.*?)```", QUICKSTART, re.S)[0])


def _quickstart_command() -> list[str]:
    """The quick start's zero-code command to the console, its options as the page writes them."""
    (block,) = [
        b
        for b in re.findall(r"```bash\n(.*?)```", QUICKSTART, re.S)
        if "opentelemetry-instrument --traces_exporter console" in b
    ]
    words = block.replace("\\\n", " ").split("opentelemetry-instrument", 1)[1].split()
    assert words[-1] == "app.py"
    return [w for w in words if w.startswith("--") or not w.endswith(("python", "app.py"))]


def test_the_quick_starts_zero_code_run_prints_one_line_and_its_event(emulator: Emulator, tmp_path: Path) -> None:
    options = _quickstart_command()
    assert options == [
        "--traces_exporter",
        "console",
        "--metrics_exporter",
        "console",
        "--logs_exporter",
        "console",
    ]
    result = _zero_code(_quickstart_app(), tmp_path, emulator.base_url, *options)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(_line_pattern("instructions_dropped", turn="2"), lines[0]), lines
    objects = _json_objects(result.stdout)
    chats = [o for o in objects if o.get("name") == "chat gpt-5-mini"]
    events = [o for o in objects if "event_name" in o]
    assert [e["event_name"] for e in events] == ["gen_ai.evaluation.result"]
    (event,) = events
    second = next(s for s in chats if s["attributes"]["openai_responses.signals"] == ["instructions_dropped"])
    assert (event["trace_id"], event["span_id"]) == (second["context"]["trace_id"], second["context"]["span_id"])
    assert event["attributes"]["gen_ai.response.id"] == second["attributes"]["gen_ai.response.id"]
    assert f"response {second['attributes']['gen_ai.response.id']}:" in lines[0]
    # What the page's "What the console shows" prints of the event is what the run printed.
    shown = re.findall(r"```text\n(.*?)```", QUICKSTART.split("## What the console shows", 1)[1], re.S)
    for text in shown[0].strip().splitlines():
        key, _, value = text.rstrip(",").partition(": ")
        expected, actual = json.loads(value), event if key == '"event_name"' else event["attributes"]
        got = actual[json.loads(key)]
        if "…" in expected:
            head, tail = expected.split("…")
            assert got.startswith(head), (key, got)
            assert got.endswith(tail), (key, got)
        else:
            assert got == expected, (key, got)
    assert re.fullmatch(_line_pattern("instructions_dropped", turn="2"), shown[1].strip().replace("resp_…", "resp_0"))


MISTAKES = f"""
import openai

client = openai.OpenAI(base_url="{EXAMPLE_URL}", api_key="emulator-key", max_retries=0)
for _ in range(3):  # three conversations, each dropping its instructions on turn 2
    first = client.responses.create(model="gpt-5-mini", instructions={SECRET_INSTRUCTIONS!r}, input={SECRET_INPUT!r})
    client.responses.create(model="gpt-5-mini", previous_response_id=first.id, input="What is the marker?")
conversation = client.conversations.create()
for _ in range(2):  # both state fields, twice: the API refuses it
    try:
        client.responses.create(
            model="gpt-5-mini", input={SECRET_INPUT!r}, conversation=conversation.id, previous_response_id=first.id
        )
    except openai.BadRequestError:
        pass
print("done")
"""
NO_EXPORTERS = ("--traces_exporter", "none", "--metrics_exporter", "none", "--logs_exporter", "none")


def test_each_signal_is_one_line_per_process_however_often_it_is_raised(emulator: Emulator, tmp_path: Path) -> None:
    result = _zero_code(MISTAKES, tmp_path, emulator.base_url, *NO_EXPORTERS)
    assert result.stdout == "done\n"
    lines = result.stderr.splitlines()
    assert len(lines) == 2, lines
    assert re.fullmatch(_line_pattern("instructions_dropped", turn="2"), lines[0]), lines[0]
    assert re.fullmatch(_line_pattern("state_mode_conflict", turn="unknown"), lines[1]), lines[1]
    assert ", response none: " in lines[1]
    for secret in ("SECRET-INSTR-5521", "SECRET-INPUT-7781", "marker"):
        assert secret not in result.stderr


def test_log_signals_off_prints_nothing(emulator: Emulator, tmp_path: Path) -> None:
    env = {"OTEL_INSTRUMENTATION_OPENAI_RESPONSES_LOG_SIGNALS": "off"}
    result = _zero_code(MISTAKES, tmp_path, emulator.base_url, *NO_EXPORTERS, env=env)
    assert (result.stdout, result.stderr) == ("done\n", "")


def test_log_signals_error_prints_only_the_error(emulator: Emulator, tmp_path: Path) -> None:
    env = {"OTEL_INSTRUMENTATION_OPENAI_RESPONSES_LOG_SIGNALS": "error"}
    result = _zero_code(MISTAKES, tmp_path, emulator.base_url, *NO_EXPORTERS, env=env)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(_line_pattern("state_mode_conflict", turn="unknown"), lines[0]), lines


def test_at_info_each_lineage_gets_its_line(emulator: Emulator, tmp_path: Path) -> None:
    env = {"OTEL_INSTRUMENTATION_OPENAI_RESPONSES_LOG_SIGNALS": "info"}
    result = _zero_code(MISTAKES, tmp_path, emulator.base_url, *NO_EXPORTERS, env=env)
    lines = result.stderr.splitlines()
    once = "once per signal and lineage"
    assert [bool(re.fullmatch(_line_pattern("instructions_dropped", "2", once), line)) for line in lines[:3]] == [
        True
    ] * 3
    assert len({line.split(", response ")[1].split(":")[0] for line in lines[:3]}) == 3  # three responses
    # A refused request has no lineage: the two are one (signal, no lineage) pair.
    assert len(lines) == 4, lines
    assert re.fullmatch(_line_pattern("state_mode_conflict", "unknown", once), lines[3]), lines


def test_under_logging_auto_instrumentation_the_event_is_the_only_record(emulator: Emulator, tmp_path: Path) -> None:
    """`OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED=true` turns Python log records into OpenTelemetry ones:
    with `log_signals` left unset the line is not logged beside the event; set, it is (as a second record)."""
    exporters = ("--traces_exporter", "none", "--metrics_exporter", "none", "--logs_exporter", "console")
    auto = {"OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED": "true"}
    app = _quickstart_app()
    result = _zero_code(app, tmp_path, emulator.base_url, *exporters, env=auto)
    records = _json_objects(result.stdout)
    assert [(r.get("event_name"), r.get("body")) for r in records] == [("gen_ai.evaluation.result", None)]
    assert "otel-responses:" not in result.stderr
    both = _zero_code(
        app,
        tmp_path,
        emulator.base_url,
        *exporters,
        env={**auto, "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_LOG_SIGNALS": "warning"},
    )
    records = _json_objects(both.stdout)
    assert sorted(r.get("event_name") or "" for r in records) == ["", "gen_ai.evaluation.result"]
    (line,) = [r for r in records if not r.get("event_name")]
    assert re.fullmatch(_line_pattern("instructions_dropped", turn="2"), line["body"])
    assert line["severity_text"] == "WARN"


BASIC_CONFIG = f"""
import logging
import sys

logging.basicConfig(stream=sys.stdout, format="%(name)s|%(levelname)s|%(message)s")

from otel_responses import ResponsesInstrumentor

ResponsesInstrumentor().instrument()
{MISTAKES}
"""


def test_an_app_with_logging_configured_receives_the_record(emulator: Emulator, tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(BASIC_CONFIG.replace(EXAMPLE_URL, emulator.base_url))
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # the app's handler took the records: no last-resort output
    lines = result.stdout.splitlines()
    assert lines[-1] == "done"
    assert [line.split("|", 2)[:2] for line in lines[:-1]] == [
        ["otel_responses", "WARNING"],
        ["otel_responses", "ERROR"],
    ]
    assert re.fullmatch(_line_pattern("instructions_dropped", turn="2"), lines[0].split("|", 2)[2])
    assert re.fullmatch(_line_pattern("state_mode_conflict", turn="unknown"), lines[1].split("|", 2)[2])
    assert "SECRET-" not in result.stdout


def test_a_new_instrumentation_says_it_again(emulator: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """Once per signal per `instrument()`: within one, a second lineage's mistake is not logged again."""
    client = emulator.client()
    said: list[list[str]] = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="otel_responses"), capture():
            for _ in range(2):
                first = client.responses.create(model="gpt-5-mini", instructions="Be brief.", input="Marker M-4.")
                client.responses.create(model="gpt-5-mini", previous_response_id=first.id, input="The marker?")
        said.append([r.getMessage().split(" (")[0] for r in caplog.records if r.name == "otel_responses"])
    client.close()
    assert said == [["otel-responses: instructions_dropped"]] * 2


# -- the rules of the line, on SignalLog with the test's clock ------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _call(name: str, lineage: str | None, turn: int | None = 2) -> Any:
    """What the line reads of a call: its signals, its lineage, the response it read."""
    return SimpleNamespace(
        signals=[Signal(name)], lineage=Lineage(turn, lineage), req=SimpleNamespace(target_response_id=None)
    )


def _said(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "otel_responses"]


@pytest.mark.parametrize(
    ("level", "signal", "said"),
    [
        ("warning", "instructions_dropped", logging.WARNING),
        ("warning", "unstored_parent", logging.ERROR),
        ("warning", "compaction", None),  # info, under the warning threshold
        ("error", "instructions_dropped", None),
        ("error", "state_mode_conflict", logging.ERROR),
        ("info", "compaction", logging.WARNING),  # asked for: logged where Python shows WARNING and above
        ("off", "state_mode_conflict", None),
    ],
)
def test_the_threshold_and_the_level_of_the_record(
    level: str, signal: str, said: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    log = SignalLog(level, Clock())
    with caplog.at_level(logging.DEBUG, logger="otel_responses"):
        log.record(_call(signal, "resp_L1"), Outcome())
    assert [levelno for levelno, _ in _said(caplog)] == ([said] if said is not None else [])


def test_once_per_signal_by_default_and_per_lineage_at_info(caplog: pytest.LogCaptureFixture) -> None:
    calls = [_call("instructions_dropped", "resp_L1"), _call("instructions_dropped", "resp_L2")]
    calls += [_call("instructions_dropped", "resp_L1"), _call("history_truncated", "resp_L1")]
    counts = {}
    for level in ("warning", "info"):
        caplog.clear()
        log = SignalLog(level, Clock())
        with caplog.at_level(logging.DEBUG, logger="otel_responses"):
            for call in calls:
                log.record(call, Outcome())
        counts[level] = [message.split(" (")[0].removeprefix("otel-responses: ") for _, message in _said(caplog)]
    assert counts == {
        "warning": ["instructions_dropped", "history_truncated"],
        "info": ["instructions_dropped", "instructions_dropped", "history_truncated"],
    }


def test_at_most_ten_lines_a_minute_and_the_held_back_are_said_later(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = SignalLog("info", clock)
    with caplog.at_level(logging.DEBUG, logger="otel_responses"):
        for number in range(PER_MINUTE + 3):
            log.record(_call("compaction", f"resp_L{number}"), Outcome())
        assert len(_said(caplog)) == PER_MINUTE
        clock.now += 59.0
        log.record(_call("compaction", "resp_L11"), Outcome())
        assert len(_said(caplog)) == PER_MINUTE  # still the same minute
        clock.now += 1.0
        log.record(_call("compaction", "resp_L11"), Outcome())  # held back before: said now
        log.record(_call("compaction", "resp_L0"), Outcome())  # said before: not again
    messages = [message for _, message in _said(caplog)]
    assert len(messages) == PER_MINUTE + 1
    assert messages[-1].endswith(" [4 more signal lines held back: at most 10 a minute]")
    assert "resp_L11" not in messages[-1]  # the line names the response, not the lineage: none here
    assert all("[" not in message for message in messages[:-1])


def test_the_line_names_the_response_and_the_turn(caplog: pytest.LogCaptureFixture) -> None:
    from dataclasses import replace

    from otel_responses._analysis.facts import ResponseFacts

    log = SignalLog("warning", Clock())
    resp = replace(ResponseFacts.empty(), response_id="resp_made_now")
    with caplog.at_level(logging.DEBUG, logger="otel_responses"):
        log.record(_call("response_incomplete", None, turn=None), Outcome(resp))
    ((_, message),) = _said(caplog)
    assert message.startswith("otel-responses: response_incomplete (warning), turn unknown, response resp_made_now: ")


@pytest.mark.parametrize(
    ("value", "parsed"), [("warning", "warning"), (" INFO ", "info"), ("Off", "off"), ("error", "error")]
)
def test_log_signals_values(value: str, parsed: str) -> None:
    assert parse_level(value) == parsed


@pytest.mark.parametrize("value", ["", "warn", "debug", "none", 3, None, True])
def test_log_signals_near_misses_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="must be one of off, error, warning, info"):
        parse_level(value)
