"""The app sees the same with the instrumentation on as off, whatever is hostile: servers, Redis, the app's own
inputs and raising telemetry components, each case compared with the instrumentation off and on.

Every case runs the same app action twice through the real ``openai`` client over loopback HTTP (127.0.0.1, a
scripted deterministic server from ``tests/hostile.py``): once uninstrumented, once with
``ResponsesInstrumentor().instrument(...)`` on real OpenTelemetry SDK providers. ``compare()`` returns both
observations — the return value (``model_dump()``), the exception (type, message, status, body, cause), the
stream events, what the server received (method, path, body bytes, headers) and whether the OpenTelemetry
context was left as found — and ``assert_same()`` names the first field that differs. The on-run must also end
every span it started (counted by a span processor).

``tests/sameness/test_faults.py`` covers scripted faults through an in-process transport; this suite goes over real
sockets (connections cut, lengths that lie, slow peers), adds what the server received to the comparison, and
turns the hostility on Redis, on the app's own arguments and on the telemetry pipeline.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.metrics import NoOpMeter, NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler, SamplingResult

from otel_responses import ConfigError, ResponsesInstrumentor
from otel_responses._fingerprint import Fingerprinter, key_from_text
from otel_responses.ledger import LEDGER_METHODS, InMemoryLedger, Key
from otel_responses.ledger._codec import Codec, conversation_key, entry_key, location_key

from ..hostile import (
    FakeRedis,
    HeadersGetitemRaises,
    HeadersGetRaises,
    HeadersIterRaises,
    Hostile,
    LoopbackAPI,
    OneShotList,
    PrickleStr,
    RaisingDunders,
    RaisingGetattr,
    Received,
    Reply,
    Script,
    json_reply,
    sse_reply,
)
from ..ledger_scenarios import Item
from ..shared_ledger import RedisServer
from ..support import attrs, fuzz_settings
from .test_faults import describe, normal_events, response_body
from .test_faults import dump as _dump

MODEL = "gpt-4.1-mini"
KEY = "adversarial-fleet-key-0badf00d"
STRICT_ENV = "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_STRICT"

# -- a deterministic little API ----------------------------------------------------------------------------------


def _message(index: int, text: str) -> Item:
    return {
        "type": "message",
        "id": f"msg_{index}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def api_script(request: Received, index: int) -> Reply:
    """Responses with ids from the request's index (so two runs get the same), the request's model echoed, a
    JSON answer when a structured output is asked, an input-items page, SSE when ``stream`` is set."""
    if request.method == "GET" and request.path.split("?")[0].endswith("/input_items"):
        page: dict[str, Any] = {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}
        page["data"] = [{"type": "message", "id": "msg_in", "role": "user", "status": "completed", "content": []}]
        return json_reply(page)
    body = request.json() if request.body else {}
    if not isinstance(body, dict):
        body = {}
    model = body.get("model") if isinstance(body.get("model"), str) else MODEL
    structured = isinstance(body.get("text"), dict) and isinstance(body["text"].get("format"), dict)
    text = '{"answer": "42"}' if structured else "hello"
    response = response_body(f"resp_{index}", [_message(index, text)], model=model)
    conversation = body.get("conversation")
    if isinstance(conversation, str):
        response["conversation"] = {"id": conversation}
    if body.get("stream") is True:
        return sse_reply(normal_events(response))
    return json_reply(response)


def fixed(reply: Reply) -> Script:
    """The same answer to every request."""
    return lambda request, index: reply


# -- telemetry rigs ----------------------------------------------------------------------------------------------


class Tracker(SpanProcessor):
    """Counts spans started and ended (what the exporter sees only once ended)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[str] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.started.append(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span.name)


@dataclass
class Rig:
    """The providers given to ``instrument()``, and what they caught."""

    tracer_provider: Any
    meter_provider: Any
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader | None
    tracker: Tracker
    cleanup: Callable[[], None] | None = None  # after the instrumentation is off (stop a periodic reader)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def metric_points(self) -> list[tuple[str, Any]]:
        if self.reader is None:
            return []
        data = self.reader.get_metrics_data()
        found: list[tuple[str, Any]] = []
        for resource_metrics in data.resource_metrics if data is not None else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    found += [(metric.name, point) for point in metric.data.data_points]
        return found

    def signals(self) -> list[tuple[str, ...]]:
        return [tuple(attrs(s).get("openai_responses.signals", ())) for s in self.spans()]


def sdk_rig(
    *first: SpanProcessor,
    last: tuple[SpanProcessor, ...] = (),
    sampler: Sampler | None = None,
    meter_provider: Any = None,
) -> Rig:
    """Real SDK providers: ``first`` processors, the tracker, an in-memory exporter, then ``last`` processors."""
    exporter = InMemorySpanExporter()
    tracker = Tracker()
    tracer_provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    for processor in first:
        tracer_provider.add_span_processor(processor)
    tracer_provider.add_span_processor(tracker)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    for processor in last:
        tracer_provider.add_span_processor(processor)
    reader = None
    if meter_provider is None:
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader])
    return Rig(tracer_provider, meter_provider, exporter, reader, tracker)


# -- the harness -------------------------------------------------------------------------------------------------


def expect(condition: object, message: object) -> None:
    """An assertion whose failure is reported by its message alone: no traceback to render (pytest parses the
    test file again for each traceback entry, which CPython 3.11.7 can fail at with "AST constructor recursion
    depth mismatch" when a finalizer runs mid-parse, ending the whole session)."""
    if not condition:
        pytest.fail(str(message), pytrace=False)


def dump(value: Any) -> Any:
    """``test_faults.dump``, naming an object by its ``__class__`` (what ``isinstance`` sees: a transparent proxy of
    a ``Stream`` is a ``Stream`` to the app)."""
    found = _dump(value)
    if isinstance(found, tuple) and found[:1] == ("object",):
        return ("object", getattr(value, "__class__", type(value)).__name__)
    return found


@dataclass
class Observation:
    """What the app (and the server) saw in one run."""

    outcome: Any = None
    events: list[Any] = field(default_factory=list)
    received: list[tuple[Any, ...]] = field(default_factory=list)
    context_kept: bool = True


