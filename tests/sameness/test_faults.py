"""Faults, differentially: what the app sees is the same with the instrumentation on and off.

An in-process transport (the httpx flavour the installed SDK uses) answers with malformed JSON, unknown item and
event types, missing and mistyped fields, 429s and 500s (retried: `max_retries=2`), timeouts, and streams cut
mid-way. Each scenario runs with the instrumentation on (the `captured` fixture) and off (`uninstrument()`, then
`instrument()` again): return values (`model_dump()`), exceptions (type, message, status, body), retry counts (the
transport's calls) and stream events must be identical, and every span must be ended exactly once (the autouse
fixture of conftest.py fails a test whose span is ended twice).

Then each internal step of the instrumentation is made to raise, one at a time: the app's results and exceptions
stay the same (sync, async, streaming), the failure is logged at debug level by an `otel_responses` logger, and
counted in the self-metric `openai_responses.instrumentation.errors`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_responses import ResponsesInstrumentor

from ..conftest import Captured
from ..support import HTTPX, fuzz_settings, mock_async_client, mock_client, sse, usage

MODEL = "gpt-4.1-mini"
SELF_METRIC = "openai_responses.instrumentation.errors"
SELF_METRIC_STEP = "openai_responses.instrumentation.step"

# -- a scripted transport ---------------------------------------------------------------------------------------

Step = Callable[[Any, bool], Any]  # (request, is_async) -> response, or raises


def response_body(response_id: str = "resp_fault", output: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "model": MODEL,
        "status": "completed",
        "output": output
        if output is not None
        else [
            {
                "type": "message",
                "id": f"msg_{response_id}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hello", "annotations": []}],
            }
        ],
        "usage": usage(),
        "tool_choice": "auto",
        "tools": [],
        "parallel_tool_calls": True,
        "error": None,
        "incomplete_details": None,
    }
    body.update(extra)
    return body


def ok(body: Any = None, status: int = 200) -> Step:
    payload = response_body() if body is None else body

    def step(request: Any, is_async: bool) -> Any:
        return HTTPX.Response(status, json=payload, headers={"x-request-id": "req_fault"})

    return step


def raw(content: bytes, content_type: str = "application/json", status: int = 200) -> Step:
    def step(request: Any, is_async: bool) -> Any:
        return HTTPX.Response(status, content=content, headers={"content-type": content_type, "x-request-id": "req_r"})

    return step


def error(status: int, body: Any = None, **headers: str) -> Step:
    payload = body if body is not None else {"error": {"message": "nope", "type": "x", "param": None, "code": "c"}}

    def step(request: Any, is_async: bool) -> Any:
        return HTTPX.Response(status, json=payload, headers={"retry-after-ms": "1", "x-request-id": "req_e", **headers})

    return step


def timeout() -> Step:
    def step(request: Any, is_async: bool) -> Any:
        raise HTTPX.ReadTimeout("timed out", request=request)

    return step


def connect_error() -> Step:
    def step(request: Any, is_async: bool) -> Any:
        raise HTTPX.ConnectError("connection refused", request=request)

    return step


def events_stream(events: list[Any], cut_after: int | None = None) -> Step:
    """An SSE body; with `cut_after`, the connection drops (ReadError) after that many events."""
    chunks = [sse([e]) if isinstance(e, dict) else e for e in events]

    def step(request: Any, is_async: bool) -> Any:
        headers = {"content-type": "text/event-stream", "x-request-id": "req_s"}
        if cut_after is None:
            return HTTPX.Response(200, content=b"".join(chunks), headers=headers)
        if is_async:

            async def abody() -> Any:
                for chunk in chunks[:cut_after]:
                    yield chunk
                raise HTTPX.ReadError("peer closed connection mid-stream", request=request)

            return HTTPX.Response(200, content=abody(), headers=headers)

        def body() -> Iterator[bytes]:
            yield from chunks[:cut_after]
            raise HTTPX.ReadError("peer closed connection mid-stream", request=request)

        return HTTPX.Response(200, content=body(), headers=headers)

    return step


def normal_events(response: dict[str, Any] | None = None, terminal: str = "response.completed") -> list[Any]:
    final = response if response is not None else response_body()
    start = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[Any] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(final.get("output") or []):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": terminal, "response": final})
    return events


@dataclass
class Script:
    """Answers request n with steps[n] (the last step repeats); counts the calls."""

    steps: list[Step]
    is_async: bool = False
    calls: int = 0

    def __call__(self, request: Any) -> Any:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        return step(request, self.is_async)


# -- what the app sees -------------------------------------------------------------------------------------------


def dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        try:
            return ("model", type(value).__name__, value.model_dump(warnings=False))
        except TypeError:  # pydantic v1
            return ("model", type(value).__name__, value.dict())
    if isinstance(value, (str, int, float, bool, type(None), list, dict)):
        return value
    return ("object", type(value).__name__)


def describe(exc: BaseException) -> tuple[Any, ...]:
    return (
        type(exc).__name__,
        str(exc),
        getattr(exc, "status_code", None),
        getattr(exc, "body", None),
        getattr(exc, "code", None),
        type(exc.__cause__).__name__ if exc.__cause__ is not None else None,
    )


@dataclass
class Seen:
    """Everything the app observed in one run."""

    outcome: Any = None
    events: list[Any] = field(default_factory=list)
    calls: int = 0


def _fast_retries(client: Any) -> Any:
    """Both runs retry at once (the SDK's backoff would make each timeout scenario last seconds)."""
    client._calculate_retry_timeout = lambda *args, **kwargs: 0.001
    return client


Action = Callable[[Any, Seen], Any]


def run_sync(steps: list[Step], action: Action) -> Seen:
    seen = Seen()
    script = Script(list(steps))
    client = _fast_retries(mock_client(script, max_retries=2))
    try:
        seen.outcome = ("returned", dump(action(client, seen)))
    except Exception as exc:
        seen.outcome = ("raised", describe(exc))
    finally:
        client.close()
    seen.calls = script.calls
    return seen


def run_async(steps: list[Step], action: Action) -> Seen:
    seen = Seen()
    script = Script(list(steps), is_async=True)

    async def run() -> None:
        client = _fast_retries(mock_async_client(script, max_retries=2))
        try:
            seen.outcome = ("returned", dump(await action(client, seen)))
        except Exception as exc:
            seen.outcome = ("raised", describe(exc))
        finally:
            await client.close()

    asyncio.run(run())
    seen.calls = script.calls
    return seen


def plain_create(client: Any, seen: Seen) -> Any:
    return client.responses.create(model=MODEL, input="hi")


async def plain_acreate(client: Any, seen: Seen) -> Any:
    return await client.responses.create(model=MODEL, input="hi")


def stream_create(client: Any, seen: Seen) -> Any:
    stream = client.responses.create(model=MODEL, input="hi", stream=True)
    for event in stream:
        seen.events.append(dump(event))
    return None


async def stream_acreate(client: Any, seen: Seen) -> Any:
    stream = await client.responses.create(model=MODEL, input="hi", stream=True)
    async for event in stream:
        seen.events.append(dump(event))
    return None


def stream_helper(client: Any, seen: Seen) -> Any:
    with client.responses.stream(model=MODEL, input="hi") as stream:
        for event in stream:
            seen.events.append(dump(event))
        return stream.get_final_response()


@contextmanager
def instrumentation_off(captured: Captured) -> Iterator[None]:
    instrumentor = ResponsesInstrumentor()
    instrumentor.uninstrument()
    try:
        yield
    finally:
        instrumentor.instrument(tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider)


def differential(captured: Captured, run: Callable[[], Seen], top_level_calls: int = 1) -> Seen:
    """The run with the instrumentation on and off: the app must not tell the difference."""
    captured.clear()
    on = run()
    spans = captured.spans()
    with instrumentation_off(captured):
        off = run()
    assert on.outcome == off.outcome
    assert on.events == off.events
    assert on.calls == off.calls
    assert len(spans) == top_level_calls, [s.name for s in spans]  # one span per call, ended (exported) once
    assert len({s.context.span_id for s in spans}) == len(spans)
    return on


# -- scenarios ---------------------------------------------------------------------------------------------------

ERROR_BODY_400 = {"error": {"message": "bad input", "type": "invalid_request_error", "param": "input", "code": "x"}}


def _expect(kind: str, name: str | None = None, calls: int | None = None) -> Callable[[Seen], None]:
    def check(seen: Seen) -> None:
        assert seen.outcome[0] == kind, seen.outcome
        if name is not None:
            assert seen.outcome[1][0] == name, seen.outcome
        if calls is not None:
            assert seen.calls == calls

    return check


PLAIN: dict[str, tuple[list[Step], Callable[[Seen], None]]] = {
    "ok": ([ok()], _expect("returned", calls=1)),
    "malformed_json": ([raw(b'{"id": "resp_1", "output": [')], _expect("raised", calls=1)),
    "text_plain_body": ([raw(b"hello there", "text/plain")], _expect("returned", calls=1)),
    "json_array": ([raw(b"[1, 2, 3]")], _expect("returned", calls=1)),
    "json_null": ([raw(b"null")], _expect("returned", calls=1)),
    "empty_body": ([raw(b"")], _expect("raised", calls=1)),
    "unknown_item_types": (
        [
            ok(
                response_body(
                    output=[
                        {"type": "brand_new_item", "id": "new_1", "encrypted_content": "x"},
                        {"no_type": True},
                        {"type": "reasoning", "id": "rs_1", "encrypted_content": 42, "summary": "not a list"},
                        {"type": "function_call", "call_id": None, "arguments": {"not": "a string"}},
                        {"type": 7, "role": ["assistant"]},
                        "a string item",
                        None,
                        12,
                    ],
                    brand_new_field={"nested": [1, 2]},
                )
            )
        ],
        _expect("returned", calls=1),
    ),
    "missing_fields": ([ok({"id": "resp_min"})], _expect("returned", calls=1)),
    "empty_object": ([ok({})], _expect("returned", calls=1)),
    "wrong_types": (
        [
            ok(
                {
                    "id": 5,
                    "model": [1],
                    "status": {"x": 1},
                    "output": "not a list",
                    "usage": {"input_tokens": "10", "output_tokens": -1, "input_tokens_details": []},
                    "incomplete_details": "x",
                    "conversation": 5,
                    "service_tier": 3,
                }
            )
        ],
        _expect("returned", calls=1),
    ),
    "nulls": (
        [ok({"id": None, "output": None, "usage": None, "status": None, "model": None, "conversation": None})],
        _expect("returned", calls=1),
    ),
    "429_then_ok": ([error(429), error(429), ok()], _expect("returned", calls=3)),
    "429_exhausted": ([error(429)], _expect("raised", "RateLimitError", calls=3)),
    "500_then_ok": ([error(500), ok()], _expect("returned", calls=2)),
    "500_exhausted": ([error(500)], _expect("raised", "InternalServerError", calls=3)),
    "503_should_not_retry": ([error(503, **{"x-should-retry": "false"})], _expect("raised", calls=1)),
    "400_not_retried": ([error(400, ERROR_BODY_400)], _expect("raised", "BadRequestError", calls=1)),
    "400_odd_error_body": ([error(400, {"error": "just a string"})], _expect("raised", "BadRequestError", calls=1)),
    "500_text_body": ([raw(b"<html>oops</html>", "text/html", status=500)], _expect("raised", calls=3)),
    "timeout_then_ok": ([timeout(), ok()], _expect("returned", calls=2)),
    "timeout_exhausted": ([timeout()], _expect("raised", "APITimeoutError", calls=3)),
    "connection_refused": ([connect_error()], _expect("raised", "APIConnectionError", calls=3)),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("scenario", list(PLAIN))
def test_plain_call_faults_are_invisible(captured: Captured, scenario: str, mode: str) -> None:
    steps, expect = PLAIN[scenario]
    if mode == "sync":
        seen = differential(captured, lambda: run_sync(steps, plain_create))
    else:
        seen = differential(captured, lambda: run_async(steps, plain_acreate))
    expect(seen)
    span = captured.only_span()
    if seen.outcome[0] == "raised":
        assert (span.attributes or {}).get("error.type") == seen.outcome[1][0]


def _unknown_event_stream() -> list[Any]:
    body = response_body(output=[{"type": "brand_new_item", "id": "new_1"}, {"no_type": 1}])
    events = normal_events(body)
    events.insert(2, {"type": "response.brand_new_event", "x": [1]})
    events.insert(3, {"no_type_at_all": True})
    events.insert(4, {"type": "response.output_item.done", "output_index": 9})  # no item
    return events


STREAMS: dict[str, tuple[list[Step], Callable[[Seen], None]]] = {
    "completed": ([events_stream(normal_events())], _expect("returned", calls=1)),
    "incomplete": (
        [
            events_stream(
                normal_events(
                    response_body(status="incomplete", incomplete_details={"reason": "max_output_tokens"}),
                    "response.incomplete",
                )
            )
        ],
        _expect("returned", calls=1),
    ),
    "failed": (
        [
            events_stream(
                normal_events(response_body(status="failed", error={"code": "e", "message": "m"}), "response.failed")
            )
        ],
        _expect("returned", calls=1),
    ),
    "unknown_events_and_items": ([events_stream(_unknown_event_stream())], _expect("returned", calls=1)),
    "malformed_event_data": (
        [events_stream([*normal_events()[:2], b"event: response.in_progress\ndata: {not json\n\n"])],
        _expect("raised", calls=1),
    ),
    "terminal_without_response": (
        [events_stream([*normal_events()[:2], {"type": "response.completed"}])],
        _expect("returned", calls=1),
    ),
    "terminal_with_odd_response": (
        [
            events_stream(
                [*normal_events()[:2], {"type": "response.completed", "response": {"output": "x", "usage": 3}}]
            )
        ],
        _expect("returned", calls=1),
    ),
    "no_terminal_event": ([events_stream(normal_events()[:-1])], _expect("returned", calls=1)),
    "empty_stream": ([events_stream([])], _expect("returned", calls=1)),
    "error_event": (
        [
            events_stream(
                [*normal_events()[:2], {"type": "error", "code": "server_error", "message": "m", "param": None}]
            )
        ],
        _expect("returned", calls=1),
    ),
    "error_data_raises": (
        [
            events_stream(
                [*normal_events()[:2], {"error": {"message": "overloaded", "type": "server_error", "code": "x"}}]
            )
        ],
        _expect("raised", "APIError", calls=1),
    ),
    "connection_cut_mid_stream": ([events_stream(normal_events(), cut_after=3)], _expect("raised", calls=1)),
    "connection_cut_before_first_event": ([events_stream(normal_events(), cut_after=0)], _expect("raised", calls=1)),
    "429_then_stream": ([error(429), events_stream(normal_events())], _expect("returned", calls=2)),
    "timeout_then_cut": ([timeout(), events_stream(normal_events(), cut_after=2)], _expect("raised", calls=2)),
    "500_exhausted": ([error(500)], _expect("raised", "InternalServerError", calls=3)),
}


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic, inside the SDK's helper, on unknown item types
@pytest.mark.parametrize("mode", ["sync", "async", "helper"])
@pytest.mark.parametrize("scenario", list(STREAMS))
def test_stream_faults_are_invisible(captured: Captured, scenario: str, mode: str) -> None:
    steps, expect = STREAMS[scenario]
    if mode == "sync":
        seen = differential(captured, lambda: run_sync(steps, stream_create))
    elif mode == "async":
        seen = differential(captured, lambda: run_async(steps, stream_acreate))
    else:  # `responses.stream()` validates events itself: it may raise where a plain stream does not
        seen = differential(captured, lambda: run_sync(steps, stream_helper))
    span = captured.only_span()
    if mode != "helper":  # the helper raises after the stream (no `response.completed`): no API failure
        expect(seen)
        if seen.outcome[0] == "raised":
            assert span.status.status_code.name == "ERROR"


# -- hypothesis: arbitrary bodies and event sequences ---------------------------------------------------------------

_KEYS = st.sampled_from(
    ["id", "type", "role", "content", "output", "usage", "status", "call_id", "encrypted_content", "phase", "text"]
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(_KEYS | st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=12,
)
ITEM_TYPES = [
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "compaction",
    "brand_new",
    "web_search_call",
]
items = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(ITEM_TYPES) | json_values,
        "id": st.sampled_from(["msg_1", "rs_1", "fc_1"]) | json_values,
        "role": st.sampled_from(["assistant", "user"]) | json_values,
        "call_id": st.sampled_from(["call_1", "call_2"]) | json_values,
        "encrypted_content": st.text(max_size=8) | json_values,
        "phase": st.sampled_from(["commentary", "final_answer"]) | json_values,
        "content": json_values,
    },
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from(["resp_h1", "resp_h2"]) | json_values,
        "object": st.just("response"),
        "model": st.just(MODEL) | json_values,
        "status": st.sampled_from(["completed", "incomplete", "failed", "in_progress"]) | json_values,
        "output": st.lists(items | json_values, max_size=5) | json_values,
        "usage": st.fixed_dictionaries(
            {},
            optional={"input_tokens": json_values, "output_tokens": json_values, "input_tokens_details": json_values},
        )
        | json_values,
        "incomplete_details": json_values,
        "conversation": json_values,
        "service_tier": json_values,
        "error": json_values,
    },
)


