"""Warm start of the test control plane (tests/cluster): the whole of it against the API server alone.

Baseline: seconds until kube-apiserver answers /readyz (etcd and the API server, the floor of any start).
Figure: seconds until the whole control plane is usable (default ServiceAccount, fake nodes Ready,
controller-manager and scheduler healthy), and where the time between goes.
"""

from __future__ import annotations

import statistics

from tests.cluster.controlplane import ControlPlane, ensure_binaries

RUNS = 3


def main() -> None:
    bin_dir = ensure_binaries()
    phases: dict[str, list[float]] = {}
    totals = []
    for _ in range(RUNS):
        with ControlPlane(bin_dir=bin_dir, nodes=2) as plane:
            totals.append(plane.startup_seconds)
            for what, seconds in plane.phase_seconds.items():
                phases.setdefault(what, []).append(seconds)
    baseline = statistics.median(phases["kube-apiserver /readyz"])
    total = statistics.median(totals)
    print(f"control plane warm start, median of {RUNS} (2 fake nodes)")
    for what, seconds in phases.items():
        print(f"  {what:<36} at {statistics.median(seconds):6.2f} s")
    print(f"  {'baseline: kube-apiserver /readyz':<36} {baseline:6.2f} s")
    print(f"  {'whole control plane usable':<36} {total:6.2f} s  ({total / baseline:.2f}x baseline)")
    print(f"  runs: {', '.join(f'{t:.2f}' for t in totals)} s")


if __name__ == "__main__":
    main()
