"""What a call that raises a signal pays for being heard: its log event with no logger provider configured (the
OpenTelemetry API's default), with an SDK provider and an in-memory exporter, and its console line once said.

    .venv/bin/python bench/events.py [--calls 20000] [--repeat 7]

Each figure is the best of ``--repeat`` timings of ``--calls`` calls, in µs per call with one signal (the best: this
is the code's own cost, not the machine's noise). A call that raises no signal pays none of it (one test in
``Telemetry.end``): ``bench/run.py`` measures those, against another checkout with ``--baseline``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import timeit
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from opentelemetry import version as api_version
from opentelemetry._logs import get_logger
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.util.types import AttributeValue

from otel_responses._analysis.lineage import Lineage
from otel_responses._telemetry.events import Events
from otel_responses._telemetry.recorded import Outcome
from otel_responses._telemetry.signal_log import SignalLog
from otel_responses.signals import Signal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    detail: dict[str, AttributeValue] = {
        "openai_responses.parent.id": "resp_parent",
        "openai_responses.instructions.last_turn": 1,
    }
    call: Any = SimpleNamespace(
        signals=[Signal("instructions_dropped", detail)],
        lineage=Lineage(2, "resp_lineage"),
        req=SimpleNamespace(target_response_id=None),
        context=None,
    )
    outcome = Outcome()
    none = Events(get_logger("bench"))  # no provider set: the API's proxy of its no-op logger
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    sdk = Events(provider.get_logger("bench"))
    line = SignalLog("warning")
    logging.getLogger("otel_responses").disabled = True  # the one line said below is not printed
    line.record(call, outcome)

    def with_sdk() -> None:
        sdk.emit(call, outcome, None)
        exporter.clear()

    cases: list[tuple[str, Callable[[], None]]] = [
        ("log event, no logger provider", lambda: none.emit(call, outcome, None)),
        ("log event, SDK provider + in-memory exporter", with_sdk),
        ("console line, once said", lambda: line.record(call, outcome)),
    ]
    print(f"OpenTelemetry API {api_version.__version__}, Python {sys.version.split()[0]}")
    for name, case in cases:
        best = min(timeit.repeat(case, number=args.calls, repeat=args.repeat)) / args.calls * 1e6
        print(f"{name}: {best:.2f} µs per call with one signal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
