"""The instrumented library and its supported range (read by ``opentelemetry-instrument``)."""

__all__: list[str] = []  # the contrib convention's module: nothing in it is for users

_instruments = ("openai >= 1.101.0",)
