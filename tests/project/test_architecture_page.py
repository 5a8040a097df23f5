"""The contributors' architecture page (docs/architecture.md) keeps the picture true: every module of the package
is listed there, in a table row of its own, and every module the page lists exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "otel_responses"
PAGE = (ROOT / "docs" / "architecture.md").read_text()
ROW = re.compile(r"^\| `([\w/]+\.py)` \| (.+) \|$", re.M)


def modules() -> set[str]:
    """Every Python module of the package, by its path inside it (built files such as ``_dashboards/`` have none)."""
    return {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")}


def listed(page: str) -> list[str]:
    return [name for name, _ in ROW.findall(page)]


def test_every_module_is_listed_with_its_job_and_nothing_else_is() -> None:
    names = listed(PAGE)
    assert len(names) == len(set(names)), "a module listed twice"
    assert set(names) == modules()
    assert all(job.strip() for _, job in ROW.findall(PAGE))


def test_a_module_only_mentioned_is_not_listed() -> None:
    """The near miss: the check reads table rows, not mentions; a row without its backticked path lists nothing."""
    unlisted = PAGE.replace("| `_calls/call.py` |", "| _calls/call.py |")
    assert modules() - set(listed(unlisted)) == {"_calls/call.py"}


def test_the_layers_drawn_are_the_import_contracts_layers() -> None:
    """The picture's order of folders is the order ``lint-imports`` holds (pyproject.toml)."""
    contract = (ROOT / "pyproject.toml").read_text().split('type = "layers"', 1)[1].split("]", 1)[0]
    expected = re.findall(r"otel_responses\.(\w+)", contract)
    drawn = PAGE.split("## Layers", 1)[1].split("```", 2)[1]
    order = list(dict.fromkeys(re.findall(r"(\w+)/", drawn)))
    assert [folder for folder in order if folder in expected] == expected
