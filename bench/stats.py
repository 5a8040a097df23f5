"""The one percentile of the whole bench, so that a p90 means the same in every report."""

from __future__ import annotations

from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values``, interpolated linearly between the two nearest ranks.

    The usual definition (NumPy's default, R's type 7, ``statistics.quantiles(method="inclusive")``): the median
    of an even count is the mean of the middle two, and a p99 of few samples lies between two of them rather than
    jumping from one to the next.
    """
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    index = fraction * (len(ordered) - 1)
    low = int(index)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (index - low)
