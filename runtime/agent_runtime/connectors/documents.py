"""Reading local JSON/YAML documents: URLs refused, strict JSON values checked, large YAML loaded fast.

Every document is bounded before and while it is parsed: at most `MAX_DOCUMENT_BYTES`, and YAML aliases may
not expand it beyond `MAX_ALIAS_RATIO` times its own node count (a kilobyte of nested aliases, "billion
laughs", would otherwise become gigabytes once anything walks it).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import yaml
import yaml.cyaml

from agent_runtime.connectors.errors import ConnectorError, DocumentTooComplexError

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

# Plain scalars that YAML 1.1 (PyYAML's resolver) reads as something other than a string, by exact spelling.
_WORDS: dict[str, Any] = {
    **dict.fromkeys(("null", "Null", "NULL", "~", ""), None),
    **dict.fromkeys(("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"), True),
    **dict.fromkeys(("false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"), False),
}
_MAYBE_NUMBER_OR_DATE = frozenset("0123456789+-.")
_RESOLVER = yaml.resolver.Resolver()
# Larger than any public API description we know of (Stripe's, Azure's); a ConfigMap holds at most 1 MiB.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
# Aliases may add this many nodes per node written out, and always at least _MIN_ALIAS_NODES.
MAX_ALIAS_RATIO = 10
_MIN_ALIAS_NODES = 100_000
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


def refuse_url(reference: str, *, field: str) -> None:
    """Connectors read local files only; a URL where a file is expected is an error, never a download."""
    if _URL.match(reference.strip()):
        raise ConnectorError(
            f"{field}: {reference.split('?')[0][:80]!r} is a URL; the connector core reads local files only "
            "and never downloads. Save the document next to tool.yaml and reference it by relative path."
        )


def read_local_bytes(path: str | Path, *, field: str) -> bytes:
    """A local file's bytes; a URL, a missing file, a directory or a file over MAX_DOCUMENT_BYTES is a
    ConnectorError naming `field`."""
    refuse_url(str(path), field=field)
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise DocumentTooComplexError(_too_large(field, size))
        return file.read_bytes()
    except FileNotFoundError:
        raise ConnectorError(f"{field}: file {str(file)!r} does not exist; check the path") from None
    except IsADirectoryError:
        raise ConnectorError(f"{field}: {str(file)!r} is a directory; name the file") from None
    except OSError as exc:
        raise ConnectorError(f"{field}: cannot read {str(file)!r} ({exc.__class__.__name__})") from None


def read_local_text(path: str | Path, *, field: str) -> str:
    """A local UTF-8 text file, with the same errors as `read_local_bytes`."""
    return _decode(read_local_bytes(path, field=field), path=path, field=field)


def _decode(raw: bytes, *, path: str | Path, field: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConnectorError(f"{field}: {str(path)!r} is not UTF-8 text") from None


def read_document_file(path: str | Path, *, field: str = "document", with_fingerprint: bool = False) -> Any:
    """Parse a local JSON or YAML file; with `with_fingerprint`, return (data, sha256 hex of the bytes)."""
    raw = read_local_bytes(path, field=field)
    data = parse_document_text(_decode(raw, path=path, field=field), field=f"{field} {Path(path).name}")
    return (data, hashlib.sha256(raw).hexdigest()) if with_fingerprint else data


def _too_large(field: str, size: int) -> str:
    return (
        f"{field}: {size} bytes is over the {MAX_DOCUMENT_BYTES}-byte limit for a document; "
        "keep only the API's paths the agent needs, or compile it once with "
        "`python -m agent_runtime.connectors compile` and use the smaller compiled catalog"
    )


def parse_document_text(text: str, *, field: str = "document") -> Any:
    """JSON when it is JSON (fast), else YAML; a syntax error names where it is.

    Over MAX_DOCUMENT_BYTES (counted in characters, at most the bytes), or YAML whose aliases expand too
    far, raises DocumentTooComplexError before anything is built from it."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise DocumentTooComplexError(_too_large(field, len(text)))
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass  # YAML flow style also starts with a brace
        except RecursionError:
            raise ConnectorError(f"{field}: nested too deeply to be a document; flatten it") from None
    try:
        return load_yaml(text)
    except _AliasBomb as bomb:
        raise DocumentTooComplexError(f"{field}: {bomb}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid syntax"
        raise ConnectorError(f"{field}: not valid JSON or YAML{where}: {problem}") from None


class _AliasBomb(yaml.YAMLError):
    """Aliases that expand the document too far, or refer to the node that contains them."""


def load_yaml(text: str) -> Any:
    """YAML 1.1 with PyYAML's safe semantics, built straight from libyaml's events.

    PyYAML's CSafeLoader spends most of its time composing and constructing nodes in Python; building
    containers directly from the event stream is about five times faster on a multi-megabyte OpenAPI file.
    Aliases share the anchored object, so building stays linear; what they would expand to is counted as
    they come and bounded (MAX_ALIAS_RATIO), since walking or serializing the result would expand them.
    """
    if not getattr(yaml, "__with_libyaml__", False):
        data = yaml.load(text, Loader=yaml.SafeLoader)
        _check_expansion(data)
        return data
    return _build_from_events(yaml.cyaml.CParser(text))


def _alias_limit(written: int) -> int:
    return max(_MIN_ALIAS_NODES, MAX_ALIAS_RATIO * written)


def _refuse_expansion(expanded: int, written: int) -> _AliasBomb:
    return _AliasBomb(
        f"YAML aliases (*name) would expand the document to more than {expanded} nodes from {written} "
        f"written ones (the limit is {MAX_ALIAS_RATIO} times the document); write the repeated parts out "
        "or use $ref instead of aliases"
    )


_RECURSIVE = "a YAML alias refers to the node that contains it; a document cannot be recursive"


def _check_expansion(data: Any) -> None:
    """The pure-Python loader's result: its expanded size, each shared object counted once per use."""
    sizes: dict[int, int] = {}
    written = 0

    def size(obj: Any, open_ids: frozenset[int]) -> int:
        nonlocal written
        if not isinstance(obj, dict | list):
            return 1
        if id(obj) in open_ids:
            raise _AliasBomb(
                "a YAML alias refers to the node that contains it; a document cannot be recursive"
            )
        if id(obj) not in sizes:
            written += 1 + len(obj)
            children = obj.values() if isinstance(obj, dict) else obj
            inner = open_ids | {id(obj)}
            sizes[id(obj)] = 1 + sum(size(child, inner) for child in children)
            if sizes[id(obj)] - written > _alias_limit(written):
                raise _refuse_expansion(sizes[id(obj)], written)
        return sizes[id(obj)]

    size(data, frozenset())


def _build_from_events(parser: Any) -> Any:
    get_event = parser.get_event
    scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
    map_start, seq_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
    map_end, seq_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
    no_key = object()
    anchors: dict[str, Any] = {}
    # Nodes the document would have with every alias written out, and the nodes it really has: an alias
    # adds its anchor's expanded size (known once the anchored node is closed).
    expanded = written = 0
    expanded_sizes: dict[str, int] = {}
    stack: list[tuple[Any, Any, bool, int, str | None]] = []
    current: Any = None
    key: Any = no_key
    in_map = False
    root: Any = None
    documents = 0
    words = _WORDS
    numeric_start = _MAYBE_NUMBER_OR_DATE

    def place(value: Any) -> None:
        nonlocal key, root
        if current is None:
            root = value
        elif in_map:
            if key is no_key:
                key = value
            else:
                current[key] = value
                key = no_key
        else:
            current.append(value)

    while True:
        event = get_event()
        kind = type(event)
        if kind is scalar:
            expanded += 1
            written += 1
            value = event.value
            if event.tag is None and event.implicit[0]:  # plain scalar: the common case, resolved inline
                word = words.get(value, no_key)
                if word is not no_key:
                    value = word
                elif value[:1] in numeric_start:
                    value = (
                        int(value)
                        if value.isdigit() and (value[0] != "0" or value == "0")
                        else _scalar(event)
                    )
            elif event.tag is not None:
                value = _scalar(event)
            if event.anchor:
                anchors[event.anchor] = value
                expanded_sizes[event.anchor] = 1
            if in_map:
                if key is no_key:
                    key = value
                else:
                    current[key] = value
                    key = no_key
            elif current is None:
                root = value
            else:
                current.append(value)
        elif kind is map_start or kind is seq_start:
            container: Any = {} if kind is map_start else []
            if event.tag not in (None, "!", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"):
                raise yaml.constructor.ConstructorError(
                    None, None, f"unsupported tag {event.tag}", event.start_mark
                )
            if event.anchor:
                anchors[event.anchor] = container
                expanded_sizes.pop(event.anchor, None)  # open: an alias to it now would be recursive
            place(container)
            expanded += 1
            written += 1
            stack.append((current, key, in_map, expanded, event.anchor))
            current, key, in_map = container, no_key, kind is map_start
        elif kind is map_end or kind is seq_end:
            if in_map and "<<" in current:
                _merge_keys(current)
            current, key, in_map, opened_at, anchor = stack.pop()
            key = no_key if in_map else key
            if anchor:
                expanded_sizes[anchor] = expanded - opened_at + 1
        elif kind is alias:
            if event.anchor not in anchors:
                raise yaml.composer.ComposerError(
                    None, None, f"unknown alias {event.anchor}", event.start_mark
                )
            size = expanded_sizes.get(event.anchor)
            if size is None:
                raise _AliasBomb(f"*{event.anchor}: {_RECURSIVE}")
            expanded += size
            if expanded - written > _alias_limit(written):
                raise _refuse_expansion(expanded, written)
            place(anchors[event.anchor])
        elif kind is yaml.DocumentStartEvent:
            documents += 1
            if documents > 1:
                raise yaml.composer.ComposerError(
                    None, None, "expected a single document, found another", event.start_mark
                )
        elif event is None or kind is yaml.StreamEndEvent:
            return root


def _merge_keys(mapping: dict[Any, Any]) -> None:
    """YAML 1.1 merge keys (`<<: *base`): keys already present win."""
    merged = mapping.pop("<<")
    for source in merged if isinstance(merged, list) else [merged]:
        if isinstance(source, dict):
            for key, value in source.items():
                mapping.setdefault(key, value)


def _scalar(event: Any) -> Any:
    value: str = event.value
    tag = event.tag
    if tag is None or tag == "!":
        if not event.implicit[0]:
            return value  # quoted or block scalar: always a string
        if value in _WORDS:
            return _WORDS[value]
        if value[0] not in _MAYBE_NUMBER_OR_DATE:
            return value
        tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    if tag == "tag:yaml.org,2002:str":
        return value
    node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark)
    try:
        return _CONSTRUCTOR.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError:
        raise
    except Exception as exc:
        raise yaml.constructor.ConstructorError(None, None, str(exc), event.start_mark) from None


def check_json_value(value: Any, *, where: str) -> None:
    """Raise naming the first path whose value is not strict JSON (timestamps, NaN, non-string keys...)."""
    # Fast path in C: a strict JSON value survives a round trip unchanged (int keys would come back as
    # strings, dates and NaN fail to encode). Only a failure pays for the walk that names the path.
    try:
        if json.loads(json.dumps(value, allow_nan=False)) == value:
            return
    except (TypeError, ValueError):
        pass
    _find_non_json(value, where=where)


def _find_non_json(value: Any, *, where: str) -> None:
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or kind is int or item is None:
            continue
        if kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    raise ConnectorError(
                        f"{path}: key {key!r} is a {type(key).__name__}; JSON object keys must be strings "
                        "(quote the key)"
                    )
                stack.append((child, f"{path}/{key}"))
        elif kind is list:
            stack.extend((child, f"{path}/{index}") for index, child in enumerate(item))
        elif kind is float:
            if not math.isfinite(item):
                raise ConnectorError(
                    f"{path}: {item!r} is not a JSON number; use a finite number or a string"
                )
        else:
            raise ConnectorError(
                f"{path}: {item!r} is a {kind.__name__}, not a JSON value; quote it to make it a string"
            )
