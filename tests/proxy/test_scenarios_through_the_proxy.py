"""The demo's scenarios, once with the SDK instrumented in-process and once through the proxy, against the same
emulator reset in between (so ids and request ids repeat): span for span the same record — name, kind, status,
every attribute (signals, state mode, store, item types and counts, lineage, turn, usage, ids), every signal event,
the links between turns, and the same log events. Only what times the transport may differ (time to first chunk),
and the trace and span ids themselves (the links are compared by the turn they point to)."""

from __future__ import annotations

from typing import Any

import pytest

from otel_responses.emulator import Emulator
from otel_responses.testing import capture
from otel_responses.tools.scenarios import SCENARIOS, run

from ..sdk.test_acceptance import SCENARIO_SPANS
from .support import KEY, proxied

TRANSPORT_ONLY = frozenset({"gen_ai.response.time_to_first_chunk"})


def _record(spans: list[Any]) -> list[dict[str, Any]]:
    """What a scenario's spans say, with links as the index of the span they point to."""
    index = {span.context.span_id: number for number, span in enumerate(spans)}
    return [
        {
            "name": span.name,
            "kind": span.kind,
            "status": (span.status.status_code, span.status.description),
            "attributes": {k: v for k, v in (span.attributes or {}).items() if k not in TRANSPORT_ONLY},
            "events": [(event.name, dict(event.attributes or {})) for event in span.events],
            "links": [index.get(link.context.span_id, "elsewhere") for link in span.links],
            "parent": span.parent is not None,
        }
        for span in spans
    ]


def _events(captured: Any) -> list[tuple[str | None, dict[str, Any]]]:
    """The log events (``gen_ai.evaluation.result`` per signal, ``gen_ai.client.operation.exception``)."""
    return [(record.event_name, dict(record.attributes or {})) for record in captured.events()]


def test_every_scenario_is_recorded_through_the_proxy_as_in_process() -> None:
    in_process: dict[str, list[dict[str, Any]]] = {}
    proxied_records: dict[str, list[dict[str, Any]]] = {}
    events: dict[str, list[Any]] = {}
    answers: dict[str, tuple[str, str | None]] = {}
    with Emulator() as emulator:
        with capture(hash_key=KEY) as captured:
            for scenario in SCENARIOS:
                captured.clear()
                with emulator.client() as client:
                    transcript = run(client, scenario, "MK-" + scenario.name)
                answers[scenario.name] = (transcript.answer, transcript.error)
                in_process[scenario.name] = _record(captured.spans())
                events[scenario.name] = _events(captured)
        emulator.reset()
        with proxied(emulator.base_url) as through:
            for scenario in SCENARIOS:
                through.captured.clear()
                with through.client() as client:
                    transcript = run(client, scenario, "MK-" + scenario.name)
                assert (transcript.answer, transcript.error) == answers[scenario.name], scenario.name
                expected = len(in_process[scenario.name])
                proxied_records[scenario.name] = _record(through.wait_for_spans(expected))
                assert _events(through.captured) == events[scenario.name], scenario.name
    assert len(in_process) == len(SCENARIOS) == 19
    assert sum(len(each) for each in events.values()) > 14  # a signal's event, an error's: compared, not absent
    for scenario in SCENARIOS:
        theirs, ours = in_process[scenario.name], proxied_records[scenario.name]
        assert len(ours) == len(theirs), scenario.name
        for number, (want, got) in enumerate(zip(theirs, ours, strict=True)):
            assert got == want, f"{scenario.name}, span {number + 1}"
        per_call = [tuple(record["attributes"].get("openai_responses.signals", ())) for record in ours]
        assert per_call == SCENARIO_SPANS[scenario.name], scenario.name  # exact: a false signal joining fails


@pytest.mark.parametrize("name", ["chain_instructions_dropped", "replay_output_text_only"])
def test_a_mistake_is_named_by_the_same_exact_signals_per_call(name: str) -> None:
    """The exact list per call, not membership: a false signal joining it fails."""
    scenario = next(s for s in SCENARIOS if s.name == name)
    with Emulator() as emulator, proxied(emulator.base_url) as through, through.client() as client:
        run(client, scenario, "MK-exact")
        spans = through.wait_for_spans(4 if scenario.mode != "conversation" else 5)
    signals = [tuple((span.attributes or {})["openai_responses.signals"]) for span in spans]
    if name == "chain_instructions_dropped":
        assert signals == [(), ("instructions_dropped",), ("instructions_dropped",), ("instructions_dropped",)]
    else:
        assert signals == [(), *[("reasoning_dropped", "phase_dropped")] * 3]
