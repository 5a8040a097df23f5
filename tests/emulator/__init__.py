"""The emulator and the pytest kit built on it."""
