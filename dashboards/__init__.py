"""Grafana dashboards and Prometheus alert rules for otel-responses, built as code (see dashboards/README.md)."""
