"""The exit codes of ``otel-responses`` and its commands, in a module of their own so that each command's module
and the command line's import them from below (the EPILOG of ``cli`` says what each means)."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_UNREACHABLE: Final = 3
EXIT_REFUSED: Final = 4
EXIT_MISSING_EXTRA: Final = 5
EXIT_INTERRUPTED: Final = 130  # the shell's code for a process ended by Ctrl-C (128 + SIGINT)
