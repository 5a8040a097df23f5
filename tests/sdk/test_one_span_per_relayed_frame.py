"""One span per ``response.create`` a gateway relays (``integrations/_litellm_websocket.py``), whatever strict mode
did with it on the way: refused (its span ended with the refusal), let through (its span opens as the frame leaves),
or a span that failed to open at the check (the frame goes on unrecorded, never opened a second time). The seams'
wrappers run in the order litellm's relay calls them, on a real ``Call`` and real SDK providers; the relay itself
runs in tests/clients/test_litellm_proxy.py, in the gateway's virtualenv."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_responses._calls.runtime import runtime_for
from otel_responses._patching.websocket import closed
from otel_responses._patching.wrappers import Switch
from otel_responses.integrations._litellm_websocket import forward, guard, record
from otel_responses.ledger import InMemoryLedger

CONFLICT = {"type": "response.create", "model": "m", "input": "hi", "previous_response_id": "resp_1",
            "conversation": "conv_1"}  # fmt: skip
PLAIN = {"type": "response.create", "model": "m", "input": "hi"}


class FailsFirstStart(SpanProcessor):
    """A span processor whose first ``on_start`` raises (an exporter's bug): the first span fails to open."""

    def __init__(self) -> None:
        self.failed = False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("processor failed")

    def on_end(self, span: ReadableSpan) -> None:
        pass


class Socket:
    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send_text(self, text: str) -> None:
        self.sent.append(text)


class Guarded:
    def __init__(self, frame: str) -> None:
        self.frame = frame


class Relay:
    """What the seams read of litellm's ``ResponsesWebSocketStreaming``: its client socket, its attributes."""

    def __init__(self) -> None:
        self.websocket = Socket()


def relay_one(frame: dict[str, Any], *, strict: bool, fail_first_open: bool) -> tuple[list[str], list[str], bool]:
    """One frame through ``_forward_guarded_frame`` (its guard, then its send), then the upstream side closing: the
    names of the spans' signals, the error events the client got, and whether the frame was sent upstream."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    if fail_first_open:
        provider.add_span_processor(FailsFirstStart())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = runtime_for({"hash_key": "relay-tests", "strict": strict, "ledger": InMemoryLedger()}, provider)
    relay, wrapper, sent = Relay(), guard(Switch(), runtime), []

    async def guard_frame() -> Guarded:
        return Guarded(json.dumps(frame))

    async def forward_frame() -> None:
        guarded = await wrapper(guard_frame, relay, (), {})
        if guarded is not None:  # litellm drops a refused frame
            record(lambda: sent.append(guarded.frame), relay, (), {})

    asyncio.run(forward(lambda: forward_frame(), relay, (), {}))
    closed(relay)
    spans = exporter.get_finished_spans()
    errors = [json.loads(text)["error"]["code"] for text in relay.websocket.sent]
    names = [",".join(map(str, (span.attributes or {})["openai_responses.signals"])) for span in spans]  # type: ignore[arg-type]
    return names, errors, bool(sent)


# (case, frame, strict, the first span fails to open, the spans' signals, the client's error events, sent upstream)
ROWS: list[tuple[str, dict[str, Any], bool, bool, list[str], list[str], bool]] = [
    ("refused: one span, ended with the refusal", CONFLICT, True, False, ["state_mode_conflict"],
     ["state_mode_conflict"], False),
    ("near miss: not strict, the frame goes on and its span opens as it leaves", CONFLICT, False, False,
     ["state_mode_conflict"], [], True),
    ("near miss: nothing to refuse", PLAIN, True, False, [""], [], True),
    ("the refusal's span failed to open: the frame goes on, no span opened a second time", CONFLICT, True, True,
     [], [], True),
    ("near miss: nothing to refuse and the span fails to open as the frame leaves", PLAIN, True, True, [], [], True),
]  # fmt: skip


@pytest.mark.parametrize(("case", "frame", "strict", "fail", "spans", "errors", "sent"), ROWS, ids=[r[0] for r in ROWS])
def test_each_relayed_frame_has_at_most_one_span(
    case: str, frame: dict[str, Any], strict: bool, fail: bool, spans: list[str], errors: list[str], sent: bool
) -> None:
    assert relay_one(frame, strict=strict, fail_first_open=fail) == (spans, errors, sent)
