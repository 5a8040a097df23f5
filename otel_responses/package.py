"""The instrumented library and its supported range (read by ``opentelemetry-instrument``)."""

_instruments = ("openai >= 1.101.0",)
