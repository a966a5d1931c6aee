"""Compile the whole Stripe OpenAPI document: ours vs FastMCP's OpenAPI support, same document, same run.

Each side runs in its own fresh subprocess; we print its wall time (interpreter start, imports, parse,
compile), the in-process time of the work itself, and its peak RSS, then the ratios. The peer is
`FastMCP.from_openapi` plus listing its tools, installed into a separate venv under ~/.cache/agent-engine.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.peer_process import ChildRun, ensure_venv, run_measured
from tests.conftest import REPO_ROOT

SPEC = REPO_ROOT.parent / "shared" / "specs" / "stripe-spec3-2023-09-12.yaml"
FASTMCP_REQUIREMENTS = ["fastmcp==4.2.3", "PyYAML==6.0.4"]
OUR_RUNS = 3

_PEER_SCRIPT = """
import asyncio, json, sys, time
started = time.perf_counter()
import yaml
from fastmcp import FastMCP
imported = time.perf_counter()
with open(sys.argv[1]) as handle:
    spec = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
parsed = time.perf_counter()
server = FastMCP.from_openapi(openapi_spec=spec, name="stripe")
tools = asyncio.run(server.list_tools())
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "parse_s": parsed - imported,
                  "work_s": done - imported, "tools": len(tools)}))
"""


def _ours_child(spec: str) -> None:
    """Child mode: import, compile the document (parse included), serialize the catalog; report."""
    started = time.perf_counter()
    from agent_runtime.connectors import compile_catalog

    imported = time.perf_counter()
    catalog = compile_catalog(spec, connector_name="stripe")
    compiled = time.perf_counter()
    text = catalog.dumps()
    done = time.perf_counter()
    print(
        json.dumps(
            {
                "import_s": imported - started,
                "work_s": compiled - imported,
                "dumps_s": done - compiled,
                "tools": len(catalog.tools),
                "skipped": len(catalog.skipped),
                "catalog_bytes": len(text.encode()),
            }
        )
    )


def _row(label: str, run: ChildRun) -> str:
    r = run.report
    return (
        f"{label:<28} wall {run.wall_s:7.2f} s   work {r['work_s']:7.3f} s   "
        f"peak RSS {run.peak_rss_mb:7.1f} MB   tools {r['tools']}"
    )


def main() -> None:
    if not SPEC.exists():
        print(f"skipped: {SPEC} is absent (the shared specs sit beside the repo as ../shared/specs)")
        return
    ours_runs = [
        run_measured(
            [sys.executable, "-m", "tests.benchmarks.bench_compile", "--child", str(SPEC)], cwd=REPO_ROOT
        )
        for _ in range(OUR_RUNS)
    ]
    ours = sorted(ours_runs, key=lambda run: run.report["work_s"])[len(ours_runs) // 2]  # the median run
    print(_row("ours (compile_catalog)", ours))
    works = ", ".join(f"{r.report['work_s']:.3f}" for r in ours_runs)
    print(
        f"{'':<28} import {ours.report['import_s']:.3f} s, dumps {ours.report['dumps_s']:.3f} s, "
        f"skipped {ours.report['skipped']}, catalog {ours.report['catalog_bytes'] / 1e6:.1f} MB, "
        f"work over {OUR_RUNS} runs: {works} s"
    )
    python = ensure_venv("fastmcp-venv", FASTMCP_REQUIREMENTS)
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "peer_fastmcp.py"
        script.write_text(_PEER_SCRIPT)
        peer = run_measured([str(python), str(script), str(SPEC)], cwd=Path(scratch), timeout_s=1800)
    print(_row(f"peer ({FASTMCP_REQUIREMENTS[0]})", peer))
    print(f"{'':<28} import {peer.report['import_s']:.3f} s, YAML parse {peer.report['parse_s']:.3f} s")
    work_ratio = peer.report["work_s"] / ours.report["work_s"]
    print(
        f"ratio peer/ours: wall {peer.wall_s / ours.wall_s:.1f}x, work {work_ratio:.1f}x, "
        f"peak RSS {peer.peak_rss_mb / ours.peak_rss_mb:.1f}x"
    )
    print(
        f"targets: work < 1 s -> {'met' if ours.report['work_s'] < 1 else 'MISSED'} "
        f"({statistics.median(r.report['work_s'] for r in ours_runs):.3f} s); "
        f"peak RSS < 200 MB -> {'met' if ours.peak_rss_mb < 200 else 'MISSED'} ({ours.peak_rss_mb:.0f} MB)"
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _ours_child(sys.argv[2])
    else:
        main()
