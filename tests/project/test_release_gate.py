"""The release gate (.ci/release_check.py, the release workflow's first check): a tag is released only when it names
the version of otel_responses/version.py and the changelog's top entry. Rows of a tag, a version.py and a changelog,
each with its near miss, run through the script as the workflow runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from otel_responses.version import __version__

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / ".ci" / "release_check.py"
LINK = "https://github.com/otel-responses/otel-responses/releases/tag"
COMPARE = "https://github.com/otel-responses/otel-responses/compare"
VERSION_PY = '"""The package version."""\n\n__version__ = "{}"\n'


def _changelog(*entries: str, links: tuple[str, ...] = ("0.1.0",)) -> str:
    head = "# Changelog\n\nAll notable changes.\n\n"
    refs = "".join(f"[{version}]: {LINK}/v{version}\n" for version in links)
    return head + "".join(entries) + refs


ENTRY = "## [0.1.0] - 2026-12-01\n\nThe first release.\n\n### Added\n\n- Everything.\n\n"
OK = "release check: v0.1.0 is the version of otel_responses/version.py and CHANGELOG.md's top entry\n"


def _gate(tmp_path: Path, tag: str, version_py: str, changelog: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "otel_responses").mkdir(exist_ok=True)
    (tmp_path / "otel_responses" / "version.py").write_text(version_py)
    (tmp_path / "CHANGELOG.md").write_text(changelog)
    return subprocess.run(
        [sys.executable, str(GATE), tag, "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("tag", "version", "changelog", "errors"),
    [
        # The release as it should be, and the tag, version.py or changelog one step off.
        ("v0.1.0", "0.1.0", _changelog(ENTRY), []),
        ("v0.1.1", "0.1.0", _changelog(ENTRY), ["the tag is v0.1.1 but otel_responses/version.py says 0.1.0"]),
        ("0.1.0", "0.1.0", _changelog(ENTRY), ["'0.1.0' is not a version tag (v and the version: v0.1.0)"]),
        ("v0.1.0-rc1", "0.1.0", _changelog(ENTRY), ["'v0.1.0-rc1' is not a version tag (v and the version: v0.1.0)"]),
        ("v1.0.0rc1", "1.0.0rc1", _changelog(ENTRY.replace("0.1.0", "1.0.0rc1"), links=("1.0.0rc1",)), []),
        (
            "v0.2.0",
            "0.2.0",
            _changelog(ENTRY),
            ["CHANGELOG.md's top entry is 0.1.0, not 0.2.0: add `## [0.2.0] - YYYY-MM-DD` above it"],
        ),
        (
            "v0.2.0",
            "0.2.0",
            _changelog("## [0.2.0] - 2027-01-05\n\n- More.\n\n", ENTRY, links=("0.2.0", "0.1.0")),
            [],
        ),
        # An empty [Unreleased] may stand above the entry; one with entries may not.
        ("v0.1.0", "0.1.0", _changelog("## [Unreleased]\n\n", ENTRY), []),
        (
            "v0.1.0",
            "0.1.0",
            _changelog("## [Unreleased]\n\n- A change not in the release's entry.\n\n", ENTRY),
            [
                "CHANGELOG.md: `## [Unreleased]` has entries; move them under `## [0.1.0] - YYYY-MM-DD` "
                "(an empty `## [Unreleased]` may stay above it)"
            ],
        ),
        (
            "v0.1.0",
            "0.1.0",
            _changelog("## [Unreleased]\n\n- Only unreleased changes.\n", links=()),
            [
                "CHANGELOG.md: `## [Unreleased]` has entries; move them under `## [0.1.0] - YYYY-MM-DD` "
                "(an empty `## [Unreleased]` may stay above it)"
            ],
        ),
        (
            "v0.1.0",
            "0.1.0",
            _changelog(links=()),
            ["CHANGELOG.md has no release entry: add `## [0.1.0] - YYYY-MM-DD` at its top"],
        ),
        # The entry's date and its link reference.
        (
            "v0.1.0",
            "0.1.0",
            _changelog(ENTRY.replace(" - 2026-12-01", "")),
            ["CHANGELOG.md: the heading of 0.1.0 needs its date: `## [0.1.0] - YYYY-MM-DD`"],
        ),
        (
            "v0.1.0",
            "0.1.0",
            _changelog(ENTRY, links=()),
            ["CHANGELOG.md: the link reference `[0.1.0]: ...` must end in /v0.1.0 or ...v0.1.0"],
        ),
        # The comparison with the release before, as CONTRIBUTING writes it, and its near miss.
        (
            "v0.2.0",
            "0.2.0",
            _changelog("## [0.2.0] - 2027-01-05\n\n- More.\n\n", ENTRY, links=("0.1.0",))
            + f"[0.2.0]: {COMPARE}/v0.1.0...v0.2.0\n",
            [],
        ),
        (
            "v0.2.0",
            "0.2.0",
            _changelog("## [0.2.0] - 2027-01-05\n\n- More.\n\n", ENTRY, links=("0.1.0",))
            + f"[0.2.0]: {COMPARE}/v0.1.0...v0.2.1\n",
            ["CHANGELOG.md: the link reference `[0.2.0]: ...` must end in /v0.2.0 or ...v0.2.0"],
        ),
        (
            "v0.1.0",
            "0.1.0",
            _changelog(ENTRY).replace(f"{LINK}/v0.1.0", f"{LINK}/v0.1.1"),
            ["CHANGELOG.md: the link reference `[0.1.0]: ...` must end in /v0.1.0 or ...v0.1.0"],
        ),
    ],
)
def test_a_tag_is_released_only_as_the_version_and_the_changelogs_top_entry(
    tmp_path: Path, tag: str, version: str, changelog: str, errors: list[str]
) -> None:
    result = _gate(tmp_path, tag, VERSION_PY.format(version), changelog)
    assert result.stderr == "".join(f"release check: {error}\n" for error in errors)
    assert result.returncode == (1 if errors else 0)
    if not errors:
        assert result.stdout == OK.replace("v0.1.0", tag)


@pytest.mark.parametrize(
    ("version_py", "error"),
    [
        ('__version__ = "0.1.0"\n', None),
        ('__version__: str = "0.1.0"\n', "otel_responses/version.py assigns no __version__ string"),
        ("__version__ = (0, 1, 0)\n", "otel_responses/version.py assigns no __version__ string"),
        ('version = "0.1.0"\n', "otel_responses/version.py assigns no __version__ string"),
    ],
)
def test_the_version_is_read_from_version_py_without_importing_the_package(
    tmp_path: Path, version_py: str, error: str | None
) -> None:
    result = _gate(tmp_path, "v0.1.0", version_py, _changelog(ENTRY))
    assert result.stderr == ("" if error is None else f"release check: {error}\n")
    assert result.returncode == (0 if error is None else 1)


def test_this_checkouts_version_passes_once_unreleased_entries_are_folded_in(tmp_path: Path) -> None:
    """The real version.py and CHANGELOG.md: the tag of this version passes, whatever [Unreleased] holds between
    releases (emptied here, as cutting the release does); with an entry under it the gate stops the release."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    emptied = re.sub(r"(?ms)^## \[Unreleased\]\n.*?(?=^## \[)", "## [Unreleased]\n\n", changelog)
    version_py = (ROOT / "otel_responses" / "version.py").read_text()
    tag = f"v{__version__}"
    result = _gate(tmp_path, tag, version_py, emptied)
    assert result.returncode == 0, result.stderr
    assert result.stdout == OK.replace("v0.1.0", tag)
    without = re.sub(r"(?m)^## \[Unreleased\]\n\n", "", emptied, count=1)
    pending = without.replace("\n## [", "\n## [Unreleased]\n\n- A change.\n\n## [", 1)
    result = _gate(tmp_path, tag, version_py, pending)
    assert result.returncode == 1
    assert "`## [Unreleased]` has entries" in result.stderr


def test_the_gate_names_a_missing_tag_as_a_usage_error() -> None:
    result = subprocess.run([sys.executable, str(GATE)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "the following arguments are required: tag" in result.stderr
