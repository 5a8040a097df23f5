"""The pytest kit (`otel_responses.testing`): the regression test of its documentation page (docs/testing.md) run
as a user's project would run it (a fresh directory, the plugin found through its entry point), the assertions on
real spans, and a cheap import."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from otel_responses import ConfigError, ContextLossError, ResponsesInstrumentor
from otel_responses.signals import CATALOGUE
from otel_responses.testing import (
    CapturedTelemetry,
    assert_no_context_loss,
    assert_no_signal,
    assert_signal,
    capture,
)

from ..support import run_python, user_pytest_env

# The kit's page of the documentation (docs/testing.md): its example, and the failure it shows.
SECTION = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
EXAMPLE = re.findall(r"```python\n(.*?)```", SECTION, re.S)[0]
GOOD_REPLAY = "    history += response.output\n"
BROKEN_REPLAY = re.findall(r"The same app replaying only the text \(`(.*?)`\)", SECTION)[0]
MODEL = "gpt-5.4"
ENCRYPTED: Any = ["reasoning.encrypted_content"]


def run_pytest(directory: Path, file: Path, python: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess, as a user's project runs it: no conftest, only the installed plugin."""
    command = (python or [sys.executable, "-m", "pytest"]) + ["-q", str(file)]
    return subprocess.run(
        command, cwd=directory, env=user_pytest_env(), capture_output=True, text=True, timeout=180, check=False
    )


# -- (a) the README's regression test, in a project of its own ------------------------------------------------


