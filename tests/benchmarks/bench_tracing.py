"""bench_loop's governed turn with tracing exporting over OTLP vs tracing off, in the same run (issue 33).

Two identical platforms (LLM peer shared, each its own Tool Pod, AER and OE on SQLite) run side by side; one
has `OTEL_EXPORTER_OTLP_ENDPOINT` set in every component, pointing at a loopback OTLP/HTTP receiver in this
process that counts the bytes it is sent (protobuf, as a collector receives them). Rounds alternate between
the two so both see the same machine load. Each execution makes 10 steps (5 model calls, 5 tool calls)
timed from inside the agent's code. Figures: per-step p50 with tracing off and on and their ratio (target:
under 10% added), the median of the rounds' own p50 ratios, the CPU time the platform's processes (OE, AER,
Tool Pod: /proc/<pid>/stat, every thread, the exporters' included) spent per step each way, and the OTLP
bytes per step. On a shared machine the latency ratio moves with everyone else's load; the CPU per step
does not (much), so it is the figure to compare across runs.

`OTEL_BSP_SCHEDULE_DELAY` is the SDK's default (5 s), what a component runs with unless the chart's
`observability.extraEnv` says otherwise; `BENCH_TRACING_SCHEDULE_DELAY_MS` measures another (e.g. 200).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.benchmarks.bench_loop import PAIRS, _platform_steps
from tests.benchmarks.bench_oe import Stack, _ms
from tests.benchmarks.bench_toolpod import _percentile
from tests.conftest import REPO_ROOT, free_port, wait_for_port

ROUNDS = 20
EXECUTIONS_PER_ROUND = 5
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# Stack.processes in start order: start_runtimes launches the Tool Pod then the AER, start_oe the OE.
COMPONENTS = ("tool", "aer", "oe")


def _cpu_by_component(stack: Stack) -> dict[str, float]:
    """User + system CPU of each of the stack's processes so far (all their threads), from /proc."""
    used: dict[str, float] = {}
    for name, proc in zip(COMPONENTS, stack.processes, strict=False):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            used[name] = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime
    return used


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver that keeps nothing but the byte count; it keeps connections open, as a
    collector does (HTTP/1.0 would make each export connect anew)."""

    protocol_version = "HTTP/1.1"
    received = 0
    requests = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        with _Receiver.lock:
            _Receiver.received += length
            _Receiver.requests += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


def _stack(tmp: Path, name: str, llm_env: dict[str, str], tracing: dict[str, str]) -> tuple[Stack, int]:
    directory = tmp / name
    directory.mkdir()
    stack = Stack(directory)
    stack.start_runtimes(tenant="tests.benchmarks.loop_tenant:app", extra={**llm_env, **tracing})
    _, oe_port = stack.start_oe({"OE_SQLITE_PATH": str(directory / "oe.sqlite3"), **tracing})
    return stack, oe_port


def main() -> None:
    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    receiver = ThreadingHTTPServer(("127.0.0.1", free_port()), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    otlp = f"http://127.0.0.1:{receiver.server_address[1]}"
    stacks: list[Stack] = []
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as tmp:
        peer_port = free_port()
        peer = subprocess.Popen(
            [sys.executable, "-m", "tests.providers.llm_peer", "--port", str(peer_port)],
            cwd=REPO_ROOT,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port("127.0.0.1", peer_port, proc=peer)
            llm_env = {
                "AGENTIC_LLM_BASE_URL": f"http://127.0.0.1:{peer_port}/v1",
                "AGENTIC_LLM_MODEL": "bench",
            }
            off, off_port = _stack(Path(tmp), "off", llm_env, {})
            stacks.append(off)
            traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp}
            delay = os.environ.get("BENCH_TRACING_SCHEDULE_DELAY_MS", "").strip()
            if delay:
                traced["OTEL_BSP_SCHEDULE_DELAY"] = delay
            on, on_port = _stack(Path(tmp), "otlp", llm_env, traced)
            stacks.append(on)
            for port in (off_port, on_port):  # warm-up
                asyncio.run(_platform_steps(port, executions=2, at_once=False))
            time.sleep(6)  # the warm-up's spans are exported (the default delay) before the count starts
            with _Receiver.lock:
                _Receiver.received = _Receiver.requests = 0
            timings: dict[str, list[float]] = {"off": [], "otlp": []}
            cpu = {"off": 0.0, "otlp": 0.0}
            cpu_parts: dict[str, dict[str, float]] = {"off": {}, "otlp": {}}
            round_ratios: list[float] = []
            cpu_ratios: list[float] = []
            by_label = {"off": (off, off_port), "otlp": (on, on_port)}
            for round_ in range(ROUNDS):
                medians: dict[str, float] = {}
                used: dict[str, float] = {}
                order = ["off", "otlp"] if round_ % 2 == 0 else ["otlp", "off"]
                for label in order:
                    stack, port = by_label[label]
                    before = _cpu_by_component(stack)
                    steps, _ = asyncio.run(
                        _platform_steps(port, executions=EXECUTIONS_PER_ROUND, at_once=False)
                    )
                    after = _cpu_by_component(stack)
                    for name in after:
                        spent = after[name] - before.get(name, after[name])
                        cpu_parts[label][name] = cpu_parts[label].get(name, 0.0) + spent
                    used[label] = sum(after.values()) - sum(before.values())
                    cpu[label] += used[label]
                    timings[label] += steps["llm"] + steps["tool"]
                    medians[label] = statistics.median(steps["llm"] + steps["tool"])
                round_ratios.append(medians["otlp"] / medians["off"])
                cpu_ratios.append(used["otlp"] / max(used["off"], 1e-9))
            # The traced stack's last spans: its processes flush them when stopped (the SDK's shutdown).
            for stack in reversed(stacks):
                stack.stop()
            time.sleep(0.5)
            with _Receiver.lock:
                received, requests = _Receiver.received, _Receiver.requests
        finally:
            for stack in reversed(stacks):
                stack.stop()
            peer.terminate()
            peer.wait(timeout=10)
            receiver.shutdown()
    steps_traced = ROUNDS * EXECUTIONS_PER_ROUND * 2 * PAIRS
    p50_off, p50_on = _percentile(timings["off"], 0.5), _percentile(timings["otlp"], 0.5)
    p99_off, p99_on = _percentile(timings["off"], 0.99), _percentile(timings["otlp"], 0.99)
    print(
        f"{steps_traced} steps each way ({ROUNDS} alternating rounds of {EXECUTIONS_PER_ROUND} executions):"
    )
    print(f"  per step p50: off {_ms(p50_off)} | OTLP {_ms(p50_on)} | ratio {p50_on / p50_off:.3f}")
    print(f"  per step p99: off {_ms(p99_off)} | OTLP {_ms(p99_on)} | ratio {p99_on / p99_off:.3f}")
    print(f"  median of the {ROUNDS} rounds' own p50 ratios: {statistics.median(round_ratios):.3f}")
    per_step_off, per_step_on = cpu["off"] / steps_traced, cpu["otlp"] / steps_traced
    print(
        f"  platform CPU per step (OE + AER + Tool Pod, all threads): off {_ms(per_step_off)} | "
        f"OTLP {_ms(per_step_on)} | ratio {per_step_on / per_step_off:.3f} "
        f"(median of the rounds' own: {statistics.median(cpu_ratios):.3f})"
    )
    for name in COMPONENTS:
        part_off = cpu_parts["off"].get(name, 0.0) / steps_traced
        part_on = cpu_parts["otlp"].get(name, 0.0) / steps_traced
        print(f"    {name:>4}: off {_ms(part_off)} | OTLP {_ms(part_on)} | added {_ms(part_on - part_off)}")
    print("  target: under 10% added at p50 (ratio < 1.10)")
    print(
        f"  trace data: {received} bytes of OTLP protobuf in {requests} exports, "
        f"{received / steps_traced:.0f} bytes per step (every process's spans, runs and requests included)"
    )
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
