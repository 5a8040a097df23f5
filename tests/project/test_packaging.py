"""The sdist and the wheel as a user gets them: built for real, opened, and installed into a fresh virtualenv.

The dashboard and the alert rules ship as package data (`otel_responses/_dashboards/`), taken at build time from
`dashboards/` (pyproject.toml: `[tool.hatch.build.targets.wheel.force-include]`); no copy is committed. Built
offline with the build backend of the test extra (`--no-build-isolation`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from otel_responses.docs_links import DOCS_URL
from otel_responses.tools.dashboard_files import FILES, PACKAGE_DIR, WRITTEN
from otel_responses.version import __version__, install_hint

from ..support import json_from_python, prometheus_binary

ROOT = Path(__file__).resolve().parents[2]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
DATA = f"otel_responses/{PACKAGE_DIR}/"
URL = "https://github.com/otel-responses/otel-responses"


def _run(argv: list[str], *, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    result = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, check=False)
    assert result.returncode == 0, f"{argv}\n{result.stdout}\n{result.stderr}"
    return result


def _committed() -> dict[str, bytes]:
    return {file.name: (ROOT / file.source).read_bytes() for file in FILES}


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path  # from the source tree, as `pip install .` builds it
    wheel_from_sdist: Path  # as `python -m build` and `pip install otel-responses-X.tar.gz` build it


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    out = tmp_path_factory.mktemp("dist")
    build_sdist = "import sys, hatchling.build as b; print(b.build_sdist(sys.argv[1]))"  # the PEP 517 hook
    sdist = out / _run([sys.executable, "-c", build_sdist, str(out)], cwd=ROOT).stdout.strip()
    _run([*PIP, "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(out / "tree")], cwd=ROOT)
    unpacked = tmp_path_factory.mktemp("sdist")
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12, 3.11.4 and later
            tar.extractall(unpacked, filter="data")
        else:  # pragma: no cover
            tar.extractall(unpacked)  # our own sdist, just built
    (source,) = unpacked.iterdir()
    _run([*PIP, "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(out / "sdist")], cwd=out)
    (wheel,) = (out / "tree").glob("*.whl")
    (wheel_from_sdist,) = (out / "sdist").glob("*.whl")
    return Dists(sdist, wheel, wheel_from_sdist)


@pytest.fixture(params=["wheel", "wheel_from_sdist"])
def wheel(request: pytest.FixtureRequest, dists: Dists) -> Path:
    path: Path = getattr(dists, request.param)
    return path


def test_the_wheel_ships_the_committed_dashboard_files_byte_for_byte(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name[len(DATA) :]: archive.read(name) for name in archive.namelist() if name.startswith(DATA)}
    assert shipped == _committed()


def test_the_wheel_holds_the_package_alone(wheel: Path) -> None:
    """No top-level `dashboards` package, no build.py, nothing beside otel_responses and its metadata."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert {name.split("/", 1)[0] for name in names} == {"otel_responses", f"otel_responses-{__version__}.dist-info"}
    assert not [name for name in names if name.startswith("dashboards/") or name.endswith("/build.py")]
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert "otel_responses/tools/dashboard_files.py" in names
    assert "otel_responses/py.typed" in names


