"""The SQL guard's pure parts: the parsers' verdicts on the issue-36 cases, MySQL placeholder binding,
the PostgreSQL bounded wrapper, and what SHOW GRANTS means for test_connection."""

from __future__ import annotations

import pytest

from agent_runtime.connectors.builtin._mysql_readonly import bind
from agent_runtime.connectors.builtin._pg_bounded import bounded_select
from agent_runtime.connectors.builtin._pg_readonly import parse_read
from agent_runtime.connectors.builtin._sqlguard import SqlRefused, check_read
from agent_runtime.connectors.builtin.mysql import grant_problems


@pytest.mark.parametrize(
    ("sql", "dialect", "why"),
    [
        ('SELECT U&"pg_terminate_backend"(1)', "postgres", "pg_terminate_backend"),
        ('SELECT U&"pg_\\0063ancel_backend"(1)', "postgres", "pg_cancel_backend"),
        ("SELECT \"pg_catalog\".\"pg_logical_emit_message\"(true, 'a', 'b')", "postgres", "pg_logical_emit"),
        ("SELECT `GET_LOCK`('a', 0)", "mysql", "GET_LOCK"),
        ("SELECT LAST_INSERT_ID(5)", "mysql", "LAST_INSERT_ID"),
        ("EXPLAIN (ANALYZE) SELECT 1", "postgres", "EXPLAIN ANALYZE"),
        ("EXPLAIN ANALYZE SELECT 1", "mysql", "EXPLAIN ANALYZE"),
        ("SELECT /* /* */ GET_LOCK('a', 0) /* */", "mysql", "GET_LOCK"),
        ("SELECT 1 --1, GET_LOCK('a', 0)", "mysql", "not followed by a space"),
        ("SELECT 1\x00; DELETE FROM t", "postgres", "NUL"),
    ],
)
def test_refused_by_the_parser(sql: str, dialect: str, why: str) -> None:
    with pytest.raises(SqlRefused, match=why):
        check_read(sql, dialect)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("SELECT replace(name, 'a', 'b') FROM t", "postgres"),
        ("SELECT INSERT(name, 1, 1, 'x') FROM t", "mysql"),
        ("SELECT comment, release FROM t", "postgres"),
        ("SELECT CAST(x AS CHAR CHARACTER SET utf8mb4) FROM t", "mysql"),
        ("TABLE t", "postgres"),
        ("VALUES (1)", "mysql"),
        ("SHOW TABLES", "mysql"),
        ("EXPLAIN (ANALYZE off) SELECT 1", "postgres"),
        ("SELECT DATE_FORMAT(d, '%Y') FROM t WHERE a = %s", "mysql"),
    ],
)
def test_allowed_by_the_parser(sql: str, dialect: str) -> None:
    check_read(sql, dialect)  # type: ignore[arg-type]


def test_statement_location_is_the_statement_without_its_semicolon() -> None:
    sql = "-- é\nSELECT 1 ; "
    parsed = parse_read(sql)
    raw = sql.encode()
    assert raw[parsed.location : parsed.location + (parsed.length or 0)].decode().strip() == "SELECT 1"


def test_mysql_placeholders_are_bound_outside_literals_only() -> None:
    def escape(value: object) -> str:
        return "'" + str(value).replace("'", "''") + "'"

    sql = "SELECT DATE_FORMAT(d, '%Y %s') FROM t WHERE a = %s AND b LIKE %s"
    assert bind(sql, ["x'y", "%z"], escape) == (
        "SELECT DATE_FORMAT(d, '%Y %s') FROM t WHERE a = 'x''y' AND b LIKE '%z'"
    )
    with pytest.raises(SqlRefused, match="more %s placeholders than the 1 params"):
        bind(sql, ["x"], escape)


def test_the_bounded_wrapper_cuts_variable_length_types_and_keeps_names() -> None:
    sql = bounded_select(
        "SELECT 1", [("id", "int4"), ('na"me', "text"), ("b", "bytea"), ("j", "jsonb")], cut_chars=5
    )
    assert sql == (
        'SELECT c0 AS "id", left(c1::text, 5) AS "na""me", substring(c2 from 1 for 5) AS "b", '
        'left(c3::text, 5) AS "j" FROM (\nSELECT 1\n) AS _ae(c0, c1, c2, c3)'
    )
    check_read(sql, "postgres")


def test_grants_that_are_too_strong() -> None:
    assert (
        grant_problems(["GRANT USAGE ON *.* TO `ro`@`%`", "GRANT SELECT, SHOW VIEW ON `shop`.* TO `ro`@`%`"])
        == []
    )
    root = grant_problems(["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"])
    assert any("superuser" in p for p in root) and any(p.startswith("can write") for p in root)
    assert any("FILE" in p for p in grant_problems(["GRANT SELECT, FILE ON *.* TO `x`@`%`"]))
    assert grant_problems(["GRANT INSERT ON `shop`.`t` TO `x`@`%`"])[0].startswith("can write")
