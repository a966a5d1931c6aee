"""The SQL guard's corpora: bypass tricks (no write may succeed) and legitimate reads (each must work).

Every trick runs against both real databases, whatever dialect it was written for: a trick for one engine
must not write on the other either. A trick may be refused by the guard (`query_refused`), by the READ ONLY
transaction (`read_only_violation`), by the database otherwise (`query_error`, `forbidden`), or run and
change nothing (a MySQL string that only looks like a stacked statement); the test checks the databases'
contents and the file system after each one.
"""

from __future__ import annotations

from dataclasses import dataclass

PWNED = "/tmp/ae_sqlguard_pwned"  # a file a trick would create


@dataclass(frozen=True)
class Trick:
    name: str
    sql: str


TRICKS: tuple[Trick, ...] = (
    Trick("stacked drop", "SELECT 1; DROP TABLE items"),
    Trick("stacked delete", "SELECT 1; DELETE FROM items"),
    Trick("stacked insert", "SELECT * FROM items; INSERT INTO items(name, price) VALUES ('x', 1)"),
    Trick("stacked update lower case", "select 1; update items set price = 0"),
    Trick("stacked mixed case", "SeLeCt 1; DeLeTe FrOm items"),
    Trick("stacked with tabs and newlines", "SELECT 1;\n\tDROP\tTABLE\nitems"),
    Trick("stacked truncate after OR 1=1", "SELECT * FROM items WHERE name = 'x' OR 1=1; TRUNCATE items"),
    Trick("union then stacked drop", "SELECT 1 UNION SELECT 2; DROP TABLE items"),
    Trick("commit then drop", "SELECT 1; COMMIT; DROP TABLE items"),
    Trick("rollback then delete", "SELECT 1; ROLLBACK; DELETE FROM items"),
    Trick("commit first", "COMMIT; DELETE FROM items"),
    Trick("set autocommit then delete", "SET autocommit=1; DELETE FROM items"),
    Trick("semicolon in a string, then stacked", "SELECT ';'; DROP TABLE items"),
    Trick("semicolon in a quoted identifier, then stacked", 'SELECT 1 AS "x;y"; DROP TABLE items'),
    Trick("semicolon in a backticked identifier, then stacked", "SELECT 1 AS `x;y`; DROP TABLE items"),
    Trick("line comment then newline stacked", "SELECT 1 -- harmless\n; DROP TABLE items"),
    Trick("block comment holding a semicolon", "SELECT 1 /* ; */ ; DELETE FROM items"),
    Trick("block comment hides the first keyword", "/* SELECT */ DELETE FROM items"),
    Trick("line comment hides the first keyword", "-- SELECT\nDELETE FROM items"),
    Trick("comment splitting a keyword", "SELECT 1; DEL/**/ETE FROM items"),
    Trick("comment glued to a keyword", "/**/DELETE/**/FROM/**/items"),
    Trick("MySQL executable comment", "SELECT 1 /*! ; DROP TABLE items */"),
    Trick("MySQL versioned executable comment", "/*!50000 DROP TABLE items */"),
    Trick("MySQL executable comment inside a select", "SELECT /*!50000 1; DELETE FROM items */"),
    Trick("MariaDB executable comment", "SELECT 1 /*M! ; DELETE FROM items */"),
    Trick("MySQL hash comment then stacked", "SELECT 1 #\n; DROP TABLE items"),
    Trick("MySQL dashes without space are not a comment", "SELECT 1 --1; DELETE FROM items"),
    Trick("backslash-escaped quote (PostgreSQL standard strings)", "SELECT 'a\\'; DROP TABLE items; -- '"),
    Trick("E-string escaped quote then stacked", "SELECT E'\\';' ; DROP TABLE items"),
    Trick("dollar quote holding a semicolon, then stacked", "SELECT $$;$$; DROP TABLE items"),
    Trick("data-modifying CTE: delete", "WITH d AS (DELETE FROM items RETURNING *) SELECT * FROM d"),
    Trick(
        "data-modifying CTE: insert",
        "WITH i AS (INSERT INTO items(name, price) VALUES ('x', 1) RETURNING id) SELECT id FROM i",
    ),
    Trick(
        "data-modifying CTE: update",
        "WITH u AS (UPDATE items SET price = 0 RETURNING id) SELECT count(*) FROM u",
    ),
    Trick("CTE followed by delete", "WITH x AS (SELECT 1) DELETE FROM items"),
    Trick(
        "recursive CTE then stacked drop",
        "WITH RECURSIVE t(n) AS (SELECT 1) SELECT n FROM t; DROP TABLE items",
    ),
    Trick("SELECT INTO a new table", "SELECT * INTO pwned_copy FROM items"),
    Trick("SELECT INTO OUTFILE", f"SELECT * FROM items INTO OUTFILE '{PWNED}.txt'"),  # noqa: S608 - the corpus is SQL on purpose
    Trick("SELECT INTO DUMPFILE", f"SELECT name FROM items LIMIT 1 INTO DUMPFILE '{PWNED}.bin'"),  # noqa: S608
    Trick("SELECT INTO a user variable", "SELECT price INTO @p FROM items LIMIT 1"),
    Trick("assignment in a select", "SELECT @x := 1"),
    Trick("COPY TO PROGRAM", f"COPY (SELECT 1) TO PROGRAM 'touch {PWNED}'"),
    Trick("stacked COPY TO PROGRAM", f"SELECT 1; COPY items TO PROGRAM 'touch {PWNED}'"),
    Trick("pg_read_file", "SELECT pg_read_file('/etc/passwd')"),
    Trick("pg_ls_dir", "SELECT pg_ls_dir('.')"),
    Trick("lo_import", "SELECT lo_import('/etc/passwd')"),
    Trick("dblink_exec to self", "SELECT dblink_exec('dbname=shop', 'DELETE FROM items')"),
    Trick(
        "dblink query that deletes",
        "SELECT * FROM dblink('dbname=shop', 'DELETE FROM items RETURNING id') AS t(id int)",
    ),
    Trick(
        "SQL run from text by query_to_xml",
        "SELECT query_to_xml('DELETE FROM items RETURNING id', true, true, '')",
    ),
    Trick("LOAD DATA", "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE items"),
    Trick("LOAD_FILE", "SELECT LOAD_FILE('/etc/passwd')"),
    Trick("volatile function that writes (passes the text check)", "SELECT bump()"),
    Trick("volatile function that writes, in a WITH", "WITH b AS (SELECT bump() AS n) SELECT n FROM b"),
    Trick("FOR UPDATE", "SELECT * FROM items FOR UPDATE"),
    Trick("FOR SHARE", "SELECT * FROM items FOR SHARE"),
    Trick("FOR NO KEY UPDATE", "SELECT * FROM items FOR NO KEY UPDATE"),
    Trick("LOCK IN SHARE MODE", "SELECT * FROM items LOCK IN SHARE MODE"),
    Trick(
        "set_config to leave read-only", "SELECT set_config('default_transaction_read_only', 'off', false)"
    ),
    Trick("nextval (a non-transactional write)", "SELECT nextval('items_id_seq')"),
    Trick("setval", "SELECT setval('items_id_seq', 1)"),
    Trick("pg_terminate_backend", "SELECT pg_terminate_backend(pg_backend_pid())"),
    Trick("advisory lock", "SELECT pg_advisory_lock(42)"),
    Trick("EXPLAIN ANALYZE runs a delete", "EXPLAIN ANALYZE DELETE FROM items"),
    Trick("DO block", "DO $$ BEGIN DELETE FROM items; END $$"),
    Trick("PREPARE then EXECUTE", "PREPARE p AS DELETE FROM items; EXECUTE p"),
    Trick("CALL", "CALL bump_proc()"),
    Trick("HANDLER", "HANDLER items OPEN"),
    Trick("parenthesised select then stacked", "( SELECT 1 ); DELETE FROM items"),
    Trick("fullwidth semicolon", "SELECT 1\uff1bDELETE FROM items"),
    Trick("NUL byte before a stacked statement", "SELECT 1\x00; DELETE FROM items"),
    Trick("unterminated comment hiding a statement", "SELECT 1 /* ; DELETE FROM items"),
    Trick("unterminated string hiding a statement", "SELECT 'x; DELETE FROM items"),
    Trick("REPLACE INTO", "REPLACE INTO items(id, name, price) VALUES (1, 'x', 0)"),
    Trick("GRANT", "GRANT ALL ON items TO PUBLIC"),
    Trick("ALTER TABLE", "ALTER TABLE items ADD COLUMN pwned int"),
    Trick("CREATE TABLE AS SELECT", "CREATE TABLE pwned AS SELECT * FROM items"),
)


