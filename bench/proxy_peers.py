"""The processes of the proxy benchmark (``bench/proxy.py``), each started as ``python bench/proxy_peers.py ROLE``:

- ``upstream``: a fast canned Responses API (aiohttp): each create answered with a response of its own ids (a
  reasoning item with its encrypted payload, a message) — gzip-compressed with ``X-Bench-Gzip`` — or, for
  ``stream: true``, an SSE stream of ``X-Bench-Events`` text deltas ``X-Bench-Delay-Ms`` apart. It reads every body
  whole and parses none: its cost is the same for every subject, and small.
- ``bare``: the proxy forwarding only (``otel_responses.proxy.Proxy`` without telemetry): the same library and code
  path with no analysis, the floor.
- ``proxy``: the proxy recording every call, into the OpenTelemetry SDK (a batch span processor whose exporter drops
  the spans, an in-memory metric reader): what a deployment pays short of the network to its Collector.

Each prints its port on its first line of standard output, then serves until its standard input closes.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
import sys
from collections.abc import Sequence
from typing import Any

from aiohttp import web

ENCRYPTED = "gAAAAAB" + "x" * 1200  # the size of a real reasoning item's encrypted payload


def response_body(number: int) -> dict[str, Any]:
    return {
        "id": f"resp_bench_{number:012d}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": "gpt-5.4",
        "store": True,
        "output": [
            {"type": "reasoning", "id": f"rs_bench_{number:012d}", "summary": [], "encrypted_content": ENCRYPTED},
            {
                "type": "message",
                "id": f"msg_bench_{number:012d}",
                "role": "assistant",
                "status": "completed",
                "phase": "final_answer",
                "content": [{"type": "output_text", "text": "Noted. " * 20, "annotations": []}],
            },
        ],
        "usage": {
            "input_tokens": 1200,
            "output_tokens": 40,
            "total_tokens": 1240,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 16},
        },
    }


def sse(events: Sequence[dict[str, Any]]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


class Upstream:
    def __init__(self) -> None:
        self.count = 0

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        self.count += 1
        number = self.count
        headers = {"x-request-id": f"req_bench_{number}"}
        if b'"stream": true' not in body and b'"stream":true' not in body:
            if request.headers.get("X-Bench-Gzip"):  # the answer compressed, as the API sends it when asked
                packed = gzip.compress(json.dumps(response_body(number)).encode(), 6)
                headers.update({"Content-Type": "application/json", "Content-Encoding": "gzip"})
                return web.Response(body=packed, headers=headers)
            return web.json_response(response_body(number), headers=headers)
        events = int(request.headers.get("X-Bench-Events", "100"))
        delay = float(request.headers.get("X-Bench-Delay-Ms", "0")) / 1000
        final = response_body(number)
        item_id = f"msg_bench_{number:012d}"
        created = {"type": "response.created", "response": {**final, "status": "in_progress", "output": []}}
        delta = sse([{"type": "response.output_text.delta", "item_id": item_id, "output_index": 1, "delta": "No"}])[0]
        tail: list[dict[str, Any]] = [
            {"type": "response.output_item.done", "output_index": index, "item": item}
            for index, item in enumerate(final["output"])
        ]
        tail.append({"type": "response.completed", "response": final})
        stream = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream"})
        await stream.prepare(request)
        try:
            await stream.write(sse([created])[0])
            for _ in range(events):
                if delay:
                    await asyncio.sleep(delay)
                await stream.write(delta)
            await stream.write(b"".join(sse(tail)))
            await stream.write_eof()
        except ConnectionError:  # a client that left (the soak cuts some streams): the proxy closed its side
            pass
        return stream


def _telemetry() -> Any:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from otel_responses.proxy import telemetry_for

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return telemetry_for({}, tracer_provider, meter_provider)


async def _serve(role: str, upstream: str | None) -> None:
    loop = asyncio.get_running_loop()
    stop = loop.create_future()

    def closed() -> None:
        if not stop.done() and sys.stdin.read(1) == "":
            stop.set_result(None)

    loop.add_reader(sys.stdin.fileno(), closed)
    if role == "upstream":
        server = web.Server(Upstream().handle, access_log=None)
        runner = web.ServerRunner(server)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(runner.addresses[0][1], flush=True)
        await stop
        await runner.cleanup()
        return
    from otel_responses.proxy import Proxy, ProxySettings, upstream_of

    assert upstream is not None
    proxy = Proxy(ProxySettings(upstream_of(upstream), port=0), _telemetry() if role == "proxy" else None)
    await proxy.start()
    gc.freeze()  # as the command does once it listens
    print(proxy.port, flush=True)
    await stop
    await proxy.stop()


def main(argv: list[str]) -> None:
    role = argv[0]
    asyncio.run(_serve(role, argv[1] if len(argv) > 1 else None))


if __name__ == "__main__":
    main(sys.argv[1:])
