"""The "Tokens, latency and errors" row: what the calls consume and how they fail. The one row that reads the GenAI
conventions' metrics, so the one that has a form per dialect: ``tokens_latency_errors`` (the default dialect's token
histogram and operation duration) and ``tokens_latency_errors_latest`` (the usage counters, the inference duration,
the operation duration of the other operations)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import timeseries

from dashboards.names import (
    DURATION,
    ERROR_TYPE,
    INFERENCE_DURATION,
    MODEL,
    TOKEN_KIND,
    TOKEN_TYPE,
    TOKEN_USAGE_SUM,
    TOKENS,
    USAGE_CACHE_READ,
    USAGE_CACHE_WRITE,
    USAGE_INPUT,
    USAGE_OUTPUT,
    USAGE_REASONING,
)
from dashboards.panels import Section, legend, prom, series
from dashboards.promql import cache_hit_ratio, ne, no_model, per_minute, per_second, quantile

TITLE = "Tokens, latency and errors"
_TOKENS_TAIL = (
    "Input growing turn after turn is normal when history is replayed; a sudden drop can mean history was cut."
)
_CACHE = (
    "Per model, cached input tokens over input tokens. The prompt cache needs an unchanged prefix: changing "
    "instructions (signal instructions_changed) or rewritten history make it fall, and cost and latency rise with it."
)
_LATENCY_TAIL = (
    "from sending the request to the end of the response or stream, as percentiles per requested model. They are "
    "estimated from histogram buckets, so read them to within a bucket's width."
)
_ERRORS = (
    "Failed calls per minute by error.type (the exception class, e.g. BadRequestError, RateLimitError) and model. A "
    "BadRequestError together with an error signal (state_mode_conflict, unstored_parent, a tool-call signal) means "
    "the API refused the request for the reason the signal names."
)


def tokens_latency_errors() -> Section:
    """Token usage, the prompt cache, latency and errors: what lost context costs in time (the default dialect)."""
    tokens = (
        series(
            "Token usage",
            "Tokens per second from each response's usage: input (all prompt tokens) and output, from the GenAI "
            "token histogram; cached_input (the part of input served from the prompt cache) and reasoning (the "
            f"part of output spent thinking), from openai_responses.tokens. {_TOKENS_TAIL}",
            unit="suffix: tokens/s",
        )
        .with_target(prom(per_second(TOKEN_USAGE_SUM, by=(TOKEN_TYPE,)), legend(TOKEN_TYPE)))
        .with_target(prom(per_second(TOKENS, by=(TOKEN_KIND,)), legend(TOKEN_KIND), ref="B"))
    )
    latency = series(
        "Latency p50 / p95 / p99 by model",
        f"Client-side duration of each call (gen_ai.client.operation.duration), {_LATENCY_TAIL}",
        unit="s",
    )
    errors = series("Errors by error.type", _ERRORS, unit="cpm").with_target(
        prom(
            no_model(per_minute(DURATION + "_count", ne(ERROR_TYPE, ""), by=(ERROR_TYPE, MODEL))),
            legend(ERROR_TYPE, MODEL),
        )
    )
    return _section(tokens, cache_hit_ratio(), _percentiles(latency, DURATION), errors)


def tokens_latency_errors_latest() -> Section:
    """The same row for the latest dialect (``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``): the usage
    counters (one per token category: counters, not a histogram's sum), the inference duration of the model calls,
    and the errors of every operation (inference and the others each have their duration histogram)."""
    tokens = series(
        "Token usage",
        "Tokens per second from the GenAI usage counters (gen_ai.client.inference.usage.*): input (all prompt "
        "tokens) and output; cached_input (the part of input served from the prompt cache), cache_write (the part "
        f"written to it) and reasoning (the part of output spent thinking). {_TOKENS_TAIL}",
        unit="suffix: tokens/s",
    )
    for ref, (metric, name) in zip(
        "ABCDE",
        (
            (USAGE_INPUT, "input"),
            (USAGE_OUTPUT, "output"),
            (USAGE_CACHE_READ, "cached_input"),
            (USAGE_CACHE_WRITE, "cache_write"),
            (USAGE_REASONING, "reasoning"),
        ),
        strict=True,
    ):
        tokens = tokens.with_target(prom(per_second(metric), name, ref=ref))
    latency = series(
        "Latency p50 / p95 / p99 by model",
        f"Client-side duration of each model call (gen_ai.client.inference.duration), {_LATENCY_TAIL}",
        unit="s",
    )
    errors = (
        series("Errors by error.type", _ERRORS, unit="cpm")
        .with_target(
            prom(
                no_model(per_minute(INFERENCE_DURATION + "_count", ne(ERROR_TYPE, ""), by=(ERROR_TYPE, MODEL))),
                legend(ERROR_TYPE, MODEL),
            )
        )
        .with_target(
            prom(
                no_model(per_minute(DURATION + "_count", ne(ERROR_TYPE, ""), by=(ERROR_TYPE, MODEL))),
                legend(ERROR_TYPE, MODEL) + " (other operations)",
                ref="B",
            )
        )
    )
    return _section(tokens, cache_hit_ratio(latest=True), _percentiles(latency, INFERENCE_DURATION), errors)


def _percentiles(panel: timeseries.Panel, duration: str) -> timeseries.Panel:
    return (
        panel.with_target(prom(quantile(0.5, duration), "p50 " + legend(MODEL), "A"))
        .with_target(prom(quantile(0.95, duration), "p95 " + legend(MODEL), "B"))
        .with_target(prom(quantile(0.99, duration), "p99 " + legend(MODEL), "C"))
    )


def _section(tokens: timeseries.Panel, cache: str, latency: timeseries.Panel, errors: timeseries.Panel) -> Section:
    cache_panel = series("Cache hit ratio", _CACHE, unit="percentunit").max(1).with_target(prom(cache, legend(MODEL)))
    return Section(TITLE, [tokens, cache_panel, latency, errors])
