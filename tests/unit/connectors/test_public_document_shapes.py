"""Shapes from large public documents (an issue tracker's optional auth, the Kubernetes API's wildcard
bodies, patch media types and apiKey bearer tokens) and tool.yaml's `tls` and `auth.prefix` settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.connectors import (
    ConnectorError,
    ToolDefinitions,
    ToolYaml,
    build_bundle,
    compile_catalog,
    materialize_connector,
    scaffold_tool_yaml,
)
from agent_runtime.connectors.executor import ConnectorExecutor
from tests.cluster import pki

_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_NAMESPACE = {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}
_K8S_PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


def tracker_document() -> dict[str, Any]:
    """The issue tracker's shape: most operations allow anonymous access beside basic auth and OAuth."""
    optional = [{"basicAuth": []}, {"OAuth2": ["read:jira-work"]}, {}]
    return {
        "openapi": "3.0.1",
        "info": {"title": "tracker", "version": "1001"},
        "components": {
            "securitySchemes": {
                "basicAuth": {"type": "http", "scheme": "basic"},
                "OAuth2": {
                    "type": "oauth2",
                    "flows": {
                        "authorizationCode": {"authorizationUrl": "/a", "tokenUrl": "/t", "scopes": {}}
                    },
                },
            }
        },
        "paths": {
            "/issue/{issueIdOrKey}": {
                "get": {
                    "operationId": "getIssue",
                    "parameters": [_param("issueIdOrKey")],
                    "security": optional,
                },
            },
            "/issue": {
                "post": {
                    "operationId": "createIssue",
                    "security": optional,
                    "requestBody": _json_body(
                        {"type": "object", "properties": {"fields": {"type": "object"}}}
                    ),
                }
            },
            "/serverInfo": {"get": {"operationId": "getServerInfo", "security": [{}]}},
            "/status": {"get": {"operationId": "getStatus", "security": []}},
            "/myself": {"get": {"operationId": "getMyself", "security": [{"basicAuth": []}]}},
            "/dashboard": {"get": {"operationId": "getDashboards"}},
        },
    }


def kubernetes_document() -> dict[str, Any]:
    """The Kubernetes API's shape: apiKey BearerToken, `*/*` create bodies, patch-only PATCH bodies."""
    config_map = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"allOf": [{"$ref": "#/components/schemas/ObjectMeta"}], "default": {}},
            "data": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "1.35"},
        "components": {
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                }
            },
            "schemas": {
                "ConfigMap": config_map,
                "ObjectMeta": {"type": "object", "properties": {"name": {"type": "string"}}},
                "Patch": {"type": "object", "description": "Patch is provided to give a concrete name"},
            },
        },
        "paths": {
            "/api/v1/namespaces/{namespace}/configmaps": {
                "parameters": [_NAMESPACE],
                "post": {
                    "operationId": "createCoreV1NamespacedConfigMap",
                    "description": "create a ConfigMap",
                    "requestBody": {
                        "content": {"*/*": {"schema": {"$ref": "#/components/schemas/ConfigMap"}}},
                        "required": True,
                    },
                },
            },
            "/api/v1/namespaces/{namespace}/configmaps/{name}": {
                "parameters": [_NAME, _NAMESPACE],
                "put": {
                    "operationId": "replaceCoreV1NamespacedConfigMap",
                    "requestBody": {
                        "content": {"*/*": {"schema": {"$ref": "#/components/schemas/ConfigMap"}}},
                        "required": True,
                    },
                },
                "patch": {
                    "operationId": "patchCoreV1NamespacedConfigMap",
                    "description": "partially update the specified ConfigMap",
                    "requestBody": {
                        "content": {
                            media: {"schema": {"$ref": "#/components/schemas/Patch"}}
                            for media in _K8S_PATCH_TYPES
                        },
                        "required": True,
                    },
                },
            },
        },
    }


def _param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _json_body(schema: dict[str, Any], media: str = "application/json") -> dict[str, Any]:
    return {"required": True, "content": {media: {"schema": schema}}}


def _tool(catalog: ToolDefinitions, operation_id: str):
    return next(t for t in catalog.tools if t.operation_id == operation_id)


