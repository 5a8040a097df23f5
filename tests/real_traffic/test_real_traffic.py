"""Recorded Responses API traffic from public projects' test suites, replayed through the real ``openai``
client with the instrumentation off and on.

Per cassette (one pytest case each): the app-visible results (``model_dump()`` of each result, every event of a
stream, or the exception class and status) must be the same with the instrumentation off and on, and so must
the requests that reached the server; with it on, each call's span must carry exactly the signals written down
by hand in the ``expected.yaml`` beside the cassette (from the catalogue's definitions and the traffic, not from
running the code). See README.md in this folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_responses import attributes
from otel_responses.testing import capture

from .replay import CASSETTES, Replayer, all_cassettes, calls_needed, load

PATHS = list(all_cassettes())


def _id(path: Path) -> str:
    return str(path.relative_to(CASSETTES).with_suffix(""))


@pytest.fixture(scope="module")
def replayer() -> Iterator[Replayer]:
    shared = Replayer()
    try:
        yield shared
    finally:
        shared.close()


def expectations(path: Path) -> list[tuple[list[str], str]]:
    """The hand-written expectation of each call: (signal names, why)."""
    table = yaml.safe_load((path.parent / "expected.yaml").read_text()) or {}
    entries = table.get(path.stem)
    assert entries is not None, f"no expectations for {path.stem} in {path.parent / 'expected.yaml'}"
    out: list[tuple[list[str], str]] = []
    for number, entry in enumerate(entries, 1):
        if isinstance(entry, dict):
            signals, why = list(entry.get("signals") or []), str(entry.get("why") or "")
        else:
            signals, why = list(entry or []), ""
        assert not signals or why, f"{path.stem} call {number}: a non-empty expectation needs its why"
        out.append((sorted(signals), why))
    return out


def _signals(spans: list[Any]) -> list[str]:
    names: set[str] = set()
    for span in spans:
        names.update(str(n) for n in (span.attributes or {}).get(attributes.SIGNALS, ()))
    return sorted(names)


@pytest.mark.parametrize("path", PATHS, ids=[_id(p) for p in PATHS])
def test_recorded_traffic(path: Path, replayer: Replayer) -> None:
    cassette = load(path)
    missing = calls_needed(cassette)
    if missing:
        pytest.skip(f"the installed openai has no {', '.join(sorted(set(missing)))}")
    expected = expectations(path)
    assert len(expected) == len(cassette["calls"]), f"{len(cassette['calls'])} calls, {len(expected)} expectations"

    off = replayer.replay(cassette)
    with capture() as telemetry:

        def spans_since() -> list[Any]:
            spans = telemetry.spans()
            telemetry.clear()
            return spans

        on = replayer.replay(cassette, spans_since)

    assert off.mismatches == []
    assert on.mismatches == []
    for number, (call, received) in enumerate(zip(cassette["calls"], off.received, strict=False), 1):
        if call["method"] == "POST":
            assert received.body == call["request_body"], f"call {number}: the SDK sent another body"
        assert received.query == call["query"], f"call {number}: the SDK sent another query"
    assert [r.body for r in on.received] == [r.body for r in off.received], "the instrumentation changed a request"
    for number, (a, b) in enumerate(zip(off.outcomes, on.outcomes, strict=False), 1):
        assert a.seen == b.seen, f"call {number} ({a.kind}): the app saw another result with the instrumentation on"

    no_span = [n for n, outcome in enumerate(on.outcomes, 1) if not outcome.spans]
    assert no_span == [], f"calls without a span: {[(n, on.outcomes[n - 1].kind) for n in no_span]}"
    got = [_signals(outcome.spans) for outcome in on.outcomes]
    want = [signals for signals, _ in expected]
    if got != want:
        lines = [f"{_id(path)}: signals differ from the hand-written expectations"]
        for number, (g, (w, why)) in enumerate(zip(got, expected, strict=False), 1):
            if g != w:
                lines.append(f"  call {number} ({on.outcomes[number - 1].kind}): raised {g}, expected {w}  {why}")
        pytest.fail("\n".join(lines))
