"""The system programs the tests start (a Redis server, a Redis Cluster, Prometheus, promtool, Chromium): found on
PATH and nowhere else, so a machine without one is one whose PATH lacks it.

Whatever starts one asks ``program()`` for its path, and a missing program is decided there, once, for every test
that needs it: skipped locally, failed in CI (``CI`` set), where .ci/run installs it, so that a missing install step
cannot pass as a skip. No test marks itself; a test that starts a program cannot forget (tests/project/test_programs.py
holds it). Only the standard library and pytest are imported here: bench/ uses the Redis Cluster launcher too.
"""

from __future__ import annotations

import os
import shutil
from typing import Final, NoReturn

import pytest

# Each program's Debian package (what .ci/run installs).
PACKAGES: Final = {
    "redis-server": "redis-server",
    "redis-cli": "redis-tools",
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "chromium": "chromium",
    "curl": "curl",
}


def not_installed(message: str) -> NoReturn:
    """A tool the test needs is missing: skip locally, fail in CI (``CI`` set), where .ci/run installs it, so that a
    missing install step cannot pass as a skip."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def program(name: str, *alternatives: str) -> str:
    """The path of the system program ``name`` (or of the first of ``alternatives`` found) on PATH; when none is
    there, ``not_installed`` with a message naming it and its Debian package."""
    for candidate in (name, *alternatives):
        found = shutil.which(candidate)
        if found is not None:
            return found
    not_installed(f"{name} is not installed (Debian package {PACKAGES[name]}; .ci/run installs it)")