def _bound(document: dict[str, Any], auth: dict[str, Any] | None, **tool: Any) -> ToolDefinitions:
    catalog = compile_catalog(document, connector_name="api")
    spec = ToolYaml(
        name="api",
        source={"base_url": tool.pop("base_url", "https://api.invalid/")},
        expose={"allow": ["*"]},
        auth=auth,
        **tool,
    )
    return materialize_connector(spec, catalog)


# -- 1: a bound credential goes wherever the document allows one ------------------------------------


def test_optional_auth_operations_carry_the_bound_credential() -> None:
    catalog = compile_catalog(tracker_document(), connector_name="tracker")
    authenticated = {t.operation_id: t.authenticated for t in catalog.tools}
    assert authenticated == {
        "getIssue": True,  # basic, OAuth or anonymous: the credential is allowed, so it is sent
        "createIssue": True,
        "getServerInfo": False,  # only the anonymous requirement
        "getStatus": False,  # security: [] turns authentication off
        "getMyself": True,
        "getDashboards": True,  # inherits the document's (absent) requirement: tool.yaml decides
    }
    executor = ConnectorExecutor(_bound(tracker_document(), {"type": "basic", "env": "TRACKER_AUTH"}))
    env = {"TRACKER_AUTH": "me@example.invalid:api-token"}
    issue = executor.prepare("api_getIssue", {"issueIdOrKey": "PRJ-1"}, env)
    assert issue.headers["authorization"].startswith("Basic ")
    assert "authorization" not in executor.prepare("api_getServerInfo", {}, env).headers


# -- 2: wildcard request bodies are sent as JSON ----------------------------------------------------


def test_wildcard_bodies_compile_as_json_and_say_so() -> None:
    catalog = compile_catalog(kubernetes_document(), connector_name="k8s")
    assert catalog.skipped == []
    create = _tool(catalog, "createCoreV1NamespacedConfigMap")
    assert create.body is not None and create.body.media_type == "application/json"
    assert create.body.properties == ["apiVersion", "kind", "metadata", "data"]
    assert create.description == (
        "create a ConfigMap\n\nThe request body is sent as JSON (the API declares */*)."
    )
    request = ConnectorExecutor(_bound(kubernetes_document(), None)).prepare(
        "api_createCoreV1NamespacedConfigMap",
        {"namespace": "ns", "metadata": {"name": "cm"}, "data": {"k": "v"}},
    )
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content or b"") == {"metadata": {"name": "cm"}, "data": {"k": "v"}}


def test_application_wildcard_counts_and_other_media_types_are_still_skipped() -> None:
    document = kubernetes_document()
    paths = document["paths"]
    paths["/any"] = {
        "post": {"operationId": "any", "requestBody": _json_body({"type": "array"}, "application/*")}
    }
    paths["/text"] = {
        "post": {"operationId": "text", "requestBody": _json_body({"type": "string"}, "text/plain")}
    }
    catalog = compile_catalog(document, connector_name="k8s")
    any_body = _tool(catalog, "any").body
    assert any_body is not None and (any_body.media_type, any_body.arg) == ("application/json", "body")
    (skipped,) = catalog.skipped
    assert skipped.operation_id == "text" and "text/plain is not supported" in skipped.reason
    assert "wildcard such as */*" in skipped.reason


# -- 3: PATCH goes out with a media type the document declares ---------------------------------------


def test_patch_prefers_merge_patch_for_an_object_body() -> None:
    patch = _tool(
        compile_catalog(kubernetes_document(), connector_name="k8s"), "patchCoreV1NamespacedConfigMap"
    )
    assert patch.body is not None and patch.body.media_type == "application/merge-patch+json"
    assert patch.description.endswith("The request body is sent as application/merge-patch+json.")
    request = ConnectorExecutor(_bound(kubernetes_document(), None)).prepare(
        "api_patchCoreV1NamespacedConfigMap", {"namespace": "ns", "name": "cm", "body": {"data": {"k": None}}}
    )
    assert request.method == "PATCH"
    assert request.headers["content-type"] == "application/merge-patch+json"
    assert json.loads(request.content or b"") == {"data": {"k": None}}


