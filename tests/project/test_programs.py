"""A system program the tests start, missing: every starter skips the test locally and fails it in CI, naming the
program, and finds programs on PATH only (so a machine without one is one whose PATH lacks it)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from .. import report_support
from ..programs import PACKAGES, program
from ..redis_cluster import LocalCluster
from ..shared_ledger import RedisServer
from ..support import prometheus_binary

TESTS = Path(__file__).parents[1]

Starter = Callable[[Path], object]

# Each way a test starts a system program, and the program it needs first.
STARTERS: dict[str, tuple[Starter, str]] = {
    "a Redis server": (lambda where: RedisServer(where).start(), "redis-server"),
    "a Redis Cluster": (lambda where: LocalCluster(where).start(), "redis-server"),
    "Prometheus": (lambda where: prometheus_binary("prometheus"), "prometheus"),
    "promtool": (lambda where: prometheus_binary("promtool"), "promtool"),
    "Chromium": (lambda where: report_support.dump_dom(where / "page.html"), "chromium"),
}


def _only_on_path(monkeypatch: pytest.MonkeyPatch, where: Path, *names: str) -> None:
    """PATH holds a folder with links to ``names`` (found where they are installed) and nothing else."""
    found = {name: program(name) for name in names}  # before PATH changes
    folder = where / "bin"
    folder.mkdir()
    for name, path in found.items():
        (folder / name).symlink_to(path)
    monkeypatch.setenv("PATH", str(folder))


@pytest.mark.parametrize("ci", [False, True], ids=["locally", "in CI"])
@pytest.mark.parametrize("starter", list(STARTERS))
def test_a_starter_without_its_program_skips_locally_and_fails_in_ci(
    starter: str, ci: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start, name = STARTERS[starter]
    _only_on_path(monkeypatch, tmp_path)
    if ci:
        monkeypatch.setenv("CI", "true")
    else:
        monkeypatch.delenv("CI", raising=False)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome) as raised:
        start(tmp_path)
    assert str(raised.value.msg).startswith(f"{name} is not installed (Debian package {PACKAGES[name]};")


def test_a_redis_cluster_without_redis_cli_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster needs both programs: with redis-server alone, the one missing is named."""
    _only_on_path(monkeypatch, tmp_path, "redis-server")
    monkeypatch.delenv("CI", raising=False)
    cluster = LocalCluster(tmp_path / "cluster")
    with pytest.raises(pytest.skip.Exception, match=r"^redis-cli is not installed \(Debian package redis-tools;"):
        cluster.start()
    assert cluster.running() == []  # nothing was left running


def test_a_program_is_looked_for_on_path_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed in /usr/bin here, redis-server is still missing to a PATH without it; with it on PATH, found."""
    installed = program("redis-server")
    _only_on_path(monkeypatch, tmp_path)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        program("redis-server")
    monkeypatch.setenv("PATH", os.path.dirname(installed))
    assert program("redis-server") == installed


def test_no_test_looks_for_a_system_program_but_through_programs() -> None:
    """A module that found a program itself (``shutil.which``, a fixed path) could skip or fail on its own terms."""
    names = "|".join(re.escape(name) for name in PACKAGES)
    own_lookup = re.compile(rf"""shutil\.which\(\s*f?["'](?:{names})|["']/usr/s?bin/""")
    found = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != "programs.py" and own_lookup.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []
