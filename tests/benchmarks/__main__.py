"""`make bench`: run every tests/benchmarks/bench_*.py module's `main()` in turn.

Each benchmark prints its own figures against a baseline measured in the same run. Pass module names
(e.g. `python -m tests.benchmarks compile`) to run a subset.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    if argv:
        names = [n for n in names if any(n == f"bench_{a}" or n == a for a in argv)]
    failed = 0
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        try:
            importlib.import_module(f"tests.benchmarks.{name}").main()
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            failed += 1
            print(f"{name} FAILED: {type(exc).__name__}: {exc}", flush=True)
        print(f"({name} took {time.perf_counter() - started:.1f}s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
