"""One benchmark process: one subject (bare client or one instrumentation), its workloads, a JSON result.

Run by ``bench/run.py`` with the interpreter of the subject's own virtualenv; it needs only the standard
library, ``openai``, ``opentelemetry-sdk`` and the subject's package, so it runs unchanged in every peer's venv.
The client talks to an in-process ``httpx2.MockTransport`` (no sockets) that returns canned Responses API bodies
built once; only the response id and output item ids change per call (a counter spliced into the bytes).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import httpx2
import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

MODEL = "gpt-5-mini"
ENCRYPTED = "gAAAAAB" + "x9Kq2mZ7" * 127  # ~1 KB, the size of a typical encrypted reasoning payload
CLEAR_EVERY = 256  # exporter cleared this often, outside the timed region
REPLAY_SIZES = (10, 100, 1_000, 10_000)
WORKLOADS = ("short", "stream", *(f"replay_{n}" for n in REPLAY_SIZES))
REDIS_URL_ENV = "OTEL_RESPONSES_BENCH_REDIS_URL"
MEMORY_CHECKPOINTS = (1_000, 10_000, 25_000, 50_000, 100_000)

# -- canned bodies ---------------------------------------------------------------------------------------
# "@N@" is replaced by a per-call counter, so every call returns a new response id and new output item ids.


def _response(status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_@N@",
        "object": "response",
        "created_at": 1760000000,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": [
            {"id": "rs_@N@", "type": "reasoning", "summary": [], "encrypted_content": ENCRYPTED},
            {
                "id": "msg_@N@",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "phase": "final_answer",
                "content": [
                    {
                        "type": "output_text",
                        "text": "The capital of France is Paris.",
                        "annotations": [],
                        "logprobs": [],
                    }
                ],
            },
        ],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "low", "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": 36,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 87,
            "output_tokens_details": {"reasoning_tokens": 64},
            "total_tokens": 123,
        },
        "user": None,
        "metadata": {},
    }


def _sse_body() -> bytes:
    """A complete streamed response: created, in_progress, the reasoning and message items, deltas, completed."""
    final = _response()
    pending = {**_response("in_progress"), "output": [], "usage": None}
    reasoning, message = final["output"]
    text = message["content"][0]["text"]
    deltas = [text[i : i + 6] for i in range(0, len(text), 6)]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
        {"type": "response.output_item.added", "output_index": 0, "item": {**reasoning, "encrypted_content": None}},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**message, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": "msg_@N@",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
        },
        *(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_@N@",
                "output_index": 1,
                "content_index": 0,
                "delta": delta,
                "logprobs": [],
            }
            for delta in deltas
        ),
        {
            "type": "response.output_text.done",
            "item_id": "msg_@N@",
            "output_index": 1,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            "item_id": "msg_@N@",
            "output_index": 1,
            "content_index": 0,
            "part": message["content"][0],
        },
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        {"type": "response.completed", "response": final},
    ]
    chunks = []
    for number, event in enumerate(events):
        event["sequence_number"] = number
        chunks.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return "".join(chunks).encode()


class CannedTransport:
    """The handler of an ``httpx2.MockTransport`` (``http``: the ``httpx`` module answering, ``httpx`` itself for
    litellm's client): JSON or SSE bytes built once, ids made unique per call."""

    def __init__(self, http: Any = httpx2) -> None:
        self.json_parts = json.dumps(_response()).encode().split(b"@N@")
        self.sse_parts = _sse_body().split(b"@N@")
        self.calls = 0
        self.http = http

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        marker = b"%d" % self.calls
        stream = b'"stream": true' in request.content or b'"stream":true' in request.content
        parts = self.sse_parts if stream else self.json_parts
        headers = {
            "content-type": "text/event-stream" if stream else "application/json",
            "x-request-id": f"req_{self.calls}",
        }
        response: httpx2.Response = self.http.Response(200, headers=headers, content=marker.join(parts))
        return response


# -- request inputs ----------------------------------------------------------------------------------------


def replay_input(count: int) -> list[dict[str, Any]]:
    """``count`` items of a client-replayed history, as an app keeps it: turns of a user message, a reasoning
    item (encrypted, ~1 KB), a function call and its output, an assistant message (SDK-like dict with id and
    phase); the list ends with the new user message."""
    items: list[dict[str, Any]] = []
    turn = 0
    while len(items) < count - 1:
        items += [
            {"role": "user", "content": f"Turn {turn}: what is the weather in city {turn}?"},
            {"id": f"rs_h{turn}", "type": "reasoning", "summary": [], "encrypted_content": ENCRYPTED},
            {
                "id": f"fc_h{turn}",
                "type": "function_call",
                "call_id": f"call_h{turn}",
                "name": "get_weather",
                "arguments": json.dumps({"city": f"city {turn}"}),
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": f"call_h{turn}", "output": '{"temp_c": 21, "sky": "clear"}'},
            {
                "id": f"msg_h{turn}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "phase": "final_answer",
                "content": [
                    {"type": "output_text", "text": f"It is 21 C and clear in city {turn}.", "annotations": []}
                ],
            },
        ]
        turn += 1
    del items[count - 1 :]
    # never end on a bare function call: a history cut there would be (rightly) refused by strict mode
    while items and items[-1].get("type") == "function_call":
        items[-1] = {"role": "user", "content": "Thanks."}
    items.append({"role": "user", "content": "And tomorrow?"})
    return items


def make_call(client: openai.OpenAI, workload: str, original: bool = False) -> Callable[[], object]:
    """The workload's call. ``original``: through the ``__wrapped__`` of an instrumentation's wrapt wrapper of
    ``responses.create``, i.e. the SDK's own method with the instrumentation installed but bypassed."""

    def create(**kwargs: Any) -> Any:
        method = client.responses.create
        return (getattr(method, "__wrapped__") if original else method)(**kwargs)  # noqa: B009

    if workload == "short":
        return lambda: create(model=MODEL, input="What is the capital of France?")
    if workload == "stream":

        def stream() -> object:
            last = None
            for event in create(model=MODEL, input="What is the capital of France?", stream=True):
                last = event
            return last

        return stream
    items = replay_input(int(workload.removeprefix("replay_")))
    return lambda: create(model=MODEL, input=items, store=False, include=["reasoning.encrypted_content"])


# -- subjects ----------------------------------------------------------------------------------------------

LITELLM = "otel_responses_litellm"  # litellm.responses() (its own httpx client), litellm's instrumentor


class LiteLLMClient:
    """``client.responses.create(**kwargs)`` as ``litellm.responses(model="openai/...", ...)`` over an
    ``httpx.MockTransport``; ``create.__wrapped__`` calls litellm's function under the instrumentor's wrapper
    (installed, bypassed), as the SDK subjects' paired figure does."""

    def __init__(self, transport: CannedTransport) -> None:
        import httpx
        from litellm.llms.custom_httpx.http_handler import HTTPHandler  # type: ignore[import-not-found]

        self.handler = HTTPHandler(client=httpx.Client(transport=httpx.MockTransport(transport)))
        self.responses = self

    def _kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        model = kwargs.pop("model")
        return {
            "model": f"openai/{model}",
            "api_key": "sk-bench",
            "api_base": "https://api.openai.com/v1",
            "client": self.handler,
            **kwargs,
        }

    @property
    def create(self) -> Callable[..., Any]:
        import litellm  # type: ignore[import-not-found]

        function = litellm.responses

        def create(**kwargs: Any) -> Any:
            return function(**self._kwargs(kwargs))

        inner = getattr(function, "__wrapped__", None)
        if inner is not None:
            create.__wrapped__ = lambda **kwargs: inner(**self._kwargs(kwargs))  # type: ignore[attr-defined]
        return create


@dataclass
class Harness:
    client: openai.OpenAI
    transport: CannedTransport
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    instrumentor: Any
    options: dict[str, Any]


PEERS = {
    # subject: (distribution, module, class)
    "otel_responses": ("otel-responses", "otel_responses", "ResponsesInstrumentor"),
    "otel_responses_strict": ("otel-responses", "otel_responses", "ResponsesInstrumentor"),
    "otel_responses_sampled": ("otel-responses", "otel_responses", "ResponsesInstrumentor"),
    # The shared ledger on Redis: run.py starts redis-server and passes its URL in REDIS_URL_ENV.
    "otel_responses_redis": ("otel-responses", "otel_responses", "ResponsesInstrumentor"),
    # A LoggerProvider with an in-memory log exporter given to instrument(): the signals' log events have a taker.
    "otel_responses_logs": ("otel-responses", "otel_responses", "ResponsesInstrumentor"),
    # The latest GenAI conventions' dialect (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental in its env).
    "otel_responses_latest": ("otel-responses", "otel_responses", "ResponsesInstrumentor"),
    "genai_openai": (
        "opentelemetry-instrumentation-genai-openai",
        "opentelemetry.instrumentation.genai.openai",
        "OpenAIInstrumentor",
    ),
    "traceloop": ("opentelemetry-instrumentation-openai", "opentelemetry.instrumentation.openai", "OpenAIInstrumentor"),
    "openinference": (
        "openinference-instrumentation-openai",
        "openinference.instrumentation.openai",
        "OpenAIInstrumentor",
    ),
    LITELLM: ("litellm", "otel_responses.integrations.litellm", "LiteLLMResponsesInstrumentor"),
}


# A tenth of the traces sampled (the rest not recording): what an app that samples pays per call.
SAMPLED = "otel_responses_sampled"
LOGS = "otel_responses_logs"
LATEST = "otel_responses_latest"
SAMPLED_RATIO = 0.1


def build(subject: str, ledger: Any = None) -> Harness:
    exporter = InMemorySpanExporter()
    sampler = ParentBased(TraceIdRatioBased(SAMPLED_RATIO)) if subject == SAMPLED else None
    tracer_provider = TracerProvider(sampler=sampler)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    instrumentor = None
    if subject == LITELLM:  # litellm reads its price table from the package, sends no telemetry of its own
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_TELEMETRY", "False")
        import litellm  # imported before instrument(): the post-import hook patches it at once

        litellm.telemetry = False
        # litellm's stream iterator serialises its usage with a pydantic warning per call: silenced, not printed
        warnings.filterwarnings("ignore", category=UserWarning, module="pydantic")
    if subject != "bare":
        _, module, cls = PEERS[subject]
        instrumentor = getattr(__import__(module, fromlist=[cls]), cls)()
        options: dict[str, Any] = {"tracer_provider": tracer_provider, "meter_provider": meter_provider}
        if subject == "otel_responses_strict":
            options["strict"] = True
        if subject == "otel_responses_redis":  # one ledger (one writer thread) across instrument() cycles
            from otel_responses.ledger.redis import RedisLedger

            options["ledger"] = RedisLedger(os.environ[REDIS_URL_ENV])
            options["hash_key"] = "bench-fleet-key"
        if subject == LATEST:
            os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        if subject == LOGS:
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

            logger_provider = LoggerProvider()
            exporter_of_logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
            logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter_of_logs))
            options["logger_provider"] = logger_provider
        if ledger is not None:
            options["ledger"] = ledger
        instrumentor.instrument(**options)
    else:
        options = {}
    if subject == LITELLM:
        import httpx

        transport = CannedTransport(httpx)
        return Harness(LiteLLMClient(transport), transport, exporter, reader, instrumentor, options)  # type: ignore[arg-type]
    transport = CannedTransport()
    client = openai.OpenAI(
        api_key="sk-bench",
        base_url="https://api.openai.com/v1",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=httpx2.MockTransport(transport)),
    )
    return Harness(client, transport, exporter, reader, instrumentor, options)


