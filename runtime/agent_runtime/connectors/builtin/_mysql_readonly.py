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

Speed (`check_query`): sqlglot's parse costs 300 us or more for a 300-character query, so a plain read
is accepted first by `plain_read`, on the exact lexer's output, without sqlglot: it only ever accepts,
never refuses; anything it is not sure of goes to the parser. It accepts only when the statement starts
with SELECT or WITH; every word is a read keyword or no keyword at all (MySQL's and MariaDB's reserved
words, sqlglot's MySQL keywords, and the words of INTO, FOR UPDATE, LOCK IN SHARE MODE, NEXT VALUE FOR and
PROCEDURE all go to the parser); the punctuation is arithmetic and comparison only (no `:=`, `@`, `\\`,
bit operators); no character is non-ASCII; no string holds a backslash (where it ends would depend on
NO_BACKSLASH_ESCAPES); and no call is to a denied function, whatever its spelling (backticks, a schema in
front, spaces or a newline before the parenthesis). It can pass text sqlglot would call a syntax error
(`SELECT a b c`): the server refuses that too. Verdicts are kept per exact text (a bounded LRU) on top.
"""

from __future__ import annotations

import functools
import re
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


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# `plain_read`: the words a plain read may use without the parser (none can write, lock, assign or call).
_READ_WORDS = _word_set(
    """
    SELECT WITH RECURSIVE FROM WHERE AND OR NOT XOR AS ON JOIN INNER LEFT RIGHT OUTER CROSS NATURAL
    LATERAL STRAIGHT_JOIN USING GROUP BY ORDER HAVING LIMIT OFFSET ASC DESC DISTINCT DISTINCTROW ALL
    UNION EXCEPT INTERSECT LIKE IN IS NULL BETWEEN CASE WHEN THEN ELSE END EXISTS TRUE FALSE ANY SOME
    INTERVAL DIV MOD REGEXP RLIKE ESCAPE IF DUAL COMMENT COLLATE MATCH CHAR SIGNED UNSIGNED DECIMAL DATE
    DATETIME TIME TIMESTAMP YEAR BINARY JSON INT INTEGER DOUBLE FLOAT DAY_HOUR DAY_MINUTE DAY_SECOND
    DAY_MICROSECOND HOUR_MINUTE HOUR_SECOND HOUR_MICROSECOND MINUTE_SECOND MINUTE_MICROSECOND
    SECOND_MICROSECOND YEAR_MONTH OVER PARTITION WINDOW ROWS RANGE ROW ROW_NUMBER RANK DENSE_RANK LAG
    LEAD FIRST_VALUE LAST_VALUE NTH_VALUE NTILE CUME_DIST PERCENT_RANK CURRENT_DATE CURRENT_TIME
    CURRENT_TIMESTAMP CURRENT_USER LOCALTIME LOCALTIMESTAMP UTC_DATE UTC_TIME UTC_TIMESTAMP DATABASE
    """
)
# Every other word with a meaning to MySQL, MariaDB or sqlglot's MySQL dialect sends the statement to the
# parser: their reserved words, sqlglot's keywords, and the words of the constructs that write or keep state
# (INTO ... OUTFILE/DUMPFILE, FOR UPDATE/SHARE, LOCK IN SHARE MODE, NOWAIT, SKIP LOCKED, NEXT/PREVIOUS VALUE
# FOR, PROCEDURE ANALYSE, HANDLER, DO, transaction control). tests/unit/connectors/test_sql_readonly.py
# checks this covers sqlglot's keywords, so an upgrade that adds one cannot slip past.
KEYWORDS = _word_set(
    """
    ACCESSIBLE ADD ALL ALTER ANALYSE ANALYZE AND ANTI ANY APPLY ARRAY AS ASC ASENSITIVE ASOF
    AUTOINCREMENT AUTO_INCREMENT BEFORE BEGIN BETWEEN BIGDECIMAL BIGINT BIGNUM BIGNUMERIC BINARY BINLOG
    BIT BLOB BOOL BOOLEAN BOTH BPCHAR BY BYTE BYTEA CACHE CALL CASCADE CASE CHANGE CHAR CHARACTER
    CHARSET CHECK CHECKSUM CLOB CLONE COLLATE COLUMN COMMENT COMMIT CONDITION CONSTRAINT CONTINUE
    CONVERT COPY CREATE CROSS CUBE CUME_DIST CURRENT_CATALOG CURRENT_DATE CURRENT_ROLE CURRENT_SCHEMA
    CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER CURSOR DATABASE DATABASES DATE DATEMULTIRANGE DATERANGE
    DATETIME DAY_HOUR DAY_MICROSECOND DAY_MINUTE DAY_SECOND DEALLOCATE DEC DECFLOAT DECIMAL DECIMAL128
    DECIMAL256 DECIMAL32 DECIMAL64 DECLARE DEFAULT DELAYED DELETE DELETE_DOMAIN_ID DENSE_RANK DESC
    DESCRIBE DETERMINISTIC DISTINCT DISTINCTROW DIV DO DOUBLE DO_DOMAIN_IDS DROP DUAL DUMPFILE DUPLICATE
    EACH ELSE ELSEIF EMPTY ENCLOSED END ENUM ESCAPE ESCAPED EXCEPT EXECUTE EXISTS EXIT EXPLAIN FALSE
    FETCH FILE FILTER FIRST FIRST_VALUE FIXED FLOAT FLOAT4 FLOAT8 FLUSH FOR FORCE FOREIGN FORMAT FROM
    FULL FULLTEXT FUNCTION GENERAL GENERATED GEOGRAPHY GEOMETRY GET GLOB GRANT GROUP GROUPING GROUPS
    HANDLER HAVING HELP HIGH_PRIORITY HOUR_MICROSECOND HOUR_MINUTE HOUR_SECOND HUGEINT IF IGNORE
    IGNORE_DOMAIN_IDS IGNORE_SERVER_IDS ILIKE IMPORT IN INDEX INET INFILE INNER INOUT INSENSITIVE INSERT
    INSTALL INT INT1 INT128 INT16 INT2 INT256 INT3 INT32 INT4 INT4MULTIRANGE INT4RANGE INT64 INT8
    INT8MULTIRANGE INT8RANGE INTEGER INTERSECT INTERVAL INTO IO_AFTER_GTIDS IO_BEFORE_GTIDS IS ISNULL
    ITERATE JOIN JSON JSONB JSON_TABLE KEEP KEY KEYS KILL LAG LASTVAL LAST_VALUE LATERAL LEAD LEADING
    LEAVE LEFT LIKE LIMIT LINEAR LINES LIST LOAD LOCALTIME LOCALTIMESTAMP LOCK LOCKED LONG LONGBLOB
    LONGTEXT LONGVARCHAR LOOP LOW_PRIORITY MAP MASTER_BIND MASTER_HEARTBEAT_PERIOD
    MASTER_SSL_VERIFY_SERVER_CERT MATCH MAXVALUE MEDIUMBLOB MEDIUMINT MEDIUMTEXT MERGE MIDDLEINT
    MINUTE_MICROSECOND MINUTE_SECOND MOD MODE MODIFIES NAMESPACE NATURAL NCHAR NEXT NEXTVAL NOT NOTNULL
    NOWAIT NO_WRITE_TO_BINLOG NTH_VALUE NTILE NULL NULLABLE NUMBER NUMERIC NUMMULTIRANGE NUMRANGE
    NVARCHAR NVARCHAR2 OBJECT OF OFFSET ON OPERATOR OPTIMIZE OPTIMIZER_COSTS OPTION OPTIONALLY OR ORDER
    ORDINALITY OUT OUTER OUTFILE OVER OVERLAPS OVERWRITE PAGE_CHECKSUM PARSE_VCOL_EXPR PARTITION
    PARTITIONED_BY PERCENT PERCENT_RANK PERIOD PIVOT PORTION POSITION PRAGMA PRECISION PREPARE PREVIOUS
    PRIMARY PROCEDURE PURGE QUALIFY RANGE RANK READ READS READ_WRITE REAL RECURSIVE REF REFERENCES
    REF_SYSTEM_ID REGEXP RELEASE RENAME REPAIR REPEAT REPLACE REQUIRE RESET RESIGNAL RESTART RESTRICT
    RETURN RETURNING REVOKE RIGHT RLIKE ROLLBACK ROLLUP ROW ROWS ROW_NUMBER SAVEPOINT SCHEMA SCHEMAS
    SECOND_MICROSECOND SELECT SEMI SENSITIVE SEPARATOR SEQUENCE SERIAL SESSION SESSION_USER SET SETTINGS
    SETVAL SHARE SHORT SHOW SHUTDOWN SIGNAL SIGNED SKIP SLOW SMALLINT SOME SPATIAL SPECIFIC SQL
    SQLEXCEPTION SQLSTATE SQLWARNING SQL_BIG_RESULT SQL_BUFFER_RESULT SQL_CACHE SQL_CALC_FOUND_ROWS
    SQL_NO_CACHE SQL_SMALL_RESULT SSL START STARTING STATS_AUTO_RECALC STATS_PERSISTENT
    STATS_SAMPLE_PAGES STORED STR STRAIGHT_JOIN STRING STRUCT SYSTEM SYSTEM_TIME TABLE TABLESAMPLE TEMP
    TEMPORARY TERMINATED TEXT THEN TIME TIMESTAMP TIMESTAMPLTZ TIMESTAMPNTZ TIMESTAMPTZ TIMESTAMP_LTZ
    TIMESTAMP_NTZ TIMETZ TIME_NS TINYBLOB TINYINT TINYTEXT TO TRAILING TRANSACTION TRIGGER TRUE TRUNCATE
    TSMULTIRANGE TSRANGE TSTZMULTIRANGE TSTZRANGE UHUGEINT UINT UINT128 UINT256 UNCACHE UNDO UNINSTALL
    UNION UNIQUE UNKNOWN UNLOCK UNNEST UNPIVOT UNSIGNED UPDATE USAGE USE USING UTC_DATE UTC_TIME
    UTC_TIMESTAMP UUID VACUUM VALUE VALUES VARBINARY VARCHAR VARCHAR2 VARCHARACTER VARIANT VARYING
    VECTOR VIEW VIRTUAL VOLATILE WAIT WHEN WHERE WHILE WINDOW WITH WRITE XA XOR YEAR YEAR_MONTH ZEROFILL
    _ARMSCII8 _ASCII _BIG5 _BINARY _CP1250 _CP1251 _CP1256 _CP1257 _CP850 _CP852 _CP866 _CP932 _DEC8
    _EUCJPMS _EUCKR _GB18030 _GB2312 _GBK _GEOSTD8 _GREEK _HEBREW _HP8 _KEYBCS2 _KOI8R _KOI8U _LATIN1
    _LATIN2 _LATIN5 _LATIN7 _MACCE _MACROMAN _SJIS _SWE7 _TIS620 _UCS2 _UJIS _UTF16 _UTF16LE _UTF32
    _UTF8 _UTF8MB3 _UTF8MB4
    """
)
_TOKEN = re.compile(r"[A-Za-z0-9_$]+|[^ \t\r\n\f\v]")
_PLAIN_PUNCTUATION = frozenset("(),.*+-/=<>!?;%")
_BARE_NAME = re.compile(r"[A-Za-z0-9_$]+")
_WORD, _PUNCT, _STRING, _IDENT = range(4)
_CACHED_CHARS = 4096  # longer statements are decided every time (the cache holds at most 512 x 4 KB)


def check_query(sql: str) -> None:
    """`mysql.query`'s guard: raises SqlRefused unless the statement is one allowed read."""
    refusal = _verdict(sql) if len(sql) <= _CACHED_CHARS else _decide(sql)
    if refusal is not None:
        raise SqlRefused(refusal)


