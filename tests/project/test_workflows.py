"""The forge's workflows (.github/workflows): they run exactly the commands .ci/run runs (the release builds and
checks its artefacts line for line as CI does, the site is built by the same mkdocs command), each job holds only
the permissions it needs, every action is pinned by commit, the release publishes by trusted publishing, and the
lint .ci/run gives them finds what it should, offline."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..programs import not_installed

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
CI_RUN = (ROOT / ".ci" / "run").read_text()
CI_LINES = [line.strip() for line in CI_RUN.splitlines() if line.strip() and not line.lstrip().startswith("#")]
TEXTS = {path.name: path.read_text() for path in sorted(WORKFLOWS.glob("*.yml"))}
FLOWS: dict[str, dict[Any, Any]] = {name: yaml.safe_load(text) for name, text in TEXTS.items()}
# The commands a workflow may run that are not .ci/run's own: .ci/run itself, and the release gate.
OWN_COMMANDS = {"bash .ci/run", 'python3 .ci/release_check.py "$TAG"'}
PYTHON = "3.11"


def _on(flow: dict[Any, Any]) -> Any:
    return flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` key as true


def _steps(name: str, job: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = FLOWS[name]["jobs"][job]["steps"]
    return steps


def _commands(step: dict[str, Any]) -> list[str]:
    return [line.strip() for line in str(step.get("run", "")).splitlines() if line.strip()]


def _step_index(steps: list[dict[str, Any]], *, uses: str = "", run: str = "") -> int:
    for index, step in enumerate(steps):
        if (uses and str(step.get("uses", "")).startswith(f"{uses}@")) or (run and run in _commands(step)):
            return index
    raise AssertionError(f"no step uses {uses!r} / runs {run!r}")


def test_the_three_workflows_and_their_triggers() -> None:
    assert sorted(FLOWS) == ["ci.yml", "docs.yml", "release.yml"]
    assert _on(FLOWS["ci.yml"]) == {"push": None, "pull_request": None}
    assert _on(FLOWS["docs.yml"]) == {"push": {"branches": ["main"]}}
    assert _on(FLOWS["release.yml"]) == {"push": {"tags": ["v[0-9]*"]}}


def test_every_command_of_a_workflow_is_one_ci_runs() -> None:
    """A line of .ci/run verbatim, or the install that starts the README's test command there (the suite left to
    CI), or one of the workflows' own two commands: nothing a workflow runs can drift from what CI checks."""
    for name in FLOWS:
        for job in FLOWS[name]["jobs"]:
            for step in _steps(name, job):
                for command in _commands(step):
                    ok = (
                        command in CI_LINES
                        or command in OWN_COMMANDS
                        or any(line.startswith(f"{command} && ") for line in CI_LINES)
                    )
                    assert ok, (name, job, command)


def test_ci_runs_ci_run_in_debian_as_root() -> None:
    job = FLOWS["ci.yml"]["jobs"]["ci"]
    assert job["container"]["image"] == f"python:{PYTHON}-bookworm"  # apt, Debian's chromium, root
    assert [step.get("run") for step in job["steps"]] == [None, None, "bash .ci/run"]
    assert job["steps"][0]["uses"].startswith("actions/checkout@")
    assert job["steps"][1]["uses"].startswith("actions/setup-node@")  # Node 20, which .ci/run requires on PATH
    assert job["steps"][1]["with"] == {"node-version": "20"}


def test_the_release_builds_once_and_checks_the_artefacts_line_for_line_as_ci_does() -> None:
    block = CI_LINES[CI_LINES.index("rm -rf dist .venv-wheel") :]
    block = block[: next(i for i, line in enumerate(block) if '.venv-wheel/bin/otel-responses" demo' in line) + 1]
    assert len(block) == 7
    steps = _steps("release.yml", "build")
    checks = [step for step in steps if _commands(step)[:1] == ["rm -rf dist .venv-wheel"]]
    assert len(checks) == 1
    assert _commands(checks[0]) == block
    assert [line for step in steps for line in _commands(step) if "python -m build" in line] == block[1:2]
    # The gate first, then the install, the build and its checks, then the upload of exactly those files.
    gate = _step_index(steps, run='python3 .ci/release_check.py "$TAG"')
    install = _step_index(steps, run="python3 -m venv .venv && .venv/bin/pip install -e '.[test]'")
    build = steps.index(checks[0])
    upload = _step_index(steps, uses="actions/upload-artifact")
    assert gate < install < build < upload == len(steps) - 1
    assert steps[gate]["env"] == {"TAG": "${{ github.ref_name }}"}  # through the environment, never spliced in
    assert steps[upload]["with"] == {"name": "dist", "path": "dist/", "if-no-files-found": "error"}


