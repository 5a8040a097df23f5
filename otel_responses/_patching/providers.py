"""Which provider a call reaches, as the GenAI conventions name it (``gen_ai.provider.name``): OpenAI, Azure OpenAI
(its client classes, or its hosts as Azure's v1 API is used with the plain client), or the provider a library
names (litellm's ``custom_llm_provider``)."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

from .. import attributes as a
from .._telemetry.recorded import NO_SERVER, Server

_DEFAULT_PORTS = {"https": 443, "http": 80}

# Hosts of Azure OpenAI resources: the classic endpoint, the AI Foundry (AI Services) one and the Cognitive Services
# one; each serves the v1 API under `/openai/v1/`.
AZURE_HOST_SUFFIXES = (".openai.azure.com", ".services.ai.azure.com", ".cognitiveservices.azure.com")
_AZURE_CLIENTS = frozenset({"AzureOpenAI", "AsyncAzureOpenAI"})

# litellm's provider names with a value in the GenAI conventions; any other is recorded as litellm spells it.
_LITELLM_PROVIDERS = {
    "openai": a.PROVIDER_OPENAI,
    "azure": a.PROVIDER_AZURE_OPENAI,
    "azure_ai": a.PROVIDER_AZURE_AI_INFERENCE,
    "anthropic": "anthropic",
    "bedrock": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "mistral": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai",
}


@lru_cache(maxsize=256)
def is_azure_host(host: str | None) -> bool:
    """Whether ``host`` is an Azure OpenAI resource's (case-insensitive; a trailing dot allowed)."""
    if not host:
        return False
    return host.lower().rstrip(".").endswith(AZURE_HOST_SUFFIXES)


def provider_of_client(client_class: type, host: str | None) -> str:
    """The provider an ``openai`` SDK client reaches: Azure OpenAI by its class (an ``AzureOpenAI`` or a subclass of
    one) or by its base URL's host, else OpenAI (or a server speaking its API)."""
    if any(cls.__name__ in _AZURE_CLIENTS for cls in client_class.__mro__) or is_azure_host(host):
        return a.PROVIDER_AZURE_OPENAI
    return a.PROVIDER_OPENAI


@lru_cache(maxsize=256)
def provider_of_litellm(name: str | None, host: str | None = None) -> str:
    """The provider a litellm call reaches, from litellm's provider name (and, for ``openai``, an Azure host)."""
    if not name:
        return a.PROVIDER_AZURE_OPENAI if is_azure_host(host) else a.PROVIDER_OPENAI
    if name == "openai" and is_azure_host(host):
        return a.PROVIDER_AZURE_OPENAI
    return _LITELLM_PROVIDERS.get(name, name)


@lru_cache(maxsize=256)
def server_of(url: str | None) -> Server:
    """Host and port of a base URL given as text (a library's ``api_base``); ``NO_SERVER`` when there is none."""
    if not url:
        return NO_SERVER
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return NO_SERVER
    return Server(parts.hostname or None, port)
