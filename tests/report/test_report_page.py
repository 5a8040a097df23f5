"""The page itself, read as text: the policy that it loads nothing, its links, what it says about the input; the
content is all in the HTML (the script only filters)."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import pytest

from otel_responses.testing import capture
from otel_responses.tools import scenarios
from otel_responses.tools.report import DOCS_URL, Options, from_sdk, render
from otel_responses.tools.report.page import BadTemplate, check_trace_url
from otel_responses.tools.report.records import SpanRecord

from ..report_support import conversations, parse


@pytest.fixture(scope="module")
def records(emulator: Any) -> list[SpanRecord]:
    client = emulator.client()
    try:
        with capture() as telemetry:
            scenarios.run(client, scenarios.BY_NAME["replay_output_text_only"], "MK-page")
        return list(from_sdk(telemetry.spans()))
    finally:
        client.close()


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_allows_the_pages_own_style_and_script_and_nothing_else(records: list[SpanRecord]) -> None:
    page = render(records)
    root = parse(page)
    (meta,) = [m for m in root.find_all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"]
    (style,) = root.find_all("style")
    (script,) = root.find_all("script")
    assert meta.attrs["content"] == (
        f"default-src 'none'; style-src {_sha256(style.text())}; script-src {_sha256(script.text())}; "
        "base-uri 'none'; form-action 'none'"
    )
    # It comes before anything it governs, and nothing on the page asks for a resource.
    assert page.index("Content-Security-Policy") < page.index("<style>")
    for pattern in (r"<link\b", r"<img\b", r"<iframe\b", r"\bsrc=", r"url\(", r"@import", r"<base\b", r"\bstyle="):
        assert re.search(pattern, page) is None, pattern
    links = [a.attrs["href"] for a in root.find_all("a")]
    signals = f"{DOCS_URL}signals/"
    assert {h for h in links if not h.startswith("#")} == {signals, *(f"{signals}#{n}" for n in _names(records))}


def _names(records: list[SpanRecord]) -> set[str]:
    return {name for r in records for name in r.texts("openai_responses.signals")}


def test_everything_is_in_the_html_without_the_script(records: list[SpanRecord]) -> None:
    """Read without JavaScript: every call and signal is there; only the filters are hidden."""
    root = parse(render(records))
    (calls,) = conversations(root).values()
    assert [(c.turn, c.signals) for c in calls] == [
        ("1", ()),
        ("2", ("reasoning_dropped", "phase_dropped")),
        ("3", ("reasoning_dropped", "phase_dropped")),
        ("4", ("reasoning_dropped", "phase_dropped")),
    ]
    assert root.find_all("form", id="filters")[0].hidden
    assert not root.find_all("section", class_="conv")[0].hidden


def test_trace_links_follow_the_template(records: list[SpanRecord]) -> None:
    template = "https://tempo.example/explore?trace={trace_id}&span={span_id}&x=<y>"
    root = parse(render(records, Options(trace_url=template)))
    hrefs = [a.attrs["href"] for a in root.find_all("a") if a.attrs["href"].startswith("https://tempo")]
    assert hrefs == [f"https://tempo.example/explore?trace={r.trace_id}&span={r.span_id}&x=<y>" for r in records]
    for bad in ("javascript:alert(1)//{trace_id}", "ftp://x/{trace_id}", "http:///{trace_id}", "http://x/"):
        with pytest.raises(BadTemplate):
            check_trace_url(bad)
    with pytest.raises(BadTemplate):
        render(records, Options(trace_url="data:text/html,{trace_id}"))


def test_the_page_names_its_sources_and_problems(records: list[SpanRecord]) -> None:
    problems = [f"traces.jsonl:{n}: not JSON" for n in range(1, 61)]
    root = parse(render(records, Options(sources=["a.jsonl", "b.jsonl.gz"], problems=problems, other_spans=3)))
    meta = root.find_all("p", class_="meta")[0].text()
    assert "from a.jsonl, b.jsonl.gz; 3 spans of other instrumentations left out." in meta
    items = [li.text() for li in root.find_all("section", id="problems")[0].find_all("li")]
    assert items == [*problems[:50], "and 10 more"]


def test_a_signal_shows_its_meaning_and_fix_once_per_conversation(records: list[SpanRecord]) -> None:
    root = parse(render(records))
    fixes = [
        li.find_all("small")[0].text()
        for li in root.find_all("li")
        if li.attrs.get("data-signal") == "reasoning_dropped"
    ]
    assert fixes == [
        "Fix: replay every output item, reasoning included, not just the message text",
        "(meaning and fix: turn 2)",
        "(meaning and fix: turn 2)",
    ]


def test_how_to_read_says_that_turns_count_responses(records: list[SpanRecord]) -> None:
    root = parse(render(records))
    (help_,) = root.find_all("details", class_="help")
    rows = dict(
        zip([dt.text() for dt in help_.find_all("dt")], [dd.text() for dd in help_.find_all("dd")], strict=True)
    )
    assert rows["turn"].startswith(
        "1 for a first call, the continued turn's + 1: turns count responses, so a tool round"
    )
    assert "a tool round trip (the call, then its output sent back) is a turn of its own" in rows["turn"]


def test_the_runs_of_one_lineage_id_are_headed_as_runs_and_a_guess_is_said(records: list[SpanRecord]) -> None:
    """Two runs against a restarted server share every id: the page heads each as a run of the lineage; a call
    placed by time carries its note."""
    import dataclasses

    later = 10**9 * 60
    again = [
        dataclasses.replace(
            r,
            trace_id=f"{int(r.trace_id, 16) ^ 1:032x}",
            start_ns=r.start_ns + later,
            end_ns=r.end_ns + later,
            links=(),
        )
        for r in records
    ]
    root = parse(render([*records, *again]))
    sections = root.find_all("section", class_="conv")
    assert [
        (s.attrs.get("data-run"), "run " + s.attrs.get("data-run", "") + " of 2" in s.find_all("h2")[0].text())
        for s in sections
    ] == [("1", True), ("2", True)]
    notes = [s.find_all("p", class_="meta")[0].text() for s in sections]
    assert ["placed in this run by time" in n for n in notes] == [False, True]


def test_a_replay_of_the_users_messages_alone_shows_its_own_meaning_and_fix_in_its_conversation(
    emulator: Any,
) -> None:
    """The replay that kept only the user's messages continues the turn it replays: one conversation, the signal with
    the meaning and fix of its variant."""
    from otel_responses.signals import CATALOGUE

    client = emulator.client()
    try:
        with capture() as telemetry:
            ask = {"role": "user", "content": "Remember this: the marker is W-1."}
            client.responses.create(model="gpt-5.4", input=[ask])
            client.responses.create(model="gpt-5.4", input=[ask, {"role": "user", "content": "The marker?"}])
        root = parse(render(list(from_sdk(telemetry.spans()))))
    finally:
        client.close()
    assert len(root.find_all("section", class_="conv")) == 1
    meaning, fix = CATALOGUE["replay_incomplete"].variants["openai_responses.replay.messages_only"]
    (shown,) = [li for li in root.find_all("li") if li.attrs.get("data-signal") == "replay_incomplete"]
    assert meaning in shown.text()
    assert shown.find_all("small")[0].text() == f"Fix: {fix}"


def test_a_signal_shows_the_meaning_and_fix_of_the_variant_its_event_names(emulator: Any) -> None:
    """Reasoning that could never have been replayed (an unstored response without `encrypted_content`): the page
    gives that variant's meaning and fix; reasoning left out that could have been, in another conversation, the
    catalogue's own."""
    from otel_responses.signals import CATALOGUE

    client = emulator.client()
    try:
        with capture() as telemetry:
            for include in ([], ["reasoning.encrypted_content"]):
                ask = {"role": "user", "content": f"Remember this: the marker is V-{len(include)}."}
                first = client.responses.create(model="gpt-5.4", input=[ask], store=False, include=include)
                history = [ask, *(i for i in first.output if i.type == "message"), {"role": "user", "content": "?"}]
                every: Any = {"context": "all_turns"}  # the earlier turn's reasoning would have been read
                client.responses.create(model="gpt-5.4", input=history, store=False, include=include, reasoning=every)
        root = parse(render(list(from_sdk(telemetry.spans()))))
    finally:
        client.close()
    kind = CATALOGUE["reasoning_dropped"]
    meaning, fix = kind.variants["openai_responses.reasoning.unreplayable"]
    shown = sorted(
        (li.text(), li.find_all("small")[0].text())
        for li in root.find_all("li")
        if li.attrs.get("data-signal") == kind.name
    )
    assert len(shown) == 2
    (never, could) = sorted(shown, key=lambda s: "could never" not in s[0])
    assert meaning in never[0]
    assert never[1] == f"Fix: {fix}"
    assert kind.meaning in could[0]
    assert "could never" not in could[0]
    assert could[1] == f"Fix: {kind.fix}"
