"""The SQL guard's pure parts: the parsers' verdicts on the issue-36 cases, MySQL placeholder binding,
the PostgreSQL bounded wrapper, and what SHOW GRANTS means for test_connection."""

from __future__ import annotations

import re

import pytest

from agent_runtime.connectors.builtin._mysql_readonly import (
    _READ_WORDS as READ_WORDS,
)
from agent_runtime.connectors.builtin._mysql_readonly import (
    DENIED_FUNCTIONS,
    KEYWORDS,
    _text_segments,
    bind,
    check_query,
    plain_read,
)
from agent_runtime.connectors.builtin._mysql_readonly import parse_read as parse_mysql
from agent_runtime.connectors.builtin._pg_bounded import bounded_select
from agent_runtime.connectors.builtin._pg_readonly import parse_read
from agent_runtime.connectors.builtin._sqlguard import SqlRefused, check_read
from agent_runtime.connectors.builtin.mysql import grant_problems
from tests.integration.builtin.sql_corpus import READS, TRICKS


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


# MySQL's fast path (`plain_read`): it may only ever accept what the parser accepts ----------------------


def _mysql_segments(sql: str) -> list[tuple[str, bool]] | None:
    try:
        return _text_segments(sql)
    except SqlRefused:
        return None


def test_plain_read_accepts_no_trick_the_parser_refuses() -> None:
    accepted_by_both = 0
    for trick in TRICKS:
        segments = _mysql_segments(trick.sql)
        if segments is None or not plain_read(segments):
            continue
        parse_mysql(trick.sql)  # raises if the fast path accepted what the parser refuses
        accepted_by_both += 1
    # What both let through are functions MariaDB does not have or user functions (the READ ONLY
    # transaction's to stop); the integration corpus checks nothing changed after each.
    assert accepted_by_both < len(TRICKS) // 3


def test_plain_read_takes_most_legitimate_reads_and_the_guard_all() -> None:
    reads = [read for read in READS if read.dialect in ("both", "mysql")]
    fast = 0
    for read in reads:
        check_query(read.sql)
        segments = _mysql_segments(read.sql)
        assert segments is not None
        fast += plain_read(segments)
    assert fast >= len(reads) * 2 // 3


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a FROM t INTO OUTFILE '/tmp/x'",
        "SELECT a INTO @v FROM t",
        "SELECT a FROM t FOR UPDATE",
        "SELECT a FROM t FOR SHARE SKIP LOCKED",
        "SELECT a FROM t LOCK IN SHARE MODE",
        "SELECT @a := 1",
        "SELECT @@session.sql_mode",
        "SELECT `GET_LOCK`('a', 0)",
        "SELECT `get_lock` ('a', 0)",
        "SELECT mysql.GET_LOCK ('a', 0)",
        "SELECT get_lock\n('a', 0)",
        "SELECT LAST_INSERT_ID(5)",
        "SELECT NEXT VALUE FOR s",
        "SELECT NEXTVAL(s)",
        "SELECT 'a\\' , GET_LOCK('ae', 0) -- '",
        "SELECT \"GET_LOCK\"('a', 0)",
        "SELECT `GET LOCK`(1)",
        "SELECT a FROM t PROCEDURE ANALYSE()",
        "SELECT \uff47et_lock('a', 0)",
        "WITH c AS (SELECT 1) UPDATE t SET a = 1",
        "WITH c AS (SELECT 1) DELETE FROM t",
        "TABLE t",
        "VALUES (1)",
        "EXPLAIN SELECT 1",
        "SHOW TABLES",
        "(SELECT 1) INTO @v",
        "SELECT BENCHMARK(1000000, 1)",
        "SELECT a FROM t WHERE b = 1 | 2",
    ],
)
def test_plain_read_leaves_writes_locks_assignments_and_denied_calls_to_the_parser(sql: str) -> None:
    segments = _mysql_segments(sql)
    assert segments is None or not plain_read(segments)


def test_plain_read_leaves_an_appended_write_or_lock_to_the_parser() -> None:
    for read in READS:
        if read.dialect == "postgres" or not plain_read(_text_segments(read.sql)):
            continue
        base = read.sql.rstrip().rstrip(";")
        for tail in (
            " FOR UPDATE",
            " INTO @x",
            " LOCK IN SHARE MODE",
            ", GET_LOCK('x', 0)",
            " INTO DUMPFILE 'x'",
        ):
            segments = _mysql_segments(f"{base}\n{tail}")
            assert segments is None or not plain_read(segments), base + tail


def test_the_fast_paths_words_cover_sqlglots_keywords_and_names_match_the_trees() -> None:
    from sqlglot import exp
    from sqlglot.dialects.mysql import MySQL

    single = {word for word in MySQL.Tokenizer.KEYWORDS if re.fullmatch(r"[A-Za-z0-9_$]+", word)}
    assert single - KEYWORDS - READ_WORDS == set()
    assert frozenset() == READ_WORDS & DENIED_FUNCTIONS
    # The fast path matches a call by its written name; the tree check also by the names sqlglot files
    # a typed function under. No class may give a denied name to a call written otherwise.
    stack, seen = [exp.Func], set()
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                assert not ({name.upper() for name in sub.sql_names()} & DENIED_FUNCTIONS), sub


def test_a_kept_verdict_is_the_verdict() -> None:
    for _ in range(2):
        with pytest.raises(SqlRefused, match="GET_LOCK"):
            check_query("SELECT GET_LOCK('kept', 0)")
        check_query("SELECT id FROM kept_items WHERE id = 1")
