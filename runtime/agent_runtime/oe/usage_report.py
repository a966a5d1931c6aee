"""An execution's token usage and cost, summed from its audit records (one per model step).

Pure: the model steps' audit records carry what each call used and cost (`agent_runtime.oe.usage`), so a
view sums them without another write to the execution. A replayed step (`from_cache`) used nothing again,
and a retry that joined the first call (`joined`) is the same call: each step counts once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_runtime.oe.store.base import AuditRecord
from agent_runtime.oe.usage import total


def usage_view(records: Iterable[AuditRecord], *, currency: str) -> dict[str, Any] | None:
    """`{input_tokens, output_tokens, cached_tokens, total_tokens, cost, currency, model_steps,
    unpriced_steps}`, or None when no model step reported usage. `cost` is None when no step was priced."""
    steps: dict[int, AuditRecord] = {}
    for record in records:
        if record.kind != "llm" or record.usage is None or record.from_cache or record.decision == "joined":
            continue
        steps[record.step if record.step is not None else -len(steps) - 1] = record
    if not steps:
        return None
    used = total(record.usage for record in steps.values())
    priced = [record.cost for record in steps.values() if record.cost is not None]
    return {
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cached_tokens": used.cached_tokens,
        "total_tokens": used.total_tokens,
        "cost": sum(priced) if priced else None,
        "currency": currency,
        "model_steps": len(steps),
        "unpriced_steps": len(steps) - len(priced),
    }
