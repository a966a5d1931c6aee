"""OpenAPI 3.0 schema objects -> self-contained JSON Schema (refs inlined, `nullable` translated)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agent_runtime.connectors.errors import ConnectorError, DocumentTooComplexError, ExternalReferenceError

DESCRIPTION_LIMIT = 1024
_MAX_REF_CHAIN = 64
_MAX_DEPTH = 12  # deeper nesting than this is collapsed: it bounds output size on recursive documents
# Inlining `$ref`s multiplies: ten properties each referring to a schema with ten more, six levels deep, is a
# 3 KB document whose one input schema has a million nodes. These bound one schema and the whole document.
MAX_SCHEMA_NODES = 50_000
MAX_DOCUMENT_SCHEMA_NODES = 1_000_000

# Keywords that carry over unchanged (JSON Schema validation vocabulary shared with OpenAPI 3.0).
_KEEP = frozenset(
    (
        "title",
        "format",
        "default",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "minimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxProperties",
        "minProperties",
        "deprecated",
    )
)
_SUBSCHEMA_LISTS = ("allOf", "oneOf", "anyOf")


_BREAK_TAGS = re.compile(r"</p>|<br\s*/?>|</li>", re.IGNORECASE)
_FORMATTING_TAGS = re.compile(r"</?(?:p|code|strong|em|b|i|ul|ol|li|a)(?:\s[^<>]*)?/?>", re.IGNORECASE)


def plain_description(text: str, limit: int = DESCRIPTION_LIMIT) -> str:
    """Provider prose without HTML formatting tags (Stripe wraps everything in <p>), trimmed."""
    text = _FORMATTING_TAGS.sub("", _BREAK_TAGS.sub("\n", text))
    return trim_text(re.sub(r"\n{3,}", "\n\n", text), limit)


def trim_text(text: str, limit: int = DESCRIPTION_LIMIT) -> str:
    """Whitespace-trimmed text at most `limit` characters, cut at a word boundary."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