def versions(subject: str) -> dict[str, str]:
    names = ["openai", "httpx2", "pydantic", "opentelemetry-sdk", "opentelemetry-api", "wrapt"]
    if subject in PEERS:
        names.append(PEERS[subject][0])
    found = {"python": platform.python_version()}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


# -- timing ------------------------------------------------------------------------------------------------


class TransformClock:
    """Wraps the SDK's request transform (``maybe_transform`` as ``responses.create`` calls it) to add up its time.

    The transform walks every input item against the SDK's TypedDict unions, costs ~1.5 ms per replayed item
    on the benchmark machine and is the same in every process: subtracting it leaves the part of a call where
    an instrumentation's work is, with much less noise. The wrapper itself costs about a microsecond."""

    def __init__(self) -> None:
        import openai.resources.responses.responses as module

        self.ns = 0
        self.cpu_ns = 0
        original = getattr(module, "maybe_transform")  # noqa: B009 - not re-exported
        clock, cpu_clock = time.perf_counter_ns, time.process_time_ns

        def timed(*args: Any, **kwargs: Any) -> Any:
            begin, cpu_begin = clock(), cpu_clock()
            try:
                return original(*args, **kwargs)
            finally:
                self.cpu_ns += cpu_clock() - cpu_begin
                self.ns += clock() - begin

        setattr(module, "maybe_transform", timed)  # noqa: B010


