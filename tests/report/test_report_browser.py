"""The report page opened in a real browser (headless Chromium): the DOM after the page's script ran, a filter set
in the URL fragment, a screenshot read back, hostile strings, and the recorded real-API traffic.

The demo's scenarios run once for the module, with the real client against the emulator and the real SDK; the page
is what ``otel-responses demo --report`` writes (``demo.write_report``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from otel_responses import attributes as a
from otel_responses.testing import capture
from otel_responses.tools.demo import Exporters, Outcome, run_scenarios, write_report
from otel_responses.tools.report import Options, from_sdk, render
from otel_responses.tools.report.assets import SCRIPT
from otel_responses.tools.report.records import SpanRecord

from ..hostile import LoopbackAPI, Received, Reply, json_reply
from ..real_traffic.replay import Replayer, Unsupported, all_cassettes, load
from ..report_support import conversations, dump_dom, parse, png_colours, screenshot, visible_sections
from ..sameness.test_faults import response_body

HEALTHY = ("server_chain", "conversation", "client_replay")
# Where each mistake shows: the turns (as the page numbers them; "" for a call without one) at which the signal the
# scenario is about is raised. Written from the scenarios (otel_responses/scenarios.py), not from running them.
MISTAKES = {
    "chain_unstored_parent": ("unstored_parent", ["2"]),
    "chain_instructions_dropped": ("instructions_dropped", ["2", "3", "4"]),  # every turn after the loss
    "chain_tool_output_missing": ("missing_tool_output", ["3"]),
    "chain_context_duplicated": ("context_duplicated", ["3"]),
    "conversation_and_previous_id": ("state_mode_conflict", ["2"]),  # no turn of its own: its parent's + 1
    "replay_output_text_only": ("reasoning_dropped", ["2", "3", "4"]),
    "replay_reasoning_altered": ("encrypted_content_modified", ["2"]),
    "replay_phase_lost": ("phase_dropped", ["2", "3", "4"]),
    "replay_tool_pair_broken": ("orphan_tool_output", ["3"]),
    "replay_history_cut": ("history_truncated", ["4"]),
}


@dataclasses.dataclass
class Demo:
    outcomes: list[Outcome]
    page: Path

    def labels(self) -> dict[str, str]:
        """Conversation key -> scenario name, from the page's sections."""
        root = parse(self.page.read_text())
        return {s.attrs["data-key"]: s.attrs["data-label"] for s in root.find_all("section", class_="conv")}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    exporters = Exporters()
    tracer_provider, meter_provider, memory = exporters.providers(None)  # type: ignore[arg-type]
    try:
        outcomes = run_scenarios(tracer_provider, meter_provider, memory)
    finally:
        exporters.shutdown()
    page = tmp_path_factory.mktemp("demo-report") / "demo.html"
    write_report(str(page), outcomes)
    return Demo(outcomes, page)


def _expected_turns(outcome: Outcome) -> list[tuple[str, bool, tuple[str, ...]]]:
    """(turn, inferred, signal names) of each span, in the order the page must show them: by turn (a chat span
    without one continues the turn whose response its previous_response_id names: that turn + 1, inferred); a
    span with none where it started."""
    records = list(from_sdk(outcome.spans))
    made = {r.text(a.GEN_AI_RESPONSE_ID): r.number(a.TURN) for r in records if r.number(a.TURN) is not None}
    turns: dict[str, tuple[int | None, bool]] = {}
    for r in records:
        parent = made.get(r.text(a.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID))
        if r.number(a.TURN) is not None:
            turns[r.span_id] = (r.number(a.TURN), False)
        elif parent is not None and r.text(a.GEN_AI_OPERATION_NAME) == "chat":
            turns[r.span_id] = (parent + 1, True)
        else:
            turns[r.span_id] = (None, False)
    turned = sorted((r for r in records if turns[r.span_id][0] is not None), key=lambda r: turns[r.span_id][0] or 0)
    loose = [r for r in records if turns[r.span_id][0] is None]
    ordered: list[SpanRecord] = []
    for record in turned:
        ordered += [x for x in loose if x.start_ns < record.start_ns and x not in ordered]
        ordered.append(record)
    ordered += [x for x in loose if x not in ordered]
    return [(str(turns[r.span_id][0] or ""), turns[r.span_id][1], r.texts(a.SIGNALS)) for r in ordered]


