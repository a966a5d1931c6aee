"""`python -m agent_runtime.servers.tenant_worker FD`: a process that runs tenant tool bodies.

The Tool Pod starts one per distinct `required_secrets` set (servers/tenant_workers.py) with no secret in
its environment. The worker first makes itself non-dumpable, then reads its `init` frame from the socket
on FD: the secrets its tools declare (put into os.environ, where a tool body reads them), and the
entrypoint, which it imports. Its tools' bodies run here; the connector executors, the LLM keys and every
other secret stay in the Tool Pod's process, which this one cannot read (process_privacy.py).
Each `call` frame gets one `result` frame; `cancel` cancels a call in flight.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import traceback
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from agent_runtime.process_privacy import drop_capabilities, make_undumpable
from agent_runtime.servers.tenant_frames import encode_frame, read_frame

INVALID_ARGUMENTS = "invalid_arguments"
TOOL_ERROR = "tool_error"
TIMEOUT = "timeout"


async def _run_call(tools: Mapping[str, Any], frame: dict[str, Any]) -> dict[str, Any]:
    from agent_runtime.protocol import validation_problems
    from agent_runtime.sdk import RequestContext
    from agent_runtime.sdk.calls import call_scope
    from agent_runtime.sdk.context import run_scope
    from agent_runtime.sdk.errors import SuspendRequested
    from agent_runtime.sdk.tool_messages import tool_message

    call_id = frame["id"]
    spec = tools.get(frame["tool"])
    if spec is None:
        return {"id": call_id, "status": "failure", "category": TOOL_ERROR, "explanation": "unknown tool"}
    context = frame.get("context") or {}
    try:
        kwargs = spec.bind(frame.get("arguments") or {})
    except ValidationError as exc:
        problems = "; ".join(f"{p['field']}: {p['problem']}" for p in validation_problems(exc))
        return {
            "id": call_id,
            "status": "failure",
            "category": INVALID_ARGUMENTS,
            "explanation": f"tool {spec.name!r} arguments are invalid: {problems}",
        }
    request = RequestContext(
        execution_id=context.get("execution_id") or "",
        user_id=context.get("user_id"),
        org_id=context.get("org_id"),
        memory_credential=context.get("memory_credential"),
    )
    try:
        with call_scope(context.get("execution_id"), context.get("step")), run_scope(request, oe=None):
            async with asyncio.timeout(spec.timeout_s) as deadline:
                result = await spec.acall(kwargs)
    except SuspendRequested as signal:
        try:
            payload = to_jsonable_python(signal.payload)
        except PydanticSerializationError:
            return {
                "id": call_id,
                "status": "failure",
                "category": TOOL_ERROR,
                "explanation": f"tool {spec.name!r} suspended with a payload that is not JSON-serializable",
            }
        return {"id": call_id, "status": "suspend", "reason": signal.reason, "payload": payload}
    except TimeoutError:
        if not deadline.expired():
            return _raised(call_id, *sys.exc_info()[:2])
        return {
            "id": call_id,
            "status": "failure",
            "category": TIMEOUT,
            "explanation": f"tool {spec.name!r} did not finish within its timeout_s={spec.timeout_s:g}",
        }
    except Exception as exc:
        told = tool_message(exc)
        if told is not None:
            return {"id": call_id, "status": "message", "text": told}
        return _raised(call_id, type(exc), exc)
    try:
        return {"id": call_id, "status": "ok", "result": to_jsonable_python(result)}
    except PydanticSerializationError:
        return {
            "id": call_id,
            "status": "failure",
            "category": TOOL_ERROR,
            "explanation": f"tool {spec.name!r} returned a {type(result).__name__}, "
            "which is not JSON-serializable",
        }


def _raised(call_id: int, kind: Any, exc: BaseException | None) -> dict[str, Any]:
    text = "".join(traceback.format_exception(exc)) if exc is not None else ""
    return {
        "id": call_id,
        "status": "raised",
        "error_type": getattr(kind, "__name__", "Exception"),
        "log": text,
    }


async def serve(sock: socket.socket) -> None:
    reader, writer = await asyncio.open_connection(sock=sock)
    init = await read_frame(reader)
    if init is None or init.get("type") != "init":
        return
    # The secrets arrive only now, after make_undumpable(): they were never in this process's initial
    # environment block, which /proc/<pid>/environ shows.
    os.environ.update(init.get("secrets") or {})
    from agent_runtime.logging_config import install_logging
    from agent_runtime.redaction import redact_logs, redact_std_streams, redactor_for

    install_logging(os.environ)  # the Tool Pod's format, on the same stderr
    redactor = redactor_for([v for v in (init.get("secrets") or {}).values() if v])
    redact_logs(redactor)
    redact_std_streams(redactor)
    try:
        from agent_runtime.sdk import load_app

        app = load_app(init["entrypoint"])
        wanted = set(init.get("tools") or [])
        tools = {name: spec for name, spec in app.tools.items() if name in wanted}
        missing = sorted(wanted - set(tools))
        if missing:
            raise LookupError(f"the entrypoint has no tool(s) {', '.join(missing)}")
    except Exception as exc:
        writer.write(encode_frame({"type": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]}))
        await writer.drain()
        return
    writer.write(encode_frame({"type": "ready", "pid": os.getpid()}))
    await writer.drain()
    running: dict[int, asyncio.Task[dict[str, Any]]] = {}

    async def answer(call_id: int, task: asyncio.Task[dict[str, Any]]) -> None:
        try:
            reply = await task
        except asyncio.CancelledError:
            reply = {"id": call_id, "status": "cancelled"}
        finally:
            running.pop(call_id, None)
        writer.write(encode_frame({"type": "result", **reply}))
        await writer.drain()

    answers: set[asyncio.Task[None]] = set()
    while True:
        frame = await read_frame(reader)
        if frame is None:
            break
        if frame.get("type") == "call":
            task = asyncio.create_task(_run_call(tools, frame))
            running[frame["id"]] = task
            waiter = asyncio.create_task(answer(frame["id"], task))
            answers.add(waiter)
            waiter.add_done_callback(answers.discard)
        elif frame.get("type") == "cancel":
            found = running.get(frame.get("id", -1))
            if found is not None:
                found.cancel()
    for task in list(running.values()):
        task.cancel()


def main(argv: list[str] | None = None) -> int:
    make_undumpable()  # first: before anything of this process is worth reading
    # A Tool Pod running as root starts this as root: without capabilities it cannot read the (non-dumpable)
    # Tool Pod's environment or memory, nor ptrace it, although it keeps uid 0.
    drop_capabilities()
    args = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(args[0]))
    asyncio.run(serve(sock))
    return 0


if __name__ == "__main__":
    sys.exit(main())
