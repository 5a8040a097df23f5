"""What several test modules share: an in-process transport answering canned JSON (the real client, no socket),
Hypothesis settings for fuzzing through it, and small readers of spans. Nothing here is a test."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import openai
from hypothesis import HealthCheck, settings

try:  # openai 3.x sends through the `httpx2` fork, 1.x through `httpx`
    import httpx2 as httpx  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx

HTTPX: Any = httpx
BASE_URL = "http://fuzz.invalid/v1"


def fuzz_settings(examples: int) -> settings:
    """Examples drawn afresh every run (no database), without deadlines: the suites share a loaded machine."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- an in-process transport with canned JSON -------------------------------------------------------------------


def sse(events: Iterable[dict[str, Any]]) -> bytes:
    chunks = []
    for number, event in enumerate(events):
        if "type" in event and "sequence_number" not in event:
            event = {**event, "sequence_number": number}
        name = f"event: {event['type']}\n" if isinstance(event.get("type"), str) else ""
        chunks.append(f"{name}data: {json.dumps(event)}\n\n")
    return "".join(chunks).encode()


def mock_client(handler: Callable[[Any], Any], *, max_retries: int = 0, **kwargs: Any) -> openai.OpenAI:
    kwargs.setdefault("api_key", "test-key")
    http_client = openai.DefaultHttpxClient(transport=HTTPX.MockTransport(handler))
    return openai.OpenAI(base_url=BASE_URL, max_retries=max_retries, http_client=http_client, **kwargs)


def mock_async_client(handler: Callable[[Any], Any], *, max_retries: int = 0, **kwargs: Any) -> openai.AsyncOpenAI:
    kwargs.setdefault("api_key", "test-key")
    http_client = openai.DefaultAsyncHttpxClient(transport=HTTPX.MockTransport(handler))
    return openai.AsyncOpenAI(base_url=BASE_URL, max_retries=max_retries, http_client=http_client, **kwargs)


def usage() -> dict[str, Any]:
    return {
        "input_tokens": 11,
        "output_tokens": 7,
        "total_tokens": 18,
        "input_tokens_details": {"cached_tokens": 2},
        "output_tokens_details": {"reasoning_tokens": 3},
    }


@contextmanager
def closing(client: Any) -> Iterator[Any]:
    """The client, closed after the block: a test's clients must not outlive it."""
    try:
        yield client
    finally:
        client.close()