def test_the_demo_report_shows_every_signal_under_its_conversation_and_turn(demo: Demo) -> None:
    dom = dump_dom(demo.page)
    root = parse(dom)
    html = root.find_all("html")[0]
    assert html.attrs.get("data-ready") == "1", html.attrs  # the script ran to its end
    assert "data-error" not in html.attrs
    assert html.attrs["data-shown"] == str(len(demo.outcomes))
    assert not root.find_all("form", id="filters")[0].hidden  # the script showed the filters
    labels = demo.labels()
    shown = conversations(root)
    assert shown == conversations(parse(demo.page.read_text()))  # all in the HTML: the script only filters
    by_scenario = {labels[key]: calls for key, calls in shown.items()}
    assert sorted(by_scenario) == sorted(o.transcript.scenario.name for o in demo.outcomes)
    for outcome in demo.outcomes:
        name = outcome.transcript.scenario.name
        calls = by_scenario[name]
        assert [(c.turn, c.inferred, c.signals) for c in calls] == _expected_turns(outcome), name
        assert sorted(c.span for c in calls) == sorted(format(s.context.span_id, "016x") for s in outcome.spans)
    for name, (signal, turns) in MISTAKES.items():
        assert [c.turn for c in by_scenario[name] if signal in c.signals] == turns, name
    for name in HEALTHY:
        assert [c.signals for c in by_scenario[name]] == [() for _ in by_scenario[name]], name
        section = next(s for s in root.find_all("section", class_="conv") if s.attrs["data-label"] == name)
        assert section.find_all("li") == []
    # The page opens with the conversations that lost most: every one with an error before any without.
    order = [labels[s.attrs["data-key"]] for s in root.find_all("section", class_="conv")]
    errors = [name for name in order if any("error" in c.severities for c in by_scenario[name])]
    assert order[: len(errors)] == errors
    assert set(order[len(errors) :]).isdisjoint(errors)
    summary = [r.attrs["data-conv"] for r in root.find_all("tr") if "data-conv" in r.attrs]
    assert summary == [s.attrs["id"] for s in root.find_all("section", class_="conv")]


def test_a_filter_in_the_url_fragment_hides_what_it_should(demo: Demo) -> None:
    labels = demo.labels()
    root = parse(dump_dom(demo.page, "signal=phase_dropped"))
    assert root.find_all("html")[0].attrs.get("data-ready") == "1"
    expected = [
        o.transcript.scenario.name for o in demo.outcomes if any("phase_dropped" in s for s in map(_signals, o.spans))
    ]
    assert sorted(labels[key] for key in visible_sections(root)) == sorted(expected)
    assert sorted(expected) == ["chain_context_duplicated", "replay_output_text_only", "replay_phase_lost"]
    summary = [r for r in root.find_all("tr") if "data-conv" in r.attrs]
    sections = {s.attrs["id"]: s for s in root.find_all("section", class_="conv")}
    assert [r.attrs["data-conv"] for r in summary if not r.hidden] == [
        key for key, s in sections.items() if not s.hidden
    ]
    assert root.find_all("select", name="signal")[0].find_all("option", value="phase_dropped")[0] is not None

    root = parse(dump_dom(demo.page, "severity=error&service=otel-responses-demo"))
    errors = sorted(
        o.transcript.scenario.name
        for o in demo.outcomes
        if any(
            e.name == a.SIGNAL_EVENT and (e.attributes or {}).get(a.SIGNAL_SEVERITY) == "error"
            for s in o.spans
            for e in s.events
        )
    )
    assert sorted(labels[key] for key in visible_sections(root)) == errors
    assert errors == sorted(
        [
            "chain_tool_output_missing",
            "chain_unstored_parent",
            "conversation_and_previous_id",
            "conversation_items_resent",
            "replay_reasoning_altered",
            "replay_tool_pair_broken",
        ]
    )


def _signals(span: Any) -> tuple[str, ...]:
    return tuple((span.attributes or {}).get(a.SIGNALS, ()))


