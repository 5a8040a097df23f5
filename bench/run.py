"""The benchmark of otel_responses against the bare client and three peer instrumentations.

    .venv/bin/python bench/run.py            # or any venv with otel-responses, openai, opentelemetry-sdk

Every subject runs in its own process; the peers each in their own virtualenv under
``~/.cache/otel-responses-bench/<name>`` (created here when missing, with the same ``openai`` and
``opentelemetry-sdk`` versions as the running interpreter). The runner interleaves short bursts of every subject,
round after round, so that a slow minute of a shared machine hits every subject alike. Then it measures this
package's memory over 100,000 calls and profiles its hot path. Results: ``bench/results/latest.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from stats import percentile

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker.py"
CACHE = Path(os.environ.get("OTEL_RESPONSES_BENCH_CACHE", Path.home() / ".cache" / "otel-responses-bench"))
OURS = "otel_responses"
REDIS_URL_ENV = "OTEL_RESPONSES_BENCH_REDIS_URL"  # as in worker.py
BARE = "bare"
# subject -> (venv name, distribution to install, module to import); None: the running interpreter
PEERS: dict[str, tuple[str, str, str]] = {
    "genai_openai": (
        "genai",
        "opentelemetry-instrumentation-genai-openai",
        "opentelemetry.instrumentation.genai.openai",
    ),
    "traceloop": ("traceloop", "opentelemetry-instrumentation-openai", "opentelemetry.instrumentation.openai"),
    "openinference": ("openinference", "openinference-instrumentation-openai", "openinference.instrumentation.openai"),
}
REDIS = f"{OURS}_redis"  # our instrumentation with the shared ledger on a local redis-server
# litellm.responses() with litellm's instrumentor, in a virtualenv of its own with litellm and this checkout: its
# paired figure is the added time per call through litellm (its own baseline is litellm's, not the bare SDK's).
LITELLM = f"{OURS}_litellm"
SAMPLED = f"{OURS}_sampled"  # our instrumentation under a 10 % trace-id ratio sampler
LITELLM_PIN = "litellm==1.110.2"
SUBJECTS = (BARE, OURS, f"{OURS}_strict", SAMPLED, REDIS, LITELLM, *PEERS)
# Asked for by name only (--subjects): ours with a LoggerProvider given to instrument() (the signals' log events have
# a taker), and ours at another checkout's code (--baseline: that checkout's venv runs the `otel_responses` worker).
LOGS = f"{OURS}_logs"
BASELINE = f"{OURS}_baseline"
# Ours emitting the latest GenAI conventions' names (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental).
LATEST = f"{OURS}_latest"
EXTRA_SUBJECTS = (LOGS, LATEST, BASELINE)
WORKLOADS = ("short", "stream", "replay_10", "replay_100", "replay_1000", "replay_10000")
HUGE = "replay_10000"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- environments ------------------------------------------------------------------------------------------


def ensure_venv(subject: str) -> tuple[str | None, str | None]:
    """The interpreter of a peer's virtualenv, created and installed if missing; or (None, why it failed)."""
    if subject == LITELLM:
        return _litellm_venv()
    name, dist, module = PEERS[subject]
    home = CACHE / name
    python = home / "bin" / "python"
    pins = [f"openai=={metadata.version('openai')}", f"opentelemetry-sdk=={metadata.version('opentelemetry-sdk')}"]
    stamp = home / "bench-installed.txt"
    wanted = " ".join([*pins, dist])
    if not stamp.exists() or stamp.read_text() != wanted:
        log(f"installing {wanted} into {home}")
        venv.create(home, with_pip=True, clear=True)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *pins, dist], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            return None, f"pip install failed: {done.stderr.strip().splitlines()[-1:]}"
        stamp.write_text(wanted)
    probe = subprocess.run([str(python), "-c", f"import {module}, openai"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return None, f"import failed: {probe.stderr.strip().splitlines()[-1:]}"
    return str(python), None


def _litellm_venv() -> tuple[str | None, str | None]:
    """litellm and this checkout (editable: the code measured is the working tree's) beside the pinned SDKs."""
    home = CACHE / "litellm"
    python = home / "bin" / "python"
    pins = [f"openai=={metadata.version('openai')}", f"opentelemetry-sdk=={metadata.version('opentelemetry-sdk')}"]
    wanted = " ".join([*pins, LITELLM_PIN, str(HERE.parent)])
    stamp = home / "bench-installed.txt"
    if not stamp.exists() or stamp.read_text() != wanted:
        log(f"installing {wanted} into {home}")
        venv.create(home, with_pip=True, clear=True)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *pins, LITELLM_PIN, "-e", str(HERE.parent)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return None, f"pip install failed: {done.stderr.strip().splitlines()[-1:]}"
        stamp.write_text(wanted)
    return str(python), None


# -- the interleaved timing --------------------------------------------------------------------------------


@dataclass
class Process:
    subject: str
    popen: subprocess.Popen[str]
    versions: dict[str, str]
    shapes: dict[str, Any] = field(default_factory=dict)
    total: dict[str, list[int]] = field(default_factory=dict)
    net: dict[str, list[int]] = field(default_factory=dict)
    cpu: dict[str, list[int]] = field(default_factory=dict)
    # the same process with its instrumentation switched off (paired figure)
    off_net: dict[str, list[int]] = field(default_factory=dict)
    off_cpu: dict[str, list[int]] = field(default_factory=dict)
    off: str | None = None  # how the worker calls without the instrumentation: "bypass", "toggle" or None
    error: str | None = None

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        stdin: IO[str] = self.popen.stdin  # type: ignore[assignment]
        stdout: IO[str] = self.popen.stdout  # type: ignore[assignment]
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"{self.subject} worker died")
        answer: dict[str, Any] = json.loads(line)
        return answer


def start(subject: str, python: str) -> Process:
    worker_subject = OURS if subject == BASELINE else subject  # the baseline's own package, as our plain subject
    popen = subprocess.Popen(
        [python, str(WORKER), worker_subject, "--mode", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        # The baseline's checkout is read, never written (no bytecode files left in it).
        env={**os.environ, "PYTHONHASHSEED": "0", **({"PYTHONDONTWRITEBYTECODE": "1"} if subject == BASELINE else {})},
    )
    line = popen.stdout.readline() if popen.stdout else ""
    if not line:
        popen.wait()
        return Process(subject, popen, {}, error=f"worker exited with {popen.returncode} before it was ready")
    hello = json.loads(line)
    return Process(subject, popen, hello["versions"])


def timing(processes: list[Process], workloads: list[str], seconds: float, rounds: int) -> None:
    """Bursts of every process, interleaved round after round; a subject's ``seconds`` are shared among its
    processes."""
    share = {p.subject: sum(1 for q in processes if q.subject == p.subject) for p in processes}
    live = [p for p in processes if p.error is None]
    for process in live:
        if process.subject != BARE:
            process.off = process.ask({"op": "off"})["off"]
            how = process.off or "nothing: no paired figure"
            log(f"  {process.subject}: calls without the instrumentation by {how}")
    for workload in workloads:
        huge = workload == HUGE
        per_call: dict[int, float] = {}
        for process in live:
            try:
                warm = 1 if huge else 2 if workload == "replay_1000" else 5
                process.shapes[workload] = process.ask({"op": "warm", "workload": workload, "n": warm})
                if not huge:  # one call of 10,000 items is a burst of its own
                    probe = process.ask({"op": "burst", "workload": workload, "n": 1 if warm == 2 else 3})
                    per_call[id(process)] = min(probe["total_ns"])
            except Exception as error:
                process.error = f"{workload}: {type(error).__name__}: {error}"
        live = [p for p in live if p.error is None]
        workload_rounds = max(1, rounds - 3) if huge else rounds
        for number in range(workload_rounds):
            order = live[number % len(live) :] + live[: number % len(live)]
            for process in order:
                budget = seconds / workload_rounds / share[process.subject]
                n = 1 if huge else max(1, round(budget * 1e9 / per_call[id(process)]))
                answer = process.ask({"op": "burst", "workload": workload, "n": n})
                process.total.setdefault(workload, []).extend(answer["total_ns"])
                process.net.setdefault(workload, []).extend(answer["net_ns"])
                process.cpu.setdefault(workload, []).extend(answer["cpu_ns"])
                process.off_net.setdefault(workload, []).extend(answer["off_net_ns"])
                process.off_cpu.setdefault(workload, []).extend(answer["off_cpu_ns"])
        for process in live:
            median = statistics.median(process.total[workload]) / 1e3
            log(f"  {workload:13} {process.subject:22} median {median:12.1f} us")


def stats(processes: list[Process], workload: str) -> dict[str, Any]:
    """One subject's figures for one workload: medians over the samples of all its processes; the paired added
    time is the median of each process's own (see ``_paired``)."""
    process = processes[0]
    total = [v for p in processes for v in p.total[workload]]
    net = [v for p in processes for v in p.net[workload]]
    cpu = [v for p in processes for v in p.cpu[workload]]
    return {
        "n": len(total),
        "median_us": percentile(total, 0.5) / 1e3,
        "p90_us": percentile(total, 0.9) / 1e3,
        "net_median_us": percentile(net, 0.5) / 1e3,
        "net_p90_us": percentile(net, 0.9) / 1e3,
        "net_cpu_median_us": percentile(cpu, 0.5) / 1e3,
        "net_cpu_p90_us": percentile(cpu, 0.9) / 1e3,
        **_paired(processes, workload),
        **process.shapes.get(workload, {}),
    }


def _paired(processes: list[Process], workload: str) -> dict[str, Any]:
    """Added time as on-minus-off medians within each process (net of the SDK transform), then the median over the
    subject's processes. One process's figure depends on that process (its memory layout, say: tens of µs on a
    stream); several processes, each paired on its own, tell the instrumentation from the process."""
    wall: list[float] = []
    cpu: list[float] = []
    n_off = 0
    for process in processes:
        off_net, off_cpu = process.off_net.get(workload), process.off_cpu.get(workload)
        if not off_net or not off_cpu:
            continue
        n_off += len(off_net)
        wall.append((percentile(process.net[workload], 0.5) - percentile(off_net, 0.5)) / 1e3)
        cpu.append((percentile(process.cpu[workload], 0.5) - percentile(off_cpu, 0.5)) / 1e3)
    if not wall:
        return {}
    return {
        "paired_n_off": n_off,
        "paired_added_us": statistics.median(wall),
        "paired_cpu_added_us": statistics.median(cpu),
        "paired_by_process_us": [round(v, 1) for v in wall],
        "paired_cpu_by_process_us": [round(v, 1) for v in cpu],
    }


# -- memory and profile ------------------------------------------------------------------------------------


def one_shot(python: str, subject: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([python, str(WORKER), subject, *args], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0 or not done.stdout:
        return {"error": f"worker exited with {done.returncode}"}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# -- report ------------------------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    found = {"python": platform.python_version(), "platform": platform.platform()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in lscpu.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "CPU(s)"):
                found[key.strip()] = value.strip()
    except OSError:
        pass
    return found


def render(results: dict[str, Any]) -> str:
    table = results["timing"]
    rendered = [s for s in (*SUBJECTS, *EXTRA_SUBJECTS) if s in table]
    lines = [f"Machine: {results['machine']}", ""]
    lines.append(
        "| workload | subject | n | median µs | p90 µs | added µs | x bare | net median µs | net added µs "
        "| net CPU median µs | net CPU added µs |"
    )
    lines.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for workload in results["workloads"]:
        bare = table.get(BARE, {}).get(workload)
        for subject in (*SUBJECTS, *EXTRA_SUBJECTS):
            row = table.get(subject, {}).get(workload)
            if row is None:
                continue
            added = row["median_us"] - bare["median_us"] if bare else float("nan")
            ratio = row["median_us"] / bare["median_us"] if bare else float("nan")
            net_added = row["net_median_us"] - bare["net_median_us"] if bare else float("nan")
            cpu_added = row["net_cpu_median_us"] - bare["net_cpu_median_us"] if bare else float("nan")
            lines.append(
                f"| {workload} | {subject} | {row['n']} | {row['median_us']:.0f} | {row['p90_us']:.0f} | "
                f"{added:+.0f} | {ratio:.2f} | {row['net_median_us']:.0f} | {net_added:+.0f} | "
                f"{row['net_cpu_median_us']:.0f} | {cpu_added:+.0f} |"
            )
    lines += [
        "",
        "Paired: added time in the same process, instrumentation on minus off (net of the SDK transform, medians, µs;"
        " with several processes per subject, the median of theirs and, in brackets, the lowest and highest):",
        "",
        "| workload | " + " | ".join(s for s in rendered if s != BARE) + " |",
        "|---|" + "--:|" * len([s for s in rendered if s != BARE]),
    ]
    for workload in results["workloads"]:
        cells = []
        for subject in rendered:
            if subject == BARE:
                continue
            row = table.get(subject, {}).get(workload, {})
            wall, cpu = row.get("paired_added_us"), row.get("paired_cpu_added_us")
            spread = row.get("paired_by_process_us") or []
            span = f" [{min(spread):+.0f}…{max(spread):+.0f}]" if len(spread) > 1 else ""
            cells.append(f"{wall:+.0f} (CPU {cpu:+.0f}){span}" if wall is not None and cpu is not None else "—")
        lines.append(f"| {workload} | " + " | ".join(cells) + " |")
    for basis, title in (
        ("paired", "paired added wall time"),
        ("net", "added wall time (against the bare process)"),
        ("net_cpu", "added process CPU time, every thread (against the bare process)"),
    ):
        lines += ["", f"Ratio of otel_responses' {title} to each peer's (net of the SDK transform, medians):", ""]
        lines.append("| workload | " + " | ".join(PEERS) + " |")
        lines.append("|---|" + "--:|" * len(PEERS))
        for workload in results["workloads"]:
            cells = []
            for peer in PEERS:
                ratio = results["ratios"].get(basis, {}).get(workload, {}).get(peer)
                cells.append(f"{ratio:.2f}" if isinstance(ratio, float) else "—")
            lines.append(f"| {workload} | " + " | ".join(cells) + " |")
    if results.get("slope_us_per_1000"):
        lines += ["", f"otel_responses cost per 1,000 replayed items: {results['slope_us_per_1000']}"]
    if results.get("errors"):
        lines += ["", "Subjects that could not run: " + json.dumps(results["errors"])]
    return "\n".join(lines) + "\n"


def ratios_and_slope(results: dict[str, Any]) -> None:
    table = results["timing"]
    bare = table.get(BARE, {})
    results["ratios"] = {}
    for basis in ("paired", "net", "net_cpu"):
        ratios: dict[str, dict[str, float | None]] = {}
        for workload in results["workloads"]:
            ours = _added(table, bare, OURS, workload, basis)
            if ours is None:
                continue
            ratios[workload] = {}
            for peer in PEERS:
                theirs = _added(table, bare, peer, workload, basis)
                if theirs is not None:
                    ratios[workload][peer] = ours / theirs if theirs > 0 else None
        results["ratios"][basis] = ratios
    if all(w in table.get(OURS, {}) for w in ("replay_1000", HUGE)):
        slopes = {}
        for key in ("median_us", "net_median_us", "net_cpu_median_us"):
            added = {w: table[OURS][w][key] - bare[w][key] for w in ("replay_1000", HUGE)}
            slopes[key] = round((added[HUGE] - added["replay_1000"]) / 9, 1)
        results["slope_us_per_1000"] = slopes


def _added(table: dict[str, Any], bare: dict[str, Any], subject: str, workload: str, basis: str) -> float | None:
    row = table.get(subject, {}).get(workload)
    if row is None:
        return None
    if basis == "paired":
        value = row.get("paired_added_us")
        return float(value) if value is not None else None
    if workload not in bare:
        return None
    key = f"{basis}_median_us"
    return float(row[key] - bare[workload][key])


@contextlib.contextmanager
def redis_server() -> Iterator[str | None]:
    """A throwaway redis-server on 127.0.0.1 for the shared-ledger subject; None when it is not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as workdir:
        server = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.time() + 10
            while time.time() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
                time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            server.terminate()
            server.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per subject and workload")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per workload (10,000 items: 3 fewer)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--subjects", default=",".join(SUBJECTS))
    parser.add_argument("--memory-calls", type=int, default=100_000)
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: timing, memory, profile")
    parser.add_argument(
        "--processes", type=int, default=3, help="worker processes per subject, sharing its timed seconds"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument(
        "--baseline",
        help=f"the python of a venv with another checkout of otel-responses (say, main's): subject {BASELINE}",
    )
    args = parser.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    subjects = [s for s in args.subjects.split(",") if s]
    skip = set(args.skip.split(","))
    started = time.time()
    results: dict[str, Any] = {"machine": machine(), "workloads": workloads, "errors": {}, "versions": {}}
    results["settings"] = {
        "seconds": args.seconds,
        "rounds": args.rounds,
        "processes": args.processes,
        "memory_calls": args.memory_calls,
    }

    if "timing" not in skip:
        with redis_server() as redis_url:
            if redis_url is None and REDIS in subjects:
                subjects.remove(REDIS)
                results["errors"][REDIS] = "redis-server is not installed"
            if redis_url is not None:
                os.environ[REDIS_URL_ENV] = redis_url
            processes = []
            for subject in subjects:
                local = subject not in PEERS and subject not in (LITELLM, BASELINE)
                if subject == BASELINE:
                    python, why = (args.baseline, None) if args.baseline else (None, "--baseline was not given")
                else:
                    python, why = (sys.executable, None) if local else ensure_venv(subject)
                if python is None:
                    results["errors"][subject] = why
                    continue
                for _ in range(max(1, args.processes)):
                    process = start(subject, python)
                    processes.append(process)
                results["versions"][subject] = process.versions
            timing(processes, workloads, args.seconds, args.rounds)
            for process in processes:
                if process.popen.stdin:
                    process.popen.stdin.close()
                process.popen.wait()
        results["timing"] = {}
        for subject in dict.fromkeys(p.subject for p in processes):
            mine = [p for p in processes if p.subject == subject]
            failed = [p.error for p in mine if p.error is not None]
            if failed:
                results["errors"][subject] = failed[0]
            mine = [p for p in mine if p.error is None] or mine
            done = [w for w in workloads if all(w in p.total for p in mine)]
            results["timing"][subject] = {w: stats(mine, w) for w in done}
        ratios_and_slope(results)
    if "memory" not in skip:
        log("memory: otel_responses, then the bare client")
        results["memory"] = {
            OURS: one_shot(sys.executable, OURS, "--mode", "memory", "--calls", str(args.memory_calls)),
            # the bare client, for comparison, over the first quarter
            BARE: one_shot(sys.executable, BARE, "--mode", "memory", "--calls", str(args.memory_calls // 4)),
        }
    if "profile" not in skip:
        log("profile: otel_responses")
        results["profile"] = one_shot(
            sys.executable, OURS, "--mode", "profile", "--workloads", "short,replay_1000", "--seconds", "8"
        )
    results["elapsed_s"] = round(time.time() - started)
    args.out.mkdir(exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(results, indent=1))
    if "timing" in results:
        text = render(results)
        (args.out / "latest.md").write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
