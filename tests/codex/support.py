"""What the Codex CLI's tests share: Codex itself (installed from tests/codex's lock), its configuration for a
custom provider, one session run (turn after turn, each a ``codex exec`` of its own, from a fresh ``CODEX_HOME``),
a trap standing for every route off the machine, and what Codex sent, with its own per-run ids and timings masked
for comparison. Nothing here is a test."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_responses.emulator.recording import RecordedRequest

from ..programs import not_installed

HERE = Path(__file__).resolve().parent
DOCS = HERE.parents[1] / "docs"
CODEX = HERE / "node_modules" / ".bin" / "codex"
INSTALL = "cd tests/codex && npm ci"
MODEL = "gpt-5.5"  # in Codex's own model catalogue; a reasoning model with `phase` on the emulator
KEY = "codex-tests-key"
TURN_TIMEOUT = 60.0  # one `codex exec` against the emulator takes about a second

# A low auto-compact limit: Codex's instructions alone pass it, so a resumed session starts with a local compaction.
COMPACT_LIMIT = 200


def codex_binary() -> Path:
    """The installed Codex; when missing, a skip naming the install command (a failure in CI, where .ci/run
    installs it)."""
    if not CODEX.exists():
        not_installed(f"the Codex CLI is not installed: {INSTALL}")
    return CODEX


def config_toml(base_url: str, *, websockets: bool) -> str:
    """Codex's ``config.toml`` for a run: the block of docs/codex.md as written, its base URL the run's, and its
    ``supports_websockets`` line left out for HTTP (as the page says)."""
    page = (DOCS / "codex.md").read_text(encoding="utf-8")
    block = page.split("<!-- codex-config -->\n```toml\n", 1)[1].split("```", 1)[0]
    lines = []
    for line in block.splitlines():
        if line.startswith("base_url = "):
            line = f'base_url = "{base_url}"'
        elif line.startswith("supports_websockets = ") and not websockets:
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def overrides(*, compact: bool) -> list[str]:
    """What the tests add on Codex's command line: no sandbox (the shell tool runs ``echo``; a container may refuse
    bubblewrap's namespaces), no retries and no waiting for a network, so that a failure fails at once, and, for a
    compacting session, a low auto-compact limit."""
    provider = "model_providers.otel-responses"
    options = ["--sandbox", "danger-full-access", "--disable", "unbounded_connection_retries"]
    options += ["-c", f"{provider}.request_max_retries=0", "-c", f"{provider}.stream_max_retries=0"]
    if compact:
        options += ["-c", f"model_auto_compact_token_limit={COMPACT_LIMIT}"]
    return options


class Trap:
    """A loopback listener given to Codex as every proxy (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``; loopback
    exempt): a call Codex makes off the machine reaches it instead of the network — no name lookup, no wait, the
    connection closed at once. ``calls`` lists the first line of each (``CONNECT chatgpt.com:443 HTTP/1.1``)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.calls: list[str] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        routes = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
        exempt = "127.0.0.1,localhost"
        return {
            **dict.fromkeys(routes, self.url),
            **{name.lower(): self.url for name in routes},
            "NO_PROXY": exempt,
            "no_proxy": exempt,
        }

    def __enter__(self) -> Trap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with sock:
                sock.settimeout(2)
                with contextlib.suppress(OSError):
                    self.calls.append(sock.recv(4096).split(b"\r\n", 1)[0].decode("latin-1"))


@dataclass
class SessionRun:
    """One session run by Codex: each turn's final message (its standard output) and where it ran."""

    answers: list[str] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)  # what a masked body says in place of each run's own path


