"""``otel-responses report``: OTLP/JSON trace files in, one HTML page out. No extra is needed (no protobuf).

Input problems are reported (file and line) and the page is still written from what could be read; when nothing
could be read from any input, no page is written. What was skipped without being a problem (the app's own output
beside the spans) is named once. Building the command's options imports the standard library only
(``otel-responses --help`` and ``dashboards`` run with nothing else installed).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, TextIO

from ..exit_codes import EXIT_FAILED, EXIT_MISSING_EXTRA, EXIT_OK, EXIT_USAGE
from .otlp_json import STDIN, Problem, read
from .records import SCOPE_PREFIX
from .urls import DOCS_URL, BadTemplate, check_docs_url, check_trace_url

if TYPE_CHECKING:
    from .model import Conversation

NAME: Final = "report"
TITLE: Final = "otel-responses report"
MAX_PRINTED: Final = 20  # problems printed to standard error; the page lists more

DESCRIPTION: Final = """\
Write a self-contained HTML page of each conversation's turns from exported traces: the state
mode, store flag, instructions hash, item types, tool-call check, encrypted reasoning, compaction,
tokens and every signal with its fix, turn by turn. INPUT is a file of OTLP/JSON trace lines as
the OpenTelemetry Collector's file exporter writes them (gzip- or zstd-compressed too), or - for
standard input; the app's own output among them is skipped (opentelemetry-instrument
--traces_exporter otlp_json_file writes the spans to standard output, beside the app's prints).
Only this package's spans are read (by their instrumentation scope); the page is built from span
attributes alone, so it holds no payload.
"""

EPILOG: Final = """\
exit codes: 0 written; 1 an INPUT could not be read in full (each problem is named by file and
line; the page holds what could be read, and is not written when no INPUT could be read at all),
it held no span of otel-responses, or FILE cannot be written; 2 bad usage;
5 a zstd-compressed INPUT needs Python 3.14 or the zstandard package (the 'zstd' extra; the page
holds the other inputs); 130 interrupted by Ctrl-C.
It needs no extra: the package alone reads uncompressed and gzip files.
"""


def add_parser(commands: Any) -> None:
    """Register the subcommand on the ``otel-responses`` parser's subcommands."""
    parser = commands.add_parser(
        NAME,
        help="write a self-contained HTML page of each conversation's turns and signals from exported traces "
        "(OTLP/JSON lines)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="an OTLP/JSON trace file, or - for standard input")
    parser.add_argument("--out", required=True, type=_nonempty, metavar="FILE", help="the page to write (- for stdout)")
    parser.add_argument(
        "--trace-url",
        type=_trace_url,
        metavar="TEMPLATE",
        help="link each call to a tracing backend, with {trace_id} and {span_id}, e.g. "
        "http://127.0.0.1:16686/trace/{trace_id}?uiFind={span_id}",
    )
    parser.add_argument(
        "--docs-url",
        type=_docs_url,
        default=DOCS_URL,
        metavar="URL",
        help="where your copy of the documentation is: signal names link to its Signals page (default: %(default)s)",
    )
    parser.add_argument("--title", type=_nonempty, default=TITLE, help="the page's title")


def _nonempty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _trace_url(text: str) -> str:
    try:
        return check_trace_url(text)
    except BadTemplate as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _docs_url(text: str) -> str:
    try:
        return check_docs_url(text)
    except BadTemplate as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run(args: argparse.Namespace, out: TextIO, err: TextIO, stdin: IO[bytes] | None = None) -> int:
    """Read the inputs, write the page, say what it holds; the exit code (see EPILOG)."""
    if args.inputs.count(STDIN) > 1:
        err.write("otel-responses report: standard input (-) can be read only once\n")
        return EXIT_USAGE
    collecting = gc.isenabled()
    gc.disable()  # millions of small objects and no cycle among them: the collector would only walk them
    try:
        return _run(args, out, err, stdin)
    finally:
        if collecting:
            gc.enable()


def _run(args: argparse.Namespace, out: TextIO, err: TextIO, stdin: IO[bytes] | None) -> int:
    from .model import conversations  # the page needs the package's attribute names: imported only to run
    from .page import Options, render_conversations

    reading = read(args.inputs, stdin if stdin is not None else sys.stdin.buffer)
    problems = reading.problems
    for problem in problems[:MAX_PRINTED]:
        err.write(f"otel-responses report: {problem}\n")
    if len(problems) > MAX_PRINTED:
        err.write(f"otel-responses report: and {len(problems) - MAX_PRINTED} more problems (listed on the page)\n")
    if reading.all_failed:
        err.write("otel-responses report: nothing could be read from the input: no page written\n")
        return _exit_code(problems)
    found = conversations(reading.spans)
    for note in [*reading.notes, *(f"{_heading(c)}: {c.note}" for c in found if c.note is not None)]:
        err.write(f"otel-responses report: note: {note}\n")
    options = Options(
        title=args.title,
        trace_url=args.trace_url,
        docs_url=args.docs_url,
        sources=reading.sources,
        problems=[str(p) for p in problems],
        other_spans=reading.other_spans,
        notes=reading.notes,  # a conversation's own note is shown with it
    )
    page = render_conversations(found, options)
    try:
        where = _write(args.out, page, out)
    except OSError as error:
        asked = args.out if args.out == STDIN else Path(args.out).expanduser().absolute()
        err.write(f"otel-responses report: cannot write {asked}: {error.strerror or error}\n")  # not its temporary
        return EXIT_FAILED
    if where is not None:
        lost = sum(1 for c in found if c.first_loss is not None)
        out.write(
            f"wrote {where}: {_plural(len(found), 'conversation')} ({lost} with context loss) from "
            f"{_plural(len(reading.spans), 'span')}; open it in a browser\n"
        )
    if not reading.spans and not problems:
        err.write(
            f"otel-responses report: no span of otel-responses in the input (instrumentation scope {SCOPE_PREFIX}.*; "
            f"{reading.other_spans} span{'s' if reading.other_spans != 1 else ''} of other instrumentations)\n"
        )
        return EXIT_FAILED
    return _exit_code(problems)


def _heading(conversation: Conversation) -> str:
    run = f" (run {conversation.run[0]} of {conversation.run[1]})" if conversation.run else ""
    return f"{conversation.kind} {conversation.key}{run}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _exit_code(problems: list[Problem]) -> int:
    if not problems:
        return EXIT_OK
    if all(p.missing is not None for p in problems):
        return EXIT_MISSING_EXTRA
    return EXIT_FAILED


def _write(target: str, page: str, out: TextIO) -> Path | None:
    """Write the page whole or not at all (a temporary file beside it, renamed); None when written to stdout."""
    if target == STDIN:
        out.write(page)
        return None
    path = Path(target).expanduser().absolute()
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(page)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o666 & ~mask)  # as a plain open() would have made it
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path
