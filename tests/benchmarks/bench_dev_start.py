"""`agentengine dev examples/echo-agent` cold start to the first answer, against Python's own start-up in the
same run (issue 29; target: under 5 s on these machines).

Each round starts `agentengine dev` afresh (a new OE database, new keys, new processes), waits for its banner
(every component ready, the registration taken), invokes the agent through the OE's client API and waits for
the completed execution. Two interpreter start-ups lie on that path one after the other (the CLI, then its
children, which start in parallel), so the platform's part is the total less two `python -c pass`, and less
the runtime's imports (`import agent_runtime.launcher` and the servers it loads), measured apart.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from agent_runtime.devloop.children import free_port

ROUNDS = 3
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "echo-agent"
AGENTENGINE = Path(sys.executable).with_name("agentengine")
SERVER_IMPORTS = "import agent_runtime.launcher, agent_runtime.servers.oe, agent_runtime.servers.aer"


def _median_run(argv: list[str], rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _round(script: Path) -> tuple[float, float]:
    """(seconds to the banner, seconds to the first answer), both from the command's start."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENGINE_")}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            str(AGENTENGINE),
            "dev",
            str(EXAMPLE),
            "--port",
            str(port),
            "--no-reload",
            "--model",
            f"scripted:{script}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    banner = ""
    try:
        while "Ctrl-C stops everything" not in banner:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"agentengine dev exited:\n{banner}")
            banner += line
        ready = time.perf_counter() - started
        match = re.search(r"AGENTENGINE_TOKEN=(\S+)", banner)
        assert match, banner
        headers = {"authorization": f"Bearer {match.group(1)}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            response = client.post("/invoke", json={"agent": "dev/echo-agent", "input": {"text": "hi"}})
            execution_id = response.json()["execution_id"]
            while (view := client.get(f"/execution/{execution_id}").json())["status"] not in (
                "completed",
                "failed",
            ):
                time.sleep(0.01)
        assert view["status"] == "completed", view
        return ready, time.perf_counter() - started
    finally:
        proc.send_signal(2)  # Ctrl-C
        proc.communicate(timeout=60)


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "turns.json"
        script.write_text(json.dumps([{"text": "hello back"}] * 1))
        rounds = [_round(script) for _ in range(ROUNDS)]
    python = _median_run([sys.executable, "-c", "pass"])
    imports = _median_run([sys.executable, "-c", SERVER_IMPORTS]) - python
    ready = statistics.median(r for r, _ in rounds)
    answer = statistics.median(a for _, a in rounds)
    platform = answer - 2 * python - imports
    print(f"python -c pass                     median {python * 1000:7.0f} ms (baseline)")
    print(f"runtime imports (launcher, OE, AER) median {imports * 1000:7.0f} ms (over the baseline)")
    print(f"agentengine dev: banner (all ready) median {ready:7.2f} s  ({ROUNDS} cold starts)")
    print(
        f"agentengine dev: first answer       median {answer:7.2f} s  ({answer / python:.0f}x python -c pass)"
    )
    print(f"platform's part (less 2 interpreter start-ups and the imports) {platform:5.2f} s")
    print(f"target: first answer under 5 s: {'met' if answer < 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
