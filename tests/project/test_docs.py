"""The documentation site (mkdocs.yml, docs/): it builds with ``mkdocs build --strict`` and offline, its pages load
nothing from another host, every link the package and the alert rules make to it lands on an anchor that exists,
the generated reference pages equal what the code gives, every signal, setting and exit code has its text, and its
code runs.

Without mkdocs (the ``docs`` extra) the build tests skip; with ``CI`` set they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from docs import generate
from otel_responses import attributes, config
from otel_responses.docs_links import DOCS_URL, signal_doc_url
from otel_responses.emulator import Emulator
from otel_responses.signals import CATALOGUE, ContextLossError, Signal
from otel_responses.tools import exit_codes
from otel_responses.tools.report.urls import DOCS_URL as REPORT_DOCS_URL
from otel_responses.tools.report.urls import signal_link
from otel_responses.version import __version__, install_hint

from ..programs import not_installed
from ..support import user_pytest_env

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


class _MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml as data; mkdocs' own tags (`!relative $config_dir`) read as their text."""


_MkdocsLoader.add_constructor("!relative", lambda loader, node: str(loader.construct_scalar(node)))  # type: ignore[arg-type]
MKDOCS = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_MkdocsLoader)
PAGES = {path.name: path.read_text() for path in sorted(DOCS.glob("*.md"))}
# The port the pages' examples name for the emulator (`otel-responses emulator --port 8080`).
EXAMPLE_URL = "http://127.0.0.1:8080/v1"


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def _section(page: str, title: str) -> str:
    """The text of a ``## title`` section of a page, up to the next ``## ``."""
    return PAGES[page].split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


# -- the build -------------------------------------------------------------------------------------------------


def _mkdocs() -> str:
    path = Path(sys.executable).parent / "mkdocs"
    if not path.exists():
        found = shutil.which("mkdocs")
        if found is None:
            not_installed("mkdocs is not installed (the docs extra: pip install -e '.[docs]'; .ci/run installs it)")
        return found
    return str(path)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `mkdocs build --strict` writes it (a warning — a broken link or anchor — fails the build)."""
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [_mkdocs(), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    return out


class _Page(HTMLParser):
    """Every element id of a page, and every resource it loads (script, stylesheet and other links, images)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.loads: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            self.ids.add(values["id"])
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and values.get("src"):
            self.loads.append((tag, values["src"]))
        if tag in ("img", "source") and values.get("srcset"):
            self.loads.extend((tag, part.split()[0]) for part in values["srcset"].split(",") if part.strip())
        # A <link> loads what it names unless it only says where the page lives (canonical, alternate).
        rel = set(values.get("rel", "").lower().split())
        if tag == "link" and values.get("href") and not rel & {"canonical", "alternate"}:
            self.loads.append((f"link rel={values.get('rel')}", values["href"]))
        if tag == "object" and values.get("data"):
            self.loads.append((tag, values["data"]))


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def _external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.netloc) or parts.scheme not in ("", "data")


def _nav(entries: list[Any]) -> Iterator[tuple[str, str]]:
    """(title, page) of the nav, in order, sections flattened."""
    for entry in entries:
        ((title, value),) = entry.items()
        if isinstance(value, list):
            yield from _nav(value)
        else:
            yield title, value


def test_site_builds_strictly_with_every_page_in_the_nav(site: Path) -> None:
    listed = {page for _, page in _nav(MKDOCS["nav"])}
    assert listed == set(PAGES), "a page of docs/ is not in the nav"
    assert MKDOCS["theme"]["font"] is False  # no web font from Google
    assert [next(iter(p)) if isinstance(p, dict) else p for p in MKDOCS["plugins"]] == ["search"]
    for page in listed:
        built = site / ("index.html" if page == "index.md" else f"{page.removesuffix('.md')}/index.html")
        assert built.exists(), page
    titles = [title for title, _ in _nav(MKDOCS["nav"])]
    assert titles.index("Grafana and alerts") < titles.index("The emulator")
    assert (site / "search" / "search_index.json").exists()  # search runs in the browser, from the site itself
    assert not list(site.rglob("*.py*")), "the generator (or its bytecode) was published"


