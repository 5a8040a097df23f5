"""The fleet benchmark's Markdown report, from the results it writes as JSON."""

from __future__ import annotations

import json
from typing import Any

from otel_responses.tools import scenarios


def render(results: dict[str, Any]) -> str:
    phases: dict[str, dict[str, Any]] = results["phases"]
    lines = [
        "# Fleet benchmark: the shared ledger across worker processes",
        "",
        f"`{results['command']}` — {results['workers']} workers x {results['threads']} threads, "
        f"{results['conversations']} conversations ({len(scenarios.SCENARIOS)} scripted sessions cycled), "
        f"gap {results['gap_ms'][0]:.0f}-{results['gap_ms'][1]:.0f} ms before each turn, started over "
        f"{results['ramp_seconds']:.0f} s; {results['machine']['cpus']} CPUs, Python {results['machine']['python']}, "
        f"redis-server {results['machine']['redis-server']}.",
        "",
        "| phase | calls | recall | raising turn on another worker | outside write window | "
        "false signals (on healthy sessions) | app outcomes != single | ledger unavailable | "
        "call p50 ms | call p99 ms | write lag p50 / p99 / max ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, phase in phases.items():
        lag = phase.get("write_lag_ms")
        lag_text = f"{lag['p50']} / {lag['p99']} / {lag['max']} (never: {lag['never_readable']})" if lag else "—"
        cross, out = phase["raising_turn_on_other_worker"], phase["outside_write_window"]
        lines.append(
            f"| {name} | {phase['calls']} | {phase['detected']}/{phase['expected_signals']} = {phase['recall']} | "
            f"{cross['detected']}/{cross['n']} | {out['detected']}/{out['n']} | "
            f"{phase['false_signals']} ({phase['false_signals_on_healthy_sessions']}) | "
            f"{phase.get('app_outcomes_differing_from_single', '—')} | {phase['calls_with_ledger_unavailable']} | "
            f"{phase['call_ms']['p50']} | {phase['call_ms']['p99']} | {lag_text} |"
        )
    lines += ["", "Added time per call against the in-process ledger (same fleet, same script):", ""]
    for name, added in results.get("added_ms", {}).items():
        lines.append(f"- {name}: p50 {added['p50']} ms, p99 {added['p99']} ms")
    for name, memory in results.get("redis_memory", {}).items():
        lines.append(
            f"- Redis memory ({name}): {memory['used_memory_delta']} B for {memory['keys']} keys = "
            f"{memory['bytes_per_conversation']} B per conversation ({memory['calls_per_conversation']} calls each)"
        )
    lines += ["", "Recall by signal:", "", "| signal | " + " | ".join(phases) + " |", "|---" * (len(phases) + 1) + "|"]
    signals = sorted({s for p in phases.values() for s in p["recall_by_signal"]})
    for signal in signals:
        cells = []
        for phase in phases.values():
            v = phase["recall_by_signal"].get(signal)
            cells.append(f"{v['detected']}/{v['expected']}" if v else "—")
        lines.append(f"| {signal} | " + " | ".join(cells) + " |")
    for name, phase in phases.items():
        if phase["false_signals"]:
            lines.append(f"\nFalse signals in {name}: {phase['false_signals_by_name']}")
        if phase.get("ledger_stats"):
            lines.append(f"\nLedger stats in {name} (summed over workers): {phase['ledger_stats']}")
    for name, phase in phases.items():
        if "kill" in phase:
            lines.append(
                f"\nKill master ({name}): {json.dumps(phase['kill'])}; calls from the kill on: "
                f"{json.dumps(phase.get('calls_after_kill_ms'))}; recall of mistakes whose raising turn started after "
                f"the kill: {json.dumps(phase.get('after_kill'))}"
            )
    return "\n".join(lines) + "\n"
