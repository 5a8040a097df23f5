"""Leak fuzzing: secrets and payloads planted in every field of every item type never leave the process.

Hypothesis builds requests (and, through an in-process transport, responses, streams and error bodies) over every
item type of the Responses API, with a fresh high-entropy sentinel in each payload and secret field: message text
and content parts, `file_data`, `data:` image URLs, `encrypted_content`, instructions, tool arguments and outputs,
shell `action.env`, MCP `authorization`/`headers`/credentialed `server_url`, metadata values, `user`,
`safety_identifier`, `prompt_cache_key`, the API key, organisation and project, default and extra headers, response
headers and error messages. They are driven through the real client, sync, async and streaming, against the emulator
and against canned JSON. No sentinel — nor a 12-character piece of it, its base64, or a hex digest of it (sha256,
sha1, md5, blake2b; full or 16-character prefix) — may appear in any exported span name, attribute key or value,
event, status description, metric point attribute, or record of an `otel_responses` logger at any level. The items,
the canned responses and the detector are the corpus's (tests/corpus.py); the `exports` fixture is conftest's.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from collections.abc import Callable
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry._logs import LogRecord

from otel_responses.emulator import Emulator

from ..corpus import (
    CREATE_PARAMS,
    FUNCTION_TOOL,
    HAS_COMPACT,
    MODELS,
    STREAM_PARAMS,
    Canned,
    Exports,
    Secrets,
    answers,
    any_units,
    client_kwargs,
    decorations,
    emulator_session,
    every_method_sync,
    input_units,
    items_of,
    observe_output,
    output_units,
    param_sets,
    request_kwargs,
    safe_units,
    seeds,
)
from ..support import closing, fuzz_settings, mock_async_client, mock_client


@fuzz_settings(120)
@given(
    seed=seeds,
    deco=decorations,
    model=st.sampled_from(MODELS),
    store=st.booleans(),
    params=param_sets,
    units=safe_units,
)
def test_emulator_sync_session_exports_no_secret(
    emulator: Emulator,
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    model: str,
    store: bool,
    params: set[str],
    units: list[str],
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    with closing(emulator.client(**client_kwargs(s))) as client:
        emulator_session(client, s, model, store, params, units)
    exports.assert_clean(s)


@fuzz_settings(80)
@given(
    seed=seeds, deco=decorations, model=st.sampled_from(MODELS), store=st.booleans(), params=param_sets, units=any_units
)
def test_emulator_async_calls_export_no_secret(
    emulator: Emulator,
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    model: str,
    store: bool,
    params: set[str],
    units: list[str],
) -> None:
    """Async, with every unit type (fabricated encrypted content and dangling references come back as 400s)."""
    exports.reset()
    s = Secrets(seed, deco)

    async def run() -> None:
        client = emulator.async_client(**client_kwargs(s))
        try:
            kwargs = request_kwargs(s, params, "async")
            history: list[Any] = [{"role": "user", "content": s.text("async.first") + " Please use lookup."}]
            try:
                first = await client.responses.create(
                    model=model,
                    input=history,
                    store=store,
                    tools=[FUNCTION_TOOL],
                    include=["reasoning.encrypted_content"],
                )
            except openai.APIError:
                return
            observe_output(s, first)
            history += [*first.output, *answers(first, s), *items_of(units, s)]
            try:
                second = await client.responses.create(model=model, input=history, store=store, **kwargs)
                observe_output(s, second)
            except openai.APIError:
                pass
        finally:
            await client.close()

    asyncio.run(run())
    exports.assert_clean(s)


@fuzz_settings(80)
@given(
    seed=seeds,
    deco=decorations,
    model=st.sampled_from(MODELS),
    params=param_sets,
    how=st.sampled_from(["create", "helper", "async", "error event", "exception", "failure", "abandoned"]),
)
def test_emulator_streams_export_no_secret(
    emulator: Emulator, exports: Exports, seed: bytes, deco: tuple[str, str], model: str, params: set[str], how: str
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    kwargs = request_kwargs(s, params, "stream", STREAM_PARAMS if how == "helper" else CREATE_PARAMS)
    trigger = {
        "error event": " trigger error event",
        "exception": " trigger stream exception",
        "failure": " trigger failure",
    }
    text = f"Remember this: the marker is {s.token('stream.marker')}.{trigger.get(how, '')}"
    history: list[Any] = [{"role": "user", "content": text}, *items_of(["user_parts"], s)]
    with closing(emulator.client(**client_kwargs(s))) as client:
        if how == "helper":
            with client.responses.stream(model=model, input=history, **kwargs) as stream:
                for _ in stream:
                    pass
        elif how == "async":

            async def run() -> None:
                aclient = emulator.async_client(**client_kwargs(s))
                try:
                    stream = await aclient.responses.create(model=model, input=history, stream=True, **kwargs)
                    async for _ in stream:
                        pass
                finally:
                    await aclient.close()

            asyncio.run(run())
        else:
            stream = client.responses.create(model=model, input=history, stream=True, **kwargs)
            if how == "abandoned":
                next(iter(stream))
                stream.close()
            else:
                try:
                    for _ in stream:
                        pass
                except openai.APIError:
                    pass
    exports.assert_clean(s)


@fuzz_settings(300)
@given(
    seed=seeds,
    deco=decorations,
    units=output_units,
    sent=input_units,
    params=param_sets,
    status=st.sampled_from(["completed", "incomplete", "failed", "in_progress", "queued"]),
)
def test_canned_responses_sync_export_no_secret(
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    units: list[str],
    sent: list[str],
    params: set[str],
    status: str,
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    canned = Canned(s, units, status=status)
    with closing(mock_client(canned, **client_kwargs(s))) as client:
        every_method_sync(client, s, sent, params)
    exports.assert_clean(s)


@fuzz_settings(150)
@given(
    seed=seeds,
    deco=decorations,
    units=output_units,
    sent=input_units,
    params=param_sets,
    status=st.sampled_from(["completed", "incomplete", "failed"]),
)
def test_canned_responses_async_export_no_secret(
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    units: list[str],
    sent: list[str],
    params: set[str],
    status: str,
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    canned = Canned(s, units, status=status)

    async def run() -> None:
        client = mock_async_client(canned, **client_kwargs(s))
        try:
            kwargs = request_kwargs(s, params, "amock")
            items: Any = items_of(sent, s)
            await client.responses.create(model="o4-mini", input=items, **kwargs)
            await client.responses.retrieve(f"resp_fuzz_{s.seed.hex()}")
            await client.responses.input_items.list(f"resp_fuzz_{s.seed.hex()}")
            await client.conversations.items.create("conv_fuzz", items=items)
            if HAS_COMPACT:
                await client.responses.compact(model="o4-mini", input=items)
        finally:
            await client.close()

    asyncio.run(run())
    exports.assert_clean(s)


TERMINALS = ("response.completed", "response.incomplete", "response.failed", "error", "api_error", "none")


@fuzz_settings(300)
@given(
    seed=seeds,
    deco=decorations,
    units=output_units,
    sent=input_units,
    params=param_sets,
    terminal=st.sampled_from(TERMINALS),
    flavour=st.sampled_from(["sync", "async", "sync-closed-early", "retrieve-resume"]),
)
def test_canned_streams_export_no_secret(
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    units: list[str],
    sent: list[str],
    params: set[str],
    terminal: str,
    flavour: str,
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    canned = Canned(s, units, terminal=terminal if terminal != "none" else "response.brand_new_terminal")
    kwargs = request_kwargs(s, params, "smock")
    items: Any = items_of(sent, s)
    if flavour.startswith("sync") or flavour == "retrieve-resume":
        with closing(mock_client(canned, **client_kwargs(s))) as client:
            if flavour == "retrieve-resume":
                stream = client.responses.retrieve(f"resp_fuzz_{s.seed.hex()}", stream=True)
            else:
                stream = client.responses.create(model="gpt-4.1-mini", input=items, stream=True, **kwargs)
            try:
                for number, _ in enumerate(stream):
                    if flavour == "sync-closed-early" and number == 2:
                        stream.close()
                        break
            except openai.APIError:
                pass
    else:

        async def run() -> None:
            client = mock_async_client(canned, **client_kwargs(s))
            try:
                stream = await client.responses.create(model="gpt-4.1-mini", input=items, stream=True, **kwargs)
                async for _ in stream:
                    pass
            except openai.APIError:
                pass
            finally:
                await client.close()

        asyncio.run(run())
    exports.assert_clean(s)


ERROR_STATUSES = (400, 401, 403, 404, 409, 422, 429, 500, 502, 503)


@fuzz_settings(700)
@given(
    seed=seeds,
    deco=decorations,
    units=input_units,
    params=param_sets,
    status=st.sampled_from(ERROR_STATUSES),
    shape=st.sampled_from(["json", "flat", "text"]),
    method=st.sampled_from(["create", "stream", "retrieve", "conversation_items", "async"]),
)
def test_error_bodies_export_no_secret(
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    units: list[str],
    params: set[str],
    status: int,
    shape: str,
    method: str,
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    canned = Canned(s, units, error_status=status, error_shape=shape)
    kwargs = request_kwargs(s, params, "err")
    items: Any = items_of(units, s)
    if method == "async":

        async def run() -> None:
            client = mock_async_client(canned, **client_kwargs(s))
            try:
                with pytest.raises(openai.APIStatusError):
                    await client.responses.create(model="gpt-4.1-mini", input=items, **kwargs)
            finally:
                await client.close()

        asyncio.run(run())
    else:
        with closing(mock_client(canned, **client_kwargs(s))) as client:
            calls: dict[str, Callable[[], Any]] = {
                "create": lambda: client.responses.create(model="gpt-4.1-mini", input=items, **kwargs),
                "stream": lambda: client.responses.create(model="gpt-4.1-mini", input=items, stream=True, **kwargs),
                "retrieve": lambda: client.responses.retrieve(f"resp_fuzz_{s.seed.hex()}"),
                "conversation_items": lambda: client.conversations.items.create("conv_fuzz", items=items),
            }
            with pytest.raises(openai.APIStatusError) as raised:
                calls[method]()
        assert raised.value.status_code == status
    exports.assert_clean(s)


def test_the_detector_finds_a_leak(exports: Exports) -> None:
    """The haystack covers span attributes, events, log records and log events, and the needles catch pieces, base64
    and digests."""
    s = Secrets(b"12345678")
    secret = s.text("probe")
    for leaked in (
        secret,
        secret[3:18],
        base64.b64encode(secret.encode()).decode(),
        hashlib.md5(secret.encode()).hexdigest()[:16],
    ):
        exports.reset()
        span = exports.captured.tracer_provider.get_tracer("probe").start_span("probe")
        span.set_attribute("x", ["ok", leaked])
        span.end()
        with pytest.raises(AssertionError, match="secret exported"):
            exports.assert_clean(s)
    exports.reset()
    logging.getLogger("otel_responses._patching.wrappers").debug("failed on %s", secret[-14:])
    with pytest.raises(AssertionError, match="secret exported"):
        exports.assert_clean(s)
    for body, attributes in ((None, {"gen_ai.evaluation.explanation": secret[2:20]}), (secret, None)):
        exports.reset()
        logger = exports.captured.logger_provider.get_logger("probe")  # type: ignore[union-attr]
        logger.emit(LogRecord(event_name="gen_ai.evaluation.result", body=body, attributes=attributes))
        with pytest.raises(AssertionError, match="secret exported"):
            exports.assert_clean(s)