def test_no_built_page_loads_anything_from_another_host(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > len(PAGES) - 2
    for path in pages:
        for what, url in _parse(path).loads:
            assert not _external(url), f"{path.relative_to(site)}: {what} {url}"
        text = path.read_text()
        assert not re.search(r"@import\s+url\(\s*['\"]?https?:", text), path
    for sheet in site.rglob("*.css"):
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", sheet.read_text()):
            assert not _external(url), f"{sheet.relative_to(site)}: {url}"
    for path in [*pages, *site.rglob("*.css")]:
        text = path.read_text(errors="replace")
        for host in ("fonts.googleapis.com", "fonts.gstatic.com", "cdn.jsdelivr.net", "unpkg.com", "cdnjs"):
            assert host not in text, (path.relative_to(site), host)
    # The theme's script can fetch from elsewhere on three conditions only, none of which holds on these pages: a
    # browser without ResizeObserver (every supported one has it) gets a polyfill; a page with a Mermaid diagram
    # gets Mermaid; a repository widget (`repo_url`) asks GitHub's API. A theme release that adds another is seen.
    script = "".join(path.read_text(errors="replace") for path in site.rglob("*.js"))
    assert set(re.findall(r"https://unpkg\.com/[\w@./-]+", script)) <= {
        "https://unpkg.com/resize-observer-polyfill",
        "https://unpkg.com/mermaid@11/dist/mermaid.min.js",
    }
    assert "repo_url" not in MKDOCS
    for path in pages:
        text = path.read_text()
        assert 'class="mermaid"' not in text, path
        assert 'data-md-component="source"' not in text, path


def _links() -> Iterator[tuple[str, str]]:
    """(where, URL) for every link the package, the dashboards and the README make to the documentation."""
    for name in CATALOGUE:
        yield "signal_doc_url", signal_doc_url(name)
        yield "ContextLossError", ContextLossError([Signal(name)]).doc_url
        yield "report page", signal_link(name)
    rules = yaml.safe_load((ROOT / "dashboards" / "alerts" / "otel-responses.rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            url = rule["annotations"]["runbook_url"]
            if "{{" in url:  # the signal's name, from the alert's label: any signal the rule can match
                yield from ((rule["alert"], url.split("#")[0] + f"#{name}") for name in CATALOGUE)
            else:
                yield rule["alert"], url
    dashboard = json.loads((ROOT / "dashboards" / "context-health.json").read_text())
    for link in dashboard["links"]:
        yield "dashboard link", link["url"]
    readme = (ROOT / "README.md").read_text()
    for url in re.findall(r"\]\((https?://[^)]+)\)|<(https?://[^>]+)>", readme):
        yield "README", url[0] or url[1]


def test_every_link_to_the_documentation_lands_on_an_anchor_that_exists(site: Path) -> None:
    """The documentation base mapped to the local build: each page exists and holds the linked id."""
    seen = 0
    for where, url in _links():
        if not url.startswith(DOCS_URL):
            assert "otel-responses.github.io" not in url, (where, url)
            continue
        path, _, anchor = url.removeprefix(DOCS_URL).partition("#")
        built = site / path / "index.html" if not path.endswith(".html") else site / path
        assert built.exists(), (where, url)
        if anchor:
            assert anchor in _parse(built).ids, (where, url)
        seen += 1
    assert seen > 3 * len(CATALOGUE)


def test_the_documentation_url_is_the_same_everywhere() -> None:
    urls = (ROOT / "pyproject.toml").read_text().split("\n[project.urls]\n", 1)[1].split("\n[", 1)[0]
    assert f'Documentation = "{DOCS_URL}"' in urls.splitlines()
    assert MKDOCS["site_url"] == DOCS_URL
    assert REPORT_DOCS_URL == DOCS_URL
    assert signal_doc_url("compaction", base="https://docs.example/x") == "https://docs.example/x/signals/#compaction"
    assert signal_doc_url("compaction") == "https://otel-responses.github.io/otel-responses/signals/#compaction"


# -- the generated reference -----------------------------------------------------------------------------------


def test_generated_pages_are_what_the_code_gives() -> None:
    assert generate.stale() == [], "run python docs/generate.py"
    assert generate.main(["--check"]) == 0


def test_the_generated_blocks_fail_when_the_code_changes() -> None:
    text = PAGES["configuration.md"].replace("| `zdr` |", "| `zdr_renamed` |")
    assert generate.render("configuration.md", text) == PAGES["configuration.md"]
    with pytest.raises(ValueError, match="no generated block 'options'"):
        generate.render("configuration.md", "no block here")


def test_configuration_page_documents_every_setting() -> None:
    page = PAGES["configuration.md"]
    for option in config.OPTIONS:
        assert (f"| `{option.name}` |" in page) is option.keyword, option.name
        if option.variable:
            assert f"`{option.variable}`" in page
        assert option.meaning.replace("|", "\\|") in page
    for name in (
        "ZDR",
        "INSTRUCTIONS_VERSION",
        "HASH_KEY",
        "STRICT",
        "LEDGER_CAPACITY",
        "LEDGER_URL",
        "LEDGER_TTL",
        "LEDGER_TIMEOUT",
        "PRICES",
        "CHUNK_TIMING",
    ):
        assert f"`{config.ENV_PREFIX}{name}`" in page


def test_records_page_lists_every_attribute_and_metric_with_its_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every name of attributes.py is on the page, with a meaning; a constant without one is an error."""
    block = PAGES["records.md"].split("<!-- generated: names", 1)[1]
    constants = {k: v for k, v in vars(attributes).items() if k.isupper() and isinstance(v, str) and k != "PREFIX"}
    assert set(attributes.MEANINGS) == set(constants)
    for constant, value in constants.items():
        where, kind, meaning = attributes.MEANINGS[constant]
        assert meaning, constant
        dialect = attributes.dialect_of(constant)
        row = f"| `{value}` | {where} | {kind} | {dialect} | " if where != "value" else f"| `{value}` | {dialect} | "
        assert row + meaning.replace("|", "\\|") in block, constant
    monkeypatch.setattr(attributes, "NEW_UNDOCUMENTED", "openai_responses.new", raising=False)
    with pytest.raises(ValueError, match="NEW_UNDOCUMENTED has no entry in MEANINGS"):
        generate.names()


# -- what the pages say ----------------------------------------------------------------------------------------


def test_signals_page_has_a_section_per_signal_with_its_severity_fix_and_examples() -> None:
    page = PAGES["signals.md"]
    for kind in CATALOGUE.values():
        section = page.split(f"\n## {kind.name} {{#{kind.name}}}\n", 1)[1].split("\n## ", 1)[0]
        assert f"Severity: **{kind.severity}**" in section
        assert "Why context is lost:" in section
        assert kind.fix in section
        assert f"<!-- raises: {kind.name} -->" in section, kind.name
        assert f"<!-- near miss: {kind.name} -->" in section, kind.name
        assert f"| [`{kind.name}`](#{kind.name}) | {kind.severity} |" in page


def test_command_page_documents_version_and_every_exit_code() -> None:
    page = PAGES["cli.md"]
    assert "otel-responses --version" in page
    codes = [value for name, value in vars(exit_codes).items() if name.startswith("EXIT_")]
    own = sorted(code for code in codes if code != exit_codes.EXIT_INTERRUPTED)  # 130 is the shell's, for Ctrl-C
    assert own == list(range(len(own)))
    table = _section("cli.md", "Exit codes")
    for code in codes:
        assert f"| `{code}` |" in table, code
    assert install_hint("cli").split(" in a checkout")[0].removeprefix("pip install ") in table  # '.[cli]'
    assert "Ctrl-C or SIGTERM stops it at once" in page
    assert "[signal](signals.md)" in page


def test_no_page_tells_users_what_they_cannot_do_or_do_not_have() -> None:
    for name, text in [*PAGES.items(), ("CONTRIBUTING.md", (ROOT / "CONTRIBUTING.md").read_text())]:
        assert "DESIGN.md" not in text, name
        assert not re.search(r"\b[Ii]ssue \d+", text), name  # a results folder may keep its name
        assert "troubleshooting guide" not in text, name
        # Not on an index yet: never `pip install otel-responses`, but where Install says it works once published.
        if name == "install.md":
            text = text.replace(_published_install(), "")
        for line in text.splitlines():
            if "does not work" not in line:
                assert not re.search(r"pip install ['\"]?otel-responses", line), (name, line)


def _published_install() -> str:
    """The paragraph of the Install page on installing a published release, and its commands."""
    page = PAGES["install.md"]
    return page[page.index("**From PyPI**") : page.index("**From a checkout**")]


def test_install_page_says_how_a_published_release_installs_beside_the_checkout() -> None:
    published = _published_install()
    assert published.startswith("**From PyPI**, once a release is published there")
    commands = _blocks(published, "bash")
    assert [line.split("#")[0].strip() for line in commands[0].splitlines()] == [
        "pip install otel-responses",
        "pip install 'otel-responses[cli]'",
    ]
    assert "**From a checkout**" in PAGES["install.md"]


def test_troubleshooting_page_follows_the_doctors_steps_and_names_real_signals() -> None:
    from otel_responses.tools.doctor import STEPS

    page = PAGES["troubleshooting.md"]
    rows = re.findall(r"^\| (\d+)\. `(\w+)` \|.*\|(.*)\|$", page, re.M)
    assert [(int(number), name) for number, name, _ in rows] == [(i, s.name) for i, s in enumerate(STEPS, 1)]
    for _, name, signals in rows:
        named = re.findall(r"\[`(\w+)`\]\(signals\.md#(\w+)\)", signals)
        assert named, name
        assert all(text == anchor and anchor in CATALOGUE for text, anchor in named), (name, named)
    assert "otel-responses doctor" in page
    assert "--base-url" in page


def test_changelog_top_entry_is_this_version() -> None:
    """The newest released entry is this version; changes not yet released sit above it under Unreleased."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    released = [heading for heading in headings if heading != "Unreleased"]
    assert headings.index(released[0]) <= 1
    assert released[0] == __version__
    assert f"[{__version__}]: " in changelog


# -- the code on the pages -------------------------------------------------------------------------------------


def test_every_python_block_on_the_pages_compiles() -> None:
    count = 0
    for name, text in PAGES.items():
        for number, code in enumerate(_blocks(text, "python")):
            compile(code, f"docs/{name}#{number}", "exec")
            count += 1
    assert count > 10


def _runnable() -> list[tuple[str, str]]:
    return [
        (name, code)
        for name, text in PAGES.items()
        for code in re.findall(r"<!-- runnable -->\n```python\n(.*?)```", text, re.S)
    ]


@pytest.mark.parametrize(("page", "code"), _runnable(), ids=[f"{n}-{i}" for i, (n, _) in enumerate(_runnable())])
def test_runnable_blocks_run_against_the_emulator(page: str, code: str, tmp_path: Path) -> None:
    """Blocks marked ``<!-- runnable -->`` run as a script of their own, the emulator at the port they name."""
    with Emulator() as emulator:
        script = tmp_path / "example.py"
        script.write_text(code.replace(EXAMPLE_URL, emulator.base_url))
        result = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
        )
    assert result.returncode == 0, f"docs/{page}:\n{code}\n{result.stdout}{result.stderr}"
    assert "Traceback" not in result.stderr


def test_runnable_blocks_cover_the_pages_a_newcomer_copies() -> None:
    pages = {page for page, _ in _runnable()}
    assert {"quickstart.md", "enable.md", "emulator.md", "strict.md", "configuration.md"} <= pages


def _signal_examples() -> list[tuple[str, str, str]]:
    """(signal, "raises" or "near miss", code) for every example of the Signals page."""
    found = re.findall(r"<!-- (raises|near miss): (\w+) -->\n```python\n(.*?)```", PAGES["signals.md"], re.S)
    return [(name, which, code) for which, name, code in found]


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


@pytest.mark.parametrize(
    ("name", "which", "code"), _signal_examples(), ids=[f"{n}-{w.replace(' ', '_')}" for n, w, _ in _signal_examples()]
)
def test_each_signal_example_raises_exactly_its_signal_and_its_near_miss_nothing(
    name: str, which: str, code: str, emulator: Emulator
) -> None:
    """A request that raises the signal raises that one alone; its near miss raises none (with the API's answer to
    the requests it refuses: the error the page's comment names)."""
    import openai

    from otel_responses.testing import capture

    client = emulator.client()
    if "responses.compact(" in code and not hasattr(client.responses, "compact"):
        pytest.skip("this openai release has no responses.compact")  # the floor of the supported range
    refused: openai.APIStatusError | None = None
    with capture() as telemetry:
        try:
            exec(compile(code, f"docs/signals.md ({name}, {which})", "exec"), {"client": client})
        except openai.APIStatusError as error:
            refused = error
    if refused is not None:  # the page says so where the API refuses the request
        assert which == "raises", refused
        assert f"the API answers {refused.status_code}" in code, refused
    else:
        assert "the API answers" not in code
    assert telemetry.signals() == ([name] if which == "raises" else []), code


def test_every_signal_has_an_example_and_a_near_miss() -> None:
    examples = _signal_examples()
    assert sorted((n, w) for n, w, _ in examples) == sorted((n, w) for n in CATALOGUE for w in ("raises", "near miss"))


def test_the_price_tables_on_the_records_page_load(tmp_path: Path) -> None:
    """The JSON and TOML examples of a price table are tables `prices=` accepts, with the prices they show."""
    from otel_responses._telemetry.pricing import load_prices

    cost = _section("records.md", "Cost")
    (json_table,) = _blocks(cost, "json")
    (toml_table,) = _blocks(cost, "toml")
    for suffix, text in ((".json", json_table), (".toml", toml_table)):
        path = tmp_path / f"prices{suffix}"
        path.write_text(text)
        assert load_prices(path) is not None, suffix
    assert json.loads(json_table)["models"]["gpt-4o"]["input"] == 2.50


def test_the_quick_start_shows_the_attributes_its_app_records(emulator: Emulator) -> None:
    """What "What the spans show" prints of the two spans is what the app's two calls record."""
    from otel_responses.testing import capture

    page = PAGES["quickstart.md"]
    app = re.findall(r"<!-- runnable -->\n```python\n(.*?)```", page, re.S)[0]
    shown = _blocks(_section("quickstart.md", "What the spans show"), "text")
    assert len(shown) == 2
    with capture() as telemetry:
        exec(compile(app.replace(EXAMPLE_URL, emulator.base_url), "docs/quickstart.md", "exec"), {})
    spans = telemetry.chat_spans()
    assert len(spans) == 2
    for span, text in zip(spans, shown, strict=True):
        attributes_ = dict(span.attributes or {})
        for line in text.strip().splitlines():
            key, _, value = line.rstrip(",").partition(": ")
            expected = json.loads(value)
            actual = attributes_[json.loads(key)]
            if isinstance(expected, str) and expected.endswith("…"):
                assert str(actual).startswith(expected[:-1]), (key, actual)
            else:
                assert (list(actual) if isinstance(actual, tuple) else actual) == expected, (key, actual)


def test_the_async_kit_example_passes_as_a_users_test(tmp_path: Path) -> None:
    """The testing page's async example, as a test file of a user's project: the plugin found by its entry point,
    the test run by anyio's pytest plugin."""
    (example,) = _blocks(_section("testing.md", "Async apps"), "python")
    (tmp_path / "test_async_app.py").write_text(example)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_async_app.py"],
        cwd=tmp_path,
        env=user_pytest_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^1 passed in ", result.stdout, re.M), result.stdout


def test_emulator_example_runs() -> None:
    example = next(code for code in _blocks(PAGES["emulator.md"], "python") if "Emulator()" in code)
    namespace: dict[str, object] = {}
    exec(compile(example, "docs/emulator.md", "exec"), namespace)
    assert namespace["again"].output_text == "marker=M-1"  # type: ignore[attr-defined]


def _console_command() -> str:
    codes = _blocks(_section("enable.md", "Without code changes"), "bash")
    lines = [line for code in codes for line in re.sub(r"\\\n\s*", "", code).splitlines()]  # continuations joined
    return str(next(line for line in lines if line.startswith("opentelemetry-instrument") and "console" in line))


def test_console_auto_instrumentation_example_prints_spans(tmp_path: Path) -> None:
    """The Enable it page's console variant, run as written (opentelemetry-distro is in the test extra; the OTLP
    exporter package is not, as for a user trying the console first)."""
    import importlib.util

    command = _console_command()
    assert command.endswith(" python your_app.py")
    app = tmp_path / "your_app.py"
    app.write_text(
        "import os\nimport openai\n"
        "client = openai.OpenAI(base_url=os.environ['EMULATOR_URL'], api_key='emulator-key', max_retries=0)\n"
        "print(client.responses.create(model='gpt-5-mini', input='Remember this: the marker is M-1.').output_text)\n"
    )

    def instrumented(command: str, base_url: str) -> subprocess.CompletedProcess[str]:
        bin_dir = str(Path(sys.executable).parent)
        argv = [*command.split()[:-1], str(app)]  # `... python your_app.py`: the venv's python, this app
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "EMULATOR_URL": base_url},
        )

    with Emulator() as emulator:
        result = instrumented(command, emulator.base_url)
        if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is None:
            # Why the page names the logs exporter: without it, nothing is recorded.
            without = instrumented(command.replace(" --logs_exporter console", ""), emulator.base_url)
            assert "Noted marker M-1." in without.stdout
            assert '"openai_responses.state.mode"' not in without.stdout
            assert "Requested component 'otlp_proto_grpc' not found" in without.stderr
    assert result.returncode == 0, result.stderr
    assert "Noted marker M-1." in result.stdout
    assert '"name": "chat gpt-5-mini"' in result.stdout
    assert '"openai_responses.state.mode": "single_turn"' in result.stdout  # the span, from this package
    assert '"name": "openai_responses.calls"' in result.stdout  # and the metrics
    assert "Traceback" not in result.stderr


