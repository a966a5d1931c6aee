"""Real servers for the built-in connector tests, each on 127.0.0.1 in a temporary directory.

PostgreSQL and MariaDB from Debian's packages, Dovecot (IMAP) from Debian's packages, and an SMTP server
(aiosmtpd). `tests/peers/install.sh` installs the Debian packages when they are missing (`make test` runs
it). Each context manager starts its server, yields how to reach it, and stops it, leaving no process and
no directory behind. `python -m tests.peers.servers` starts all four by hand and prints where they listen.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import free_port, wait_for_port

HOST = "127.0.0.1"
DB_NAME = "shop"
DB_USER = "agent"  # the connector's user: reads and writes the shop tables
DB_PASSWORD = "pg-Canary-7f3a9c1e"  # a canary: no test output may ever contain it
MAIL_USER = "agent@example.test"
MAIL_PASSWORD = "mail-Canary-2b8e4d6f"


class PeerUnavailable(RuntimeError):
    """The server's package is not installed (run tests/peers/install.sh)."""


@dataclass
class SqlServer:
    host: str
    port: int
    database: str
    user: str
    password: str
    admin: dict[str, Any] = field(default_factory=dict)  # how the test itself connects as a superuser


@dataclass
class MailServer:
    host: str
    port: int
    user: str
    password: str
    directory: Path | None = None


def _is_root() -> bool:
    return os.geteuid() == 0


def _as(user: str) -> dict[str, Any]:
    """Popen arguments that run the child as `user` when we are root (PostgreSQL refuses to run as root).

    The privileges are dropped in the child itself rather than through runuser, so the process we signal
    is the server: a runuser in between does not pass SIGINT on, which left servers running."""
    if not _is_root():
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [], "env": {"PATH": "/usr/bin:/bin"}}


def _stop(proc: subprocess.Popen[bytes], *, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _log_tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-3000:]
    except OSError:
        return ""


# PostgreSQL --------------------------------------------------------------------------------------------


def postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise PeerUnavailable("PostgreSQL is not installed; run tests/peers/install.sh")
    return Path(found[-1]).parent


def _retrying(start: Any) -> Any:
    """A server context manager that tries once more when its first start fails (a free port taken by
    someone else between our probe and the server's bind is the usual cause on a shared machine)."""

    @contextlib.contextmanager
    def manager() -> Iterator[Any]:
        try:
            stack = contextlib.ExitStack()
            server = stack.enter_context(start())
        except RuntimeError as first:
            print(f"retrying once: {str(first).splitlines()[0]}", flush=True)
            stack = contextlib.ExitStack()
            server = stack.enter_context(start())
        with stack:
            yield server

    manager.__doc__ = start.__doc__
    return manager


@contextlib.contextmanager
def _postgres_server() -> Iterator[SqlServer]:
    """A fresh PostgreSQL cluster with database `shop` and user `agent` (password auth, scram)."""
    bindir = postgres_bin()
    root = Path(tempfile.mkdtemp(prefix="ae-pg-"))
    data = root / "data"
    owner = "postgres" if _is_root() else pwd.getpwuid(os.getuid()).pw_name
    admin_password = "admin-" + os.urandom(6).hex()
    pwfile = root / "pw"
    pwfile.write_text(admin_password + "\n")
    if _is_root():
        shutil.chown(root, owner, owner)
        shutil.chown(pwfile, owner, owner)
    port = free_port()
    log = root / "postgres.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            cwd=root,
            **_as(owner),
        )
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    str(bindir / "postgres"),
                    "-D",
                    str(data),
                    "-k",
                    str(root),
                    "-h",
                    HOST,
                    "-p",
                    str(port),
                    "-c",
                    "fsync=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "shared_buffers=32MB",
                    "-c",
                    "max_connections=60",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=root,
                **_as(owner),
            )
        try:
            wait_for_port(HOST, port, timeout=30, proc=proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"PostgreSQL did not start: {exc}\n{_log_tail(log)}") from None
        admin = {
            "host": HOST,
            "port": port,
            "user": "postgres",
            "password": admin_password,
            "database": "postgres",
        }
        _pg_setup(admin)
        yield SqlServer(
            host=HOST,
            port=port,
            database=DB_NAME,
            user=DB_USER,
            password=DB_PASSWORD,
            admin={**admin, "database": DB_NAME},
        )
    finally:
        if proc is not None:
            _stop(proc, sig=signal.SIGINT)  # fast shutdown
        shutil.rmtree(root, ignore_errors=True)