@functools.lru_cache(maxsize=512)
def _verdict(sql: str) -> str | None:
    """The verdict on this exact text, kept: agents repeat their reads."""
    return _decide(sql)


def _decide(sql: str) -> str | None:
    """None if the statement is an allowed read, else why not: `plain_read` first, then the parser."""
    try:
        segments = _text_segments(sql)
        if not plain_read(segments):
            _parse_text("".join(piece for piece, _ in segments))
    except SqlRefused as exc:
        return str(exc)
    return None


def mysql_text(sql: str) -> str:
    """The statement as sqlglot should see it: comments removed, `%s` placeholders as `?`."""
    return "".join(piece for piece, _ in _text_segments(sql))


def _text_segments(sql: str) -> list[tuple[str, bool]]:
    """`mysql_text` as (piece, is_literal) pieces; refuses what the lexer and the text rules refuse."""
    if "\x00" in sql:
        raise SqlRefused("the statement contains a NUL character")
    lexed = lex(sql, "mysql")
    code = "".join(piece for piece, literal in lexed.segments if not literal)
    if "--" in code:
        raise SqlRefused("'--' not followed by a space is ambiguous; write '- -' for two minus signs")
    if len(lexed.statements) > 1:
        raise SqlRefused("only one statement is allowed: ';' may only end it (chaining is refused)")
    return [
        (piece if literal else piece.replace("%s", "?"), literal)
        for piece, literal in _joined(lexed.segments)
    ]


