"""End to end, as a user runs it: ``curl`` and the real Python SDK against the emulator, once directly and once through
the proxy (the emulator reset in between, so ids repeat). What each client receives is byte for byte the same —
status, the API's headers, every body byte, every streamed event — but for what the emulator makes afresh each
time: encrypted payloads (re-encrypted on every serialisation: compared by length) and timestamps. Through the
proxy, each call carries exactly the signals it should."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import openai

from otel_responses.emulator import Emulator

from ..programs import program
from .support import proxied

_OPAQUE = re.compile(rb'"(encrypted_content|fingerprint)":\s*"([^"]*)"')
_CLOCK = re.compile(rb'"(created_at|completed_at)":\s*\d+')
API_HEADERS = ("content-type", "x-request-id", "content-length", "cache-control")


def normalised(body: bytes) -> bytes:
    """A body with each opaque payload replaced by its length and each timestamp by 0."""
    body = _OPAQUE.sub(lambda m: b'"%s": <%d>' % (m[1], len(m[2])), body)
    return _CLOCK.sub(lambda m: b'"%s": 0' % m[1], body)


def _curl(method: str, url: str, body: Any = None) -> tuple[int, dict[str, str], bytes]:
    curl = program("curl")
    command = [curl, "-sS", "-N", "-X", method, url, "-H", "Authorization: Bearer sk-curl-key", "-D", "-"]
    if body is not None:
        command += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    done = subprocess.run(command, capture_output=True, timeout=60, check=True)
    head, _, content = done.stdout.partition(b"\r\n\r\n")
    while head.split(b" ", 2)[1].startswith(b"1"):  # `100 Continue`: curl sends `Expect` with a larger body
        head, _, content = content.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), {k: headers[k] for k in API_HEADERS if k in headers}, content


def curl_session(base_url: str) -> list[tuple[int, dict[str, str], bytes]]:
    """A session by hand: a create, a chain, a stream, a retrieve, its input items, a tool round trip by replay,
    a conversation, a compaction and an API error."""
    answers = []

    def call(method: str, path: str, body: Any = None) -> Any:
        answer = _curl(method, base_url + path, body)
        answers.append(answer)
        return json.loads(answer[2]) if answer[1].get("content-type", "").startswith("application/json") else None

    first = call(
        "POST",
        "/responses",
        {"model": "gpt-5.4", "instructions": "Be brief.", "input": "Remember this: the marker is C-1."},
    )
    call(
        "POST",
        "/responses",
        {
            "model": "gpt-5.4",
            "instructions": "Be brief.",
            "input": "What is the marker?",
            "previous_response_id": first["id"],
        },
    )
    call(
        "POST",
        "/responses",
        {"model": "gpt-5.4", "input": "Stream it.", "previous_response_id": first["id"], "stream": True},
    )
    call("GET", f"/responses/{first['id']}")
    call("GET", f"/responses/{first['id']}/input_items")
    tools = [{"type": "function", "name": "lookup_order", "parameters": {"type": "object", "properties": {}}}]
    history: list[Any] = [{"role": "user", "content": "Please use lookup_order for order 42."}]

    def replayed() -> Any:
        body = {"model": "gpt-5.4", "input": history, "tools": tools, "store": False}
        return call("POST", "/responses", {**body, "include": ["reasoning.encrypted_content"]})

    turn = replayed()
    history += turn["output"]
    calls = [item for item in turn["output"] if item["type"] == "function_call"]
    history += [{"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "shipped"}]
    replayed()
    conversation = call("POST", "/conversations", {})
    call(
        "POST",
        "/responses",
        {"model": "gpt-5.4", "conversation": conversation["id"], "input": "Remember this: the marker is C-2."},
    )
    call("POST", "/responses/compact", {"model": "gpt-5.4", "input": history})
    call(
        "POST",
        "/responses",
        {"model": "gpt-5.4", "input": "hi", "conversation": conversation["id"], "previous_response_id": first["id"]},
    )
    return answers


def sdk_session(client: openai.OpenAI) -> list[bytes]:
    """The SDK's raw bodies of a chain that forgets its instructions, a stream, and a replay of only the text."""
    bodies = []
    first_turn: Any = {"role": "user", "content": "Remember this: the marker is S-1."}
    raw = client.responses.with_raw_response.create(
        model="gpt-5.4", instructions="Be brief.", input=[first_turn], include=["reasoning.encrypted_content"]
    )
    bodies.append(raw.content)
    first = raw.parse()
    raw = client.responses.with_raw_response.create(
        model="gpt-5.4", input="What is the marker?", previous_response_id=first.id
    )
    bodies.append(raw.content)
    with client.responses.with_streaming_response.create(
        model="gpt-5.4", input="Remember this: the marker is S-2.", stream=True
    ) as streamed:
        bodies.append(b"".join(streamed.iter_bytes()))
    replay: Any = [first_turn, {"role": "assistant", "content": first.output_text}, {"role": "user", "content": "?"}]
    raw = client.responses.with_raw_response.create(model="gpt-5.4", instructions="Be brief.", input=replay)
    bodies.append(raw.content)
    return bodies


def _twice(
    session: Callable[[Any], Any], direct: Callable[[Emulator], Any], via: Callable[[str], Any], calls: int
) -> tuple[Any, Any, list[Any]]:
    """The session directly, then through the proxy against the reset emulator: both answers and the proxy's spans."""
    with Emulator() as emulator:
        first = session(direct(emulator))
        emulator.reset()
        with proxied(emulator.base_url) as through:
            second = session(via(through.base_url))
            spans = through.wait_for_spans(calls)
    return first, second, spans


def test_curl_receives_through_the_proxy_byte_for_byte_what_it_receives_directly() -> None:
    direct, relayed, spans = _twice(curl_session, lambda emulator: emulator.base_url, lambda url: url, 11)
    assert len(direct) == len(relayed) == 11
    for number, ((status, headers, body), (status2, headers2, body2)) in enumerate(zip(direct, relayed, strict=True)):
        assert (status2, headers2) == (status, headers), number
        assert normalised(body2) == normalised(body), number
    assert direct[2][1]["content-type"].startswith("text/event-stream")
    assert direct[-1][0] == 400
    assert [tuple((s.attributes or {})["openai_responses.signals"]) for s in spans] == [
        (),
        (),
        ("instructions_dropped", "concurrent_branch"),  # the stream continues the first turn too, unbidden
        (),
        (),
        (),
        (),
        (),
        (),
        ("compaction",),
        ("state_mode_conflict",),
    ]


def test_the_sdk_receives_the_same_bytes_and_each_call_carries_exactly_its_signals() -> None:
    def client(url: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=url, api_key="sk-sdk-key", max_retries=0)

    direct, relayed, spans = _twice(sdk_session, lambda emulator: client(emulator.base_url), client, 4)
    assert [normalised(b) for b in relayed] == [normalised(b) for b in direct]
    assert b'"encrypted_content": <' in normalised(direct[0])  # compared, by length
    assert [tuple((s.attributes or {})["openai_responses.signals"]) for s in spans] == [
        (),
        ("instructions_dropped",),
        (),
        # Only the text replayed (the earlier turn's reasoning: gpt-5.4's current_turn renders it back no more, so no
        # loss); turn 2 continued it too.
        ("phase_dropped", "concurrent_branch"),
    ]
