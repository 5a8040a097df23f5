"""The app sees the same with the instrumentation on as off, whatever the server, the peers or the instrumentation
itself do."""