def plain_read(segments: Sequence[tuple[str, bool]]) -> bool:
    """Whether the lexed statement is plainly a read (True), or the parser must decide (False).

    Never a refusal: False only means "not sure". A word is a read word, or no keyword (a name); a call,
    a name followed by `(` (backticked or not, after any spaces), is to a function not denied.
    """
    tokens: list[tuple[int, str]] = []
    for piece, literal in segments:
        if literal:
            if piece[0] == "`":
                tokens.append((_IDENT, piece[1:-1].replace("``", "`")))
            elif "\\" in piece:
                return False  # where it ends depends on NO_BACKSLASH_ESCAPES: the parser decides
            else:
                tokens.append((_STRING, ""))
            continue
        if not piece.isascii():
            return False
        for token in _TOKEN.findall(piece):
            first = token[0]
            if first.isalnum() or first in "_$":
                tokens.append((_WORD, token.upper()))
            elif first in _PLAIN_PUNCTUATION:
                tokens.append((_PUNCT, token))
            else:
                return False
    if not tokens or tokens[0][0] != _WORD or tokens[0][1] not in ("SELECT", "WITH"):
        return False
    last = len(tokens) - 1
    for index, (kind, value) in enumerate(tokens):
        calls = index < last and tokens[index + 1] == (_PUNCT, "(")
        if kind == _WORD:
            if value in _READ_WORDS:
                continue
            if value in KEYWORDS or (calls and value in DENIED_FUNCTIONS):
                return False
        elif kind == _IDENT:
            if calls and (value.upper() in DENIED_FUNCTIONS or not _BARE_NAME.fullmatch(value)):
                return False
        elif kind == _STRING and calls:
            return False
    return True


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
    """The one statement's sqlglot tree if it is an allowed read; raises SqlRefused (the parser only)."""
    return _parse_text(mysql_text(sql))


def _parse_text(text: str) -> Any:
    """`parse_read` on text `mysql_text` made."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

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
