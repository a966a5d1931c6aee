"""Jaeger all-in-one on loopback for the tracing tests: OTLP/HTTP in, the query API out, memory storage.

`observability_bins()` runs tests/integration/build_observability_bins.sh (a no-op once Jaeger and promtool
are cached) and returns their directory; `running_jaeger()` starts Jaeger with a config of our own (every
listener on 127.0.0.1, no telemetry port) in a temp dir and yields its OTLP and query URLs.

    with running_jaeger() as jaeger:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = jaeger.otlp_url
        jaeger.trace(trace_id)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import REPO_ROOT, free_port, wait_for_port

BUILD_SCRIPT = REPO_ROOT / "tests" / "integration" / "build_observability_bins.sh"

CONFIG = """
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query_port}
    grpc:
      endpoint: 127.0.0.1:{query_grpc_port}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp_port}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


class ObservabilityBinsUnavailable(RuntimeError):
    """Jaeger or promtool could not be built; the message says what to do."""


def observability_bins(*names: str) -> Path:
    """The cached bin directory holding `names` (jaeger, promtool; default both), built first if needed (the
    script then needs go)."""
    done = subprocess.run(["bash", str(BUILD_SCRIPT), *names], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = f"{done.stderr[-4000:]}{done.stdout[-2000:]}"
        raise ObservabilityBinsUnavailable(f"{BUILD_SCRIPT.name} failed (exit {done.returncode}):\n{output}")
    return Path(done.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Jaeger:
    otlp_url: str
    query_url: str

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """The trace as the query API has it (Jaeger's JSON: spans, references, processes), or None."""
        response = httpx.get(f"{self.query_url}/api/traces/{trace_id}", timeout=5)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        data = response.json().get("data") or []
        return data[0] if data else None

    def wait_for(
        self, trace_id: str, ready: Callable[[dict[str, Any]], bool], *, timeout: float = 30
    ) -> dict[str, Any]:
        """Poll until the trace satisfies `ready` (spans arrive in batches from several processes)."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            last = self.trace(trace_id)
            if last is not None and ready(last):
                return last
            time.sleep(0.2)
        raise TimeoutError(f"trace {trace_id} not complete after {timeout}s: {last}")


@contextlib.contextmanager
def running_jaeger(*, timeout: float = 30.0) -> Iterator[Jaeger]:
    binary = observability_bins("jaeger") / "jaeger"
    with tempfile.TemporaryDirectory(prefix="jaeger-") as tmp:
        ports = {name: free_port() for name in ("query_port", "query_grpc_port", "otlp_port")}
        config = Path(tmp) / "config.yaml"
        config.write_text(CONFIG.format(**ports))
        log_path = Path(tmp) / "jaeger.log"
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp}
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [str(binary), "--config", str(config)],
                env=env,
                cwd=tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            try:
                wait_for_port("127.0.0.1", ports["otlp_port"], timeout=timeout, proc=proc)
                wait_for_port("127.0.0.1", ports["query_port"], timeout=timeout, proc=proc)
            except (RuntimeError, TimeoutError) as exc:
                raise ObservabilityBinsUnavailable(f"Jaeger did not start: {exc}\n{_tail(log_path)}") from exc
            yield Jaeger(
                otlp_url=f"http://127.0.0.1:{ports['otlp_port']}",
                query_url=f"http://127.0.0.1:{ports['query_port']}",
            )
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-4000:]
    return ""
