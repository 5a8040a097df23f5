"""What several test modules share: readers of spans, a Python subprocess, an in-process transport answering canned
JSON (the real client, no socket) and Hypothesis settings for fuzzing through it. Nothing here is a test."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
from hypothesis import HealthCheck, settings

from .programs import program

try:  # openai 3.x sends through the `httpx2` fork, 1.x through `httpx`
    import httpx2 as httpx  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx  # type: ignore[no-redef, unused-ignore]

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from otel_responses.testing import CapturedTelemetry

HTTPX: Any = httpx
BASE_URL = "http://fuzz.invalid/v1"
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


# -- spans -----------------------------------------------------------------------------------------------------


def sdk_field(value: Any, name: str) -> Any:
    """A field the oldest supported SDK (1.101) does not declare: the model's attribute, the plain dict its models
    keep an undeclared object as, or None where it is absent."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def withheld(response: Any) -> list[tuple[str, str]]:
    """(id, reason) of each item a response's `input_transformations` reports withheld."""
    found = sdk_field(response, "input_transformations") or []
    return [(sdk_field(t, "id"), sdk_field(t, "reason")) for t in found]


def withheld_reasons(response: Any) -> list[str]:
    return [reason for _, reason in withheld(response)]


def attrs(span: Any) -> dict[str, Any]:
    """A span's attributes as a plain dict (the SDK's may be None)."""
    return dict(span.attributes or {})


def chat_attrs(cap: CapturedTelemetry) -> list[dict[str, Any]]:
    """The attributes of each chat span, in the order they ended."""
    return [attrs(span) for span in cap.chat_spans()]


def signal_events(span: ReadableSpan, name: str) -> list[dict[str, Any]]:
    """The attributes of the span's events for signal ``name``: one per raised signal."""
    return [
        dict(event.attributes or {})
        for event in span.events
        if (event.attributes or {}).get("openai_responses.signal.name") == name
    ]


def function_call(response: Any) -> Any:
    """The first function call of a response's output."""
    return next(item for item in response.output if item.type == "function_call")


def chat_signals(cap: CapturedTelemetry) -> list[tuple[str, ...]]:
    """The exact signals of each chat span, in the order they ended: what a false signal cannot hide in."""
    return [tuple(attrs(span)["openai_responses.signals"]) for span in cap.chat_spans()]


# -- another process ----------------------------------------------------------------------------------------------


def run_python(
    code: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` with this interpreter, from the repository root (so ``tests.`` modules import), its
    output captured as text: a fresh process, for what one process cannot show (imports, exits, a second worker)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def json_from_python(code: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> Any:
    """What ``code`` printed as JSON on its last line, run as ``run_python`` runs it; its stderr when it failed."""
    done = run_python(code, *args, env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def user_pytest_env() -> dict[str, str]:
    """The environment for pytest in a subprocess as a user's project runs it: plugins autoloaded (the installed
    pytest plugin among them), none of this run's options."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS")}


def prometheus_binary(name: str) -> str:
    """The path of ``prometheus`` or ``promtool`` (Debian's prometheus package); see ``programs``."""
    return program(name)
