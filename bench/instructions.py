"""Instructions per replayed item of the pure core (request facts, the analysis against a ledger, the checks), counted
by callgrind: the same count for the same code, whatever else the machine is doing. The timed benchmark (`run.py`)
says what a call costs; on a loaded machine its per-item slope moves by more than a change is worth, this does not.

    .venv/bin/python bench/instructions.py [--sizes 100,1000] [--code DIR ...]

The workload: the timed benchmark's replayed history (turns of a user message, an encrypted reasoning item, a
function call, its output and an assistant message), each tool output 4 KB of text of its own, against a ledger that
knows the history: every response whose items the replay carries (a reasoning item and a call; a message), the latest
one recorded from its own request (so it remembers the tool outputs it was given), the others each from a request of
its turn's user message alone (what matching reads of them is their output items). So every replayed item is looked
up and found, and every tool output compared with the copy first sent. Each iteration is the request's facts, its
analysis and the request checks; what a call's end records is not counted (it reads a bounded part of the input).

``--code``: a checkout (a git worktree of another commit, say) whose ``otel_responses`` is measured instead of the
installed one; several are measured in turn, so a change is read side by side with its base. Needs ``valgrind``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_COLLECTED = re.compile(r"Collected : (\d+)")
_FEW, _MANY = 5, 25  # iterations of two runs: their difference is the cost of the iterations alone

_CORE = """
import sys
sys.path.insert(0, {bench!r})
from instructions import known_history
from otel_responses._analysis.analysis import analyse
from otel_responses._analysis.checks import Situation, run_request_checks
from otel_responses.config import settings_from
from otel_responses._analysis.facts import request_facts

settings = settings_from({{"hash_key": "bench"}})
history, ledger = known_history({size}, settings)
kwargs = {{"model": "gpt-5", "input": history, "store": False, "include": ["reasoning.encrypted_content"]}}
situation = Situation(False, False)
req = request_facts("chat", kwargs, settings)
raised = [s.name for s in run_request_checks(req, analyse(req, ledger), situation)]
assert raised == [], raised  # a healthy replay, every item of it known
for _ in range({iterations}):
    req = request_facts("chat", kwargs, settings)
    run_request_checks(req, analyse(req, ledger), situation)
"""
OUTPUT_BYTES = 4096
_APP_WRITES = frozenset({"function_call_output"})


@dataclass
class _Ended:
    """What a call's end records from (``operations.CallState``)."""

    ledger: Any
    req: Any
    analysis: Any
    settings: Any
    lineage: Any


def known_history(size: int, settings: Any) -> tuple[list[dict[str, Any]], Any]:
    """The replay of ``size`` items (4 KB tool outputs) and a ledger that knows every response it carries."""
    from types import SimpleNamespace

    from worker import replay_input

    from otel_responses._analysis.analysis import Analysis, analyse
    from otel_responses._analysis.facts import request_facts, response_facts
    from otel_responses._analysis.lineage import Lineage
    from otel_responses._calls.operations import remember_created
    from otel_responses.ledger import InMemoryLedger

    history = replay_input(size)
    for item in history:
        if item.get("type") == "function_call_output":
            head = f'{{"call": "{item["call_id"]}", "rows": "'
            item["output"] = head + "x" * (OUTPUT_BYTES - len(head) - 2) + '"}'
    ledger = InMemoryLedger()
    runs: list[tuple[int, int]] = []  # each response's output items: a run of items neither the app nor the user wrote
    for position, item in enumerate(history):
        made = "role" not in item or item.get("role") == "assistant"
        if made and item.get("type") not in _APP_WRITES:
            if runs and runs[-1][1] == position:
                runs[-1] = (runs[-1][0], position + 1)
            else:
                runs.append((position, position + 1))
    for number, (start, end) in enumerate(runs):
        latest = number == len(runs) - 1
        asked = history[:start] if latest else [next(i for i in reversed(history[:start]) if i.get("role") == "user")]
        req = request_facts("chat", {"model": "gpt-5", "input": asked}, settings)
        an = analyse(req, ledger) if latest else Analysis()
        resp = response_facts(
            SimpleNamespace(id=f"resp_b{number}", output=history[start:end], status="completed"), settings
        )
        remember_created(_Ended(ledger, req, an, settings, Lineage()), resp)
    return history, ledger


def instructions(size: int, iterations: int, code: Path | None) -> int:
    """Instructions of one process running the core ``iterations`` times on a replay of ``size`` items."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # dict and set layouts, hence counts, the same every run
    if code is not None:
        env["PYTHONPATH"] = str(code)
    script = _CORE.format(bench=str(HERE), size=size, iterations=iterations)
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found[1])


def per_call(size: int, code: Path | None) -> float:
    return (instructions(size, _MANY, code) - instructions(size, _FEW, code)) / (_MANY - _FEW)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000", help="replay sizes: the slope is taken between the first two")
    parser.add_argument("--code", type=Path, action="append", help="a checkout to measure instead of the installed one")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind)")
    sizes = [int(size) for size in args.sizes.split(",")]
    for code in args.code or [None]:
        calls = {size: per_call(size, code) for size in sizes}
        slope = (calls[sizes[1]] - calls[sizes[0]]) / (sizes[1] - sizes[0]) if len(sizes) > 1 else float("nan")
        where = str(code) if code is not None else "installed"
        figures = ", ".join(f"{size} items: {calls[size]:,.0f}" for size in sizes)
        print(f"{where}: instructions per call ({figures}); per replayed item: {slope:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
