"""Writing Agent and Connector status: a merge patch of the status subresource, only when it changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_operator.kube import ApiError, KubeApi, object_path
from agent_operator.models import API_VERSION
from agent_operator.settings import FIELD_MANAGER
from agent_operator.status import status_changed


class StatusWriter:
    def __init__(self, api: KubeApi) -> None:
        self.api = api

    async def write(
        self, kind: str, namespace: str, name: str, *, previous: Mapping[str, Any], status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Patch `status` over `previous` (keys it no longer has are removed); the stored status, or None
        when nothing changed or the object is gone."""
        if not status_changed(previous, status):
            return None
        patch: dict[str, Any] = {"status": {**status, **{k: None for k in previous if k not in status}}}
        if "components" in previous and "components" in status:
            patch["status"]["components"] = {
                **{c: None for c in previous["components"] if c not in status["components"]},
                **status["components"],
            }
        try:
            result = await self.api.merge_patch(
                object_path(API_VERSION, kind, namespace, name, "status"), patch, field_manager=FIELD_MANAGER
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return dict(result.get("status") or {})
