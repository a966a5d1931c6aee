"""Tool names: connector name + `_` + operationId, sanitized, at most 64 characters, unique, stable."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from agent_runtime.connectors.errors import ConnectorError

MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_CONNECTOR_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")


def check_connector_name(name: str, *, field: str = "name") -> str:
    if not isinstance(name, str) or not _CONNECTOR_NAME.match(name):
        raise ConnectorError(
            f"{field}: connector name {str(name)[:60]!r} is invalid; use 1-40 characters from [A-Za-z0-9_-] "
            "starting with a letter (e.g. 'jiradc')"
        )
    return name


def operation_key(method: str, path: str) -> str:
    """The name an operation gets without an operationId: `get_v1_customers_customer`."""
    return f"{method.lower()}_{path}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def tool_name(connector: str, operation: str) -> str:
    """Sanitized; too long a name keeps a prefix plus a short hash of the full name, so it stays stable."""
    full = f"{connector}_{operation}"
    name = _UNSAFE.sub("_", full).strip("_") or "op"
    name = re.sub(r"__+", "_", name)
    if len(name) <= MAX_TOOL_NAME:
        return name
    return f"{name[: MAX_TOOL_NAME - 9].rstrip('_')}_{_digest(full)}"


def assign_names(connector: str, operations: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """(method, path, operation label) -> unique tool name; collisions resolved by method+path order."""
    ordered = sorted(operations, key=lambda op: (op[1], op[0]))
    names: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for method, path, label in ordered:
        candidate = tool_name(connector, label)
        if candidate in taken:
            candidate = disambiguate(candidate, f"{method} {path}", taken)
        taken.add(candidate)
        names[(method, path)] = candidate
    return distinguish_hashed(names)


_HASHED = re.compile(r"^(?P<stem>.+)_(?P<hash>[0-9a-f]{8})$")
_MAX_WORD = 12


def _path_words(method: str, path: str) -> list[str]:
    words = [
        word.lower()
        for segment in path.split("/")
        if segment and "{" not in segment
        for word in re.split(r"[^A-Za-z0-9]+", segment)
        if word
    ]
    return [*words, method.lower()]


def distinguish_hashed(names: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """Names cut to a stem plus a hash that would differ only in the hash get a word of their path that
    the others lack (orgs vs repos) before it, so the model never sees two names alike but for 8 hex."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for key, name in names.items():
        found = _HASHED.match(name)
        if found is not None:
            groups.setdefault(found.group("stem"), []).append(key)
    result = dict(names)
    for stem, keys in groups.items():
        if len(keys) < 2:
            continue
        words = {key: _path_words(*key) for key in keys}
        for key in keys:
            others = [set(words[k]) for k in keys if k != key]
            word = next((w for w in words[key] if not all(w in o for o in others)), key[0].lower())
            word = word[:_MAX_WORD]
            digest = names[key].rsplit("_", 1)[1]
            room = MAX_TOOL_NAME - len(digest) - len(word) - 2
            result[key] = f"{stem[:room].rstrip('_')}_{word}_{digest}"
    return result


def disambiguate(name: str, salt: str, taken: set[str]) -> str:
    """A deterministic variant of `name` not in `taken`."""
    for attempt in range(1000):
        suffix = _digest(f"{salt}#{attempt}" if attempt else salt)
        candidate = f"{name[: MAX_TOOL_NAME - 9].rstrip('_')}_{suffix}"
        if candidate not in taken:
            return candidate
    raise ConnectorError(f"cannot make tool name {name!r} unique")  # pragma: no cover - 1000 hash collisions
