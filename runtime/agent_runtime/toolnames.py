"""Canonical tool names and the names a model sees (Decision 10): one documented, reversible mapping.

Canonical names keep S3's dots (`slack.post_message`, `gsheets.read_range`) in catalogs, the bundle, the
audit log, policy and every API. Chat-completions APIs accept only `^[A-Za-z0-9_-]{1,64}$` as a function
name, so at the model boundary (the tool schemas offered to a model, the tool calls in the history sent to
it, and the tool calls it answers with) each name goes through this module:

- forward (`to_model_name`): a name that already matches the pattern is unchanged; otherwise every `.`
  becomes `__` (`slack.post_message` -> `slack__post_message`). A name that still does not match (another
  character, or longer than 64 after the change) is refused.
- reverse (`ToolNameMap.canonical`): looked up in the map of the tools offered in that call, so a model name
  maps back only to a name that was offered; a name that was not offered comes back unchanged (the OE then
  refuses it as an unknown tool).
- collision check (`ToolNameMap.of`): two canonical names with one model name (`a.b` and a tenant tool
  `a__b`) are refused, naming both, so the reverse is always unique.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

MODEL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SEPARATOR = "__"


class ToolNameError(ValueError):
    """A canonical name with no valid model name, or two canonical names sharing one."""


def to_model_name(name: str) -> str:
    """The name a model sees for the canonical `name` (the forward half of the mapping)."""
    if MODEL_NAME_PATTERN.match(name):
        return name
    mapped = name.replace(".", SEPARATOR)
    if not MODEL_NAME_PATTERN.match(mapped):
        raise ToolNameError(
            f"tool name {name[:80]!r} cannot be shown to a model: after '.' -> '{SEPARATOR}' it must be 1-64 "
            "letters, digits, '_' or '-'"
        )
    return mapped


@dataclass(frozen=True)
class ToolNameMap:
    """The model names of one set of tools, both ways; built only when no two names collide."""

    forward: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    reverse: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, names: Iterable[str]) -> ToolNameMap:
        """Map every name; raise ToolNameError naming both tools when two share a model name."""
        forward: dict[str, str] = {}
        reverse: dict[str, str] = {}
        for name in names:
            if name in forward:
                continue
            model = to_model_name(name)
            other = reverse.get(model)
            if other is not None:
                raise ToolNameError(
                    f"tools {other!r} and {name!r} would both be shown to a model as {model!r}; "
                    "rename one of them"
                )
            forward[name] = model
            reverse[model] = name
        return cls(forward=MappingProxyType(forward), reverse=MappingProxyType(reverse))

    def model(self, name: str) -> str:
        """The model name of a canonical name (mapped even when it was not in the set)."""
        return self.forward.get(name) or to_model_name(name)

    def canonical(self, model_name: str) -> str:
        """The canonical name behind a model name; unchanged when no offered tool has that model name."""
        return self.reverse.get(model_name, model_name)


def check_model_names(names: Iterable[str]) -> None:
    """Raise ToolNameError when these tools cannot all be offered to one model."""
    ToolNameMap.of(names)
