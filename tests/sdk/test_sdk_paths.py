"""Every SDK helper path makes exactly one span: `with_streaming_response` / `with_raw_response` with `stream=True`
however the app reads the body (parsed into a stream, iterated as bytes, text or lines, read whole, closed unread,
abandoned), sync and async, with what a plain stream records; and a response the SDK fails to parse
(`responses.parse(text_format=...)`) is still recorded and remembered.

Everything here is real: the `openai` client over loopback HTTP to the emulator, spans and metrics from the
OpenTelemetry SDK's in-memory exporters.
"""

from __future__ import annotations

import asyncio
import gc
import http.server
import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pydantic
import pytest
from opentelemetry.trace import StatusCode

from otel_responses import ResponsesInstrumentor
from otel_responses.emulator import Emulator, EmulatorConfig

from ..conftest import Captured
from ..servers import QuietHTTPServer

MODEL = "gpt-4.1-mini"
REASONER = "o4-mini"
# A single request with usage, reasoning and a signal of its own (`reasoning_not_replayable`).
REQUEST: dict[str, Any] = {
    "model": REASONER,
    "input": "Remember this: the marker is SDK-1.",
    "instructions": "Answer briefly.",
    "store": False,
}
# What two identical requests may not share.
VOLATILE = frozenset(
    {
        "gen_ai.response.id",
        "openai_responses.request_id",
        "openai_responses.lineage.id",
        "gen_ai.response.time_to_first_chunk",
    }
)
RESPONSE_ID = re.compile(r"resp_[0-9a-f]{32}")


@pytest.fixture
def client(emulator: Emulator) -> Iterator[openai.OpenAI]:
    """A client per test: `with_raw_response` / `with_streaming_response` keep the methods they first saw, so a
    client shared across tests would keep an earlier test's (switched off) instrumentation."""
    fresh = emulator.client()
    try:
        yield fresh
    finally:
        fresh.close()


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def stable(span: Any) -> dict[str, Any]:
    return {k: v for k, v in attrs(span).items() if k not in VOLATILE}


def first_response_id(view: Any) -> str:
    """The response id in what the app read (every event carries it, `response.created` first)."""
    found = RESPONSE_ID.search(view if isinstance(view, str) else repr(view))
    assert found is not None, "no response id in what the app read"
    return found.group(0)


def dump(event: Any) -> Any:
    return event.model_dump(warnings=False) if hasattr(event, "model_dump") else event


def as_text(chunks: list[Any]) -> str:
    return "".join(c.decode() if isinstance(c, bytes) else c for c in chunks)


# -- how an app reads a raw streamed body ------------------------------------------------------------------
# Each reader returns what the app got, as plain data; the types of the chunks are checked on the way.

Reader = Callable[[Any], Any]


def _chunks(iterator: Iterator[Any], kind: type) -> list[Any]:
    chunks = list(iterator)
    assert chunks
    assert all(type(c) is kind for c in chunks)
    return chunks


SYNC_READERS: dict[str, Reader] = {
    "parse": lambda raw: [dump(e) for e in raw.parse()],
    "parse_to": lambda raw: list(raw.parse(to=openai.Stream[dict[str, Any]])),
    "iter_bytes": lambda raw: as_text(_chunks(raw.iter_bytes(), bytes)),
    "iter_text": lambda raw: as_text(_chunks(raw.iter_text(7), str)),
    "iter_lines": lambda raw: _chunks(raw.iter_lines(), str),
    "read": lambda raw: raw.read().decode(),
    "text": lambda raw: raw.text(),
}
# `with_raw_response` gives a LegacyAPIResponse: `parse()` is its only way to the events.
LEGACY_READERS = ("parse", "parse_to")
SYNC_PATHS = [("streaming", how) for how in SYNC_READERS] + [("raw", how) for how in LEGACY_READERS]


async def _achunks(iterator: Any, kind: type) -> list[Any]:
    chunks = [c async for c in iterator]
    assert chunks
    assert all(type(c) is kind for c in chunks)
    return chunks