class Subject:
    """One instrumented (or bare) client and its prepared calls, timed in bursts on request."""

    def __init__(self, name: str) -> None:
        self.transform = TransformClock()
        self.harness = build(name)
        self.calls = {workload: make_call(self.harness.client, workload) for workload in WORKLOADS}
        self.shapes: dict[str, dict[str, Any]] = {}
        self.instrumented = self.harness.instrumentor is not None
        self.originals: dict[str, Callable[[], object]] = {}
        self.off = self._choose_off()

    def switch(self, on: bool) -> None:
        """Instrumentation on or off (``uninstrument()``) in this process."""
        instrumentor = self.harness.instrumentor
        if instrumentor is None or on == self.instrumented:
            return
        if on:
            instrumentor.instrument(**self.harness.options)
        else:
            instrumentor.uninstrument()
        self.instrumented = on

    def _choose_off(self) -> str | None:
        """How this process makes a call without its instrumentation, for the paired figure: through the wrapper's
        ``__wrapped__`` (``"bypass"``: nothing to switch), else by ``uninstrument()`` around the call
        (``"toggle"``, outside the timed region); None when neither leaves the call without spans."""
        if self.harness.instrumentor is None:
            return None
        exporter = self.harness.exporter
        if hasattr(self.harness.client.responses.create, "__wrapped__"):
            self.originals = {w: make_call(self.harness.client, w, original=True) for w in WORKLOADS}
            exporter.clear()
            self.originals["short"]()
            if not exporter.get_finished_spans():
                return "bypass"
        self.switch(False)
        exporter.clear()
        self.calls["short"]()
        clean = not exporter.get_finished_spans()
        self.switch(True)
        return "toggle" if clean else None

    def warm(self, workload: str, calls: int) -> dict[str, Any]:
        """Run ``calls`` untimed calls; describe the spans of the last one."""
        exporter = self.harness.exporter
        for _ in range(calls):
            exporter.clear()
            self.calls[workload]()
        spans = exporter.get_finished_spans()
        exporter.clear()
        return {
            "spans_per_call": len(spans),
            "span_names": sorted({span.name for span in spans}),
            "attributes_per_call": sum(len(span.attributes or {}) for span in spans),
        }

    def burst(self, workload: str, iterations: int) -> dict[str, list[int]]:
        """``iterations`` timed calls: per call, the whole time, the time less the SDK's request transform, and the
        process's CPU time (every thread's: work moved to another thread still costs the app) less the transform's,
        immune to the process being preempted on a shared machine.

        Paired: each instrumented call is followed (or, every other time, preceded) by one made without the
        instrumentation in this same process (``off_*``), so a slow second of a shared machine, or this process's
        own memory layout, weighs on both alike; on minus off is the instrumentation's added time."""
        exporter, transform = self.harness.exporter, self.transform
        on_call = self.calls[workload]
        off_call = self.originals[workload] if self.off == "bypass" else on_call
        toggle = self.off == "toggle"
        clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
        names = ("total_ns", "net_ns", "cpu_ns", "off_net_ns", "off_cpu_ns")
        samples: dict[str, list[int]] = {name: [] for name in names}

        def timed(call: Callable[[], object], prefix: str) -> None:
            before, cpu_before = transform.ns, transform.cpu_ns
            cpu_begin = cpu_clock()
            begin = clock()
            call()
            elapsed = clock() - begin
            cpu_elapsed = cpu_clock() - cpu_begin
            if not prefix:
                samples["total_ns"].append(elapsed)
            samples[prefix + "net_ns"].append(elapsed - (transform.ns - before))
            samples[prefix + "cpu_ns"].append(cpu_elapsed - (transform.cpu_ns - cpu_before))

        gc.collect()
        for index in range(iterations):
            if index % CLEAR_EVERY == 0:
                exporter.clear()
            if self.off is None:
                timed(on_call, "")
                continue
            for off in (False, True) if index % 2 == 0 else (True, False):
                if toggle:
                    self.switch(not off)
                timed(off_call if off else on_call, "off_" if off else "")
        if toggle:
            self.switch(True)
        exporter.clear()
        return samples


