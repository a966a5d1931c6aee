"""The crash campaign (issue 14): a six-step execution with an approval in the middle, run once per kill
point and process; at that point the process gets SIGKILL, is started again, and the run is taken to its
end as a client would (resume when it is suspended, otherwise wait).

Kill points: every step boundary (`b0` before step 1 ... `b6` after step 6, before the callback), the middle
of every side-effect step (`m2` ... `m6`: the provider has recorded the POST and holds its answer), while
suspended, and right after a resume was accepted. Targets: the OE, the AER, the Tool Pod; with two OE
replicas on the MongoDB store, the replica doing the work at that point.

Each run is checked against the ledger provider: a key (`<execution_id>:<step>`) it saw twice is a
duplicated side effect. The figures are collected in `REPORTS` and printed at the end of the session.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import Process, free_port
from tests.crash.balancer import Balancer
from tests.integration.loop.harness import CLIENT_TOKEN, LOOP_TENANT, Platform, Tenant
from tests.providers.ledger_provider import RunningLedger

TENANT = Tenant(
    entrypoint="crash_agent:app",
    pythonpath=Path(__file__).resolve().parent / "tenant",
    bundle=LOOP_TENANT.bundle,
    tool_env=LOOP_TENANT.tool_env,
)
# Step number -> the side effect it POSTs (step 1 is a read).
EFFECTS = {2: "reserve", 3: "note", 4: "charge", 5: "ship", 6: "notify"}
APPROVAL_STEP = 4
POINTS = ("b0", "b1", "b2", "m2", "m3", "b3", "suspended", "resumed", "m4", "b4", "m5", "b5", "m6", "b6")
# The OE's AER-lost watchdog, quick enough for a campaign (a lost AER run is restarted after this).
# An AER restart on a busy 2-core machine can take seconds: the watchdog waits 3 s, then 3 s more for an
# AER it cannot reach, before an execution fails with aer_lost.
OE_TIMINGS = {"OE_WATCHDOG_INTERVAL_S": "0.5", "OE_AER_LOST_AFTER_S": "3", "OE_TOOL_POD_RETRY_S": "15"}
RUN_TIMEOUT_S = 120.0


@dataclass
class RunReport:
    campaign: str
    target: str
    point: str
    execution_id: str
    status: str
    duplicates: int
    missing: list[str]
    told_failed: list[str]  # steps the agent was told failed (their effect may or may not have happened)
    runs: int
    seconds: float
    error: str | None = None
    why: list[str] = field(default_factory=list)  # what the agent was told, for the steps it was told failed


REPORTS: list[RunReport] = []
EXTRA_FIGURES: list[str] = []


class Spawner:
    """Subprocesses for a whole module (the tests' `spawn` fixture is per test): all stopped at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Process] = []

    def __call__(
        self, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, name: str = ""
    ) -> Process:
        log_path = Path(tempfile.mkstemp(prefix=f"{name or 'proc'}-", suffix=".log", dir=self.directory)[1])
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        proc = Process(argv=argv, popen=popen, log_path=log_path, name=name)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            proc.stop(timeout=5)


@dataclass
class CrashPlatform(Platform):
    """One OE (SQLite) with its AER and Tool Pod; `crash(name)` is SIGKILL and a start again."""

    campaign: str = "sqlite"

    def start_oe(self, *, extra: dict[str, str] | None = None) -> None:
        super().start_oe(extra={**OE_TIMINGS, **(extra or {})})

    def crash(self, name: str) -> None:
        self.processes[name].stop(sig=signal.SIGKILL)
        {"oe": self.start_oe, "aer": self.start_aer, "tool": self.start_tool_pod}[name]()

    def worker(self, point: str) -> str:
        """Which process "the OE" is at this point (one OE: always the same)."""
        return "oe"

    def retrying(self) -> httpx.Client:
        """A client that sends again when the OE it talks to is restarting, as a client would."""
        transport = httpx.HTTPTransport(retries=5)
        return httpx.Client(
            base_url=self.client_url,
            headers={"authorization": f"Bearer {CLIENT_TOKEN}"},
            timeout=30,
            transport=transport,
        )

    @property
    def client_url(self) -> str:
        return self.oe_url

    def client(self, token: str = CLIENT_TOKEN) -> httpx.Client:
        return httpx.Client(
            base_url=self.client_url, headers={"authorization": f"Bearer {token}"}, timeout=30
        )


@dataclass
class ReplicatedPlatform(CrashPlatform):
    """Two OE replicas on one MongoDB database (FerretDB), behind a balancer the AER talks to.

    The AER's calls go to replica `oe-a` while it is up (then to `oe-b`); clients (invoke, resume, reads)
    talk to `oe-b`, whose watchdog and run starts work alongside. So at every point the replica doing the
    run's work is `oe-a`, except right after a resume, where it is `oe-b`, which accepted it.
    """

    mongodb_uri: str = ""
    database: str = field(default_factory=lambda: f"crash_{uuid.uuid4().hex[:12]}")
    campaign: str = "mongodb-2-replicas"
    oe_b_port: int = field(default_factory=free_port)
    balancer: Balancer | None = None

    @property
    def oe_url(self) -> str:
        assert self.balancer is not None
        return self.balancer.url

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.oe_b_port}"

    def start(self) -> ReplicatedPlatform:
        self.balancer = Balancer([self.oe_port, self.oe_b_port])
        self.balancer.start()
        super().start()
        return self

    def _mongo_env(self) -> dict[str, str]:
        return {
            **OE_TIMINGS,
            "OE_STORE_TYPE": "mongodb",
            "OE_MONGODB_URI": self.mongodb_uri,
            "OE_MONGODB_DATABASE": self.database,
        }

    def start_oe(self, *, extra: dict[str, str] | None = None) -> None:
        self.start_replica("oe-a")
        self.start_replica("oe-b")

    def start_replica(self, name: str) -> None:
        port = self.oe_port if name == "oe-a" else self.oe_b_port
        saved, self.oe_port = self.oe_port, port
        try:
            Platform.start_oe(self, extra=self._mongo_env())
        finally:
            self.oe_port = saved
        self.processes[name] = self.processes.pop("oe")

    def crash(self, name: str) -> None:
        if name.startswith("oe-"):
            self.processes[name].stop(sig=signal.SIGKILL)
            self.start_replica(name)
            return
        super().crash(name)

    def worker(self, point: str) -> str:
        return "oe-b" if point == "resumed" else "oe-a"

    def stop(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()


def _wait_for(what: str, condition: Any, *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.02)


def resume(platform: CrashPlatform, execution_id: str, decision: str = "approved") -> int:
    """The gateway resume, sent again on a lost connection; 409 after a lost 202 means it went through."""
    path = f"/api/v1/projects/team-a/executions/{execution_id}/resume"
    with platform.retrying() as client:
        for _ in range(50):
            try:
                response = client.post(path, json={"decision": decision})
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            return response.status_code
    raise TimeoutError("the OE never answered the resume")


def run_point(platform: CrashPlatform, provider: RunningLedger, *, target: str, point: str) -> RunReport:
    """One execution, with `target` killed at `point` and started again; returns what happened."""
    order = uuid.uuid4().hex[:12]
    gates = platform.tmp / "gates" / order
    gates.mkdir(parents=True)
    kind, step = point[0], int(point[1:]) if point[1:].isdigit() else -1
    for boundary in range(7):
        if not (kind == "b" and boundary == step):
            (gates / f"go-{boundary}").touch()
    hold = provider.hold(EFFECTS[step], order) if kind == "m" else None
    process = platform.worker(point) if target == "oe" else target

    def strike() -> None:
        if kind == "b":
            _wait_for(f"boundary {step}", (gates / f"at-{step}").exists)
        elif hold is not None:
            _wait_for(f"the {EFFECTS[step]} POST", hold.reached.is_set)
        platform.crash(process)
        if kind == "b":
            (gates / f"go-{step}").touch()
        elif hold is not None:
            hold.release()

    started = time.monotonic()
    execution_id = platform.invoke({"provider": provider.url, "order": order, "gates": str(gates)})
    error = None
    try:
        if kind in "bm" and step < APPROVAL_STEP:
            strike()
        view = platform.wait(execution_id, "suspended", "completed", "failed", timeout=RUN_TIMEOUT_S)
        if view["status"] == "suspended":
            if point == "suspended":
                strike()
            status = resume(platform, execution_id)
            if status != 202:
                raise AssertionError(f"resume answered {status}")
            if point == "resumed":
                strike()
            if kind in "bm" and step >= APPROVAL_STEP:
                strike()
            view = platform.wait(execution_id, "completed", "failed", timeout=RUN_TIMEOUT_S)
    except (TimeoutError, AssertionError) as exc:
        error = str(exc)[:2000]
        if hold is not None:
            hold.release()
        with contextlib.suppress(Exception), platform.client() as client:
            view = client.get(f"/execution/{execution_id}").json()
    seen = {effect.key for effect in provider.effects(order)}
    results = (view.get("result") or {}).get("results") or []
    report = RunReport(
        campaign=platform.campaign,
        target=target,
        point=point,
        execution_id=execution_id,
        status=view.get("status", "?"),
        duplicates=provider.duplicates(order),
        missing=[name for number, name in EFFECTS.items() if f"{execution_id}:{number}" not in seen],
        told_failed=[
            f"{name}:{outcome['error']}"
            for name, outcome in zip(("lookup", *EFFECTS.values()), results, strict=False)
            if isinstance(outcome, dict) and "error" in outcome
        ],
        runs=int(view.get("runs", 0)),
        seconds=time.monotonic() - started,
        error=error,
        why=[
            str(outcome.get("why")) for outcome in results if isinstance(outcome, dict) and "error" in outcome
        ],
    )
    REPORTS.append(report)
    return report


def double_resume_trial(platform: CrashPlatform, provider: RunningLedger, *, trials: int) -> dict[str, int]:
    """Suspend `trials` executions, then send each two conflicting resumes at once (approved to one OE,
    rejected to the other where there are two): how many were accepted twice, and how often the charge ran."""
    other_url = _other_url(platform)
    runs = _suspended_runs(platform, provider, trials)
    both_accepted = 0
    for _, execution_id in runs:
        path = f"/api/v1/projects/team-a/executions/{execution_id}/resume"
        answers = _at_once([(platform.client_url, path, "approved"), (other_url, path, "rejected")])
        both_accepted += answers.count(202) == 2
    charged_twice = 0
    unfinished = 0
    for order, execution_id in runs:
        view = platform.wait(execution_id, "completed", "failed", timeout=RUN_TIMEOUT_S)
        unfinished += view["status"] != "completed"
        charges = sum(1 for effect in provider.effects(order) if effect.key == f"{execution_id}:4")
        charged_twice += charges > 1
    return {
        "trials": trials,
        "both_accepted": both_accepted,
        "charged_twice": charged_twice,
        "duplicates": sum(provider.duplicates(order) for order, _ in runs),
        "not_completed": unfinished,
    }


def cancel_race_trial(platform: CrashPlatform, provider: RunningLedger, *, trials: int) -> dict[str, int]:
    """Suspend `trials` executions, then send a resume to one OE and a cancel to the other at once: a cancel
    answered 200 must leave the execution cancelled (a resume may come first, then the cancel wins)."""
    other_url = _other_url(platform)
    runs = _suspended_runs(platform, provider, trials)
    lost_cancels = 0
    charged_twice = 0
    for order, execution_id in runs:
        resume_path = f"/api/v1/projects/team-a/executions/{execution_id}/resume"
        answers = _at_once(
            [
                (platform.client_url, resume_path, "approved"),
                (other_url, f"/execution/{execution_id}/cancel", ""),
            ]
        )
        view = platform.wait(execution_id, "completed", "failed", "cancelled", timeout=RUN_TIMEOUT_S)
        time.sleep(0.5)  # a run the resume started may still be ending
        with platform.client() as client:
            view = client.get(f"/execution/{execution_id}").json()
        lost_cancels += 200 in answers and view["status"] != "cancelled"
        charges = sum(1 for effect in provider.effects(order) if effect.key == f"{execution_id}:4")
        charged_twice += charges > 1
    return {"trials": trials, "lost_cancels": lost_cancels, "charged_twice": charged_twice}


def _other_url(platform: CrashPlatform) -> str:
    """Where the second request of a race goes: another replica (a third one where there are three)."""
    named: str | None = getattr(platform, "other_url", None)
    if named:
        return named
    return platform.oe_url if isinstance(platform, ReplicatedPlatform) else platform.client_url


def _suspended_runs(platform: CrashPlatform, provider: RunningLedger, count: int) -> list[tuple[str, str]]:
    runs = []
    for _ in range(count):
        order = uuid.uuid4().hex[:12]
        gates = platform.tmp / "gates" / order
        gates.mkdir(parents=True)
        for boundary in range(7):
            (gates / f"go-{boundary}").touch()
        runs.append((order, platform.invoke({"provider": provider.url, "order": order, "gates": str(gates)})))
    for _, execution_id in runs:
        assert platform.wait(execution_id, timeout=RUN_TIMEOUT_S)["status"] == "suspended"
    return runs


def _at_once(requests: list[tuple[str, str, str]]) -> list[int]:
    """POST each `(base URL, path, decision)` from its own thread, all released together."""
    answers: list[int] = []
    barrier = threading.Barrier(len(requests))

    def send(url: str, path: str, decision: str) -> None:
        with httpx.Client(base_url=url, headers={"authorization": f"Bearer {CLIENT_TOKEN}"}) as client:
            barrier.wait()
            body = {"decision": decision} if decision else None
            answers.append(client.post(path, json=body).status_code)

    threads = [threading.Thread(target=send, args=request) for request in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def summary() -> list[str]:
    """The campaign's figures, one line per campaign and target, then the totals."""
    lines = []
    groups: dict[tuple[str, str], list[RunReport]] = {}
    for report in REPORTS:
        groups.setdefault((report.campaign, report.target), []).append(report)
    for (campaign, target), reports in groups.items():
        completed = sum(r.status == "completed" for r in reports)
        told = [f"{r.point}:{'/'.join(r.told_failed)}" for r in reports if r.told_failed]
        lines.append(
            f"{campaign:<20} kill {target:<5} runs {len(reports):>3}  completed {completed:>3}  "
            f"duplicated side effects {sum(r.duplicates for r in reports)}  "
            f"missing {sum(len(r.missing) for r in reports)}  "
            f"{sum(r.seconds for r in reports):6.1f} s"
            + (f"  told failed (effect ran once): {', '.join(told)}" if told else "")
        )
        for r in reports:
            if r.status != "completed" or r.duplicates or r.error:
                lines.append(f"    {r.point}: {r.status}, {r.duplicates} duplicates, {r.error or ''}")
    if REPORTS:
        lines.append(
            f"{'all':<20} runs {len(REPORTS)}, completed {sum(r.status == 'completed' for r in REPORTS)}, "
            f"duplicated side effects {sum(r.duplicates for r in REPORTS)}, "
            f"{sum(r.seconds for r in REPORTS):.1f} s in runs"
        )
    return lines + EXTRA_FIGURES


# What each exactly-once mechanism logs when it acts, and the name the figures give it.
_MECHANISMS = {
    "calls a restarted OE re-drove that the Tool Pod answered from its memory": (
        "was already run",
        "was already running",
    ),
    "/tool/execute resent by the AER while the OE was away": ("(step",),
    "local results and callbacks resent by the AER": ("not acknowledged",),
    "runs the watchdog started again after their AER lost them": ("no longer runs it; starting it again",),
}


def mechanism_figures(spawner: Spawner, campaign: str) -> str:
    """How often each mechanism acted during a campaign, counted in every process's log."""
    logs = "\n".join(proc.output() for proc in spawner.started)
    counts = []
    for name, needles in _MECHANISMS.items():
        lines = [line for line in logs.splitlines() if any(needle in line for needle in needles)]
        if name.startswith("/tool/execute"):
            lines = [line for line in lines if "not answered" in line]
        counts.append(f"{name}: {len(lines)}")
    return f"{campaign}: " + "; ".join(counts)


@contextlib.contextmanager
def module_spawner() -> Iterator[Spawner]:
    with tempfile.TemporaryDirectory(prefix="crash-") as tmp:
        spawner = Spawner(Path(tmp))
        try:
            yield spawner
        finally:
            spawner.stop_all()


def show_outputs(platform: CrashPlatform, limit: int = 6000) -> str:
    return "\n".join(
        f"----- {name} -----\n{proc.output()[-limit:]}" for name, proc in platform.processes.items()
    )
