"""The Tool Pod's redaction pass on a 100 KB result vs without it, same run, same result.

What a call costs on its way out of the Tool Pod: the CallOutcome is built and serialized to the bytes
`/execute` answers. "without" is that alone; "with" adds `Redactor.value` over the result (every string,
key and number, and across strings) for a Tool Pod holding N secrets: a clean result (the usual case,
nothing found) and one that quotes a secret three times in three encodings (the slow path: cut and rebuilt).
The one-off cost of compiling a secret set's pattern is printed too (once per Tool Pod start).
"""

from __future__ import annotations

import base64
import statistics
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from agent_runtime.protocol import CallOutcome
from agent_runtime.redaction import Redactor

ROUNDS = 300
RESULT_BYTES = 100_000
_serialize = CallOutcome.__pydantic_serializer__.to_json


def secrets(count: int) -> list[str]:
    return [f"sk_live_{index:02d}/Canary+{index * 7919:08x}=tok" for index in range(count)]


def echo_result(*, leak: str | None = None) -> dict[str, Any]:
    """A provider's echo as the executor returns it: status, headers, 100 KB of text, many small items."""
    items = [{"id": index, "name": f"item {index}", "tags": ["a", "b"]} for index in range(400)]
    text = ("lorem ipsum dolor sit amet, consectetur adipiscing elit " * 2000)[: RESULT_BYTES - 30_000]
    headers = {"content-type": "application/json", "x-request-id": "4f1e9b", "server": "echo"}
    if leak is not None:
        headers["authorization"] = f"Bearer {leak}"
        text = text[:30_000] + quote(leak, safe="") + text[30_000:]
        items[200]["name"] = base64.b64encode(f"user:{leak}".encode()).decode()
    return {
        "status_code": 200,
        "content_type": "application/json",
        "body": {"headers": headers, "text": text, "items": items},
    }


def p50_ms(work: Callable[[], object]) -> float:
    for _ in range(20):
        work()
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    clean = echo_result()
    size = len(_serialize(CallOutcome(status="success", result=clean)))
    print(f"result: {size / 1000:.0f} KB serialized; {ROUNDS} rounds each, p50")
    without = p50_ms(lambda: _serialize(CallOutcome(status="success", result=clean)))
    print(f"without redaction (build + serialize):      {without:7.3f} ms")
    for count in (1, 6, 20):
        held = secrets(count)
        started = time.perf_counter()
        redactor = Redactor(held)
        compile_ms = (time.perf_counter() - started) * 1000
        leaky = echo_result(leak=held[-1])
        with_clean = p50_ms(
            lambda r=redactor: _serialize(CallOutcome(status="success", result=r.value(clean)))
        )
        with_leak = p50_ms(
            lambda r=redactor, v=leaky: _serialize(CallOutcome(status="success", result=r.value(v)))
        )
        assert held[-1] not in str(redactor.value(leaky))
        print(
            f"with redaction, {count:2d} secret(s): "
            f"clean {with_clean:7.3f} ms (+{with_clean - without:.3f}), "
            f"3 leaks {with_leak:7.3f} ms (+{with_leak - without:.3f}); compiled once in {compile_ms:.1f} ms"
        )


if __name__ == "__main__":
    main()
