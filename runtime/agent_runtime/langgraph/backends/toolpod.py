"""AgentEngineToolPodBackend (LG-19): a deepagents backend whose every operation is a governed tool call.

The deep agent's virtual file system (`ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`, skills
discovery and loading) calls this backend in the AER; each operation goes to the OE as the Tool Pod tool
`backends/tool_sandbox.py` registered for it, so it is policed, audited, held when sensitive and replayed
from the OE's cache, and the files live in the Tool Pod, never on the AER's disk. A tool failure or a
denial comes back as the operation's `error` (the model reads it); a hold surfaces as LangGraph's
`interrupt()`; a platform failure ends the turn as for any governed call (LG-08).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from deepagents.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)

from agent_runtime.langgraph.backends.tool_sandbox import FILE_TOOLS, from_wire, to_wire
from agent_runtime.langgraph.durable_tools import tool_error_text
from agent_runtime.langgraph.subagents import calling_agent
from agent_runtime.langgraph.suspend import current_graph_run, surface_suspension
from agent_runtime.langgraph.sync_calls import run_from_worker_thread
from agent_runtime.sdk.errors import PolicyDeniedException, SuspendRequested, ToolExecutionError
from agent_runtime.sdk.secure import call_tool

T = TypeVar("T")


class _Refused(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


async def _call(op: str, args: dict[str, Any]) -> Any:
    tool = FILE_TOOLS[op]
    try:
        with calling_agent():  # the subagent asking, for the OE's audit (subagents.py)
            return from_wire(await call_tool(tool, {k: v for k, v in args.items() if v is not None}))
    except SuspendRequested as signal:
        surface_suspension(signal)
    except (ToolExecutionError, PolicyDeniedException) as exc:
        raise _Refused(f"{tool}: {tool_error_text(exc)}") from None


def _sync(make: Callable[[], Coroutine[Any, Any, T]], what: str) -> T:
    run = current_graph_run()
    return run_from_worker_thread(make, loop=run.loop if run is not None else None, what=what)


class AgentEngineToolPodBackend(BackendProtocol):
    """The deep agent's file system in the Tool Pod, every operation through the OE."""

    async def als(self, path: str) -> LsResult:
        try:
            return LsResult(**await _call("ls", {"path": path}))
        except _Refused as refused:
            return LsResult(error=refused.text)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        try:
            args = {"file_path": file_path, "offset": offset, "limit": limit}
            return ReadResult(**await _call("read", args))
        except _Refused as refused:
            return ReadResult(error=refused.text)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        try:
            return WriteResult(**await _call("write", {"file_path": file_path, "content": content}))
        except _Refused as refused:
            return WriteResult(error=refused.text)

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        args = {"file_path": file_path, "old_string": old_string, "new_string": new_string}
        try:
            return EditResult(**await _call("edit", {**args, "replace_all": replace_all}))
        except _Refused as refused:
            return EditResult(error=refused.text)

    async def adelete(self, file_path: str) -> DeleteResult:
        try:
            return DeleteResult(**await _call("delete", {"file_path": file_path}))
        except _Refused as refused:
            return DeleteResult(error=refused.text)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        try:
            return GlobResult(**await _call("glob", {"pattern": pattern, "path": path}))
        except _Refused as refused:
            return GlobResult(error=refused.text)

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        args = {"pattern": pattern, "path": path, "glob": glob, "max_count": max_count}
        try:
            return GrepResult(**await _call("grep", args))
        except _Refused as refused:
            return GrepResult(error=refused.text)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        wire = [{"path": path, "content": to_wire(content)} for path, content in files]
        try:
            return [FileUploadResponse(**r) for r in await _call("upload_files", {"files": wire})]
        except _Refused as refused:
            return [FileUploadResponse(path=path, error=refused.text) for path, _ in files]  # type: ignore[arg-type]

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        try:
            return [FileDownloadResponse(**r) for r in await _call("download_files", {"paths": list(paths)})]
        except _Refused as refused:
            return [FileDownloadResponse(path=path, error=refused.text) for path in paths]  # type: ignore[arg-type]

    # Sync graphs: the call runs on the run's event loop (sync_calls.py).
    def ls(self, path: str) -> LsResult:
        return _sync(lambda: self.als(path), "files ls")

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return _sync(lambda: self.aread(file_path, offset, limit), "files read")

    def write(self, file_path: str, content: str) -> WriteResult:
        return _sync(lambda: self.awrite(file_path, content), "files write")

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        return _sync(lambda: self.aedit(file_path, old_string, new_string, replace_all), "files edit")

    def delete(self, file_path: str) -> DeleteResult:
        return _sync(lambda: self.adelete(file_path), "files delete")

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        return _sync(lambda: self.aglob(pattern, path), "files glob")

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        return _sync(lambda: self.agrep(pattern, path, glob, max_count=max_count), "files grep")

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return _sync(lambda: self.aupload_files(files), "files upload")

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return _sync(lambda: self.adownload_files(paths), "files download")
