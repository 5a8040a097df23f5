"""The ``otel-responses`` command (``cli``) and what it runs: the demo and its scenarios, ``doctor``, the shipped
dashboard files and the conversation report. Nothing of the instrumentation depends on it."""

__all__: list[str] = []  # a command, not a library: its modules are its own business
