"""The runs of one benchmark: the sequential reference, then each phase on a fresh set of workers."""

from __future__ import annotations

import argparse
import random
import threading
import time
from typing import Any

from fleet_analysis import analyse, raising_turns
from fleet_dispatch import Conversation, ConversationClient, Fleet, run_phase
from fleet_infra import KeyWatcher, log

from otel_responses.tools import scenarios


def phase(
    name: str,
    args: argparse.Namespace,
    base_url: str,
    workers: int,
    ledger: dict[str, Any] | None,
    hash_key: str,
    where: dict[tuple[str, str], int],
    reference: dict[str, set[str]],
    watch: list[str] | None = None,
    midway: Any = None,
) -> tuple[dict[str, Any], list[Conversation]]:
    """One run of the script on a new set of workers; ``watch``: the Redis node URLs whose writes to follow."""
    log(f"phase {name}: {workers} worker(s), ledger {'shared' if ledger else 'in-process'}")
    fleet = Fleet(workers, args.threads, base_url, ledger, hash_key)
    watcher = KeyWatcher(watch) if watch else None
    kill: dict[str, Any] = {}
    try:
        fleet.warm_up()
        conversations, _ = run_phase(
            name,
            fleet,
            workers,
            args.conversations,
            args.seed,
            (args.gap_ms[0], args.gap_ms[1]),
            args.ramp,
            midway=(lambda start: midway(start, kill)) if midway is not None else None,
        )
    finally:
        fleet.close()
        if watcher is not None:
            watcher.close()
    readable = dict(watcher.readable) if watcher is not None else None
    result = analyse(conversations, readable, where, reference, kill.get("time"))
    stats: dict[str, int] = {}
    for worker_stats in fleet.stats.values():
        for key, value in worker_stats.items():
            stats[key] = stats.get(key, 0) + int(value)
    if stats:
        result["ledger_stats"] = stats
    if kill:
        result["kill"] = {k: v for k, v in kill.items() if k != "time"}
    result["sessions"] = [
        {
            "i": c.index,
            "scenario": c.scenario,
            "error": c.transcript_error,
            "remembered": c.remembered,
            "turns": [[t["worker"], t["signals"]] for t in c.turns],
        }
        for c in conversations
    ]
    return result, conversations


Reference = tuple[dict[tuple[str, str], int], dict[str, set[str]], dict[str, Any]]


def reference_run(base_url: str, hash_key: str) -> Reference:
    """Each scenario once, one after the other, on one worker with the in-process ledger: which turn raises each
    expected signal, and the full set of signals each scenario raises when nothing else runs (a mistake often
    raises a companion signal too, e.g. ``replay_incomplete`` beside ``orphan_tool_output``)."""
    log("phase reference: each scenario once, sequentially, one worker")
    fleet = Fleet(1, 1, base_url, None, hash_key)
    done: list[Conversation] = []
    try:
        for i, scenario in enumerate(scenarios.SCENARIOS):
            client = ConversationClient(fleet, random.Random(i), (0.0, 0.0), 1)
            transcript = scenarios.run(client, scenario, f"R-{i}")  # type: ignore[arg-type]
            done.append(Conversation(i, scenario.name, transcript.error, transcript.remembered, client.turns))
    finally:
        fleet.close()
    signals = {c.scenario: {s for t in c.turns for s in t["signals"]} for c in done}
    table = {c.scenario: [t["signals"] for t in c.turns] for c in done}
    return raising_turns(done), signals, table


def run_cluster(
    launcher: Any,
    args: argparse.Namespace,
    base_url: str,
    hash_key: str,
    where: dict[tuple[str, str], int],
    reference: dict[str, set[str]],
    results: dict[str, Any],
) -> str:
    """The fleet on ``tests/redis_cluster.py``'s local cluster (3 masters, a replica each; ``?cluster=true``),
    with ``--kill-master`` one master SIGKILLed a third of the way into the run."""
    import redis

    def memory(ports: list[int]) -> dict[str, int]:
        total = {"used_memory": 0, "keys": 0}
        for port in ports:
            node = redis.Redis(host="127.0.0.1", port=port)
            total["used_memory"] += int(node.info("memory")["used_memory"])
            total["keys"] += int(node.dbsize())
            node.close()
        return total

    for killing in (False, True) if args.kill_master else (False,):
        name = "fleet_cluster_kill_master" if killing else "fleet_cluster"
        with launcher.LocalCluster() as cluster:
            masters = cluster.master_ports()
            before = memory(masters)
            urls = [f"redis://127.0.0.1:{port}/0" for port in cluster.ports]

            def kill_master(
                start: float, kill: dict[str, Any], cluster: Any = cluster, masters: list[int] = masters
            ) -> None:
                def later() -> None:
                    time.sleep(args.ramp / 3)
                    victim = masters[0]
                    kill["time"] = time.monotonic()
                    kill["killed_port"] = victim
                    kill["seconds_into_run"] = round(kill["time"] - start, 2)
                    cluster.kill(victim)
                    try:
                        deadline = time.monotonic() + 30
                        while victim in cluster.master_ports() and time.monotonic() < deadline:
                            time.sleep(0.05)  # survivors still name the dead master until the node timeout
                        cluster.wait_ok(30, ports=[p for p in cluster.ports if p != victim])
                        kill["failover_seconds"] = round(time.monotonic() - kill["time"], 2)
                    except Exception as exc:  # reported, not fatal
                        kill["failover_error"] = type(exc).__name__

                threading.Thread(target=later, daemon=True).start()

            result, done = phase(
                name,
                args,
                base_url,
                args.workers,
                {"url": f"{cluster.url}?cluster=true"},
                hash_key,
                where,
                reference,
                urls,
                midway=kill_master if killing else None,
            )
            results["phases"][name] = result
            if not killing:
                after = memory(masters)
                delta = after["used_memory"] - before["used_memory"]
                results["redis_memory"]["cluster (3 masters)"] = {
                    "used_memory_delta": delta,
                    "keys": after["keys"] - before["keys"],
                    "bytes_per_conversation": round(delta / args.conversations),
                    "calls_per_conversation": round(sum(len(c.turns) for c in done) / max(1, len(done)), 2),
                }
    return "run"