class SchemaTranslator:
    """Translates schemas of one document; remembers expanded `$ref`s that did not hit a cycle."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._document = document
        self._cache: dict[str, tuple[dict[str, Any], int]] = {}  # ref -> (schema, its node count)
        self._nodes = 0  # nodes of every schema translated so far, references inlined

    def resolve_ref(self, ref: Any, *, where: str) -> tuple[str, Any]:
        """The target of a local `$ref`; external references are refused."""
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise ExternalReferenceError(
                f"{where}: $ref {str(ref)[:100]!r} points outside this document; only local references "
                "('#/components/...') are supported. "
                "Inline or bundle the referenced schema into the document."
            )
        target: Any = self._document
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise ConnectorError(
                    f"{where}: $ref {ref!r} names nothing in this document; fix the reference"
                )
        return ref, target

    def deref(self, obj: Any, *, where: str) -> Any:
        """Follow `$ref` chains on a non-schema object (parameter, request body, media type)."""
        seen: set[str] = set()
        while isinstance(obj, Mapping) and "$ref" in obj:
            ref, obj = self.resolve_ref(obj["$ref"], where=where)
            if ref in seen:
                raise ConnectorError(f"{where}: $ref {ref!r} refers to itself; fix the reference cycle")
            seen.add(ref)
        return obj

    def translate(self, schema: Any, *, where: str) -> dict[str, Any]:
        """A JSON Schema equivalent of an OpenAPI schema, with every reference inlined.

        Over MAX_SCHEMA_NODES raises ConnectorError (that operation is skipped); once the document's schemas
        pass MAX_DOCUMENT_SCHEMA_NODES, DocumentTooComplexError (the whole document is refused)."""
        result, _, nodes = self._translate(schema, where=where, active=(), depth=0)
        if nodes > MAX_SCHEMA_NODES:
            raise ConnectorError(
                f"{where}: the schema expands to {nodes} nodes once its $refs are inlined (the limit is "
                f"{MAX_SCHEMA_NODES}); simplify the schema or leave the operation out of expose.allow"
            )
        self._nodes += nodes
        if self._nodes > MAX_DOCUMENT_SCHEMA_NODES:
            raise DocumentTooComplexError(
                f"{where}: the document's schemas expand to more than {MAX_DOCUMENT_SCHEMA_NODES} nodes once "
                "their $refs are inlined; keep only the paths the agent needs in the document"
            )
        return result

    def _translate(
        self, schema: Any, *, where: str, active: tuple[str, ...], depth: int
    ) -> tuple[dict[str, Any], bool, int]:
        """The translated schema, whether a cycle or depth cut happened inside it, and its node count."""
        if schema is True or schema is None:
            return {}, False, 1
        if not isinstance(schema, Mapping):
            raise ConnectorError(f"{where}: a schema must be an object, got {type(schema).__name__}")
        if "$ref" in schema:
            ref, target = self.resolve_ref(schema["$ref"], where=where)
            if ref in active:
                name = ref.rsplit("/", 1)[-1]
                return {"type": "object", "description": f"(recursive: {name})"}, True, 3
            if len(active) >= _MAX_REF_CHAIN:  # a chain of distinct refs is bounded like nesting is
                return {"description": "(reference chain truncated)"}, True, 2
            cached = self._cache.get(ref)
            if cached is not None:
                return cached[0], False, cached[1]
            result, cut, nodes = self._translate(target, where=ref, active=(*active, ref), depth=depth)
            if not cut:
                self._cache[ref] = (result, nodes)
            return result, cut, nodes
        if depth > _MAX_DEPTH:
            return {"description": "(nesting truncated)"}, True, 2
        out: dict[str, Any] = {}
        cut = False
        nodes = 1 + len(schema)  # this object and its keywords; subschemas add theirs below
        deeper = depth + 1
        for key, value in schema.items():
            if key in _KEEP:
                out[key] = value
            elif key == "type":
                out["type"] = value
            elif key == "description":
                if isinstance(value, str) and value.strip():
                    out["description"] = trim_text(value)
            elif key == "properties":
                if not isinstance(value, Mapping):
                    raise ConnectorError(f"{where}/properties: must be an object of schemas")
                props: dict[str, Any] = {}
                for name, sub in value.items():
                    props[name], sub_cut, sub_nodes = self._translate(
                        sub, where=f"{where}/properties/{name}", active=active, depth=deeper
                    )
                    cut = cut or sub_cut
                    nodes += sub_nodes
                    if nodes > MAX_SCHEMA_NODES:  # stop early: the caller refuses it anyway
                        return out, cut, nodes
                out["properties"] = props
            elif key == "required":
                if value:
                    out["required"] = list(value)
            elif key in ("items", "additionalProperties", "not"):
                if isinstance(value, bool):
                    out[key] = value
                else:
                    out[key], sub_cut, sub_nodes = self._translate(
                        value, where=f"{where}/{key}", active=active, depth=deeper
                    )
                    cut = cut or sub_cut
                    nodes += sub_nodes
            elif key in _SUBSCHEMA_LISTS:
                if not isinstance(value, list):
                    raise ConnectorError(f"{where}/{key}: must be a list of schemas")
                subs = []
                for index, sub in enumerate(value):
                    translated, sub_cut, sub_nodes = self._translate(
                        sub, where=f"{where}/{key}/{index}", active=active, depth=deeper
                    )
                    subs.append(translated)
                    cut = cut or sub_cut
                    nodes += sub_nodes
                    if nodes > MAX_SCHEMA_NODES:
                        return out, cut, nodes
                out[key] = subs
            elif key in ("exclusiveMinimum", "exclusiveMaximum"):
                # OpenAPI 3.0 uses draft-4 booleans; JSON Schema 2019+ wants the bound itself.
                bound = schema.get("minimum" if key == "exclusiveMinimum" else "maximum")
                if value is True and bound is not None:
                    out[key] = bound
                elif not isinstance(value, bool):
                    out[key] = value
        if (
            out.get("exclusiveMinimum") is not None
            and "minimum" in out
            and schema.get("exclusiveMinimum") is True
        ):
            del out["minimum"]
        if (
            out.get("exclusiveMaximum") is not None
            and "maximum" in out
            and schema.get("exclusiveMaximum") is True
        ):
            del out["maximum"]
        if schema.get("nullable") is True:
            out = _nullable(out)
        return out, cut, nodes


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`nullable: true` -> null admitted by type, enum, or an `anyOf` alternative."""
    kind = schema.get("type")
    if isinstance(kind, str):
        schema = {**schema, "type": [kind, "null"]}
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        return schema
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    constraining = set(schema) - {"description", "title", "default", "deprecated"}
    if not constraining:
        return schema  # unconstrained already admits null
    if constraining == {"anyOf"}:
        if {"type": "null"} in schema["anyOf"]:
            return schema
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    described = {k: schema[k] for k in ("description", "title") if k in schema}
    inner = {k: v for k, v in schema.items() if k not in described}
    return {"anyOf": [inner, {"type": "null"}], **described}
