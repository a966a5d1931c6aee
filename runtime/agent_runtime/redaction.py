"""Known secret values taken out of everything that leaves a process, in every encoding they travel in.

One concept for the whole runtime: a `Redactor` is built once per set of secret values (`redactor_for`
caches it) as one compiled regex, and every output path runs it. Each value matches in its

- raw form, and URL-encoded: percent escapes in either case, `%20` or `+` for a space, whatever set of
  characters the encoder kept (`/` kept or not, `quote` or `quote_plus`), also inside JSON and HTML text
  (`\\/`, `\\"`, `\\u00e9`, `&amp;`);
- base64, standard and URL-safe, padded or not: the part of the encoding that depends only on the value's
  own bytes, at each of the three byte offsets the value can sit at inside a longer base64 text (a Basic
  `user:password` header, a token inside a JSON blob that was base64-encoded);
- hex, lower or upper case.

Values shorter than MIN_SECRET_LENGTH (8) characters are never redacted: they would shred ordinary text
(`on`, `1`, `prod`) and are not credentials. The base64 form leaves at most the one or two characters at
each end that mix the value's bits with its neighbours' (a few bits, never the value).

`Redactor.value` redacts a JSON value as its serialized text would show it: keys and numbers too, and a
value split across two strings (`["abcd", "efgh"]` for `abcdefgh`) is cut out of both.
"""

from __future__ import annotations

import atexit
import base64
import bisect
import functools
import io
import logging
import re
import string
import sys
from collections.abc import Iterable
from typing import Any

from agent_runtime.protocol import CallError

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8

_PLAIN = frozenset(string.ascii_letters + string.digits)
# JSON's two-character escapes.
_JSON_SHORT = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_HTML = {"&": ("&amp;",), "<": ("&lt;",), ">": ("&gt;",), '"': ("&quot;",), "'": ("&#39;", "&#x27;")}


