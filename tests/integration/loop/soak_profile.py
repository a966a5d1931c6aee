"""Where a component's memory goes under the soak's load: tracemalloc snapshots of one loopback process.

    python -m tests.integration.loop.soak_profile [--component tool] [--minutes 6] [--every 60] [--top 15]

Runs the soak's load (tests/integration/loop/soak.py: real OE, AER and Tool Pod processes on loopback, the
AER killed at a third and two thirds) with the chosen component's launcher started under tracemalloc (12
frames, from its first import: slower, so the figures are not the soak's); after `--warm-up` seconds and
then every `--every` seconds a SIGUSR1 makes it write a snapshot. Prints, per snapshot, RSS and traced
bytes, then the allocation sites that grew most between the first snapshot and the last, by traceback. A
diagnostic for a soak's growth, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

from tests.conftest import Process
from tests.integration.loop.harness import LLM_KEY, Platform
from tests.integration.loop.soak import _rss_mib, run_soak
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

# Run in the profiled process before the launcher: tracing from the start (a cache bounded by count, whose
# entries outlive any window, would otherwise read as growth while traced entries replace untraced ones),
# 12 frames; each SIGUSR1 writes a snapshot to $SOAK_PROFILE_DIR/N.snap.
BOOT = """
import itertools, os, runpy, signal, tracemalloc
tracemalloc.start(12)
_n = itertools.count()
def _dump(*_):
    tracemalloc.take_snapshot().dump(os.path.join(os.environ["SOAK_PROFILE_DIR"], f"{next(_n)}.snap"))
signal.signal(signal.SIGUSR1, _dump)
runpy.run_module("agent_runtime.launcher", run_name="__main__", alter_sys=True)
"""


def _spawn_in(directory: Path, profiled: str) -> Any:
    def spawn(argv: list[str], *, env: dict[str, str] | None = None, name: str = "", **_: object) -> Process:
        import subprocess

        if name == profiled:
            argv = [sys.executable, "-c", BOOT]
            env = {**(env or {}), "SOAK_PROFILE_DIR": str(directory)}
        log_path = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".log", dir=directory)[1])
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        return Process(argv=argv, popen=popen, log_path=log_path, name=name)

    return spawn


class _TracedPlatform(Platform):
    """The loop platform, whose profiled component may take its time to start under tracemalloc."""

    def _launch(self, env: dict[str, str], *, port: int, timeout: float = 30) -> Process:
        return super()._launch(env, port=port, timeout=300)


def _snapshot(platform: Platform, *, component: str, directory: Path, index: int) -> Path:
    path = directory / f"{index}.snap"
    os.kill(platform.processes[component].popen.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > 0:
            size = -1
            while size != path.stat().st_size:  # written in one go, but wait until it stops growing
                size = path.stat().st_size
                time.sleep(0.5)
            return path
        time.sleep(0.2)
    raise TimeoutError(f"{component} wrote no snapshot {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--component", default="tool", choices=["tool", "oe", "aer"])
    parser.add_argument("--minutes", type=float, default=6.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between snapshots")
    parser.add_argument("--warm-up", type=float, default=120.0, help="seconds before the first snapshot")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="soak-profile-"))
    with running_llm_peer(api_key=LLM_KEY) as peer, running_echo_provider() as provider:
        platform = _TracedPlatform(
            tmp=directory, spawn=_spawn_in(directory, args.component), llm_base_url=peer.base_url,
            provider_url=provider.url,
        ).start()  # fmt: skip
        try:
            began = time.monotonic()
            load = threading.Thread(
                target=run_soak,
                kwargs={"platform": platform, "duration_s": args.minutes * 60, "sample_every_s": 3600,
                        "workers": args.workers},
                daemon=True,
            )  # fmt: skip
            load.start()
            snaps: list[tuple[float, float, Path]] = []
            load.join(timeout=args.warm_up)
            while load.is_alive():
                at = time.monotonic() - began
                pid = platform.processes[args.component].popen.pid
                path = _snapshot(platform, component=args.component, directory=directory, index=len(snaps))
                snaps.append((at, _rss_mib(pid), path))
                traced = sum(s.size for s in tracemalloc.Snapshot.load(str(path)).statistics("filename"))
                print(
                    f"t={at:6.0f}s rss={snaps[-1][1]:7.1f} MiB traced={traced / 2**20:7.2f} MiB", flush=True
                )
                load.join(timeout=args.every)
            base, last = snaps[0], snaps[-1]
            print(
                f"\ngrowth t={base[0]:.0f}s -> t={last[0]:.0f}s, rss {base[1]} -> {last[1]} MiB; top sites:"
            )
            filters = [tracemalloc.Filter(False, tracemalloc.__file__)]
            old = tracemalloc.Snapshot.load(str(base[2])).filter_traces(filters)
            new = tracemalloc.Snapshot.load(str(last[2])).filter_traces(filters)
            for stat in new.compare_to(old, "traceback")[: args.top]:
                diff, now = stat.size_diff / 1024, stat.size / 1024
                print(f"\n{diff:+9.1f} KiB {stat.count_diff:+7d} blocks (now {now:.1f} KiB)")
                for line in stat.traceback.format(limit=8, most_recent_first=True):
                    print("   ", line)
        finally:
            for process in platform.processes.values():
                process.stop(timeout=5)
    print(f"\nsnapshots and logs in {directory}")


if __name__ == "__main__":
    main()
