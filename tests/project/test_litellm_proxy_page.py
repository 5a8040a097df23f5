"""The Behind LiteLLM Proxy page installs what the gateway's test runs with: its `pip install` line names every
package of tests/clients/requirements-gateway.txt (the gateway's dependencies, named one by one since litellm's
`proxy` extra does not install from the index), litellm at the pinned release, and nothing the test does not."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "litellm-proxy.md").read_text()
PINS = (ROOT / "tests" / "clients" / "requirements-gateway.txt").read_text()


def _pinned() -> dict[str, str]:
    lines = (line.split("#")[0].strip() for line in PINS.splitlines())
    return dict(line.split("==") for line in lines if line)


def _install_line() -> list[str]:
    """The words of the page's `pip install 'litellm==...'` command, its continuation lines joined."""
    command = re.search(r"^pip install 'litellm==.*?(?<!\\)$", PAGE.replace("\\\n", " "), re.M)
    assert command is not None, "the page has no `pip install 'litellm==...'` line"
    return [word.strip("'") for word in command.group(0).split()[2:]]


def test_the_page_installs_what_the_gateways_test_runs_with() -> None:
    pinned = _pinned()
    words = _install_line()
    assert words[0] == f"litellm=={pinned['litellm']}"
    named = set(words[1:])
    # openai is this package's own instrumented library (installed with it); the rest are the gateway's.
    assert named == set(pinned) - {"litellm", "openai", "starlette"}


def test_the_gateway_is_started_with_c_and_one_worker_or_several_sharing_the_ledger() -> None:
    """The commands the tests start the gateway with: `-c` and one worker; several workers only beside the shared
    ledger's two settings (its URL and the hash key), as the fleet's test sets them."""
    blocks = re.findall(r"^```bash\n(.*?)^```", PAGE, re.M | re.S)
    commands = {
        " ".join(line.split()): block
        for block in blocks
        for line in block.replace("\\\n", " ").splitlines()
        if line.startswith("opentelemetry-instrument")
    }
    start = (
        "opentelemetry-instrument --traces_exporter otlp --metrics_exporter otlp"
        " --exporter_otlp_protocol http/protobuf litellm -c config.yaml"
    )
    one, several = (
        f"{start} --port 4000 --host 127.0.0.1 --num_workers 1",
        f"{start} --port 4000 --host 127.0.0.1 --num_workers 4",
    )
    assert list(commands) == [one, several]
    settings = ("OTEL_INSTRUMENTATION_OPENAI_RESPONSES_LEDGER_URL=", "OTEL_INSTRUMENTATION_OPENAI_RESPONSES_HASH_KEY=")
    assert [all(f"export {name}" in block for name in settings) for block in commands.values()] == [False, True]
    assert "pip install '.[instruments-litellm,redis]'" in commands[several]  # with the shared ledger's client
