"""Configuration of the emulator, kept in its own module so every part can import it without cycles."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_REASONING_MODELS: tuple[str, ...] = ("o1", "o3", "o4", "gpt-5", "codex")


@dataclass(frozen=True)
class EmulatorConfig:
    """Knobs of the emulator; the defaults give a faithful, deterministic endpoint.

    seed: makes every id, code word and request id reproducible.
    drop_context: a deliberately broken endpoint whose model only sees the current
        request's own input items (used to show what losing context looks like).
    reasoning_models: model-name prefixes that reason even without a `reasoning` parameter.
    secret: key that seals reasoning `encrypted_content`; None picks a random key per
        emulator, so tokens from another emulator fail verification like they would
        against another organisation.
    background_polls: how many retrieves of a `background: true` response still see it
        unfinished (`in_progress`); the retrieve after them sees it finished.
    api_key: when set, any other bearer key is refused with the API's 401 (`invalid_api_key`),
        to test how a client reports a refused key.
    """

    seed: str = "otel-responses"
    drop_context: bool = False
    reasoning_models: tuple[str, ...] = DEFAULT_REASONING_MODELS
    secret: bytes | None = None
    background_polls: int = 2
    api_key: str | None = None

    def is_reasoning_model(self, model: str) -> bool:
        """Whether `model` reasons by default (prefix match, as model snapshots add suffixes)."""
        return any(model.startswith(prefix) for prefix in self.reasoning_models)
