"""Configuration of the emulator, kept in its own module so every part can import it without cycles."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

DEFAULT_REASONING_MODELS: tuple[str, ...] = ("o1", "o3", "o4", "gpt-5", "codex")

_GPT_VERSION = re.compile(r"gpt-(\d+)(?:\.(\d+))?")


def returns_phase(model: str) -> bool:
    """Whether the real API returns `phase` on this model's assistant messages: `gpt-5.3-codex`, `gpt-5.4` and
    later, as public client libraries' model profiles have it (`gpt-5`, `gpt-5-mini`, `gpt-5.2`, `gpt-4.1`,
    `o3`... do not)."""
    found = _GPT_VERSION.match(model.lower())
    if found is None:
        return False
    major, minor = int(found[1]), int(found[2] or 0)
    if major != 5:
        return major > 5
    return minor >= 4 or (minor == 3 and "codex" in model.lower())


CURRENT_TURN = "current_turn"
ALL_TURNS = "all_turns"
REASONING_CONTEXTS = (CURRENT_TURN, ALL_TURNS)


def default_reasoning_context(model: str) -> str:
    """The `reasoning.context` a reasoning model uses when the request omits it (or sends `auto`): `all_turns` from
    the `gpt-5.6` family on, `current_turn` before it (the SDK's docstring of `Reasoning.context`; recorded traffic:
    gpt-5, 5-mini, 5.2, 5.4, 5.5, o3 and o4-mini answer `current_turn`, gpt-5.6 `all_turns`)."""
    found = _GPT_VERSION.match(model.lower())
    if found is None:
        return CURRENT_TURN
    major, minor = int(found[1]), int(found[2] or 0)
    return ALL_TURNS if major > 5 or (major == 5 and minor >= 6) else CURRENT_TURN


# What the emulator does with replayed reasoning made for another organization, model or end user: withhold it (and
# say so in `input_transformations`, as the API's newest answers do: the SDK types the reasons since 3.57), or refuse
# the request with the 400 `invalid_encrypted_content` reported before that (openai/codex#13724).
WITHHOLD = "withhold"
REFUSE = "refuse"


@dataclass(frozen=True)
class EmulatorConfig:
    """Knobs of the emulator; the defaults give a faithful, deterministic endpoint.

    seed: makes every id, code word and request id reproducible (`encrypted_content` is not: like the real API,
        each serialisation encrypts afresh).
    drop_context: a deliberately broken endpoint whose model only sees the current
        request's own input items (used to show what losing context looks like).
    reasoning_models: model-name prefixes of reasoning models. The model alone decides: a `reasoning`
        parameter (libraries send `"reasoning": {}` to every model) does not make a model reason.
    phase_models: which models return `phase` on assistant messages (default: the real API's rule,
        `returns_phase`); only those announce a tool call with a progress update (`phase: commentary`).
    store_default: the effective `store` of a request that omits it (the organisation's setting; the real
        API answers `"store": false` in the body when an organisation turned storage off).
    secret: key that seals reasoning `encrypted_content`; None picks a random key per
        emulator, so tokens from another emulator fail verification like they would
        against another organisation.
    background_polls: how many retrieves of a `background: true` response still see it
        unfinished (`in_progress`); the retrieve after them sees it finished.
    api_key: when set, any other bearer key is refused with the API's 401 (`invalid_api_key`),
        to test how a client reports a refused key.
    repeat_reasoning_ids: a habit of some Responses-compatible servers: each reasoning turn returns two reasoning
        items under one id, with payloads of their own (a client replaying both byte for byte loses nothing).
    context_window: the input tokens a model reads at most (None: no limit). Over it, a request with `truncation:
        "auto"` has its oldest items dropped until it fits (silently, as the API does); any other is refused with the
        API's 400 `context_length_exceeded`.
    organization: the caller's organization when a request names none (`OpenAI-Organization`): payloads are minted
        for the organization (and the project, `OpenAI-Project`) of the request that made them.
    key_organizations: the organization each API key belongs to (a gateway's account pool spans several): a request
        that names no organization is made under its key's; a key not listed is under `organization`.
    foreign_reasoning: `withhold` (the default: the newest evidence) or `refuse`: what replayed reasoning made for
        another organization, model or end user gets (see `WITHHOLD`).
    """

    seed: str = "otel-responses"
    drop_context: bool = False
    reasoning_models: tuple[str, ...] = DEFAULT_REASONING_MODELS
    phase_models: Callable[[str], bool] = returns_phase
    store_default: bool = True
    secret: bytes | None = None
    background_polls: int = 2
    api_key: str | None = None
    repeat_reasoning_ids: bool = False
    context_window: int | None = None
    organization: str = "org-emulator"
    key_organizations: Mapping[str, str] = field(default_factory=dict)
    foreign_reasoning: str = WITHHOLD

    def __post_init__(self) -> None:
        if self.foreign_reasoning not in (WITHHOLD, REFUSE):
            raise ValueError(f"foreign_reasoning must be {WITHHOLD!r} or {REFUSE!r}, not {self.foreign_reasoning!r}")
        if self.context_window is not None and self.context_window < 1:
            raise ValueError("context_window must be at least 1 token")

    def is_reasoning_model(self, model: str) -> bool:
        """Whether `model` reasons (prefix match, as model snapshots add suffixes)."""
        return any(model.startswith(prefix) for prefix in self.reasoning_models)
