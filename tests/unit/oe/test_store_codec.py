import asyncio

import pytest

from agent_runtime.oe.store import MongoStore, SqliteStore, open_store
from agent_runtime.oe.store.codec import decode_cursor, encode_cursor, encode_execution_changes, redact_uri
from agent_runtime.protocol import CallError, ExecutionState

# encode_execution_changes


def test_changes_are_validated_and_encoded_as_json_text() -> None:
    encoded = encode_execution_changes(
        {
            "status": "running",
            "runs": 2,
            "updated_at": 1_760_000_000.123456789,
            "error": CallError(category="x", explanation="é"),
            "result": {"$ref": "#/a", "a.b": [1, None]},
            "suspension": None,
        },
        allow_status=True,
    )
    assert encoded == {
        "status": '"running"',
        "runs": "2",
        "updated_at": "1760000000.1234567",
        "error": '{"category":"x","explanation":"é","status_code":null}',
        "result": '{"$ref":"#/a","a.b":[1,null]}',
        "suspension": "null",
    }


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"nope": 1}, "no field 'nope'"),
        ({"execution_id": "x"}, "execution_id cannot change"),
        ({"agent": "a/b"}, "agent cannot change"),
        ({"created_at": 1.0}, "created_at cannot change"),
        ({"status": "exploded"}, "invalid value for ExecutionRecord.status"),
        ({"runs": "many"}, "invalid value for ExecutionRecord.runs"),
        ({"error": {"explanation": "no category"}}, "invalid value for ExecutionRecord.error"),
    ],
)
def test_bad_changes_are_refused(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_execution_changes(changes, allow_status=True)


def test_status_only_when_allowed() -> None:
    with pytest.raises(ValueError, match="only through transition"):
        encode_execution_changes({"status": ExecutionState.COMPLETED}, allow_status=False)
    assert encode_execution_changes({}, allow_status=False) == {}


# cursors


@pytest.mark.parametrize(
    ("created_at", "execution_id"), [(1_760_000_000.1234567, "e-1"), (0.0, ""), (1e-7, "ünï/cødé ✓")]
)
def test_cursor_round_trips_exactly(created_at: float, execution_id: str) -> None:
    cursor = encode_cursor(created_at, execution_id)
    assert cursor.isascii() and "=" not in cursor
    assert decode_cursor(cursor) == (created_at, execution_id)


@pytest.mark.parametrize(
    "cursor",
    ["", "not a cursor", "!!!", encode_cursor(1.0, "x")[:-3], "WzEsMiwzXQ", "WyJhIiwiYiJd", "W3RydWUsImEiXQ"],
)
def test_bad_cursors_are_refused(cursor: str) -> None:
    with pytest.raises(ValueError, match="invalid page cursor"):
        decode_cursor(cursor)


# redact_uri


@pytest.mark.parametrize(
    ("uri", "redacted"),
    [
        (
            "mongodb://oe:s3cr%40t@db-0:27017,db-1:27017/?replicaSet=rs0",
            "mongodb://oe:***@db-0:27017,db-1:27017/?replicaSet=rs0",
        ),
        (
            "mongodb+srv://oe:pw@cluster.example/oe?authSource=admin",
            "mongodb+srv://oe:***@cluster.example/oe?authSource=admin",
        ),
        ("mongodb://oe@db/", "mongodb://oe@db/"),
        ("mongodb://db:27017/", "mongodb://db:27017/"),
        ("mongodb://u:p@ss@db/", "mongodb://u:***@db/"),
        (
            "mongodb://db/?tlsCertificateKeyFilePassword=pw&w=1",
            "mongodb://db/?tlsCertificateKeyFilePassword=***&w=1",
        ),
    ],
)
def test_redact_uri_hides_passwords(uri: str, redacted: str) -> None:
    assert redact_uri(uri) == redacted


# open_store


def test_open_store_builds_the_named_backend(tmp_path) -> None:
    sqlite = open_store(
        store_type="sqlite", sqlite_path=str(tmp_path / "oe.db"), mongodb_uri=None, mongodb_database="oe"
    )
    assert isinstance(sqlite, SqliteStore) and sqlite.path == tmp_path / "oe.db"
    assert not (tmp_path / "oe.db").exists()  # nothing touches the disk before open()
    mongo = open_store(
        store_type=" MongoDB ",
        sqlite_path=None,
        mongodb_uri="mongodb://oe:hunter2@db:27017/",
        mongodb_database="oe",
    )
    assert isinstance(mongo, MongoStore) and mongo.database == "oe"
    assert "hunter2" not in repr(mongo)


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        ({"store_type": "mysql"}, ["OE_STORE_TYPE", "sqlite", "mongodb", "postgres"]),
        ({"store_type": "postgres"}, ["OE_POSTGRES_URL"]),
        (
            {"store_type": "postgres", "postgres_url": "mongodb://oe:hunter2@db/"},
            ["OE_POSTGRES_URL", "oe:***@db"],
        ),
        ({"store_type": "sqlite", "replicas": 2}, ["OE_REPLICAS=2", "OE_STORE_TYPE=postgres"]),
        ({"store_type": ""}, ["OE_STORE_TYPE"]),
        ({"store_type": "sqlite", "sqlite_path": None}, ["OE_SQLITE_PATH"]),
        ({"store_type": "sqlite", "sqlite_path": "  "}, ["OE_SQLITE_PATH"]),
        ({"store_type": "mongodb", "mongodb_uri": None}, ["OE_MONGODB_URI"]),
        ({"store_type": "mongodb", "mongodb_uri": "http://oe:hunter2@db/"}, ["OE_MONGODB_URI", "oe:***@db"]),
        ({"store_type": "mongodb", "mongodb_database": ""}, ["OE_MONGODB_DATABASE"]),
        ({"store_type": "mongodb", "mongodb_database": "a.b"}, ["OE_MONGODB_DATABASE", "a.b"]),
        ({"store_type": "mongodb", "mongodb_database": "x" * 64}, ["OE_MONGODB_DATABASE"]),
    ],
)
def test_open_store_names_the_setting_to_fix(settings: dict, names: list[str]) -> None:
    arguments = {
        "sqlite_path": "/data/oe.db",
        "mongodb_uri": "mongodb://oe:hunter2@db:27017/",
        "mongodb_database": "oe",
        **settings,
    }
    with pytest.raises(ValueError) as raised:
        open_store(**arguments)
    for name in names:
        assert name in str(raised.value)
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize("uri", ["mongodb://oe:hunter2@db:notaport/", "mongodb://oe:hunter2@"])
def test_a_bad_uri_fails_open_without_the_password(uri: str) -> None:
    store = MongoStore(uri, "oe")
    with pytest.raises(ValueError, match="OE_MONGODB_URI") as raised:
        asyncio.run(store.open())
    assert "hunter2" not in str(raised.value)
    assert raised.value.__context__ is None and raised.value.__cause__ is None
