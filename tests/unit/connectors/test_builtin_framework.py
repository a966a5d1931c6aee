"""The built-in connector framework: the registry (drop-in discovery), S3's tool table, config checks naming
the field, the bundle format, and the SQL guard's lexer and rules (pure; the real databases run the
corpus in tests/integration/builtin)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import agent_runtime.connectors.builtin as builtin_package
from agent_runtime.connectors import build_bundle, read_bundle, write_bundle
from agent_runtime.connectors.builtin._sqlguard import SqlRefused, check_read, check_single, lex
from agent_runtime.connectors.builtin.registry import (
    connector_types,
    materialize_builtin,
    registry,
)
from agent_runtime.connectors.bundle import read_full_bundle
from agent_runtime.connectors.framework import (
    BuiltinConnector,
    BuiltinConnectorDefs,
    Connector,
    ConnectorConfigError,
)

# S3's table, exactly: every tool name and whether it is sensitive (every write is, Decision 15).
S3_TABLE = {
    "http": {"http.call": True, "http.request": False},
    "knowledge": {"knowledge.search": False, "knowledge.get": False},  # issue 37: reads only
    "slack": {"slack.post_message": True, "slack.list_channels": False, "slack.reply_thread": True},
    "email": {"email.send": True, "email.draft": True, "email.search": False},
    "github": {
        "github.get_issue": False,
        "github.list_issues": False,
        "github.create_issue": True,
        "github.comment_issue": True,
    },
    "notion": {
        "notion.search": False,
        "notion.query_database": False,
        "notion.create_page": True,
        "notion.append_block": True,
    },
    "webhook": {"webhook.send": True},
    "mcp": {},  # S3's "dynamic": an MCP server's tools are discovered (Decision 18)
    "agent": {},  # issue 38: an A2A card's skills, discovered like an MCP server's tools
    "postgres": {"postgres.query": False, "postgres.execute": True},
    "mysql": {"mysql.query": False, "mysql.execute": True},
    "stripe": {"stripe.get_customer": False, "stripe.list_charges": False, "stripe.create_refund": True},
    "google": {
        "gsheets.read_range": False,
        "gsheets.append_row": True,
        "gdrive.list_files": False,
        "gdrive.get_file": False,
    },
}


def test_the_registry_holds_s3s_table_exactly() -> None:
    found = {t: {tool.name: tool.sensitive for tool in cls.tools} for t, cls in registry().items()}
    assert found == S3_TABLE


def test_every_type_conforms_to_the_protocol() -> None:
    for cls in registry().values():
        assert issubclass(cls, BuiltinConnector)
        assert isinstance(cls.__new__(cls), Connector)
        assert cls.config_schema["type"] == "object" and cls.description


def test_dropping_a_module_into_the_package_registers_it(tmp_path: Path) -> None:
    (tmp_path / "weather.py").write_text(
        textwrap.dedent(
            """
            from agent_runtime.connectors.framework import BuiltinConnector, tool

            class WeatherConnector(BuiltinConnector):
                type = "weather"
                description = "the weather"
                tools = (tool("weather.today", "today", properties={}, sensitive=False),)

                async def _call(self, tool, arguments, env):
                    return {"sky": "blue"}
            """
        )
    )
    builtin_package.__path__.append(str(tmp_path))
    try:
        assert "weather" in registry(refresh=True)
        assert "weather" in {t["type"] for t in connector_types()}
        defs = materialize_builtin(name="sky", type_name="weather", config={})
        assert [t.name for t in defs.tools] == ["weather.today"]
    finally:
        builtin_package.__path__.remove(str(tmp_path))
        sys.modules.pop("agent_runtime.connectors.builtin.weather", None)
        registry(refresh=True)
    assert "weather" not in registry()


@pytest.mark.parametrize(
    ("type_name", "config", "credentials", "field"),
    [
        ("postgres", {"host": "h", "database": "d"}, {}, "config.user"),
        ("postgres", {"host": "h", "database": "d", "user": "u", "port": 0}, {}, "config.port"),
        ("postgres", {"host": "h", "database": "d", "user": "u", "port": True}, {}, "config.port"),
        ("postgres", {"host": "h", "database": "d", "user": "u", "tls": "maybe"}, {}, "config.tls"),
        ("postgres", {"host": "h", "database": "d", "user": "u", "password": "x"}, {}, "config.password"),
        (
            "postgres",
            {"host": "h", "database": "d", "user": "u"},
            {"password": "not an env"},
            "credentials.password",
        ),
        ("postgres", {"host": "h", "database": "d", "user": "u"}, {"token": "X"}, "credentials.token"),
        ("slack", {}, {}, "credentials.token"),
        ("webhook", {"url": "ftp://x"}, {}, "config.url"),
        ("google", {}, {"client_secret": "A", "refresh_token": "B"}, "config.client_id"),
        ("http", {"auth": {"type": "header"}, "base_url": "https://x"}, {"token": "T"}, "config.auth.header"),
        ("nope", {}, {}, "source.type"),
    ],
)
def test_config_errors_name_the_field(type_name: str, config: dict, credentials: dict, field: str) -> None:
    with pytest.raises(ConnectorConfigError) as caught:
        materialize_builtin(name="c", type_name=type_name, config=config, credentials=credentials)
    assert caught.value.field == field
    assert (
        "password" not in config or "is not a known field" in caught.value.problem
    )  # a secret never in config


def test_defaults_are_filled_and_the_bundle_round_trips(tmp_path: Path) -> None:
    defs = materialize_builtin(
        name="shop-db",
        type_name="postgres",
        config={"host": "db", "database": "shop", "user": "agent"},
        credentials={"password": "SHOP_DB_PASSWORD"},
        allow=["query"],
    )
    assert defs.config["port"] == 5432 and defs.config["default_limit"] == 100
    assert [t.name for t in defs.tools] == ["postgres.query"]
    assert BuiltinConnectorDefs.loads(defs.dumps()) == defs
    bundle = build_bundle([], [defs])
    index = write_bundle(bundle, tmp_path)
    connectors, builtins, digest = read_full_bundle(index)
    assert connectors == [] and builtins == [defs] and digest == bundle.digest
    assert read_bundle(index) == ([], digest)
    assert build_bundle([], [defs]).digest == bundle.digest
    assert build_bundle([]).digest != bundle.digest


# The SQL guard ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("SELECT 1", "postgres"),
        ("SELECT ';' AS s", "postgres"),
        ("SELECT 1;", "mysql"),
        ('SELECT 1 AS "a;b"', "postgres"),
        ("SELECT 1 AS `a;b`", "mysql"),
        ("SELECT $$;DROP$$", "postgres"),
        ("SELECT $tag$ ; $ $tag$", "postgres"),
        ("SELECT E'\\';'", "postgres"),
        ("SELECT 'a\\'; DROP TABLE t; -- '", "mysql"),
        ("SELECT /* /* nested ; */ */ 1", "postgres"),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "mysql"),
        ("select updated_at, deleted from t", "postgres"),
        ("SELECT a FROM t WHERE b = $1", "postgres"),
        ("SELECT CASE WHEN a THEN 1 ELSE 2 END FROM t", "mysql"),
    ],
)
def test_reads_that_pass(sql: str, dialect: str) -> None:
    check_read(sql, dialect)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "dialect", "why"),
    [
        ("SELECT 1; DROP TABLE t", "postgres", "only one statement"),
        ("SELECT 'a\\'; DROP TABLE t; -- '", "postgres", "only one statement"),
        ("SELECT 1 --1; DELETE FROM t", "mysql", "not followed by a space"),
        ("SELECT 1 /*! ; DROP TABLE t */", "mysql", "executable comments"),
        ("SELECT 1 /*M! DROP TABLE t */", "mysql", "executable comments"),
        (
            "/* SELECT */ DELETE FROM t",
            "postgres",
            "must be SELECT, WITH, TABLE, VALUES, EXPLAIN or SHOW, not DELETE",
        ),
        ("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "postgres", "DELETE is not allowed"),
        ("SELECT * INTO t2 FROM t", "postgres", "SELECT INTO creates a table"),
        ("SELECT * FROM t FOR UPDATE", "postgres", "row locks"),
        ("SELECT * FROM t FOR SHARE", "postgres", "row locks"),
        ("SELECT pg_read_file('/etc/passwd')", "postgres", "pg_read_file"),
        ("SELECT dblink_exec('x', 'y')", "postgres", "dblink_exec"),
        ("SELECT @x := 1", "mysql", "assignment"),
        ("SELECT 'unterminated", "postgres", "unterminated quoted string"),
        ("SELECT 1 /* unterminated", "mysql", "not closed"),
        ("SELECT $a$ unterminated", "postgres", "unterminated dollar-quoted string"),
        ("", "postgres", "empty"),
        ("  ;  ;", "mysql", "empty"),
    ],
)
def test_reads_that_are_refused(sql: str, dialect: str, why: str) -> None:
    with pytest.raises(SqlRefused, match=why):
        check_read(sql, dialect)  # type: ignore[arg-type]


def test_execute_allows_one_write_and_no_transaction_control() -> None:
    assert check_single("INSERT INTO t VALUES (';')", "postgres") == "INSERT"
    assert check_single("DELETE FROM t WHERE a = 'x;y';", "mysql") == "DELETE"
    for sql in ("BEGIN", "COMMIT", "ROLLBACK", "INSERT INTO t VALUES (1); COMMIT"):
        with pytest.raises(SqlRefused):
            check_single(sql, "postgres")


def test_the_lexer_blanks_literals_and_comments() -> None:
    lexed = lex("SELECT 'x;y' -- c;\n, \"q;\" /* ; */ FROM t;", "postgres")
    assert ";" not in lexed.code.rstrip(";").rstrip()
    assert len(lexed.statements) == 1
