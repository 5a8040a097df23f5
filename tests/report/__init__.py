"""The report page: read from OTLP/JSON, grouped into conversations, rendered, opened in a browser."""
