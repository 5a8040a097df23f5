"""Patches made in a library when the app imports it, never by importing it ourselves: ``instrument()`` costs nothing
for an app that does not use the library (importing litellm takes seconds and reaches for the network).

``wrapt.register_post_import_hook`` runs the hook when the module's import completes, or at once when it already
has. wrapt cannot unregister a hook: one registered by an instrumentor since uninstrumented patches nothing.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NamedTuple

from opentelemetry.instrumentation.utils import unwrap
from wrapt import register_post_import_hook, wrap_function_wrapper

_log = logging.getLogger(__name__)

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


class Seam(NamedTuple):
    """One function or method to wrap: the module that defines its owner, the owner (a class name, or ``""`` for
    the module itself), the attribute, and the wrapper."""

    module: str
    owner: str
    name: str
    wrapper: Wrapper


class _Patch(NamedTuple):
    owner: object
    name: str
    own: bool  # the owner defined it itself (else a class inherited it: un-shadowed on restore)


class Hooks:
    """The seams of one library for one ``instrument()``: applied when ``trigger`` is imported, restored by
    :meth:`stop`. ``seams`` is called then (it may read the library's version to choose them)."""

    def __init__(self, trigger: str, seams: Callable[[], Sequence[Seam]]) -> None:
        self._trigger = trigger
        self._seams = seams
        self._patched: list[_Patch] = []
        self._active = False
        self._lock = threading.Lock()

    def start(self) -> None:
        self._active = True
        register_post_import_hook(self._imported, self._trigger)

    def _imported(self, module: ModuleType) -> None:
        """The library is imported: patch it, unless this instrumentor was turned off since (or already did)."""
        with self._lock:
            if not self._active or self._patched:
                return
            try:
                seams = self._seams()
            except Exception:
                _log.debug("otel-responses: could not list the seams of %s; it is not instrumented", self._trigger)
                return
            for seam in seams:
                patch = _apply(seam)
                if patch is not None:
                    self._patched.append(patch)

    def stop(self) -> None:
        """Restore every patch exactly (an inherited method is un-shadowed, not copied onto the class)."""
        with self._lock:
            self._active = False
            patched, self._patched = self._patched, []
        for patch in reversed(patched):
            try:
                if patch.own:
                    unwrap(patch.owner, patch.name)
                elif patch.name in vars(patch.owner):
                    delattr(patch.owner, patch.name)
            except Exception:
                _log.debug("otel-responses: could not restore %s", patch.name)

    @property
    def patched(self) -> int:
        """How many seams are patched now."""
        return len(self._patched)


def _apply(seam: Seam) -> _Patch | None:
    """Wrap one seam, if the installed release has it (a seam a release lacks is skipped)."""
    try:
        module = importlib.import_module(seam.module)
    except ImportError:
        return None
    owner: object = module
    if seam.owner:
        owner = getattr(module, seam.owner, None)
        if not isinstance(owner, type):
            return None
    if not callable(getattr(owner, seam.name, None)):
        return None
    own = seam.name in vars(owner)
    wrap_function_wrapper(owner, seam.name, seam.wrapper)
    return _Patch(owner, seam.name, own)
