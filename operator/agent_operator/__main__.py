"""`python -m agent_operator`: run the operator (settings from AGENT_OPERATOR_* environment variables)."""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sys

import kopf

from agent_operator import handlers  # registers the kopf handlers
from agent_operator.settings import OperatorSettings


def main() -> int:
    settings = OperatorSettings.from_env(os.environ)
    if settings.peering and settings.priority is None:
        # Equal priorities make kopf pause every replica: give each process its own.
        settings = settings.model_copy(update={"priority": 1 + secrets.randbelow(2**31 - 2)})
    identity = f"{socket.gethostname()}@{os.getpid()}"
    handlers.configure(settings, identity=identity)
    debug = os.environ.get("AGENT_OPERATOR_DEBUG") == "1"
    log_format = kopf.LogFormat.JSON if settings.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(log_format=log_format, verbose=debug)
    if not debug:
        # Per-request and per-handler success lines would dominate the log at a thousand Agents.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    kopf.run(
        clusterwide=not settings.namespaces,
        namespaces=list(settings.namespaces),
        liveness_endpoint=settings.liveness_endpoint,
        standalone=settings.peering is None,
        peering_name=settings.peering,
        priority=settings.priority,
        identity=identity,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