class App:
    """What an action gets: fresh clients for the loopback API, a place to put the events it sees."""

    def __init__(self, base_url: str, setup: Setup) -> None:
        self.base_url = base_url
        self.setup = setup
        self.events: list[Any] = []
        self.context_kept = True
        self._clients: list[openai.OpenAI] = []

    def client(self, **kwargs: Any) -> openai.OpenAI:
        options = {"timeout": self.setup.timeout, "max_retries": self.setup.max_retries, **kwargs}
        http = openai.DefaultHttpxClient(verify=False)  # loopback HTTP: no CA bundle to load (20 ms each)
        made = openai.OpenAI(base_url=self.base_url, api_key="adversarial-key", http_client=http, **options)
        self._clients.append(made)
        return made

    def arun(self, action: Callable[[openai.AsyncOpenAI], Any]) -> Any:
        """Run ``await action(async_client)`` on a fresh loop; the context is checked inside the task."""

        async def main() -> Any:
            client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key="adversarial-key",
                timeout=self.setup.timeout,
                max_retries=self.setup.max_retries,
                http_client=openai.DefaultAsyncHttpxClient(verify=False),
            )
            before = otel_context.get_current()
            try:
                return await action(client)
            finally:
                self.context_kept = self.context_kept and otel_context.get_current() == before
                await client.close()

        return asyncio.run(main())

    def close(self) -> None:
        for made in self._clients:
            made.close()


Action = Callable[[App], Any]


@dataclass
class Setup:
    script: Script = api_script
    settings: dict[str, Any] = field(default_factory=dict)  # instrument() keywords
    rig: Callable[[], Rig] = sdk_rig
    before_each: Callable[[], None] | None = None  # before both runs (restart a Redis, plant values)
    timeout: float = 5.0
    max_retries: int = 0


@dataclass
class Pair:
    off: Observation
    on: Observation
    rig: Rig
    off_seconds: float
    on_seconds: float


def _observe(api: LoopbackAPI, setup: Setup, action: Action) -> tuple[Observation, float]:
    api.reset()
    if setup.before_each is not None:
        setup.before_each()
    app = App(api.base_url, setup)
    seen = Observation()
    before = otel_context.get_current()
    started = time.perf_counter()
    try:
        seen.outcome = ("returned", dump(action(app)))
    except Exception as exc:
        seen.outcome = ("raised", describe(exc))
    finally:
        app.close()
    elapsed = time.perf_counter() - started
    seen.context_kept = app.context_kept and otel_context.get_current() == before
    if otel_context.get_current() != before:  # leave no leaked context to the next test
        otel_context.attach(before)
    seen.events = app.events
    seen.received = [(r.method, r.path, r.body, r.headers) for r in api.received]
    return seen, elapsed


@contextmanager
def instrumented(rig: Rig, **settings: Any) -> Iterator[None]:
    instrumentor = ResponsesInstrumentor()
    expect(not instrumentor.is_instrumented_by_opentelemetry, "the instrumentation was left on by another test")
    instrumentor.instrument(tracer_provider=rig.tracer_provider, meter_provider=rig.meter_provider, **settings)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        if rig.cleanup is not None:
            rig.cleanup()


def compare(action: Action, setup: Setup | None = None) -> Pair:
    """The action with the instrumentation off, then on (same server, reset between): both observations."""
    setup = setup or Setup()
    rig = setup.rig()
    with LoopbackAPI(setup.script) as api:
        off, off_seconds = _observe(api, setup, action)
        with instrumented(rig, **setup.settings):
            on, on_seconds = _observe(api, setup, action)
            if sorted(rig.tracker.started) != sorted(rig.tracker.ended):
                gc.collect()  # abandoned streams and paginators end their spans when collected
    return Pair(off, on, rig, off_seconds, on_seconds)


