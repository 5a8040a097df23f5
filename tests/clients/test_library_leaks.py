"""Leak fuzzing through the litellm and DSPy seams: secrets and payloads planted in the request (items of every type
the emulator accepts, instructions, metadata, end-user ids, headers, the API key) and returned by the emulator
(encrypted reasoning, text) never leave the process, whichever library sent the request. The sentinels and the
detector are the leak corpus's (tests/corpus.py) (any 12-character piece, base64, hex digests).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("litellm")

import litellm  # type: ignore[import-not-found]

from otel_responses.emulator import Emulator

from ..corpus import (
    FUNCTION_TOOL,
    Exports,
    Secrets,
    answers,
    decorations,
    items_of,
    request_kwargs,
    safe_units,
    seeds,
)
from ..support import fuzz_settings

# litellm takes these request parameters as the SDK does (MCP tools are left out: litellm would connect to them).
PARAMS = ("instructions", "metadata", "user", "safety_identifier", "prompt_cache_key", "extra_headers")
MODELS = ("gpt-4.1-mini", "gpt-5-mini", "gpt-5.4")


def _observe(s: Secrets, response: Any) -> None:
    for item in getattr(response, "output", None) or ():
        s.observe("output.encrypted_content", getattr(item, "encrypted_content", None))
        for part in getattr(item, "content", None) or ():
            s.observe("output.text", getattr(part, "text", None))


def _quietly(call: Any) -> Any:
    try:
        return call()
    except Exception:  # what the emulator refuses (an item the model never returned) is the library's to raise
        return None


def _session(
    emu: Emulator, s: Secrets, model: str, store: bool, params: set[str], units: list[str], stream: bool
) -> None:
    """Two replayed turns and a chained one through `litellm.responses`, everything planted."""
    options: dict[str, Any] = {"api_base": emu.base_url, "api_key": s.token("litellm.api_key")}
    text = f"Remember this: the marker is {s.token('session.marker')}. Please use lookup."
    history: list[Any] = [{"role": "user", "content": text}, *items_of(["user_parts"], s)]

    def call(**kwargs: Any) -> Any:
        result = litellm.responses(model=f"openai/{model}", store=store, tools=[FUNCTION_TOOL], **options, **kwargs)
        if not stream:
            return result
        final = None
        for event in result:
            if event.type == "response.completed":
                final = event.response
        return final

    first = _quietly(lambda: call(input=history, stream=stream, **request_kwargs(s, params, "turn1")))
    if first is None:
        return
    _observe(s, first)
    history += [*first.output, *answers(first, s), *items_of(units, s)]
    second = _quietly(lambda: call(input=history, stream=stream, **request_kwargs(s, params, "turn2")))
    _observe(s, second)
    if store:
        answer = [*answers(first, s), {"role": "user", "content": s.text("turn3.question") + " What is the marker?"}]
        _observe(
            s, _quietly(lambda: call(input=answer, previous_response_id=first.id, **request_kwargs(s, params, "turn3")))
        )


@fuzz_settings(40)
@given(
    seed=seeds,
    deco=decorations,
    model=st.sampled_from(MODELS),
    store=st.booleans(),
    params=st.sets(st.sampled_from(PARAMS)),
    units=safe_units,
    stream=st.booleans(),
)
def test_litellm_exports_no_secret(
    emulator: Emulator,
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    model: str,
    store: bool,
    params: set[str],
    units: list[str],
    stream: bool,
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    _session(emulator, s, model, store, params, units, stream)
    exports.assert_clean(s)


@fuzz_settings(20)
@given(seed=seeds, deco=decorations, model=st.sampled_from(MODELS))
def test_litellm_other_operations_export_no_secret(
    emulator: Emulator,
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    model: str,
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    options: dict[str, Any] = {"api_base": emulator.base_url, "api_key": s.token("litellm.api_key")}

    async def run() -> None:
        first = await litellm.aresponses(
            model=f"openai/{model}", input=s.text("input"), instructions=s.text("instructions"), **options
        )
        _observe(s, first)
        _observe(s, await litellm.aget_responses(response_id=first.id, **options))
        await litellm.alist_input_items(response_id=first.id, **options)
        packed = await litellm.acompact_responses(
            model=f"openai/{model}", input=[{"role": "user", "content": s.text("compact.input")}], **options
        )
        _observe(s, packed)
        await litellm.adelete_responses(response_id=first.id, **options)

    asyncio.run(run())
    exports.assert_clean(s)


dspy: Any = pytest.importorskip("dspy")


@fuzz_settings(20)
@given(seed=seeds, deco=decorations, stream=st.booleans())
def test_dspy_exports_no_secret(
    emulator: Emulator,
    exports: Exports,
    seed: bytes,
    deco: tuple[str, str],
    stream: bool,
) -> None:
    exports.reset()
    s = Secrets(seed, deco)
    lm = dspy.LM(
        "openai/gpt-5-mini",
        model_type="responses",
        api_base=emulator.base_url,
        api_key=s.token("dspy.api_key"),
        cache=False,
        temperature=1.0,
        max_tokens=16000,
    )
    messages = [
        {"role": "system", "content": s.text("system")},
        {"role": "user", "content": s.text("user") + " Please call lookup_weather."},
    ]
    tools = [{"type": "function", "function": {"name": "lookup_weather", "parameters": {"type": "object"}}}]
    if stream:

        class QA(dspy.Signature):  # type: ignore[misc]  # dspy is not installed where mypy runs
            question: str = dspy.InputField()
            answer: str = dspy.OutputField()

        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            program = dspy.streamify(dspy.Predict(QA), async_streaming=False)
            for _ in program(question=s.text("question")):
                pass
    else:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            lm(messages=messages, tools=tools)
    exports.assert_clean(s)


if not hasattr(dspy, "lm15"):  # DSPy before 3.4 goes through litellm, fuzzed above (CI fails on any skip)
    del test_dspy_exports_no_secret