async def _aread(raw: Any, how: str) -> Any:
    """The async twins of SYNC_READERS (a LegacyAPIResponse parses synchronously into an AsyncStream)."""
    legacy = not hasattr(raw, "iter_bytes")
    if how == "parse":
        stream = raw.parse() if legacy else await raw.parse()
        return [dump(e) async for e in stream]
    if how == "parse_to":
        to = openai.AsyncStream[dict[str, Any]]
        stream = raw.parse(to=to) if legacy else await raw.parse(to=to)
        return [e async for e in stream]
    if how == "iter_bytes":
        return as_text(await _achunks(raw.iter_bytes(), bytes))
    if how == "iter_text":
        return as_text(await _achunks(raw.iter_text(7), str))
    if how == "iter_lines":
        return await _achunks(raw.iter_lines(), str)
    if how == "read":
        return (await raw.read()).decode()
    return await raw.text()


def read_sync(client: openai.OpenAI, via: str, how: str, **kwargs: Any) -> Any:
    """One streamed call through `with_streaming_response` or `with_raw_response`, read the way ``how`` says."""
    if via == "streaming":
        with client.responses.with_streaming_response.create(**kwargs, stream=True) as raw:
            return SYNC_READERS[how](raw)
    return SYNC_READERS[how](client.responses.with_raw_response.create(**kwargs, stream=True))


async def read_async(client: openai.AsyncOpenAI, via: str, how: str, **kwargs: Any) -> Any:
    if via == "streaming":
        async with client.responses.with_streaming_response.create(**kwargs, stream=True) as raw:
            return await _aread(raw, how)
    return await _aread(await client.responses.with_raw_response.create(**kwargs, stream=True), how)


def run_async(emulator: Emulator, via: str, how: str, **kwargs: Any) -> Any:
    async def main() -> Any:
        client = emulator.async_client()
        try:
            return await read_async(client, via, how, **kwargs)
        finally:
            await client.close()

    return asyncio.run(main())


def plain_stream_span(client: openai.OpenAI, captured: Captured, **kwargs: Any) -> Any:
    """The span a plain `create(stream=True)` of the same request makes: the reference."""
    captured.clear()
    events = list(client.responses.create(**kwargs, stream=True))
    assert events[-1].type == "response.completed"
    reference = captured.only_span()
    captured.clear()
    return reference


def assert_like_plain(span: Any, reference: Any, response_id: str) -> None:
    """One span with what the plain stream of the same request records; its own response id."""
    assert span.end_time is not None
    assert attrs(span)["gen_ai.response.id"] == response_id
    assert attrs(span)["openai_responses.request_id"].startswith("req_")
    assert attrs(span)["gen_ai.response.time_to_first_chunk"] > 0
    assert stable(span) == stable(reference)
    assert span.status.status_code is reference.status.status_code
    assert [e.name for e in span.events] == [e.name for e in reference.events]


# -- one span, as a plain stream records it --------------------------------------------------------------


@pytest.mark.parametrize(("via", "how"), SYNC_PATHS)
def test_sync_path_makes_one_span_like_a_plain_stream(
    client: openai.OpenAI, captured: Captured, via: str, how: str
) -> None:
    reference = plain_stream_span(client, captured, **REQUEST)
    assert attrs(reference)["openai_responses.signals"] == ("reasoning_not_replayable",)
    assert attrs(reference)["openai_responses.output.item_types"] == ("reasoning", "message")

    view = read_sync(client, via, how, **REQUEST)
    response_id = first_response_id(view)
    assert_like_plain(captured.only_span(), reference, response_id)

    # The ledger learned it: continuing the unstored response is flagged, as after a plain call (and the turn
    # leaves out the instructions the response had).
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=REASONER, previous_response_id=response_id, input="Marker?")
    assert attrs(captured.spans()[-1])["openai_responses.signals"] == ("unstored_parent", "instructions_dropped")


@pytest.mark.parametrize(("via", "how"), SYNC_PATHS)
def test_async_path_makes_one_span_like_a_plain_stream(
    emulator: Emulator, client: openai.OpenAI, captured: Captured, via: str, how: str
) -> None:
    reference = plain_stream_span(client, captured, **REQUEST)
    view = run_async(emulator, via, how, **REQUEST)
    assert_like_plain(captured.only_span(), reference, first_response_id(view))


