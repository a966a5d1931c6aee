"""Small OpenAPI documents shared by the connector unit tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_SPECS = REPO_ROOT.parent / "shared" / "specs"
STRIPE_SPEC = SHARED_SPECS / "stripe-spec3-2023-09-12.yaml"


def stripe_spec() -> Path:
    """The real Stripe document, or a skip naming what is missing."""
    if not SHARED_SPECS.is_dir():
        pytest.skip(
            f"shared specs directory {SHARED_SPECS} is absent (it sits beside the repo as ../shared/specs)"
        )
    return STRIPE_SPEC


_BASE: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "jira", "version": "9"},
    "servers": [{"url": "https://jira.invalid/rest/api/2"}],
    "components": {
        "securitySchemes": {
            "token": {"type": "http", "scheme": "bearer"},
            "key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
        },
        "schemas": {
            "Comment": {
                "type": "object",
                "required": ["body"],
                "properties": {
                    "body": {"type": "string", "description": "  The text.  "},
                    "visibility": {"$ref": "#/components/schemas/Visibility"},
                    "author": {"$ref": "#/components/schemas/User", "nullable": True},
                },
            },
            "Visibility": {"type": "object", "nullable": True, "properties": {"value": {"type": "string"}}},
            "User": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "manager": {"$ref": "#/components/schemas/User"}},
            },
            "Tree": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}},
            },
            "Shape": {
                "oneOf": [{"$ref": "#/components/schemas/Visibility"}, {"type": "string", "nullable": True}],
            },
        },
    },
    "security": [{"token": []}],
    "paths": {
        "/issue/{issueIdOrKey}/comment": {
            "parameters": [
                {"name": "issueIdOrKey", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "get": {
                "operationId": "getComments",
                "summary": "Get comments",
                "description": "Returns all comments for an issue.",
                "parameters": [
                    {"name": "startAt", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                    {"name": "expand", "in": "query", "required": True, "schema": {"type": "string"}},
                    {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                ],
            },
            "post": {
                "operationId": "addComment",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Comment"}}},
                },
            },
        },
        "/tree": {
            "put": {
                "requestBody": {
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Tree"}}}
                },
            },
            "post": {
                "operationId": "postShape",
                "security": [],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Shape"}}},
                },
            },
        },
        "/upload": {
            "post": {
                "operationId": "upload",
                "requestBody": {"content": {"multipart/form-data": {"schema": {"type": "object"}}}},
            }
        },
        "/filter": {
            "get": {
                "operationId": "filter",
                "security": [],
                "parameters": [{"name": "q", "in": "query", "content": {"application/json": {"schema": {}}}}],
            }
        },
        "/items/{id}": {
            "post": {
                "operationId": "updateItem",
                "servers": [{"url": "https://elsewhere.invalid"}],
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "properties": {"id": {"type": "string"}, "metadata": {"type": "object"}},
                            }
                        }
                    }
                },
            }
        },
    },
}


def jira_document() -> dict[str, Any]:
    return copy.deepcopy(_BASE)
