"""`python -m agent_operator`: run the operator (settings from AGENT_OPERATOR_* environment variables)."""

from __future__ import annotations

import logging
import os
import sys

import kopf

from agent_operator import handlers  # noqa: F401 - registers the kopf handlers
from agent_operator.settings import OperatorSettings


def main() -> int:
    settings = OperatorSettings.from_env(os.environ)
    debug = os.environ.get("AGENT_OPERATOR_DEBUG") == "1"
    kopf.configure(log_format=kopf.LogFormat.JSON, verbose=debug)
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
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
