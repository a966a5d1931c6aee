"""Tenant tool bodies in their own processes, each started with only the secrets its tools declare.

One worker per distinct `required_secrets` set (tools that declare the same set could read each other's
secrets anyway). A worker's environment is the platform's non-secret variables (PATH, HOME, AGENTIC_*
URLs...); its tools' secrets reach it over its socket after it made itself non-dumpable (tenant_worker.py).
The Tool Pod process keeps the connector credentials and the LLM keys: it is non-dumpable too (the
launcher calls process_privacy.make_undumpable), so a worker of the same uid cannot read
/proc/<pid>/environ or ptrace it, and no object of it is reachable from a worker's `gc`.

A worker that dies fails its calls in flight (`tool_error`; `out_of_memory` when the kernel's OOM killer
ended it, servers/oom_kills.py) and is started again on the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_runtime.contract import TOKEN_FILE_ENV, is_platform_env
from agent_runtime.sdk import ToolSpec
from agent_runtime.servers.oom_kills import killed_by_oom, oom_kills, out_of_memory_explanation
from agent_runtime.servers.tenant_frames import encode_frame, read_frame

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0
# Platform variables that carry a credential (or point at one) never reach a worker.
_CREDENTIAL_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|PRIVATE|CREDENTIAL", re.IGNORECASE)
# The runtime token's file path does reach a worker: the mounted file is readable from the worker anyway
# (same pod, same filesystem), and a tool's memory client (sdk.memory) needs it with the run's statement.
_SHARED_POINTERS = frozenset({TOKEN_FILE_ENV})
# A sync body keeps its worker thread until it returns; the worker's own timeout answers first.
_GRACE_S = 5.0
# How long a worker that closed its socket is given to exit, so its exit status can say why it went.
_EXIT_WAIT_S = 2.0


class WorkerGone(Exception):
    """The worker exited (or never started); the message says which tools it held."""


class WorkerOutOfMemory(WorkerGone):
    """The kernel's OOM killer ended the worker: the container is over its memory limit."""


@dataclass(frozen=True)
class WorkerReply:
    """One call's answer: status ok, failure, message, suspend, raised or cancelled, with its fields."""

    status: str
    fields: dict[str, Any]


# The operator lists the Tool Pod's plain (not from a Secret) variables here: a tool reads them undeclared.
PLAIN_ENV = "AGENTIC_TOOL_PLAIN_ENV"


