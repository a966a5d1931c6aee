"""A connector bundle: an index plus one compiled file per connector, content-addressed by digest."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_runtime.connectors.definitions import ToolDefinitions
from agent_runtime.connectors.documents import parse_document_text
from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.connectors.framework import BuiltinConnectorDefs, is_builtin_text

BUNDLE_INDEX = "index.yaml"
BUNDLE_FORMAT = 1
_FILE_NAME = re.compile(r"^[-._a-zA-Z0-9]+$")


class BundleEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    file: str
    sha256: str
    tools: int
    # A built-in connector's type; absent for OpenAPI ones, so their indexes keep their bytes.
    type: str | None = None


class BundleIndex(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: int = BUNDLE_FORMAT
    connectors: list[BundleEntry]


@dataclass(frozen=True)
class Bundle:
    """Flat file name -> bytes (ConfigMap keys), always with the index; `digest` covers every byte."""

    files: dict[str, bytes]
    digest: str
    tool_count: int
    connectors: list[ToolDefinitions] = field(default_factory=list, compare=False, repr=False)
    builtins: list[BuiltinConnectorDefs] = field(default_factory=list, compare=False, repr=False)


def build_bundle(
    connectors: Sequence[ToolDefinitions], builtins: Sequence[BuiltinConnectorDefs] = ()
) -> Bundle:
    """Pure: same connectors -> byte-identical files and the same digest. Built-in connectors are files
    like any other (`kind: builtin`, their type in the index entry)."""
    files: dict[str, bytes] = {}
    entries: list[BundleEntry] = []
    seen: set[str] = set()
    both: list[ToolDefinitions | BuiltinConnectorDefs] = [*connectors, *builtins]
    for connector in sorted(both, key=lambda c: c.name):
        if connector.name in seen:
            raise ConnectorError(
                f"bundle: two connectors are named {connector.name!r}; give each connector a unique name"
            )
        seen.add(connector.name)
        file_name = f"{connector.name}.yaml"
        content = connector.dumps().encode()
        files[file_name] = content
        entries.append(
            BundleEntry(
                name=connector.name,
                file=file_name,
                sha256=hashlib.sha256(content).hexdigest(),
                tools=len(connector.tools),
                type=connector.type if isinstance(connector, BuiltinConnectorDefs) else None,
            )
        )
    index = BundleIndex(connectors=entries)
    index_bytes = (json.dumps(index.model_dump(mode="json", exclude_none=True), indent=1) + "\n").encode()
    files[BUNDLE_INDEX] = index_bytes
    # The index lists every file's sha256, so hashing it covers all content.
    digest = hashlib.sha256(index_bytes).hexdigest()
    ordered = dict(sorted(files.items()))
    return Bundle(
        files=ordered,
        digest=digest,
        tool_count=sum(e.tools for e in entries),
        connectors=list(sorted(connectors, key=lambda c: c.name)),
        builtins=list(sorted(builtins, key=lambda c: c.name)),
    )


def write_bundle(bundle: Bundle, directory: str | Path) -> Path:
    """Write every file of the bundle into `directory`; return the index path."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for name, content in bundle.files.items():
        (target / name).write_bytes(content)
    return target / BUNDLE_INDEX


def read_bundle(index_path: str | Path) -> tuple[list[ToolDefinitions], str]:
    """Load what `write_bundle` wrote: every path relative to the index and inside its directory."""
    connectors, _, digest = read_full_bundle(index_path)
    return connectors, digest


def read_full_bundle(index_path: str | Path) -> tuple[list[ToolDefinitions], list[BuiltinConnectorDefs], str]:
    """`read_bundle` with the built-in connectors too: (OpenAPI connectors, built-ins, digest)."""
    index_file = Path(index_path)
    try:
        index_bytes = index_file.read_bytes()
    except FileNotFoundError:
        raise ConnectorError(
            f"AGENTIC_CONNECTOR_BUNDLE_PATH: {str(index_file)!r} does not exist; point it at the bundle's "
            f"{BUNDLE_INDEX}"
        ) from None
    except IsADirectoryError:
        raise ConnectorError(
            f"AGENTIC_CONNECTOR_BUNDLE_PATH: {str(index_file)!r} is a directory; name its {BUNDLE_INDEX}"
        ) from None
    data = parse_document_text(index_bytes.decode("utf-8"), field=f"bundle index {index_file.name}")
    try:
        index = BundleIndex.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = ".".join(str(p) for p in error["loc"])
        raise ConnectorError(f"bundle index {index_file.name}: field {location}: {error['msg']}") from None
    if index.format_version != BUNDLE_FORMAT:
        raise ConnectorError(
            f"bundle index: format_version {index.format_version} is not supported "
            f"(expected {BUNDLE_FORMAT}); "
            "rebuild the bundle with this version"
        )
    root = Path(os.path.realpath(index_file.parent))
    connectors = []
    builtins: list[BuiltinConnectorDefs] = []
    for entry in index.connectors:
        file = contained_path(root, entry.file, field=f"bundle index entry {entry.name!r} file")
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConnectorError(
                f"bundle index entry {entry.name!r}: file {entry.file!r} is missing next to the index"
            ) from None
        # The index's hashes make the bundle tamper-evident: a file changed after the build is refused.
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != entry.sha256:
            raise ConnectorError(
                f"bundle index entry {entry.name!r}: file {entry.file!r} does not match the sha256 the index "
                "lists; the bundle was changed after it was built: rebuild it"
            )
        if entry.type is not None or is_builtin_text(text):
            builtins.append(BuiltinConnectorDefs.loads(text, where=f"bundle file {entry.file}"))
            continue
        connectors.append(ToolDefinitions.loads(text, where=f"bundle file {entry.file}"))
    return connectors, builtins, hashlib.sha256(index_bytes).hexdigest()


def contained_path(root: Path, relative: str, *, field: str) -> Path:
    """`root/relative`, refusing absolute paths, `..` and symlinks that resolve outside `root`."""
    if not relative or os.path.isabs(relative) or relative.startswith(("/", "\\")):
        raise ConnectorError(f"{field}: {relative!r} must be a relative path inside {root}")
    parts = Path(relative).parts
    if ".." in parts:
        raise ConnectorError(f"{field}: {relative!r} contains '..'; paths must stay inside {root}")
    real_root = Path(os.path.realpath(root))
    resolved = Path(os.path.realpath(real_root / relative))
    if resolved != real_root and real_root not in resolved.parents:
        raise ConnectorError(f"{field}: {relative!r} resolves outside {root} (a symlink?); keep it inside")
    return resolved
