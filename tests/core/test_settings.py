"""Settings parsed as documented: boolean keywords must be bools, boolean environment variables follow the
OpenTelemetry specification (only a case-insensitive ``true`` is true, anything else but ``false`` warns), and a
custom ledger must have every method."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from otel_responses import ConfigError
from otel_responses.config import ENV_PREFIX, settings_from
from otel_responses.ledger import LEDGER_METHODS, InMemoryLedger


@pytest.mark.parametrize("value", ["maybe", "true", "tru", 1, None])
def test_a_boolean_keyword_that_is_not_a_bool_is_a_config_error(value: object) -> None:
    for name in ("strict", "zdr"):
        with pytest.raises(ConfigError, match=name):
            settings_from({name: value}, {})


@pytest.mark.parametrize(
    ("text", "expected", "warned"),
    [
        ("true", True, False),
        ("TRUE", True, False),
        (" True ", True, False),
        ("false", False, False),
        ("False", False, False),
        ("", False, False),
        ("maybe", False, True),
        ("tru", False, True),
        ("1", False, True),
        ("yes", False, True),
    ],
)
def test_boolean_environment_variables_follow_the_opentelemetry_specification(
    text: str, expected: bool, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("STRICT", "ZDR"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="otel_responses.config"):
            settings = settings_from({}, {ENV_PREFIX + name: text})
        assert getattr(settings, name.lower()) is expected
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert bool(warnings) is warned, warnings
        assert all(ENV_PREFIX + name in message for message in warnings)


@pytest.mark.parametrize("missing", LEDGER_METHODS)
def test_a_custom_ledger_missing_a_method_is_a_config_error(missing: str) -> None:
    class Partial:
        pass

    ledger: Any = Partial()
    for name in LEDGER_METHODS:
        if name != missing:
            setattr(ledger, name, getattr(InMemoryLedger(), name))
    with pytest.raises(ConfigError, match=missing):
        settings_from({"ledger": ledger}, {})
    setattr(ledger, missing, getattr(InMemoryLedger(), missing))
    assert settings_from({"ledger": ledger}, {}).ledger is ledger