def _pg_setup(admin: dict[str, Any]) -> None:
    import asyncio

    import asyncpg

    async def setup() -> None:
        # The port accepts before the server does ("the database system is starting up"): wait for it.
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = await asyncpg.connect(**admin)
                break
            except (asyncpg.CannotConnectNowError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        try:
            await conn.execute(f"CREATE ROLE {DB_USER} LOGIN PASSWORD '{DB_PASSWORD}'")
            await conn.execute(f"CREATE DATABASE {DB_NAME} OWNER {DB_USER}")
        finally:
            await conn.close()

    asyncio.run(setup())


# MariaDB -----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _mariadb_server() -> Iterator[SqlServer]:
    """A fresh MariaDB with database `shop` and user `agent`@`127.0.0.1` (password auth)."""
    mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    install = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
    if not (os.path.exists(mariadbd) and os.path.exists(install)):
        raise PeerUnavailable("MariaDB is not installed; run tests/peers/install.sh")
    root = Path(tempfile.mkdtemp(prefix="ae-maria-"))
    data = root / "data"
    port = free_port()
    log = root / "mariadb.log"
    user_args = ["--user=root"] if _is_root() else []
    common = ["--no-defaults", f"--datadir={data}", *user_args]
    proc: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(
            [
                install,
                *common,
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ],
            check=True,
            capture_output=True,
        )
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    mariadbd,
                    *common,
                    f"--socket={root / 'sock'}",
                    f"--port={port}",
                    f"--bind-address={HOST}",
                    f"--pid-file={root / 'pid'}",
                    "--skip-name-resolve",
                    "--skip-log-bin",
                    "--innodb-buffer-pool-size=32M",
                    "--innodb-log-file-size=8M",
                    "--innodb-flush-log-at-trx-commit=0",
                    "--max-connections=80",
                    "--performance-schema=OFF",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for_port(HOST, port, timeout=60, proc=proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"MariaDB did not start: {exc}\n{_log_tail(log)}") from None
        admin = {"host": HOST, "port": port, "user": "root", "password": "", "database": "mysql"}
        _maria_setup(admin)
        yield SqlServer(
            host=HOST,
            port=port,
            database=DB_NAME,
            user=DB_USER,
            password=DB_PASSWORD,
            admin={**admin, "database": DB_NAME},
        )
    finally:
        if proc is not None:
            _stop(proc, timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def _maria_setup(admin: dict[str, Any]) -> None:
    import pymysql

    deadline = time.monotonic() + 30
    while True:
        try:
            conn = pymysql.connect(**admin, autocommit=True)
            break
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DB_NAME}")
            cur.execute(f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'")
            cur.execute(f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1'")
    finally:
        conn.close()


postgres_server = _retrying(_postgres_server)
mariadb_server = _retrying(_mariadb_server)


# Dovecot (IMAP) ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def dovecot_server() -> Iterator[MailServer]:
    """Dovecot serving IMAP on loopback for one user, with INBOX and Drafts (maildir)."""
    dovecot = "/usr/sbin/dovecot"
    if not (os.path.exists(dovecot) and os.path.exists("/usr/lib/dovecot/imap")):
        raise PeerUnavailable("Dovecot is not installed; run tests/peers/install.sh")
    root = Path(tempfile.mkdtemp(prefix="ae-dovecot-"))
    os.chmod(root, 0o755)  # noqa: S103 - the dovecot user must reach the mail directory
    port = free_port()
    me = pwd.getpwuid(os.getuid()).pw_name
    mail_user = "dovecot" if _is_root() else me
    login_user = "dovenull" if _is_root() else me
    uid = pwd.getpwnam(mail_user)
    home = root / "home"
    home.mkdir()
    (root / "users").write_text(f"{MAIL_USER}:{{PLAIN}}{MAIL_PASSWORD}::::::\n")
    config = root / "dovecot.conf"
    config.write_text(
        f"""
protocols = imap
listen = {HOST}
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
default_internal_user = {mail_user}
default_internal_group = {mail_user}
default_login_user = {login_user}
first_valid_uid = 1
first_valid_gid = 1
mail_location = maildir:{home}/%n/Maildir
mail_uid = {uid.pw_uid}
mail_gid = {uid.pw_gid}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = static
  args = uid={uid.pw_uid} gid={uid.pw_gid} home={home}/%n
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Drafts {{
    special_use = \\Drafts
    auto = create
  }}
}}
service imap-login {{
  inet_listener imap {{
    address = {HOST}
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service stats {{
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"""
    )
    if _is_root():
        for path in (home,):
            shutil.chown(path, mail_user, mail_user)
    log = root / "dovecot.log"
    proc = subprocess.Popen(
        [dovecot, "-F", "-c", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        try:
            wait_for_port(HOST, port, timeout=20, proc=proc)
        except (RuntimeError, TimeoutError) as exc:
            output = (
                proc.stdout.read().decode(errors="replace") if proc.poll() is not None and proc.stdout else ""
            )
            raise RuntimeError(f"Dovecot did not start: {exc}\n{output}\n{_log_tail(log)}") from None
        yield MailServer(host=HOST, port=port, user=MAIL_USER, password=MAIL_PASSWORD, directory=root)
    finally:
        _stop(proc)
        if proc.stdout:
            proc.stdout.close()
        shutil.rmtree(root, ignore_errors=True)


# SMTP (aiosmtpd) ---------------------------------------------------------------------------------------


@dataclass
class SmtpServer(MailServer):
    messages: list[Any] = field(default_factory=list)


REJECTED_RECIPIENT = "nobody@rejected.example.test"


@contextlib.contextmanager
def smtp_server(*, require_auth: bool = True) -> Iterator[SmtpServer]:
    """aiosmtpd on loopback: AUTH PLAIN/LOGIN with the mail user's password (no TLS on loopback); refuses
    REJECTED_RECIPIENT with 550 and keeps every accepted message."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    port = free_port()
    server = SmtpServer(host=HOST, port=port, user=MAIL_USER, password=MAIL_PASSWORD)
    lock = threading.Lock()

    class Handler:
        async def handle_RCPT(
            self, smtp: Any, session: Any, envelope: Any, address: str, options: Any
        ) -> str:
            if address == REJECTED_RECIPIENT:
                return "550 5.1.1 mailbox unavailable"
            envelope.rcpt_tos.append(address)
            return "250 OK"

        async def handle_DATA(self, smtp: Any, session: Any, envelope: Any) -> str:
            with lock:
                server.messages.append(
                    {"from": envelope.mail_from, "to": list(envelope.rcpt_tos), "data": envelope.content}
                )
            return "250 2.0.0 queued"

    def authenticator(
        server_: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
    ) -> AuthResult:
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == MAIL_USER
            and auth_data.password.decode() == MAIL_PASSWORD
        )
        return AuthResult(success=ok, handled=False)  # unhandled: aiosmtpd answers 535 itself

    controller = Controller(
        Handler(),
        hostname=HOST,
        port=port,
        authenticator=authenticator,
        auth_required=require_auth,
        auth_require_tls=False,  # loopback only: the test has no certificate
    )
    controller.start()
    try:
        yield server
    finally:
        controller.stop()


if __name__ == "__main__":  # pragma: no cover - a developer's convenience
    with contextlib.ExitStack() as stack:
        pg = stack.enter_context(postgres_server())
        maria = stack.enter_context(mariadb_server())
        imap = stack.enter_context(dovecot_server())
        smtp = stack.enter_context(smtp_server())
        print(
            f"postgres 127.0.0.1:{pg.port}  mariadb 127.0.0.1:{maria.port}  imap 127.0.0.1:{imap.port}  "
            f"smtp 127.0.0.1:{smtp.port}  (Ctrl-C stops them)",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
