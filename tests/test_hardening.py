"""Issue 14's findings, one test each: strict mode never refuses on a fact read from the shared ledger, every read of
the app's arguments is guarded, the in-flight record is released when a span fails to start, an app's one-shot list
reaches the SDK whole, the paginator leaves no context behind, ``suppress_instrumentation()`` is honoured, and
settings are parsed as documented."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import openai
import pytest
from opentelemetry import context as otel_context
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_responses import ConfigError, ContextLossError, ResponsesInstrumentor
from otel_responses.config import ENV_PREFIX, settings_from
from otel_responses.emulator import Emulator
from otel_responses.ledger import LEDGER_METHODS, InMemoryLedger
from otel_responses.signals import SHARED_FACT
from otel_responses.testing import CapturedTelemetry, capture

from .conftest import new_captured

MODEL = "gpt-4.1-mini"


def chat_attrs(cap: CapturedTelemetry) -> list[dict[str, Any]]:
    return [dict(span.attributes or {}) for span in cap.chat_spans()]


def signal_events(span: ReadableSpan, name: str) -> list[dict[str, Any]]:
    return [
        dict(event.attributes or {})
        for event in span.events
        if (event.attributes or {}).get("openai_responses.signal.name") == name
    ]


# -- hostile inputs ---------------------------------------------------------------------------------------------


class OneShotList(list[Any]):
    """Iterates once: the second pass yields nothing (a lazily drained queue, say)."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.passes = 0

    def __iter__(self) -> Iterator[Any]:
        self.passes += 1
        return super().__iter__() if self.passes == 1 else iter(())


def test_a_one_shot_list_reaches_the_sdk_whole(emulator: Emulator, client: openai.OpenAI, captured: Any) -> None:
    emulator.requests.clear()
    items = OneShotList([{"role": "user", "content": "first"}, {"role": "user", "content": "second"}])
    client.responses.create(model=MODEL, input=items)
    (sent,) = [r.body for r in emulator.requests if r.path.endswith("/responses")]
    assert len(sent["input"]) == 2, "the instrumentation used up the app's one-shot list"
    (attrs,) = chat_attrs(captured)
    assert attrs["openai_responses.input.item_count"] == 2  # and it still read the items


class RaisingGetHeaders(Mapping[str, str]):
    """A headers mapping whose ``get`` raises: the SDK merges it with ``**``, never calls ``get``."""

    def __getitem__(self, key: str) -> str:
        return {"X-App": "1"}[key]

    def __iter__(self) -> Iterator[str]:
        return iter(["X-App"])

    def __len__(self) -> int:
        return 1

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("the app's mapping refuses get()")


def test_extra_headers_whose_get_raises_do_not_reach_the_app(
    emulator: Emulator, client: openai.OpenAI, captured: Any
) -> None:
    emulator.requests.clear()
    response = client.responses.create(model=MODEL, input="hi", extra_headers=RaisingGetHeaders())
    assert response.status == "completed"
    assert len([r for r in emulator.requests if r.path.endswith("/responses")]) == 1
    assert len(captured.chat_spans()) == 1  # still recorded: an unreadable mapping means a plain call


def test_the_paginator_leaves_no_context_when_the_sdk_rejects_an_argument(emulator: Emulator, captured: Any) -> None:
    async def run() -> None:
        client = emulator.async_client()
        before = otel_context.get_current()
        with pytest.raises(TypeError):
            client.responses.input_items.list("resp_x", no_such_argument=1)  # type: ignore[call-arg]
        assert otel_context.get_current() == before
        await client.close()

    asyncio.run(run())
    (span,) = captured.spans()
    assert span.end_time is not None
    assert (span.attributes or {}).get("error.type") == "TypeError"


def test_suppress_instrumentation_is_honoured(client: openai.OpenAI, captured: Any) -> None:
    with suppress_instrumentation():
        client.responses.create(model=MODEL, input="hi")
        client.conversations.create()
    assert captured.spans() == []
    assert captured.metric_points("gen_ai.client.operation.duration") == []
    client.responses.create(model=MODEL, input="hi")
    assert len(captured.spans()) == 1


# -- a span that fails to start ----------------------------------------------------------------------------------


class RaisingOnStart(SpanProcessor):
    def __init__(self) -> None:
        self.raising = False

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        if self.raising:
            raise RuntimeError("a span processor failed")


