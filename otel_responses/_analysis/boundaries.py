"""The boundaries an encrypted payload cannot cross: the model it was minted for, and the organization and project of
the request that minted it. The API withholds replayed reasoning across them (or refuses the request); the endpoint
and the credential are no such boundary (a key pool, two base URLs of one organization), only evidence once the API
confirms a crossing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from ..ledger import Entry
from .facts import Identity

MODEL: Final = "model"
ORGANIZATION: Final = "organization"
PROJECT: Final = "project"
ENDPOINT: Final = "endpoint"
CREDENTIAL: Final = "credential"
# What a request crossing alone shows before it is sent; the rest only once the API confirms a crossing.
BEFORE_SENDING: Final = frozenset({MODEL, ORGANIZATION, PROJECT})

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}")


def _bare(model: str) -> str:
    """A model name without a gateway's provider prefix (`openai/gpt-5` is `gpt-5`)."""
    return model.rsplit("/", 1)[-1]


def _dated(snapshot: str, alias: str) -> bool:
    """``snapshot`` is a dated snapshot of ``alias`` (`gpt-5-2025-08-07` of `gpt-5`)."""
    return snapshot.startswith(alias) and _DATED.fullmatch(snapshot[len(alias) :]) is not None


def same_model(asked: str | None, minted: Entry) -> bool | None:
    """Whether a request for ``asked`` asks for the model ``minted``'s payloads were made by: the name it asked for, or
    the one that answered, or a dated snapshot of either; None when either is not known."""
    names = [_bare(name) for name in (minted.model, minted.resolved_model) if name]
    if not asked or not names:
        return None
    wanted = _bare(asked)
    return any(wanted == name or _dated(wanted, name) or _dated(name, wanted) for name in names)


def crossed(asked: str | None, identity: Identity | None, minted: Iterable[Entry]) -> list[str]:
    """Every boundary a request for ``asked``, made as ``identity``, crosses with payloads ``minted`` by those
    responses: the model, the organization and the project where both sides name one, and the endpoint and the
    credential (evidence only once the API confirms a crossing)."""
    found: dict[str, None] = {}
    for entry in minted:
        if same_model(asked, entry) is False:
            found[MODEL] = None
        if identity is None:
            continue
        for kind, now, then in (
            (ORGANIZATION, identity.organization, entry.organization),
            (PROJECT, identity.project, entry.project),
            (ENDPOINT, identity.endpoint, entry.endpoint),
            (CREDENTIAL, identity.credential, entry.credential),
        ):
            if now is not None and then is not None and now != then:
                found[kind] = None
    return list(found)