@pytest.mark.parametrize(
    ("media_types", "schema", "chosen"),
    [
        # An array body is a JSON Patch.
        (_K8S_PATCH_TYPES, {"type": "array", "items": {"type": "object"}}, "application/json-patch+json"),
        # Without merge patch on offer, strategic merge patch (also a JSON object).
        (
            ("application/json-patch+json", "application/strategic-merge-patch+json"),
            {"type": "object"},
            "application/strategic-merge-patch+json",
        ),
        # Plain JSON, when declared, always wins.
        (("application/merge-patch+json", "application/json"), {"type": "object"}, "application/json"),
        # One JSON-like type: that one, as declared.
        (("application/vnd.api+json",), {"type": "object"}, "application/vnd.api+json"),
        (("application/json-patch+json",), {"type": "array"}, "application/json-patch+json"),
        # A JSON type beats a wildcard; form beats a wildcard too.
        (("*/*", "application/merge-patch+json"), {"type": "object"}, "application/merge-patch+json"),
        (
            ("*/*", "application/x-www-form-urlencoded"),
            {"type": "object"},
            "application/x-www-form-urlencoded",
        ),
    ],
)
def test_body_media_type_choice(media_types: tuple[str, ...], schema: dict[str, Any], chosen: str) -> None:
    document = kubernetes_document()
    document["paths"] = {
        "/x": {
            "patch": {
                "operationId": "x",
                "requestBody": {"content": {m: {"schema": schema} for m in media_types}},
            }
        }
    }
    body = compile_catalog(document, connector_name="k8s").tools[0].body
    assert body is not None and body.media_type == chosen


def test_a_catalog_with_an_unencodable_media_type_is_refused_naming_the_field() -> None:
    data = compile_catalog(kubernetes_document(), connector_name="k8s").to_data()
    data["tools"][1]["body"]["media_type"] = "application/apply-patch+yaml"
    with pytest.raises(ConnectorError, match=r"tools\.1\.body\.media_type.*recompile"):
        ToolDefinitions.from_data(data)


# -- 6: an apiKey scheme on Authorization that is a bearer token --------------------------------------


def test_an_authorization_api_key_scheme_that_says_bearer_gets_the_prefix() -> None:
    catalog = compile_catalog(kubernetes_document(), connector_name="k8s")
    assert catalog.auth is not None
    assert (catalog.auth.type, catalog.auth.location, catalog.auth.name, catalog.auth.prefix) == (
        "api_key",
        "header",
        "authorization",
        "Bearer ",
    )
    scaffold = scaffold_tool_yaml(catalog, base_url="https://k8s.invalid")
    assert scaffold.auth is not None and scaffold.auth.prefix == "Bearer "
    assert 'prefix: "Bearer "' in scaffold.dumps() or "prefix: 'Bearer '" in scaffold.dumps()
    env = {"K8S_TOKEN": "eyJhbGciOi.token"}
    for auth in (
        {"type": "api_key", "env": "K8S_TOKEN"},  # the catalog's scheme fills in in, name and prefix
        {"type": "api_key", "env": "K8S_TOKEN", "in": "header", "name": "Authorization"},  # same scheme
        {"type": "bearer", "env": "K8S_TOKEN"},
    ):
        executor = ConnectorExecutor(_bound(kubernetes_document(), auth))
        request = executor.prepare("api_createCoreV1NamespacedConfigMap", {"namespace": "ns"}, env)
        headers = {name.lower(): value for name, value in request.headers.items()}
        assert headers["authorization"] == "Bearer eyJhbGciOi.token", auth


def test_other_authorization_api_keys_are_sent_as_is_unless_tool_yaml_sets_a_prefix() -> None:
    document = kubernetes_document()
    document["components"]["securitySchemes"] = {
        "key": {"type": "apiKey", "in": "header", "name": "Authorization", "description": "Your API key"}
    }
    catalog = compile_catalog(document, connector_name="api")
    assert catalog.auth is not None and catalog.auth.prefix is None
    env = {"API_KEY": "k-1"}
    plain = ConnectorExecutor(_bound(document, {"type": "api_key", "env": "API_KEY"}))
    assert (
        plain.prepare("api_createCoreV1NamespacedConfigMap", {"namespace": "n"}, env).headers["Authorization"]
        == "k-1"
    )
    prefixed = ConnectorExecutor(_bound(document, {"type": "api_key", "env": "API_KEY", "prefix": "token "}))
    request = prefixed.prepare("api_createCoreV1NamespacedConfigMap", {"namespace": "n"}, env)
    assert request.headers["Authorization"] == "token k-1" and "k-1" in request.secrets
    # An explicit empty prefix overrides the document's bearer hint.
    bare = _bound(kubernetes_document(), {"type": "api_key", "env": "K8S_TOKEN", "prefix": ""})
    assert bare.auth is not None and bare.auth.prefix == ""