def test_a_screenshot_of_the_demo_report_is_not_blank(demo: Demo, tmp_path: Path) -> None:
    shot = screenshot(demo.page, tmp_path / "demo.png", 1280, 1000)
    width, height, colours = png_colours(shot, rows=1000)
    assert (width, height) == (1280, 1000)
    assert len(colours) >= 12, len(colours)
    # The page's own colours: its background, an error chip's, a warning chip's (the style sheet applied).
    for rgb in ((0xF6, 0xF7, 0xF9), (0xFC, 0xE8, 0xE6), (0xFE, 0xF3, 0xD6)):
        assert bytes(rgb) in colours, rgb


def test_the_browser_enforces_the_policy(demo: Demo, tmp_path: Path) -> None:
    """A script that got onto the page past the escaping would not run, nor would an image load: only the page's own
    style and script, allowed by their hashes."""
    injected = (
        '<script>document.documentElement.setAttribute("data-pwned", "1")</script><img src="http://127.0.0.1:9/x">'
    )
    page = tmp_path / "injected.html"
    page.write_text(demo.page.read_text().replace("<main>", "<main>" + injected, 1))
    html = parse(dump_dom(page)).find_all("html")[0]
    assert html.attrs.get("data-ready") == "1"  # the page's own script ran
    assert "data-pwned" not in html.attrs  # the other did not


# -- hostile strings -----------------------------------------------------------------------------------------------

HOSTILE = (
    "<script>document.documentElement.setAttribute('data-pwned','1')</script>",
    '"><img src=x onerror="document.title=1">',
    "</style><script>alert(2)</script>",
    "' onmouseover='alert(3)' x='",
    "</td></tr></tbody></table></section><svg onload=alert(4)>",
    "javascript:alert(5)",
    "\u202egnp.exe\u200b&amp;&lt;\ud800",  # direction, invisible, entities, a lone surrogate (valid JSON)
)


def _hostile_records() -> list[SpanRecord]:
    """Spans of this package whose every string the page shows is hostile (a file anyone could have written)."""
    records = []
    for number, text in enumerate(HOSTILE):
        attributes: dict[str, Any] = {
            a.GEN_AI_OPERATION_NAME: "chat" if number % 2 else text,
            a.GEN_AI_REQUEST_MODEL: text,
            a.GEN_AI_RESPONSE_MODEL: text + "x",
            a.GEN_AI_RESPONSE_ID: f"resp_{number}{text}",
            a.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID: text,
            a.GEN_AI_CONVERSATION_ID: text,
            a.REQUEST_ID: text,
            a.LINEAGE_ID: text,
            a.TURN: number + 1,
            a.STATE_MODE: text,
            a.STORE: False,
            a.INSTRUCTIONS_HASH: text,
            a.INSTRUCTIONS_VERSION: text,
            a.INPUT_ITEM_TYPES: (text, "message", text),
            a.OUTPUT_ITEM_TYPES: (text,),
            a.TOOL_CALLS_CHECK: text,
            a.ERROR_TYPE: text,
            a.ERROR_CODE: text,
            a.GEN_AI_REQUEST_REASONING_LEVEL: text,
            a.SIGNALS: (text, "unstored_parent"),
        }
        events = (
            _event({a.SIGNAL_NAME: text, a.SIGNAL_SEVERITY: text, "openai_responses." + text: text}),
            _event({a.SIGNAL_NAME: "unstored_parent", a.SIGNAL_SEVERITY: "error", "openai_responses.parent.id": text}),
        )
        records.append(
            SpanRecord(
                trace_id=f"{number + 1:032x}",
                span_id=f"{number + 1:016x}",
                name=text,
                start_ns=1_800_000_000_000_000_000 + number,
                end_ns=1_800_000_000_000_000_000 + number + 5,
                attributes=attributes,
                events=events,
                service=text,
                scope="otel_responses." + text,
            )
        )
    return records


def _event(attributes: dict[str, Any]) -> Any:
    from otel_responses.tools.report.records import EventRecord

    return EventRecord(a.SIGNAL_EVENT, 0, attributes)


def _echo(request: Received, index: int) -> Reply:
    """A server that answers with a hostile model name, response id and request id."""
    body = request.json() or {}
    hostile = HOSTILE[index % len(HOSTILE)]
    reply = json_reply(response_body(f"resp_{index}{hostile}", model=body.get("model")))
    reply.headers["x-request-id"] = hostile.encode("latin-1", "ignore").decode("latin-1")  # a header is Latin-1
    return reply


