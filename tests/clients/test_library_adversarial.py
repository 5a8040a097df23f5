"""The adversarial suite's hostile server and inputs (tests/hostile.py) through the litellm and DSPy seams: whatever
the server answers (garbage, a cut stream, errors, a body that lies about its length) and whatever the app passes
(one-shot lists, items whose dunders raise, strings that refuse to be used, headers whose `get` raises), the app sees
exactly what it sees without the instrumentation, and the instrumentation never raises into it.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

pytest.importorskip("litellm")
pytest.importorskip("dspy")

import dspy  # type: ignore[import-not-found]
import litellm  # type: ignore[import-not-found]

from otel_responses.testing import capture

from ..hostile import (
    HeadersGetRaises,
    LoopbackAPI,
    OneShotList,
    PrickleStr,
    RaisingDunders,
    Reply,
    json_reply,
    sse_reply,
)

NATIVE = hasattr(dspy, "lm15")


def _response(**extra: Any) -> dict[str, Any]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Noted.", "annotations": []}],
    }
    body = {"id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-4.1", "status": "completed"}
    return {**body, "output": [message], "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}, **extra}


REPLIES: dict[str, Any] = {
    "ok": lambda: json_reply(_response()),
    "garbage": lambda: Reply(200, b"\x00\xff not json", {"content-type": "application/json"}),
    "no_output": lambda: json_reply({"id": "resp_2", "object": "response", "output": "nope", "usage": "none"}),
    "hostile_shapes": lambda: json_reply(_response(output=[{"type": 7, "id": []}, None, "x"], status=["?"])),
    "error_500": lambda: json_reply({"error": {"message": "boom", "type": "server_error", "code": None}}, 500),
    "error_400": lambda: json_reply({"error": {"message": "bad", "type": "invalid_request_error", "code": "x"}}, 400),
    "short_body": lambda: Reply(200, json_reply(_response()).body, {"content-type": "application/json"}, length=9999),
    "stream_cut": lambda: sse_reply(
        [{"type": "response.created", "response": _response(status="in_progress")}], cut=True
    ),
    "stream_garbage": lambda: sse_reply([b"data: {not json\n\n", {"type": "response.completed", "response": []}]),
    "stream_ok": lambda: sse_reply([{"type": "response.completed", "response": _response()}]),
}
INPUTS: dict[str, Any] = {
    "text": lambda: "hi",
    "one_shot": lambda: OneShotList([{"role": "user", "content": "hi"}]),
    "raising_dunders": lambda: [RaisingDunders(role="user", content="hi")],
    "prickly_text": lambda: [{"role": "user", "content": PrickleStr("hi")}],
}


def _outcome(call: Any) -> Any:
    """What the app sees: the result's shape, or the exception's type and message."""
    try:
        result = call()
        if hasattr(result, "__iter__") and not hasattr(result, "output"):
            return ("events", [getattr(event, "type", type(event).__name__) for event in result])
        return ("result", getattr(result, "id", None), len(getattr(result, "output", None) or ()))
    except Exception as exc:
        text = str(exc)
        return ("raised", type(exc).__name__, text[:200] if "otel_responses" not in text else text)


def _litellm_call(api: LoopbackAPI, reply: str, given: str) -> Any:
    stream = reply.startswith("stream")
    options = {"api_base": api.base_url, "api_key": "k", "max_retries": 0, "num_retries": 0}
    extra = {"extra_headers": HeadersGetRaises({"x-app": "1"})} if given == "text" else {}
    return lambda: litellm.responses(
        model="openai/gpt-4.1", input=INPUTS[given](), stream=stream, instructions="Be brief.", **options, **extra
    )


@pytest.mark.parametrize("given", INPUTS)
@pytest.mark.parametrize("reply", REPLIES)
def test_litellm_sees_the_same(reply: Any, given: Any) -> None:
    outcomes = []
    for on in (False, True):
        with LoopbackAPI(lambda request, index: REPLIES[reply]()) as api:
            if on:
                with capture():
                    outcomes.append(_outcome(_litellm_call(api, reply, given)))
            else:
                outcomes.append(_outcome(_litellm_call(api, reply, given)))
    assert outcomes[0] == outcomes[1]
    assert "otel_responses" not in repr(outcomes[1])


@pytest.mark.parametrize("reply", REPLIES)
def test_dspy_sees_the_same(reply: Any) -> None:
    outcomes = []
    for on in (False, True):
        with LoopbackAPI(lambda request, index: REPLIES[reply]()) as api:
            lm = dspy.LM("openai/gpt-4.1", model_type="responses", api_base=api.base_url, api_key="k", cache=False)
            lm.num_retries = 0

            def call(lm: Any = lm) -> Any:
                if not reply.startswith("stream") or not NATIVE:
                    return lm("hi")

                class QA(dspy.Signature):  # type: ignore[misc]  # dspy is not installed where mypy runs
                    question: str = dspy.InputField()
                    answer: str = dspy.OutputField()

                with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
                    return [
                        type(c).__name__ for c in dspy.streamify(dspy.Predict(QA), async_streaming=False)(question="hi")
                    ]

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if on:
                    with capture():
                        outcomes.append(_outcome(call))
                else:
                    outcomes.append(_outcome(call))
    assert outcomes[0] == outcomes[1]
    assert "otel_responses" not in repr(outcomes[1])
