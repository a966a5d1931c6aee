"""Hostile documents are refused before they cost memory or time: alias bombs, $ref fan-out, size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_runtime.connectors import documents, schema
from agent_runtime.connectors.__main__ import main as cli
from agent_runtime.connectors.compile import load_catalog_text
from agent_runtime.connectors.documents import load_yaml, parse_document_text, read_document_file
from agent_runtime.connectors.errors import DocumentTooComplexError


def billion_laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return (
        "\n".join(lines) + f"\nopenapi: 3.0.3\ninfo: {{title: x, version: '1', x: *a{levels}}}\npaths: {{}}\n"
    )


def ref_fan_out(levels: int, fan: int = 10) -> str:
    schemas: dict[str, object] = {f"S{levels}": {"type": "string"}}
    for i in range(levels - 1, -1, -1):
        ref = {"$ref": f"#/components/schemas/S{i + 1}"}
        schemas[f"S{i}"] = {"type": "object", "properties": {f"p{j}": ref for j in range(fan)}}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}}
    operation = {"operationId": "x", "requestBody": body, "responses": {"200": {"description": "ok"}}}
    return json.dumps(
        {
            "openapi": "3.0.3",
            "info": {"title": "x", "version": "1"},
            "components": {"schemas": schemas},
            "paths": {"/x": {"post": operation}},
        }
    )


@pytest.mark.parametrize("levels", [4, 9, 30])
def test_alias_expansion_is_bounded_while_parsing(levels: int) -> None:
    with pytest.raises(DocumentTooComplexError, match=r"YAML aliases \(\*name\) would expand"):
        parse_document_text(billion_laughs(levels), field="catalog")


def test_a_few_aliases_still_load_like_pyyaml() -> None:
    text = "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\nboth: [*b, *b]\n" + billion_laughs(2)
    data = load_yaml(text)
    assert data["other"] == {"x": 1, "y": 2} and data["both"] == [{"x": 1}, {"x": 1}]


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(DocumentTooComplexError, match="cannot be recursive"):
        parse_document_text("a: &x [1, *x]\n")


def test_the_pure_python_loader_is_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents.yaml, "__with_libyaml__", False)
    with pytest.raises(DocumentTooComplexError, match="would expand"):
        parse_document_text(billion_laughs(9))
    assert parse_document_text("a: &x {b: 1}\nc: *x\n") == {"a": {"b": 1}, "c": {"b": 1}}


def test_document_size_is_bounded_before_parsing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 1000)
    with pytest.raises(DocumentTooComplexError, match="catalog: 1001 bytes is over the 1000-byte limit"):
        parse_document_text("#" * 1001, field="catalog")
    big = tmp_path / "big.yaml"
    big.write_text("#" * 2000)
    with pytest.raises(DocumentTooComplexError, match="2000 bytes"):
        read_document_file(big)


def test_ref_fan_out_skips_the_operation_and_a_whole_document_of_it_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog = load_catalog_text(ref_fan_out(9), connector_name="fan")
    assert catalog.tools == [] and "expands to" in catalog.skipped[0].reason
    assert load_catalog_text(ref_fan_out(3), connector_name="fan").tools  # a modest fan-out compiles
    monkeypatch.setattr(schema, "MAX_DOCUMENT_SCHEMA_NODES", 500)
    with pytest.raises(DocumentTooComplexError, match="keep only the paths"):
        load_catalog_text(ref_fan_out(3), connector_name="fan")


def test_the_cli_refuses_a_hostile_document_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "openapi.yaml"
    document.write_text(billion_laughs(9))
    assert cli(["compile", str(document), "--name", "laughs", "-o", str(tmp_path / "out.yaml")]) == 2
    assert "YAML aliases" in capsys.readouterr().err
    assert not (tmp_path / "out.yaml").exists()
