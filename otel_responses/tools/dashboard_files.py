"""The Grafana dashboard and the Prometheus alert rules that ship with the package (`otel-responses dashboards`).

Installed from a wheel, the files are package data under `otel_responses/_dashboards/`: the build takes them from
`dashboards/` in the repository, where `python -m dashboards.build` writes them (see pyproject.toml), so no second
copy is committed. In a source checkout (an editable install) they are read from `dashboards/` itself.

Standard library only: the command works without the `cli` extra, and without the package's own dependencies.
"""

from __future__ import annotations

import errno
import importlib.resources
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..docs_links import DOCS_URL

PACKAGE_DIR = "_dashboards"  # inside otel_responses, in a wheel
CHECKOUT_DIR = "dashboards"  # beside otel_responses, in a source checkout


@dataclass(frozen=True)
class ShippedFile:
    name: str  # in the package, and as written out
    source: str  # where the build takes it from, relative to the repository root
    what: str


DASHBOARD = ShippedFile("context-health.json", "dashboards/context-health.json", "Grafana dashboard")
LATEST_DASHBOARD = ShippedFile(
    "context-health.latest.json",
    "dashboards/context-health.latest.json",
    "Grafana dashboard, latest GenAI conventions",
)
RULES = ShippedFile(
    "otel-responses.rules.yaml", "dashboards/alerts/otel-responses.rules.yaml", "Prometheus alerting rules"
)
RULES_TEST = ShippedFile(
    "otel-responses.rules_test.yaml",
    "dashboards/alerts/otel-responses.rules_test.yaml",
    "promtool unit tests of the rules",
)
FILES = (DASHBOARD, LATEST_DASHBOARD, RULES, RULES_TEST)  # every file shipped
# What is written for each dialect of the GenAI conventions the services emit (`--semconv`): its dashboard (the
# latest one reads the `gen_ai.client.inference.*` counters, `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`)
# and the alert rules, which read only the package's own counters and serve both.
SEMCONV = ("default", "latest")
WRITTEN = {"default": (DASHBOARD, RULES, RULES_TEST), "latest": (LATEST_DASHBOARD, RULES, RULES_TEST)}


class NotShipped(Exception):
    """This install has neither the package data nor a source checkout's dashboards/."""


class WouldOverwrite(Exception):
    """Files in the output directory differ from the shipped ones, and --force was not given."""

    def __init__(self, paths: list[Path]) -> None:
        super().__init__(", ".join(map(str, paths)))
        self.paths = paths


def contents() -> dict[ShippedFile, bytes]:
    """Each shipped file's bytes: from the package data, or else from the source checkout."""
    packaged = importlib.resources.files("otel_responses").joinpath(PACKAGE_DIR)
    if packaged.is_dir():
        try:
            return {file: packaged.joinpath(file.name).read_bytes() for file in FILES}
        except FileNotFoundError as error:
            raise NotShipped(f"{PACKAGE_DIR}/ lacks a file ({error.filename or error})") from None
    root = Path(__file__).resolve().parents[2]  # otel_responses/tools/ -> the checkout
    if (root / CHECKOUT_DIR).is_dir():
        try:
            return {file: (root / file.source).read_bytes() for file in FILES}
        except FileNotFoundError as error:
            raise NotShipped(f"the source checkout lacks {error.filename}") from None
    raise NotShipped(f"neither otel_responses/{PACKAGE_DIR}/ nor a source checkout's {CHECKOUT_DIR}/ is there")


def for_docs_at(data: dict[ShippedFile, bytes], docs_url: str) -> dict[ShippedFile, bytes]:
    """The files with their documentation links (the rules' runbook links, the dashboard's link, the expected
    annotations of the rules' tests) leading to `docs_url`, a team's own copy of the site, instead of DOCS_URL."""
    root = docs_url if docs_url.endswith("/") else f"{docs_url}/"
    return {file: content.replace(DOCS_URL.encode(), root.encode()) for file, content in data.items()}


def write(
    out: Path, *, force: bool, docs_url: str = DOCS_URL, semconv: str = "default"
) -> list[tuple[ShippedFile, Path, str]]:
    """Write the files of the `semconv` dialect into `out` (created if need be), the dashboard first, their links
    leading to `docs_url`; each file's path and what happened to it: "written", "unchanged" or "replaced". Nothing
    is written when a file differs and `force` is false: WouldOverwrite."""
    files = WRITTEN[semconv]
    data = for_docs_at(contents(), docs_url)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(out))
    targets = {file: out / file.name for file in files}
    before = {file: path.read_bytes() if path.exists() else None for file, path in targets.items()}
    differing = [targets[f] for f in files if before[f] is not None and before[f] != data[f]]
    if differing and not force:
        raise WouldOverwrite(differing)
    out.mkdir(parents=True, exist_ok=True)
    done = []
    for file in files:
        path = targets[file]
        if before[file] == data[file]:
            done.append((file, path, "unchanged"))
            continue
        path.write_bytes(data[file])
        done.append((file, path, "written" if before[file] is None else "replaced"))
    return done


def report(done: list[tuple[ShippedFile, Path, str]], out: TextIO) -> None:
    """What was written and how to use it. ASCII only: any console can print it."""
    where = {file: path for file, path, _ in done}
    dashboard = done[0][1]
    width = max(len(file.name) for file, _, _ in done)
    out.write(f"otel-responses dashboards: in {dashboard.parent}\n")
    for file, _path, status in done:
        out.write(f"  {status:<9}  {file.name:<{width}}  {file.what}\n")
    out.write(
        "\n"
        "Grafana (11.6 or later): Dashboards > New > Import, upload\n"
        f"  {dashboard}\n"
        "  then pick your Prometheus and Tempo data sources (the dashboard's 'Prometheus' and 'Tempo' menus).\n"
        "Prometheus: add the rule file to prometheus.yml, then reload Prometheus (SIGHUP, or POST /-/reload\n"
        "  when it runs with --web.enable-lifecycle):\n"
        "    rule_files:\n"
        f"      - {where[RULES]}\n"
        "  check the rules, and run their unit tests:\n"
        f"    promtool check rules {shlex.quote(str(where[RULES]))}\n"
        f"    promtool test rules {shlex.quote(str(where[RULES_TEST]))}\n"
    )
