"""Strict mode refuses only what this process can vouch for: a fact this process recorded (refused before sending),
never a stale one another worker's turn has since made untrue (recorded only if the API refuses too). What strict
mode does with facts read from the shared ledger: tests/ledger/test_forged_ledger_values.py."""

from __future__ import annotations

import openai
import pytest

from otel_responses import ContextLossError
from otel_responses.ledger import InMemoryLedger
from otel_responses.signals import SHARED_FACT
from otel_responses.testing import capture

from ..ledger_scenarios import TOOLS
from ..support import function_call, signal_events

MODEL = "gpt-4.1-mini"


def test_a_worker_with_a_stale_conversation_turn_raises_no_false_error(client: openai.OpenAI) -> None:
    """Two workers, each its own in-process ledger (no shared ledger): worker A saw the turn that asked for a tool,
    worker B the turn that answered it. A's next turn looks like it leaves the call unanswered; the request is not
    refused in strict mode, and since the API accepts it, no `missing_tool_output` is recorded. The same request with
    the call really unanswered is refused by the API, and the signal stays."""
    worker_a, worker_b = InMemoryLedger(), InMemoryLedger()
    with capture(ledger=worker_a, strict=True):
        conversation = client.conversations.create()
        asked = client.responses.create(
            model=MODEL, conversation=conversation.id, input="Please use lookup_order for order 7.", tools=TOOLS
        )
    call = function_call(asked)
    with capture(ledger=worker_b, strict=True):
        client.responses.create(
            model=MODEL,
            conversation=conversation.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}],
            tools=TOOLS,
        )
    with capture(ledger=worker_a, strict=True) as cap:
        answer = client.responses.create(model=MODEL, conversation=conversation.id, input="Thanks!", tools=TOOLS)
    assert answer.status == "completed"
    (span,) = cap.chat_spans()
    assert (span.attributes or {})["openai_responses.signals"] == ()
    # Really unanswered: the API refuses, and the signal (not settled, so never refused by strict mode) is recorded.
    other = client.conversations.create()
    with capture(ledger=worker_a, strict=True) as cap:
        client.responses.create(
            model=MODEL, conversation=other.id, input="Please use lookup_order for order 8.", tools=TOOLS
        )
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, conversation=other.id, input="Thanks!", tools=TOOLS)
    assert (cap.chat_spans()[-1].attributes or {})["openai_responses.signals"] == ("missing_tool_output",)


def test_strict_mode_still_refuses_on_what_this_process_recorded(client: openai.OpenAI) -> None:
    with capture(strict=True) as cap:
        unstored = client.responses.create(model=MODEL, input="Remember: X-1.", store=False)
        with pytest.raises(ContextLossError) as refused:
            client.responses.create(model=MODEL, input="and?", previous_response_id=unstored.id)
    assert refused.value.signal == "unstored_parent"
    (event,) = signal_events(cap.chat_spans()[-1], "unstored_parent")
    assert SHARED_FACT not in event
