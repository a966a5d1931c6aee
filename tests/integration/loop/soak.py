"""A bounded soak of the loop platform (issue 41): steady load through real OE, AER and Tool Pod processes
with approvals and a few faults, every component sampled at a fixed interval.

Workers run executions back to back: most make plain tool calls, every `review_every`-th makes a sensitive
`transfer` that a reviewer approves (the Tool Pod appends each one to the ledger file: the side-effect
count). The AER is SIGKILLed and started again at a third and at two thirds of the run (the OE's watchdog
restarts the runs it held). Each sample takes, per component, its RSS and open descriptors from /proc and
its event loop's live tasks from /metrics, and the OE store's size on disk. Steps' latencies come from the
audit (`duration_ms`), kept by the minute they ended in.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.integration.loop.harness import Platform

GATEWAY = "/api/v1/projects/team-a/executions/{execution_id}/resume"
TASKS_METRIC = {"oe": "agent_engine_oe_event_loop_tasks", "aer": "agent_runtime_event_loop_tasks",
                "tool": "agent_runtime_event_loop_tasks"}  # fmt: skip
PORTS = {"oe": "oe_port", "aer": "aer_port", "tool": "tool_port"}


@dataclass
class Sample:
    at_s: float
    rss_mib: dict[str, float]
    fds: dict[str, int]
    tasks: dict[str, float]
    store_mib: float


@dataclass
class SoakResult:
    samples: list[Sample] = field(default_factory=list)
    executions: int = 0
    completed: int = 0
    approved: int = 0
    failed: int = 0
    lost: int = 0
    faults: int = 0
    ledger_entries: int = 0
    # Step durations (ms) by the minute of the run in which their execution finished.
    steps_by_minute: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))

    def growth(self, warm_up_s: float) -> dict[str, dict[str, float]]:
        """Per component: RSS and descriptors at the last sample over the first sample after warm-up (%)."""
        warm = next((s for s in self.samples if s.at_s >= warm_up_s), self.samples[0])
        last = self.samples[-1]
        return {
            component: {
                "rss_pct": round(100 * (last.rss_mib[component] / warm.rss_mib[component] - 1), 1),
                "fds_pct": round(100 * (last.fds[component] / warm.fds[component] - 1), 1),
            }
            for component in warm.rss_mib
        }

    def p99(self, minutes: range) -> float:
        values = sorted(v for m in minutes for v in self.steps_by_minute.get(m, []))
        if not values:
            return float("nan")
        return values[min(len(values) - 1, int(0.99 * len(values)))]

    def summary(self, *, warm_up_s: float, window_min: int) -> dict[str, Any]:
        last_minute = max(self.steps_by_minute, default=0)
        first = range(0, window_min)
        last = range(max(0, last_minute - window_min + 1), last_minute + 1)
        return {
            "executions": self.executions,
            "completed": self.completed,
            "approved": self.approved,
            "failed": self.failed,
            "lost": self.lost,
            "faults": self.faults,
            "ledger_entries": self.ledger_entries,
            "growth_after_warm_up": self.growth(warm_up_s),
            "step_p99_ms_first": round(self.p99(first), 2),
            "step_p99_ms_last": round(self.p99(last), 2),
            "step_median_ms": round(
                statistics.median(v for vs in self.steps_by_minute.values() for v in vs), 2
            ),
            "samples": [
                {
                    "at_s": round(s.at_s),
                    "rss_mib": s.rss_mib,
                    "fds": s.fds,
                    "tasks": s.tasks,
                    "store_mib": s.store_mib,
                }
                for s in self.samples
            ],
        }


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, flags=re.MULTILINE)
    return round(int(match.group(1)) / 1024, 1) if match else 0.0


def _tasks(port: int, metric: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    match = re.search(rf"^{metric} (\S+)$", text, flags=re.MULTILINE)
    return float(match.group(1)) if match else float("nan")


def sample(platform: Platform, *, at_s: float) -> Sample:
    pids = {name: platform.processes[name].popen.pid for name in PORTS}
    store = sum(p.stat().st_size for p in (platform.tmp / "oe").glob("oe.sqlite3*"))
    return Sample(
        at_s=at_s,
        rss_mib={name: _rss_mib(pid) for name, pid in pids.items()},
        fds={name: len(list(Path(f"/proc/{pid}/fd").iterdir())) for name, pid in pids.items()},
        tasks={name: _tasks(getattr(platform, PORTS[name]), TASKS_METRIC[name]) for name in PORTS},
        store_mib=round(store / 2**20, 2),
    )


def _worker(platform: Platform, *, index: int, until: float, began: float, review_every: int,
            result: SoakResult, lock: threading.Lock) -> None:  # fmt: skip
    with platform.client() as client:
        n = 0
        while time.monotonic() < until:
            n += 1
            review = n % review_every == 0
            calls = [["word_count", {"text": f"worker {index} run {n}"}], ["shout", {"text": "soak"}]]
            if review:
                calls.append(["transfer", {"amount": 1, "to": f"w{index}-{n}"}])
            started = client.post(
                "/invoke", json={"agent": "team-a/loop", "input": {"mode": "calls", "calls": calls}}
            )
            if started.status_code != 202:
                with lock:
                    result.failed += 1
                continue
            execution = started.json()["execution_id"]
            status = _finish(client, execution, approve=review, deadline=time.monotonic() + 120)
            steps = [r["duration_ms"] for r in client.get(f"/execution/{execution}/audit").json()["records"]
                     if r.get("kind") in ("tool", "llm") and r.get("duration_ms") is not None]  # fmt: skip
            with lock:
                result.executions += 1
                minute = int((time.monotonic() - began) // 60)
                result.steps_by_minute[minute].extend(steps)
                if status == "completed":
                    result.completed += 1
                    result.approved += review
                elif status in ("failed", "cancelled"):
                    result.failed += 1
                else:
                    result.lost += 1


def _finish(client: httpx.Client, execution: str, *, approve: bool, deadline: float) -> str:
    approved = False
    while time.monotonic() < deadline:
        view = client.get(f"/execution/{execution}").json()
        if view["status"] in ("completed", "failed", "cancelled"):
            return str(view["status"])
        if view["status"] == "suspended" and approve and not approved:
            answer = client.post(GATEWAY.format(execution_id=execution), json={"decision": "approved"})
            approved = answer.status_code == 202
        time.sleep(0.05)
    return "running"


def run_soak(platform: Platform, *, duration_s: float, sample_every_s: float, workers: int = 4,
             review_every: int = 5) -> SoakResult:  # fmt: skip
    result = SoakResult()
    lock = threading.Lock()
    began = time.monotonic()
    until = began + duration_s
    threads = [
        threading.Thread(
            target=_worker,
            kwargs={
                "platform": platform,
                "index": i,
                "until": until,
                "began": began,
                "review_every": review_every,
                "result": result,
                "lock": lock,
            },
            daemon=True,
        )
        for i in range(workers)
    ]
    for thread in threads:
        thread.start()
    faults_at = [began + duration_s / 3, began + 2 * duration_s / 3]
    next_sample = began
    while time.monotonic() < until:
        now = time.monotonic()
        if now >= next_sample:
            result.samples.append(sample(platform, at_s=now - began))
            next_sample += sample_every_s
        if faults_at and now >= faults_at[0]:
            faults_at.pop(0)
            platform.processes["aer"].stop(sig=9)
            platform.start_aer()
            result.faults += 1
        time.sleep(0.2)
    for thread in threads:
        thread.join(timeout=180)
    result.samples.append(sample(platform, at_s=time.monotonic() - began))
    result.ledger_entries = len(platform.ledger.read_text().splitlines()) if platform.ledger.exists() else 0
    return result