def test_retrieve_stream_through_with_streaming_response(client: openai.OpenAI, captured: Captured) -> None:
    created = client.responses.create(model=MODEL, input="Remember this: the marker is SDK-2.")
    captured.clear()
    with client.responses.with_streaming_response.retrieve(created.id, stream=True) as raw:
        lines = list(raw.iter_lines())
    assert any('"type":"response.completed"' in line for line in lines)
    span = captured.only_span()
    assert span.name == "fetch_response"
    assert attrs(span)["gen_ai.response.id"] == created.id
    assert attrs(span)["openai_responses.output.item_types"] == ("message",)
    assert "openai_responses.stream.ended" not in attrs(span)


def test_beta_responses_streaming_response(client: openai.OpenAI, captured: Captured) -> None:
    beta = getattr(client.beta, "responses", None)
    if beta is None:
        pytest.skip("this openai has no client.beta.responses (added in 2.45)")
    with beta.with_streaming_response.create(
        model=MODEL, input="Remember this: the marker is SDK-3.", stream=True
    ) as raw:
        events = list(raw.parse())
    span = captured.only_span()
    assert attrs(span)["gen_ai.response.id"] == events[-1].response.id
    assert attrs(span)["gen_ai.usage.output_tokens"] == events[-1].response.usage.output_tokens


def test_parse_returns_the_same_stream_each_time(client: openai.OpenAI, captured: Captured) -> None:
    with client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as raw:
        assert isinstance(raw, openai._response.APIResponse)
        stream = raw.parse()
        assert raw.parse() is stream  # the SDK caches it; so does the proxy
        assert isinstance(stream, openai.Stream)
        events = list(stream)
    assert events[-1].type == "response.completed"
    assert attrs(captured.only_span())["gen_ai.response.id"] == events[-1].response.id


# -- the app gets exactly what it gets without the instrumentation ----------------------------------------

_TIMES = re.compile(r'"(created_at|completed_at)":\s*[0-9.]+')
_ENCRYPTED = re.compile(r'"encrypted_content":\s*"([^"]*)"')


def normalise(value: Any) -> Any:
    """Without times, and each opaque payload by its length (every serialisation encrypts afresh)."""
    if isinstance(value, str):
        value = _TIMES.sub(r'"\1":0', value)
        return _ENCRYPTED.sub(lambda m: f'"encrypted_content":{len(m.group(1))}', value)
    if isinstance(value, dict):
        return {
            k: len(v) if k == "encrypted_content" and isinstance(v, str) else normalise(v)
            for k, v in value.items()
            if k not in ("created_at", "completed_at")
        }
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def session(emulator: Emulator, how: str, is_async: bool) -> list[Any]:
    """What the app reads through both raw variants: a completed body, an error event, an error the SDK raises
    mid-stream (only the parsed stream raises it; the bytes just carry it)."""
    seen: list[Any] = []
    client = emulator.client()
    for via in ("streaming", "raw") if how in LEGACY_READERS else ("streaming",):
        for text in ("Remember this: the marker is SDK-4.", "trigger error event", "trigger stream exception"):
            kwargs = {"model": REASONER, "input": text, "store": False, "include": ["reasoning.encrypted_content"]}
            try:
                if is_async:
                    seen.append(normalise(run_async(emulator, via, how, **kwargs)))
                else:
                    seen.append(normalise(read_sync(client, via, how, **kwargs)))
            except openai.APIError as error:
                seen.append((type(error).__name__, str(error), error.body))
    client.close()
    return seen


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("how", list(SYNC_READERS))
def test_the_app_reads_the_same_with_and_without_instrumentation(captured: Captured, how: str, is_async: bool) -> None:
    config = EmulatorConfig(secret=b"p" * 32)
    with Emulator(config) as emulator:
        instrumented = session(emulator, how, is_async)
    spans = captured.spans()
    assert len(spans) == len(instrumented)
    assert all(span.end_time is not None for span in spans)
    ResponsesInstrumentor().uninstrument()
    try:
        with Emulator(config) as emulator:
            bare = session(emulator, how, is_async)
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )
    assert instrumented == bare
    raised = how in LEGACY_READERS  # only a parsed stream raises the mid-stream error
    assert any(isinstance(item, tuple) for item in instrumented) is raised


