"""The pure core, table-driven from real item shapes: the fast lane (`pytest tests/core` runs in seconds)."""
