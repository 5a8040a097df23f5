"""What a phase measured: recall of the scripted mistakes, false signals, call times and write lag."""

from __future__ import annotations

import statistics
from typing import Any

from fleet_dispatch import Conversation
from stats import percentile

from otel_responses.tools import scenarios


def raising_turns(reference: list[Conversation]) -> dict[tuple[str, str], int]:
    """In the single-process run: the turn of each scenario that raised each of its expected signals."""
    found: dict[tuple[str, str], int] = {}
    for conversation in reference:
        expected = scenarios.BY_NAME[conversation.scenario].raises
        for t, turn in enumerate(conversation.turns):
            for signal in turn["signals"]:
                if signal in expected:
                    found.setdefault((conversation.scenario, signal), t)
    return found


def analyse(
    conversations: list[Conversation],
    readable: dict[str, float] | None,
    where: dict[tuple[str, str], int],
    reference: dict[str, set[str]],
    kill_time: float | None = None,
) -> dict[str, Any]:
    """Recall of the scripted mistakes, false signals, call times, write lag and recall outside its window."""
    expected_total = detected = 0
    outside = outside_hit = inside = inside_hit = cross = cross_hit = 0
    after_kill = after_kill_hit = 0
    by_signal: dict[str, list[int]] = {}
    false_signals: dict[str, int] = {}
    false_turns = healthy_false = 0
    errors: dict[str, int] = {}
    seconds: list[float] = []
    lags: list[float] = []
    never = 0
    for conversation in conversations:
        scenario = scenarios.BY_NAME[conversation.scenario]
        expected = set(scenario.raises)
        allowed = expected | reference.get(conversation.scenario, set())
        raised = {s for turn in conversation.turns for s in turn["signals"]}
        if conversation.transcript_error:
            errors[conversation.scenario] = errors.get(conversation.scenario, 0) + 1
        for turn in conversation.turns:
            seconds.append(turn["seconds"])
            unexpected = [s for s in turn["signals"] if s not in allowed]
            if unexpected:
                false_turns += 1
                healthy_false += len(unexpected) if scenario.mistake is None else 0
                for signal in unexpected:
                    false_signals[signal] = false_signals.get(signal, 0) + 1
            rid = (turn["response"] or {}).get("id", "")
            if readable is not None and turn["kind"] == "create" and rid:
                when = readable.get(rid)
                if when is None:
                    never += 1
                else:
                    lags.append(when - turn["end"])
        if scenario.mistake is None:
            continue
        for signal in expected:
            hit = signal in raised
            expected_total += 1
            detected += hit
            by_signal.setdefault(signal, [0, 0])
            by_signal[signal][0] += 1
            by_signal[signal][1] += hit
            t = where.get((conversation.scenario, signal))
            if t is None or t == 0 or t >= len(conversation.turns):
                continue
            turn, parent = conversation.turns[t], conversation.turns[t - 1]
            if turn["worker"] != parent["worker"]:
                cross += 1
                cross_hit += hit
            parent_id = (parent["response"] or {}).get("id")
            ready = readable.get(parent_id) if readable is not None and parent_id else None
            if readable is not None and parent_id and (ready is None or turn["start"] < ready):
                inside += 1
                inside_hit += hit
            else:
                outside += 1
                outside_hit += hit
            if kill_time is not None and turn["start"] >= kill_time:
                after_kill += 1
                after_kill_hit += hit

    def ratio(a: int, b: int) -> float | None:
        return round(a / b, 4) if b else None

    result: dict[str, Any] = {
        "calls": len(seconds),
        "expected_signals": expected_total,
        "detected": detected,
        "recall": ratio(detected, expected_total),
        "recall_by_signal": {k: {"expected": v[0], "detected": v[1]} for k, v in sorted(by_signal.items())},
        "raising_turn_on_other_worker": {"n": cross, "detected": cross_hit, "recall": ratio(cross_hit, cross)},
        "outside_write_window": {"n": outside, "detected": outside_hit, "recall": ratio(outside_hit, outside)},
        "inside_write_window": {"n": inside, "detected": inside_hit, "recall": ratio(inside_hit, inside)},
        "false_signals": sum(false_signals.values()),
        "false_signals_on_healthy_sessions": healthy_false,
        "false_signals_by_name": false_signals,
        "turns_with_false_signals": false_turns,
        "scenario_errors": errors,
        "call_ms": {
            "p50": percentile_ms(seconds, 0.5),
            "p90": percentile_ms(seconds, 0.9),
            "p99": percentile_ms(seconds, 0.99),
            "mean": ms(statistics.fmean(seconds) if seconds else None),
        },
    }
    if readable is not None:
        result["write_lag_ms"] = {
            "n": len(lags),
            "never_readable": never,
            "p50": percentile_ms(lags, 0.5),
            "p99": percentile_ms(lags, 0.99),
            "max": ms(max(lags) if lags else None),
        }
    result["calls_with_ledger_unavailable"] = sum(
        1 for c in conversations for t in c.turns if t.get("ledger_unavailable")
    )
    if kill_time is not None:
        late = [t["seconds"] for c in conversations for t in c.turns if t["start"] >= kill_time]
        result["calls_after_kill_ms"] = {
            "n": len(late),
            "p50": percentile_ms(late, 0.5),
            "p99": percentile_ms(late, 0.99),
            "max": ms(max(late) if late else None),
        }
        result["after_kill"] = {
            "n": after_kill,
            "detected": after_kill_hit,
            "recall": ratio(after_kill_hit, after_kill),
        }
    return result


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def percentile_ms(values: list[float], fraction: float) -> float | None:
    """A percentile of seconds in milliseconds; None for no values (a phase without Redis writes has no lag)."""
    return ms(percentile(values, fraction)) if values else None
