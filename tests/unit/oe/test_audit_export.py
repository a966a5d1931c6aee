"""The audit export stream's pure parts (issue 34): a record or a signed head as an OTLP LogRecord (decoded
back with opentelemetry-proto, as a collector does), the settings refused naming the variable, and a sink
whose endpoint is away never blocking a write."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from agent_runtime.oe.audit_export import (
    OTLP_ENDPOINT_ENV,
    OTLP_HEADERS_ENV,
    Exports,
    JsonlExport,
    OtlpLogsExport,
    encode_request,
    export_from_env,
    logs_url,
    parse_headers,
)
from tests.conftest import free_port

pytestmark = pytest.mark.unit

RECORD = {
    "execution_id": "e1",
    "seq": 2,
    "hash": "ab" * 32,
    "prev_hash": "cd" * 32,
    "kind": "tool",
    "decision": "allow",
    "tool": "shout",
    "args": {"text": "hi"},
    "at": 1_700_000_000.5,
}
HEAD = {"head": {"execution_id": "e1", "seq": 2, "hash": "ab" * 32, "kid": "k1", "signature": "c2ln"}}


def test_a_record_and_a_head_become_log_records_a_collector_decodes() -> None:
    request = ExportLogsServiceRequest()
    request.ParseFromString(encode_request([RECORD, HEAD]))
    (resource_logs,) = request.resource_logs
    assert {a.key: a.value.string_value for a in resource_logs.resource.attributes} == {
        "service.name": "agent-engine-oe"
    }
    (scope_logs,) = resource_logs.scope_logs
    assert scope_logs.scope.name == "agent_engine.audit"
    record, head = scope_logs.log_records
    assert json.loads(record.body.string_value) == RECORD
    attributes = {a.key: a.value for a in record.attributes}
    assert attributes["audit.seq"].int_value == 2
    assert attributes["audit.hash"].string_value == RECORD["hash"]
    assert attributes["audit.prev_hash"].string_value == RECORD["prev_hash"]
    assert attributes["audit.kind"].string_value == "record"
    assert record.time_unix_nano == 1_700_000_000_500_000_000
    assert json.loads(head.body.string_value) == HEAD
    head_attributes = {a.key: a.value for a in head.attributes}
    assert head_attributes["audit.kind"].string_value == "head"
    assert head_attributes["audit.key_id"].string_value == "k1"


@pytest.mark.parametrize(
    ("text", "headers"),
    [("", {}), ("x-api-key=abc", {"x-api-key": "abc"}), (" A=1 , b = 2,", {"a": "1", "b": "2"})],
)
def test_headers_are_name_value_pairs(text: str, headers: dict[str, str]) -> None:
    assert parse_headers(text) == headers


def test_bad_settings_name_the_variable_and_never_the_key() -> None:
    with pytest.raises(ValueError, match=OTLP_HEADERS_ENV) as caught:
        parse_headers("just-a-secret-value")
    assert "just-a-secret-value" not in str(caught.value)
    with pytest.raises(ValueError, match=OTLP_ENDPOINT_ENV):
        logs_url("collector:4318")
    assert logs_url("http://c:4318/") == "http://c:4318/v1/logs"
    assert logs_url("https://c/otlp/v1/logs") == "https://c/otlp/v1/logs"


def test_the_environment_selects_the_sinks(tmp_path: object) -> None:
    assert export_from_env({}) is None
    exports = export_from_env({"OE_AUDIT_EXPORT_FILE": f"{tmp_path}/a/audit.jsonl"})
    assert isinstance(exports, Exports) and [type(s) for s in exports.sinks] == [JsonlExport]
    exports.write(RECORD)
    assert json.loads((exports.sinks[0].path).read_text()) == RECORD  # type: ignore[attr-defined]


def test_an_endpoint_that_is_away_never_blocks_a_write_and_its_records_are_counted_dropped() -> None:
    sink = OtlpLogsExport(
        f"http://127.0.0.1:{free_port()}", attempts=3, first_backoff_s=1.0, max_queue=50, max_batch=1
    )
    for n in range(200):  # more than the queue holds: the oldest go, while the worker still retries
        sink.write({**RECORD, "seq": n})
    # The writes returned while the worker retries its one record: the queue's 50 kept, the rest dropped.
    assert sink.sent == 0 and sink.dropped >= 200 - 50 - 1
    assert sink._thread.is_alive()
    sink.close(timeout_s=10)
    assert sink.sent == 0 and sink.dropped == 200