class _Replay(http.server.BaseHTTPRequestHandler):
    """Answers every POST with one recorded SSE body."""

    body = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("x-request-id", "req_replayed")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


def test_iter_lines_split_inside_json_at_unicode_line_breaks(client: openai.OpenAI, captured: Captured) -> None:
    """The API may send non-ASCII text unescaped; httpx's `iter_lines()` splits at U+0085, U+2028 and U+2029
    (`str.splitlines()`), inside an event's JSON. The pieces are joined again: the events are still seen."""
    with client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as raw:
        recorded = raw.read().decode()
    breaks = "\\u0085\\u2028\\u2029"  # escaped in the JSON text, then written out unescaped
    events = []
    for block in recorded.split("\n\n"):
        lines = [
            "data: " + json.dumps(json.loads(line[6:].replace("Noted", "Noted" + breaks)), ensure_ascii=False)
            if line.startswith("data: ")
            else line
            for line in block.split("\n")
        ]
        events.append("\n".join(lines))
    _Replay.body = "\n\n".join(events).encode()
    server = QuietHTTPServer(("127.0.0.1", 0), _Replay)  # the client closes its pooled connection
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    replay = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="k", max_retries=0)
    try:
        captured.clear()
        with replay.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as raw:
            parsed: Any = list(raw.parse())
        with replay.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as raw:
            lines = list(raw.iter_lines())
    finally:
        replay.close()
        server.shutdown()
        server.server_close()
    assert "\u2028" in parsed[-1].response.output_text
    assert len(lines) > len(_Replay.body.decode().split("\n"))  # httpx did split inside the JSON
    by_stream, by_lines = captured.spans()
    assert attrs(by_lines)["gen_ai.response.id"] == parsed[-1].response.id
    assert stable(by_lines) == stable(by_stream)


# -- endings without a terminal event --------------------------------------------------------------------


def test_leaving_the_context_unread_ends_the_span_closed(client: openai.OpenAI, captured: Captured) -> None:
    with client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as raw:
        request_id = raw.request_id
    span = captured.only_span()
    assert attrs(span)["openai_responses.stream.ended"] == "closed"
    assert attrs(span)["openai_responses.request_id"] == request_id
    assert "gen_ai.response.id" not in attrs(span)


def test_close_unread_ends_the_span_closed(client: openai.OpenAI, captured: Captured) -> None:
    raw = client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True).__enter__()
    assert captured.spans() == []
    raw.close()
    assert attrs(captured.only_span())["openai_responses.stream.ended"] == "closed"


def test_lines_left_early_then_the_context_closes(client: openai.OpenAI, captured: Captured) -> None:
    """The iterator is dropped first, the response is still held: the span ends when it is closed, not before."""
    with client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as raw:
        for line in raw.iter_lines():
            if not line:  # the end of the first event
                break
        gc.collect()
        assert captured.spans() == []
    span = captured.only_span()
    assert attrs(span)["openai_responses.stream.ended"] == "closed"
    assert attrs(span)["gen_ai.response.time_to_first_chunk"] > 0


def test_abandoned_streaming_response_ends_on_garbage_collection(client: openai.OpenAI, captured: Captured) -> None:
    manager = client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True)
    raw = manager.__enter__()
    lines = raw.iter_lines()
    next(lines)
    del raw, manager
    gc.collect()
    assert captured.spans() == []  # the iterator still holds the body
    del lines
    gc.collect()
    assert attrs(captured.only_span())["openai_responses.stream.ended"] == "abandoned"


def test_abandoned_raw_response_ends_on_garbage_collection(client: openai.OpenAI, captured: Captured) -> None:
    raw = client.responses.with_raw_response.create(model=MODEL, input="hi", stream=True)
    del raw
    gc.collect()
    assert attrs(captured.only_span())["openai_responses.stream.ended"] == "abandoned"