def test_the_wheel_names_the_project_urls(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as archive:
        metadata = archive.read(f"otel_responses-{__version__}.dist-info/METADATA").decode()
    urls = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Project-URL: ")]
    assert f"Homepage, {URL}" in urls
    assert f"Issues, {URL}/issues" in urls
    assert f"Documentation, {DOCS_URL}" in urls


def test_the_license_is_the_full_apache_text_in_the_sdist_and_the_wheel(dists: Dists, wheel: Path) -> None:
    license_text = (ROOT / "LICENSE").read_bytes()
    text = license_text.decode()
    assert text.lstrip().startswith("Apache License\n")
    assert "Version 2.0, January 2004" in text
    for clause in ("1. Definitions.", "4. Redistribution.", "9. Accepting Warranty or Additional Liability."):
        assert clause in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License" in text
    assert len(text.splitlines()) > 190
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(f"otel_responses-{__version__}.dist-info/licenses/LICENSE") == license_text
        metadata = archive.read(f"otel_responses-{__version__}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()
    with tarfile.open(dists.sdist) as tar:
        member = tar.extractfile(f"otel_responses-{__version__}/LICENSE")
        assert member is not None
        assert member.read() == license_text


def test_the_sdist_holds_the_files_the_wheel_is_built_from(dists: Dists) -> None:
    prefix = f"otel_responses-{__version__}/"
    with tarfile.open(dists.sdist) as tar:
        shipped = {}
        for file in FILES:
            member = tar.extractfile(prefix + file.source)
            assert member is not None, file.source
            shipped[file.name] = member.read()
    assert shipped == _committed()


def test_the_installed_wheel_writes_the_files_with_nothing_else_installed(dists: Dists, tmp_path: Path) -> None:
    """A fresh virtualenv with the wheel alone (`--no-deps`: not even opentelemetry-api, let alone the `cli`
    extra): `otel-responses dashboards` needs the standard library only; demo and doctor still name the extra."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = str(bin_dir / "python")
    _run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(dists.wheel)], cwd=tmp_path)
    located = _run([python, "-c", "import otel_responses; print(otel_responses.__file__)"], cwd=tmp_path).stdout
    assert Path(located.strip()).is_relative_to(venv)  # the installed copy, not this checkout

    out = tmp_path / "out" / "dashboards"
    result = _run([str(bin_dir / "otel-responses"), "dashboards", "--out", str(out)], cwd=tmp_path)
    default = {file.name for file in WRITTEN["default"]}
    assert {path.name: path.read_bytes() for path in out.iterdir()} == {
        name: data for name, data in _committed().items() if name in default
    }
    assert "Dashboards > New > Import" in result.stdout
    assert f"- {out / 'otel-responses.rules.yaml'}" in result.stdout
    assert not result.stderr
    # The latest GenAI conventions' dashboard beside it, from the same wheel.
    _run([str(bin_dir / "otel-responses"), "dashboards", "--out", str(out), "--semconv", "latest"], cwd=tmp_path)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == _committed()

    demo = subprocess.run(
        [str(bin_dir / "otel-responses"), "demo"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert demo.returncode == 5, demo.stderr
    assert install_hint("cli") in demo.stderr

    # The rule file's unit tests name it relative to themselves: they run where the command wrote them.
    promtool = prometheus_binary("promtool")
    _run([promtool, "check", "rules", str(out / "otel-responses.rules.yaml")], cwd=tmp_path)
    _run([promtool, "test", "rules", str(out / "otel-responses.rules_test.yaml")], cwd=tmp_path)


def test_an_in_memory_setup_loads_no_redis_code_and_registers_no_hook() -> None:
    """`instrument()` and a call with the default (in-memory) ledger import no module of the Redis backend, nor
    `redis` itself, nor the cost code (no price table given), and register no exit or fork hook: the backend is
    reached only through a Redis ledger."""
    probe = textwrap.dedent(
        """
        import atexit, json, sys
        import openai
        from otel_responses import ResponsesInstrumentor
        from otel_responses.emulator import Emulator
        before = atexit._ncallbacks()
        with Emulator() as emulator:
            ResponsesInstrumentor().instrument()
            with emulator.client() as client:
                first = client.responses.create(model="gpt-4.1-mini", input="Hello.")
                client.responses.create(model="gpt-4.1-mini", input="And?", previous_response_id=first.id)
        backend = ("otel_responses.ledger.redis", "otel_responses.ledger._codec", "otel_responses.ledger._writer",
                   "otel_responses.ledger._async")
        backend += ("otel_responses._telemetry.pricing",)
        loaded = sorted(m for m in sys.modules if m in backend or m == "redis" or m.startswith("redis."))
        print(json.dumps({"loaded": loaded, "hooks": atexit._ncallbacks() - before}))
        """
    )
    assert json_from_python(probe, timeout=120) == {"loaded": [], "hooks": 0}


def test_the_floor_pass_installs_the_declared_floors() -> None:
    """CI's floor pass (tests/requirements-floor.txt) runs each OpenTelemetry and openai floor pyproject.toml declares,
    but the instrumentation package's, whose oldest installable release is the API floor's lockstep one (its pin is
    the semantic conventions' release that pins that API)."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    floors = {}
    for requirement in declared:
        name, _, version = requirement.partition(">=")
        if version and name.startswith(("opentelemetry-", "openai")):
            floors[name] = version.split(",")[0]
    pins = dict(
        line.split("==")
        for line in (ROOT / "tests" / "requirements-floor.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    from packaging.version import Version

    lockstep = pins["opentelemetry-semantic-conventions"]
    assert Version(floors.pop("opentelemetry-instrumentation")) < Version(lockstep)
    assert pins["opentelemetry-instrumentation"] == lockstep
    assert {name: Version(pins[name]) for name in floors} == {name: Version(v) for name, v in floors.items()}
