"""The bounded form of a PostgreSQL read: every variable-length cell cut by the server, not by us.

`bounded_select` wraps an already-guarded SELECT as `SELECT left(c1, N), ... FROM (<statement>) AS _ae(c1,
...)`, so a 30 MiB text cell crosses the wire (and the Tool Pod's memory) as at most N characters. Types of
bounded width pass unchanged; text types are cut with `left`, bytea with `substring`, and everything else
(arrays, json, xml, composite, extension types) is sent as its text form, cut the same way. The wrapper is
parsed by the guard again before it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

# Types whose values are small whatever they hold (pg_catalog names), returned as asyncpg decodes them.
BOUNDED_TYPES = frozenset(
    [
        "bool",
        "int2",
        "int4",
        "int8",
        "float4",
        "float8",
        "numeric",
        "money",
        "oid",
        "date",
        "time",
        "timetz",
        "timestamp",
        "timestamptz",
        "interval",
        "uuid",
        "inet",
        "cidr",
        "macaddr",
        "macaddr8",
        "char",
        "point",
        "void",
        "regclass",
        "regtype",
        "regproc",
        "xid",
        "xid8",
        "pg_lsn",
    ]
)
TEXT_TYPES = frozenset(["text", "varchar", "bpchar", "name", "citext"])


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def bounded_select(statement: str, columns: Sequence[tuple[str, str]], *, cut_chars: int) -> str:
    """The statement wrapped so no cell is longer than `cut_chars` characters (or bytes, for bytea)."""
    aliases = [f"c{index}" for index in range(len(columns))]
    targets = []
    for alias, (name, type_name) in zip(aliases, columns, strict=True):
        if type_name in BOUNDED_TYPES:
            expression = alias
        elif type_name in TEXT_TYPES:
            expression = f"left({alias}::text, {cut_chars})"
        elif type_name == "bytea":
            expression = f"substring({alias} from 1 for {cut_chars})"
        else:
            expression = f"left({alias}::text, {cut_chars})"
        targets.append(f"{expression} AS {quote_ident(name)}")
    # The statement is one the guard parsed whole (balanced, no open comment); the names are quoted.
    return f"SELECT {', '.join(targets)} FROM (\n{statement}\n) AS _ae({', '.join(aliases)})"  # noqa: S608
