"""The instrumentation through the real `openai` client and the library seams: spans, signals and strict mode, per
call."""
