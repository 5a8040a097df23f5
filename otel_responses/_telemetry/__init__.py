"""Telemetry from a call: its span (``spans``), its metrics (``metrics``), the bounds on what is exported, the
in-process counters and the optional price table. The only folder that writes spans and metrics."""
