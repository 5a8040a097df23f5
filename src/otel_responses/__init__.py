"""OpenTelemetry instrumentation for the OpenAI Responses API that names the ways context gets lost."""

from .config import ConfigError
from .instrumentor import ResponsesInstrumentor
from .signals import ContextLossError
from .version import __version__

__all__ = ["ConfigError", "ContextLossError", "ResponsesInstrumentor", "__version__"]
