"""Frames as litellm's gateway relays a Responses WebSocket session (``integrations/_litellm_websocket.py``): which
upstream events are parsed for the observer (only those it reads, and those that name a lane), and the request a
``response.create`` frame carries, in both shapes the gateway accepts. Each row has its near miss. The relay itself
runs in tests/clients/test_litellm_proxy.py, in the gateway's virtualenv."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_responses.integrations._litellm_websocket import event_of, request_of

COMPLETED = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": []}}


@pytest.mark.parametrize(
    ("frame", "kind"),
    [
        # what the observer reads: parsed, readable by attribute
        (json.dumps(COMPLETED), "response.completed"),
        (json.dumps({"type": "response.output_item.done", "item": {"type": "message"}}), "response.output_item.done"),
        (json.dumps({"type": "response.incomplete", "response": {"id": "r"}}), "response.incomplete"),
        (json.dumps({"type": "response.failed", "response": {"id": "r"}}), "response.failed"),
        ('{"type":"error","error":{"code":"previous_response_not_found"}}', "error"),  # the upstream's own bytes
        ('{"type": "error", "error": {"code": "x"}}', "error"),  # as litellm re-serialises an event
        (json.dumps(COMPLETED).encode(), "response.completed"),  # bytes
        # a lane: parsed whatever the event, so that its chunk reaches its own call
        ('{"type":"response.output_text.delta","delta":"a","stream_id":"s-1"}', "response.output_text.delta"),
        # near misses: not parsed, a chunk of the default lane
        ('{"type":"response.output_text.delta","delta":"a"}', None),
        ('{"type":"response.created","response":{"id":"r","error":null}}', None),  # "error", but not its type
        ('{"type":"response.output_text.delta","delta":"response.completed', None),  # a mark, and no JSON
        ('["response.completed"]', None),  # a mark, and no object
        (None, None),
    ],
)
def test_which_relayed_events_are_read(frame: Any, kind: str | None) -> None:
    event = event_of(frame)
    assert getattr(event, "type", None) == kind
    if kind is None:
        assert event == {}


def test_a_read_event_reads_as_the_sdks_models() -> None:
    event = event_of(json.dumps(COMPLETED))
    assert event.response.id == "resp_1"
    assert event.response.output == []
    with pytest.raises(AttributeError):
        _ = event.response.usage  # absent, as a model's unset field reads to the facts


@pytest.mark.parametrize(
    ("frame", "body"),
    [
        ('{"type":"response.create","model":"m","input":"hi"}', {"model": "m", "input": "hi"}),
        (  # the nested body litellm's gateway accepts too, the frame's own fields beside it
            '{"type":"response.create","stream_id":"s","response":{"model":"m","input":"hi","store":false}}',
            {"stream_id": "s", "model": "m", "input": "hi", "store": False},
        ),
        ('{"type":"response.create","response":"not an object","input":"hi"}', {"input": "hi"}),
        # near misses
        ('{"type":"response.cancel","response_id":"r"}', None),
        ('{"type":"session.update","event":"response.create"}', None),  # the name, not the type
        (None, None),
    ],
)
def test_the_request_a_frame_carries(frame: Any, body: dict[str, Any] | None) -> None:
    assert request_of(frame) == body
