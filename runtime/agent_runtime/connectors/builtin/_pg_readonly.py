"""`postgres.query`'s guard: read-only-ness decided by PostgreSQL's own grammar (libpg_query via pglast).

The statement is parsed exactly as the server parses it (quoted and Unicode-escaped identifiers are
resolved by the parser, so `U&"pg_terminate_backend"(...)` is seen by its name). Allowed: one SELECT
(with WITH, TABLE or VALUES forms), EXPLAIN without ANALYZE of such a statement, and SHOW. Refused
anywhere in the tree: a data-modifying statement (a writing CTE), SELECT INTO, row locks (FOR UPDATE /
SHARE), and any call to a function in the denylist (administration, session state, locks, large objects,
file access, dblink, SQL run from text, WAL and sequence writes). Why a denylist and not an allowlist is in
docs/connectors.md: an allowlist would refuse every user-defined and extension function people read with;
what a denylist cannot see (such a function calling a denied one) is stopped by the READ ONLY transaction,
the session reset after every call and the role's privileges that `test_connection` reports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent_runtime.connectors.builtin._sqlguard import SqlRefused

# Denied by exact (lower-case) name, whatever the schema.
DENIED_FUNCTIONS = frozenset(
    [
        # session state and configuration
        "set_config",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_export_snapshot",
        "pg_stat_clear_snapshot",
        # other sessions
        "pg_terminate_backend",
        "pg_cancel_backend",
        # sequences (non-transactional writes) and transaction ids
        "nextval",
        "setval",
        "txid_current",
        "pg_current_xact_id",
        # notifications
        "pg_notify",
        # file access
        "pg_stat_file",
        "pg_current_logfile",
        # large objects without the lo_ prefix
        "loread",
        "lowrite",
        # SQL run from a text argument (the guard cannot see into it)
        "query_to_xml",
        "query_to_xmlschema",
        "query_to_xml_and_xmlschema",
        "cursor_to_xml",
        "cursor_to_xmlschema",
        "table_to_xml",
        "table_to_xmlschema",
        "table_to_xml_and_xmlschema",
        "schema_to_xml",
        "schema_to_xmlschema",
        "schema_to_xml_and_xmlschema",
        "database_to_xml",
        "database_to_xmlschema",
        "database_to_xml_and_xmlschema",
        "ts_stat",
        "ts_rewrite",
        # index maintenance (writes)
        "brin_summarize_new_values",
        "brin_summarize_range",
        "brin_desummarize_range",
        "gin_clean_pending_list",
        # WAL and replication
        "pg_promote",
        "pg_switch_wal",
        "pg_switch_xlog",
        "pg_prewarm",
    ]
)
# Denied by prefix: whole families (advisory locks, large objects, dblink, file reads, WAL, replication...).
DENIED_PREFIXES = (
    "pg_advisory",
    "pg_try_advisory",
    "lo_",
    "dblink",
    "pg_read_",
    "pg_ls_",
    "pg_file_",
    "pg_logical_",
    "pg_replication_",
    "pg_create_",
    "pg_drop_",
    "pg_copy_",
    "pg_wal_",
    "pg_xlog_",
    "pg_backup_",
    "pg_start_backup",
    "pg_stop_backup",
    "pg_stat_reset",
    "pg_log_",
    "pg_import_",
    "pg_signal_",
    "pg_sequence_",
    "binary_upgrade_",
)
# Statement kinds a read may contain below its top: only SELECT.
_READ_NODE = "SelectStmt"


def denied_function(name: str) -> bool:
    """Whether a function of this name (any schema) is refused."""
    lowered = name.lower()
    return lowered in DENIED_FUNCTIONS or lowered.startswith(DENIED_PREFIXES)


@dataclass(frozen=True)
class ParsedRead:
    """An allowed read: its top statement kind and where it sits in the text (libpg_query's byte offsets)."""

    kind: str  # SelectStmt, ExplainStmt or VariableShowStmt
    location: int
    length: int | None  # None: to the end of the text


# Scanning libpg_query's JSON text (str.find, then the key's own bytes) is several times faster than
# loading and walking it, and sound: inside a JSON string every `"` is escaped, so a `"` preceded by `{`
# or `,` always opens one of the tree's own keys.
_FUNCNAME = re.compile(r'\{"funcname":\[((?:\{"String":\{"sval":"(?:[^"\\]|\\.)*"\}\},?)*)\]')
_SVAL = re.compile(r'"sval":"((?:[^"\\]|\\.)*)"')
_STATEMENT = re.compile(r'\{"stmt":\{"([A-Za-z_]+)":')
_NUMBER = re.compile(r"\d+")


def _key_ends(text: str, literal: str) -> list[int]:
    """Where each occurrence of `literal` (a `"Key":`) that is a real key ends."""
    ends = []
    index = text.find(literal)
    while index >= 0:
        if text[index - 1] in "{,":
            ends.append(index + len(literal))
        index = text.find(literal, index + 1)
    return ends


def _statement_keys(text: str) -> set[str]:
    """Every `...Stmt` key in the tree."""
    keys = set()
    index = text.find('Stmt":')
    while index >= 0:
        start = text.rfind('"', 0, index)
        if text[start - 1] in "{,":
            keys.add(text[start + 1 : index + 4])
        index = text.find('Stmt":', index + 1)
    return keys


def _number_after(text: str, literal: str) -> int | None:
    index = text.rfind(literal)
    if index < 0 or text[index - 1] not in "{,":
        return None
    match = _NUMBER.match(text, index + len(literal))
    return int(match.group()) if match else None


def parse_read(sql: str) -> ParsedRead:
    """The one statement if it is an allowed read; raises SqlRefused saying why not."""
    from pglast import parser

    if "\x00" in sql:
        raise SqlRefused("the statement contains a NUL character")
    try:
        text = parser.parse_sql_json(sql)
    except parser.ParseError as exc:
        raise SqlRefused(f"PostgreSQL's parser refused it: {exc}") from None
    kinds = _STATEMENT.findall(text)
    if not kinds:
        raise SqlRefused("the statement is empty")
    if len(kinds) > 1:
        raise SqlRefused("only one statement is allowed: ';' may only end it (chaining is refused)")
    kind = kinds[0]
    parsed = ParsedRead(
        kind=kind,
        location=_number_after(text, '"stmt_location":') or 0,
        length=_number_after(text, '"stmt_len":'),
    )
    if kind == "VariableShowStmt":
        return parsed
    if kind == "ExplainStmt":
        _check_explain(json.loads(text)["stmts"][0]["stmt"]["ExplainStmt"])
    elif kind != _READ_NODE:
        raise SqlRefused(
            f"a query must be SELECT, WITH, TABLE, VALUES, EXPLAIN or SHOW, not {_label(kind)}; "
            "use execute to write"
        )
    _check_tree(text, top=kind)
    return parsed


def _check_explain(explain: dict[str, Any]) -> None:
    for option in explain.get("options") or []:
        element = option.get("DefElem", {})
        if element.get("defname") == "analyze" and _option_on(element):
            raise SqlRefused("EXPLAIN ANALYZE runs the statement; use EXPLAIN without ANALYZE")
    inner = next(iter(explain["query"]))
    if inner != _READ_NODE:
        raise SqlRefused(f"EXPLAIN of {_label(inner)} is not allowed; EXPLAIN a SELECT")


def _option_on(element: dict[str, Any]) -> bool:
    arg = element.get("arg")
    if arg is None:
        return True
    value = str(next(iter(next(iter(arg.values())).values()), "")).lower()
    return value not in ("false", "off", "0", "no")


def _label(kind: str) -> str:
    return kind.removesuffix("Stmt").upper() or kind


def _check_tree(text: str, *, top: str) -> None:
    for key in _statement_keys(text):
        if key not in (_READ_NODE, top):
            raise SqlRefused(f"{_label(key)} is not allowed in a read-only query (a writing WITH?)")
    if _key_ends(text, '"intoClause":'):
        raise SqlRefused("SELECT INTO creates a table; it is not allowed in a read-only query")
    if _key_ends(text, '"lockingClause":'):
        raise SqlRefused("row locks (FOR UPDATE / FOR SHARE) are not allowed in a read-only query")
    for end in _key_ends(text, '"FuncCall":'):
        names = _FUNCNAME.match(text, end)
        if names is None:
            raise SqlRefused("a function call the guard could not read")
        parts = _SVAL.findall(names.group(1))
        name = json.loads(f'"{parts[-1]}"') if parts else ""
        if denied_function(name):
            raise SqlRefused(f"{name.lower()}() is not allowed in a read-only query")