@fuzz_settings(150)
@given(body=bodies, mode=st.sampled_from(["sync", "async"]))
def test_arbitrary_response_bodies_are_invisible(captured: Captured, body: dict[str, Any], mode: str) -> None:
    steps = [ok(body)]
    if mode == "sync":
        differential(captured, lambda: run_sync(steps, plain_create))
    else:
        differential(captured, lambda: run_async(steps, plain_acreate))


EVENT_TYPES = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.delta",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
    "response.brand_new",
]
events = st.fixed_dictionaries(
    {"type": st.sampled_from(EVENT_TYPES) | json_values},
    optional={"response": bodies | json_values, "item": items | json_values, "code": json_values, "delta": json_values},
)


@fuzz_settings(150)
@given(
    sequence=st.lists(events, max_size=8),
    cut_after=st.none() | st.integers(0, 8),
    mode=st.sampled_from(["sync", "async"]),
)
def test_arbitrary_event_sequences_are_invisible(
    captured: Captured, sequence: list[dict[str, Any]], cut_after: int | None, mode: str
) -> None:
    steps = [events_stream(list(sequence), cut_after=cut_after)]
    if mode == "sync":
        differential(captured, lambda: run_sync(steps, stream_create))
    else:
        differential(captured, lambda: run_async(steps, stream_acreate))