def test_the_release_publishes_those_files_by_trusted_publishing() -> None:
    publish = FLOWS["release.yml"]["jobs"]["publish"]
    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    steps = publish["steps"]
    assert [step["uses"].split("@")[0] for step in steps] == [
        "actions/download-artifact",
        "pypa/gh-action-pypi-publish",
    ]
    assert steps[0]["with"] == {"name": "dist", "path": "dist/"}
    assert "with" not in steps[1]  # no password, no token: PyPI trusts this workflow's OIDC token
    assert not any("run" in step for step in steps)  # nothing is rebuilt or changed between the check and the upload
    for name, text in TEXTS.items():
        assert "secrets." not in text, name
        assert "password" not in text, name


def test_the_site_is_built_by_cis_mkdocs_command_and_deployed_from_there() -> None:
    mkdocs = [line for line in CI_LINES if "mkdocs build" in line]
    assert len(mkdocs) == 1
    assert "--strict" in mkdocs[0]
    steps = _steps("docs.yml", "build")
    build = _step_index(steps, run=mkdocs[0])
    upload = _step_index(steps, uses="actions/upload-pages-artifact")
    assert build < upload
    site_dir = mkdocs[0].split("--site-dir ", 1)[1].split()[0]
    assert steps[upload]["with"] == {"path": site_dir}
    deploy = FLOWS["docs.yml"]["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]
    assert deploy["environment"] == {"name": "github-pages", "url": "${{ steps.deployment.outputs.page_url }}"}


def test_every_job_holds_only_the_permissions_it_needs() -> None:
    for name, flow in FLOWS.items():
        assert flow["permissions"] == {}, name  # nothing by default: each job says what it needs
    granted = {(name, job): FLOWS[name]["jobs"][job]["permissions"] for name in FLOWS for job in FLOWS[name]["jobs"]}
    assert granted == {
        ("ci.yml", "ci"): {"contents": "read"},
        ("docs.yml", "build"): {"contents": "read", "pages": "read"},
        ("docs.yml", "deploy"): {"pages": "write", "id-token": "write"},
        ("release.yml", "build"): {"contents": "read"},
        ("release.yml", "publish"): {"id-token": "write"},
    }


def test_every_action_is_pinned_by_commit_with_its_version_beside_it() -> None:
    pins: dict[str, set[tuple[str, str]]] = {}
    for name, text in TEXTS.items():
        for line in text.splitlines():
            if "uses:" not in line:
                continue
            match = re.fullmatch(r"\s*(?:- )?uses: ([\w.-]+/[\w.-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)", line)
            assert match, (name, line)
            pins.setdefault(match.group(1), set()).add((match.group(2), match.group(3)))
    assert sorted(pins) == [
        "actions/checkout",
        "actions/configure-pages",
        "actions/deploy-pages",
        "actions/download-artifact",
        "actions/setup-node",
        "actions/setup-python",
        "actions/upload-artifact",
        "actions/upload-pages-artifact",
        "pypa/gh-action-pypi-publish",
    ]
    assert all(len(versions) == 1 for versions in pins.values()), pins  # one action, one commit everywhere


def test_every_workflow_uses_the_python_ci_runs_on() -> None:
    versions = [
        str(step["with"]["python-version"])
        for name in FLOWS
        for job in FLOWS[name]["jobs"]
        for step in _steps(name, job)
        if str(step.get("uses", "")).startswith("actions/setup-python@")
    ]
    assert versions == [PYTHON, PYTHON]  # docs.yml and release.yml; ci.yml's container has it


def test_every_checkout_leaves_no_credentials_behind() -> None:
    checkouts = [
        step
        for name in FLOWS
        for job in FLOWS[name]["jobs"]
        for step in _steps(name, job)
        if str(step.get("uses", "")).startswith("actions/checkout@")
    ]
    assert len(checkouts) == 3
    assert all(step["with"] == {"persist-credentials": False} for step in checkouts)


# -- the lint .ci/run gives them -------------------------------------------------------------------------------

LINT = [line for line in CI_LINES if line.startswith((".venv/bin/actionlint ", ".venv/bin/zizmor "))]


def _lint(tmp_path: Path, change: tuple[str, str, str] | None = None, *, offline: bool = False) -> tuple[int, str]:
    """.ci/run's lint lines, run as written in a copy of the checkout's workflows (``change``: in FILE, OLD becomes
    NEW), with this virtualenv as `.venv`; ``offline``: in a network namespace of its own, a token in the
    environment (which would turn zizmor's online audits on)."""
    shutil.copytree(WORKFLOWS, tmp_path / ".github" / "workflows")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    if change is not None:
        file, old, new = change
        path = tmp_path / ".github" / "workflows" / file
        text = path.read_text()
        assert text.count(old) == 1, old
        path.write_text(text.replace(old, new))
    command = ["bash", "-euo", "pipefail", "-c", "\n".join(LINT)]
    env = {**os.environ, "NO_COLOR": "1"}
    if offline:
        if shutil.which("unshare") is None:
            not_installed("unshare is not installed (util-linux)")
        probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=30, check=False)
        if probe.returncode != 0:
            not_installed(f"unshare -rn cannot make a network namespace here: {probe.stderr!r}")
        command = ["unshare", "-rn", *command]
        env["GH_TOKEN"] = "a-token-that-would-turn-online-audits-on"
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False, env=env)
    return result.returncode, result.stdout + result.stderr


