"""The fleet benchmark: the shared ledger across worker processes.

    .venv/bin/python bench/fleet.py [--workers 4] [--conversations 300] [--cluster] [--kill-master] [--out DIR]

One emulator process (``python -m otel_responses.emulator``) on 127.0.0.1 serves every worker. Each worker is a
process with the real OpenTelemetry SDK (``SimpleSpanProcessor`` + ``InMemorySpanExporter``, ``InMemoryMetricReader``)
and ``ResponsesInstrumentor().instrument(hash_key=..., ledger_url=...)``, serving turns from its own queue on a few
threads. The dispatcher (this process) runs the scripted sessions of ``otel_responses/scenarios.py`` — every state
mode done right and each scripted mistake, cycled over ``--conversations`` concurrent conversations — and sends each
turn to a random worker, after a model-like gap (``--gap-ms``, uniform, before every turn but the first; the
emulator answers at once). Workers report each turn's response id, the signals its spans carried, its wall time
and, with Redis, when its ledger entry became readable there: the dispatcher subscribes to Redis keyspace
notifications (``notify-keyspace-events E$``) and notes when each entry key (``…:r:{response id}``) is written,
so the write lag costs the workers nothing.

The same script (same scenarios, markers, gaps and worker draws) runs in up to four phases:

- ``single``: one worker, in-process ledger: the reference recall;
- ``fleet_local``: N workers, in-process ledger: what a fleet without sharing loses, and the time basis;
- ``fleet_redis``: N workers, shared ledger on a throwaway single ``redis-server``;
- ``fleet_cluster`` (``--cluster``, when ``tests/redis_cluster.py`` exists): the same on a local Redis Cluster,
  with ``--kill-master`` one master killed mid-run.

Results: ``bench/results/fleet-latest.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as `python bench/fleet.py` from anywhere
    sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:  # imported by a spawned worker: the benchmark's own modules
    sys.path.insert(0, str(HERE))

from fleet_infra import cluster_launcher, emulator, log, machine, redis_memory, redis_server  # noqa: E402
from fleet_phases import phase, reference_run, run_cluster  # noqa: E402
from fleet_report import render  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4, help="threads serving turns in each worker")
    parser.add_argument("--conversations", type=int, default=300)
    parser.add_argument("--gap-ms", type=float, nargs=2, default=(200.0, 600.0), metavar=("MIN", "MAX"))
    parser.add_argument("--ramp", type=float, default=5.0, help="seconds over which conversations start")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--cluster", action="store_true", help="also run on a local Redis Cluster")
    parser.add_argument("--kill-master", action="store_true", help="with --cluster: kill one master mid-run")
    parser.add_argument("--skip", default="", help="comma-separated phases to skip: single, fleet_local, fleet_redis")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if args.kill_master and not args.cluster:
        parser.error("--kill-master needs --cluster")
    skip = {s for s in args.skip.split(",") if s}
    hash_key = secrets.token_urlsafe(32)
    calls_per_conversation = 0.0
    results: dict[str, Any] = {
        "command": "python bench/fleet.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "workers": args.workers,
        "threads": args.threads,
        "conversations": args.conversations,
        "gap_ms": list(args.gap_ms),
        "ramp_seconds": args.ramp,
        "seed": args.seed,
        "machine": machine(),
        "phases": {},
        "redis_memory": {},
        "added_ms": {},
    }
    phases: dict[str, dict[str, Any]] = results["phases"]
    started = time.monotonic()
    with emulator() as base_url:
        where, reference, table = reference_run(base_url, hash_key)
        results["reference_signals_by_turn"] = table
        if "single" not in skip:
            phases["single"], _ = phase("single", args, base_url, 1, None, hash_key, where, reference)
        if "fleet_local" not in skip:
            phases["fleet_local"], _ = phase(
                "fleet_local", args, base_url, args.workers, None, hash_key, where, reference
            )
        if "fleet_redis" not in skip:
            with redis_server() as url:
                before = redis_memory(url)
                phases["fleet_redis"], done = phase(
                    "fleet_redis", args, base_url, args.workers, {"url": url}, hash_key, where, reference, [url]
                )
                after = redis_memory(url)
                calls_per_conversation = sum(len(c.turns) for c in done) / max(1, len(done))
                delta = after["used_memory"] - before["used_memory"]
                results["redis_memory"]["single node"] = {
                    "used_memory_delta": delta,
                    "keys": after["keys"] - before["keys"],
                    "bytes_per_conversation": round(delta / args.conversations),
                    "calls_per_conversation": round(calls_per_conversation, 2),
                }
        if args.cluster:
            launcher = cluster_launcher()
            if launcher is None:
                results["cluster"] = "not run: tests/redis_cluster.py does not exist yet"
                log(results["cluster"])
            else:
                results["cluster"] = run_cluster(launcher, args, base_url, hash_key, where, reference, results)
    for name in ("fleet_redis", "fleet_cluster", "fleet_cluster_kill_master"):
        if name in phases and "fleet_local" in phases:
            results["added_ms"][f"{name} - fleet_local"] = {
                q: round(phases[name]["call_ms"][q] - phases["fleet_local"]["call_ms"][q], 3) for q in ("p50", "p99")
            }
    if "single" in phases:
        outcome = {x["i"]: (x["error"], x["remembered"]) for x in phases["single"]["sessions"]}
        for data in phases.values():
            data["app_outcomes_differing_from_single"] = sum(
                1 for x in data["sessions"] if outcome.get(x["i"]) != (x["error"], x["remembered"])
            )
    results["total_seconds"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fleet-latest.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "fleet-latest.md").write_text(render(results))
    log(render(results))
    log(f"wrote {args.out / 'fleet-latest.json'} and fleet-latest.md in {results['total_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
