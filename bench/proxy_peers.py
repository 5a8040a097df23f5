"""The processes of the proxy benchmark (``bench/proxy.py``), each started as ``python bench/proxy_peers.py ROLE``:

- ``upstream``: a fast canned Responses API (aiohttp): each create answered with a response of its own ids (a
  reasoning item with its encrypted payload, a message) — gzip-compressed with ``X-Bench-Gzip`` — or, for
  ``stream: true``, an SSE stream of ``X-Bench-Events`` text deltas ``X-Bench-Delay-Ms`` apart. It reads every body
  whole and parses none: its cost is the same for every subject, and small.
- ``bare``: the proxy forwarding only (``otel_responses.proxy.Proxy`` without telemetry, the collector tuned as the
  command tunes it): the same library and code path with no analysis, the recording-off proxy.
- ``aiohttp``: a minimal forwarder of a dozen lines (aiohttp's server and pooled client, the body read whole and
  forwarded, the answer streamed back): what a plain Python forwarder costs, the denominator of the CPU and
  throughput targets.
- ``sink``: a local OTLP/HTTP receiver for the recording proxy (the command, ``--otlp-endpoint``): answers every
  export at once and counts the spans it was sent, by name (``GET /spans``).

Each prints its port on its first line of standard output, then serves until its standard input closes.
"""

from __future__ import annotations

import asyncio
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
        body = await request.content.read()  # whole, past the 1 MiB of `read()`
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


_HOP = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})


def forwarder(upstream: str) -> web.Server:
    """The minimal aiohttp forwarder."""
    from aiohttp import ClientSession, TCPConnector

    session: list[ClientSession] = []

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        if not session:
            session.append(ClientSession(connector=TCPConnector(limit=0), auto_decompress=False))
        body = await request.content.read()  # whole, past the 1 MiB of `read()`
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        url = upstream.removesuffix("/v1") + request.rel_url.raw_path_qs
        async with session[0].request(request.method, url, data=body, headers=headers) as answer:
            out = web.StreamResponse(
                status=answer.status, headers={k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
            )
            await out.prepare(request)
            async for chunk in answer.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    return web.Server(handle, access_log=None)


class Sink:
    """An OTLP/HTTP receiver: every export answered 200 at once; the spans of trace exports counted."""

    def __init__(self) -> None:
        self.spans = 0
        self.by_name: dict[str, int] = {}

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        body = await request.content.read()  # whole, past the 1 MiB of `read()`
        if request.method == "GET":
            return web.json_response({"spans": self.spans, "by_name": self.by_name})
        if request.path == "/v1/traces":
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

            if body[:2] == b"\x1f\x8b":
                body = gzip.decompress(body)
            export = ExportTraceServiceRequest.FromString(body)
            for resource in export.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans += 1
                        self.by_name[span.name] = self.by_name.get(span.name, 0) + 1
        return web.Response(status=200, body=b"", content_type="application/x-protobuf")


async def _serve(role: str, upstream: str | None) -> None:
    loop = asyncio.get_running_loop()
    stop = loop.create_future()

    def closed() -> None:
        if not stop.done() and sys.stdin.read(1) == "":
            stop.set_result(None)

    loop.add_reader(sys.stdin.fileno(), closed)
    if role in ("upstream", "sink", "aiohttp"):
        if role == "aiohttp":
            assert upstream is not None
            server = forwarder(upstream)
        else:
            server = web.Server((Upstream() if role == "upstream" else Sink()).handle, access_log=None)
        runner = web.ServerRunner(server)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(runner.addresses[0][1], flush=True)
        await stop
        await runner.cleanup()
        return
    from otel_responses.proxy.server import Proxy
    from otel_responses.proxy.settings import ProxySettings, upstream_of
    from otel_responses.proxy.worker import tune_collector

    assert upstream is not None
    proxy = Proxy(ProxySettings(upstream_of(upstream), port=0))
    await proxy.start()
    tune_collector()  # as the command does once it listens
    print(proxy.port, flush=True)
    await stop
    await proxy.stop()


def main(argv: list[str]) -> None:
    role = argv[0]
    asyncio.run(_serve(role, argv[1] if len(argv) > 1 else None))


if __name__ == "__main__":
    main(sys.argv[1:])
