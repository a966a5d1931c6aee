"""The Tool Pod side of a deep agent's file system (LG-19): one governed tool per backend operation.

`app.enable_deep_agents()` registers these tools (they run in the Tool Pod, never in the AER); each body
performs its operation with deepagents' own `FilesystemBackend` in virtual mode over the files root, a
directory of the Tool Pod. The root is resolved in the Tool Pod process (at its start-up build, or at the
first call of a tool worker): `DEEP_AGENT_FILES_ROOT`, else `<temp dir>/agent-engine/files/<app name>`.
Importing this module reads no path (LG-17). Results travel as JSON (`to_wire`), bytes as base64.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

FILES_ROOT_ENV = "DEEP_AGENT_FILES_ROOT"
# Operation -> the Tool Pod tool that runs it; the names the audit and policies see.
FILE_TOOLS = {
    "ls": "files_ls",
    "read": "files_read",
    "write": "files_write",
    "edit": "files_edit",
    "delete": "files_delete",
    "glob": "files_glob",
    "grep": "files_grep",
    "upload_files": "files_upload",
    "download_files": "files_download",
}
_BYTES = "__b64__"


def files_root(app_name: str, env: Mapping[str, str] | None = None) -> Path:
    """The directory a deep agent's files live in, in this Tool Pod (created)."""
    environ = os.environ if env is None else env
    configured = environ.get(FILES_ROOT_ENV, "").strip()
    default = Path(tempfile.gettempdir()) / "agent-engine" / "files" / app_name
    root = Path(configured) if configured else default
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


@cache
def _backend(root: str) -> Any:
    from deepagents.backends import FilesystemBackend

    return FilesystemBackend(root_dir=root, virtual_mode=True)


def to_wire(value: Any) -> Any:
    """A backend result (dataclasses, lists, bytes) as JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: to_wire(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return {_BYTES: base64.b64encode(value).decode("ascii")}
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    return value


def from_wire(value: Any) -> Any:
    """`to_wire` undone, dataclasses left as dicts (the caller builds its result type)."""
    if isinstance(value, Mapping):
        if set(value) == {_BYTES}:
            return base64.b64decode(value[_BYTES])
        return {k: from_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    return value


def register(app: Any, *, sensitive: frozenset[str] = frozenset()) -> None:
    """Register the file tools on `app`; operations named in `sensitive` are held for review."""
    name = str(app.name)

    def backend() -> Any:
        return _backend(str(files_root(name, env=app.environ)))

    def files_ls(path: str) -> Any:
        """List the files and directories under a path of the agent's file system."""
        return to_wire(backend().ls(path))

    def files_read(file_path: str, offset: int = 0, limit: int = 2000) -> Any:
        """Read a file of the agent's file system."""
        return to_wire(backend().read(file_path, offset=offset, limit=limit))

    def files_write(file_path: str, content: str) -> Any:
        """Write a new file in the agent's file system."""
        return to_wire(backend().write(file_path, content))

    def files_edit(file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> Any:
        """Replace text in a file of the agent's file system."""
        return to_wire(backend().edit(file_path, old_string, new_string, replace_all=replace_all))

    def files_delete(file_path: str) -> Any:
        """Delete a file of the agent's file system."""
        return to_wire(backend().delete(file_path))

    def files_glob(pattern: str, path: str | None = None) -> Any:
        """Find the files matching a glob pattern in the agent's file system."""
        return to_wire(backend().glob(pattern, path=path))

    def files_grep(
        pattern: str, path: str | None = None, glob: str | None = None, max_count: int | None = None
    ) -> Any:
        """Search the agent's file system for a literal text."""
        options: dict[str, Any] = {"path": path, "glob": glob}
        if max_count is not None:
            options["max_count"] = max_count
        return to_wire(backend().grep(pattern, **options))

    def files_upload(files: list[dict[str, Any]]) -> Any:
        """Upload files (path and base64 content) to the agent's file system."""
        pairs = [(str(f["path"]), from_wire(f["content"])) for f in files]
        return to_wire(backend().upload_files(pairs))

    def files_download(paths: list[str]) -> Any:
        """Download files of the agent's file system (base64 content)."""
        return to_wire(backend().download_files(list(paths)))

    bodies = [
        files_ls,
        files_read,
        files_write,
        files_edit,
        files_delete,
        files_glob,
        files_grep,
        files_upload,
        files_download,
    ]
    # The root is the env's: a body may read it, and nothing else (issue 36).
    for body in bodies:
        op = next(o for o, tool in FILE_TOOLS.items() if tool == body.__name__)
        app.tool(
            body,
            sensitive=op in sensitive,
            required_secrets=[FILES_ROOT_ENV] if FILES_ROOT_ENV in app.environ else [],
        )
