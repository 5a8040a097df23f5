"""One line per signal for a person at a console with no backend, through the ``otel_responses`` logger: the
signal, its severity, the turn, the response id, the fix and the signal's section of the documentation.

The package adds no handler. An app that configured no logging sees the line on standard error through Python's
last-resort handler (WARNING and above: an ``info`` signal's line is logged at WARNING too, so that the level the
app asked for shows); an app that configured logging routes the record like any library's warning.

What it gives up, so that a busy service does not get a line per conversation: at ``error`` and ``warning`` a
signal is logged once per process (per ``instrument()``: the next one starts afresh); at ``info``, once per signal
and lineage, the pairs remembered up to ``MAX_PAIRS`` (the oldest forgotten, and so said again if it comes back);
and never more than ``PER_MINUTE`` lines a minute. A line the minute's bound holds back is not counted as said:
the signal's next occurrence may say it, and the next line said tells how many were held back. Thread-safe: one
lock around what is remembered; the record is logged outside it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ..docs_links import signal_doc_url
from ..signals import ERROR, INFO, WARNING, Signal
from .recorded import lineage_id_of, response_id_of

if TYPE_CHECKING:
    from .recorded import Outcome
    from .recorded import Recorded as Call

OFF: Final = "off"
LEVELS: Final = (OFF, ERROR, WARNING, INFO)  # the `log_signals` values, the quietest first
DEFAULT: Final = WARNING
PER_MINUTE: Final = 10
MAX_PAIRS: Final = 4096
# The Python logging level of a signal's line (an `info` signal's at WARNING: see the module's docstring).
_LOGGING_LEVEL: Final = {ERROR: logging.ERROR, WARNING: logging.WARNING, INFO: logging.WARNING}
_RANK: Final = {ERROR: 1, WARNING: 2, INFO: 3}  # a signal is logged when its rank is at most the setting's

_log = logging.getLogger("otel_responses")

Key = tuple[str, str | None]  # (signal, lineage id): the lineage only at `info`


def parse_level(value: object) -> str:
    """A ``log_signals`` value: ``off``, ``error``, ``warning`` or ``info``, in any case."""
    word = value.strip().lower() if isinstance(value, str) else None
    if word not in LEVELS:
        raise ValueError(f"must be one of {', '.join(LEVELS)}")
    return word


class SignalLog:
    """The console lines of one ``instrument()``, at or above ``level``."""

    def __init__(self, level: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._rank = _RANK.get(level, 0)  # 0: off
        self._per_lineage = level == INFO
        self._clock = clock
        self._lock = threading.Lock()
        self._said: OrderedDict[Key, None] = OrderedDict()
        self._window = -60.0
        self._in_window = 0
        self._held = 0

    @property
    def on(self) -> bool:
        return self._rank > 0

    def record(self, call: Call, outcome: Outcome) -> None:
        """The lines of the call's signals that are due."""
        rank = self._rank
        for signal in call.signals:
            if _RANK[signal.severity] > rank:
                continue
            lineage = lineage_id_of(call, outcome) if self._per_lineage else None
            held = self._take((signal.name, lineage))
            if held is not None:
                _log.log(_LOGGING_LEVEL[signal.severity], "%s", self._line(signal, call, outcome, held))

    def _take(self, key: Key) -> int | None:
        """Whether ``key`` is due now (then how many lines were held back before it), marking it said; None when it
        was said already or the minute's lines are spent."""
        with self._lock:
            said = self._said
            if key in said:
                said.move_to_end(key)
                return None
            now = self._clock()
            if now - self._window >= 60.0:
                self._window, self._in_window = now, 0
            if self._in_window >= PER_MINUTE:
                self._held += 1
                return None
            self._in_window += 1
            said[key] = None
            if len(said) > MAX_PAIRS:
                said.popitem(last=False)
            held, self._held = self._held, 0
            return held

    def _line(self, signal: Signal, call: Call, outcome: Outcome, held: int) -> str:
        turn = call.lineage.turn
        response_id = response_id_of(call, outcome)
        once = "once per signal and lineage" if self._per_lineage else "once per process"
        line = (
            f"otel-responses: {signal.name} ({signal.severity}), turn {turn if turn is not None else 'unknown'}, "
            f"response {response_id or 'none'}: {signal.fix}. {signal_doc_url(signal.name)} "
            f"(logged {once}; see the log_signals setting)"
        )
        if held:
            line += f" [{held} more signal line{'s' if held > 1 else ''} held back: at most {PER_MINUTE} a minute]"
        return line
