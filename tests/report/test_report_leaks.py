"""The report holds no payload: the leak-fuzzing workloads of tests/corpus.py (a secret planted in every payload
and secret field, through the real client, against the emulator and canned JSON), reported from the SDK's spans and
through the exporter's file, leave no secret on the page — nor a 12-character piece, base64 or hex digest of one —
in its source or in its text once HTML entities are read."""

from __future__ import annotations

import html

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_responses.emulator import Emulator
from otel_responses.tools.report import from_sdk, render
from otel_responses.tools.report.otlp_json import read_text

from ..corpus import (
    MODELS,
    WINDOW,
    Canned,
    Exports,
    Secrets,
    client_kwargs,
    decorations,
    emulator_session,
    every_method_sync,
    input_units,
    output_units,
    param_sets,
    safe_units,
    seeds,
)
from ..otlp_lines import to_json_line
from ..support import closing, fuzz_settings, mock_client


def assert_page_clean(exports: Exports, s: Secrets) -> None:
    spans = exports.captured.spans()
    assert spans, "no span: the instrumentation was not on"
    from_file = read_text("".join(to_json_line([span]) + "\n" for span in spans))
    assert from_file.problems == []
    for page in (render(from_sdk(spans)), render(from_file.spans)):
        assert page.count('<tbody class="call') == len(spans)
        haystack = page + "\x00" + html.unescape(page)
        grams = {haystack[i : i + WINDOW] for i in range(len(haystack) - WINDOW + 1)}
        needles = s.needles()
        leaks = [needle for needle in needles if needle[:WINDOW] in grams and needle in haystack]
        assert leaks == [], [(needles[n], n) for n in leaks[:5]]


@fuzz_settings(15)
@given(
    seed=seeds,
    deco=decorations,
    model=st.sampled_from(MODELS),
    store=st.booleans(),
    params=param_sets,
    units=safe_units,
)
def test_the_report_of_an_emulator_session_holds_no_secret(
    emulator: Emulator,
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    model: str,
    store: bool,
    params: set[str],
    units: list[str],
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    with closing(emulator.client(**client_kwargs(s))) as client:
        emulator_session(client, s, model, store, params, units)
    exports.assert_clean(s)
    assert_page_clean(exports, s)


@fuzz_settings(15)
@given(
    seed=seeds,
    deco=decorations,
    units=output_units,
    sent=input_units,
    params=param_sets,
    status=st.sampled_from(["completed", "incomplete", "failed"]),
)
def test_the_report_of_every_method_on_canned_answers_holds_no_secret(
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    units: list[str],
    sent: list[str],
    params: set[str],
    status: str,
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    with closing(mock_client(Canned(s, units, status=status), **client_kwargs(s))) as client:
        every_method_sync(client, s, sent, params)
    exports.assert_clean(s)
    assert_page_clean(exports, s)


def test_the_detector_finds_a_secret_on_the_page(exports: Exports, emulator: Emulator) -> None:
    """The check above is live: a secret the page did show is found."""
    s = Secrets(b"\x01" * 8)
    with closing(emulator.client()) as client:
        client.responses.create(model=f"gpt-{s.core('model')}", input="hi")
    with pytest.raises(AssertionError, match=r"\('model', 'verbatim'\)"):
        assert_page_clean(exports, s)
