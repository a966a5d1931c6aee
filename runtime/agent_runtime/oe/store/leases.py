"""A lease record (oe/leases.py decides who may take one); kept by the stores shared by several replicas."""

from __future__ import annotations

from pydantic import BaseModel


class LeaseRecord(BaseModel):
    key: str  # watchdog:<execution_id> | delivery:<delivery key>
    holder: str  # the OE instance holding it
    expires_at: float  # epoch seconds
    version: int = 0