def _either_case(text: str) -> str:
    """A regex for `text` whose letters match in either case (hex digits of an escape)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in text)


def _char(char: str, *, base64_alphabet: bool = False) -> str:
    """A regex for one character of a value: itself, or any escape an encoder may have turned it into.

    In a base64 core `+` and `/` also match `-` and `_` (the URL-safe alphabet), so one pattern covers both.
    """
    if char in _PLAIN:
        return char
    options = [re.escape(char), "".join(f"%{_either_case(f'{b:02x}')}" for b in char.encode("utf-8"))]
    if base64_alphabet and char in "+/":
        options.append(re.escape("-" if char == "+" else "_"))
    if char == " ":
        options.append(r"\+")
    if char in _JSON_SHORT:
        options.append(re.escape(_JSON_SHORT[char]))
    if char in _JSON_SHORT or ord(char) < 0x20 or ord(char) > 0x7E:
        options.extend(r"\\u" + _either_case(f"{unit:04x}") for unit in _utf16(char))
    options.extend(re.escape(entity) for entity in _HTML.get(char, ()))
    return "(?:" + "|".join(options) + ")"


def _utf16(char: str) -> list[int]:
    """The \\u escapes JSON writes for one character (two for one outside the basic plane)."""
    units = char.encode("utf-16-be")
    if len(units) == 2:
        return [int.from_bytes(units, "big")]
    return [int.from_bytes(units[:2], "big"), int.from_bytes(units[2:], "big")]


def _base64_cores(data: bytes) -> set[str]:
    """The characters of data's base64 that depend on its bytes alone, at byte offsets 0, 1 and 2."""
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        first = -(-8 * offset // 6)  # the first character whose six bits all come from data
        last = (8 * (offset + len(data))) // 6  # one past the last such character
        core = encoded[first:last]
        cores.add(core)
    return cores


def _form_chars(secret: str) -> list[tuple[str, list[str]]]:
    """(literal, one regex per character) of each form: the raw value, each base64 core, the hex."""
    data = secret.encode("utf-8")
    forms = [(secret, [_char(c) for c in secret])]
    for core in sorted(_base64_cores(data)):
        forms.append((core, [_char(c, base64_alphabet=True) for c in core]))
    forms += [(data.hex(), list(data.hex())), (data.hex().upper(), list(data.hex().upper()))]
    return forms


def _form_patterns(secret: str) -> list[tuple[str, str]]:
    """(literal, regex) of each form: the raw value, one per base64 core (both alphabets), the hex."""
    return [(literal, "".join(chars)) for literal, chars in _form_chars(secret)]


# The start of an escape an encoder may still be writing when a stream is cut (`%2`, `\\u00`, `&am`).
_PARTIAL_ESCAPE = r"(?:%[0-9A-Fa-f]?|\\(?:u[0-9A-Fa-f]{0,3})?|&#?[A-Za-z0-9]{0,5})"


def _prefix_pattern(chars: list[str]) -> str:
    """A regex for any proper prefix of a form, possibly ending in half an escape: `c1(?:c2(?:...)?)?`."""
    pattern = ""
    for char in reversed(chars[:-1]):
        pattern = f"(?:{char}{f'(?:{pattern})?' if pattern else ''}|{_PARTIAL_ESCAPE})"
    return pattern


_MIN_ANCHOR = 4
_RUN = re.compile(r"[A-Za-z0-9]+")


def _anchor(literal: str) -> str | None:
    """The longest run of letters and digits of a form: no encoding above ever changes those characters,
    so every encoded occurrence of the form contains it verbatim (None: too short to pre-filter with)."""
    longest = max(_RUN.findall(literal), key=len, default="")
    return longest if len(longest) >= _MIN_ANCHOR else None


class _Secret:
    """One value's forms: the anchors that pre-filter a text, the pattern that finds them."""

    __slots__ = ("_chars", "_prefix", "anchors", "bytes_anchors", "bytes_pattern", "pattern")

    def __init__(self, secret: str) -> None:
        forms = sorted(_form_chars(secret), key=lambda form: len(form[0]), reverse=True)
        anchors = [_anchor(literal) for literal, _ in forms]
        # None when a form has no anchor: then every text is a candidate.
        self.anchors = None if None in anchors else tuple(sorted(set(anchors)))  # type: ignore[arg-type]
        self.bytes_anchors = None if self.anchors is None else tuple(a.encode() for a in self.anchors)
        source = "|".join("".join(chars) for _, chars in forms)
        self.pattern = re.compile(source)
        self.bytes_pattern = re.compile(source.encode("utf-8"))
        self._chars = [chars for _, chars in forms]
        self._prefix: re.Pattern[str] | None = None

    def prefix(self) -> re.Pattern[str]:
        """A text's tail that may be the start of a form (compiled on first use: only streams need it)."""
        if self._prefix is None:
            self._prefix = re.compile("(?:" + "|".join(_prefix_pattern(c) for c in self._chars) + r")\Z")
        return self._prefix

    def may_be_in(self, text: str) -> bool:
        return self.anchors is None or any(anchor in text for anchor in self.anchors)

    def may_be_in_bytes(self, data: bytes) -> bool:
        return self.bytes_anchors is None or any(anchor in data for anchor in self.bytes_anchors)


class Redactor:
    """Replaces every form of every known secret value; built once per secret set (see `redactor_for`).

    A text is first searched for each form's anchor (a plain substring search in C, the cheap pass that
    clears almost every text); only a secret whose anchor is there runs its compiled pattern.
    """

    __slots__ = ("_held", "longest", "secrets")

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = frozenset(s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH)
        # Longest first: a value that contains another one vanishes whole.
        self._held = tuple(_Secret(s) for s in sorted(self.secrets, key=len, reverse=True))
        # An escape is up to 12 characters per character of a value (a \\u pair): what a reader must keep
        # past a cut to see a whole occurrence (hex, at 2 per byte of up to 4 bytes, is inside that).
        self.longest = max((len(s) for s in self.secrets), default=0) * 12

    def __bool__(self) -> bool:
        return bool(self._held)

    def text(self, text: str) -> str:
        """`text` with every form of every secret replaced by REDACTED."""
        for held in self._held:
            if text and held.may_be_in(text):
                text = held.pattern.sub(REDACTED, text)
        return text

    def data(self, data: bytes) -> bytes:
        """The same for bytes (a provider's body before it is decoded)."""
        for held in self._held:
            if data and held.may_be_in_bytes(data):
                data = held.bytes_pattern.sub(REDACTED.encode(), data)
        return data

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the forms of the secrets occur in `text` (start, end), in no particular order."""
        return [
            match.span()
            for held in self._held
            if text and held.may_be_in(text)
            for match in held.pattern.finditer(text)
        ]

    def unsafe_tail(self, text: str) -> int:
        """Where the tail of `text` that may be the start of a secret begins (`len(text)`: none may be).

        A stream must hold that tail back until more text shows whether the secret follows."""
        window = self.longest
        base = max(0, len(text) - window)
        tail = text[base:]
        start = len(text)
        for held in self._held:
            match = held.prefix().search(tail)
            if match is not None:
                start = min(start, base + match.start())
        return start

    def found(self, text: str) -> bool:
        """True when `text` holds any form of any secret."""
        return any(held.may_be_in(text) and held.pattern.search(text) for held in self._held)

    def value(self, value: Any) -> Any:
        """A JSON value with every secret form cut out of its strings, keys and numbers, also where one is
        split across neighbouring strings. Returns `value` itself when nothing is found (the usual case)."""
        if not self._held:
            return value
        leaves: list[str] = []
        _collect(value, leaves)
        joined = "".join(leaves)
        matches = [
            match.span()
            for held in self._held
            if held.may_be_in(joined)
            for match in held.pattern.finditer(joined)
        ]
        if not matches:
            return value
        ends = []
        total = 0
        for leaf in leaves:
            total += len(leaf)
            ends.append(total)
        spans: dict[int, list[tuple[int, int]]] = {}
        for start, end in matches:
            index = bisect.bisect_right(ends, start)
            while index < len(leaves) and ends[index] - len(leaves[index]) < end:
                begins = ends[index] - len(leaves[index])
                cut = (max(start, begins) - begins, min(end, ends[index]) - begins)
                if cut[0] < cut[1]:
                    spans.setdefault(index, []).append(cut)
                index += 1
        return _rebuild(value, leaves, spans, iter(range(len(leaves))))


def _collect(value: Any, leaves: list[str]) -> None:
    """Every string, key and number of a JSON value in document order (what its serialization shows)."""
    if isinstance(value, str):
        leaves.append(value)
    elif isinstance(value, dict):
        for key, inner in value.items():
            leaves.append(str(key))
            _collect(inner, leaves)
    elif isinstance(value, list | tuple):
        for inner in value:
            _collect(inner, leaves)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        leaves.append(str(value))


def _rebuild(value: Any, leaves: list[str], spans: dict[int, list[tuple[int, int]]], order: Any) -> Any:
    """`value` again, in `_collect`'s order, with each leaf that has spans cut."""
    if isinstance(value, str):
        return _cut(leaves, spans, next(order), value)
    if isinstance(value, dict):
        out = {}
        for key, inner in value.items():
            new_key = _cut(leaves, spans, next(order), key)
            out[new_key] = _rebuild(inner, leaves, spans, order)
        return out
    if isinstance(value, list | tuple):
        return [_rebuild(inner, leaves, spans, order) for inner in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _cut(leaves, spans, next(order), value)
    return value


def _cut(leaves: list[str], spans: dict[int, list[tuple[int, int]]], index: int, original: Any) -> Any:
    cuts = spans.get(index)
    if not cuts:
        return original
    text = leaves[index]
    pieces: list[str] = []
    at = 0
    for start, end in sorted(cuts):
        if end <= at:
            continue  # inside a cut already made (two secrets' matches may overlap)
        if start >= at:
            pieces.append(text[at:start])
            pieces.append(REDACTED)
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


@functools.lru_cache(maxsize=256)
def _cached(secrets: frozenset[str]) -> Redactor:
    return Redactor(secrets)


def redactor_for(secrets: Iterable[str]) -> Redactor:
    """The Redactor of a secret set, compiled once per distinct set."""
    return _cached(frozenset(s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH))


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every form of each secret value in `text` (see the module docstring for the forms)."""
    return redactor_for(secrets).text(text)


def redacted_error(error: CallError, redactor: Redactor) -> CallError:
    """The error with every secret form taken out of its explanation (the same object when none is)."""
    cleaned = redactor.text(error.explanation)[:16_384]
    return error if cleaned == error.explanation else error.model_copy(update={"explanation": cleaned})


class RedactingFormatter(logging.Formatter):
    """Wraps a handler's formatter: the finished line (message, traceback, extra fields) is redacted.

    A formatter rather than a `logging.Filter`, because a filter sees the record before formatting: the
    traceback, the arguments and a structured formatter's fields would be rendered after it ran.
    """

    def __init__(self, inner: logging.Formatter, redactor: Redactor) -> None:
        super().__init__()
        self.inner = inner
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.text(self.inner.format(record))


def redact_logs(redactor: Redactor, *, logger: logging.Logger | None = None) -> None:
    """Make every handler of `logger` (the root logger) redact its lines; again later replaces the set."""
    for handler in (logger or logging.getLogger()).handlers:
        inner = handler.formatter or logging.Formatter()
        if isinstance(inner, RedactingFormatter):
            inner = inner.inner
        handler.setFormatter(RedactingFormatter(inner, redactor))


class RedactingStream(io.TextIOBase):
    """A text stream (the Tool Pod's stdout and stderr) that writes whole lines, redacted: what tenant code
    prints goes through the same pass as the log. A partial line waits for its end (so a value split over
    two writes is still seen whole) unless it grows past 64 KB."""

    _MAX_PENDING = 64 * 1024

    def __init__(self, inner: Any, redactor: Redactor) -> None:
        super().__init__()
        self.inner = inner
        self.redactor = redactor
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        head, newline, rest = self._pending.rpartition("\n")
        if newline:
            self.inner.write(self.redactor.text(head + newline))
            self._pending = rest
        if len(self._pending) > self._MAX_PENDING:
            self.inner.write(self.redactor.text(self._pending))
            self._pending = ""
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        """At exit: the last partial line, redacted."""
        if self._pending:
            self.inner.write(self.redactor.text(self._pending))
            self._pending = ""
        self.inner.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.inner, "encoding", "utf-8"))

    def fileno(self) -> int:
        return int(self.inner.fileno())

    def isatty(self) -> bool:
        return bool(self.inner.isatty())


def redact_std_streams(redactor: Redactor) -> None:
    """Make sys.stdout and sys.stderr redact what is printed (tenant code's `print`), once per process."""
    for name in ("stdout", "stderr"):
        current = getattr(sys, name)
        if isinstance(current, RedactingStream):
            current.redactor = redactor
            continue
        stream = RedactingStream(current, redactor)
        setattr(sys, name, stream)
        atexit.register(stream.close)
