"""The pure parts of the proxy, row by row with their near misses: which request is which operation (and with which
arguments, as the SDK method would have had them), which headers cross, how a body becomes the SDK's keywords, how a
compressed copy is decoded within its limit, and how a JSON answer reads as the SDK's model does."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from typing import Any

import openai
import pytest

from otel_responses._analysis.facts import response_facts
from otel_responses._calls.observer import Fields
from otel_responses._calls.paths import route
from otel_responses.config import settings_from
from otel_responses.proxy.encoding import NotAnalysed, decoder
from otel_responses.proxy.headers import client_response, upstream_handshake, upstream_request
from otel_responses.proxy.reading import Unreadable, request_keywords

from .test_forwarding_changes_nothing import RESPONSE

# (method, path, query, upstream root) -> (operation, args, kwargs, body, azure); None: not a recorded operation
ROUTES: list[
    tuple[tuple[str, str, dict[str, str], str], tuple[str, tuple[Any, ...], dict[str, Any], bool, bool] | None]
] = [
    (("POST", "/v1/responses", {}, "/v1"), ("chat", (), {}, True, False)),
    (("post", "/v1/responses/", {}, "/v1"), ("chat", (), {}, True, False)),  # a trailing slash, a lowercase method
    (("GET", "/v1/responses", {}, "/v1"), None),  # the near miss: a GET of the collection (WebSocket mode's path)
    (("POST", "/v1/responses/compact", {}, "/v1"), ("compact_response", (), {}, True, False)),
    (("POST", "/v1/responses/input_tokens", {}, "/v1"), ("count_input_tokens", (), {}, True, False)),
    (("GET", "/v1/responses/resp_1", {}, "/v1"), ("fetch_response", ("resp_1",), {}, False, False)),
    (
        ("GET", "/v1/responses/resp_1", {"stream": "true"}, "/v1"),
        ("fetch_response", ("resp_1",), {"stream": True}, False, False),
    ),
    (("GET", "/v1/responses/resp_1", {"stream": "false"}, "/v1"), ("fetch_response", ("resp_1",), {}, False, False)),
    (("GET", "/v1/responses/resp%5F1", {}, "/v1"), ("fetch_response", ("resp_1",), {}, False, False)),
    (("DELETE", "/v1/responses/resp_1", {}, "/v1"), ("delete_response", ("resp_1",), {}, False, False)),
    (("POST", "/v1/responses/resp_1", {}, "/v1"), None),  # no such operation
    (("POST", "/v1/responses/resp_1/cancel", {}, "/v1"), ("cancel_response", ("resp_1",), {}, False, False)),
    (("GET", "/v1/responses/resp_1/cancel", {}, "/v1"), None),
    (
        ("GET", "/v1/responses/resp_1/input_items", {"limit": "5"}, "/v1"),
        ("list_input_items", ("resp_1",), {}, False, False),
    ),
    (("POST", "/v1/conversations", {}, "/v1"), ("create_conversation", (), {}, True, False)),
    (("GET", "/v1/conversations/conv_1", {}, "/v1"), ("retrieve_conversation", ("conv_1",), {}, False, False)),
    (("POST", "/v1/conversations/conv_1", {}, "/v1"), ("update_conversation", ("conv_1",), {}, True, False)),
    (("DELETE", "/v1/conversations/conv_1", {}, "/v1"), ("delete_conversation", ("conv_1",), {}, False, False)),
    (("GET", "/v1/conversations/conv_1/items", {}, "/v1"), ("list_conversation_items", ("conv_1",), {}, False, False)),
    (
        ("POST", "/v1/conversations/conv_1/items", {}, "/v1"),
        ("create_conversation_items", ("conv_1",), {}, True, False),
    ),
    (
        ("GET", "/v1/conversations/conv_1/items/msg_1", {}, "/v1"),
        ("retrieve_conversation_item", ("msg_1",), {"conversation_id": "conv_1"}, False, False),
    ),
    (
        ("DELETE", "/v1/conversations/conv_1/items/msg_1", {}, "/v1"),
        ("delete_conversation_item", ("msg_1",), {"conversation_id": "conv_1"}, False, False),
    ),
    (("GET", "/v1/conversations/conv_1/items/msg_1/x", {}, "/v1"), None),
    (("POST", "/v1/chat/completions", {}, "/v1"), None),
    (("GET", "/v1/models", {}, "/v1"), None),
    (("POST", "/responses", {}, ""), ("chat", (), {}, True, False)),  # an upstream without a path
    (("POST", "/gateway/v1/responses", {}, "/gateway/v1"), ("chat", (), {}, True, False)),  # a gateway's prefix
    (("POST", "/gateway/v1/responses", {}, "/v1"), None),  # the near miss: another prefix than the upstream's
    (("POST", "/openai/responses", {"api-version": "2025-04-01-preview"}, ""), ("chat", (), {}, True, True)),
    (("POST", "/openai/v1/responses", {}, ""), ("chat", (), {}, True, True)),
    (("POST", "/openai/deployments/gpt-4o/responses", {}, "/v1"), ("chat", (), {}, True, True)),
    (("GET", "/openai/responses/resp_1", {}, ""), ("fetch_response", ("resp_1",), {}, False, True)),
    (("POST", "/openai/v1/responses", {}, "/openai/v1"), ("chat", (), {}, True, True)),  # Azure's root, given
    (("POST", "/openai-gw/v1/responses", {}, "/openai-gw/v1"), ("chat", (), {}, True, False)),  # the near miss
    (("POST", "/gw/openai/v1/responses", {}, "/gw/openai/v1"), ("chat", (), {}, True, True)),  # under a prefix
    (("POST", "/gw/v1/openai/responses", {}, "/gw/v1"), ("chat", (), {}, True, True)),  # Azure's under a root
    (("POST", "/gw/v1/openai/responses", {}, "/gw"), None),  # the near miss: a version before Azure's prefix
    (("POST", "/v1", {}, "/v1"), None),
    (("POST", "responses", {}, ""), None),
]


@pytest.mark.parametrize(("request_line", "expected"), ROUTES)
def test_a_request_is_the_operation_the_sdk_method_would_have_called(
    request_line: tuple[str, str, dict[str, str], str],
    expected: tuple[str, tuple[Any, ...], dict[str, Any], bool, bool] | None,
) -> None:
    found = route(*request_line)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert (found.operation.name, found.args, found.kwargs, found.body, found.azure) == expected


def test_hop_by_hop_headers_stay_on_their_hop_both_ways() -> None:
    sent = [
        ("Authorization", "Bearer k"),
        ("Connection", "keep-alive, X-Private"),
        ("X-Private", "1"),
        ("Keep-Alive", "timeout=5"),
        ("Transfer-Encoding", "chunked"),
        ("TE", "trailers"),
        ("Trailer", "X-T"),
        ("Upgrade", "h2c"),
        ("Proxy-Authorization", "Basic x"),
        ("Proxy-Connection", "keep-alive"),
        ("Host", "proxy:8787"),
        ("Content-Length", "5"),
        ("Expect", "100-continue"),
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        ("X-Twice", "a"),
        ("X-Twice", "b"),
    ]
    assert list(upstream_request(sent).items()) == [
        ("Authorization", "Bearer k"),
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        ("X-Twice", "a"),
        ("X-Twice", "b"),
    ]
    handshake = [*sent, ("Sec-WebSocket-Key", "k"), ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Protocol", "p")]
    assert list(upstream_handshake(handshake).items()) == list(upstream_request(sent).items())
    answered = [("Content-Length", "5"), ("Connection", "X-Hop"), ("X-Hop", "1"), ("Content-Encoding", "gzip")]
    assert list(client_response(answered).items()) == [("Content-Length", "5"), ("Content-Encoding", "gzip")]


@pytest.mark.parametrize(
    ("body", "encoding", "expected"),
    [
        (b'{"model": "m", "input": "hi"}', None, {"model": "m", "input": "hi"}),
        (gzip.compress(b'{"model": "m"}'), "gzip", {"model": "m"}),
        (
            b'{"model": "m", "extra_body": {"x": 1}, "extra_headers": {"X-Stainless-Raw-Response": "stream"}}',
            None,
            {"model": "m"},
        ),
        (b'{"model": "m"', None, "invalid_json"),  # cut short
        (b"[1, 2]", None, "invalid_json"),  # JSON, not an object
        (b"model=m", None, "invalid_json"),
        (b'{"model": "m"}', "gzip", "corrupt_encoding"),  # the near miss of the second row: said compressed, but is not
        (gzip.compress(b'{"model": "m"}'), "compress", "unsupported_encoding"),  # a coding this cannot decode
        (b"", None, "invalid_json"),
    ],
    ids=["json", "gzip", "sdk-only-keys", "cut", "array", "form", "not-gzip", "unknown-coding", "empty"],
)
def test_a_body_is_the_sdk_methods_keywords(body: bytes, encoding: str | None, expected: dict[str, Any] | str) -> None:
    """A body the proxy cannot read says why (the reason it is counted under)."""
    try:
        found: dict[str, Any] | str = request_keywords(body, encoding, 1_000_000)
    except Unreadable as unreadable:
        found = unreadable.reason
    assert found == expected


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    compressed: bytes = zstandard.ZstdCompressor().compress(data)
    return compressed


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send it
        ("identity, gzip", gzip.compress),
        ("gzip, gzip", lambda data: gzip.compress(gzip.compress(data))),
        ("zstd", _zstd),
    ],
)
def test_a_compressed_body_is_decoded_chunk_by_chunk(encoding: str, pack: Any) -> None:
    data = json.dumps(RESPONSE).encode() * 20
    packed = pack(data)
    decode = decoder(encoding, 1_000_000)
    assert decode is not None
    assert b"".join(decode(packed[i : i + 7]) for i in range(0, len(packed), 7)) == data


def test_a_decoded_copy_stops_at_its_limit_and_at_a_corrupt_stream() -> None:
    bomb = gzip.compress(b"0" * 5_000_000)
    decode = decoder("gzip", 1_000_000)
    assert decode is not None
    with pytest.raises(NotAnalysed):
        decode(bomb)
    plain = decoder(None, 10)
    assert plain is not None
    assert plain(b"0123456789") == b"0123456789"
    with pytest.raises(NotAnalysed):  # the near miss: one byte over
        plain(b"x")
    corrupt = decoder("gzip", 1_000_000)
    assert corrupt is not None
    with pytest.raises(NotAnalysed):
        corrupt(b"\x1f\x8b\x08\x00garbage-after-a-gzip-magic")
    assert decoder("compress", 10) is None


def _zlib_parts(wbits: int) -> Any:
    """A stream made of two parts: the first flushed whole (it decodes alone), the second the rest."""

    def parts(first: bytes, second: bytes) -> tuple[bytes, bytes]:
        packer = zlib.compressobj(wbits=wbits)
        head = packer.compress(first) + packer.flush(zlib.Z_SYNC_FLUSH)
        return head, packer.compress(second) + packer.flush()

    return parts


def _zstd_parts(first: bytes, second: bytes) -> tuple[bytes, bytes]:
    zstandard = pytest.importorskip("zstandard")
    packer = zstandard.ZstdCompressor().compressobj()
    head = packer.compress(first) + packer.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    return head, packer.compress(second) + packer.flush()


LIMIT = 1000
CODECS = [("gzip", _zlib_parts(31)), ("deflate", _zlib_parts(15)), ("zstd", _zstd_parts)]


@pytest.mark.parametrize(("encoding", "parts"), CODECS, ids=[c[0] for c in CODECS])
@pytest.mark.parametrize(
    ("size", "analysed"),
    [(LIMIT - 1, True), (LIMIT, True), (LIMIT + 1, False)],
    ids=["limit-1", "limit", "limit+1"],
)
def test_a_decoded_copy_holds_up_to_its_limit_exactly(encoding: str, parts: Any, size: int, analysed: bool) -> None:
    head, tail = parts(b"a" * size, b"")
    decode = decoder(encoding, LIMIT)
    assert decode is not None
    if analysed:
        assert decode(head) + decode(tail) == b"a" * size
    else:
        with pytest.raises(NotAnalysed):  # the head holds all of it
            decode(head)


# zlib stops at one byte past the room; zstandard has no output bound and stops after a 256-byte slice (~8 MiB)
BOMB_PEAK = {"gzip": 1 << 20, "deflate": 1 << 20, "zstd": 16 << 20}


@pytest.mark.parametrize(("encoding", "parts"), CODECS, ids=[c[0] for c in CODECS])
@pytest.mark.parametrize("filled", [LIMIT, LIMIT - 1], ids=["room-filled", "one-byte-of-room"])
def test_a_bomb_after_chunks_that_fill_the_room_is_stopped_bounded(encoding: str, parts: Any, filled: int) -> None:
    head, bomb = parts(b"a" * filled, b"0" * 50_000_000)
    decode = decoder(encoding, LIMIT)
    assert decode is not None
    assert decode(head) == b"a" * filled
    tracemalloc.start()
    try:
        with pytest.raises(NotAnalysed):
            decode(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < BOMB_PEAK[encoding]


def test_a_json_answer_reads_as_the_sdks_model_does() -> None:
    settings = settings_from({"hash_key": "read-as-the-sdk"})
    body = {
        **RESPONSE,
        "store": False,
        "incomplete_details": {"reason": "max_output_tokens"},
        "status": "incomplete",
        "usage": {
            "input_tokens": 11,
            "output_tokens": 7,
            "total_tokens": 18,
            "input_tokens_details": {"cached_tokens": 2},
            "output_tokens_details": {"reasoning_tokens": 3},
        },
        "conversation": {"id": "conv_1"},
        "service_tier": "default",
        "output": [
            *RESPONSE["output"],
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA" + "b" * 40},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "f",
                "arguments": "{}",
                "status": "completed",
            },
        ],
    }
    model = openai.types.responses.Response.construct(**json.loads(json.dumps(body)))
    from_model = response_facts(model, settings, "req_1")
    from_json = response_facts(Fields.read(json.loads(json.dumps(body))), settings, "req_1")
    assert from_json == from_model
    assert (from_json.finish_reason, from_json.cached_tokens, from_json.reasoning_tokens) == ("max_output_tokens", 2, 3)
    assert (from_json.conversation_id, from_json.store, from_json.encrypted_output_count) == ("conv_1", False, 1)
    # The near miss: a plain dict, read by attribute, says nothing.
    assert response_facts(json.loads(json.dumps(body)), settings, "req_1").output_items == ()


def test_fields_wrap_nested_objects_as_they_are_read_and_leave_other_values_alone() -> None:
    fields = Fields.read({"usage": {"input_tokens_details": {"cached_tokens": 4}}, "output": [{"type": "message"}]})
    assert fields.usage.input_tokens_details.cached_tokens == 4
    assert type(fields.output[0]) is dict  # items are read as dicts already: never copied
    assert Fields.read([1, 2]) == [1, 2]
    assert Fields.read("text") == "text"
    with pytest.raises(AttributeError):
        _ = fields.missing