def _instrumented_hostile_spans() -> list[Any]:
    with LoopbackAPI(_echo) as api, capture() as telemetry:
        client = openai.OpenAI(base_url=api.base_url, api_key="k", max_retries=0)
        try:
            previous = None
            for text in map(_sendable, HOSTILE):
                response = client.responses.create(
                    model=text, input="hi", previous_response_id=previous, instructions=text
                )
                previous = response.id
        finally:
            client.close()
        return telemetry.spans()


def test_hostile_strings_cannot_inject_markup_or_script(tmp_path: Path) -> None:
    spans = _instrumented_hostile_spans()
    assert [s.attributes[a.GEN_AI_REQUEST_MODEL] for s in spans] == [_sendable(h) for h in HOSTILE]  # they carry them
    assert spans[-1].attributes[a.GEN_AI_RESPONSE_ID] == f"resp_{len(HOSTILE) - 1}{HOSTILE[-1]}"  # from the server
    records = [*from_sdk(spans), *_hostile_records()]
    page = tmp_path / "hostile.html"
    page.write_text(render(records, Options(title=HOSTILE[0], sources=HOSTILE, problems=HOSTILE)), encoding="utf-8")
    source = page.read_text()
    assert source.count("<script") == 1
    assert source.count("</script>") == 1
    assert "<img" not in source
    assert "<svg" not in source

    root = parse(dump_dom(page))
    html = root.find_all("html")[0]
    assert html.attrs.get("data-ready") == "1", html.attrs
    assert "data-pwned" not in html.attrs
    scripts = root.find_all("script")
    assert len(scripts) == 1
    assert scripts[0].text() == SCRIPT
    for element in root.iter():
        assert element.tag not in ("img", "svg", "iframe", "object", "embed"), element.tag
        assert not [k for k in element.attrs if k.startswith("on")], (element.tag, element.attrs)
        href = element.attrs.get("href", "")
        assert not href.lower().startswith("javascript:"), href
    assert root.find_all("title")[0].text().startswith(HOSTILE[0])  # shown as text
    models = [
        code.text()
        for body in root.find_all("tbody", class_="call")
        for code in body.find_all("td")[2].find_all("code")[:1]
    ]
    assert sorted(models) == sorted([_spelled(h) for h in HOSTILE] + [_spelled(_sendable(h)) for h in HOSTILE])
    assert len(root.find_all("tbody", class_="call")) == len(records)


def _sendable(text: str) -> str:
    """What the client can send: no lone surrogate (it encodes the body as UTF-8; the server's JSON may have one)."""
    return text.replace("\ud800", "")


def _spelled(text: str) -> str:
    """How the page shows invisible and direction-changing characters: spelled out."""
    return text.replace("\u202e", "\\u202e").replace("\u200b", "\\u200b").replace("\ud800", "\\ud800")


# -- recorded real-API traffic ---------------------------------------------------------------------------------------


def test_reports_of_the_recorded_real_traffic_render(tmp_path: Path) -> None:
    replayer = Replayer()
    every: list[Any] = []
    pages = 0
    try:
        for path in all_cassettes():
            with capture() as telemetry:
                try:
                    replayer.replay(load(path))
                except Unsupported:  # a method the installed openai lacks (the real-traffic suite skips it too)
                    continue
            spans = telemetry.spans()
            page = render(from_sdk(spans), Options(title=path.stem))
            assert page.count('<tbody class="call') == len(spans), path
            every += [dataclasses.replace(r, service=path.parent.name) for r in from_sdk(spans)]
            pages += 1
    finally:
        replayer.close()
    assert pages > 50
    combined = tmp_path / "real-traffic.html"
    combined.write_text(render(every, Options(title="recorded real-API traffic")))
    root = parse(dump_dom(combined))
    html = root.find_all("html")[0]
    assert html.attrs.get("data-ready") == "1", html.attrs
    assert "data-error" not in html.attrs
    shown = conversations(root)
    assert sorted(c.span for calls in shown.values() for c in calls) == sorted(r.span_id for r in every)
    assert int(html.attrs["data-shown"]) == len(shown)
    assert json.loads(json.dumps(html.attrs))  # attributes are plain text