def test_raw_response_dropped_after_parse_leaves_the_stream_running(client: openai.OpenAI, captured: Captured) -> None:
    stream = client.responses.with_raw_response.create(model=MODEL, input="hi", stream=True).parse()
    gc.collect()
    assert captured.spans() == []
    next(stream)
    del stream
    gc.collect()
    assert attrs(captured.only_span())["openai_responses.stream.ended"] == "abandoned"


def test_async_endings_without_a_terminal_event(emulator: Emulator, captured: Captured) -> None:
    async def main() -> None:
        client = emulator.async_client()
        async with client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True):
            pass
        async with client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as raw:
            async for _line in raw.iter_lines():
                break
        manager = client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True)
        raw = await manager.__aenter__()
        del raw, manager
        gc.collect()
        stream = (await client.responses.with_raw_response.create(model=MODEL, input="hi", stream=True)).parse()
        await stream.__anext__()
        await stream.close()
        await client.close()

    asyncio.run(main())
    ended = [attrs(s)["openai_responses.stream.ended"] for s in captured.spans()]
    assert ended == ["closed", "closed", "abandoned", "closed"]


# -- errors ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["trigger stream exception", "trigger error event", "please trigger failure"])
@pytest.mark.parametrize(("via", "how"), [("streaming", "parse"), ("streaming", "iter_lines"), ("raw", "parse")])
def test_an_error_mid_stream_is_recorded_as_on_a_plain_stream(
    client: openai.OpenAI, captured: Captured, text: str, via: str, how: str
) -> None:
    kwargs = {"model": MODEL, "input": text}
    plain: list[Any] = []
    try:
        plain.extend(e.type for e in client.responses.create(**kwargs, stream=True))  # type: ignore[call-overload]
    except openai.APIError as error:
        plain.append(type(error))
    reference = captured.only_span()
    captured.clear()
    if plain[-1] is openai.APIError and how == "parse":
        with pytest.raises(openai.APIError):
            read_sync(client, via, how, **kwargs)
    else:
        view = read_sync(client, via, how, **kwargs)
        assert how == "iter_lines" or [e["type"] for e in view] == plain
    span = captured.only_span()
    assert span.status.status_code is StatusCode.ERROR
    assert stable(span) == stable(reference)
    assert attrs(span)["error.type"] in ("APIError", "server_error")