def test_pre_commit_runs_ruff_and_mypy_as_ci_does() -> None:
    hooks = {
        hook["id"]: (repo["repo"], hook)
        for repo in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
        for hook in repo["hooks"]
    }
    assert hooks["ruff-check"][0] == "https://github.com/astral-sh/ruff-pre-commit"
    assert hooks["ruff-format"][1]["args"] == ["--check"]
    mypy = hooks["mypy"][1]
    assert mypy["entry"] == ".venv/bin/mypy --strict"
    assert mypy["pass_filenames"] is False  # the files of pyproject.toml, as .ci/run checks them
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ".venv/bin/mypy --strict" in ci
    assert "NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir .ci/site" in ci
    assert ".venv/bin/twine check --strict dist/*" in ci


# The commands of recorded measurements are kept as they were run.
WIDE_PAGES = frozenset({"benchmarks.md"})
WIDEST_COMMAND = 88  # characters: what a code block of the site shows without scrolling


def test_long_shell_commands_on_the_pages_are_wrapped_as_continuations() -> None:
    """A command wider than the code block is wrapped with a backslash, not left to scroll; a trailing comment may
    run on (the command reads whole), as may an `export` of one long value (it cannot be wrapped)."""
    too_wide = [
        (name, line)
        for name, text in PAGES.items()
        if name not in WIDE_PAGES
        for code in _blocks(text, "bash")
        for line in code.splitlines()
        if len(re.split(r"\s+#\s", line)[0].rstrip()) > WIDEST_COMMAND and not line.startswith("export ")
    ]
    assert too_wide == []
