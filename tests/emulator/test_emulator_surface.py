"""The emulator's wider API surface: background responses, conversation items, input-token counts,
compaction's errors and WebSocket mode, each exercised through the real openai clients over loopback."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.resources.responses import Responses

from otel_responses.emulator import Emulator, EmulatorConfig

from ..support import json_from_python

MODEL = "gpt-4.1"
REASONER = "o4-mini"
LOOKUP_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "lookup",
    "description": "Look a thing up.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}
HAS_CONNECT = hasattr(Responses, "connect") and importlib.util.find_spec("websockets") is not None
needs_connect = pytest.mark.skipif(
    not HAS_CONNECT, reason="responses.connect() (WebSocket mode) arrived in openai 2.22 and needs `websockets`"
)


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def client(emu: Emulator) -> Iterator[openai.OpenAI]:
    with emu.client() as sdk_client:
        yield sdk_client


def count_input_tokens(client: openai.OpenAI, **body: Any) -> int:
    """`responses.input_tokens.count`, or the same endpoint through the generic `post` on SDKs without it."""
    if hasattr(client.responses, "input_tokens"):
        counted = client.responses.input_tokens.count(**body)
        assert counted.object == "response.input_tokens"
        return counted.input_tokens
    raw = client.post("/responses/input_tokens", cast_to=object, body=body)
    assert isinstance(raw, dict)
    assert raw["object"] == "response.input_tokens"
    return int(raw["input_tokens"])


# -- background responses ---------------------------------------------------------------------------------------------


def test_background_response_advances_with_each_poll_to_its_output(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(items=[{"role": "user", "content": "The marker is bg1."}])
    queued = client.responses.create(
        model=MODEL, input="What is the marker?", conversation=conversation.id, background=True
    )
    assert (queued.status, queued.background, queued.output, queued.usage) == ("queued", True, [], None)

    # The model answers from the context at creation: a marker added to the conversation afterwards is not seen.
    client.conversations.items.create(conversation.id, items=[{"role": "user", "content": "The marker is late."}])
    polls = [client.responses.retrieve(queued.id) for _ in range(3)]  # background_polls defaults to 2
    assert [p.status for p in polls] == ["in_progress", "in_progress", "completed"]
    assert [p.output for p in polls[:2]] == [[], []]
    done = polls[-1]
    assert done.output_text == "marker=bg1"
    assert done.usage is not None
    assert done.usage.input_tokens > 0
    assert client.responses.retrieve(queued.id).output_text == "marker=bg1"  # finished stays finished

    # Its turn was added to the conversation when it finished.
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [getattr(item, "role", None) for item in items] == ["user", "user", "user", "assistant"]
    assert items[-1].id == done.output[-1].id


def test_background_polls_is_configurable() -> None:
    with Emulator(EmulatorConfig(background_polls=0)) as emulator, emulator.client() as client:
        queued = client.responses.create(model=MODEL, input="The marker is quick.", background=True)
        assert queued.status == "queued"
        done = client.responses.retrieve(queued.id)
        assert (done.status, done.output_text) == ("completed", "Noted marker quick.")
        # Once finished it is a parent like any other.
        follow = client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=queued.id)
        assert follow.output_text == "marker=quick"


def test_background_requires_store(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, input="hi", background=True, store=False)
    assert bad.value.status_code == 400
    assert bad.value.param == "background"
    assert "store" in bad.value.message


def test_unfinished_background_parent_cannot_be_continued(client: openai.OpenAI) -> None:
    queued = client.responses.create(model=MODEL, input="The marker is early.", background=True)
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, input="What is the marker?", previous_response_id=queued.id)
    assert bad.value.param == "previous_response_id"
    assert "in progress" in bad.value.message


def test_cancel_background_response(client: openai.OpenAI) -> None:
    queued = client.responses.create(model=MODEL, input="The marker is never.", background=True)
    cancelled = client.responses.cancel(queued.id)
    assert (cancelled.id, cancelled.status, cancelled.output) == (queued.id, "cancelled", [])
    after = client.responses.retrieve(queued.id)
    assert (after.status, after.output) == ("cancelled", [])  # polling no longer advances it

    finished = client.responses.create(model=MODEL, input="The marker is done.", background=True)
    for _ in range(3):
        done = client.responses.retrieve(finished.id)
    assert done.status == "completed"
    again = client.responses.cancel(finished.id)  # a finished background response comes back unchanged
    assert (again.status, again.output_text) == ("completed", "Noted marker done.")

    foreground = client.responses.create(model=MODEL, input="hi")
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.cancel(foreground.id)
    assert bad.value.status_code == 400
    assert "background=true" in bad.value.message
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel("resp_missing")


def test_streamed_background_create_streams_as_usual(client: openai.OpenAI) -> None:
    with client.responses.stream(model=MODEL, input="The marker is s1.", background=True) as stream:
        final = stream.get_final_response()
    assert (final.status, final.background, final.output_text) == ("completed", True, "Noted marker s1.")
    assert client.responses.retrieve(final.id).status == "completed"


# -- conversation items -----------------------------------------------------------------------------------------------


def test_conversation_items_create_retrieve_list_delete(client: openai.OpenAI) -> None:
    conversation = client.conversations.create()
    added = client.conversations.items.create(
        conversation.id,
        items=[
            {"type": "message", "role": "user", "content": "The marker is ci1."},
            {"type": "message", "role": "user", "content": "Just chatting."},
        ],
    )
    assert added.object == "list"
    assert added.has_more is False
    ids = [item.id for item in added.data]
    assert len(ids) == 2
    assert all(ids)
    assert len(set(ids)) == 2
    assert (added.first_id, added.last_id) == (ids[0], ids[1])

    # Items added this way are context of later responses in the conversation.
    knows = client.responses.create(model=MODEL, input="What is the marker?", conversation=conversation.id)
    assert knows.output_text == "marker=ci1"

    assert ids[0] is not None
    fetched = client.conversations.items.retrieve(ids[0], conversation_id=conversation.id)
    assert fetched.id == ids[0]
    assert fetched.type == "message"
    assert fetched.content[0].text == "The marker is ci1."  # type: ignore[union-attr]
    with pytest.raises(openai.NotFoundError) as missing:
        client.conversations.items.retrieve("msg_missing", conversation_id=conversation.id)
    assert "msg_missing" in missing.value.message

    listed = client.conversations.items.list(conversation.id, order="asc")
    assert [item.id for item in listed.data][:2] == ids
    assert len(listed.data) == 4  # plus the question and the answer of the response above

    remaining = client.conversations.items.delete(ids[0], conversation_id=conversation.id)
    assert (remaining.id, remaining.object) == (conversation.id, "conversation")
    assert ids[0] not in [item.id for item in client.conversations.items.list(conversation.id).data]
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.delete(ids[0], conversation_id=conversation.id)
    forgot = client.responses.create(model=MODEL, input="Marker again?", conversation=conversation.id)
    assert forgot.output_text == "marker=unknown"

    with pytest.raises(openai.NotFoundError):
        client.conversations.items.create("conv_missing", items=[{"role": "user", "content": "hi"}])


def test_conversation_items_include_encrypted_reasoning(client: openai.OpenAI) -> None:
    conversation = client.conversations.create()
    client.responses.create(model=REASONER, input="Please choose a code word.", conversation=conversation.id)
    plain = client.conversations.items.list(conversation.id, order="asc").data
    sealed = client.conversations.items.list(conversation.id, order="asc", include=["reasoning.encrypted_content"]).data
    assert [item.type for item in plain] == ["message", "reasoning", "message"]
    assert getattr(plain[1], "encrypted_content", None) is None
    assert getattr(sealed[1], "encrypted_content", None)


def test_update_conversation_metadata(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(metadata={"topic": "a"})
    updated = client.conversations.update(conversation.id, metadata={"topic": "b", "owner": "me"})
    assert (updated.id, updated.metadata) == (conversation.id, {"topic": "b", "owner": "me"})
    assert client.conversations.retrieve(conversation.id).metadata == {"topic": "b", "owner": "me"}
    with pytest.raises(openai.NotFoundError):
        client.conversations.update("conv_missing", metadata={"k": "v"})


# -- input tokens -----------------------------------------------------------------------------------------------------


def test_input_tokens_equal_what_create_reports(client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, input="The marker is it1.", instructions="Be brief.")
    requests: list[dict[str, Any]] = [
        {"model": MODEL, "input": "Hello there."},
        {"model": MODEL, "input": "What is the marker?", "previous_response_id": first.id, "instructions": "Terse."},
        {"model": MODEL, "input": "Please use lookup for me.", "tools": [LOOKUP_TOOL]},
    ]
    conversation = client.conversations.create(items=[{"role": "user", "content": "The marker is it2."}])
    requests.append({"model": MODEL, "input": "What is the marker?", "conversation": conversation.id})
    for body in requests:
        counted = count_input_tokens(client, **body)
        created = client.responses.create(**body)
        assert created.usage is not None
        assert counted == created.usage.input_tokens, body
    # A longer context counts more.
    assert count_input_tokens(client, model=MODEL, input="x" * 400) > count_input_tokens(client, model=MODEL, input="x")


def test_input_tokens_spend_no_ids_and_share_create_errors() -> None:
    with Emulator() as plain, Emulator() as counting, plain.client() as a, counting.client() as b:
        a_first = a.responses.create(model=MODEL, input="one")
        b_first = b.responses.create(model=MODEL, input="one")
        count_input_tokens(b, model=MODEL, input="two", previous_response_id=b_first.id)
        assert a.responses.create(model=MODEL, input="two").id == b.responses.create(model=MODEL, input="two").id
        assert a_first.id == b_first.id
        unstored = b.responses.create(model=MODEL, input="The marker is gone.", store=False)
        with pytest.raises(openai.BadRequestError) as bad:
            count_input_tokens(b, model=MODEL, input="What?", previous_response_id=unstored.id)
        assert bad.value.code == "previous_response_not_found"


# -- compaction -------------------------------------------------------------------------------------------------------


def compact(client: openai.OpenAI, **body: Any) -> object:
    """`responses.compact`, or the same endpoint through the generic `post` on SDKs without it (< 2.9)."""
    if hasattr(client.responses, "compact"):
        return client.responses.compact(**body)
    return client.post("/responses/compact", cast_to=object, body=body)


def test_compact_rejects_unusable_parents_like_create(client: openai.OpenAI) -> None:
    unstored = client.responses.create(model=MODEL, input="The marker is c1.", store=False)
    with pytest.raises(openai.BadRequestError) as compact_error:
        compact(client, model=MODEL, previous_response_id=unstored.id)
    with pytest.raises(openai.BadRequestError) as create_error:
        client.responses.create(model=MODEL, input="hi", previous_response_id=unstored.id)
    assert compact_error.value.body == create_error.value.body
    assert compact_error.value.code == "previous_response_not_found"

    queued = client.responses.create(model=MODEL, input="The marker is c2.", background=True)
    with pytest.raises(openai.BadRequestError) as pending:
        compact(client, model=MODEL, previous_response_id=queued.id)
    assert pending.value.param == "previous_response_id"


# -- WebSocket mode ---------------------------------------------------------------------------------------------------


def _until_done(connection: Any) -> tuple[list[str], Any]:
    """Events of one response.create: (their types, the final event)."""
    types: list[str] = []
    for event in connection:
        types.append(event.type)
        if event.type in ("response.completed", "response.incomplete", "response.failed", "error"):
            return types, event
    raise AssertionError(f"the connection closed after {types}")


@needs_connect
def test_websocket_two_turn_chain_over_one_connection(emu: Emulator, client: openai.OpenAI) -> None:
    before = len(emu.requests)
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input="The marker is ws1.")
        types, first = _until_done(connection)
        assert types[:2] == ["response.created", "response.in_progress"]
        assert "response.output_text.delta" in types
        assert types[-1] == "response.completed"
        assert first.response.output_text == "Noted marker ws1."

        connection.response.create(model=MODEL, input="What is the marker?", previous_response_id=first.response.id)
        _, second = _until_done(connection)
        assert second.type == "response.completed"
        assert second.response.output_text == "marker=ws1"
        assert second.response.previous_response_id == first.response.id

    # Stored as over HTTP, and the same chain continues there.
    assert client.responses.retrieve(second.response.id).output_text == "marker=ws1"
    over_http = client.responses.create(model=MODEL, input="Marker?", previous_response_id=second.response.id)
    assert over_http.output_text == "marker=ws1"
    seen = emu.requests[before:]
    assert (seen[0].method, seen[0].path, seen[0].headers["upgrade"].lower()) == ("GET", "/v1/responses", "websocket")
    assert [r.body["type"] for r in seen if r.method == "WEBSOCKET"] == ["response.create", "response.create"]


@needs_connect
def test_websocket_store_false_parent(client: openai.OpenAI) -> None:
    unstored_over_http = client.responses.create(model=MODEL, input="The marker is h1.", store=False)
    with client.responses.connect() as connection:
        # A store=false parent made elsewhere is unknown, as over HTTP; the connection stays usable.
        connection.response.create(model=MODEL, input="Marker?", previous_response_id=unstored_over_http.id)
        _, error = _until_done(connection)
        assert error.type == "error"
        assert error.status == 400
        assert error.error.code == "previous_response_not_found"
        assert error.error.param == "previous_response_id"
        assert error.error.type == "invalid_request_error"

        # The connection's own most recent response can be continued even unstored (connection-local cache)...
        connection.response.create(model=MODEL, input="The marker is l1.", store=False)
        _, first = _until_done(connection)
        connection.response.create(model=MODEL, input="What is the marker?", previous_response_id=first.response.id)
        _, second = _until_done(connection)
        assert second.response.output_text == "marker=l1"
        # ...but once another response came after it, an unstored one is gone.
        connection.response.create(model=MODEL, input="Marker?", previous_response_id=first.response.id, store=False)
        _, gone = _until_done(connection)
        assert gone.type == "error"
        assert gone.error.code == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.response.id)


def test_websocket_warm_up_prepares_state_and_generates_nothing(emu: Emulator) -> None:
    """`generate: false` (the API's WebSocket warm-up): a completed response with no output, unstored here as asked,
    that the next turn on the same connection continues; another connection cannot."""
    sync_client = pytest.importorskip("websockets.sync.client")
    url = emu.base_url.replace("http://", "ws://") + "/responses"

    def create(socket: Any, **body: Any) -> dict[str, Any]:
        socket.send(json.dumps({"type": "response.create", "model": REASONER, "store": False, **body}))
        while (event := json.loads(socket.recv()))["type"] not in ("response.completed", "error"):
            pass
        return dict(event)

    with sync_client.connect(url) as socket:
        warm = create(socket, input=[{"role": "user", "content": "The marker is wu1."}], generate=False)
        assert warm["type"] == "response.completed"
        assert (warm["response"]["status"], warm["response"]["output"]) == ("completed", [])
        assert warm["response"]["usage"]["output_tokens"] == 0
        assert warm["response"]["usage"]["input_tokens"] > 0
        turn = create(socket, input="What is the marker?", previous_response_id=warm["response"]["id"])
        assert turn["response"]["output"][-1]["content"][0]["text"] == "marker=wu1"  # the warm-up's input is context
        assert create(socket, input="hi", generate="no")["error"]["param"] == "generate"
    with sync_client.connect(url) as other:
        gone = create(other, input="Marker?", previous_response_id=warm["response"]["id"])
        assert gone["error"]["code"] == "previous_response_not_found"


@needs_connect
def test_websocket_rejects_background_and_steer_fails(client: openai.OpenAI) -> None:
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input="hi", background=True)
        _, error = _until_done(connection)
        assert error.type == "error"
        assert error.error.param == "background"

        connection.response.create(model=MODEL, input="The marker is st1.")
        _, done = _until_done(connection)
        connection.response.steer(input="Also this.", previous_response_id=done.response.id)
        steer = connection.recv()
        assert steer.type == "response.steer.failed"
        assert steer.error.code == "response_already_completed"


@needs_connect
def test_websocket_async_client(emu: Emulator) -> None:
    async def main() -> tuple[str, str, str | None]:
        async with emu.async_client() as client, client.responses.connect() as connection:
            await connection.response.create(model=MODEL, input="The marker is aw1.")
            async for first in connection:
                if first.type == "response.completed":
                    break
            answered: Any = first
            await connection.response.create(model=MODEL, input="Marker?", previous_response_id=answered.response.id)
            async for second in connection:
                if second.type == "response.completed":
                    break
            await connection.response.create(model=MODEL, input="hi", previous_response_id="resp_missing")
            async for error in connection:
                if error.type == "error":
                    break
            done: Any = (first, second, error)
            return done[0].response.output_text, done[1].response.output_text, done[2].error.code

    assert asyncio.run(main()) == ("Noted marker aw1.", "marker=aw1", "previous_response_not_found")


def test_websocket_raw_protocol_on_any_sdk(emu: Emulator) -> None:
    """The wire protocol with the `websockets` client itself, so it is checked on SDKs without `connect()` too."""
    sync_client = pytest.importorskip("websockets.sync.client")
    url = emu.base_url.replace("http://", "ws://") + "/responses"
    with sync_client.connect(url, additional_headers={"Authorization": "Bearer emulator-key"}) as socket:
        socket.send(
            json.dumps({"type": "response.create", "model": MODEL, "input": "The marker is r1.", "stream_id": "a"})
        )
        events: list[Any] = []
        while not events or events[-1]["type"] != "response.completed":
            events.append(json.loads(socket.recv()))
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert {e["stream_id"] for e in events} == {"a"}
        first = events[-1]["response"]
        socket.send(
            json.dumps(
                {"type": "response.create", "model": MODEL, "input": "Marker?", "previous_response_id": first["id"]}
            )
        )
        while (event := json.loads(socket.recv()))["type"] != "response.completed":
            pass
        assert event["response"]["output"][-1]["content"][0]["text"] == "marker=r1"
        socket.send("not json")
        assert json.loads(socket.recv())["error"]["type"] == "invalid_request_error"


def test_websocket_without_the_library_is_501() -> None:
    """The upgrade is answered 501 with an API error body when `websockets` cannot be imported."""
    script = """
import http.client, json, sys
sys.modules["websockets"] = None  # as if it were not installed
from otel_responses.emulator import Emulator
with Emulator() as emulator:
    connection = http.client.HTTPConnection("127.0.0.1", emulator.port, timeout=10)
    connection.request("GET", "/v1/responses", headers={
        "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    })
    answer = connection.getresponse()
    print(json.dumps([answer.status, json.loads(answer.read())]))
"""
    status, body = json_from_python(script)
    assert status == 501
    assert "websockets" in body["error"]["message"]
    assert body["error"]["type"] == "server_error"
