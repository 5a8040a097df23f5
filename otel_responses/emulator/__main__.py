"""`python -m otel_responses.emulator`: serve the emulator in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from types import FrameType

from . import LOOPBACK_HOSTS, Emulator, EmulatorConfig
from .config import REFUSE, WITHHOLD

DESCRIPTION = """\
Serve a local, deterministic OpenAI Responses API emulator on 127.0.0.1. It prints its base
URL (http://127.0.0.1:PORT/v1) on standard output, then serves until Ctrl-C or SIGTERM.
"""


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port, 1-65535 (default: a free port)")
    parser.add_argument("--host", default="127.0.0.1", choices=LOOPBACK_HOSTS, help="loopback only")
    parser.add_argument("--seed", default=EmulatorConfig.seed, help="seed for ids and code words")
    parser.add_argument(
        "--drop-context", action="store_true", help="broken endpoint: the model sees only the current input"
    )
    parser.add_argument(
        "--repeat-reasoning-ids",
        action="store_true",
        help="a compatible server's habit: two reasoning items under one id per reasoning turn",
    )
    parser.add_argument(
        "--api-key-env", metavar="VAR", help="refuse any key but the one in this environment variable (it must be set)"
    )
    parser.add_argument(
        "--context-window",
        type=int,
        metavar="TOKENS",
        help='the input tokens a model reads at most: past it, truncation "auto" drops the oldest items, else a 400',
    )
    parser.add_argument(
        "--refuse-foreign-reasoning",
        action="store_true",
        help="refuse reasoning made for another organization, end user or model (400) instead of withholding it",
    )
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    return parser


PREFIX = "otel-responses emulator"
EXIT_USAGE = 2  # as argparse exits for a bad argument


def _listening(emulator: Emulator, port: int) -> str | None:
    """Start it; why it cannot listen on the port otherwise, in a line (not a traceback)."""
    try:
        emulator.start()
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return f"port {port} is in use"
        return f"cannot listen on port {port}: {error.strerror or error}"
    return None


def main(argv: list[str] | None = None, prog: str = "python -m otel_responses.emulator") -> int:
    """Run until interrupted (Ctrl-C or SIGTERM); prints the base URL on its own line first. ``prog``: the name
    usage lines give it (``otel-responses emulator`` hands its arguments here)."""
    parser = _parser(prog)
    args = parser.parse_args(argv)
    required_key = None
    if args.api_key_env is not None:
        required_key = os.environ.get(args.api_key_env)
        if not (required_key or "").strip():  # unset, it would mean that every key is accepted
            parser.error(f"--api-key-env {args.api_key_env}: the variable is not set; set it to the key to accept")
    if args.context_window is not None and args.context_window < 1:
        parser.error(f"--context-window {args.context_window}: give a number of tokens, at least 1")
    if not 0 <= args.port <= 65535:  # 0: a free port
        sys.stderr.write(f"{PREFIX}: port {args.port} is out of range (1-65535)\n")
        return EXIT_USAGE
    config = EmulatorConfig(
        seed=args.seed,
        drop_context=args.drop_context,
        api_key=required_key,
        repeat_reasoning_ids=args.repeat_reasoning_ids,
        context_window=args.context_window,
        foreign_reasoning=REFUSE if args.refuse_foreign_reasoning else WITHHOLD,
    )
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)  # also when started in the background, where SIGINT is ignored
    emulator = Emulator(config, port=args.port, host=args.host, verbose=args.verbose)
    reason = _listening(emulator, args.port)
    if reason is not None:
        sys.stderr.write(f"{PREFIX}: {reason}\n")
        return EXIT_USAGE
    with emulator:
        print(emulator.base_url, flush=True)
        print(f"{PREFIX} running; press Ctrl-C to stop", file=sys.stderr, flush=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