def worker_base_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What every worker starts with: the platform's variables and the plain ones the operator lists,
    minus any that names a credential (but for the runtime token file's path)."""
    plain = {name.strip() for name in environ.get(PLAIN_ENV, "").split(",") if name.strip()}
    return {
        name: value
        for name, value in environ.items()
        if name in _SHARED_POINTERS
        or ((is_platform_env(name) or name in plain) and not _CREDENTIAL_NAME.search(name))
    }


class _Worker:
    def __init__(self, *, tools: Sequence[str], secrets: Mapping[str, str], entrypoint: str) -> None:
        self.tools = tuple(tools)
        self._secrets = dict(secrets)
        self._entrypoint = entrypoint
        self._process: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[WorkerReply]] = {}
        self._reader_task: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self.pid: int | None = None
        self._oom_before: int | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None and self._writer is not None

    async def start(self, base_env: Mapping[str, str]) -> None:
        async with self._lock:
            if self.alive:
                return
            parent, child = socket.socketpair()
            try:
                self._process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "agent_runtime.servers.tenant_worker",
                    str(child.fileno()),
                    env=dict(base_env),  # no secret: the worker is handed its own after it is undumpable
                    pass_fds=(child.fileno(),),
                    stdin=asyncio.subprocess.DEVNULL,
                    close_fds=True,
                )
            finally:
                child.close()
            self._oom_before = oom_kills()
            reader, writer = await asyncio.open_connection(sock=parent)
            writer.write(
                encode_frame(
                    {
                        "type": "init",
                        "entrypoint": self._entrypoint,
                        "tools": list(self.tools),
                        "secrets": self._secrets,
                    }
                )
            )
            await writer.drain()
            try:
                ready = await asyncio.wait_for(read_frame(reader), START_TIMEOUT_S)
            except TimeoutError:
                ready = None
            if ready is None or ready.get("type") != "ready":
                writer.close()
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()
                await self._process.wait()
                detail = (ready or {}).get("error", "it exited before it was ready")
                raise WorkerGone(f"the worker for tool(s) {', '.join(self.tools)} did not start: {detail}")
            self.pid = int(ready.get("pid") or self._process.pid)
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        ended = False  # the worker closed its end: it exited (or is exiting)
        try:
            while True:
                frame = await read_frame(reader)
                if frame is None:
                    ended = True
                    break
                future = self._pending.pop(frame.get("id", -1), None)
                if future is not None and not future.done():
                    future.set_result(WorkerReply(status=str(frame.get("status")), fields=frame))
        except Exception:  # a garbled frame: the worker is not trusted to continue
            logger.exception("tenant worker for %s sent a malformed frame", ", ".join(self.tools))
        finally:
            self._writer = None
            gone = await self._why_gone() if ended and self._pending else None
            pending, self._pending = self._pending, {}
            for future in pending.values():
                if not future.done():
                    future.set_exception(
                        gone or WorkerGone("the tool's worker process exited during the call")
                    )
            if self._process is not None and self._process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()

    async def _why_gone(self) -> WorkerGone:
        """What the calls in flight of a worker that went away are told: its exit status, and whether the
        kernel's OOM killer ended it."""
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), _EXIT_WAIT_S)
        returncode = None if process is None else process.returncode
        if killed_by_oom(returncode, before=self._oom_before, after=oom_kills()):
            logger.warning("the OOM killer ended the worker of tool(s) %s", ", ".join(self.tools))
            return WorkerOutOfMemory(out_of_memory_explanation(self.tools))
        status = "" if returncode is None else f" (exit status {returncode})"
        return WorkerGone(f"the tool's worker process exited during the call{status}")

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: Mapping[str, Any]
    ) -> WorkerReply:
        writer = self._writer
        if writer is None:
            raise WorkerGone("the tool's worker process is not running")
        call_id = next(self._ids)
        future: asyncio.Future[WorkerReply] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        writer.write(
            encode_frame(
                {
                    "type": "call",
                    "id": call_id,
                    "tool": spec.name,
                    "arguments": dict(arguments),
                    "context": dict(context),
                }
            )
        )
        try:
            await writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), spec.timeout_s + _GRACE_S)
        except asyncio.CancelledError:
            if self._writer is not None:
                with contextlib.suppress(Exception):
                    self._writer.write(encode_frame({"type": "cancel", "id": call_id}))
            # The call ends when the body has: a drain that cancelled it must not hear "done" while the
            # body still runs in the worker. Its answer (cancelled, or what it returned) is awaited.
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, WorkerGone):
                await asyncio.wait_for(asyncio.shield(future), spec.timeout_s + _GRACE_S)
            self._pending.pop(call_id, None)
            raise
        except TimeoutError:
            self._pending.pop(call_id, None)
            return WorkerReply(
                status="failure",
                fields={
                    "category": "timeout",
                    "explanation": (
                        f"tool {spec.name!r} did not finish within its timeout_s={spec.timeout_s:g}"
                    ),
                },
            )

    async def aclose(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        process = self._process
        if process is not None and process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task


class TenantWorkers:
    """The Tool Pod's tenant tool workers, grouped by declared secrets; started with the pod."""

    def __init__(
        self,
        *,
        entrypoint: str,
        tools: Sequence[ToolSpec],
        secret_env: Mapping[str, str],
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._base_env = worker_base_env(os.environ if environ is None else environ)
        groups: dict[tuple[str, ...], list[str]] = {}
        for spec in tools:
            groups.setdefault(tuple(sorted(set(spec.required_secrets))), []).append(spec.name)
        self._workers: list[_Worker] = []
        self._by_tool: dict[str, _Worker] = {}
        for names, tool_names in sorted(groups.items()):
            worker = _Worker(
                tools=tool_names,
                secrets={name: secret_env[name] for name in names if name in secret_env},
                entrypoint=entrypoint,
            )
            self._workers.append(worker)
            for tool in tool_names:
                self._by_tool[tool] = worker

    def handles(self, tool: str) -> bool:
        return tool in self._by_tool

    def pids(self) -> dict[str, int | None]:
        """tool name -> its worker's pid (None before it started)."""
        return {tool: worker.pid for tool, worker in self._by_tool.items()}

    async def start(self) -> None:
        await asyncio.gather(*(worker.start(self._base_env) for worker in self._workers))
        logger.info("started %d tenant tool worker(s)", len(self._workers))

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: Mapping[str, Any]
    ) -> WorkerReply:
        worker = self._by_tool[spec.name]
        if not worker.alive:
            await worker.start(self._base_env)
        return await worker.call(spec, arguments, context)

    async def aclose(self) -> None:
        await asyncio.gather(*(worker.aclose() for worker in self._workers))
