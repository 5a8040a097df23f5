"""The leak corpus through the proxy: sentinels planted in every payload and secret field of every item type, in the
request parameters that carry secrets, in the API key, organisation, project and every other header, and (from a
canned upstream) in response bodies, streams, error bodies and response headers, go through the proxy unchanged and
appear in no span, event, status, metric point or log record — the package's and aiohttp's, at any level — nor in
an answer the proxy writes itself (a strict-mode refusal, a 413); a malformed header line reaches no log record
and not the command's standard error."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_responses.emulator import Emulator

from ..corpus import (
    MODELS,
    Canned,
    Exports,
    Secrets,
    client_kwargs,
    decorations,
    emulator_session,
    every_method_sync,
    input_units,
    items_of,
    output_units,
    param_sets,
    request_kwargs,
    safe_units,
    seeds,
)
from ..hostile import LoopbackAPI, Received, Reply
from ..support import fuzz_settings
from .support import Proxied, proxied, raw_exchange, raw_post


class _Request:
    """What ``Canned`` reads of a request (the httpx request it was written for)."""

    def __init__(self, received: Received) -> None:
        self.method = received.method
        self.content = received.body
        self.url = type("URL", (), {"path": received.path.split("?", 1)[0]})()


class CannedUpstream:
    """``Canned`` answers on a loopback socket: the current example's canned responses, streams and errors."""

    def __init__(self) -> None:
        self.canned: Canned | None = None
        self.api = LoopbackAPI(self._answer)

    def _answer(self, received: Received, index: int) -> Reply:
        assert self.canned is not None
        answer = self.canned(_Request(received))
        headers = {k: v for k, v in answer.headers.items() if k.lower() not in ("content-length", "content-encoding")}
        return Reply(answer.status_code, answer.content, headers)


@pytest.fixture(scope="module")
def canned_upstream() -> Iterator[CannedUpstream]:
    upstream = CannedUpstream()
    with upstream.api:
        yield upstream


@pytest.fixture(scope="module")
def through_canned(canned_upstream: CannedUpstream) -> Iterator[Proxied]:
    with proxied(canned_upstream.api.base_url) as through:
        yield through


@pytest.fixture(scope="module")
def through_emulator(emulator: Emulator) -> Iterator[Proxied]:
    with proxied(emulator.base_url) as through:
        yield through


def _exports(through: Proxied, caplog: pytest.LogCaptureFixture) -> Exports:
    caplog.set_level(logging.DEBUG, logger="otel_responses")
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    return Exports(through.captured, caplog)


def _quiet(through: Proxied) -> None:
    """Until the proxy has ended every span it will. It ends a call before the client has its last bytes, but a
    stream the client leaves ends on the proxy's own thread, a moment later."""
    seen, still = -1, 0
    while still < 3:
        count = len(through.spans())
        still = still + 1 if count == seen else 0
        seen = count
        time.sleep(0.01)


def _assert_clean(through: Proxied, exports: Exports, s: Secrets) -> None:
    _quiet(through)
    exports.assert_clean(s)
    needles = s.needles()
    for record in exports.caplog.records:
        if record.name.startswith("aiohttp"):
            text = record.getMessage() + str(record.exc_info or "")
            assert not [n for n in needles if n in text], record.name


@fuzz_settings(25)
@given(
    seed=seeds,
    deco=decorations,
    model=st.sampled_from(MODELS),
    store=st.booleans(),
    params=param_sets,
    units=safe_units,
)
def test_an_emulator_session_through_the_proxy_exports_no_secret(
    through_emulator: Proxied,
    caplog: pytest.LogCaptureFixture,
    seed: bytes,
    deco: tuple[str, str],
    model: str,
    store: bool,
    params: set[str],
    units: list[str],
) -> None:
    exports = _exports(through_emulator, caplog)
    exports.reset()
    s = Secrets(seed, deco)
    with through_emulator.client(**client_kwargs(s)) as client:
        emulator_session(client, s, model, store, params, units)
        stream = client.responses.create(
            model=model, input=s.text("stream.input"), stream=True, **request_kwargs(s, params, "stream")
        )
        for _ in stream:
            pass
    _assert_clean(through_emulator, exports, s)


