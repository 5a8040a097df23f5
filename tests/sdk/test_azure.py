"""Azure OpenAI through the `openai` SDK, on emulated traffic: the emulator answers under Azure's paths.

`AzureOpenAI` / `AsyncAzureOpenAI` (the dated API, `/openai/responses?api-version=`), and the plain `OpenAI` client
at an Azure host, as Azure's v1 API is used (`https://<resource>.openai.azure.com/openai/v1/`, delivered to the
emulator by a transport that keeps the URL the client built): `gen_ai.provider.name` is `azure.ai.openai`,
`gen_ai.request.model` the deployment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import openai._base_client as base_client
import pytest

from otel_responses._patching.providers import is_azure_host
from otel_responses.emulator import Emulator
from otel_responses.testing import capture

_http: Any = getattr(base_client, "httpx2", None) or getattr(base_client, "httpx")  # noqa: B009  # openai 3 uses httpx2, older ones httpx
API_VERSION = "2025-04-01-preview"
DEPLOYMENT = "my-gpt-41"


class _ToEmulator(_http.HTTPTransport):  # type: ignore[misc]
    """Delivers every request to the emulator, the URL's host kept in the request as the client built it."""

    def __init__(self, emu: Emulator) -> None:
        super().__init__()
        self._port = emu.port

    def handle_request(self, request: Any) -> Any:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self._port)
        return super().handle_request(request)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


def _chat_span(telemetry: Any) -> Any:
    (span,) = telemetry.chat_spans()
    return span


def test_azure_client(emu: Emulator) -> None:
    client = openai.AzureOpenAI(azure_endpoint=emu.azure_endpoint, api_key="k", api_version=API_VERSION)
    with capture() as telemetry:
        first = client.responses.create(
            model=DEPLOYMENT, input="Remember: the marker is M-1.", instructions="Be brief."
        )
        client.responses.create(model=DEPLOYMENT, input="What is the marker?", previous_response_id=first.id)
    assert [r.path for r in emu.requests] == ["/openai/responses", "/openai/responses"]
    spans = telemetry.chat_spans()
    assert [(s.attributes or {})["gen_ai.provider.name"] for s in spans] == ["azure.ai.openai"] * 2
    assert [(s.attributes or {})["gen_ai.request.model"] for s in spans] == [DEPLOYMENT] * 2
    assert (spans[1].attributes or {})["openai_responses.signals"] == ("instructions_dropped",)
    points = telemetry.metric_points("gen_ai.client.operation.duration")
    assert {p.attributes["gen_ai.provider.name"] for p in points} == {"azure.ai.openai"}


def test_async_azure_client(emu: Emulator) -> None:
    async def run() -> None:
        client = openai.AsyncAzureOpenAI(azure_endpoint=emu.azure_endpoint, api_key="k", api_version=API_VERSION)
        await client.responses.create(model=DEPLOYMENT, input="hi")
        await client.close()

    with capture() as telemetry:
        asyncio.run(run())
    assert _chat_span(telemetry).attributes["gen_ai.provider.name"] == "azure.ai.openai"


def test_plain_client_at_an_azure_host_uses_the_v1_api(emu: Emulator) -> None:
    client = openai.OpenAI(
        base_url="https://my-resource.openai.azure.com/openai/v1/",
        api_key="k",
        http_client=_http.Client(transport=_ToEmulator(emu)),
        max_retries=0,
    )
    with capture() as telemetry:
        client.responses.create(model=DEPLOYMENT, input="hi")
    assert [r.path for r in emu.requests] == ["/openai/v1/responses"]
    span = _chat_span(telemetry)
    assert span.attributes["gen_ai.provider.name"] == "azure.ai.openai"
    assert span.attributes["server.address"] == "my-resource.openai.azure.com"
    assert span.attributes["gen_ai.request.model"] == DEPLOYMENT


def test_the_same_client_elsewhere_is_openai(emu: Emulator) -> None:
    with capture() as telemetry:
        emu.client().responses.create(model="gpt-4.1", input="hi")
    assert _chat_span(telemetry).attributes["gen_ai.provider.name"] == "openai"


@pytest.mark.parametrize(
    ("host", "azure"),
    [
        ("my-resource.openai.azure.com", True),
        ("My-Resource.OpenAI.Azure.com.", True),
        ("my-project.services.ai.azure.com", True),
        ("my-resource.cognitiveservices.azure.com", True),
        ("api.openai.com", False),
        ("openai.azure.com.example.org", False),
        ("azure.com", False),
        (None, False),
    ],
)
def test_azure_hosts(host: str | None, azure: bool) -> None:
    assert is_azure_host(host) is azure
