"""The project around the package: the command, the docs, packaging, CI, the dashboards, the public surface."""
