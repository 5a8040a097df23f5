"""Where the instrumentation meets the ``openai`` SDK: the wrappers of its methods, the proxies of its streams and
raw responses, WebSocket mode, and what library seams share (the process's one runtime, post-import hooks, the
providers a client reaches). Each drives the call machinery of ``_calls``."""