def serve(name: str) -> None:
    """Answer one JSON request per stdin line (``{"op": "warm"|"burst", "workload": ..., "n": ...}``) with one
    JSON line on stdout, so the runner can interleave bursts of every subject's process over time."""
    subject = Subject(name)
    print(json.dumps({"ready": True, "versions": versions(name)}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "warm":
            answer: dict[str, Any] = subject.warm(request["workload"], request["n"])
        elif request["op"] == "off":
            answer = {"off": subject.off}
        else:
            answer = subject.burst(request["workload"], request["n"])
        print(json.dumps(answer), flush=True)


# -- memory ------------------------------------------------------------------------------------------------


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def run_memory(subject: str, calls: int) -> dict[str, Any]:
    """RSS after ``calls`` short calls (each with a new response id), sampled at the checkpoints; then, for this
    package, the ledger's bytes per entry (tracemalloc: memory held with a full ledger minus memory once the
    same ledger is emptied)."""
    ledger = None
    if subject.startswith("otel_responses"):
        from otel_responses.ledger import InMemoryLedger

        ledger = InMemoryLedger()
    harness = build(subject, ledger)
    call = make_call(harness.client, "short")
    samples = []
    checkpoints = [c for c in MEMORY_CHECKPOINTS if c <= calls]
    for _ in range(200):  # warm-up: imports, caches, pydantic schemas
        call()
    harness.exporter.clear()
    gc.collect()
    samples.append({"calls": 0, "rss_kib": rss_kib(), "ledger_entries": len(ledger) if ledger is not None else 0})
    started = time.perf_counter()
    done = 0
    for checkpoint in checkpoints:
        while done < checkpoint:
            call()
            done += 1
            if done % CLEAR_EVERY == 0:
                harness.exporter.clear()
        harness.exporter.clear()
        gc.collect()
        sample = {"calls": done, "rss_kib": rss_kib(), "ledger_entries": len(ledger) if ledger is not None else 0}
        samples.append(sample)
        print(f"  memory {subject}: {sample}", file=sys.stderr, flush=True)
    result: dict[str, Any] = {"samples": samples, "seconds": time.perf_counter() - started}
    if ledger is not None:
        result["ledger"] = ledger_bytes_per_entry(ledger, call, harness.exporter)
    return result


def _empty(ledger: Any) -> None:
    """Empty an InMemoryLedger in place (benchmark only: reaches into its private maps)."""
    for name in ("_entries", "_locations", "_conversations", "_children", "_in_flight"):
        getattr(ledger, name).clear()


def ledger_bytes_per_entry(ledger: Any, call: Callable[[], object], exporter: InMemorySpanExporter) -> dict[str, Any]:
    _empty(ledger)
    gc.collect()
    tracemalloc.start()
    for index in range(ledger.capacity):
        call()
        if index % CLEAR_EVERY == 0:
            exporter.clear()
    exporter.clear()
    gc.collect()
    full = tracemalloc.get_traced_memory()[0]
    entries = len(ledger)
    _empty(ledger)
    gc.collect()
    empty = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {
        "capacity": ledger.capacity,
        "entries": entries,
        "bytes_full": full - empty,
        "bytes_per_entry": (full - empty) / max(entries, 1),
    }


# -- profile -----------------------------------------------------------------------------------------------


def run_profile(subject: str, seconds: float, workloads: list[str], top: int) -> dict[str, Any]:
    harness = build(subject)
    results = {}
    for workload in workloads:
        call = make_call(harness.client, workload)
        for _ in range(20):
            call()
        harness.exporter.clear()
        start = time.perf_counter()
        call()
        iterations = max(20, int(seconds / max(time.perf_counter() - start, 1e-6)))
        profiler = cProfile.Profile()
        profiler.enable()
        for index in range(iterations):
            call()
            if index % CLEAR_EVERY == 0:
                harness.exporter.clear()
        profiler.disable()
        results[workload] = profile_rows(profiler, iterations, top)
    return results


def profile_rows(profiler: cProfile.Profile, iterations: int, top: int) -> dict[str, Any]:
    stats = pstats.Stats(profiler, stream=io.StringIO())
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    rows = []
    total_tt = 0.0
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in raw.items():
        total_tt += tottime
        if "otel_responses" not in filename:
            continue
        short = filename[filename.index("otel_responses") :]
        rows.append(
            {
                "function": f"{short}:{line}({name})",
                "calls_per_call": ncalls / iterations,
                "cum_us": cumtime / iterations * 1e6,
                "self_us": tottime / iterations * 1e6,
            }
        )
    by_cum = sorted(rows, key=lambda row: -row["cum_us"])[:top]
    by_self = sorted(rows, key=lambda row: -row["self_us"])[:top]
    return {
        "iterations": iterations,
        "profiled_call_us": total_tt / iterations * 1e6,
        "package_self_us": sum(row["self_us"] for row in rows),
        "top_cumulative": by_cum,
        "top_self": by_self,
    }


# -- entry point -------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("subject", choices=["bare", *PEERS])
    parser.add_argument("--mode", choices=["serve", "memory", "profile"], default="serve")
    parser.add_argument("--seconds", type=float, default=3.0, help="target timed seconds per workload")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--calls", type=int, default=MEMORY_CHECKPOINTS[-1], help="memory mode: number of calls")
    parser.add_argument("--top", type=int, default=15, help="profile mode: rows kept")
    args = parser.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    if args.mode == "serve":
        serve(args.subject)
        return 0
    result: dict[str, Any] = {"subject": args.subject, "mode": args.mode, "pid": os.getpid()}
    result["versions"] = versions(args.subject)
    try:
        if args.mode == "memory":
            result.update(run_memory(args.subject, args.calls))
        else:
            result["profile"] = run_profile(args.subject, args.seconds, workloads, args.top)
    except Exception as error:  # a peer that fails with this openai release is a result, not a crash
        result["error"] = f"{type(error).__name__}: {error}"
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