@dataclass(frozen=True)
class Read:
    name: str
    sql: str
    params: tuple[object, ...] = ()
    dialect: str = "both"  # both, postgres, mysql


READS: tuple[Read, ...] = (
    Read("all rows", "SELECT * FROM items ORDER BY id"),
    Read("semicolon in a string", "SELECT name FROM items WHERE name = ';'"),
    Read("semicolons in strings", "SELECT 'a;b' AS x, ';' AS y"),
    Read("semicolon in LIKE", "SELECT count(*) FROM items WHERE name LIKE '%;%'"),
    Read("semicolon in a quoted identifier", 'SELECT 1 AS "semi;colon"', dialect="postgres"),
    Read("semicolon in a backticked identifier", "SELECT 1 AS `semi;colon`", dialect="mysql"),
    Read("trailing line comment", "SELECT id FROM items -- the ids"),
    Read("block comment naming a keyword", "SELECT /* no DELETE here */ id FROM items"),
    Read("keyword inside a string", "SELECT 'DELETE FROM items; DROP TABLE items' AS text"),
    Read(
        "statement text in a WHERE string",
        "SELECT name FROM items WHERE name = 'please DROP TABLE items; thanks'",
    ),
    Read("CTE", "WITH cheap AS (SELECT * FROM items WHERE price < 10) SELECT count(*) FROM cheap"),
    Read(
        "recursive CTE",
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT sum(n) FROM t",
    ),
    Read("placeholders (PostgreSQL)", "SELECT id, name FROM items WHERE id = $1", (1,), dialect="postgres"),
    Read("placeholders (MySQL)", "SELECT id, name FROM items WHERE id = %s", (1,), dialect="mysql"),
    Read("one trailing semicolon", "SELECT name FROM items;"),
    Read("lower case", "select lower(name) from items order by 1"),
    Read("join", "SELECT i.name, o.qty FROM items i JOIN orders o ON o.item_id = i.id"),
    Read(
        "IN list with a semicolon",
        "SELECT name, price FROM items WHERE name IN ('a', 'b;c') ORDER BY price DESC",
    ),
    Read(
        "columns whose names contain keywords",
        "SELECT updated_at, deleted, created_by, insert_ts FROM orders",
    ),
    Read("doubled quote inside a string", "SELECT 'it''s; fine' AS s"),
    Read("dollar-quoted string", "SELECT $$dollar; quoted$$ AS s", dialect="postgres"),
    Read("E-string with an escaped quote", "SELECT E'it\\'s;' AS s", dialect="postgres"),
    Read("double-quoted string (MySQL)", 'SELECT "double; quoted" AS s', dialect="mysql"),
    Read("backslash-escaped quote (MySQL)", "SELECT 'a\\'; DROP TABLE items; -- ' AS s", dialect="mysql"),
    Read("CASE", "SELECT CASE WHEN price > 5 THEN 'high' ELSE 'low' END AS band FROM items"),
    Read("COALESCE with a semicolon", "SELECT COALESCE(NULL, 'x;') AS c"),
    Read("dashes inside a string", "SELECT * FROM items WHERE name <> '--not a comment'"),
    Read("comment markers inside strings", "SELECT '/*' AS a, '*/' AS b"),
    Read(
        "nested block comment", "SELECT 1 /* outer /* inner */ still a comment */ AS one", dialect="postgres"
    ),
    Read("subquery", "SELECT name FROM items WHERE id IN (SELECT item_id FROM orders)"),
    Read(
        "aggregate with GROUP BY and HAVING",
        "SELECT item_id, sum(qty) FROM orders GROUP BY item_id HAVING sum(qty) > 0",
    ),
    Read("quoted keyword-named column", 'SELECT "comment" FROM reviews', dialect="postgres"),
    Read("backticked keyword-named column", "SELECT `comment` FROM reviews", dialect="mysql"),
    Read("unquoted column named comment", "SELECT comment FROM reviews"),
)