def test_prefix_is_refused_where_it_cannot_apply() -> None:
    with pytest.raises(ConnectorError, match=r"field auth: prefix applies to type api_key only"):
        ToolYaml.loads("name: api\nauth: {type: bearer, env: TOKEN, prefix: 'Bearer '}\n")
    with pytest.raises(ConnectorError, match=r"field auth.prefix: .*printable characters on one line"):
        ToolYaml.loads('name: api\nauth: {type: api_key, env: TOKEN, prefix: "a\\nb"}\n')


# -- 4: tool.yaml's tls -------------------------------------------------------------------------------


def test_tls_settings_are_validated_naming_the_field() -> None:
    base = "name: api\nsource: {base_url: https://api.internal}\n"
    with pytest.raises(ConnectorError, match=r"field tls: .*exactly one of ca_file .* or ca_env"):
        ToolYaml.loads(base + "tls: {}\n")
    with pytest.raises(ConnectorError, match=r"field tls: .*exactly one"):
        ToolYaml.loads(base + "tls: {ca_file: /etc/ca.pem, ca_env: CA}\n")
    with pytest.raises(ConnectorError, match=r"field tls.ca_file: 'ca.pem' must be an absolute path"):
        ToolYaml.loads(base + "tls: {ca_file: ca.pem}\n")
    with pytest.raises(ConnectorError, match=r"field tls.ca_file: .*no URL"):
        ToolYaml.loads(base + "tls: {ca_file: 'https://example.invalid/ca.pem'}\n")
    with pytest.raises(ConnectorError, match=r"field tls.ca_env: must name an environment variable"):
        ToolYaml.loads(base + "tls: {ca_env: 'not a name'}\n")
    with pytest.raises(ConnectorError, match=r"field tls.verify: Extra inputs are not permitted"):
        ToolYaml.loads(base + "tls: {ca_env: CA, verify: false}\n")
    with pytest.raises(
        ConnectorError, match=r"tls is set but source.base_url 'http://api.internal' is not https"
    ):
        ToolYaml.loads("name: api\nsource: {base_url: http://api.internal}\ntls: {ca_env: CA}\n")


def test_tls_is_materialized_into_the_bundle_and_read_back() -> None:
    connector = _bound(
        kubernetes_document(), None, base_url="https://api.internal", tls={"ca_env": "INTERNAL_CA"}
    )
    assert connector.tls is not None and connector.tls.ca_env == "INTERNAL_CA"
    bundle = build_bundle([connector])
    (read,) = [ToolDefinitions.loads(bundle.files["api.yaml"].decode())]
    assert read.tls == connector.tls
    # Without tls the bundle bytes are what they were before the setting existed.
    assert b'"tls"' not in build_bundle([_bound(kubernetes_document(), None)]).files["api.yaml"]


def test_the_ca_is_read_when_the_executor_is_built_with_errors_naming_the_field(tmp_path: Path) -> None:
    ca = pki.make_ca()
    by_env = _bound(kubernetes_document(), None, tls={"ca_env": "INTERNAL_CA"})
    ConnectorExecutor(by_env, env={"INTERNAL_CA": ca.cert_pem.decode()}).close()
    with pytest.raises(
        ConnectorError, match=r"tls.ca_env names INTERNAL_CA, which is not set; set it to the PEM"
    ):
        ConnectorExecutor(by_env, env={})
    with pytest.raises(ConnectorError, match=r"tls.ca_env INTERNAL_CA holds no PEM certificate"):
        ConnectorExecutor(by_env, env={"INTERNAL_CA": "not a certificate"})
    broken = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"
    with pytest.raises(ConnectorError, match=r"tls.ca_env INTERNAL_CA is not a valid PEM CA certificate"):
        ConnectorExecutor(by_env, env={"INTERNAL_CA": broken})
    ca_file = tmp_path / "ca.pem"
    by_file = _bound(kubernetes_document(), None, tls={"ca_file": str(ca_file)})
    with pytest.raises(ConnectorError, match=r"tls.ca_file '.*ca.pem' does not exist here; mount the CA"):
        ConnectorExecutor(by_file)
    ca_file.write_bytes(ca.cert_pem)
    ConnectorExecutor(by_file).close()
