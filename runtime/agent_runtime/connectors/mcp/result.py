"""An MCP tool result as the model is sent it: one form, within the 200,000-byte cap. Pure.

A server may answer a call both ways: `content` blocks (text, images...) and `structuredContent` (FastMCP
sends every result of a tool with an output schema so, the text block holding the same JSON). Passing both
on would show the model each result twice and spend the cap twice, so one form is sent:

- the structured one when the tool declares an `outputSchema` and the result carries it (text blocks
  dropped as its copy; other blocks, an image say, kept);
- else the content (the structured copy dropped), unless the result has no content at all.

Then the cap: whole blocks kept while they fit, a text block cut at the end, `truncated: true`, and each
block left out named in `dropped` (`index`, `type`, `bytes`; `structuredContent` with no index). Structured
content over the cap gives way to the text, cut, so the model still sees the start of the answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agent_runtime.connectors.policy import MAX_RESPONSE_BYTES

Form = Literal["structured", "content"]
# Room kept for the envelope (keys, `truncated`, `dropped`), so the whole result sent stays within the cap.
ENVELOPE_BYTES = 2048
MAX_DROPPED_NAMED = 16  # past these, one `{"type": "more", "count": n}` entry
_CUT_MARGIN = 200  # a cut text block's own keys and escapes


def chosen_form(result: Mapping[str, Any], *, declares_output: bool) -> Form:
    """Which form of `result` the model sees: structured when the tool declares an output schema and the
    result carries structured content (or when that is all it carries), else its content blocks."""
    has_structured = result.get("structuredContent") is not None
    content = result.get("content")
    has_content = isinstance(content, list) and bool(content)
    return "structured" if has_structured and (declares_output or not has_content) else "content"


def model_result(
    result: Mapping[str, Any], *, declares_output: bool, cap: int = MAX_RESPONSE_BYTES
) -> dict[str, Any]:
    """`{structuredContent, truncated}` or `{content, truncated}` (with `dropped` when something was left
    out), its JSON at most `cap` bytes."""
    raw = result.get("content")
    blocks: list[Any] = raw if isinstance(raw, list) else []
    budget = cap - ENVELOPE_BYTES
    if chosen_form(result, declares_output=declares_output) == "structured":
        structured = result["structuredContent"]
        size = json_size(structured)
        others = [(i, b) for i, b in enumerate(blocks) if not _is_text(b)]
        if size <= budget:
            out: dict[str, Any] = {"structuredContent": structured, "truncated": False}
            if others:
                kept, dropped = _fit(others, budget - size)
                out["content"] = kept
                _mark(out, dropped)
            return out
        # Over the cap: its text copy, cut, tells the model more than nothing does.
        kept, dropped = _fit(list(enumerate(blocks)), budget)
        out = {"content": kept, "truncated": True}
        _mark(out, [{"index": None, "type": "structuredContent", "bytes": size}, *dropped], force=True)
        return out
    kept, dropped = _fit(list(enumerate(blocks)), budget)
    out = {"content": kept, "truncated": False}
    _mark(out, dropped)
    return out


def json_size(value: Any) -> int:
    """Bytes of `value` as JSON (UTF-8, compact), what a block costs of the cap."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text"


def _fit(indexed: Sequence[tuple[int, Any]], budget: int) -> tuple[list[Any], list[dict[str, Any]]]:
    """The blocks that fit `budget` in order (one text block cut to fit), and those left out, named."""
    kept: list[Any] = []
    dropped: list[dict[str, Any]] = []
    cut = False
    for index, block in indexed:
        size = json_size(block)
        if size <= budget:
            kept.append(block)
            budget -= size
            continue
        if _is_text(block) and budget > _CUT_MARGIN and not cut:
            kept.append(_cut_text(block, budget - _CUT_MARGIN))
            budget, cut = 0, True
            dropped.append({"index": index, "type": "text", "bytes": size, "cut": True})
            continue
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        dropped.append({"index": index, "type": str(kind)[:40], "bytes": size})
    return kept, dropped


def _cut_text(block: dict[str, Any], budget: int) -> dict[str, Any]:
    """`block` with the longest head of its text whose JSON fits `budget` bytes: escaping counts, since a
    quote or a control character takes two to six bytes in JSON."""
    text = str(block.get("text", ""))
    head = text.encode()[:budget].decode("utf-8", errors="ignore")
    low, high = 0, len(head)
    if json_size({**block, "text": head}) <= budget:
        return {**block, "text": head}
    while low < high:  # the longest prefix that fits: json_size grows with the prefix
        middle = (low + high + 1) // 2
        if json_size({**block, "text": head[:middle]}) <= budget:
            low = middle
        else:
            high = middle - 1
    return {**block, "text": head[:low]}


def _mark(out: dict[str, Any], dropped: list[dict[str, Any]], *, force: bool = False) -> None:
    """`truncated` and `dropped` on `out`; a cut block counts as truncated but is not listed as dropped."""
    left_out = [d for d in dropped if not d.get("cut")]
    if dropped or force:
        out["truncated"] = True
    if left_out:
        named = left_out[:MAX_DROPPED_NAMED]
        if len(left_out) > MAX_DROPPED_NAMED:
            named.append({"index": None, "type": "more", "count": len(left_out) - MAX_DROPPED_NAMED})
        out["dropped"] = named
