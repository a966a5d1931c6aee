"""Kubernetes Events on Agents and Connectors: what `kubectl describe` shows next to the conditions.

Best effort: a refused Event is logged, never fatal (the condition says it already). Messages name fields
and objects, never a value from a Secret.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, Literal

from agent_operator.kube import ApiError, KubeApi, object_path
from agent_operator.models import API_VERSION
from agent_operator.render import MANAGED_BY
from agent_operator.settings import FIELD_MANAGER

log = logging.getLogger("agent_operator")


class EventPoster:
    def __init__(self, api: KubeApi) -> None:
        self.api = api

    async def post(
        self,
        body: dict[str, Any],
        *,
        kind: str,
        reason: str,
        message: str,
        type_: Literal["Normal", "Warning"] = "Warning",
    ) -> None:
        meta = body["metadata"]
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": kind,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": MANAGED_BY},
            "reportingComponent": MANAGED_BY,
            "reportingInstance": MANAGED_BY,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.api.create(
                object_path("v1", "Event", meta["namespace"]), event, field_manager=FIELD_MANAGER
            )
        except ApiError as exc:  # best effort; the condition already says it
            log.warning("could not post event", extra={"reason": reason, "error": str(exc)[:300]})
