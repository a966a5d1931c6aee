"""The SQL guard shared by the postgres and mysql connectors (C-06, Decision 16). Pure text checks.

`check_read` is the first line of `*.query`: comments stripped first (MySQL's executable `/*! */` comments
refused, since MySQL runs them), one statement (a `;` inside a string or quoted identifier does not count),
SELECT or WITH first, and no data-modifying keyword or side-effecting function outside literals. The second
line is the READ ONLY transaction every read runs in, so a write the text check does not see still fails.

`check_single` is `*.execute`'s: the same stripping, one statement, no transaction control (the connector
runs the statement in a transaction of its own).

The lexer follows each dialect exactly where it matters to the split: PostgreSQL nests block comments and
has dollar quoting, E'' strings and "" identifiers; MySQL has backslash escapes in '' and "" strings,
backticked identifiers, `#` comments, and treats `--` as a comment only when whitespace follows. The
connectors pin the session settings this assumes (standard_conforming_strings on; sql_mode without
ANSI_QUOTES and NO_BACKSLASH_ESCAPES).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["postgres", "mysql"]

# C-06's list (Decision 16), with transaction control and the statements MySQL runs outside a table.
FORBIDDEN_KEYWORDS = frozenset(
    [
        "INSERT",
        "UPDATE",
        "DELETE",
        "MERGE",
        "UPSERT",
        "REPLACE",
        "CREATE",
        "ALTER",
        "DROP",
        "TRUNCATE",
        "GRANT",
        "REVOKE",
        "COPY",
        "CALL",
        "EXEC",
        "EXECUTE",
        "DO",
        "LOCK",
        "VACUUM",
        "REINDEX",
        "CLUSTER",
        "REFRESH",
        "SET",
        "RESET",
        "COMMENT",
        "SECURITY",
        "LOAD",
        "HANDLER",
        "RENAME",
        "INTO",
        "COMMIT",
        "ROLLBACK",
        "SAVEPOINT",
        "RELEASE",
        "PREPARE",
        "DEALLOCATE",
        "BEGIN",
        "ABORT",
        "NOTIFY",
        "LISTEN",
        "UNLISTEN",
        "DISCARD",
        "CHECKPOINT",
        "ANALYZE",
        "ANALYSE",
        "IMPORT",
        "OUTFILE",
        "DUMPFILE",
        "PROCEDURE",
        "SHUTDOWN",
        "KILL",
        "FLUSH",
        "PURGE",
        "INSTALL",
        "UNINSTALL",
    ]
)
# Functions that read the server's files, reach other servers, run SQL given as text, or change state.
FORBIDDEN_FUNCTIONS = frozenset(
    [
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_dir",
        "pg_stat_file",
        "pg_ls_logdir",
        "pg_ls_waldir",
        "pg_ls_tmpdir",
        "lo_import",
        "lo_export",
        "lo_unlink",
        "lo_create",
        "lo_creat",
        "lo_from_bytea",
        "lo_put",
        "lo_open",
        "lo_write",
        "lo_truncate",
        "dblink",
        "dblink_exec",
        "dblink_connect",
        "dblink_connect_u",
        "dblink_open",
        "dblink_send_query",
        "postgres_fdw",
        "query_to_xml",
        "query_to_xml_and_xmlschema",
        "query_to_xmlschema",
        "cursor_to_xml",
        "cursor_to_xmlschema",
        "table_to_xml",
        "table_to_xml_and_xmlschema",
        "database_to_xml",
        "schema_to_xml",
        "set_config",
        "nextval",
        "setval",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_switch_wal",
        "pg_create_restore_point",
        "pg_promote",
        "pg_logical_emit_message",
        "pg_notify",
        "pg_advisory_lock",
        "pg_advisory_xact_lock",
        "pg_advisory_lock_shared",
        "pg_try_advisory_lock",
        "pg_try_advisory_xact_lock",
        "txid_current",
        "pg_current_xact_id",
        "load_file",
        "sys_exec",
        "sys_eval",
        "get_lock",
        "release_lock",
        "release_all_locks",
        "benchmark",
        "master_pos_wait",
        "source_pos_wait",
    ]
)
TRANSACTION_CONTROL = frozenset(
    ["BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "END", "ABORT", "PREPARE", "DEALLOCATE"]
)
READ_STARTS = frozenset(("SELECT", "WITH"))
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


def lex(sql: str, dialect: Dialect) -> Lexed:
    """Blank out literals and comments; refuse unterminated ones and MySQL executable comments."""
    out: list[str] = []
    i, n = 0, len(sql)
    mysql = dialect == "mysql"
    plain = _PLAIN[dialect]
    while i < n:
        run = plain.match(sql, i)
        if run is not None:
            out.append(run.group())
            i = run.end()
            continue
        c = sql[i]
        nxt = sql[i + 1] if i + 1 < n else ""
        if c == "-" and nxt == "-" and (not mysql or i + 2 >= n or sql[i + 2] in " \t\r\n\f\v"):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
            continue
        if mysql and c == "#":
            end = sql.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
            continue
        if c == "/" and nxt == "*":
            if mysql and (sql.startswith("/*!", i) or sql.startswith("/*M!", i)):
                raise SqlRefused(
                    "MySQL executable comments (/*! ... */) are refused: MySQL runs their content"
                )
            i = _skip_block_comment(sql, i, nested=not mysql)
            out.append(" ")
            continue
        if c == "'" or (mysql and c == '"'):
            i = _skip_quoted(sql, i, quote=c, backslash=mysql)
            out.append("''")
            continue
        if not mysql and c in "eE" and nxt == "'" and not _word_before(sql, i):
            i = _skip_quoted(sql, i + 1, quote="'", backslash=True)
            out.append("''")
            continue
        if c == '"' or (mysql and c == "`"):
            i = _skip_quoted(sql, i, quote=c, backslash=False)
            out.append('""')
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
                continue
        out.append(c)
        i += 1
    code = "".join(out)
    statements = [part for part in code.split(";") if part.strip()]
    return Lexed(code=code, statements=statements)


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
    """Refuse anything but one read-only SELECT/WITH statement (raises SqlRefused)."""
    statement = _one_statement(lex(sql, dialect))
    words = _words(statement)
    first = next(iter(words), "")
    if first not in READ_STARTS:
        raise SqlRefused(
            f"a query must start with SELECT or WITH, not {first or 'nothing'}; use execute to write"
        )
    for index, word in enumerate(words):
        if word in FORBIDDEN_KEYWORDS:
            raise SqlRefused(
                f"{word} is not allowed in a read-only query (quote an identifier with that name)"
            )
        if word.lower() in FORBIDDEN_FUNCTIONS:
            raise SqlRefused(f"{word.lower()} is not allowed in a read-only query")
        if word == "FOR" and index + 1 < len(words) and words[index + 1] in ("SHARE", "KEY", "NO"):
            raise SqlRefused("row locks (FOR SHARE, FOR KEY SHARE) are not allowed in a read-only query")
    if ":=" in statement:
        raise SqlRefused("assignments (:=) are not allowed in a read-only query")


def check_single(sql: str, dialect: Dialect) -> str:
    """One statement, no transaction control; returns its first keyword (e.g. INSERT)."""
    statement = _one_statement(lex(sql, dialect))
    words = _words(statement)
    first = next(iter(words), "")
    if first in TRANSACTION_CONTROL:
        raise SqlRefused(f"{first} is refused: each statement already runs in a transaction of its own")
    return first
