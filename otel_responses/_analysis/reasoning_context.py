"""Which earlier reasoning the model is shown: a request's effective ``reasoning.context`` and where its turn begins.

The API renders reasoning items back to the model by the request's ``reasoning.context``: under ``all_turns`` every
replayed reasoning item; under ``current_turn`` only those of the current turn, the items since the latest user
message (an earlier, finished turn's reasoning is withheld whatever the app replays, and the response reports it in
``input_transformations`` as ``turn_boundary``). A request that omits it, or sends ``auto``, gets its model's
default: the ``gpt-5.6`` family ``all_turns``, earlier reasoning models ``current_turn`` (the SDK's docstring; the
recorded traffic shows gpt-5, 5-mini, 5.2, 5.4, 5.5, o3 and o4-mini answer ``current_turn``, gpt-5.6 ``all_turns``).
A model this table does not know has no default here: the checks then keep the rule that assumes every replayed
reasoning item is seen.
"""

from __future__ import annotations

import re
from typing import Final

from ..ledger import Entry
from .facts import RequestFacts

CURRENT_TURN: Final = "current_turn"
ALL_TURNS: Final = "all_turns"
_EXPLICIT = frozenset({CURRENT_TURN, ALL_TURNS})

# A model name as sent or resolved: a provider or deployment prefix (`openai/`, `azure/`) aside, then the family, its
# version and anything after it (`-mini`, a dated snapshot).
_GPT5 = re.compile(r"gpt-5(?:\.(\d+))?(?![\d.])")
_O_SERIES = re.compile(r"o[134](?![\d.])")
_CODEX_MINI = re.compile(r"codex-mini(?![\w.])")


def model_default(model: str | None) -> str | None:
    """The ``reasoning.context`` a model uses when the request leaves it to the model; None for a model not known."""
    if not model:
        return None
    name = model.lower().rsplit("/", 1)[-1]
    found = _GPT5.match(name)
    if found is not None:
        minor = int(found[1] or 0)
        if minor == 6:
            return ALL_TURNS
        return CURRENT_TURN if minor < 6 else None
    if _O_SERIES.match(name) or _CODEX_MINI.match(name):
        return CURRENT_TURN
    return None


def effective_context(req: RequestFacts, earlier: Entry | None = None) -> str | None:
    """The request's ``reasoning.context``: as sent when explicit (`auto` leaves it to the model: unknown here), else
    its model's default; for a model this table does not know, the context the API returned to an earlier request of
    the same model (``earlier``, a response this request continues). None when unknown."""
    reasoning = req.reasoning
    sent = reasoning.context if reasoning is not None else None
    if sent in _EXPLICIT:
        return sent
    if sent is not None:
        return None  # `auto`, or a value this table does not know: the model decides, and nothing here says how
    default = model_default(req.model)
    if default is not None:
        return default
    if earlier is not None and earlier.model is not None and earlier.model == req.model:
        returned = earlier.reasoning_context
        return returned if returned in _EXPLICIT else None
    return None


def latest_user_message(req: RequestFacts) -> int | None:
    """Where the request's current turn begins: the position of the latest input message of role ``user`` (the app
    writes those; a tool output is none), None when the input holds no user message (a tool loop's next step)."""
    items = req.input_items
    for position in range(len(items) - 1, -1, -1):
        meta = items[position]
        if meta.role == "user" and meta.type == "message":
            return position
    return None
