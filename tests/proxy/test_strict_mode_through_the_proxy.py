"""Strict mode through the proxy (``OTEL_INSTRUMENTATION_OPENAI_RESPONSES_STRICT``, as in-process): a request that would
lose context is answered 400 in the API's error shape — the signal as its code, its meaning and fix as its message —
and never reaches the upstream; a 400, so the SDKs do not retry it. Off (the default), the same request goes upstream
and the upstream's own answer comes back."""

from __future__ import annotations

import openai
import pytest

from otel_responses.emulator import Emulator

from .support import proxied


def _sent(emulator: Emulator) -> int:
    return sum(1 for r in emulator.requests if r.path == "/v1/responses")


def test_a_refused_request_gets_a_400_naming_the_signal_and_never_reaches_the_upstream(emulator: Emulator) -> None:
    with proxied(emulator.base_url, {"strict": True}) as through, through.client(max_retries=2) as client:
        before = _sent(emulator)
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="gpt-5.4", input="hi", conversation="conv_1", previous_response_id="resp_1")
        assert _sent(emulator) == before
        (span,) = through.wait_for_spans(1)
    assert refused.value.code == "state_mode_conflict"
    assert refused.value.type == "invalid_request_error"
    assert "Fix:" in refused.value.message
    assert "signals/#state_mode_conflict" in refused.value.message
    attributes = dict(span.attributes or {})
    assert attributes["openai_responses.signals"] == ("state_mode_conflict",)
    assert attributes["error.type"] == "ContextLossError"


def test_what_this_proxy_recorded_is_refused_too(emulator: Emulator) -> None:
    with proxied(emulator.base_url, {"strict": True}) as through, through.client() as client:
        unstored = client.responses.create(model="gpt-5.4", input="Remember this: the marker is S-1.", store=False)
        before = _sent(emulator)
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="gpt-5.4", input="What is the marker?", previous_response_id=unstored.id)
        assert _sent(emulator) == before
    assert refused.value.code == "unstored_parent"


def test_off_the_same_request_goes_upstream_and_its_answer_comes_back(emulator: Emulator) -> None:
    with proxied(emulator.base_url) as through, through.client() as client:
        before = _sent(emulator)
        with pytest.raises(openai.BadRequestError) as answered:
            client.responses.create(model="gpt-5.4", input="hi", conversation="conv_1", previous_response_id="resp_1")
        assert _sent(emulator) == before + 1
        (span,) = through.wait_for_spans(1)
    assert answered.value.code != "state_mode_conflict"  # the upstream's own error code
    attributes = dict(span.attributes or {})
    assert attributes["openai_responses.signals"] == ("state_mode_conflict",)
    assert attributes["error.type"] == "BadRequestError"
