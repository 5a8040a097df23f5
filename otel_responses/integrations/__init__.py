"""Instrumentors for libraries that reach the Responses API without the ``openai`` SDK's resource methods:
litellm (its own HTTP client) and DSPy (its vendored lm15). Each is its own ``BaseInstrumentor`` with its own entry
point; all share one :class:`~otel_responses._calls.runtime.Runtime` with the SDK's (``_patching.shared``)."""

__all__: list[str] = []  # each instrumentor is in its own module
