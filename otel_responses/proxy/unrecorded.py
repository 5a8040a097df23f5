"""Calls the proxy forwards without recording them, counted: a known Responses API route whose body it cannot read
(a coding it cannot undo, JSON it cannot parse) or will not analyse (past the analysis bound, or while the analysis
is too far behind) goes upstream all the same — the API may accept what the proxy cannot read — and is never
silent. Each is counted in ``openai_responses.proxy.unrecorded`` by reason (a small fixed set) and said once per
reason per process on the ``otel_responses.proxy`` logger; the reason is the only thing said, never a value of the
request. In strict mode the reasons that mean "cannot read" refuse the call instead (``REFUSED_IN_STRICT_MODE``).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Final

from opentelemetry.metrics import Meter

from ..attributes import METRIC_PROXY_UNRECORDED, PROXY_REASON

UNSUPPORTED_ENCODING: Final = "unsupported_encoding"
CORRUPT_ENCODING: Final = "corrupt_encoding"
INVALID_JSON: Final = "invalid_json"
TOO_DEEP: Final = "too_deep"
TOO_LARGE: Final = "too_large"
ANALYSIS_BEHIND: Final = "analysis_behind"

# Every reason, with what it means (the Proxy page lists the same).
REASONS: Final = {
    UNSUPPORTED_ENCODING: "its Content-Encoding names a coding the proxy cannot undo (an unknown one, or br without "
    "a Brotli module)",
    CORRUPT_ENCODING: "its body is not valid in the coding its Content-Encoding names",
    INVALID_JSON: "its body is not a JSON object",
    TOO_DEEP: "its JSON is nested deeper than the proxy reads",
    TOO_LARGE: "its body, as sent or decompressed, is past the analysis bound",
    ANALYSIS_BEHIND: "the analysis was too far behind to take it",
}
# What strict mode refuses rather than forwards unchecked: a body the proxy cannot read at all. Past the analysis
# bound, or behind, strict mode waits for its verdict instead (a body past the body limit itself is ``TOO_LARGE``
# and refused).
REFUSED_IN_STRICT_MODE: Final = frozenset({UNSUPPORTED_ENCODING, CORRUPT_ENCODING, INVALID_JSON, TOO_DEEP, TOO_LARGE})

_log = logging.getLogger("otel_responses.proxy")


class Unrecorded:
    """The counter, the once-per-reason log line and a tally of this process's own (what ``ThreadedProxy`` reads).
    Safe to call from any thread."""

    def __init__(self, meter: Meter) -> None:
        self._counter = meter.create_counter(
            METRIC_PROXY_UNRECORDED,
            unit="{call}",
            description="Calls the proxy forwarded without recording them, by reason (a body it cannot read or "
            "would not analyse).",
        )
        self._lock = threading.Lock()
        self._tally: Counter[str] = Counter()

    def count(self, reason: str) -> None:
        with self._lock:
            first = reason not in self._tally
            self._tally[reason] += 1
        self._counter.add(1, {PROXY_REASON: reason})
        if first:
            _log.warning(
                "otel-responses proxy: a call was forwarded unrecorded: %s (counted in %s, %s=%s; said once)",
                REASONS.get(reason, reason),
                METRIC_PROXY_UNRECORDED,
                PROXY_REASON,
                reason,
            )

    def tally(self) -> dict[str, int]:
        """How many calls were forwarded unrecorded, by reason."""
        with self._lock:
            return dict(self._tally)


def refusal_message(reason: str) -> str:
    """Strict mode's answer to a body it cannot read: what it could not do, why, and the way out."""
    return (
        f"otel-responses proxy (strict mode) could not read this request's body: {REASONS.get(reason, reason)}. "
        "It was not forwarded, since it could not be checked for context loss. Send a body the proxy can read, or "
        "turn strict mode off to forward such a request unrecorded (it is then counted)."
    )
