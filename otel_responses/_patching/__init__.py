"""Where the instrumentation meets the code it observes: the wrappers of the ``openai`` SDK's methods, the one
object of each call (``call.Call``), the operation table, the stream and WebSocket observers, and what library seams
share (the one telemetry of every instrumentor, post-import hooks, a library call between its seams)."""
