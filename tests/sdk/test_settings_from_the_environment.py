"""An environment variable the instrumentation cannot use is a warning naming the variable and what is used
instead, and instrumentation goes on (OpenTelemetry's convention: under ``opentelemetry-instrument`` one mistyped
variable must not stop this instrumentor, nor those loaded after it). A keyword the app passed is an error naming
the keyword, whether or not the instrumented library is installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_responses import ConfigError, ResponsesInstrumentor
from otel_responses.config import BY_NAME, ENV_PREFIX, OPTIONS, Settings, settings_from
from otel_responses.emulator import Emulator
from otel_responses.ledger import InMemoryLedger

# Each variable with an unusable value, the warning's reason, and the setting it falls back to.
UNUSABLE: list[tuple[str, str, str]] = [
    ("zdr", "yes", "zdr must be true or false"),
    ("strict", "1", "strict must be true or false"),
    ("ledger_capacity", "-3", "ledger_capacity must be a positive integer"),
    ("ledger_ttl", "an hour", "ledger_ttl must be a positive integer"),
    ("ledger_timeout", "inf", "ledger_timeout must be a positive number of seconds"),
    ("chunk_timing", "TRUE!", "chunk_timing must be true or false"),
    ("prices", "/nonexistent/prices.json", "cannot be read"),
    ("ledger_url", "memcached://:hunter2@cache", "the Redis ledger URL must start with redis://"),
    ("genai_events", "on", "genai_events must be true or false"),
    ("log_signals", "loud", "log_signals must be one of off, error, warning, info"),
    ("session_id_from_lineage", "1", "session_id_from_lineage must be true or false"),
]
# Read only by a shared ledger, yet checked (and warned about) whether or not a ledger URL is set.
SHARED_ONLY = ("ledger_ttl", "ledger_timeout")
# Their near misses: values that are read as given, with no warning.
USABLE: list[tuple[str, str, Any]] = [
    ("zdr", "TRUE", True),
    ("zdr", " false ", False),
    ("ledger_capacity", " 7 ", 7),
    ("strict", "True", True),
    ("ledger_capacity", "12", 12),
    ("chunk_timing", "true", True),
    ("instructions_version", "v3", "v3"),
    ("genai_events", "FALSE", False),
    ("log_signals", " Info ", "info"),
    ("log_signals", "off", "off"),
    ("session_id_from_lineage", "true", True),
]


def _setting(settings: Settings, name: str) -> Any:
    if name == "ledger_capacity":
        assert isinstance(settings.ledger, InMemoryLedger)
        return settings.ledger.capacity
    return getattr(settings, name)


def test_every_variable_is_in_the_table() -> None:
    """The rows above cover every option a variable can set (but the free-form ones)."""
    # Any text is a version or a key; the conventions' opt-in list ignores what it does not know, as the ecosystem does.
    free_form = {"instructions_version", "hash_key", "semconv_opt_in"}
    variables = {option.name for option in OPTIONS if option.variable is not None}
    assert {name for name, _, _ in UNUSABLE} == variables - free_form


CASES = [(*row, False) for row in UNUSABLE] + [(*row, True) for row in UNUSABLE if row[0] in SHARED_ONLY]


@pytest.mark.parametrize(
    ("name", "value", "why", "shared"),
    CASES,
    ids=[f"{n}={v}{' with a ledger URL' if shared else ''}" for n, v, _, shared in CASES],
)
def test_an_unusable_variable_warns_and_falls_back(
    name: str, value: str, why: str, shared: bool, caplog: pytest.LogCaptureFixture
) -> None:
    option = BY_NAME[name]
    assert option.variable is not None
    environ = {option.variable: value}
    if shared:  # a shared ledger reads it: name one (building it connects to nothing)
        pytest.importorskip("redis")
        environ[f"{ENV_PREFIX}LEDGER_URL"] = "redis://127.0.0.1:1/0"
    with caplog.at_level("WARNING", logger="otel_responses.config"):
        settings = settings_from({"hash_key": "k"}, environ)
    [warning] = [record.getMessage() for record in caplog.records if record.name == "otel_responses.config"]
    assert warning.startswith(f"otel-responses: {option.variable}: ")
    assert why in warning
    assert warning.endswith(f"; using {option.instead} instead")
    assert "hunter2" not in warning
    if shared:
        ledger: Any = settings.ledger
        fields = {"ledger_ttl": "ttl_seconds", "ledger_timeout": "timeout_seconds"}
        attribute = fields.get(name, name.removeprefix("ledger_"))
        assert getattr(ledger, attribute) == option.default
        ledger.close(timeout=1)
    elif name == "ledger_url" or name in SHARED_ONLY:
        assert isinstance(settings.ledger, InMemoryLedger)
    elif name == "prices":
        assert settings.prices is None
    else:
        assert _setting(settings, name) == option.default
    # From a keyword, the same value is an error naming the keyword (a flag's keyword takes only a bool); a setting
    # of the environment only is no keyword, and the error says what does its job in code.
    expected = f"^{name}[ :]" if option.keyword else f"^unknown instrument\\(\\) option\\(s\\): {name} \\(pass ledger="
    with pytest.raises(ConfigError, match=expected) as error:
        settings_from({name: value, "hash_key": "k"}, {})
    assert "hunter2" not in str(error.value)


@pytest.mark.parametrize(("name", "value", "expected"), USABLE, ids=[f"{n}={v}" for n, v, _ in USABLE])
def test_a_usable_variable_is_read_without_a_warning(
    name: str, value: str, expected: Any, caplog: pytest.LogCaptureFixture
) -> None:
    option = BY_NAME[name]
    assert option.variable is not None
    with caplog.at_level("WARNING", logger="otel_responses.config"):
        settings = settings_from({}, {option.variable: value})
    assert [r for r in caplog.records if r.name == "otel_responses.config"] == []
    assert _setting(settings, name) == expected


def test_a_keyword_beats_an_unusable_variable_with_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="otel_responses.config"):
        settings = settings_from({"ledger_capacity": 5}, {f"{ENV_PREFIX}LEDGER_CAPACITY": "lots"})
    assert (_setting(settings, "ledger_capacity"), [r.name for r in caplog.records]) == (5, [])


@pytest.mark.skipif(importlib.util.find_spec("litellm") is not None, reason="needs litellm absent")
def test_a_bad_keyword_is_an_error_even_when_the_library_is_absent() -> None:
    """The base instrumentor looks for the library first and, missing, returns quietly: the keyword is checked
    before it, so the mistake is seen on the machine without the library too."""
    from otel_responses.integrations.litellm import LiteLLMResponsesInstrumentor

    instrumentor = LiteLLMResponsesInstrumentor()
    with pytest.raises(ConfigError, match=r"^ledger_capacity must be a positive integer, got 'lots'$"):
        instrumentor.instrument(ledger_capacity="lots")
    with pytest.raises(
        ConfigError, match=r"^unknown instrument\(\) option\(s\): ledger_capacty \(did you mean ledger_capacity\?\)$"
    ):
        instrumentor.instrument(ledger_capacty=3)
    instrumentor.instrument(ledger_capacity=3)  # a good keyword: quietly not instrumented, as before
    assert not instrumentor.is_instrumented_by_opentelemetry


def test_a_bad_keyword_on_an_instrumentor_raises_and_instruments_nothing() -> None:
    instrumentor = ResponsesInstrumentor()
    with pytest.raises(ConfigError, match=r"^strict must be True or False, got str$"):
        instrumentor.instrument(strict="yes")
    assert not instrumentor.is_instrumented_by_opentelemetry


# A variable under the prefix that is no setting: the warning's hint (the value is never repeated).
UNKNOWN: list[tuple[str, str]] = [
    ("STIRCT", f"did you mean {ENV_PREFIX}STRICT?"),
    ("LEDGER", f"did you mean {ENV_PREFIX}LEDGER_URL?"),  # the ledger object: keyword only
    ("LEDGER_TIME_OUT", f"did you mean {ENV_PREFIX}LEDGER_TIMEOUT?"),
    ("LEDGER_ACCEPT_UNSIGNED", "a shared ledger reads only values sealed with the fleet's hash_key"),
    (
        "LEDGER_CLUSTER",
        "a Redis Cluster is read from ledger_url (any node's URL with ?cluster=true, or several seed URLs)",
    ),
    ("MAX_ITEM_TYPES", "item-type lists on a span are bounded at 128 types"),
    ("LEDGER_CAPACTY", f"did you mean {ENV_PREFIX}LEDGER_CAPACITY?"),
    ("COLOUR", "the settings are listed at https://otel-responses.github.io/otel-responses/configuration/"),
]


@pytest.mark.parametrize(("suffix", "hint"), UNKNOWN, ids=[suffix for suffix, _ in UNKNOWN])
def test_an_unknown_variable_under_the_prefix_warns_once_naming_the_nearest(
    suffix: str, hint: str, caplog: pytest.LogCaptureFixture
) -> None:
    environ = {
        ENV_PREFIX + suffix: "secret-value-not-to-repeat",
        f"{ENV_PREFIX}ZDR": "true",  # a known one: no warning
        "OTEL_INSTRUMENTATION_OPENAI_RESPONSE_STRICT": "true",  # another prefix: not this package's to judge
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }
    with caplog.at_level("WARNING", logger="otel_responses.config"):
        settings = settings_from({}, environ)
    assert [r.getMessage() for r in caplog.records] == [
        f"otel-responses: {ENV_PREFIX}{suffix} is not a setting of this package ({hint}); it is ignored"
    ]
    assert settings.zdr is True


def test_a_typo_of_any_setting_is_pointed_at_that_setting() -> None:
    """Two letters swapped in any setting's name: the nearest known name is that setting, not a neighbour."""
    from otel_responses.config import nearest

    names = [option.name for option in OPTIONS]
    typos = {name: name[0] + name[2] + name[1] + name[3:] for name in names}
    assert {name: nearest(typo, names) for name, typo in typos.items()} == {name: name for name in names}


