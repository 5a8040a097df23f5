"""The call machinery every front end drives: one :class:`~.call.Call` per invocation (begun once, ended once), the
runtime it records with (settings, ledger, telemetry), the operation table and its HTTP paths, the observer of a
stream's events, and a library's call between its seams. It knows no SDK, library or proxy: those are the front ends
above it (``_patching``, ``integrations``, ``proxy``)."""
