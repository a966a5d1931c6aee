"""A private PostgreSQL (Debian's package) on loopback for the OE store's tests, the crash campaign and the
benchmarks, which can restart it on the same data and port (a server restart mid-campaign).

    with running_postgres() as pg:
        dsn = pg.new_database()      # a fresh database: postgresql://oe:...@127.0.0.1:port/oe_<hex>
        pg.restart()                 # fast shutdown, then start again on the same port and data
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import free_port, wait_for_port
from tests.peers.servers import PeerUnavailable, postgres_bin

HOST = "127.0.0.1"
OE_USER = "oe"
OE_PASSWORD = "oe-Canary-5d1e8a3b"  # a canary: no log or answer may ever contain it


def _owner() -> str:
    return "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.getuid()).pw_name


def _as_owner() -> dict[str, object]:
    """Popen arguments that drop to the postgres user in the child (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam("postgres")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [], "env": {"PATH": "/usr/bin:/bin"}}


@dataclass
class RunningPostgres:
    root: Path
    port: int
    admin_password: str
    max_connections: int
    proc: subprocess.Popen[bytes] | None = None
    databases: list[str] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.root / "postgres.log"

    def dsn(self, database: str, *, user: str = OE_USER, password: str = OE_PASSWORD) -> str:
        return f"postgresql://{user}:{password}@{HOST}:{self.port}/{database}"

    @property
    def admin_dsn(self) -> str:
        return self.dsn("postgres", user="postgres", password=self.admin_password)

    def start(self) -> None:
        bindir = postgres_bin()
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    str(bindir / "postgres"),
                    "-D",
                    str(self.root / "data"),
                    "-k",
                    str(self.root),
                    "-h",
                    HOST,
                    "-p",
                    str(self.port),
                    # A commit is written to the WAL before it is acknowledged (synchronous_commit on), so
                    # a SIGKILL of the server loses nothing acknowledged; no fsync: the page cache outlives
                    # the process, and only an OS crash (not tested) would need it.
                    "-c",
                    "fsync=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "shared_buffers=64MB",
                    "-c",
                    f"max_connections={self.max_connections}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
                **_as_owner(),  # type: ignore[arg-type]
            )
        try:
            wait_for_port(HOST, self.port, timeout=30, proc=self.proc)
            asyncio.run(self._wait_ready())
        except (RuntimeError, TimeoutError, OSError) as exc:
            raise RuntimeError(f"PostgreSQL did not start: {exc}\n{self.log_tail()}") from None

    async def _wait_ready(self) -> None:
        import asyncpg

        # The port accepts before the server does ("the database system is starting up").
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = await asyncpg.connect(self.admin_dsn)
                await conn.close()
                return
            except (asyncpg.CannotConnectNowError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    def stop(self, *, sig: int = signal.SIGINT) -> None:
        """SIGINT: fast shutdown (sessions are cut); SIGKILL: a crash (the server recovers from its WAL)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        if sig == signal.SIGKILL:
            # Its backends outlive the postmaster for a moment and hold the shared memory.
            time.sleep(0.5)

    def restart(self, *, sig: int = signal.SIGINT, down_s: float = 0.0) -> None:
        self.stop(sig=sig)
        time.sleep(down_s)
        self.start()

    def new_database(self) -> str:
        """A fresh database owned by the OE user; returns its DSN."""
        name = f"oe_{uuid.uuid4().hex[:16]}"
        asyncio.run(self._admin(f"CREATE DATABASE {name} OWNER {OE_USER}"))
        self.databases.append(name)
        return self.dsn(name)

    async def _admin(self, *statements: str) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.admin_dsn)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-3000:]
        return ""


@contextlib.contextmanager
def running_postgres(*, max_connections: int = 120) -> Iterator[RunningPostgres]:
    """A fresh cluster in a temp dir, user `oe` (scram password); stopped and removed afterwards."""
    try:
        bindir = postgres_bin()
    except PeerUnavailable:
        raise
    root = Path(tempfile.mkdtemp(prefix="ae-oe-pg-"))
    owner = _owner()
    admin_password = "admin-" + os.urandom(6).hex()
    (root / "pw").write_text(admin_password + "\n")
    if os.geteuid() == 0:
        shutil.chown(root, owner, owner)
        shutil.chown(root / "pw", owner, owner)
    server = RunningPostgres(
        root=root, port=free_port(), admin_password=admin_password, max_connections=max_connections
    )
    try:
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(root / "data"),
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                f"--pwfile={root / 'pw'}",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            cwd=root,
            **_as_owner(),  # type: ignore[arg-type]
        )
        server.start()
        asyncio.run(server._admin(f"CREATE ROLE {OE_USER} LOGIN PASSWORD '{OE_PASSWORD}'"))
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
