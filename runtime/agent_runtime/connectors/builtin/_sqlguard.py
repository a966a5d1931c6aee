"""The SQL guard shared by the postgres and mysql connectors (C-06, Decision 16).

`check_read` is the first line of `*.query`: it hands the statement to the engine's grammar
(`_pg_readonly`: PostgreSQL's own parser; `_mysql_readonly`: a MySQL-dialect parser fed the text this
module's lexer has stripped of comments). The second lines are the READ ONLY transaction every read runs
in and the session reset after it, so a write or side effect the parse does not see still fails or ends.

`check_single` is `*.execute`'s: comments stripped, one statement, no transaction control (the connector
runs the statement in a transaction of its own).

The lexer follows each dialect exactly where it matters to the split: PostgreSQL nests block comments and
has dollar quoting, E'' strings and "" identifiers; MySQL has backslash escapes in '' and "" strings,
backticked identifiers, `#` comments, and treats `--` as a comment only when whitespace follows. The
connectors pin the session settings this assumes (standard_conforming_strings on; sql_mode without
ANSI_QUOTES and NO_BACKSLASH_ESCAPES)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["postgres", "mysql"]

TRANSACTION_CONTROL = frozenset(
    ["BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "END", "ABORT", "PREPARE", "DEALLOCATE"]
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
# Runs of characters that cannot start a literal or a comment, skipped in one step (speed only).
_PLAIN = {
    "postgres": re.compile(r"(?:[^'\"$/\-eE]|[eE](?!')|-(?!-)|/(?!\*))+"),
    "mysql": re.compile(r"(?:[^'\"`/\-#]|-(?!-)|/(?!\*))+"),
}
# A quoted literal from its opening quote: doubled quotes stay inside; with backslash escapes, so does \x.
_QUOTED = {
    (quote, backslash): re.compile(
        rf"{quote}(?:[^{quote}\\]|\\.|{quote}{quote})*+{quote}"
        if backslash
        else rf"{quote}(?:[^{quote}]|{quote}{quote})*+{quote}",
        re.DOTALL,
    )
    for quote in ("'", '"', "`")
    for backslash in (False, True)
}
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


class SqlRefused(ValueError):
    """The guard refused the statement; the message says why (never quoting a literal's content)."""


@dataclass(frozen=True)
class Lexed:
    """A statement as the guard sees it: its code with literals and comments blanked, split on `;`."""

    code: str  # literals replaced by `''`/`""`, comments by a space
    statements: list[str]  # code of each `;`-separated statement, empty ones dropped
    segments: tuple[tuple[str, bool], ...] = ()  # the text with comments as a space: (piece, is_literal)

    @property
    def stripped(self) -> str:
        """The statement with every comment replaced by a space and every literal kept as written."""
        return "".join(piece for piece, _ in self.segments)


def lex(sql: str, dialect: Dialect) -> Lexed:
    """Blank out literals and comments; refuse unterminated ones and MySQL executable comments."""
    out: list[str] = []
    segments: list[tuple[str, bool]] = []
    i, n = 0, len(sql)
    mysql = dialect == "mysql"
    plain = _PLAIN[dialect]
    while i < n:
        run = plain.match(sql, i)
        if run is not None:
            out.append(run.group())
            segments.append((run.group(), False))
            i = run.end()
            continue
        c = sql[i]
        nxt = sql[i + 1] if i + 1 < n else ""
        start = i
        if c == "-" and nxt == "-" and (not mysql or i + 2 >= n or sql[i + 2] in " \t\r\n\f\v"):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
            segments.append((" ", False))
            continue
        if mysql and c == "#":
            end = sql.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
            segments.append((" ", False))
            continue
        if c == "/" and nxt == "*":
            if mysql and (sql.startswith("/*!", i) or sql.startswith("/*M!", i)):
                raise SqlRefused(
                    "MySQL executable comments (/*! ... */) are refused: MySQL runs their content"
                )
            i = _skip_block_comment(sql, i, nested=not mysql)
            out.append(" ")
            segments.append((" ", False))
            continue
        if c == "'" or (mysql and c == '"'):
            i = _skip_quoted(sql, i, quote=c, backslash=mysql)
            out.append("''")
            segments.append((sql[start:i], True))
            continue
        if not mysql and c in "eE" and nxt == "'" and not _word_before(sql, i):
            i = _skip_quoted(sql, i + 1, quote="'", backslash=True)
            out.append("''")
            segments.append((sql[start:i], True))
            continue
        if c == '"' or (mysql and c == "`"):
            i = _skip_quoted(sql, i, quote=c, backslash=False)
            out.append('""')
            segments.append((sql[start:i], True))
            continue
        if not mysql and c == "$":
            match = _DOLLAR_TAG.match(sql, i)
            if match and not _word_before(sql, i):
                tag = match.group(0)
                end = sql.find(tag, match.end())
                if end < 0:
                    raise SqlRefused("a dollar-quoted string is not closed")
                i = end + len(tag)
                out.append("''")
                segments.append((sql[start:i], True))
                continue
        out.append(c)
        segments.append((c, False))
        i += 1
    code = "".join(out)
    statements = [part for part in code.split(";") if part.strip()]
    return Lexed(code=code, statements=statements, segments=tuple(segments))


def _word_before(sql: str, i: int) -> bool:
    """Whether `sql[i]` continues a word (then `E'` or `$x$` is not a literal's start)."""
    return i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$")


def _skip_block_comment(sql: str, i: int, *, nested: bool) -> int:
    depth, j, n = 0, i, len(sql)
    while j < n:
        if sql.startswith("/*", j):
            depth = depth + 1 if nested or depth == 0 else depth
            j += 2
        elif sql.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    raise SqlRefused("a /* comment */ is not closed")


def _skip_quoted(sql: str, i: int, *, quote: str, backslash: bool) -> int:
    """Index after the literal starting at `sql[i]` (a doubled quote stays inside; so may a backslash)."""
    match = _QUOTED[(quote, backslash)].match(sql, i)
    if match is not None:
        return match.end()
    kind = "quoted identifier" if quote in '"`' and not backslash else "string literal"
    raise SqlRefused(f"a {kind} is not closed")


def _one_statement(lexed: Lexed) -> str:
    if not lexed.statements:
        raise SqlRefused("the statement is empty")
    if len(lexed.statements) > 1:
        raise SqlRefused("only one statement is allowed: ';' may only end it (chaining is refused)")
    return lexed.statements[0]


def _words(code: str) -> list[str]:
    return [w.upper() for w in _WORD.findall(code)]


def check_read(sql: str, dialect: Dialect) -> None:
    """Refuse anything but one read (SELECT, WITH, TABLE, VALUES, EXPLAIN, SHOW) by the engine's grammar."""
    # Imported here: the parser guards use this module's lexer.
    if dialect == "postgres":
        from agent_runtime.connectors.builtin._pg_readonly import parse_read as parse_postgres

        parse_postgres(sql)
    else:
        from agent_runtime.connectors.builtin._mysql_readonly import check_query

        check_query(sql)


def check_single(sql: str, dialect: Dialect) -> str:
    """One statement, no transaction control; returns its first keyword (e.g. INSERT)."""
    statement = _one_statement(lex(sql, dialect))
    words = _words(statement)
    first = next(iter(words), "")
    if first in TRANSACTION_CONTROL:
        raise SqlRefused(f"{first} is refused: each statement already runs in a transaction of its own")
    return first
