"""Cutting a knowledge document into chunks (pure): markdown by its headings, plain text by paragraphs.

A chunk is at most `max_chars` characters of whole paragraphs where it can be (a paragraph longer than
that is cut at sentence ends, then at spaces). Consecutive chunks of one section share `overlap_chars` of
text, so a sentence that answers a question is never only half in every chunk. Each markdown chunk knows
the headings above it (`headings`); its text starts with them, so the embedding sees what the section is
about even when the paragraph itself does not say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ContentType = Literal["markdown", "text"]

DEFAULT_MAX_CHARS = 1200
DEFAULT_OVERLAP_CHARS = 150
MIN_MAX_CHARS = 200

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Chunk:
    """One piece of a document: its text (headings first), where it sits, and its number in the document."""

    index: int
    text: str
    headings: tuple[str, ...]
    start: int  # character offset of the chunk's body in the document


@dataclass(frozen=True)
class _Section:
    headings: tuple[str, ...]
    body: str
    start: int


def _markdown_sections(text: str) -> list[_Section]:
    """The document split at its headings (never inside a fenced code block), each with its heading path."""
    sections: list[_Section] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    body_start = 0
    offset = 0
    fenced = False

    def close() -> None:
        body = "".join(lines)
        if body.strip():
            sections.append(_Section(tuple(title for _, title in path), body, body_start))

    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line.rstrip("\r\n"))
        if heading is not None:
            close()
            level = len(heading.group(1))
            path[:] = [(lvl, title) for lvl, title in path if lvl < level]
            path.append((level, heading.group(2).strip()))
            lines = []
            body_start = offset + len(line)
        else:
            lines.append(line)
        offset += len(line)
    close()
    if not sections and path:  # headings only: keep them, so the document is still found by its title
        sections.append(_Section(tuple(title for _, title in path), " / ".join(t for _, t in path), 0))
    return sections


def _split_long(text: str, limit: int) -> list[str]:
    """A paragraph longer than `limit` cut at sentence ends, and a sentence longer than that at spaces."""
    parts: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > limit:
            cut = sentence.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            parts.append(sentence[:cut])
            sentence = sentence[cut:].lstrip()
        if sentence:
            parts.append(sentence)
    return parts


def _pieces(body: str, limit: int) -> list[tuple[int, str]]:
    """(offset of its paragraph, text) pieces of at most `limit` characters: paragraphs where they fit."""
    pieces: list[tuple[int, str]] = []
    for match in re.finditer(r"\S(?:.*?\S)?(?=\n[ \t]*\n|\s*\Z)", body, flags=re.DOTALL):
        paragraph = match.group(0)
        parts = [paragraph] if len(paragraph) <= limit else _split_long(paragraph, limit)
        pieces += [(match.start(), part) for part in parts]
    return pieces


def _tail(text: str, size: int) -> str:
    """The last `size` characters of `text`, starting at a word."""
    if size <= 0 or len(text) <= size:
        return text if size > 0 else ""
    tail = text[-size:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < size // 2 else tail


def _windows(body: str, *, max_chars: int, overlap_chars: int) -> list[tuple[int, str]]:
    """Pieces packed into windows of at most `max_chars`, each starting with the previous one's tail."""
    windows: list[tuple[int, str]] = []
    current: list[str] = []
    current_start = 0
    size = 0
    for start, piece in _pieces(body, max_chars - overlap_chars):
        if current and size + 2 + len(piece) > max_chars:
            text = "\n\n".join(current)
            windows.append((current_start, text))
            carried = _tail(text, overlap_chars)
            current, size, current_start = ([carried] if carried else []), len(carried), start
        if not current:
            current_start = start
        current.append(piece)
        size += len(piece) + 2
    if current:
        windows.append((current_start, "\n\n".join(current)))
    return windows


def chunk_document(
    text: str,
    *,
    content_type: ContentType = "markdown",
    title: str | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
) -> list[Chunk]:
    """The chunks of one document, in order; `title` (e.g. the file name) heads every chunk's text."""
    if max_chars < MIN_MAX_CHARS:
        raise ValueError(f"max_chars must be at least {MIN_MAX_CHARS}, got {max_chars}")
    if not 0 <= overlap_chars <= max_chars // 2:
        raise ValueError(f"overlap_chars must be 0 to max_chars/2 ({max_chars // 2}), got {overlap_chars}")
    if content_type == "markdown":
        sections = _markdown_sections(text)
    else:
        sections = [_Section((), text, 0)] if text.strip() else []
    chunks: list[Chunk] = []
    for section in sections:
        headings = section.headings
        prefix_parts = [title] if title and (not headings or headings[0] != title) else []
        prefix = " > ".join([*prefix_parts, *headings])
        room = max(max_chars - len(prefix) - 2, MIN_MAX_CHARS // 2) if prefix else max_chars
        for start, window in _windows(
            section.body, max_chars=room, overlap_chars=min(overlap_chars, room // 2)
        ):
            body = f"{prefix}\n\n{window}" if prefix else window
            chunks.append(Chunk(index=len(chunks), text=body, headings=headings, start=section.start + start))
    return chunks
