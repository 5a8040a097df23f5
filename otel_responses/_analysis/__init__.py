"""The pure core: the facts of a request and of a response, the request against the ledger (which earlier
responses it continues, matched by one rule), the signal checks and the lineage. It imports neither the patching nor
the telemetry: it can be tested with item shapes alone."""
