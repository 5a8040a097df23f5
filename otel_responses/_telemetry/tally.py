"""Counters summed in the process and reported by asynchronous counters when metrics are collected.

A synchronous ``Counter.add`` in the OpenTelemetry SDK cleans and hashes its attributes and takes a lock on
every call: about 20 µs on the benchmark machine, several times per call for the per-call counters. Summing
here costs a dict lookup under an uncontended lock; the SDK reads the totals once per collection through an
``ObservableCounter`` callback, and exporters see the same cumulative monotonic sums (a Prometheus
``_total``) either way. What is given up is exemplars, which only synchronous instruments carry; the signal
counter, whose exemplars lead from a signal to its trace, stays synchronous.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.util.types import AttributeValue

Attributes = dict[str, AttributeValue]

# At most this many series per counter, the last one the overflow series that sums any further attribute sets,
# as the SDK does for its own instruments. A memory guard only: it is twice the SDK's default cardinality limit
# (2000 attribute sets per instrument), so the limit that decides what is exported is the SDK's, which an operator
# sets (a View's `aggregation_cardinality_limit`, a reader's `cardinality_limits`) up to this bound. Attribute values
# are validated before they get here (`bounds`): a series costs well under a kilobyte.
MAX_SERIES = 4096
OVERFLOW: Attributes = {"otel.metric.overflow": True}


class Tally:
    """Cumulative sums per attribute set, observed by one ``ObservableCounter``."""

    __slots__ = ("_lock", "_totals")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[Hashable, list[Any]] = {}  # key -> [attributes, total]

    def add(self, key: Hashable, attributes: Attributes, amount: float) -> None:
        """Add ``amount`` to the series ``key`` names (``attributes`` must not change afterwards)."""
        with self._lock:
            series = self._totals.get(key)
            if series is None:
                if len(self._totals) >= MAX_SERIES - 1:
                    key, attributes = "overflow", OVERFLOW
                    series = self._totals.get(key)
                if series is None:
                    self._totals[key] = [attributes, amount]
                    return
            series[1] += amount

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            return [Observation(total, attributes) for attributes, total in self._totals.values()]


# The SDK keeps the first instrument registered under a name on a meter and ignores a second one's callbacks,
# so the tallies belong to the meter: an uninstrument/instrument cycle on the same provider counts on.
_BY_METER: weakref.WeakKeyDictionary[Meter, dict[str, Tally]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def observable_tally(meter: Meter, name: str, unit: str, description: str) -> Tally:
    """The tally behind the asynchronous counter ``name`` on ``meter``, registering it on first use."""
    with _LOCK:
        tallies = _BY_METER.setdefault(meter, {})
        tally = tallies.get(name)
        if tally is None:
            tally = tallies[name] = Tally()
            meter.create_observable_counter(name, callbacks=[tally.observe], unit=unit, description=description)
        return tally
