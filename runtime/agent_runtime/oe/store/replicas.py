"""Which stores several OE replicas may share: a pure decision from what the server says it is.

FerretDB v1 applies an update as a read followed by a write, on its SQLite and PostgreSQL backends alike,
so two replicas' compare-and-sets of one execution can both win (measured: 10 of 30 raced executions had
two winners on its PostgreSQL backend, 23 of 30 on SQLite). One OE is correct there (MongoStore serializes
its own writes); several are refused, naming the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def ferretdb_refusal(build_info: Mapping[str, Any], *, replicas: int) -> str | None:
    """Why `replicas` OEs must not share this MongoDB-protocol server, or None when they may."""
    version = build_info.get("ferretdbVersion")
    if replicas <= 1 or not isinstance(version, str) or not version.startswith("v1."):
        return None
    return (
        f"OE_REPLICAS={replicas} on FerretDB {version}: it does not update a document atomically across "
        "processes, so two replicas could both take one decision; run one replica (oe.replicas=1) or use "
        "OE_STORE_TYPE=postgres (oe.store.type=postgres) for several"
    )
