"""Secret redaction for text that arrives in pieces (a model's stream): redact on a window, not per piece.

A secret split across two chunks (`sk-12` then `34abcd`) is in neither chunk alone, so redacting each
chunk misses it. A `WindowRedactor` keeps back the tail of what it was given that may still be the
start of a secret (in any of the encodings `redaction.Redactor` knows), and lets out everything before
it, redacted. What it lets out, joined, is what `Redactor.text` makes of the whole text: the same
cuts, the same markers. Text with no secret prefix at its end goes out at once, so a stream is delayed
only while its tail looks like the beginning of a known value.

`DeltaRedactor` applies one window per text field of a model's stream delta: the content, each extra
text field (`reasoning_content`), and each tool call's arguments.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.redaction import Redactor


class WindowRedactor:
    """One text stream's redaction: `push` each piece and send what it returns; `flush` at the end."""

    __slots__ = ("_held", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""

    @property
    def held(self) -> int:
        """How many characters wait for the next piece (what a reader has not seen yet)."""
        return len(self._held)

    def push(self, piece: str) -> str:
        """The redacted text that may go out now (possibly empty)."""
        if not self._redactor:
            return piece
        text = self._held + piece
        cut = self._safe_cut(text)
        self._held = text[cut:]
        return self._redactor.text(text[:cut]) if cut else ""

    def flush(self) -> str:
        """Whatever is still held, redacted: the stream has ended, no more of a secret can follow."""
        text, self._held = self._held, ""
        return self._redactor.text(text) if text else ""

    def _safe_cut(self, text: str) -> int:
        """The longest prefix of `text` no secret occurrence crosses out of, now or with more text."""
        cut = self._redactor.unsafe_tail(text)
        # A whole occurrence the cut would split stays behind with the tail (it goes out next time).
        moved = True
        while moved:
            moved = False
            for start, end in self._redactor.spans(text):
                if start < cut < end:
                    cut, moved = start, True
        return cut


class DeltaRedactor:
    """The windows of one model stream, keyed by field: `content`, an extra field's name, `tool:<index>`."""

    __slots__ = ("_redactor", "_windows")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._windows: dict[str, WindowRedactor] = {}

    def push(self, field: str, piece: str) -> str:
        window = self._windows.get(field)
        if window is None:
            window = self._windows[field] = WindowRedactor(self._redactor)
        return window.push(piece)

    def flush(self) -> dict[str, str]:
        """Every field's held text (only the non-empty ones)."""
        out = {field: window.flush() for field, window in self._windows.items()}
        return {field: text for field, text in out.items() if text}

    def text(self, value: str) -> str:
        """A field that arrives whole (an id, a tool's name): redacted as it is."""
        return self._redactor.text(value)

    def value(self, value: Any) -> Any:
        return self._redactor.value(value)
