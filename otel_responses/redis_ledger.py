"""The previous release's import path of the shared ledger, kept for one release: import from
``otel_responses.ledger.redis`` instead."""

from __future__ import annotations

import warnings

from .ledger.redis import *  # noqa: F403
from .ledger.redis import __all__ as __all__

warnings.warn(
    "otel_responses.redis_ledger is now otel_responses.ledger.redis; the old path works for this release only",
    DeprecationWarning,
    stacklevel=2,
)
