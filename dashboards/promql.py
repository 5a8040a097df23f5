"""The PromQL of the panels and the rules: matchers, and counting that sees a new series' first sample.

``tests/project/test_dashboards.py`` evaluates every expression built here against a real Prometheus scraping the real
exporter, so these helpers are where a query's meaning is decided.
"""

from __future__ import annotations

from collections.abc import Sequence

from dashboards.names import (
    COST,
    COST_SAVED,
    CURRENCY,
    DURATION,
    MODEL,
    SERVICE,
    TOKEN_KIND,
    TOKEN_TYPE,
    TOKEN_USAGE_SUM,
    TOKENS,
    USAGE_CACHE_READ,
    USAGE_INPUT,
)


def eq(name: str, value: str) -> str:
    return f'{name}="{value}"'


def ne(name: str, value: str) -> str:
    return f'{name}!="{value}"'


def matches(name: str, values: Sequence[str]) -> str:
    return f'{name}=~"{"|".join(values)}"'


def group(by: Sequence[str]) -> str:
    """``sum by (a, b) `` or ``sum`` for no labels."""
    return f"sum by ({', '.join(by)}) " if by else "sum"


# The dashboard's template variables and Grafana's interval variables, as the panels' queries use them.
FILTER = f'{SERVICE}=~"$service", {MODEL}=~"$model"'
RATE = "$__rate_interval"
#: The same interval in milliseconds (Grafana 10.2+), to turn events per interval into a rate.
RATE_MS = "$__rate_interval_ms"
RANGE = "$__range"
#: Calls without a model (retrieve, input items, the Conversations API) have no model label: per-model panels of
#: ratios and latency leave them out, per-model panels of problems name them NO_MODEL (``no_model()``).
HAS_MODEL = ne(MODEL, "")
NO_MODEL = "(no model)"


def sel(metric: str, *matchers: str) -> str:
    """``metric{service and model filters, matchers...}``."""
    return f"{metric}{{{', '.join([FILTER, *matchers])}}}"


# Whether a series existed ``window`` ago is read from its samples in the ``BEFORE`` just before then, not from the
# instant: one failed scrape there leaves a staleness marker, and an instant selector would then take a long-lived
# series for a new one and count its whole value (a false alert). A range ignores staleness markers.
BEFORE = "2m"


def fresh(selector: str, window: str) -> str:
    """What a counter counted in ``window``, a series' first sample included: the rules' ``events()`` on one line.

    ``rate()``/``increase()`` never count a series' first sample, and the exporter creates a series at its first
    event, already at 1: a brand-new model's first (often only) signal would show as 0 or nothing. A series born
    inside the window counts at its whole value, an older one (with a sample in the ``BEFORE`` before the window)
    by its increase; never both (``or`` keeps the left side of a label set present on both).
    """
    before = f"last_over_time({selector}[{BEFORE}] offset {window})"
    return f"(({selector} unless {before}) or increase({selector}[{window}]))"


def total(metric: str, *matchers: str, by: Sequence[str] = (), window: str = RANGE) -> str:
    """``metric``'s events in ``window`` (the selected range by default), summed by ``by``."""
    return f"{group(by)}({fresh(sel(metric, *matchers), window)})"


def per_minute(metric: str, *matchers: str, by: Sequence[str] = ()) -> str:
    """Events per minute at each step: events in ``$__rate_interval``, first samples included, over its length.

    ``60 * rate(x[$__rate_interval])`` on counters born inside the interval, plus their first value: the same
    per-step average ``rate()`` draws, only not blind to a new series.
    """
    return f"{total(metric, *matchers, by=by, window=RATE)} * 60000 / {RATE_MS}"


def per_second(metric: str, *matchers: str, by: Sequence[str] = ()) -> str:
    return f"{total(metric, *matchers, by=by, window=RATE)} * 1000 / {RATE_MS}"


def share(metric: str, part: str, whole: Sequence[str] = (), by: Sequence[str] = (), window: str = RATE) -> str:
    """Share of ``metric`` events matching ``part`` among those matching ``whole``: 0, not "no data", when none do.

    The ``or 0 * ...`` term keeps groups that have events but none of the part at 0 instead of dropping them.
    """
    part_total = total(metric, part, *whole, by=by, window=window)
    whole_total = total(metric, *whole, by=by, window=window)
    return f"(\n{part_total}\nor\n0 * {whole_total}\n)\n/\n{whole_total}"


def cache_hit_ratio(latest: bool = False) -> str:
    """Cached input tokens over input tokens, per model; 0 when none hit. The default dialect: the project's counter
    over the GenAI histogram's input sum; the latest: the usage counters, cache read over input."""
    by = (MODEL,)
    if latest:  # a failed call counts 0 input tokens: a model with only those has no ratio (not NaN)
        cached = total(USAGE_CACHE_READ, HAS_MODEL, by=by, window=RATE)
        inputs = total(USAGE_INPUT, HAS_MODEL, by=by, window=RATE)
        return f"(\n{cached}\nor\n0 * {inputs}\n)\n/\n({inputs} > 0)"
    cached = total(TOKENS, eq(TOKEN_KIND, "cached_input"), HAS_MODEL, by=by, window=RATE)
    inputs = total(TOKEN_USAGE_SUM, eq(TOKEN_TYPE, "input"), HAS_MODEL, by=by, window=RATE)
    return f"(\n{cached}\nor\n0 * {inputs}\n)\n/\n{inputs}"


def quantile(q: float, duration: str = DURATION) -> str:
    """A latency percentile per model from the buckets' increase over ``$__rate_interval``, new buckets included;
    ``duration``: the histogram (the latest dialect's model calls have their own, the inference duration)."""
    buckets = fresh(sel(duration + "_bucket", HAS_MODEL), RATE)
    return f"histogram_quantile({q}, sum by (le, {MODEL}) ({buckets}))"


def no_model(expr: str) -> str:
    """Name the group of calls without a model (retrieve, input items, Conversations API methods) ``(no model)``.

    For panels of problems (signals, errors): such a call can raise one (``unstored_retrieve``, a tool-call signal on
    ``conversations.items.create``) and the alerts count it; it is shown, under a name, not as an empty label.
    """
    return f'label_replace(\n{expr},\n"{MODEL}", "{NO_MODEL}", "{MODEL}", ""\n)'


def cost_saved_share() -> str:
    """What cached input saved over what the input would have cost without the cache: saved / (cost + saved)."""
    by = (MODEL, CURRENCY)
    cost = total(COST, HAS_MODEL, by=by, window=RATE)
    saved = f"(\n{total(COST_SAVED, HAS_MODEL, by=by, window=RATE)}\nor\n0 * {cost}\n)"
    return f"{saved}\n/\n(\n{cost}\n+\n{saved}\n)"
