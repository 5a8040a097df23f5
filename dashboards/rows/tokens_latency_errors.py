"""The "Tokens, latency and errors" row: what the calls consume and how they fail."""

from __future__ import annotations

from dashboards.names import DURATION, ERROR_TYPE, MODEL, TOKEN_KIND, TOKEN_TYPE, TOKEN_USAGE_SUM, TOKENS
from dashboards.panels import Section, legend, prom, series
from dashboards.promql import cache_hit_ratio, ne, no_model, per_minute, per_second, quantile


def tokens_latency_errors() -> Section:
    """Token usage, the prompt cache, latency and errors: what lost context costs in time."""
    return Section(
        "Tokens, latency and errors",
        [
            series(
                "Token usage",
                "Tokens per second from each response's usage: input (all prompt tokens) and output, from the GenAI "
                "token histogram; cached_input (the part of input served from the prompt cache) and reasoning (the "
                "part of output spent thinking), from openai_responses.tokens. Input growing turn after turn is "
                "normal when history is replayed; a sudden drop can mean history was cut.",
                unit="suffix: tokens/s",
            )
            .with_target(prom(per_second(TOKEN_USAGE_SUM, by=(TOKEN_TYPE,)), legend(TOKEN_TYPE)))
            .with_target(prom(per_second(TOKENS, by=(TOKEN_KIND,)), legend(TOKEN_KIND), ref="B")),
            series(
                "Cache hit ratio",
                "Per model, cached input tokens over input tokens. The prompt cache needs an unchanged prefix: "
                "changing instructions (signal instructions_changed) or rewritten history make it fall, and cost "
                "and latency rise with it.",
                unit="percentunit",
            )
            .max(1)
            .with_target(prom(cache_hit_ratio(), legend(MODEL))),
            series(
                "Latency p50 / p95 / p99 by model",
                "Client-side duration of each call (gen_ai.client.operation.duration), from sending the request to "
                "the end of the response or stream, as percentiles per requested model. They are estimated from "
                "histogram buckets, so read them to within a bucket's width.",
                unit="s",
            )
            .with_target(prom(quantile(0.5), "p50 " + legend(MODEL), "A"))
            .with_target(prom(quantile(0.95), "p95 " + legend(MODEL), "B"))
            .with_target(prom(quantile(0.99), "p99 " + legend(MODEL), "C")),
            series(
                "Errors by error.type",
                "Failed calls per minute by error.type (the exception class, e.g. BadRequestError, RateLimitError) "
                "and model. A BadRequestError together with an error signal (state_mode_conflict, unstored_parent, "
                "a tool-call signal) means the API refused the request for the reason the signal names.",
                unit="cpm",
            ).with_target(
                prom(
                    no_model(per_minute(DURATION + "_count", ne(ERROR_TYPE, ""), by=(ERROR_TYPE, MODEL))),
                    legend(ERROR_TYPE, MODEL),
                )
            ),
        ],
    )
