"""`mysql.query`'s guard: read-only-ness decided by a MySQL-dialect parser (sqlglot, compiled by sqlglotc).

sqlglot is not the server's own grammar, so the text it parses is first made unambiguous by the guard's
exact MySQL lexer (`_sqlguard.lex`): executable comments `/*! */` are refused, every comment is removed
(MySQL's comment rules, `--` needing whitespace and `/* */` not nesting, are then never sqlglot's to
decide), and a `--` left in the code is refused. `%s` placeholders become `?`. Then sqlglot parses one
statement and the tree must be a SELECT (UNION, WITH, TABLE, VALUES forms), EXPLAIN without ANALYZE, or
SHOW; refused anywhere in it: anything sqlglot could only keep as raw text (`Command`), a data-modifying
node, INTO (variables or files), row locks, `:=` assignments, and any call to a denied function (locks,
session state, files, replication waits, sequences, sleeping loops). Function names in backticks are
identifiers the parser resolves, so `` `GET_LOCK`(...) `` is seen. The second lines are the READ ONLY
transaction and a fresh connection per call (no lock, variable or LAST_INSERT_ID outlives a call).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from agent_runtime.connectors.builtin._sqlguard import SqlRefused, lex

DENIED_FUNCTIONS = frozenset(
    [
        # named locks (held by the session)
        "GET_LOCK",
        "RELEASE_LOCK",
        "RELEASE_ALL_LOCKS",
        # session state for the next caller
        "LAST_INSERT_ID",
        "SETVAL",
        "NEXTVAL",
        "LASTVAL",
        # file access
        "LOAD_FILE",
        # replication waits and loops that only burn the server
        "MASTER_POS_WAIT",
        "SOURCE_POS_WAIT",
        "MASTER_GTID_WAIT",
        "WAIT_FOR_EXECUTED_GTID_SET",
        "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS",
        "BENCHMARK",
        # UDFs that run programs (lib_mysqludf_sys)
        "SYS_EXEC",
        "SYS_EVAL",
        "SYS_GET",
        "SYS_SET",
    ]
)
# Node kinds a read may never contain.
_DENIED_NODES = frozenset(
    [
        "Command",
        "Insert",
        "Update",
        "Delete",
        "Merge",
        "Create",
        "Drop",
        "Alter",
        "Set",
        "SetItem",
        "Into",
        "Lock",
        "PropertyEQ",
        "Transaction",
        "Commit",
        "Rollback",
        "LoadData",
        "Use",
        "Kill",
        "Grant",
        "Revoke",
        "TruncateTable",
        "Analyze",
        "Copy",
        "Pragma",
        "NextValueFor",
    ]
)
_TOP = frozenset(["Select", "Union", "Intersect", "Except", "Subquery", "Values", "Show", "Describe"])


def mysql_text(sql: str) -> str:
    """The statement as sqlglot should see it: comments removed, `%s` placeholders as `?`."""
    if "\x00" in sql:
        raise SqlRefused("the statement contains a NUL character")
    lexed = lex(sql, "mysql")
    code = "".join(piece for piece, literal in lexed.segments if not literal)
    if "--" in code:
        raise SqlRefused("'--' not followed by a space is ambiguous; write '- -' for two minus signs")
    if len(lexed.statements) > 1:
        raise SqlRefused("only one statement is allowed: ';' may only end it (chaining is refused)")
    return "".join(
        piece if literal else piece.replace("%s", "?") for piece, literal in _joined(lexed.segments)
    )


def bind(sql: str, params: Sequence[Any], escape: Any) -> str:
    """The statement with each `%s` outside literals replaced by its escaped parameter.

    pymysql would run `sql % params`, so a `%` in a literal (`DATE_FORMAT(d, '%Y')`) next to a parameter
    broke the call; here only placeholders outside literals are touched.
    """
    lexed = lex(sql, "mysql")
    values = iter(params)
    count = 0
    out: list[str] = []
    for piece, literal in _joined(lexed.segments):
        if literal or "%s" not in piece:
            out.append(piece)
            continue
        parts = piece.split("%s")
        out.append(parts[0])
        for part in parts[1:]:
            count += 1
            value = next(values, _MISSING)
            if value is _MISSING:
                raise SqlRefused(f"the statement has more %s placeholders than the {len(params)} params")
            out.append(escape(value))
            out.append(part)
    if count != len(params):
        raise SqlRefused(f"the statement has {count} %s placeholders but {len(params)} params were given")
    return "".join(out)


_MISSING = object()


def _joined(segments: tuple[tuple[str, bool], ...]) -> list[tuple[str, bool]]:
    """Adjacent code pieces joined, so a `%` and its `s` are never in two pieces."""
    out: list[tuple[str, bool]] = []
    for piece, literal in segments:
        if out and not literal and not out[-1][1]:
            out[-1] = (out[-1][0] + piece, False)
        else:
            out.append((piece, literal))
    return out


def parse_read(sql: str) -> Any:
    """The one statement's sqlglot tree if it is an allowed read; raises SqlRefused."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    text = mysql_text(sql)
    try:
        trees = [tree for tree in _dialect().parse(text) if tree is not None]
    except SqlglotError as exc:
        raise SqlRefused(f"the MySQL parser refused it: {_first_line(exc)}") from None
    except (RecursionError, ValueError) as exc:
        raise SqlRefused(f"the MySQL parser refused it ({type(exc).__name__})") from None
    if not trees:
        raise SqlRefused("the statement is empty")
    if len(trees) > 1:
        raise SqlRefused("only one statement is allowed: ';' may only end it (chaining is refused)")
    tree = trees[0]
    kind = type(tree).__name__
    values_call = isinstance(tree, exp.Anonymous) and str(tree.name).upper() == "VALUES"
    if kind not in _TOP and not values_call:
        raise SqlRefused(
            f"a query must be SELECT, WITH, TABLE, VALUES, EXPLAIN or SHOW, not {kind.upper()}; "
            "use execute to write"
        )
    if isinstance(tree, exp.Describe):
        style = str(tree.args.get("style") or "").upper()
        if "ANALYZE" in style:
            raise SqlRefused("EXPLAIN ANALYZE runs the statement; use EXPLAIN without ANALYZE")
    for node in tree.walk():
        name = type(node).__name__
        if name in _DENIED_NODES:
            raise SqlRefused(f"{_node_label(name)} is not allowed in a read-only query")
        if isinstance(node, exp.Func):
            for function in _function_names(node, exp):
                if function == "LAST_INSERT_ID" and not node.expressions:
                    continue  # reading it is harmless (and a fresh session's is 0)
                if function in DENIED_FUNCTIONS:
                    raise SqlRefused(f"{function}() is not allowed in a read-only query")
    return tree


@functools.cache
def _dialect() -> Any:
    """sqlglot's MySQL dialect, built once (looking it up by name costs a tenth of a parse)."""
    from sqlglot.dialects.mysql import MySQL

    return MySQL()


def _function_names(node: Any, exp: Any) -> set[str]:
    if isinstance(node, exp.Anonymous):
        return {str(node.name).upper()}
    return {name.upper() for name in type(node).sql_names()}


def _node_label(name: str) -> str:
    return {
        "PropertyEQ": "an assignment (:=)",
        "Into": "INTO (variables, tables or files)",
        "Lock": "a row lock (FOR UPDATE / LOCK IN SHARE MODE)",
        "Command": "a statement the parser keeps as raw text",
    }.get(name, name.upper())


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split("\n", 1)[0].split())[:200]