def test_a_failing_tap_never_reaches_the_app(
    client: openai.OpenAI, captured: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_responses._patching import raw_streams as streams

    def broken(self: Any, kind: Any, data: Any) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(streams._SSETap, "_event", broken)
    with client.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as raw:
        body = b"".join(raw.iter_bytes())
    assert b'"type":"response.completed"' in body
    span = captured.only_span()
    assert attrs(span)["openai_responses.stream.ended"] == "exhausted"
    (point,) = [p for p in captured.metric_points("openai_responses.instrumentation.errors") if p.value]
    assert point.attributes == {"openai_responses.instrumentation.step": "observe_raw_stream"}
    assert point.value == 1  # the tap is dropped after its first failure


# -- a response the SDK fails to parse ---------------------------------------------------------------------


class Marker(pydantic.BaseModel):
    """A schema the emulator's answer fits, with a rule it does not: the SDK's parse raises."""

    marker: str

    @pydantic.field_validator("marker")
    @classmethod
    def _coded(cls, value: str) -> str:
        if not value.startswith("MK-"):
            raise ValueError("not a marker code")
        return value


class Answer(pydantic.BaseModel):
    answer: str


PARSE_REQUEST: dict[str, Any] = {
    "model": MODEL,
    "input": "Remember this: the marker is SDK-5.",
    "instructions": "Answer briefly.",
    "text_format": Marker,
}


def assert_unparsed_response_recorded(span: Any, client: openai.OpenAI) -> str:
    """The span carries what the API said (checked against the stored response) and the SDK's error."""
    a = attrs(span)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ValidationError"
    assert a["error.type"] == "ValidationError"
    response_id = a["gen_ai.response.id"]
    stored: Any = client.responses.retrieve(response_id)
    assert a["gen_ai.usage.input_tokens"] == stored.usage.input_tokens
    assert a["gen_ai.usage.output_tokens"] == stored.usage.output_tokens
    assert a["openai_responses.output.item_types"] == tuple(item.type for item in stored.output)
    return str(response_id)


def test_a_response_the_sdk_cannot_parse_is_recorded_and_remembered(client: openai.OpenAI, captured: Captured) -> None:
    with pytest.raises(pydantic.ValidationError):
        client.responses.parse(**PARSE_REQUEST)
    response_id = assert_unparsed_response_recorded(captured.only_span(), client)
    captured.clear()
    # The next turn is checked against it: the instructions it had are missing now.
    client.responses.create(model=MODEL, previous_response_id=response_id, input="What is the marker?")
    assert attrs(captured.only_span())["openai_responses.signals"] == ("instructions_dropped",)


def test_a_response_cut_by_max_output_tokens_is_recorded(client: openai.OpenAI, captured: Captured) -> None:
    with pytest.raises(pydantic.ValidationError):
        client.responses.parse(
            model=MODEL, input="Remember this: the marker is SDK-6.", text_format=Answer, max_output_tokens=3
        )
    span = captured.only_span()
    a = attrs(span)
    assert a["error.type"] == "ValidationError"
    assert a["gen_ai.response.finish_reasons"] == ("length",)  # what the API answered, whatever the SDK made of it
    assert a["gen_ai.usage.output_tokens"] == 3
    assert a["openai_responses.signals"] == ("response_incomplete",)


def test_async_parse_failure_is_recorded_and_remembered(emulator: Emulator, captured: Captured) -> None:
    async def main() -> None:
        client = emulator.async_client()
        with pytest.raises(pydantic.ValidationError):
            await client.responses.parse(**PARSE_REQUEST)
        response_id = attrs(captured.only_span())["gen_ai.response.id"]
        await client.responses.create(model=MODEL, previous_response_id=response_id, input="What is the marker?")
        await client.close()

    asyncio.run(main())
    first, second = captured.spans()
    assert attrs(first)["error.type"] == "ValidationError"
    assert attrs(first)["gen_ai.usage.output_tokens"] > 0
    assert attrs(second)["openai_responses.signals"] == ("instructions_dropped",)


def test_raw_parse_failure_is_recorded_with_its_request_id(client: openai.OpenAI, captured: Captured) -> None:
    raw = client.responses.with_raw_response.parse(**PARSE_REQUEST)
    span = captured.only_span()
    assert attrs(span)["openai_responses.request_id"] == raw.request_id
    assert_unparsed_response_recorded(span, client)
    with pytest.raises(pydantic.ValidationError):
        raw.parse()  # the app's own parse fails as it would without the instrumentation


def test_the_parse_error_reaches_the_app_unchanged(captured: Captured) -> None:
    def failure() -> pydantic.ValidationError:
        with Emulator(EmulatorConfig()) as emulator, emulator.client() as client:
            with pytest.raises(pydantic.ValidationError) as info:
                client.responses.parse(**PARSE_REQUEST)
            return info.value

    instrumented = failure()
    span = captured.only_span()
    assert attrs(span)["error.type"] == "ValidationError"
    assert attrs(span)["gen_ai.response.id"].startswith("resp_")
    ResponsesInstrumentor().uninstrument()
    try:
        bare = failure()
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )
    assert type(instrumented) is type(bare)
    assert str(instrumented) == str(bare)
    assert instrumented.errors(include_context=False) == bare.errors(include_context=False)
    assert (instrumented.__cause__, instrumented.__context__) == (bare.__cause__, bare.__context__)


def test_uninstrument_restores_parse_response(captured: Captured) -> None:
    import wrapt

    modules = []
    for name in ("openai.lib._response_resources", "openai.resources.responses.responses"):
        try:
            module = __import__(name, fromlist=["parse_response"])
        except ImportError:
            continue
        if "parse_response" in vars(module):
            modules.append(module)
    assert modules
    assert all(isinstance(m.parse_response, wrapt.FunctionWrapper) for m in modules)
    ResponsesInstrumentor().uninstrument()
    try:
        assert not any(isinstance(m.parse_response, wrapt.FunctionWrapper) for m in modules)
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )


