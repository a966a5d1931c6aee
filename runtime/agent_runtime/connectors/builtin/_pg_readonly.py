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
from collections.abc import Iterator
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


def parse_read(sql: str) -> dict[str, Any]:
    """The one statement's parse tree (as pglast's JSON) if it is an allowed read; raises SqlRefused."""
    from pglast import parser

    if "\x00" in sql:
        raise SqlRefused("the statement contains a NUL character")
    try:
        tree = json.loads(parser.parse_sql_json(sql))
    except parser.ParseError as exc:
        raise SqlRefused(f"PostgreSQL's parser refused it: {exc}") from None
    statements = tree.get("stmts") or []
    if not statements:
        raise SqlRefused("the statement is empty")
    if len(statements) > 1:
        raise SqlRefused("only one statement is allowed: ';' may only end it (chaining is refused)")
    entry = statements[0]
    statement = entry["stmt"]
    kind = next(iter(statement))
    if kind == "VariableShowStmt":
        return entry
    if kind == "ExplainStmt":
        explain = statement[kind]
        for option in explain.get("options") or []:
            element = option.get("DefElem", {})
            if element.get("defname") == "analyze" and _option_on(element):
                raise SqlRefused("EXPLAIN ANALYZE runs the statement; use EXPLAIN without ANALYZE")
        inner = explain["query"]
        kind, statement = next(iter(inner)), inner
    if kind != _READ_NODE:
        raise SqlRefused(
            f"a query must be SELECT, WITH, TABLE, VALUES, EXPLAIN or SHOW, not {_label(kind)}; "
            "use execute to write"
        )
    _check_tree(statement)
    return entry


def _option_on(element: dict[str, Any]) -> bool:
    arg = element.get("arg")
    if arg is None:
        return True
    value = str(next(iter(next(iter(arg.values())).values()), "")).lower()
    return value not in ("false", "off", "0", "no")


def _label(kind: str) -> str:
    return kind.removesuffix("Stmt").upper() or kind


def _check_tree(root: dict[str, Any]) -> None:
    for key, node in _nodes(root):
        if key.endswith("Stmt") and key != _READ_NODE:
            raise SqlRefused(f"{_label(key)} is not allowed in a read-only query (a writing WITH?)")
        if key == "SelectStmt":
            if node.get("intoClause"):
                raise SqlRefused("SELECT INTO creates a table; it is not allowed in a read-only query")
            if node.get("lockingClause"):
                raise SqlRefused("row locks (FOR UPDATE / FOR SHARE) are not allowed in a read-only query")
        elif key == "FuncCall":
            names = [part.get("String", {}).get("sval", "") for part in node.get("funcname") or []]
            name = names[-1] if names else ""
            if denied_function(name):
                raise SqlRefused(f"{name.lower()}() is not allowed in a read-only query")


def _nodes(value: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (node type, node) pair in a pglast JSON tree, depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(child, dict):
                    if key[:1].isupper():
                        yield key, child
                    stack.append(child)
                elif isinstance(child, list):
                    stack.extend(child)
        elif isinstance(item, list):
            stack.extend(item)