def test_readme_regression_test_passes_through_the_installed_plugin(tmp_path: Path) -> None:
    file = tmp_path / "test_my_app.py"
    file.write_text(EXAMPLE)
    result = run_pytest(tmp_path, file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^1 passed in ", result.stdout, re.M), result.stdout
    assert not (tmp_path / "conftest.py").exists()


def test_readme_regression_test_catches_an_app_replaying_only_output_text(tmp_path: Path) -> None:
    assert EXAMPLE.count(GOOD_REPLAY) == 1
    file = tmp_path / "test_my_broken_app.py"
    file.write_text(EXAMPLE.replace(GOOD_REPLAY, f"    {BROKEN_REPLAY}\n"))
    result = run_pytest(tmp_path, file)
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^1 failed in ", result.stdout, re.M), result.stdout
    assert "E       AssertionError: context lost: 4 signals of severity error or warning:" in result.stdout
    for name in ("reasoning_dropped", "phase_dropped"):
        kind = CATALOGUE[name]
        assert f"- {name} ({kind.severity}) on span 'chat {MODEL}' (#2 of 3" in result.stdout
        assert f"Fix: {kind.fix}." in result.stdout
    # The failure points at the user's line, not into the kit.
    assert re.search(r"^>\s+assert_no_context_loss\(responses_telemetry\)", result.stdout, re.M)
    assert "otel_responses/testing.py" not in result.stdout
    # The page shows pytest's own lines of this failure, as they are (only the temporary directory differs).
    printed = [line for line in result.stdout.splitlines() if line.startswith("E  ")]
    printed = [
        re.sub(r"/\S+/otel-responses-test_", "/tmp/pytest-of-you/pytest-7/otel-responses-test_", line)
        for line in printed
    ]
    shown = re.findall(r"```text\n(.*?)```", SECTION, re.S)[0]
    assert shown.splitlines() == printed


def test_readme_failure_example_is_what_the_kit_prints() -> None:
    shown = re.findall(r"```text\n(.*?)```", SECTION, re.S)[0]
    assert shown.startswith("E       AssertionError: context lost: 4 signals of severity error or warning:\n")
    for name in ("reasoning_dropped", "phase_dropped"):
        assert f"Fix: {CATALOGUE[name].fix}." in shown


# -- (b) the assertions on real spans ----------------------------------------------------------------------------


def chat(client: openai.OpenAI, history: list[Any], text: str, *, text_only: bool = False) -> str:
    history.append({"role": "user", "content": text})
    # all_turns: every turn's reasoning is rendered back, so replaying only the text loses it.
    response = client.responses.create(
        model=MODEL, input=history, store=False, include=ENCRYPTED, reasoning={"context": "all_turns"}
    )
    if text_only:
        history.append({"role": "assistant", "content": response.output_text})
    else:
        history += response.output
    return response.output_text


def two_turns(client: openai.OpenAI, *, text_only: bool) -> None:
    history: list[Any] = []
    chat(client, history, "Remember this: the marker is K-1.", text_only=text_only)
    chat(client, history, "What is the marker?", text_only=text_only)


def test_healthy_replay_passes_every_assertion(
    responses_client: openai.OpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    two_turns(responses_client, text_only=False)
    assert_no_context_loss(responses_telemetry)
    assert_no_context_loss(responses_telemetry.spans())
    assert_no_signal(responses_telemetry, "reasoning_dropped")
    assert responses_telemetry.signals() == []


def _without_report(message: str) -> str:
    """The failure without its last line, which names the page of the test's conversations (written)."""
    message, last = message.rsplit("\n", 1)
    assert last.startswith("See the conversations turn by turn: "), last
    assert Path(last.split(": ", 1)[1]).is_file()
    return message


def test_assert_no_context_loss_names_span_signal_severity_and_fix(
    responses_client: openai.OpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    two_turns(responses_client, text_only=True)
    second = responses_telemetry.spans()[1]
    with pytest.raises(AssertionError) as info:
        assert_no_context_loss(responses_telemetry)
    message = _without_report(str(info.value))
    assert message.startswith("context lost: 2 signals of severity error or warning:\n")
    response_id = second.attributes["gen_ai.response.id"]  # type: ignore[index]
    assert (
        f"- reasoning_dropped (warning) on span 'chat {MODEL}' (#2 of 2, response {response_id}): "
        f"{CATALOGUE['reasoning_dropped'].meaning} [missing.count=1]\n"
        f"  Fix: {CATALOGUE['reasoning_dropped'].fix}.\n"
    ) in message
    assert f"- phase_dropped (warning) on span 'chat {MODEL}' (#2 of 2" in message
    assert message.endswith(f"  Fix: {CATALOGUE['phase_dropped'].fix}.")
    # The same on a list of spans, on one span, and on any iterable.
    for spans in (responses_telemetry.spans(), second, iter(responses_telemetry.spans())):
        with pytest.raises(AssertionError, match="reasoning_dropped"):
            assert_no_context_loss(spans)
    assert_no_context_loss(responses_telemetry.spans()[0])  # the first turn alone lost nothing


def test_the_kit_gives_the_fix_of_reasoning_that_could_never_be_replayed(
    responses_client: openai.OpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    """store=false without `include=["reasoning.encrypted_content"]`, the text replayed under `all_turns` (the
    earlier turn's reasoning would have been read): it could never have been replayed, and the failure says where the
    fix is."""
    history: list[Any] = [{"role": "user", "content": "Remember this: the marker is K-2."}]
    first = responses_client.responses.create(model=MODEL, input=history, store=False)
    history += [item for item in first.output if item.type == "message"]
    history.append({"role": "user", "content": "What is the marker?"})
    responses_client.responses.create(model=MODEL, input=history, store=False, reasoning={"context": "all_turns"})
    with pytest.raises(AssertionError) as info:
        assert_no_signal(responses_telemetry, "reasoning_dropped")
    message = _without_report(str(info.value))
    variant = CATALOGUE["reasoning_dropped"].variants["openai_responses.reasoning.unreplayable"]
    assert f": {variant[0]} [missing.count=1, reasoning.unreplayable=True]\n  Fix: {variant[1]}." in message
    assert CATALOGUE["reasoning_dropped"].fix not in message


def test_the_kit_names_the_apis_refusals_and_a_replay_of_the_users_messages_alone(
    responses_client: openai.OpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    """Only the user's messages replayed (the variant's own meaning and fix); a turn's items re-sent under their ids
    beside the conversation that holds them (the API's 400, named with where the other copy is)."""
    ask: Any = {"role": "user", "content": "Remember this: the marker is K-3."}
    responses_client.responses.create(model=MODEL, input=[ask])
    question: Any = {"role": "user", "content": "The marker?"}
    responses_client.responses.create(model=MODEL, input=[ask, question])
    conversation = responses_client.conversations.create().id
    first: Any = responses_client.responses.create(model=MODEL, input=[ask], conversation=conversation)
    with pytest.raises(openai.BadRequestError):
        responses_client.responses.create(model=MODEL, input=[*first.output], conversation=conversation)
    assert responses_telemetry.signals() == ["replay_incomplete", "duplicate_item_id"]
    with pytest.raises(AssertionError) as info:
        assert_no_context_loss(responses_telemetry)
    message = _without_report(str(info.value))
    meaning, fix = CATALOGUE["replay_incomplete"].variants["openai_responses.replay.messages_only"]
    assert f": {meaning} [parent.id=" in message
    assert f"replay.messages_only=True]\n  Fix: {fix}." in message
    duplicate = CATALOGUE["duplicate_item_id"]
    assert f"- duplicate_item_id (error) on span 'chat {MODEL}'" in message
    held = ",".join(item.id for item in first.output)
    assert f"{duplicate.meaning} [item.ids={held}, duplicate.held_by=conversation]" in message
    assert message.endswith(f"  Fix: {duplicate.fix}.")


def test_assert_signal_returns_the_spans_and_names_what_was_raised_instead(
    responses_client: openai.OpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    two_turns(responses_client, text_only=True)
    spans = responses_telemetry.spans()
    assert assert_signal(responses_telemetry, "reasoning_dropped") == [spans[1]]
    assert assert_signal(spans, "phase_dropped") == [spans[1]]
    with pytest.raises(AssertionError) as info:
        assert_signal(responses_telemetry, "unstored_parent")
    kind = CATALOGUE["unstored_parent"]
    assert _without_report(str(info.value)) == (
        f"expected signal unstored_parent (error: {kind.meaning}), but it was not raised on any of 2 span(s) "
        f"['chat {MODEL}', 'chat {MODEL}']; raised: phase_dropped, reasoning_dropped"
    )


def test_assert_no_signal_names_span_severity_and_fix(
    responses_client: openai.OpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    two_turns(responses_client, text_only=True)
    assert_no_signal(responses_telemetry, "unstored_parent")
    with pytest.raises(AssertionError) as info:
        assert_no_signal(responses_telemetry, "phase_dropped")
    message = _without_report(str(info.value))
    assert message.startswith("unexpected signal phase_dropped raised 1 time(s):\n- phase_dropped (warning) on span")
    assert f"'chat {MODEL}' (#2 of 2, response resp_" in message
    assert "reasoning_dropped" not in message
    assert message.endswith(f"  Fix: {CATALOGUE['phase_dropped'].fix}.")


def test_info_signals_are_not_context_loss(
    responses_client: openai.OpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    first = responses_client.responses.create(model=MODEL, instructions="Be brief.", input="Hello.")
    responses_client.responses.create(
        model=MODEL, instructions="Be very brief.", previous_response_id=first.id, input="Hello again."
    )
    assert CATALOGUE["instructions_changed"].severity == "info"
    assert responses_telemetry.signals() == ["instructions_changed"]
    assert_signal(responses_telemetry, "instructions_changed")
    assert_no_context_loss(responses_telemetry)
    with pytest.raises(AssertionError, match=r"instructions_changed \(info\) on span 'chat gpt-5.4' \(#2 of 2"):
        assert_no_signal(responses_telemetry, "instructions_changed")


def test_unknown_signal_names_are_a_value_error(responses_telemetry: CapturedTelemetry) -> None:
    with pytest.raises(ValueError, match=r"unknown signal 'reasoning_drop'; did you mean 'reasoning_dropped'\?"):
        assert_signal(responses_telemetry, "reasoning_drop")
    with pytest.raises(ValueError, match=r"unknown signal 'forgot'; known signals: state_mode_conflict, "):
        assert_no_signal([], "forgot")


def test_nothing_to_check_is_a_failure_not_a_pass(responses_telemetry: CapturedTelemetry) -> None:
    with pytest.raises(AssertionError, match="assert_no_context_loss: no span to check; was the instrumentation on"):
        assert_no_context_loss(responses_telemetry)
    with pytest.raises(AssertionError, match="assert_no_signal: no span to check"):
        assert_no_signal([], "phase_dropped")
    with pytest.raises(AssertionError, match=r"not raised on any of 0 span\(s\) \[\]; raised: none"):
        assert_signal([], "phase_dropped")


# -- CapturedTelemetry, capture() and the clients -----------------------------------------------------------------


def test_captured_telemetry_reads_spans_signals_and_metrics(
    responses_client: openai.OpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    conversation = responses_client.conversations.create()
    responses_client.responses.create(model=MODEL, conversation=conversation.id, input="the marker is C-1")
    assert [s.attributes["gen_ai.operation.name"] for s in responses_telemetry.spans()] == [  # type: ignore[index]
        "create_conversation",
        "chat",
    ]
    (chat_span,) = responses_telemetry.chat_spans()
    assert chat_span.attributes["openai_responses.state.mode"] == "conversation"  # type: ignore[index]
    with pytest.raises(AssertionError, match=r"expected exactly one span, got 2: \['create_conversation'"):
        responses_telemetry.only_span()
    calls = responses_telemetry.metric_points("openai_responses.calls")
    assert {p.attributes["gen_ai.operation.name"]: p.value for p in calls} == {"create_conversation": 1, "chat": 1}
    assert responses_telemetry.metric_points("no.such.metric") == []
    assert repr(responses_telemetry) == "<CapturedTelemetry: 2 span(s), signals []>"
    responses_telemetry.clear()
    assert responses_telemetry.spans() == []
    two_turns(responses_client, text_only=True)
    assert responses_telemetry.signals() == ["reasoning_dropped", "phase_dropped"]
    responses_telemetry.clear()
    responses_client.responses.create(model=MODEL, input="Hi.")
    assert responses_telemetry.only_span().name == f"chat {MODEL}"


def test_capture_takes_settings_and_turns_the_instrumentation_off_after(responses_client: openai.OpenAI) -> None:
    conversation = responses_client.conversations.create()
    first = responses_client.responses.create(model=MODEL, input="Hi.")
    with capture(strict=True) as telemetry:
        with pytest.raises(ContextLossError):
            responses_client.responses.create(
                model=MODEL, conversation=conversation.id, previous_response_id=first.id, input="Hi."
            )
        assert_signal(telemetry, "state_mode_conflict")
        assert telemetry.only_span().attributes["error.type"] == "ContextLossError"  # type: ignore[index]
    assert not ResponsesInstrumentor().is_instrumented_by_opentelemetry
    responses_client.responses.create(model=MODEL, input="Hi.")
    assert len(telemetry.spans()) == 1  # off: nothing more recorded


def test_capture_refuses_bad_settings_and_nesting() -> None:
    with pytest.raises(ConfigError), capture(colour="blue"):
        pass
    assert not ResponsesInstrumentor().is_instrumented_by_opentelemetry
    with pytest.raises(TypeError, match="capture\\(\\) makes its own tracer_provider"), capture(tracer_provider=None):
        pass
    with capture(), pytest.raises(RuntimeError, match="already on"), capture():
        pass
    assert not ResponsesInstrumentor().is_instrumented_by_opentelemetry


def test_async_client_works_across_event_loops_and_is_closed_after_the_test(
    responses_async_client: openai.AsyncOpenAI, responses_telemetry: CapturedTelemetry
) -> None:
    async def turn(text: str, previous: str | None) -> Any:
        return await responses_async_client.responses.create(
            model=MODEL, input=text, previous_response_id=previous, store=True
        )

    first = asyncio.run(turn("Remember this: the marker is A-9.", None))
    second = asyncio.run(turn("What is the marker?", first.id))  # a second event loop, the same client
    assert second.output_text == "marker=A-9"
    assert_no_context_loss(responses_telemetry)
    assert len(responses_telemetry.chat_spans()) == 2


ASYNC_TESTS = """\
import pytest

pytestmark = MODULE_MARK


async def ask(client):
    return (await client.responses.create(model="gpt-5.4", input="Remember this: the marker is A-1.")).output_text


async def test_unmarked(responses_async_client):
    assert await ask(responses_async_client) == "Noted marker A-1."


@pytest.mark.anyio
async def test_marked(responses_async_client):
    assert await ask(responses_async_client) == "Noted marker A-1."


def test_plain(responses_async_client):
    import asyncio

    assert asyncio.run(ask(responses_async_client)) == "Noted marker A-1."
"""


def test_an_async_test_without_a_marker_is_told_to_add_one(tmp_path: Path) -> None:
    """pytest's own failure says to install anyio, which is installed (openai depends on it): the marker is missing."""
    file = tmp_path / "test_async_app.py"
    file.write_text(ASYNC_TESTS.replace("MODULE_MARK", "[]"))
    result = run_pytest(tmp_path, file)
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^2 passed, 1 error in ", result.stdout, re.M), result.stdout
    assert "ERROR at setup of test_unmarked" in result.stdout
    assert (
        "\ntest_unmarked is an async test with no async marker, so pytest would not run it: mark it"
        " @pytest.mark.anyio (anyio's pytest plugin comes with openai) or, with pytest-asyncio,"
        " @pytest.mark.asyncio; responses_async_client works in either\n" in result.stdout
    )
    assert "not natively supported" not in result.stdout


def test_a_module_wide_async_marker_is_enough(tmp_path: Path) -> None:
    file = tmp_path / "test_async_app.py"
    file.write_text(ASYNC_TESTS.replace("MODULE_MARK", "pytest.mark.anyio"))
    result = run_pytest(tmp_path, file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^3 passed in ", result.stdout, re.M), result.stdout


def test_sync_client_points_at_the_session_emulator(responses_client: openai.OpenAI, emulator: Any) -> None:
    assert str(responses_client.base_url).rstrip("/") == emulator.base_url
    assert responses_client.max_retries == 0


# -- (c) a cheap import that needs neither openai nor the SDK -----------------------------------------------------

BLOCK_OPENAI_AND_SDK = """
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "openai" or name.startswith(("openai.", "opentelemetry.sdk")):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, Block())
"""


def test_importing_the_kit_imports_neither_openai_nor_the_sdk() -> None:
    code = (
        "import sys\nimport otel_responses.testing\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'openai' or m.startswith('opentelemetry.sdk')))"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_plugin_loads_in_a_session_without_openai_or_the_sdk(tmp_path: Path) -> None:
    file = tmp_path / "test_other_project.py"
    file.write_text(
        "def test_unrelated():\n    assert 1 + 1 == 2\n\n\n"
        "def test_wants_a_client(responses_client):\n    pass\n\n\n"
        "def test_wants_telemetry(responses_telemetry):\n    pass\n"
    )
    runner = BLOCK_OPENAI_AND_SDK + "import pytest\nsys.exit(pytest.main())\n"
    result = run_pytest(tmp_path, file, [sys.executable, "-c", runner])
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^1 passed, 2 errors in ", result.stdout, re.M), result.stdout
    assert "ImportError: responses_client needs the openai SDK: pip install 'openai>=1.101.0'" in result.stdout
    assert (
        "ImportError: capturing telemetry needs the OpenTelemetry SDK: pip install opentelemetry-sdk" in result.stdout
    )
