"""`google`: Google Sheets and Drive under one OAuth2 credential (`gsheets.read_range`,
`gsheets.append_row`, `gdrive.list_files`, `gdrive.get_file`).

The refresh-token flow: `client_secret` and `refresh_token` (secrets) and `client_id` (config) are traded at
`token_url` for an access token, kept until a minute before it expires and refreshed once more when an API
answers 401. Errors are `{"error": {"code", "message", "status"}}`; the token endpoint's are
`{"error": "invalid_grant", "error_description"}`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from agent_runtime.connectors.builtin._rest import (
    RestClient,
    base_url_schema,
    clean_segment,
    host_port,
    json_of,
)
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError, TestResult, tool

_ID = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[A-Za-z0-9_-]+$"}
_TEXT_EXPORT = "text/plain"
MAX_FILE_CHARS = 100_000


class GoogleConnector(BuiltinConnector):
    type = "google"
    description = (
        "Google Sheets and Drive with one OAuth2 refresh token: read and append rows, list and read files."
    )
    config_schema = {
        "type": "object",
        "required": ["client_id"],
        "additionalProperties": False,
        "properties": {
            "client_id": {"type": "string", "minLength": 1, "maxLength": 512},
            "token_url": base_url_schema("https://oauth2.googleapis.com/token", "OAuth2 token endpoint"),
            "sheets_base_url": base_url_schema("https://sheets.googleapis.com/v4", "Sheets API root"),
            "drive_base_url": base_url_schema("https://www.googleapis.com/drive/v3", "Drive API root"),
        },
    }
    secrets = {"client_secret": "the OAuth2 client secret", "refresh_token": "the OAuth2 refresh token"}
    required_secrets = frozenset({"client_secret", "refresh_token"})
    tools = (
        tool(
            "gsheets.read_range",
            "Read cell values of a range in A1 notation (e.g. Sheet1!A1:D20).",
            properties={"spreadsheet_id": _ID, "range": {"type": "string", "minLength": 1, "maxLength": 200}},
            required=["spreadsheet_id", "range"],
            sensitive=False,
        ),
        tool(
            "gsheets.append_row",
            "Append one row of values after the last row of a range's table. Needs approval.",
            properties={
                "spreadsheet_id": _ID,
                "range": {"type": "string", "minLength": 1, "maxLength": 200},
                "values": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 200,
                    "items": {"type": ["string", "number", "integer", "boolean", "null"]},
                },
            },
            required=["spreadsheet_id", "range", "values"],
            sensitive=True,
        ),
        tool(
            "gdrive.list_files",
            "List Drive files, optionally with a Drive query (q), e.g. name contains 'report'.",
            properties={
                "q": {"type": "string", "maxLength": 2000},
                "page_size": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                "page_token": {"type": "string"},
            },
            sensitive=False,
        ),
        tool(
            "gdrive.get_file",
            "Read a file's metadata and, for text files and Google Docs, its text "
            "(up to 100,000 characters).",
            properties={"file_id": _ID, "include_content": {"type": "boolean", "default": True}},
            required=["file_id"],
            sensitive=False,
        ),
    )

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._rest = RestClient(provider="Google")
        self._token: str | None = None
        self._expires_at = 0.0
        self._lock: asyncio.Lock | None = None

    def _secrets(self, env: Mapping[str, str]) -> list[str]:
        values = [
            self.secret("client_secret", env, required=False),
            self.secret("refresh_token", env, required=False),
        ]
        return [v for v in (*values, self._token) if v]

    async def _access_token(self, env: Mapping[str, str], *, force: bool = False) -> str:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not force and self._token and time.monotonic() < self._expires_at:
                return self._token
            form = {
                "grant_type": "refresh_token",
                "client_id": self.config["client_id"],
                "client_secret": self.secret("client_secret", env),
                "refresh_token": self.secret("refresh_token", env),
            }
            try:
                response = await self._rest.request(
                    "POST", self.config["token_url"], data=form, read=False, secrets=self._secrets(env)
                )
            except BuiltinToolError as exc:
                if exc.status_code in (400, 401):
                    exc.category = "auth"
                    exc.explanation = f"Google refused the refresh token: {exc.explanation}"
                raise
            data = json_of(response, "Google")
            token = data.get("access_token") if isinstance(data, dict) else None
            if not isinstance(token, str) or not token:
                raise BuiltinToolError("auth", "Google's token endpoint answered without an access_token")
            self._token = token
            self._expires_at = time.monotonic() + max(float(data.get("expires_in") or 3600) - 60, 0)
            return token

    async def _api(self, method: str, url: str, env: Mapping[str, str], *, read: bool, **kwargs: Any) -> Any:
        token = await self._access_token(env)
        for attempt in (0, 1):
            try:
                response = await self._rest.request(
                    method,
                    url,
                    headers={"Authorization": f"Bearer {token}"},
                    read=read,
                    secrets=self._secrets(env),
                    **kwargs,
                )
                return response
            except BuiltinToolError as exc:
                if exc.status_code != 401 or attempt:
                    raise
                token = await self._access_token(env, force=True)  # expired or revoked early: refresh once
        raise AssertionError("unreachable")

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        if tool.startswith("gsheets."):
            sheet = clean_segment(arguments["spreadsheet_id"], "spreadsheet_id")
            cells = quote(arguments["range"], safe="!:$")
            base = f"{self.config['sheets_base_url'].rstrip('/')}/spreadsheets/{sheet}/values/{cells}"
            if tool == "gsheets.read_range":
                data = json_of(await self._api("GET", base, env, read=True), "Google")
                return {"range": data.get("range"), "values": data.get("values", [])}
            params = {"valueInputOption": "USER_ENTERED", "insertDataOption": "INSERT_ROWS"}
            data = json_of(
                await self._api(
                    "POST",
                    f"{base}:append",
                    env,
                    read=False,
                    params=params,
                    json_body={"values": [arguments["values"]]},
                ),
                "Google",
            )
            updates = data.get("updates") or {}
            return {
                "updated_range": updates.get("updatedRange"),
                "updated_cells": updates.get("updatedCells"),
            }
        drive = self.config["drive_base_url"].rstrip("/")
        fields = "id,name,mimeType,size,modifiedTime,webViewLink"
        if tool == "gdrive.list_files":
            params = {"pageSize": arguments["page_size"], "fields": f"nextPageToken,files({fields})"}
            for key, name in (("q", "q"), ("page_token", "pageToken")):
                if arguments.get(key):
                    params[name] = arguments[key]
            data = json_of(await self._api("GET", f"{drive}/files", env, read=True, params=params), "Google")
            return {"files": data.get("files", []), "next_page_token": data.get("nextPageToken")}
        file_id = clean_segment(arguments["file_id"], "file_id")
        meta = json_of(
            await self._api("GET", f"{drive}/files/{file_id}", env, read=True, params={"fields": fields}),
            "Google",
        )
        result: dict[str, Any] = {"file": meta}
        if arguments["include_content"]:
            mime = str(meta.get("mimeType", ""))
            if mime == "application/vnd.google-apps.document":
                response = await self._api(
                    "GET",
                    f"{drive}/files/{file_id}/export",
                    env,
                    read=True,
                    params={"mimeType": _TEXT_EXPORT},
                )
            elif mime.startswith("text/") or mime in ("application/json", "text/csv"):
                response = await self._api(
                    "GET", f"{drive}/files/{file_id}", env, read=True, params={"alt": "media"}
                )
            else:
                response = None
                result["content_note"] = f"{mime or 'this type'} has no text form here"
            if response is not None:
                text = response.content.decode("utf-8", errors="replace")
                result["content"] = text[:MAX_FILE_CHARS]
                result["truncated"] = len(text) > MAX_FILE_CHARS or bool(
                    response.extensions.get("agent_truncated")
                )
        return result

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        try:
            await self._access_token(env or self._env, force=True)
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        return TestResult(ok=True, detail="the refresh token was exchanged for an access token")

    async def aclose(self) -> None:
        await self._rest.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        props = cls.config_schema["properties"]
        return [
            host_port(config.get(k) or props[k]["default"])
            for k in ("token_url", "sheets_base_url", "drive_base_url")
        ]
