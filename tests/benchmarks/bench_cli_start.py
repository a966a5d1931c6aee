"""`agentengine --help` start-up against `python -c pass` (the interpreter alone), same run (issue 29).

The target is under 300 ms on these machines: the CLI imports its HTTP client, YAML, Rich and the connector
core only inside the commands that need them. Median of ROUNDS runs each, interleaved so both see the
same machine load; the CLI's own share is the difference.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROUNDS = 15
SCRIPT = Path(sys.executable).with_name("agentengine")


def _once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    baseline: list[float] = []
    helped: list[float] = []
    version: list[float] = []
    for _ in range(ROUNDS):
        baseline.append(_once([sys.executable, "-c", "pass"]))
        helped.append(_once([str(SCRIPT), "--help"]))
        version.append(_once([str(SCRIPT), "invoke", "--help"]))
    base, cli, sub = (statistics.median(times) * 1000 for times in (baseline, helped, version))
    print(f"python -c pass          median {base:7.1f} ms  (baseline, {ROUNDS} runs)")
    for label, value in (("agentengine --help", cli), ("agentengine invoke -h", sub)):
        share = f"{value / base:.1f}x baseline; CLI's own {value - base:.1f} ms"
        print(f"{label:<23} median {value:7.1f} ms  ({share})")
    print(f"target: --help under 300 ms: {'met' if cli < 300 else 'NOT met'}")


if __name__ == "__main__":
    main()
