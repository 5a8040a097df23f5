"""Whom a call is made as: the organization and project it names, its credential and its endpoint, each a keyed
fingerprint (``Fingerprinter.number``): compared with those of the call that minted a replayed payload, never
exported.

The organization and project are what the request sends: an ``OpenAI-Organization`` / ``OpenAI-Project`` header of
the call (``extra_headers``), else the client's own (``default_headers``, then ``organization=`` / ``project=``). A
request that names none leaves its key's default in force, which nothing here can tell: it is compared with nothing.
The credential is fingerprinted through its SHA-256 digest (``credential_digest``), which is all the proxy's relay
hands its analysis of a key: a call in-process and the same call through the proxy are made as the same caller.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .._analysis.facts import Identity
from .._fingerprint import Fingerprinter

_ORGANIZATION = "openai-organization"
_PROJECT = "openai-project"
# The last client's identity, by the identity of what it was read from: the same client call after call.
_last: tuple[tuple[object, ...], Identity | None] = ((), None)


class IdentifiedClient:
    """A client whose caller was read before the call (the proxy reads it from the request's headers)."""

    def __init__(self, base_url: object, identity: Identity) -> None:
        self.base_url = base_url
        self.identity = identity


def credential_digest(key: str) -> str:
    """What stands for an API key (or a bearer token): its SHA-256 digest, fingerprinted like any other value."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def identity_from(
    organization: str | None,
    project: str | None,
    credential: str | None,
    endpoint: str | None,
    fingerprints: Fingerprinter,
) -> Identity:
    """The identity of a call made as these (``credential``: the key's ``credential_digest``)."""
    return Identity(
        _number(fingerprints, organization),
        _number(fingerprints, project),
        _number(fingerprints, credential),
        _number(fingerprints, endpoint),
    )


def identity_of(instance: Any, kwargs: Mapping[str, Any], fingerprints: Fingerprinter) -> Identity | None:
    """The call's identity; None when it has no client to read one from (a library's own transport)."""
    global _last
    client = getattr(instance, "_client", None)
    if client is None:
        return None
    if isinstance(client, IdentifiedClient):
        return client.identity
    headers = kwargs.get("extra_headers")
    custom = getattr(client, "_custom_headers", None)
    sources = (
        client,
        headers,
        custom,
        getattr(client, "organization", None),
        getattr(client, "project", None),
        getattr(client, "api_key", None),
        getattr(client, "base_url", None),
        fingerprints,
    )
    last = _last
    if len(last[0]) == len(sources) and all(a is b for a, b in zip(last[0], sources, strict=True)):
        return last[1]
    organization = _header(headers, _ORGANIZATION) or _header(custom, _ORGANIZATION) or _text(sources[3])
    project = _header(headers, _PROJECT) or _header(custom, _PROJECT) or _text(sources[4])
    key, endpoint = _text(sources[5]), sources[6]
    credential = credential_digest(key) if key is not None else None
    found = identity_from(
        organization, project, credential, str(endpoint) if endpoint is not None else None, fingerprints
    )
    _last = (sources, found)
    return found


def _header(headers: object, name: str) -> str | None:
    if not isinstance(headers, Mapping):
        return None
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == name:
            return _text(value)
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(fingerprints: Fingerprinter, value: str | None) -> int | None:
    """A keyed fingerprint of 32 bits: enough to tell two organizations (or keys) apart, small in a shared entry."""
    return fingerprints.number(value) >> 32 if value is not None else None
