"""`github`: the GitHub REST API (`github.get_issue`, `github.list_issues`, `github.create_issue`,
`github.comment_issue`). `base_url` defaults to https://api.github.com; GitHub Enterprise Server is
`https://<host>/api/v3`. A 403 with `x-ratelimit-remaining: 0` is a rate limit, like a 429."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from agent_runtime.connectors.builtin._rest import (
    RestClient,
    base_url_schema,
    bearer,
    clean_segment,
    host_port,
    json_of,
)
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError, TestResult, tool

_NAME = {"type": "string", "minLength": 1, "maxLength": 100, "pattern": r"^[A-Za-z0-9_.-]+$"}
_REPO = {"owner": {**_NAME, "description": "user or organisation"}, "repo": _NAME}
_NUMBER = {"type": "integer", "minimum": 1}


class GithubConnector(BuiltinConnector):
    type = "github"
    description = "GitHub or GitHub Enterprise Server issues: read, list, create, comment."
    config_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "base_url": base_url_schema(
                "https://api.github.com", "API root; GitHub Enterprise Server: https://HOST/api/v3"
            )
        },
    }
    secrets = {"token": "a personal access token or GitHub App installation token"}
    required_secrets = frozenset({"token"})
    tools = (
        tool(
            "github.get_issue",
            "Read one issue (or pull request) by number: title, state, body, labels, author.",
            properties={**_REPO, "issue_number": _NUMBER},
            required=["owner", "repo", "issue_number"],
            sensitive=False,
        ),
        tool(
            "github.list_issues",
            "List a repository's issues, newest first.",
            properties={
                **_REPO,
                "state": {"type": "string", "enum": ["open", "closed", "all"], "default": "open"},
                "labels": {"type": "string", "description": "comma-separated label names"},
                "per_page": {"type": "integer", "minimum": 1, "maximum": 100, "default": 30},
                "page": {"type": "integer", "minimum": 1, "default": 1},
            },
            required=["owner", "repo"],
            sensitive=False,
        ),
        tool(
            "github.create_issue",
            "Open a new issue. Needs approval.",
            properties={
                **_REPO,
                "title": {"type": "string", "minLength": 1, "maxLength": 256},
                "body": {"type": "string", "maxLength": 65_536},
                "labels": {"type": "array", "items": {"type": "string"}, "maxItems": 100},
                "assignees": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
            },
            required=["owner", "repo", "title"],
            sensitive=True,
        ),
        tool(
            "github.comment_issue",
            "Add a comment to an issue or pull request. Needs approval.",
            properties={**_REPO, "issue_number": _NUMBER, "body": {"type": "string", "minLength": 1}},
            required=["owner", "repo", "issue_number", "body"],
            sensitive=True,
        ),
    )

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._rest = RestClient(provider="GitHub")

    async def _api(self, method: str, path: str, env: Mapping[str, str], **kwargs: Any) -> httpx.Response:
        token = self.secret("token", env)
        headers = {
            **bearer(token),
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "agent-engine",
        }
        url = f"{self.config['base_url'].rstrip('/')}{path}"
        try:
            return await self._rest.request(method, url, headers=headers, secrets=[token or ""], **kwargs)
        except BuiltinToolError as exc:
            if exc.status_code == 403 and "rate limit" in exc.explanation.lower():
                exc.category = "rate_limited"
            raise

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        owner = clean_segment(arguments["owner"], "owner")
        repo = clean_segment(arguments["repo"], "repo")
        base = f"/repos/{owner}/{repo}/issues"
        if tool == "github.get_issue":
            response = await self._api("GET", f"{base}/{arguments['issue_number']}", env, read=True)
            return _issue(json_of(response, "GitHub"), full=True)
        if tool == "github.list_issues":
            params = {k: arguments[k] for k in ("state", "per_page", "page")}
            if arguments.get("labels"):
                params["labels"] = arguments["labels"]
            response = await self._api("GET", base, env, read=True, params=params)
            items = json_of(response, "GitHub")
            return {
                "issues": [_issue(i, full=False) for i in items if isinstance(i, dict)],
                "page": params["page"],
            }
        if tool == "github.create_issue":
            body = {k: arguments[k] for k in ("title", "body", "labels", "assignees") if k in arguments}
            response = await self._api("POST", base, env, read=False, json_body=body)
            return _issue(json_of(response, "GitHub"), full=False)
        response = await self._api(
            "POST",
            f"{base}/{arguments['issue_number']}/comments",
            env,
            read=False,
            json_body={"body": arguments["body"]},
        )
        data = json_of(response, "GitHub")
        return {"id": data.get("id"), "html_url": data.get("html_url"), "created_at": data.get("created_at")}

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        try:
            response = await self._api("GET", "/user", env or self._env, read=True)
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        return TestResult(ok=True, detail=f"authenticated as {json_of(response, 'GitHub').get('login', '?')}")

    async def aclose(self) -> None:
        await self._rest.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [host_port(config.get("base_url") or "https://api.github.com")]


def _issue(data: dict[str, Any], *, full: bool) -> dict[str, Any]:
    out = {
        "number": data.get("number"),
        "title": data.get("title"),
        "state": data.get("state"),
        "html_url": data.get("html_url"),
        "user": (data.get("user") or {}).get("login"),
        "labels": [label.get("name") for label in data.get("labels") or [] if isinstance(label, dict)],
        "comments": data.get("comments"),
        "is_pull_request": "pull_request" in data,
        "created_at": data.get("created_at"),
    }
    if full:
        out["body"] = data.get("body")
    return out
