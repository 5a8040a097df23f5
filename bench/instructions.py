"""Instructions per replayed item of the pure core (request facts, the analysis against a ledger, the checks), counted
by callgrind: the same count for the same code, whatever else the machine is doing. The timed benchmark (`run.py`)
says what a call costs; on a loaded machine its per-item slope moves by more than a change is worth, this does not.

    .venv/bin/python bench/instructions.py [--sizes 100,1000] [--code DIR ...]

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
from pathlib import Path

HERE = Path(__file__).resolve().parent
_COLLECTED = re.compile(r"Collected : (\d+)")
_FEW, _MANY = 5, 25  # iterations of two runs: their difference is the cost of the iterations alone

_CORE = """
import sys
sys.path.insert(0, {bench!r})
from worker import replay_input
from otel_responses._analysis.analysis import analyse
from otel_responses._analysis.checks import Situation, run_request_checks
from otel_responses.config import settings_from
from otel_responses._analysis.facts import request_facts
from otel_responses.ledger import InMemoryLedger

settings = settings_from({{"hash_key": "bench"}})
ledger = InMemoryLedger()
kwargs = {{"model": "gpt-5", "input": replay_input({size}), "store": False, "include": ["reasoning.encrypted_content"]}}
situation = Situation(False, False)
for _ in range({iterations}):
    req = request_facts("chat", kwargs, settings)
    run_request_checks(req, analyse(req, ledger), situation)
"""


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