def run_session(base_url: str, turns: Sequence[str], trap: Trap, *, websockets: bool, compact: bool) -> SessionRun:
    """The turns as a user types them: the first ``codex exec "<turn>"``, each later one ``codex exec resume --last
    "<turn>"`` (a new process resuming the saved session), standard input from the null device (without it,
    ``codex exec`` waits for it). A fresh ``CODEX_HOME``, home and working folder per run, and an environment of
    its own: nothing of this machine's Codex or OpenAI settings is read."""
    codex = codex_binary()
    run = SessionRun()
    with tempfile.TemporaryDirectory(prefix="codex-run-") as scratch:
        root = Path(scratch)
        home, codex_home, work = root / "home", root / "codex-home", root / "work"
        for folder in (home, codex_home, work):
            folder.mkdir()
        (codex_home / "config.toml").write_text(config_toml(base_url, websockets=websockets))
        run.paths = {str(codex_home): "<codex-home>", str(work): "<work>", str(home): "<home>"}
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "CODEX_HOME": str(codex_home),
            "OPENAI_API_KEY": KEY,
            "LANG": "C.UTF-8",
            **trap.environment(),
        }
        for number, turn in enumerate(turns):
            resume = ["resume", "--last"] if number else []
            options = ["--strict-config", "--skip-git-repo-check", *overrides(compact=compact)]
            command = [str(codex), "exec", *options, *resume, turn]
            finished = subprocess.run(
                command,
                cwd=work,
                env=environment,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TURN_TIMEOUT,
                check=False,
            )
            if finished.returncode != 0:
                raise AssertionError(
                    f"codex exec failed ({finished.returncode}) on turn {number + 1}:\n{finished.stderr}"
                )
            run.answers.append(finished.stdout)
    return run


# -- what Codex sent, comparable across runs --------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ENCRYPTED = re.compile(r'("encrypted_content": )"([^"]*)"')
_MILLISECONDS = re.compile(r'([_-]ms\\?": ?\\?"?)\d+')  # a time in ms (`turn_started_at_unix_ms`), a number or a string
_CHUNK = re.compile(r"Chunk ID: [0-9a-f]+")
_WALL = re.compile(r"Wall time: [0-9.]+ seconds")


def masked_output(text: str) -> str:
    """A shell tool's result as Codex reports it, less what differs from one run to the next (its chunk id and the
    command's wall time)."""
    return _WALL.sub("Wall time: <seconds>", _CHUNK.sub("Chunk ID: <chunk>", text))


def masked_requests(requests: Sequence[RecordedRequest], paths: dict[str, str]) -> list[tuple[str, str, str]]:
    """Each request the emulator received (method, path, body as sorted JSON) with Codex's own per-run values
    masked: its run's folders, its ids (uuids, numbered by first appearance, so two runs sending one id in the same
    places compare equal), its start times, a tool result's chunk id and wall time; encrypted payloads (sealed afresh
    on every serialisation) by length. The emulator's own ids repeat from one reset to the next."""
    numbers: dict[str, str] = {}

    def number(found: re.Match[str]) -> str:
        return numbers.setdefault(found[0], f"<uuid-{len(numbers) + 1}>")

    masked = []
    for request in requests:
        text = json.dumps(request.body, sort_keys=True)
        for path, name in paths.items():
            text = text.replace(path, name)
        text = _UUID.sub(number, text)
        text = _ENCRYPTED.sub(lambda found: f'{found[1]}"<{len(found[2])} chars>"', text)
        text = _MILLISECONDS.sub(lambda found: f"{found[1]}<ms>", text)
        masked.append((request.method, request.path, masked_output(text)))
    return masked


def model_calls(requests: Sequence[RecordedRequest]) -> list[dict[str, Any]]:
    """The bodies of the model calls among the requests: each ``POST .../responses`` and WebSocket
    ``response.create``, in order (the WebSocket handshakes left out)."""
    return [
        request.body
        for request in requests
        if isinstance(request.body, dict)
        and (request.method == "POST" or request.body.get("type") == "response.create")
        and request.path.split("?")[0].endswith("/responses")
    ]


def call_kind(body: dict[str, Any]) -> str:
    """What a model call of Codex is for: ``warm-up`` (WebSocket mode's ``generate: false``), ``compaction`` (its
    local compaction: the history and its checkpoint prompt), ``tool output`` (a turn going on after a tool ran),
    or ``turn``."""
    if body.get("generate") is False:
        return "warm-up"
    metadata = (body.get("client_metadata") or {}).get("x-codex-turn-metadata")
    if isinstance(metadata, str) and json.loads(metadata).get("request_kind") == "compaction":
        return "compaction"
    items = body.get("input")
    last = items[-1] if isinstance(items, list) and items else None
    if isinstance(last, dict) and last.get("type") == "function_call_output":
        return "tool output"
    return "turn"
