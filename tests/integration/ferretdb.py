"""FerretDB v1 on loopback for tests and benchmarks: the MongoDB wire protocol over its SQLite backend, or
over PostgreSQL (`postgresql_url`: its PostgreSQL backend, which runs each command in transactions).

`build_ferretdb()` runs tests/integration/build_ferretdb.sh (a no-op once the binary is cached) and
returns the binary; `running_ferretdb()` starts one server in a temp dir and yields its MongoDB URI.

    with running_ferretdb() as uri:
        client = pymongo.MongoClient(uri)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO_ROOT, free_port, wait_for_port

BUILD_SCRIPT = REPO_ROOT / "tests" / "integration" / "build_ferretdb.sh"


class FerretDBUnavailable(RuntimeError):
    """FerretDB could not be built or started; the message says what to do."""


def build_ferretdb() -> Path:
    """The cached FerretDB binary, built first if needed (a minute or so; the script then needs go)."""
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = f"{done.stderr[-4000:]}{done.stdout[-2000:]}"
        raise FerretDBUnavailable(f"{BUILD_SCRIPT.name} failed (exit {done.returncode}):\n{output}")
    binary = Path(done.stdout.strip().splitlines()[-1])
    if not os.access(binary, os.X_OK):
        raise FerretDBUnavailable(f"{BUILD_SCRIPT.name} printed {binary}, which is not an executable")
    return binary


@contextlib.contextmanager
def running_ferretdb(
    *, binary: Path | None = None, timeout: float = 30.0, postgresql_url: str | None = None
) -> Iterator[str]:
    """Start FerretDB on 127.0.0.1 with its data (SQLite; or in PostgreSQL at `postgresql_url`), state and
    log in one temp dir; yield its URI; stop it."""
    binary = binary or build_ferretdb()
    with tempfile.TemporaryDirectory(prefix="ferretdb-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        port = free_port()
        backend = (
            ["--handler=postgresql", f"--postgresql-url={postgresql_url}"]
            if postgresql_url
            else ["--handler=sqlite", f"--sqlite-url=file:{data_dir}/"]
        )
        argv = [
            str(binary),
            *backend,
            f"--listen-addr=127.0.0.1:{port}",
            f"--state-dir={tmp}",
            "--debug-addr=-",  # no metrics/pprof listener: nothing else takes a port
            "--telemetry=disable",
            "--log-level=WARN",
            "--log-format=text",
        ]
        # FERRETDB_* variables from the caller's environment would override the flags above.
        env = {k: v for k, v in os.environ.items() if not k.startswith("FERRETDB_")}
        env["DO_NOT_TRACK"] = "1"
        log_path = Path(tmp) / "ferretdb.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            try:
                wait_for_port("127.0.0.1", port, timeout=timeout, proc=proc)
            except (RuntimeError, TimeoutError) as exc:
                raise FerretDBUnavailable(f"FerretDB did not start: {exc}\n{_tail(log_path)}") from exc
            yield f"mongodb://127.0.0.1:{port}/"
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-4000:]
    return ""