def test_ci_lints_the_workflows_with_actionlint_and_zizmor() -> None:
    assert [line.split()[0] for line in LINT] == [".venv/bin/actionlint", ".venv/bin/zizmor"]
    assert "-shellcheck .venv/bin/shellcheck" in LINT[0]  # without a shellcheck actionlint skips the scripts
    assert "--offline" in LINT[1].split()
    assert CI_LINES.index(LINT[0]) == CI_LINES.index(".venv/bin/lint-imports") + 1
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert all(line in contributing for line in LINT)  # the commands it gives contributors


def test_the_workflows_lint_clean_without_the_network(tmp_path: Path) -> None:
    status, output = _lint(tmp_path, offline=True)
    assert status == 0, output
    assert "No findings to report" in output


@pytest.mark.parametrize(
    ("change", "finding"),
    [
        # shellcheck through actionlint: an unquoted expansion in a script; its near miss, quoted, passes.
        (("ci.yml", "- run: bash .ci/run", "- run: bash .ci/run $1"), "SC2086"),
        (("ci.yml", "- run: bash .ci/run", '- run: bash .ci/run "$1"'), None),
        # actionlint: a key the workflow syntax does not have.
        (("ci.yml", "    runs-on: ubuntu-24.04", "    run-on: ubuntu-24.04"), 'unexpected key "run-on"'),
        # zizmor: an action by its tag instead of a commit, a token left in the checkout; both linters: the
        # event's text spliced into a script.
        (
            ("docs.yml", "configure-pages@45bfe0192ca1faeb007ade9deae92b16b8254a0d # v6.0.0", "configure-pages@v6"),
            "unpinned-uses",
        ),
        (("release.yml", 'run: python3 .ci/release_check.py "$TAG"', "run: echo ${{ github.head_ref }}"), "head_ref"),
        (("ci.yml", "        with:\n          persist-credentials: false\n", ""), "artipacked"),
    ],
)
def test_a_finding_fails_the_lint(tmp_path: Path, change: tuple[str, str, str], finding: str | None) -> None:
    status, output = _lint(tmp_path, change)
    if finding is None:
        assert status == 0, output
    else:
        assert status != 0, output
        assert finding in output
