"""How long `otel-responses report` takes to write the page of 10,000 spans, and a browser to render it.

    .venv/bin/python bench/report.py [--spans 10000] [--rounds 5] [--out DIR] [--keep]

1. The demo's scenarios run once against the emulator with the instrumentation on, exported by
   as OTLP/JSON lines (``tests/otlp_lines.py``, as the upstream file exporter writes them; about 50 real spans: every
   state mode, every mistake).
2. Their OTLP/JSON lines are copied until there are ``--spans`` spans, each copy with its own trace, span, response
   and conversation ids (so each copy is its own set of conversations) and one of three service names.
3. **Write**: ``otel-responses report traces.jsonl --out report.html`` in this process (reading, grouping,
   rendering, writing the file), ``--rounds`` times; and once as a command in a fresh process (with Python's
   start-up and imports).
4. **Render**: headless Chromium opens the page (``--dump-dom``) ``--rounds`` times; the page's script records
   ``data-render-ms``, the time from navigation start to the page parsed, filtered and laid out (it reads
   ``document.body.offsetHeight`` to force the layout), which ``--dump-dom`` hands back.

Prints the medians and writes them to ``DIR/report-bench.json`` (default: a temporary directory, removed unless
``--keep``). Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SERVICES = ("checkout", "support", "search")
CHROMIUM_FLAGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
_ID = re.compile(r'"((?:resp|conv|msg|rs|fc|call|cmp)_[0-9a-f]{16,64})"')
_HEX_ID = re.compile(r'"(traceId|spanId|parentSpanId)":"([0-9a-f]+)"')


def demo_lines(directory: Path) -> list[str]:
    """The demo's spans as OTLP/JSON lines, one line per span."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_responses.tools.demo import Exporters, run_scenarios

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: its tests' helpers
    from tests.otlp_lines import write_lines

    spans = InMemorySpanExporter()
    exporters = Exporters()
    tracer_provider, meter_provider, memory = exporters.providers(sys.stdout)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    try:
        run_scenarios(tracer_provider, meter_provider, memory)
    finally:
        exporters.shutdown()
    return write_lines(spans.get_finished_spans(), directory / "demo.jsonl").read_text().splitlines()


def copies(lines: list[str], spans: int) -> list[str]:
    """``spans`` lines: copies of ``lines`` with fresh ids (same length, so the page is as big as real ones)."""
    out: list[str] = []
    copy = 0
    while len(out) < spans:
        copy += 1
        service = SERVICES[copy % len(SERVICES)]

        def fresh_hex(match: re.Match[str], copy: int = copy) -> str:
            value = match.group(2)
            digest = hashlib.blake2b(f"{copy}:{value}".encode(), digest_size=len(value) // 2).hexdigest()
            return f'"{match.group(1)}":"{digest}"'

        def fresh_id(match: re.Match[str], copy: int = copy) -> str:
            value = match.group(1)
            prefix, _, rest = value.partition("_")
            digest = hashlib.blake2b(f"{copy}:{value}".encode(), digest_size=len(rest) // 2).hexdigest()
            return f'"{prefix}_{digest}"'

        for line in lines:
            if len(out) == spans:
                break
            line = _HEX_ID.sub(fresh_hex, line)
            line = _ID.sub(fresh_id, line)
            out.append(line.replace('"otel-responses-demo"', f'"{service}"'))
    return out


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def render_ms(browser: str, page: Path, directory: Path) -> tuple[float, float]:
    """(the page's own data-render-ms, the browser process's wall time in ms) for one fresh headless run."""
    profile = tempfile.mkdtemp(prefix="chromium-", dir=directory)
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    started = time.perf_counter()
    result = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    )
    wall = (time.perf_counter() - started) * 1000
    shutil.rmtree(profile, ignore_errors=True)
    head = result.stdout[:2000]
    found = re.search(r'data-render-ms="(\d+)"', head)
    if found is None or 'data-ready="1"' not in head:
        raise RuntimeError(f"the page's script did not finish: {head[:300]!r}")
    return float(found.group(1)), wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, help="where to keep the files and report-bench.json")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)

    from otel_responses.tools.report import command
    from otel_responses.tools.report.urls import DOCS_URL

    directory = args.out or Path(tempfile.mkdtemp(prefix="report-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        traces = directory / "traces.jsonl"
        traces.write_text("\n".join(copies(demo_lines(directory), args.spans)) + "\n")
        page = directory / "report.html"
        namespace = argparse.Namespace(
            inputs=[str(traces)], out=str(page), trace_url=None, docs_url=DOCS_URL, title="bench"
        )
        writes = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            with open(os.devnull, "w") as sink:
                code = command.run(namespace, sink, sys.stderr)
            writes.append((time.perf_counter() - started) * 1000)
            if code != 0:
                raise RuntimeError(f"report exited {code}")
        started = time.perf_counter()
        subprocess.run(
            [str(Path(sys.executable).parent / "otel-responses"), "report", str(traces), "--out", str(page)],
            check=True,
            capture_output=True,
        )
        command_ms = (time.perf_counter() - started) * 1000
        result: dict[str, Any] = {
            "spans": args.spans,
            "input_bytes": traces.stat().st_size,
            "page_bytes": page.stat().st_size,
            "write_ms_median": round(statistics.median(writes), 1),
            "write_ms_all": [round(w, 1) for w in writes],
            "command_ms": round(command_ms, 1),
        }
        browser = chromium()
        if browser is None:
            result["render"] = "no chromium on this machine"
        else:
            runs = [render_ms(browser, page, directory) for _ in range(args.rounds)]
            result["render_ms_median"] = statistics.median(r[0] for r in runs)
            result["render_ms_all"] = [r[0] for r in runs]
            result["browser_wall_ms_median"] = round(statistics.median(r[1] for r in runs), 1)
        print(json.dumps(result, indent=2))
        (directory / "report-bench.json").write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if args.out is None and not args.keep:
            with contextlib.suppress(OSError):
                shutil.rmtree(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
