"""Issue 34's figures, each against a baseline measured in the same run:

- a CEL condition's evaluation (`args.amount > 10000`, cost estimate included), against the name-only
  policy decision of before (target p50 under 50 us);
- a policy decision with a condition and every limit decided (execution, day, rate window: the pure
  decisions), against the same baseline (target p50 under 0.2 ms); and, apart, the store round trips the
  OE adds per call for limits (one counter add, one rate slot) on SQLite;
- the audit chain's cost per record on SQLite: the linked append (read the last record, hash, insert under
  the unique (execution, seq)) plus the signed head (Ed25519 sign, one upsert), against a plain insert;
- the export stream's cost per record (oe/audit_export.py): what the append path pays (a JSONL line, the
  OTLP queue's put) and what the OTLP worker pays off it (protobuf encoding, per record of a 256 batch).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from agent_runtime.audit_chain import signed_head
from agent_runtime.execution_token import StatementSigner, generate_private_key_pem
from agent_runtime.oe.audit_export import JsonlExport, OtlpLogsExport, encode_request
from agent_runtime.oe.conditions import compile_condition, facts
from agent_runtime.oe.limits import Limits, check_call, check_day, rate_windows
from agent_runtime.oe.policy import ToolPolicy, decide
from agent_runtime.oe.store import AuditRecord, SqliteStore
from agent_runtime.token_file import RotatingToken

N = 20_000
RECORDS = 2_000


def _p50_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _decisions() -> dict[str, list[float]]:
    plain = ToolPolicy.model_validate({"requireApproval": ["stripe.delete_*"], "deny": ["admin.*"]})
    conditional = ToolPolicy.model_validate(
        {
            "requireApproval": [
                "stripe.delete_*",
                {"tool": "stripe.create_refund", "when": "args.amount > 10000"},
            ],
            "deny": ["admin.*"],
        }
    )
    limits = Limits.model_validate(
        {
            "maxStepsPerExecution": 100,
            "maxModelCallsPerExecution": 50,
            "maxTokensPerExecution": 100_000,
            "maxCostPerDay": 50,
            "maxTokensPerUserPerDay": 1_000_000,
            "toolCallsPerMinute": 120,
            "toolCallsPerMinuteByTool": {"stripe.create_refund": 5},
        }
    )
    condition = compile_condition("args.amount > 10000")
    usage = {"steps": 7.0, "model_calls": 3.0, "tool_calls": 4.0, "tokens": 1200.0, "cost": 0.02}
    out: dict[str, list[float]] = {"names": [], "condition": [], "with_limits": []}
    tool = "stripe.create_refund"
    for n in range(N):
        args = {"amount": 50 if n % 2 else 20_000, "currency": "EUR", "order": f"o-{n}"}
        started = time.perf_counter()
        decide(plain, tool=tool, sensitive=True)
        out["names"].append(time.perf_counter() - started)
        seen = facts(tool=tool, args=args, agent="team-a/pay", user="alice", step=8, usage=usage)
        started = time.perf_counter()
        condition.evaluate(seen)
        out["condition"].append(time.perf_counter() - started)
        started = time.perf_counter()
        seen = facts(tool=tool, args=args, agent="team-a/pay", user="alice", step=8, usage=usage)
        check_call(limits, usage, is_llm=False)
        check_day(limits, agent_day={"cost": 3.0}, user_day={"tokens": 5000.0}, now=1.0e9)
        for window in rate_windows(limits, agent="team-a/pay", tool=tool):
            window.slots(1.0e9)
        decide(conditional, tool=tool, sensitive=True, facts=seen)
        out["with_limits"].append(time.perf_counter() - started)
    return out


async def _audit(directory: Path) -> dict[str, list[float]]:
    store = SqliteStore(directory / "oe.db")
    await store.open()
    signer = StatementSigner(RotatingToken(generate_private_key_pem(), what="OE signing key"))
    out: dict[str, list[float]] = {"plain": [], "linked": [], "signed_head": []}
    try:
        for n in range(RECORDS):
            record = AuditRecord(
                execution_id=f"e-{n % 20}",
                step=n,
                agent="team-a/pay",
                workspace_id="team-a.pay",
                kind="tool",
                tool="stripe.create_refund",
                args={"amount": n, "currency": "EUR"},
                decision="allow",
                route="tool_pod",
                status="success",
                at=1.0e9 + n,
            )
            started = time.perf_counter()
            await store._run(
                store._execute,
                "INSERT INTO audit (execution_id, record) VALUES (?, ?)",
                ("plain", record.model_dump_json()),
            )
            out["plain"].append(time.perf_counter() - started)
            started = time.perf_counter()
            stored = await store.append_audit(record)
            out["linked"].append(time.perf_counter() - started)
            assert stored.seq is not None and stored.hash is not None
            started = time.perf_counter()
            head = signed_head(
                stored.execution_id, seq=stored.seq, digest=stored.hash, sign=signer.sign_bytes
            )
            await store.set_audit_head(stored.execution_id, head)
            out["signed_head"].append(time.perf_counter() - started)
    finally:
        await store.close()
    return out


async def _limits_io(directory: Path) -> dict[str, list[float]]:
    store = SqliteStore(directory / "limits.db")
    await store.open()
    out: dict[str, list[float]] = {"add_usage": [], "rate_slot": []}
    # 120 a minute, one call a second: the bucket never runs dry, so each call takes a slot.
    window = rate_windows(Limits(toolCallsPerMinute=120), agent="a/b", tool="t")[0]
    try:
        for n in range(RECORDS):
            started = time.perf_counter()
            await store.add_usage("exec:e-1", {"steps": 1, "tool_calls": 1}, expires_at=2.0e9)
            out["add_usage"].append(time.perf_counter() - started)
            started = time.perf_counter()
            slot = await store.take_rate_slot(window.key, window.slots(1.0e9 + n), expires_at=2.0e9)
            assert slot is not None
            out["rate_slot"].append(time.perf_counter() - started)
    finally:
        await store.close()
    return out


def _export(directory: Path) -> dict[str, list[float]]:
    line = AuditRecord(
        execution_id="e-1",
        step=3,
        agent="team-a/pay",
        workspace_id="team-a.pay",
        kind="tool",
        tool="stripe.create_refund",
        args={"amount": 20_000, "currency": "EUR"},
        decision="allow",
        at=1.0e9,
        seq=3,
        prev_hash="ab" * 32,
        hash="cd" * 32,
    ).model_dump(mode="json")
    jsonl = JsonlExport(directory / "audit.jsonl")
    # An endpoint nobody listens on, one attempt: the queue's put is what is measured, not the sending.
    otlp = OtlpLogsExport("http://127.0.0.1:9", attempts=1, max_queue=RECORDS * 2)
    out: dict[str, list[float]] = {"jsonl": [], "enqueue": [], "encode": []}
    try:
        for _ in range(RECORDS):
            started = time.perf_counter()
            jsonl.write(line)
            out["jsonl"].append(time.perf_counter() - started)
            started = time.perf_counter()
            otlp.write(line)
            out["enqueue"].append(time.perf_counter() - started)
        batch = [line] * 256
        for _ in range(50):
            started = time.perf_counter()
            encode_request(batch)
            out["encode"].append((time.perf_counter() - started) / len(batch))
    finally:
        otlp.close(timeout_s=1)
    return out


def main() -> None:
    timings = _decisions()
    names, condition, limited = (_p50_us(timings[k]) for k in ("names", "condition", "with_limits"))
    print(f"{N} policy decisions, p50:")
    print(f"  names only (before)                          {names:8.1f} us")
    print(
        f"  CEL condition evaluation                     {condition:8.1f} us  "
        f"({condition / names:.1f}x; target < 50 us)"
    )
    print(
        f"  decision with the condition and every limit  {limited:8.1f} us  "
        f"({limited / names:.1f}x; target < 200 us)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-policy-") as tmp:
        audit = asyncio.run(_audit(Path(tmp)))
        io = asyncio.run(_limits_io(Path(tmp)))
        export = _export(Path(tmp))
    plain, linked, head = (_p50_us(audit[k]) for k in ("plain", "linked", "signed_head"))
    print(f"{RECORDS} audit records on SQLite, p50 per record:")
    print(f"  plain insert (before)                        {plain:8.1f} us")
    print(f"  linked append (read last, hash, insert)      {linked:8.1f} us  (+{linked - plain:.1f} us)")
    print(f"  signed head (Ed25519 sign, upsert)           {head:8.1f} us")
    print(
        f"  the chain adds per record                    {linked + head - plain:8.1f} us  "
        f"({(linked + head) / plain:.1f}x)"
    )
    print(
        f"limits' store round trips per call on SQLite, p50: counter add {_p50_us(io['add_usage']):.1f} us, "
        f"rate slot {_p50_us(io['rate_slot']):.1f} us"
    )
    print(
        f"the export stream per record, p50: JSONL line {_p50_us(export['jsonl']):.1f} us, OTLP queue put "
        f"{_p50_us(export['enqueue']):.1f} us (on the append path); OTLP protobuf encoding "
        f"{_p50_us(export['encode']):.1f} us (the worker's)"
    )
    print("  within targets" if condition < 50 and limited < 200 else "  OVER TARGET")


if __name__ == "__main__":
    main()