# -- WebSocket mode: however a `response.create` is sent -----------------------------------------------------

TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


def _needs_websocket() -> None:
    pytest.importorskip("websockets")
    if not hasattr(openai.resources.responses.Responses, "connect"):
        pytest.skip("responses.connect() (WebSocket mode) arrived in openai 2.22.0")


def test_every_way_to_send_response_create_on_a_socket_is_one_span(client: openai.OpenAI, captured: Captured) -> None:
    """`response.create()`, `send({...})` and `send_raw(frame)` (pydantic-ai writes its own frames): one span each,
    never two for `create()` (which sends through `send()`)."""
    _needs_websocket()
    finals = []
    with client.responses.connect() as connection:

        def until_done() -> Any:
            for event in connection:
                if event.type in TERMINAL:
                    return event
            raise AssertionError("the connection closed first")

        connection.response.create(model=MODEL, input="Remember this: the marker is WS-1.", instructions="Be brief.")
        finals.append(until_done())
        connection.send(
            {
                "type": "response.create",
                "model": MODEL,
                "input": "Marker?",
                "previous_response_id": finals[0].response.id,
            }
        )
        finals.append(until_done())
        frame = {"type": "response.create", "model": MODEL, "input": "Again?", "stream_id": "lane-1"}
        connection.send_raw(json.dumps({**frame, "previous_response_id": finals[1].response.id}))
        finals.append(until_done())
    assert finals[1].response.output_text == "marker=WS-1"
    assert finals[2].stream_id == "lane-1"
    spans = captured.spans()
    assert [attrs(s)["gen_ai.response.id"] for s in spans] == [f.response.id for f in finals]
    assert [attrs(s)["openai_responses.state.mode"] for s in spans] == ["single_turn", "server_chain", "server_chain"]
    # A frame sent by hand is checked as `create()` is: the first turn's instructions were dropped, on both later turns.
    assert [attrs(s)["openai_responses.signals"] for s in spans] == [
        (),
        ("instructions_dropped",),
        ("instructions_dropped",),
    ]


def test_async_send_raw_on_lanes(emulator: Emulator, captured: Captured) -> None:
    """Frames on two lanes (`stream_id`), sent before either answer is read: each lane's events end its own span."""
    _needs_websocket()

    async def main() -> dict[str, Any]:
        client = emulator.async_client()
        finals: dict[str, Any] = {}
        async with client.responses.connect() as connection:
            for lane, marker in (("a", "WS-A"), ("b", "WS-B")):
                body = {"model": MODEL, "input": f"Remember this: the marker is {marker}.", "stream_id": lane}
                await connection.send_raw(json.dumps({"type": "response.create", **body}).encode())
            async for event in connection:
                if event.type in TERMINAL:
                    finals[str(event.stream_id)] = event
                    if len(finals) == 2:
                        break
        await client.close()
        return finals

    finals = asyncio.run(main())
    by_id = {attrs(s)["gen_ai.response.id"]: s for s in captured.spans()}
    assert set(by_id) == {finals["a"].response.id, finals["b"].response.id}
    for final in finals.values():
        span = by_id[final.response.id]
        assert attrs(span)["gen_ai.usage.output_tokens"] == final.response.usage.output_tokens
        assert "openai_responses.stream.ended" not in attrs(span)


def test_a_frame_that_is_not_json_reaches_the_socket_unchanged(client: openai.OpenAI, captured: Captured) -> None:
    """The instrumentation reads only `response.create` frames, and a broken one is the server's to answer."""
    _needs_websocket()
    with client.responses.connect() as connection:
        connection.send_raw('{"type": "response.create", "model": ')
        error = next(iter(connection))
    assert error.type == "error"
    assert captured.spans() == []
    (point,) = [p for p in captured.metric_points("openai_responses.instrumentation.errors") if p.value]
    assert point.attributes == {"openai_responses.instrumentation.step": "read_websocket_frame"}