def test_a_span_that_fails_to_start_releases_the_in_flight_record(emulator: Emulator, client: openai.OpenAI) -> None:
    cap = new_captured()
    processor = RaisingOnStart()
    cap.tracer_provider.add_span_processor(processor)
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    try:
        first = client.responses.create(model=MODEL, input="Remember: the marker is Q-7.")
        processor.raising = True
        assert client.responses.create(model=MODEL, input="and?", previous_response_id=first.id).status == "completed"
        processor.raising = False
        cap.clear()
        client.responses.create(model=MODEL, input="the marker?", previous_response_id=first.id)
    finally:
        instrumentor.uninstrument()
    (attrs,) = chat_attrs(cap)
    assert attrs["openai_responses.signals"] == ()


# -- strict mode and the shared ledger -----------------------------------------------------------------------------

redis_ledger_tests = pytest.importorskip("tests.test_redis_ledger")
RedisServer = redis_ledger_tests.RedisServer
redis_server = redis_ledger_tests.redis_server
KEY = redis_ledger_tests.KEY
TOOLS = redis_ledger_tests.TOOLS


def _function_call(response: Any) -> Any:
    return next(item for item in response.output if item.type == "function_call")


@pytest.mark.skipif(redis_ledger_tests.REDIS_SERVER is None, reason="redis-server is not installed")
def test_strict_mode_never_refuses_on_a_stale_fact_read_from_redis(redis_server: Any, client: openai.OpenAI) -> None:
    """A writer without the key can put back an older genuine value: the conversation's pointer to the turn whose
    tool call has since been answered. The next turn then looks like it leaves the call unanswered: the signal is
    recorded (marked as resting on the shared ledger), but the request, which the API accepts, is not refused."""
    from otel_responses.ledger.redis import RedisLedger

    url = redis_server.url(db=3)
    with redis_server.client(db=3) as admin:
        admin.flushdb()
        writer = RedisLedger(url)
        with capture(ledger=writer, hash_key=KEY):
            conversation = client.conversations.create()
            asked = client.responses.create(
                model=MODEL, conversation=conversation.id, input="Please use lookup_order for order 7.", tools=TOOLS
            )
            call = _function_call(asked)
            assert writer.flush(5)
            (pointer,) = admin.scan_iter(match=f"*:{{{conversation.id}}}:c")
            stale = admin.get(pointer)
            client.responses.create(
                model=MODEL,
                conversation=conversation.id,
                input=[{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}],
                tools=TOOLS,
            )
            assert writer.flush(5)
        writer.close(1)
        admin.set(pointer, stale, keepttl=True)  # an older genuine value put back

        reader = RedisLedger(url)  # another process: knows nothing locally
        try:
            with capture(ledger=reader, hash_key=KEY, strict=True) as cap:
                answer = client.responses.create(
                    model=MODEL, conversation=conversation.id, input="Thanks. What did it say?", tools=TOOLS
                )
        finally:
            reader.close(1)
    assert answer.status == "completed"  # not refused: the API accepts it
    (span,) = cap.chat_spans()
    # The stale turn looked unanswered; the API's acceptance proves it was answered: no false error is recorded.
    assert (span.attributes or {})["openai_responses.signals"] == ()


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
    call = _function_call(asked)
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


# -- settings -----------------------------------------------------------------------------------------------------


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

    ledger = Partial()
    for name in LEDGER_METHODS:
        if name != missing:
            setattr(ledger, name, getattr(InMemoryLedger(), name))
    with pytest.raises(ConfigError, match=missing):
        settings_from({"ledger": ledger}, {})
    setattr(ledger, missing, getattr(InMemoryLedger(), missing))
    assert settings_from({"ledger": ledger}, {}).ledger is ledger


@pytest.mark.parametrize(
    ("keyword", "environ", "expected"),
    [(None, {}, False), (True, {}, True), (None, {"LEDGER_ACCEPT_UNSIGNED": "TRUE"}, True)],
)
def test_the_rolling_deploy_opt_in_reaches_the_redis_ledger(
    keyword: bool | None, environ: dict[str, str], expected: bool
) -> None:
    pytest.importorskip("redis")
    config: dict[str, Any] = {"ledger_url": "redis://127.0.0.1:1/0", "hash_key": "fleet"}
    if keyword is not None:
        config["ledger_accept_unsigned"] = keyword
    settings = settings_from(config, {ENV_PREFIX + name: value for name, value in environ.items()})
    try:
        assert settings.ledger.accept_unsigned is expected  # type: ignore[attr-defined]
    finally:
        settings.ledger.close(0)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="ledger_accept_unsigned"):
        settings_from({**config, "ledger_accept_unsigned": "yes"}, {})