@fuzz_settings(30)
@given(
    seed=seeds,
    deco=decorations,
    units=output_units,
    sent=input_units,
    params=param_sets,
    status=st.sampled_from(["completed", "incomplete", "failed"]),
    terminal=st.sampled_from(["response.completed", "response.failed", "error", "api_error", "response.brand_new"]),
    error_status=st.sampled_from([None, None, 400, 401, 429, 500]),
    error_shape=st.sampled_from(["json", "flat", "text"]),
)
def test_canned_answers_through_the_proxy_export_no_secret(
    canned_upstream: CannedUpstream,
    through_canned: Proxied,
    caplog: pytest.LogCaptureFixture,
    seed: bytes,
    deco: tuple[str, str],
    units: list[str],
    sent: list[str],
    params: set[str],
    status: str,
    terminal: str,
    error_status: int | None,
    error_shape: str,
) -> None:
    exports = _exports(through_canned, caplog)
    exports.reset()
    s = Secrets(seed, deco)
    canned_upstream.canned = Canned(
        s, units, status=status, error_status=error_status, error_shape=error_shape, terminal=terminal
    )
    with through_canned.client(**client_kwargs(s)) as client:
        with contextlib.suppress(openai.APIError):
            every_method_sync(client, s, sent, params)
        items: Any = items_of(sent, s)
        try:
            stream = client.responses.create(
                model="gpt-4.1-mini", input=items, stream=True, **request_kwargs(s, params, "s")
            )
            for _ in stream:
                pass
        except openai.APIError:
            pass
    _assert_clean(through_canned, exports, s)


@fuzz_settings(15)
@given(seed=seeds, deco=decorations, units=input_units)
def test_the_proxys_own_answers_echo_no_secret(
    emulator: Emulator, caplog: pytest.LogCaptureFixture, seed: bytes, deco: tuple[str, str], units: list[str]
) -> None:
    s = Secrets(seed, deco)
    items: Any = [{"role": "user", "content": s.text("own.input")}, *items_of(units, s)]
    with proxied(emulator.base_url, {"strict": True}, max_body_bytes=100_000) as through:
        exports = _exports(through, caplog)
        exports.reset()
        bodies = []
        with through.client(**client_kwargs(s)) as client:
            for kwargs in (
                {"conversation": "conv_x", "previous_response_id": "resp_x"},  # refused: strict mode
                {"metadata": {"k": s.text("own.big") * 5000}},  # refused: over the body limit
            ):
                try:
                    client.responses.create(model="gpt-5.4", input=items, **kwargs)
                except openai.APIStatusError as error:
                    bodies.append(json.dumps(error.body))
        _assert_clean(through, exports, s)
    assert len(bodies) == 2
    needles = s.needles()
    assert [n for body in bodies for n in needles if n in body] == []


SENTINEL = "sk-SENTINEL-malformed-0123456789"
MALFORMED = [
    f"Authorization: Bearer {SENTINEL}\x01x\r\n",  # a control character in a value
    f"Authorization : Bearer {SENTINEL}\r\n",  # a space before the colon
    f"X-Key {SENTINEL}\r\n",  # no colon at all
    f"api-key: {SENTINEL}\r\n\tfolded\r\n",  # an obsolete line folding
]
MALFORMED_IDS = ["control-char", "space-before-colon", "no-colon", "folded"]


@pytest.mark.parametrize("line", MALFORMED, ids=MALFORMED_IDS)
def test_a_malformed_header_line_is_refused_and_logged_nowhere(
    emulator: Emulator, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], line: str
) -> None:
    caplog.set_level(logging.DEBUG)
    with proxied(emulator.base_url) as through:
        answer = raw_exchange(through.proxy.port, raw_post(b"{}", extra=line))
        with through.client(api_key=SENTINEL) as client:  # the near miss: the same key, well formed, goes through
            assert client.responses.create(model="gpt-5.4", input="hi").output_text
        _quiet(through)
        exported = json.dumps([dict(span.attributes or {}) for span in through.spans()])
    assert answer.split(b" ", 2)[1] == b"400"  # aiohttp's own answer, to the sender alone, names the line it refused
    assert [r.name for r in caplog.records if SENTINEL in r.getMessage() + str(r.exc_info or "")] == []
    out, err = capfd.readouterr()
    assert SENTINEL not in out + err + exported


@pytest.mark.parametrize("line", MALFORMED, ids=MALFORMED_IDS)
def test_a_malformed_header_line_reaches_neither_the_commands_stderr_nor_its_log_events(
    emulator: Emulator, line: str
) -> None:
    from ..hostile import LoopbackAPI, Reply
    from .test_proxy_command import _stopped, started

    with LoopbackAPI(lambda received, index: Reply(200, b"")) as collector:
        base = collector.base_url.removesuffix("/v1")
        with started("--upstream", emulator.base_url, "--listen", "127.0.0.1:0", "--otlp-endpoint", base) as (
            process,
            base_url,
        ):
            port = int(base_url.rsplit(":", 1)[1].split("/", 1)[0])
            answer = raw_exchange(port, raw_post(b"{}", extra=line))
            code, err = _stopped(process)
        exported = b"".join(received.body for received in collector.received)
    assert code == 0
    assert answer.split(b" ", 2)[1] == b"400"
    assert SENTINEL not in err
    assert SENTINEL.encode() not in exported