# -- internal failures ---------------------------------------------------------------------------------------------

FUNCTION_TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}


def session_transport(request: Any, is_async: bool) -> Any:
    """A deterministic little API: a tool call, then an answer; `model="bad"` is a 400; `stream` is SSE."""
    body = json.loads(request.content) if request.content else {}
    if body.get("model") == "bad":
        return error(400, ERROR_BODY_400)(request, is_async)
    answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in body.get("input") or [])
    if answered:
        output = [
            {
                "type": "message",
                "id": "msg_2",
                "role": "assistant",
                "status": "completed",
                "phase": "final_answer",
                "content": [{"type": "output_text", "text": "Tool lookup returned 42.", "annotations": []}],
            }
        ]
        response = response_body("resp_2", output)
    else:
        output = [
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-1"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        ]
        response = response_body("resp_1", output)
    if body.get("stream"):
        if "trigger error event" in json.dumps(body.get("input")):
            return events_stream([*normal_events(response)[:2], {"type": "error", "code": "e", "message": "m"}])(
                request, is_async
            )
        return events_stream(normal_events(response))(request, is_async)
    return HTTPX.Response(200, json=response, headers={"x-request-id": "req_session"})


def _turns() -> tuple[list[Any], Callable[[Any], list[Any]]]:
    first: list[Any] = [{"role": "user", "content": "please use lookup"}]

    def second(output: list[Any]) -> list[Any]:
        return [*first, *output, {"type": "function_call_output", "call_id": "call_1", "output": "42"}]

    return first, second


def session_sync(client: Any, seen: Seen) -> Any:
    first, second = _turns()
    one = client.responses.create(
        model=MODEL, input=first, tools=[FUNCTION_TOOL], store=False, include=["reasoning.encrypted_content"]
    )
    two = client.responses.create(model=MODEL, input=second(one.output), tools=[FUNCTION_TOOL], store=False)
    try:
        client.responses.create(model="bad", input="hi")
    except openai.BadRequestError as exc:
        seen.events.append(describe(exc))
    return [dump(one), dump(two)]


async def session_async(client: Any, seen: Seen) -> Any:
    first, second = _turns()
    one = await client.responses.create(model=MODEL, input=first, tools=[FUNCTION_TOOL], store=False)
    two = await client.responses.create(model=MODEL, input=second(one.output), tools=[FUNCTION_TOOL], store=False)
    try:
        await client.responses.create(model="bad", input="hi")
    except openai.BadRequestError as exc:
        seen.events.append(describe(exc))
    return [dump(one), dump(two)]


def session_stream(client: Any, seen: Seen) -> Any:
    first, second = _turns()
    events = list(client.responses.create(model=MODEL, input=first, tools=[FUNCTION_TOOL], stream=True))
    seen.events += [dump(e) for e in events]
    output = events[-1].response.output
    seen.events += [dump(e) for e in client.responses.create(model=MODEL, input=second(output), stream=True)]
    seen.events += [dump(e) for e in client.responses.create(model=MODEL, input="trigger error event", stream=True)]
    return None


async def session_astream(client: Any, seen: Seen) -> Any:
    first, second = _turns()
    events = [
        e async for e in await client.responses.create(model=MODEL, input=first, tools=[FUNCTION_TOOL], stream=True)
    ]
    seen.events += [dump(e) for e in events]
    output = events[-1].response.output
    seen.events += [
        dump(e) async for e in await client.responses.create(model=MODEL, input=second(output), stream=True)
    ]
    seen.events += [
        dump(e) async for e in await client.responses.create(model=MODEL, input="trigger error event", stream=True)
    ]
    return None


SESSIONS: dict[str, tuple[Callable[[list[Step], Action], Seen], Action, int]] = {
    "sync": (run_sync, session_sync, 3),
    "async": (run_async, session_async, 3),
    "stream": (run_sync, session_stream, 3),
    "astream": (run_async, session_astream, 3),
}

PLAIN_MODES = frozenset({"sync", "async"})
STREAM_MODES = frozenset({"stream", "astream"})
ALL_MODES = PLAIN_MODES | STREAM_MODES

# step -> (where the wrappers look it up, the attribute there, the modes that reach it)
STEPS: dict[str, tuple[str, str, frozenset[str]]] = {
    "facts.request_facts": ("otel_responses._calls.operations", "request_facts", ALL_MODES),
    "analysis.analyse": ("otel_responses._calls.call", "analyse", ALL_MODES),
    "checks.run_request_checks": ("otel_responses._calls.call", "run_request_checks", ALL_MODES),
    "checks.run_response_checks": ("otel_responses._calls.call", "run_response_checks", ALL_MODES),
    "telemetry.Telemetry.end": ("otel_responses._telemetry.telemetry.Telemetry", "end", ALL_MODES),
    "telemetry.Telemetry.start": ("otel_responses._telemetry.telemetry.Telemetry", "start", ALL_MODES),
    # The operation table holds `read_response` itself; it fails when what it calls fails.
    "operations.read_response": ("otel_responses._calls.operations", "response_facts", PLAIN_MODES),
    "ledger.InMemoryLedger.record": ("otel_responses.ledger.InMemoryLedger", "record", ALL_MODES),
    "streams.StreamObserver.event": ("otel_responses._calls.observer.StreamObserver", "event", STREAM_MODES),
}
# Steps whose failure is swallowed where no telemetry is at hand (so logged, not counted), with the reason.
UNCOUNTED: dict[str, str] = {
    "streams.StreamObserver.event": "guarded at the proxy's call site, where the call may already have ended",
}


class InternalFailure(RuntimeError):
    pass


def _raiser(*args: Any, **kwargs: Any) -> Any:
    raise InternalFailure("injected internal failure")


def _patch(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    where, name, _ = STEPS[step]
    monkeypatch.setattr(f"{where}.{name}", _raiser)  # raises if the name is gone: update the test then


def _cases() -> Iterator[Any]:
    for step, (_, _, modes) in STEPS.items():
        for mode in SESSIONS:
            if mode not in modes:
                continue
            yield pytest.param(step, mode, id=f"{step}-{mode}")


def _baseline(captured: Captured, mode: str) -> Seen:
    runner, action, _ = SESSIONS[mode]
    with instrumentation_off(captured):
        return runner([session_transport], action)


def _own_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Debug records of `otel_responses` loggers about the injected failure (by its type: never its message)."""
    return [
        r
        for r in caplog.records
        if r.name.startswith("otel_responses")
        and r.levelno == logging.DEBUG
        and (
            "InternalFailure" in r.getMessage()
            or (r.exc_info is not None and isinstance(r.exc_info[1], InternalFailure))
        )
    ]


@pytest.mark.parametrize(("step", "mode"), list(_cases()))
def test_internal_failure_is_invisible_to_the_app(
    captured: Captured, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, step: str, mode: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="otel_responses")
    runner, action, _calls = SESSIONS[mode]
    expected = _baseline(captured, mode)
    captured.clear()
    caplog.clear()
    _patch(monkeypatch, step)
    seen = runner([session_transport], action)
    monkeypatch.undo()
    assert seen.outcome == expected.outcome
    assert seen.events == expected.events
    assert seen.calls == expected.calls
    assert _own_failures(caplog), f"the failure of {step} was not logged at debug level by an otel_responses logger"
    for span in captured.spans():  # whatever was started was ended (exported), once
        assert span.end_time is not None


@pytest.mark.parametrize("step", [s for s in STEPS if s not in UNCOUNTED])
def test_internal_failure_is_counted(captured: Captured, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    mode = "sync" if "sync" in STEPS[step][2] else "stream"
    runner, action, _ = SESSIONS[mode]
    runner([session_transport], action)
    assert not [p for p in captured.metric_points(SELF_METRIC) if p.value], "counted without a failure"
    _patch(monkeypatch, step)
    runner([session_transport], action)
    monkeypatch.undo()
    points = [p for p in captured.metric_points(SELF_METRIC) if p.value]
    assert points, f"{SELF_METRIC} did not count the failure of {step}"
    named = {str((p.attributes or {}).get(SELF_METRIC_STEP)) for p in points}
    assert named - {"None", ""}, f"{SELF_METRIC_STEP} missing: {named}"


class _BrokenCounter:
    """A self-metric whose recording fails (the metrics SDK failing, or an internal value of the wrong type)."""

    def add(self, amount: int, attributes: Any = None) -> None:
        raise InternalFailure("the counter failed")


def test_a_failure_to_count_an_internal_failure_is_logged_with_its_step(
    captured: Captured, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_responses._patching import shared

    runtime = shared._runtime
    assert runtime is not None
    monkeypatch.setattr(runtime.telemetry.metrics, "internal_errors", _BrokenCounter())
    caplog.set_level(logging.DEBUG, logger="otel_responses")
    runner, action, _ = SESSIONS["sync"]
    expected = _baseline(captured, "sync")
    _patch(monkeypatch, "analysis.analyse")
    caplog.clear()
    seen = runner([session_transport], action)
    assert seen.outcome == expected.outcome
    told = [r.getMessage() for r in _own_failures(caplog) if "counting" in r.getMessage()]
    # the analysis runs when each of the session's three calls starts
    assert told == ["otel-responses: counting the failure of start_call failed too (InternalFailure)"] * 3