@pytest.mark.parametrize(
    ("keyword", "hint"),
    [
        ("stirct", " (did you mean strict?)"),
        ("ledger_capacty", " (did you mean ledger_capacity?)"),
        ("ledger_ttls", " (did you mean ledger_url?)"),
        ("ledger_ttl", f" (pass ledger=RedisLedger(url, ttl_seconds=...), or set {ENV_PREFIX}LEDGER_TTL)"),
        ("ledger_timeout", f" (pass ledger=RedisLedger(url, timeout_seconds=...), or set {ENV_PREFIX}LEDGER_TIMEOUT)"),
        (
            "ledger_cluster",
            " (a Redis Cluster is read from ledger_url (any node's URL with ?cluster=true, or several seed URLs))",
        ),
        ("max_item_types", " (item-type lists on a span are bounded at 128 types)"),
        (
            "semconv_opt_in",
            " (set OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, as for OpenTelemetry's "
            "other instrumentations)",
        ),
        ("ledger_accept_unsigned", " (a shared ledger reads only values sealed with the fleet's hash_key)"),
        ("colour", ""),
    ],
)
def test_an_unknown_keyword_is_an_error_naming_the_nearest(keyword: str, hint: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from({keyword: True}, {})
    assert str(error.value) == f"unknown instrument() option(s): {keyword}{hint}"


def test_a_ledger_url_and_its_missing_hash_key_are_both_said_at_once(caplog: pytest.LogCaptureFixture) -> None:
    """The URL's scheme is checked before the hash key it needs: one try shows both mistakes."""
    url = "http://:hunter2@cache:6379/0"
    with pytest.raises(ConfigError) as error:
        settings_from({"ledger_url": url}, {})
    message = str(error.value)
    assert message.startswith("ledger_url: the Redis ledger URL must start with redis://, rediss:// or unix://; and ")
    assert f"{ENV_PREFIX}HASH_KEY" in message
    with caplog.at_level("WARNING", logger="otel_responses.config"):
        settings = settings_from({}, {f"{ENV_PREFIX}LEDGER_URL": url})
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning == f"otel-responses: {ENV_PREFIX}LEDGER_URL: {message}; using the in-process ledger instead"
    assert "hunter2" not in warning
    assert isinstance(settings.ledger, InMemoryLedger)
    # Its near miss: a good URL without the key names the key alone.
    with pytest.raises(ConfigError, match=r"^a shared ledger needs the same hash_key"):
        settings_from({"ledger_url": "redis://127.0.0.1:1/0"}, {})


APP = """\
import os
import openai
from otel_responses import ResponsesInstrumentor
from otel_responses.integrations.litellm import LiteLLMResponsesInstrumentor

client = openai.OpenAI(base_url=os.environ["EMULATOR_URL"], api_key="emulator-key", max_retries=0)
print(client.responses.create(model="gpt-5-mini", input="Remember this: the marker is M-1.").output_text)
print("instrumented:", ResponsesInstrumentor().is_instrumented_by_opentelemetry,
      LiteLLMResponsesInstrumentor().is_instrumented_by_opentelemetry)
"""


def test_opentelemetry_instrument_goes_on_past_a_mistyped_variable(tmp_path: Path) -> None:
    """The real ``opentelemetry-instrument`` loads this distribution's instrumentors in entry-point order (DSPy's,
    litellm's, then the SDK's); every one reads the settings, so a raise in the first used to stop all of them."""
    entry_points = [line.strip() for line in _entry_points().splitlines() if "=" in line]
    assert [line.split(" =")[0] for line in entry_points] == ["dspy_responses", "litellm_responses", "openai_responses"]
    app = tmp_path / "app.py"
    app.write_text(APP)
    bin_dir = Path(sys.executable).parent
    with Emulator() as emulator:
        result = subprocess.run(
            [str(bin_dir / "opentelemetry-instrument"), sys.executable, str(app)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={
                **os.environ,
                "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                "EMULATOR_URL": emulator.base_url,
                f"{ENV_PREFIX}LEDGER_CAPACITY": "lots",
                "OTEL_TRACES_EXPORTER": "console",
                "OTEL_METRICS_EXPORTER": "none",
                "OTEL_LOGS_EXPORTER": "none",
            },
        )
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        f"otel-responses: {ENV_PREFIX}LEDGER_CAPACITY: ledger_capacity must be a positive integer; "
        "using the default (`4096`) instead\n"
    )  # once: the instrumentors share one set of settings
    assert "Noted marker M-1." in result.stdout
    assert "instrumented: True True" in result.stdout  # the two loaded after the first
    assert result.stdout.count('"openai_responses.state.mode": "single_turn"') == 1


def _entry_points() -> str:
    from importlib.metadata import distribution

    text = distribution("otel-responses").read_text("entry_points.txt") or ""
    return text.split("[opentelemetry_instrumentor]", 1)[1].split("[", 1)[0]