def _short(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit // 2] + f" ...({len(text)} chars)... " + text[-limit // 2 :]


def _first_difference(off: Any, on: Any, where: str = "") -> str:
    if type(off) is not type(on):
        return f"{where or 'value'}: off {_short(off)} / on {_short(on)}"
    if isinstance(off, (list, tuple)):
        if len(off) != len(on):
            return f"{where or 'value'}: {len(off)} elements off, {len(on)} on: off {_short(off)} / on {_short(on)}"
        for i, (a, b) in enumerate(zip(off, on, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{where}[{i}]")
    if isinstance(off, dict):
        for key in sorted(set(off) | set(on), key=str):
            if off.get(key, "<absent>") != on.get(key, "<absent>"):
                return _first_difference(off.get(key, "<absent>"), on.get(key, "<absent>"), f"{where}[{key!r}]")
    return f"{where or 'value'}: off {_short(off)} / on {_short(on)}"


def assert_same(pair: Pair, *, spans_ended: bool = True) -> None:
    """One assert per aspect the app (or the server) can see; the message says what differed."""
    off, on = pair.off, pair.on
    problems = []
    if off.received != on.received:
        problems.append("the server received something else: " + _first_difference(off.received, on.received))
    if off.outcome != on.outcome:
        problems.append(
            "the app got another outcome: "
            + _first_difference(off.outcome, on.outcome)
            + f" (off: {_short(off.outcome, 300)}; on: {_short(on.outcome, 300)})"
        )
    if off.events != on.events:
        problems.append("the app saw other events: " + _first_difference(off.events, on.events))
    if off.context_kept != on.context_kept:
        problems.append("the OpenTelemetry context was left changed (a span context stayed attached)")
    tracker = pair.rig.tracker
    if spans_ended and sorted(tracker.started) != sorted(tracker.ended):
        problems.append(f"spans started {tracker.started} but ended {tracker.ended}")
    expect(not problems, "instrumentation on differs from off:\n- " + "\n- ".join(problems))


# -- app actions -------------------------------------------------------------------------------------------------


class Answer(pydantic.BaseModel):
    answer: str


def act_create(app: App) -> Any:
    return app.client().responses.create(model=MODEL, input="hi")


def act_acreate(app: App) -> Any:
    async def run(client: openai.AsyncOpenAI) -> Any:
        return await client.responses.create(model=MODEL, input="hi")

    return app.arun(run)


def act_stream(app: App) -> Any:
    for event in app.client().responses.create(model=MODEL, input="hi", stream=True):
        app.events.append(dump(event))


def act_astream(app: App) -> Any:
    async def run(client: openai.AsyncOpenAI) -> Any:
        async for event in await client.responses.create(model=MODEL, input="hi", stream=True):
            app.events.append(dump(event))

    return app.arun(run)


def act_raw(app: App) -> Any:
    raw = app.client().responses.with_raw_response.create(model=MODEL, input="hi")
    app.events.append((raw.status_code, raw.headers.get("x-request-id")))
    return raw.parse()


def act_streaming_response(app: App) -> Any:
    with app.client().responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as response:
        app.events.append(response.status_code)
        app.events.extend(response.iter_lines())


def act_parse(app: App) -> Any:
    return app.client().responses.parse(model=MODEL, input="hi", text_format=Answer)


def act_helper(app: App) -> Any:
    with app.client().responses.stream(model=MODEL, input="hi") as stream:
        for event in stream:
            app.events.append(dump(event))
        return stream.get_final_response()


def act_items(app: App) -> Any:
    return [dump(item) for item in app.client().responses.input_items.list("resp_0")]


def act_aitems(app: App) -> Any:
    async def run(client: openai.AsyncOpenAI) -> Any:
        return [dump(item) async for item in client.responses.input_items.list("resp_0")]

    return app.arun(run)


MODES: dict[str, Action] = {
    "create": act_create,
    "acreate": act_acreate,
    "stream": act_stream,
    "astream": act_astream,
    "raw": act_raw,
    "streaming_response": act_streaming_response,
    "parse": act_parse,
    "helper": act_helper,
    "items": act_items,
    "aitems": act_aitems,
}


def test_the_harness_sees_a_difference() -> None:
    """The comparison fails when the on-run differs: a body changed, an exception, a context left attached."""
    calls = {"n": 0}

    def flaky(app: App) -> Any:
        calls["n"] += 1
        client = app.client()
        if calls["n"] == 2:  # the on-run
            otel_context.attach(otel_context.set_value("leak", 1))
            client.responses.create(model=MODEL, input="changed")
            raise Hostile("only on")
        return client.responses.create(model=MODEL, input="hi")

    pair = compare(flaky)
    with pytest.raises(pytest.fail.Exception) as failure:
        assert_same(pair)
    message = str(failure.value)
    expect("the server received something else" in message, '"the server received something else" in message')
    expect("another outcome" in message, '"another outcome" in message')
    expect("context was left changed" in message, '"context was left changed" in message')
    expect(otel_context.get_value("leak") is None, "the harness did not clean the leaked context up")


def test_the_api_is_deterministic() -> None:
    """The baseline: a healthy session is the same off and on, byte for byte on the wire, in every mode."""
    for name, action in MODES.items():
        pair = compare(action)
        assert_same(pair)
        expect(pair.off.outcome[0] == "returned", (name, pair.off.outcome))
        expect(pair.off.received, name)
        expect(pair.rig.spans(), f"{name}: the on-run made no span")


# -- 1. hostile servers ------------------------------------------------------------------------------------------

_BIG = 1 << 20


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def _wrong_types() -> dict[str, Any]:
    return {
        "id": ["resp"],
        "object": 7,
        "created_at": "yesterday",
        "model": {"name": MODEL},
        "status": 3.5,
        "output": [
            {"type": "message", "id": 1, "role": 2, "content": {"text": 3}, "phase": []},
            {"type": "reasoning", "id": None, "encrypted_content": ["x"], "summary": 5},
            {"type": "function_call", "call_id": {"a": 1}, "name": 9, "arguments": [1]},
            {"type": ["message"], "role": "assistant"},
            True,
        ],
        "usage": {"input_tokens": "11", "output_tokens": None, "input_tokens_details": "x", "total_tokens": []},
        "conversation": ["conv"],
        "service_tier": {"t": 1},
        "incomplete_details": [1],
        "error": "none",
        "tools": "all",
        "store": "yes",
        "instructions": 5,
        "previous_response_id": 6,
    }


def _gigantic() -> dict[str, Any]:
    items = [_message(i, "x") for i in range(3000)]
    items[0]["content"][0]["text"] = "t" * _BIG
    return response_body("resp_" + "i" * _BIG, items, model="m" * 1000, metadata={"k": "v" * 100_000})


def _events_garbage() -> list[Any]:
    start = normal_events()
    return [
        b": a comment\n\n",
        b"data: not json at all\n\n",
        start[0],
        b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": \n\n',
        b"\xff\xfe\x00 binary garbage\n\n",
        b"data: [1, 2, 3]\n\n",
        b"data: null\n\n",
        *start[1:],
    ]


def _misordered() -> list[Any]:
    events = normal_events()
    return [events[-1], *events[2:-1], events[1], events[0], events[-1]]


def _truncated_event() -> Reply:
    events = sse_reply(normal_events()[:3])
    expect(isinstance(events.body, list), "isinstance(events.body, list)")
    assert isinstance(events.body, list)
    events.body.append(b'event: response.completed\ndata: {"type": "response.completed", "response": {"id": "re')
    events.cut = True
    return events


def _odd_error(status: int, error: Any) -> Reply:
    return json_reply({"error": error}, status)


SERVERS: dict[str, Script] = {
    "not_json": fixed(Reply(200, b"<html>oops</html>", {"content-type": "application/json"})),
    "html_error_page": fixed(Reply(502, b"<html>bad gateway</html>", {"content-type": "text/html"})),
    "wrong_types_everywhere": fixed(json_reply(_wrong_types())),
    "gigantic_fields": fixed(json_reply(_gigantic())),
    "deep_nesting": fixed(json_reply(response_body(output=[{"type": "message", "content": _deep(400)}]))),
    "too_deep_for_json": fixed(
        Reply(
            200,
            b'{"id": "resp_deep", "output": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            {"content-type": "application/json"},
        )
    ),
    "length_lies": fixed(Reply(200, json.dumps(response_body()).encode()[:50], {}, length=5000)),
    "sse_garbage": fixed(sse_reply(_events_garbage())),
    "sse_misordered": fixed(sse_reply(_misordered())),
    "sse_truncated_event": fixed(_truncated_event()),
    "sse_closed_mid_stream": fixed(sse_reply(normal_events(), cut=True)),
    "sse_slow": fixed(sse_reply(normal_events(), chunk_delay=0.01)),
    "slow_past_timeout": fixed(Reply(200, b"{}", {"content-type": "application/json"}, delay=0.6)),
    "odd_status_418_numeric_code": fixed(_odd_error(418, {"message": ["a", "list"], "code": 12345, "type": None})),
    "odd_status_299": fixed(json_reply(response_body(), 299)),
    "odd_status_599_error_string": fixed(_odd_error(599, "just a string")),
    "odd_status_400_error_null": fixed(_odd_error(400, None)),
}


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic, in the SDK, on the wrong types
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("server", list(SERVERS))
def test_hostile_server(server: str, mode: str) -> None:
    pair = compare(MODES[mode], Setup(script=SERVERS[server], timeout=0.3))
    assert_same(pair)
    expect(pair.on.received, "no request reached the server")


def _echo_script(request: Received, index: int) -> Reply:
    """Echoes the request's 1 MB model name, and answers the second request with an odd error code."""
    body = request.json() or {}
    if index == 1:
        return json_reply({"error": {"message": body.get("model"), "type": "x", "code": body.get("model")}}, 422)
    return json_reply(response_body(f"resp_{index}", model=body.get("model")))


def test_a_server_echoing_a_1mb_model_name() -> None:
    model = "gpt-" + "4" * _BIG

    def action(app: App) -> Any:
        client = app.client()
        first = client.responses.create(model=model, input="hi")
        try:
            client.responses.create(model=model, input="again", previous_response_id=first.id)
        except openai.APIStatusError as exc:
            app.events.append(describe(exc))
        return first

    pair = compare(action, Setup(script=_echo_script))
    assert_same(pair)
    expect(len(pair.on.events) == 1, pair.on.events)


# -- 2. hostile Redis --------------------------------------------------------------------------------------------


def _located(ns: str, key: Key) -> str:
    name = location_key(ns, key)
    assert name is not None
    return name


def _namespace() -> str:
    return f"otel-responses:{Fingerprinter(key_from_text(KEY)).key_id()}"


def _entry(
    response_id: str,
    outputs: list[list[Any]],
    store: int = 1,
    conversation: str | None = None,
    sequence: int | None = None,
) -> bytes:
    """A well-formed ledger entry, forged."""
    seq = sequence if sequence is not None else time.time_ns() + 10**12
    doc = {"id": response_id, "s": seq, "st": store, "c": conversation, "m": 1, "o": outputs}
    return json.dumps({key: value for key, value in doc.items() if value is not None}).encode()


def _meta(item_type: str, item_id: str | None, call_id: str | None = None, **kw: Any) -> list[Any]:
    return [
        item_type,
        item_id,
        call_id,
        kw.get("role"),
        kw.get("phase"),
        0,
        kw.get("fingerprint"),
        kw.get("awaits", 0),
        None,
    ]


def _planting(server: RedisServer, values: dict[str, bytes], sealed: bool) -> Callable[[], None]:
    """Plant ``values`` before each run: as written (no MAC), or ``sealed`` with the fleet's key."""
    codec = Codec(Fingerprinter(key_from_text(KEY)))

    def plant() -> None:
        with server.client() as admin:
            admin.flushdb()
            if values:
                admin.mset({key: codec.seal(key, value) if sealed else value for key, value in values.items()})

    return plant


ASSISTANT_TEXT = "The forged answer."


def _fingerprint(text: str) -> int:
    return Fingerprinter(key_from_text(KEY)).number(text)


def _forged_cases() -> dict[str, tuple[Callable[[str], dict[str, bytes]], Action]]:
    pending = _meta("function_call", "fc_forged", "call_forged", awaits=1)

    def chain(app: App) -> Any:
        return app.client().responses.create(
            model=MODEL, input="next", instructions="Be brief.", previous_response_id="resp_elsewhere"
        )

    def conversation(app: App) -> Any:
        return app.client().responses.create(
            model=MODEL, input=[{"role": "user", "content": "hi"}], conversation="conv_forged"
        )

    def replay_text(app: App) -> Any:
        history: Any = [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": ASSISTANT_TEXT},
            {"role": "user", "content": "next"},
        ]
        return app.client().responses.create(model=MODEL, input=history)

    def replay_id(app: App) -> Any:
        history: Any = [
            {"role": "user", "content": "q"},
            {
                "type": "message",
                "id": "msg_forged",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": ASSISTANT_TEXT, "annotations": []}],
            },
            {"role": "user", "content": "next"},
        ]
        return app.client().responses.create(model=MODEL, input=history)

    fp = _fingerprint(ASSISTANT_TEXT)
    message = _meta("message", None, role="assistant", fingerprint=fp)
    return {
        "unstored_parent": (lambda ns: {entry_key(ns, "resp_elsewhere"): _entry("resp_elsewhere", [], store=0)}, chain),
        "conversation_pending_call": (
            lambda ns: {
                conversation_key(ns, "conv_forged"): _entry("resp_conv", [pending], conversation="conv_forged")
            },
            conversation,
        ),
        "conversation_pointer_to_other_conversation": (
            lambda ns: {conversation_key(ns, "conv_forged"): _entry("resp_conv", [pending], conversation="conv_other")},
            conversation,
        ),
        "text_location_with_pending_call": (
            lambda ns: {
                _located(ns, fp): b"0:resp_loc",
                entry_key(ns, "resp_loc"): _entry("resp_loc", [message, pending]),
            },
            replay_text,
        ),
        "text_location_at_wrong_fingerprint": (
            lambda ns: {
                _located(ns, fp): b"0:resp_loc",
                entry_key(ns, "resp_loc"): _entry(
                    "resp_loc", [_meta("message", None, role="assistant", fingerprint=fp ^ 1), pending]
                ),
            },
            replay_text,
        ),
        "id_location_with_pending_call": (
            lambda ns: {
                _located(ns, "msg_forged"): b"0:resp_loc",
                entry_key(ns, "resp_loc"): _entry(
                    "resp_loc", [_meta("message", "msg_forged", role="assistant"), pending]
                ),
            },
            replay_id,
        ),
        "location_past_the_outputs": (
            lambda ns: {
                _located(ns, "msg_forged"): b"31:resp_loc",
                entry_key(ns, "resp_loc"): _entry("resp_loc", [pending]),
            },
            replay_id,
        ),
    }


FORGED = _forged_cases()


# What a forged value read as a fact raises (recorded, marked as resting on the shared ledger, never refused).
# (A forged pending call in a conversation, read, is dropped when the API accepts the request: a conversation's latest
# turn may be stale.)
RAISED_WHEN_READ: dict[str, tuple[str, ...]] = {"unstored_parent": ("unstored_parent",)}
# A forged location pointing a replayed message at a response with a pending call, read as a fact, makes the replay
# look incomplete: whether a value nobody vouches for should raise that is not settled, so what it raises is not
# pinned here (every other case's signals are, exactly).
UNPINNED_WHEN_READ = frozenset({"text_location_with_pending_call", "id_location_with_pending_call"})


@pytest.mark.parametrize("sealed", [False, True], ids=["not_sealed", "sealed_with_the_fleet_key"])
@pytest.mark.parametrize("case", list(FORGED))
def test_forged_redis_values_never_refuse_a_request(
    redis_server: RedisServer, case: str, sealed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strict mode refuses only on what this process can vouch for: Redis values anyone could have written
    (another app sharing the Redis, an attacker, a buggy writer holding the key) must not stop a request the API
    accepts. Planted without a MAC, they are ignored; sealed with the fleet's key, they are read as facts, and even
    then never a refusal."""
    values, action = FORGED[case]
    monkeypatch.setenv("OTEL_INSTRUMENTATION_OPENAI_RESPONSES_LEDGER_TIMEOUT", "1.0")  # a loaded machine's reads
    settings = {"strict": True, "ledger_url": redis_server.url(), "hash_key": KEY}
    setup = Setup(settings=settings, before_each=_planting(redis_server, values(_namespace()), sealed))
    pair = compare(action, setup)
    expect(pair.off.outcome[0] == "returned", pair.off.outcome)
    assert_same(pair)
    raised = pair.rig.signals()
    if sealed and case in UNPINNED_WHEN_READ:
        return
    expected = [RAISED_WHEN_READ.get(case, ()) if sealed else ()]
    expect(raised == expected, (case, sealed, raised))


def _session(app: App) -> Any:
    """Turns that ask the ledger: a chain, a replay, a conversation."""
    client = app.client()
    first = client.responses.create(model=MODEL, input="hi", instructions="Be brief.")
    second = client.responses.create(model=MODEL, input="next", previous_response_id=first.id)
    replay: Any = [{"role": "user", "content": "hi"}, *[item.model_dump() for item in second.output]]
    third = client.responses.create(model=MODEL, input=[*replay, {"role": "user", "content": "more"}])
    fourth = client.responses.create(model=MODEL, input="in a conversation", conversation="conv_1")
    return [first, second, third, fourth]


@pytest.mark.parametrize("mode", [*sorted(m for m in ("garbage", "error", "wrong_type", "wrong_count")), "close"])
def test_a_fake_redis_speaking_garbage(mode: str) -> None:
    with FakeRedis(mode) as fake:
        setup = Setup(settings={"ledger_url": fake.url, "hash_key": KEY})
        pair = compare(_session, setup)
        expect(fake.connections > 0, "the ledger never connected to the fake Redis")
    assert_same(pair)
    expect(pair.on_seconds < pair.off_seconds + 1.0, (pair.off_seconds, pair.on_seconds))


@pytest.mark.parametrize("mode", ["hang", "huge_bulk", "negative_length", "forged_entry"])
def test_a_fake_redis_that_hangs_or_lies_about_lengths(mode: str) -> None:
    with FakeRedis(mode) as fake:
        setup = Setup(settings={"ledger_url": fake.url, "hash_key": KEY})
        pair = compare(_session, setup)
        expect(fake.chunks > 0, "the ledger never asked the fake Redis")
    assert_same(pair)
    # four turns; reads wait out the 50 ms timeout at most once per backoff
    expect(pair.on_seconds < pair.off_seconds + 1.0, (pair.off_seconds, pair.on_seconds))


def test_redis_killed_mid_run(tmp_path: Path) -> None:
    server: Any = RedisServer(tmp_path)

    def restart() -> None:
        if server.process is None or server.process.poll() is not None:
            server.process = None
            server.start()

    def action(app: App) -> Any:
        client = app.client()
        first = client.responses.create(model=MODEL, input="hi", instructions="Be brief.")
        time.sleep(0.05)  # the writer sends the entry
        expect(server.process is not None, "server.process is not None")
        server.process.kill()  # SIGKILL: no goodbye on the open connections
        server.process.wait(5)
        second = client.responses.create(model=MODEL, input="next", previous_response_id=first.id)
        third = client.responses.create(model=MODEL, input="more", previous_response_id=second.id)
        return [first, second, third]

    setup = Setup(
        settings={"ledger_url": server.url(), "hash_key": KEY},
        before_each=restart,
    )
    try:
        pair = compare(action, setup)
    finally:
        server.stop()
    assert_same(pair)
    expect(pair.on_seconds < pair.off_seconds + 1.0, (pair.off_seconds, pair.on_seconds))


# -- 3. hostile inputs -------------------------------------------------------------------------------------------


def _create(**kwargs: Any) -> Action:
    def action(app: App) -> Any:
        return app.client().responses.create(**{"model": MODEL, "input": "hi", **kwargs})

    return action


def _acreate(**kwargs: Any) -> Action:
    def action(app: App) -> Any:
        async def run(client: openai.AsyncOpenAI) -> Any:
            return await client.responses.create(**{"model": MODEL, "input": "hi", **kwargs})

        return app.arun(run)

    return action


def _recursive_list() -> list[Any]:
    items: list[Any] = [{"role": "user", "content": "hi"}]
    items.append(items)
    return items


def _recursive_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"a": "b"}
    value["self"] = value
    return value


def _items() -> list[Item]:
    return [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "more"},
    ]


class _Fields:
    """An item given as an object with attributes, not a mapping."""

    def __init__(self) -> None:
        self.role = "user"
        self.content = "hi"


HOSTILE_INPUTS: dict[str, Action] = {
    "headers_get_raises": _create(extra_headers=HeadersGetRaises({"x-app": "1"})),
    "headers_get_raises_async": _acreate(extra_headers=HeadersGetRaises({"x-app": "1"})),
    "headers_get_raises_stream": lambda app: [
        dump(e) for e in _create(extra_headers=HeadersGetRaises({"x-app": "1"}), stream=True)(app)
    ],
    "headers_getitem_raises": _create(extra_headers=HeadersGetitemRaises({"x-app": "1"})),
    "headers_iter_raises": _create(extra_headers=HeadersIterRaises({"x-app": "1"})),
    "one_shot_list_input": lambda app: _create(input=OneShotList(_items()))(app),
    "one_shot_list_input_async": lambda app: _acreate(input=OneShotList(_items()))(app),
    "one_shot_list_include": lambda app: _create(include=OneShotList(["reasoning.encrypted_content"]))(app),
    "one_shot_list_tools": lambda app: _create(tools=OneShotList([{"type": "web_search"}]))(app),
    "tuple_input": _create(input=tuple(_items())),
    "generator_input": lambda app: _create(input=(item for item in _items()))(app),
    "mappingproxy_item": lambda app: _create(input=[__import__("types").MappingProxyType(_items()[0])])(app),
    "object_item": lambda app: _create(input=[_Fields()])(app),
    "raising_getattr_item": lambda app: _create(input=[RaisingGetattr()])(app),
    "raising_dunders_item": lambda app: _create(input=[RaisingDunders(role="user", content="hi")])(app),
    "prickly_str_content": _create(input=[{"role": "user", "content": PrickleStr("hi")}]),
    "prickly_str_input": _create(input=PrickleStr("hi")),
    "prickly_str_model": _create(model=PrickleStr(MODEL)),
    "prickly_str_instructions": _create(instructions=PrickleStr("Be brief.")),
    "prickly_str_previous_response_id": _create(previous_response_id=PrickleStr("resp_x")),
    "prickly_str_conversation": _create(conversation=PrickleStr("conv_x")),
    "prickly_str_item_type": _create(input=[{"type": PrickleStr("message"), "role": "user", "content": "hi"}]),
    "recursive_input": lambda app: _create(input=_recursive_list())(app),
    "recursive_metadata": lambda app: _create(metadata=_recursive_dict())(app),
    "huge_int_content": _create(input=[{"role": "user", "content": 10**5000}]),
    "huge_int_metadata": _create(metadata={"n": 2**70}),
    "nan_temperature": _create(temperature=math.nan),
    "inf_in_item": _create(input=[{"role": "user", "content": "hi", "weight": math.inf}]),
    "metadata_raising_mapping": _create(metadata=HeadersIterRaises({"a": "b"})),
    "tools_raising_item": _create(tools=[RaisingGetattr()]),
    "tools_with_prickly_names": _create(tools=[{"type": "function", "name": PrickleStr("f"), "parameters": {}}]),
    "store_not_bool": _create(store="false", previous_response_id="resp_x"),
    "stream_not_bool": _create(stream="yes"),
    "include_not_a_list": _create(include="reasoning.encrypted_content"),
    "unknown_kwarg_create": _create(not_a_parameter=1),
    "unknown_kwarg_create_async": _acreate(not_a_parameter=1),
    "positional_args_create": lambda app: app.client().responses.create(MODEL),  # type: ignore[call-overload]
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", list(HOSTILE_INPUTS))
def test_hostile_input(case: str) -> None:
    assert_same(compare(HOSTILE_INPUTS[case]))


def test_extra_headers_whose_get_raises_are_still_sent_once() -> None:
    """Without the instrumentation the SDK sends such headers; with it, the same request, the same answer."""
    pair = compare(_create(extra_headers=HeadersGetRaises({"x-app": "1"})))
    expect(pair.off.outcome[0] == "returned", pair.off.outcome)
    assert_same(pair)


def test_a_one_shot_input_is_sent_whole() -> None:
    pair = compare(lambda app: _create(input=OneShotList(_items()))(app))
    sent = [json.loads(r[2]).get("input") for r in pair.on.received]
    expect(sent == [_items()], f"the server got input {sent}, the app passed {_items()}")
    assert_same(pair)


def _paginator_bad_kwarg(app: App) -> Any:
    async def run(client: openai.AsyncOpenAI) -> Any:
        return [item async for item in client.responses.input_items.list("resp_1", not_a_parameter=1)]  # type: ignore[call-arg]

    return app.arun(run)


def _paginator_bad_type(app: App) -> Any:
    async def run(client: openai.AsyncOpenAI) -> Any:
        return await client.responses.input_items.list()  # type: ignore[call-arg]

    return app.arun(run)


@pytest.mark.parametrize(
    "action",
    [
        _paginator_bad_kwarg,
        _paginator_bad_type,
        lambda app: list(app.client().responses.input_items.list("resp_1", not_a_parameter=1)),
        lambda app: app.client().conversations.items.list("conv_1", not_a_parameter=1),
    ],
    ids=["async_list_unknown_kwarg", "async_list_missing_arg", "sync_list_unknown_kwarg", "conversation_items"],
)
def test_rejected_arguments_on_the_paginator(action: Action) -> None:
    """The SDK rejects the call before any request: the span context must not stay attached, the span must end."""
    pair = compare(action)
    expect(pair.off.outcome[0] == "raised" and pair.off.outcome[1][0] == "TypeError", pair.off.outcome)
    assert_same(pair)
    expect(pair.on.context_kept, "the span's context stayed attached after the SDK rejected the arguments")


# hypothesis: odd JSON-ish values in the places the instrumentation reads
_odd = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
    | st.sampled_from(["message", "function_call", "function_call_output", "reasoning", "assistant", "user"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)
_item = st.fixed_dictionaries(
    {},
    optional={
        "type": _odd,
        "role": _odd,
        "id": _odd,
        "call_id": _odd,
        "content": _odd,
        "encrypted_content": _odd,
        "phase": _odd,
    },
)


@fuzz_settings(25)
@given(
    items=st.lists(_item | _odd, max_size=4),
    metadata=_odd,
    previous=st.none() | st.text(max_size=5),
    conversation=st.none() | st.text(max_size=5) | _odd,
)
def test_arbitrary_request_values(items: list[Any], metadata: Any, previous: Any, conversation: Any) -> None:
    kwargs: dict[str, Any] = {"input": items, "metadata": metadata}
    if previous is not None:
        kwargs["previous_response_id"] = previous
    if conversation is not None:
        kwargs["conversation"] = conversation
    assert_same(compare(_create(**kwargs)))


# -- 4. raising telemetry components -----------------------------------------------------------------------------


class Boom(RuntimeError):
    pass


class RaisingProcessor(SpanProcessor):
    def __init__(self, on_start: bool = False, on_end: bool = False) -> None:
        self.raise_on_start = on_start
        self.raise_on_end = on_end

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        if self.raise_on_start:
            raise Boom("span processor on_start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.raise_on_end:
            raise Boom("span processor on_end")


class RaisingSampler(Sampler):
    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        raise Boom("sampler")

    def get_description(self) -> str:
        return "RaisingSampler"


class RaisingExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        raise Boom("span exporter")


class RaisingMetricExporter(MetricExporter):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.raising = True

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.calls += 1
        if self.raising:
            raise Boom("metric exporter")
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


class _RaisingInstrument:
    def __getattr__(self, name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise Boom(f"instrument.{name}")

        return refuse


class RaisingMeter(NoOpMeter):
    """Instruments whose add/record raise (a broken SDK or a vendor's meter)."""

    def create_counter(self, *args: Any, **kwargs: Any) -> Any:
        return _RaisingInstrument()

    def create_histogram(self, *args: Any, **kwargs: Any) -> Any:
        return _RaisingInstrument()

    def create_up_down_counter(self, *args: Any, **kwargs: Any) -> Any:
        return _RaisingInstrument()


class RaisingMeterProvider(NoOpMeterProvider):
    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return RaisingMeter(name)


class _RaisingSpan(trace.NonRecordingSpan):
    def set_attribute(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("span.set_attribute")

    def set_attributes(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("span.set_attributes")

    def add_event(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("span.add_event")

    def set_status(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("span.set_status")

    def end(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("span.end")


class _RaisingSpanTracer(trace.NoOpTracer):
    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return _RaisingSpan(trace.INVALID_SPAN_CONTEXT)


class RaisingSpanTracerProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _RaisingSpanTracer()


def _with_metric_exporter() -> Rig:
    rig = sdk_rig()
    exporter = RaisingMetricExporter()
    reader = InMemoryMetricReader()
    periodic = PeriodicExportingMetricReader(exporter, export_interval_millis=50)
    rig.meter_provider = provider = MeterProvider(metric_readers=[reader, periodic])
    rig.reader = reader

    def stop() -> None:  # its last export at shutdown would raise in the SDK's own thread
        exporter.raising = False
        provider.shutdown()

    rig.cleanup = stop
    return rig


def _api_rig(tracer_provider: Any) -> Callable[[], Rig]:
    def make() -> Rig:
        rig = sdk_rig()
        rig.tracer_provider = tracer_provider
        return rig

    return make


COMPONENTS: dict[str, Callable[[], Rig]] = {
    "processor_on_start_raises": lambda: sdk_rig(RaisingProcessor(on_start=True)),
    "processor_on_end_raises": lambda: sdk_rig(last=(RaisingProcessor(on_end=True),)),
    "sampler_raises": lambda: sdk_rig(sampler=RaisingSampler()),
    "span_exporter_raises": lambda: sdk_rig(SimpleSpanProcessor(RaisingExporter())),
    "metric_exporter_raises": _with_metric_exporter,
    "metric_instruments_raise": lambda: sdk_rig(meter_provider=RaisingMeterProvider()),
    "span_methods_raise": _api_rig(RaisingSpanTracerProvider()),
}


def _everything(app: App) -> Any:
    """Plain, streamed, raw, parsed, async, an API error, items: each method shape once."""
    client = app.client()
    first = client.responses.create(model=MODEL, input="hi", instructions="Be brief.")
    client.responses.create(model=MODEL, input="next", previous_response_id=first.id)
    app.events += [dump(e) for e in client.responses.create(model=MODEL, input="s", stream=True)]
    app.events.append(dump(client.responses.with_raw_response.create(model=MODEL, input="r").parse()))
    app.events.append(dump(client.responses.parse(model=MODEL, input="p", text_format=Answer)))
    app.events.append(act_helper(app))
    app.events.append(act_items(app))
    app.events.append(act_aitems(app))
    app.events.append(act_acreate(app))
    try:
        client.responses.create(model="bad", input="hi")
    except openai.APIStatusError as exc:
        app.events.append(describe(exc))
    return first


def _everything_script(request: Received, index: int) -> Reply:
    body = request.json() if request.method == "POST" and request.body else {}
    if isinstance(body, dict) and body.get("model") == "bad":
        return json_reply({"error": {"message": "bad", "type": "invalid_request_error", "code": "x"}}, 400)
    return api_script(request, index)


@pytest.mark.parametrize("component", list(COMPONENTS))
def test_raising_telemetry_component(component: str) -> None:
    pair = compare(_everything, Setup(script=_everything_script, rig=COMPONENTS[component]))
    # a span whose start raised inside the SDK never existed for the tracker: only the app's side is compared
    assert_same(pair, spans_ended=component != "processor_on_start_raises")
    expect(pair.off.outcome[0] == "returned", pair.off.outcome)
    if component == "metric_instruments_raise":  # metrics broken: spans must still be recorded and ended
        expect(len(pair.rig.spans()) >= 10, [s.name for s in pair.rig.spans()])


def test_the_in_flight_record_is_released_after_a_span_start_failure() -> None:
    """A span that could not start must not leave its call 'in flight': later turns continuing the same parent
    one after the other are not concurrent."""
    flaky = RaisingProcessor(on_start=True)

    def action(app: App) -> Any:
        client = app.client()
        flaky.raise_on_start = True
        client.responses.create(model=MODEL, input="again", previous_response_id="resp_elsewhere")
        flaky.raise_on_start = False
        return [
            client.responses.create(model=MODEL, input=f"retry {n}", previous_response_id="resp_elsewhere")
            for n in range(3)
        ]

    pair = compare(action, Setup(rig=lambda: sdk_rig(flaky)))
    assert_same(pair, spans_ended=False)
    signals = pair.rig.signals()
    expect(len(signals) == 3, signals)
    expect(
        signals == [(), (), ()],
        f"a signal raised on sequential calls to an unknown parent after a failed span start (concurrent_branch: "
        f"the in-flight record leaked): {signals}",
    )


def test_the_in_flight_record_is_released_after_a_sampler_failure() -> None:
    class Flaky(RaisingSampler):
        on = True

        def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
            if self.on:
                raise Boom("sampler")
            from opentelemetry.sdk.trace.sampling import ALWAYS_ON

            return ALWAYS_ON.should_sample(*args, **kwargs)

    sampler = Flaky()

    def action(app: App) -> Any:
        client = app.client()
        sampler.on = True
        client.responses.create(model=MODEL, input="again", previous_response_id="resp_elsewhere")
        sampler.on = False
        return [
            client.responses.create(model=MODEL, input=f"retry {n}", previous_response_id="resp_elsewhere")
            for n in range(3)
        ]

    pair = compare(action, Setup(rig=lambda: sdk_rig(sampler=sampler)))
    assert_same(pair)
    signals = pair.rig.signals()
    expect(len(signals) == 3, signals)
    expect(signals == [(), (), ()], f"a signal raised (concurrent_branch: the in-flight record leaked): {signals}")


def test_suppress_instrumentation_is_honoured() -> None:
    def action(app: App) -> Any:
        with suppress_instrumentation():
            return _everything(app)

    pair = compare(action, Setup(script=_everything_script))
    assert_same(pair)
    made = [s.name for s in pair.rig.spans()]
    expect(made == [], f"spans made under suppress_instrumentation(): {made}")
    points = [(name, getattr(p, "value", getattr(p, "count", None))) for name, p in pair.rig.metric_points()]
    recorded = [(name, v) for name, v in points if v]
    expect(recorded == [], f"metrics recorded under suppress_instrumentation(): {recorded}")


# -- 5. settings -------------------------------------------------------------------------------------------------


def instrument_error(**settings: Any) -> str | None:
    """``instrument(**settings)``: the ``ConfigError`` it raised (type and message), or None."""
    instrumentor = ResponsesInstrumentor()
    rig = sdk_rig()
    try:
        instrumentor.instrument(tracer_provider=rig.tracer_provider, meter_provider=rig.meter_provider, **settings)
    except ConfigError as exc:
        return f"ConfigError: {exc}"
    finally:
        instrumentor.uninstrument()
    return None


@pytest.mark.parametrize(
    "value", ["maybe", "tru", "1", "true", 1, 0], ids=["maybe", "tru", "str_1", "str_true", "int_1", "int_0"]
)
def test_strict_keyword_must_be_a_bool(value: Any) -> None:
    error = instrument_error(strict=value)
    expect(error is not None and "strict" in error, f"instrument(strict={value!r}) raised {error or 'nothing'}")


def _conflict(app: App) -> Any:
    """A request strict mode refuses (state_mode_conflict) — when strict is on."""
    return app.client().responses.create(model=MODEL, input="hi", previous_response_id="resp_a", conversation="conv_a")


@pytest.mark.parametrize(
    ("value", "strict", "warns"),
    [
        ("maybe", False, True),
        ("tru", False, True),
        ("1", False, True),
        ("yes", False, True),
        ("on", False, True),
        ("TRUE", True, False),
        (" true ", True, False),
        ("True", True, False),
        ("false", False, False),
        ("FALSE", False, False),
        ("", False, False),
    ],
)
def test_strict_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, value: str, strict: bool, warns: bool
) -> None:
    """The OpenTelemetry rule for boolean variables: only a case-insensitive ``true`` is true; any other
    non-empty value but ``false`` is false, with a warning naming the variable."""
    monkeypatch.setenv(STRICT_ENV, value)
    caplog.set_level(logging.WARNING)
    pair = compare(_conflict)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and STRICT_ENV in r.getMessage()]
    refused = pair.on.outcome[0] == "raised" and pair.on.outcome[1][0] == "ContextLossError"
    expect(refused == strict, f"{STRICT_ENV}={value!r} made strict mode {'on' if refused else 'off'}")
    expect(bool(warnings) == warns, f"{STRICT_ENV}={value!r}: warnings naming the variable: {warnings}")
    if not strict:
        assert_same(pair)


class _PartialLedger:
    """Delegates to an InMemoryLedger, but lacks one method."""

    def __init__(self, missing: str) -> None:
        inner = InMemoryLedger()
        for name in LEDGER_METHODS:
            if name != missing:
                setattr(self, name, getattr(inner, name))


@pytest.mark.parametrize("missing", LEDGER_METHODS)
def test_a_ledger_missing_a_method_is_a_config_error(missing: str) -> None:
    error = instrument_error(ledger=_PartialLedger(missing))
    expect(
        error is not None and "ledger" in error.lower(),
        f"instrument() with a ledger lacking {missing}() raised {error or 'nothing'}",
    )


def test_a_complete_custom_ledger_is_accepted() -> None:
    """The control of the test above: all nine methods, no error, and the app sees the same."""
    pair = compare(_session, Setup(settings={"ledger": _PartialLedger("")}))
    assert_same(pair)
    expect(len(pair.rig.spans()) == 4, "len(pair.rig.spans()) == 4")
