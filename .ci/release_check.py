"""The release gate (.github/workflows/release.yml runs it before anything is built): a version tag must name the
version of ``otel_responses/version.py`` and the changelog's top entry, so that what is published, the package's
own ``__version__`` and what the changelog says was released are one version.

    python3 .ci/release_check.py v0.1.0 [--root CHECKOUT]

The changelog's top entry is its first ``## [X.Y.Z] - YYYY-MM-DD`` heading, with a link reference ``[X.Y.Z]: ...``
ending in the tag. An ``## [Unreleased]`` heading may stand above it only when empty: what is under it would be
shipped without being in the release's entry. Standard library only: it runs before the package is installed.
Exit status 0 when the tag passes, 1 with every mismatch on standard error when it does not, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

# A release tag: `v` and a public version (PEP 440) as version.py writes it: 0.1.0, 1.2.0rc1, 1.2.0.post1.
TAG = re.compile(r"v(\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)")
HEADING = re.compile(r"^## \[([^\]]+)\](.*)$", re.M)
DATED = re.compile(r" - \d{4}-\d{2}-\d{2}")


def package_version(source: str) -> str | None:
    """``__version__`` as version.py assigns it (a string literal), read without importing the package."""
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "__version__" for target in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def changelog_problems(changelog: str, version: str, tag: str) -> list[str]:
    """What keeps the changelog's top entry from being the release of ``version`` (none: it is)."""
    headings = list(HEADING.finditer(changelog))
    if headings and headings[0].group(1) == "Unreleased":
        following = headings[1].start() if len(headings) > 1 else len(changelog)
        if changelog[headings[0].end() : following].strip():
            return [
                "CHANGELOG.md: `## [Unreleased]` has entries; move them under "
                f"`## [{version}] - YYYY-MM-DD` (an empty `## [Unreleased]` may stay above it)"
            ]
        headings = headings[1:]
    if not headings:
        return [f"CHANGELOG.md has no release entry: add `## [{version}] - YYYY-MM-DD` at its top"]
    top, rest = headings[0].group(1), headings[0].group(2)
    if top != version:
        return [f"CHANGELOG.md's top entry is {top}, not {version}: add `## [{version}] - YYYY-MM-DD` above it"]
    problems = []
    if not DATED.fullmatch(rest):
        problems.append(f"CHANGELOG.md: the heading of {version} needs its date: `## [{version}] - YYYY-MM-DD`")
    link = re.search(rf"^\[{re.escape(version)}\]: (\S+)$", changelog, re.M)
    # The release's page (`.../releases/tag/vX.Y.Z`) or its comparison with the one before (`.../compare/vA...vX.Y.Z`).
    if link is None or not link.group(1).endswith((f"/{tag}", f"...{tag}")):
        problems.append(f"CHANGELOG.md: the link reference `[{version}]: ...` must end in /{tag} or ...{tag}")
    return problems


def problems(tag: str, version_source: str, changelog: str) -> list[str]:
    """Every reason the tag is not a release of this checkout (none: it is)."""
    match = TAG.fullmatch(tag)
    if match is None:
        return [f"{tag!r} is not a version tag (v and the version: v0.1.0)"]
    version = match.group(1)
    found = package_version(version_source)
    if found is None:
        return ["otel_responses/version.py assigns no __version__ string"]
    if found != version:
        return [f"the tag is {tag} but otel_responses/version.py says {found}"]
    return changelog_problems(changelog, version, tag)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("tag", help="the pushed tag, e.g. v0.1.0")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="the checkout")
    args = parser.parse_args(argv)
    root: Path = args.root
    found = problems(
        args.tag,
        (root / "otel_responses" / "version.py").read_text(encoding="utf-8"),
        (root / "CHANGELOG.md").read_text(encoding="utf-8"),
    )
    for problem in found:
        print(f"release check: {problem}", file=sys.stderr)
    if not found:
        print(f"release check: {args.tag} is the version of otel_responses/version.py and CHANGELOG.md's top entry")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
