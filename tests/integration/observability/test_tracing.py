"""One governed turn is one trace (issue 33): the OE, the AER and the Tool Pod export over OTLP to a real
Jaeger on loopback, and the trace read back from Jaeger's query API has the execution, its two runs (the
first and the approved resume, linked to the resume's request), the steps under the AER's requests, the
Tool Pod's model span with the GenAI usage attributes and the provider's HTTP call under it; no span holds
a planted secret. The same turns' metrics are parsed from the OE's exposition, each series asserted, and
the chart's PrometheusRule is checked by promtool in test_alert_rules.py.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Process
from tests.integration.jaeger import Jaeger, ObservabilityBinsUnavailable, running_jaeger
from tests.integration.loop.harness import AGENT, PLANTED, RUNTIME_TOKEN
from tests.integration.observability.harness import ObservedPlatform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import RunningLLMPeer, Turn

pytestmark = pytest.mark.integration

PRICES = {"currency": "USD", "models": {"loop-model": {"input": 2.0, "output": 8.0, "cached": 0.5}}}
# A value the tenant passes as an argument: arguments are never span attributes.
PLANTED_ARGUMENT = "acct-planted-9f1c22e7"


@pytest.fixture(scope="module")
def jaeger() -> Iterator[Jaeger]:
    try:
        with running_jaeger() as running:
            yield running
    except ObservabilityBinsUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def provider_url() -> Iterator[str]:
    with running_echo_provider() as provider:
        yield provider.url


def _platform(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    provider_url: str,
    observe: dict[str, str],
    *,
    memory: bool = False,
) -> ObservedPlatform:
    return ObservedPlatform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=provider_url,
        policy={"requireApproval": ["transfer"]},
        observe={"OE_PRICES": json.dumps(PRICES), **observe},
        memory=memory,
    ).start()


@pytest.fixture
def platform(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    provider_url: str,
    jaeger: Jaeger,
) -> ObservedPlatform:
    observe = {"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    return _platform(tmp_path, spawn, llm_peer, provider_url, observe, memory=True)


@pytest.fixture
def metered_platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> ObservedPlatform:
    """Tracing off: the metrics do not depend on it."""
    return _platform(tmp_path, spawn, llm_peer, provider_url, {})


def _spans(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {span["spanID"]: span for span in trace["spans"]}


def _service(trace: dict[str, Any], span: dict[str, Any]) -> str:
    return str(trace["processes"][span["processID"]]["serviceName"])


def _tags(span: dict[str, Any]) -> dict[str, Any]:
    return {tag["key"]: tag["value"] for tag in span.get("tags", [])}


def _parent(span: dict[str, Any]) -> str | None:
    return next((r["spanID"] for r in span.get("references", []) if r["refType"] == "CHILD_OF"), None)


def _ancestors(spans: dict[str, dict[str, Any]], span: dict[str, Any]) -> list[str]:
    """The operation names from `span`'s parent up to the root."""
    out = []
    parent = _parent(span)
    while parent is not None and parent in spans:
        out.append(spans[parent]["operationName"])
        parent = _parent(spans[parent])
    return out


def _named(spans: dict[str, dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return sorted((s for s in spans.values() if s["operationName"] == name), key=lambda s: s["startTime"])


def _assert_provider_call(span: dict[str, Any], llm_peer: RunningLLMPeer) -> None:
    """`span` (the Tool Pod's model span) is the client span of the provider's HTTP call."""
    tags = _tags(span)
    assert span["tags"] and tags["span.kind"] == "client"
    port = int(llm_peer.base_url.rsplit(":", 1)[1].split("/")[0])
    assert (tags["server.address"], tags["server.port"]) == ("127.0.0.1", port)
    assert (tags["http.request.method"], tags["http.response.status_code"]) == ("POST", 200)


def _complete(trace: dict[str, Any]) -> bool:
    names = {span["operationName"] for span in trace["spans"]}
    runs = [n for n in names if n.startswith("run ")]
    model_calls = [s for s in trace["spans"] if s["operationName"] == "chat main"]
    # Five model spans: the OE's three steps (two fresh, one replayed) and the Tool Pod's two calls. Each
    # process exports on its own schedule: waiting for fewer could read the trace before the Tool Pod's last.
    memory = any(n.startswith("memory POST") for n in names)
    return len(runs) == 2 and len(model_calls) >= 5 and memory


def test_one_governed_turn_with_an_approval_is_one_trace_across_the_processes(
    platform: ObservedPlatform, llm_peer: RunningLLMPeer, jaeger: Jaeger
) -> None:
    llm_peer.push(
        Turn.calls(("transfer", {"amount": 5, "to": PLANTED_ARGUMENT})),
        Turn.answer("sent"),
    )
    trace_id = secrets.token_hex(16)
    client_span = secrets.token_hex(8)
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={"agent": AGENT, "input": {"mode": "llm", "text": "send 5", "remember": "wants receipts"}},
            headers={"traceparent": f"00-{trace_id}-{client_span}-01"},
        )
        assert response.status_code == 202, response.text
        execution_id = response.json()["execution_id"]
        assert platform.wait(execution_id)["status"] == "suspended"
        # The reviewer's request is another trace: the resumed run stays in the execution's and links it.
        reviewer_trace = secrets.token_hex(16)
        response = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume",
            json={"decision": "approved"},
            headers={"traceparent": f"00-{reviewer_trace}-{secrets.token_hex(8)}-01"},
        )
        assert response.status_code == 202, response.text
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view

    trace = jaeger.wait_for(trace_id, _complete)
    spans = _spans(trace)
    assert {_service(trace, s) for s in spans.values()} >= {
        "agent-engine-oe",
        "agent-engine-aer",
        "agent-engine-tool",
        "agent-engine-memory",
    }
    # The execution is a child of the client's span; both runs are children of the execution.
    (execution,) = _named(spans, f"execution {AGENT}")
    invoke_request = spans[_parent(execution)]  # type: ignore[index]
    assert invoke_request["operationName"] == "oe POST /invoke"
    assert _parent(invoke_request) == client_span
    assert _tags(execution)["agent.execution.id"] == execution_id
    first, resumed = _named(spans, "run 1"), _named(spans, "run 2 (resume)")
    assert len(first) == 1 and len(resumed) == 1
    assert _parent(first[0]) == _parent(resumed[0]) == execution["spanID"]
    links = [r for r in resumed[0].get("references", []) if r["refType"] == "FOLLOWS_FROM"]
    assert [link["traceID"] for link in links] == [reviewer_trace]
    assert _tags(resumed[0])["agent.run.status"] == "completed"
    # Each run's AER request is under its run span.
    aer_runs = [s for s in spans.values() if s["operationName"].startswith("aer POST /execute")]
    chains = sorted(_ancestors(spans, s)[:1] for s in aer_runs)
    assert chains == [["run 1"], ["run 2 (resume)"]], chains
    # The agent's note to its Memory server (written again by the resumed run, which starts the agent's code
    # over): each Memory server span is under that run's AER request.
    memory_writes = [s for s in spans.values() if s["operationName"].startswith("memory POST")]
    assert {_service(trace, s) for s in memory_writes} == {"agent-engine-memory"}
    memory_chains = sorted(_ancestors(spans, s)[:2] for s in memory_writes)
    assert [chain[1] for chain in memory_chains] == ["run 1", "run 2 (resume)"], memory_chains
    assert all(chain[0].startswith("aer POST /execute") for chain in memory_chains), memory_chains

    # The steps: the OE's step spans sit under the AER's requests, with the OE's decisions.
    transfers = _named(spans, "execute_tool transfer")
    assert [_tags(s)["agent.decision"] for s in transfers] == ["approval", "approved"]
    assert _tags(transfers[1])["agent.route"] == "tool_pod"
    assert _tags(transfers[1])["gen_ai.tool.name"] == "transfer"
    for step in transfers:
        chain = _ancestors(spans, step)
        assert any(name.startswith("aer POST /execute") for name in chain), chain
        assert chain[-2:] == [f"execution {AGENT}", "oe POST /invoke"], chain
    model_steps = _named(spans, "chat main")
    oe_models = [s for s in model_steps if _service(trace, s) == "agent-engine-oe"]
    cached = [s for s in oe_models if _tags(s)["agent.from_cache"] is True]
    assert len(cached) == 1  # the resume replayed the first model call
    fresh = [s for s in oe_models if _tags(s)["agent.from_cache"] is False]
    for step in fresh:
        tags = _tags(step)
        assert tags["gen_ai.operation.name"] == "chat"
        assert tags["gen_ai.request.model"] == "loop-model"
        assert tags["gen_ai.usage.input_tokens"] > 0 and tags["gen_ai.usage.output_tokens"] > 0
        assert tags["agent.usage.cost"] > 0
    # The Tool Pod's model span is under the OE's step; it is the provider's HTTP call (a client span naming
    # the provider's address and the response's status), with no second span for the same request.
    tool_models = [s for s in model_steps if _service(trace, s) == "agent-engine-tool"]
    assert len(tool_models) == len(fresh)
    for span in tool_models:
        _assert_provider_call(span, llm_peer)
        assert _tags(span)["gen_ai.usage.input_tokens"] > 0
        parent = spans[_parent(span)]  # type: ignore[index]
        assert (parent["operationName"], _service(trace, parent)) == ("chat main", "agent-engine-oe")
        assert [s for s in spans.values() if _parent(s) == span["spanID"]] == []

    # No span (names, attributes, events) holds a planted secret or an argument.
    text = json.dumps(trace)
    for secret in (*PLANTED, PLANTED_ARGUMENT):
        assert secret not in text

    # Usage and cost on the execution, summed from its model steps; the audit shows each step's usage.
    usage = view["usage"]
    assert usage["model_steps"] == 2 and usage["currency"] == "USD"
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    expected = (usage["input_tokens"] * 2.0 + usage["output_tokens"] * 8.0) / 1_000_000
    assert usage["cost"] == pytest.approx(expected)
    audit_usage = [r["usage"] for r in platform.audit(execution_id) if r["kind"] == "llm" and r["usage"]]
    assert sum(u["input_tokens"] for u in audit_usage) >= usage["input_tokens"]


def test_a_streamed_model_call_has_the_model_span_with_its_usage(
    platform: ObservedPlatform, llm_peer: RunningLLMPeer, jaeger: Jaeger
) -> None:
    """The streaming route (POST /invoke_llm with stream, NDJSON): the Tool Pod's model span under the OE's
    step, the usage from the stream's usage chunk on both, the provider's HTTP call under it."""
    llm_peer.push(Turn.answer("streamed words for the span"))
    trace_id = secrets.token_hex(16)
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={"agent": AGENT, "input": {"mode": "astream", "text": "go"}, "stream": True},
            headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"},
        )
        assert response.status_code == 202, response.text
        execution_id = response.json()["execution_id"]
    assert platform.wait(execution_id, "completed", "failed")["status"] == "completed"

    def complete(trace: dict[str, Any]) -> bool:
        services = {_service(trace, s) for s in trace["spans"] if s["operationName"] == "chat main"}
        return services == {"agent-engine-oe", "agent-engine-tool"}

    trace = jaeger.wait_for(trace_id, complete)
    spans = _spans(trace)
    (step,) = [s for s in _named(spans, "chat main") if _service(trace, s) == "agent-engine-oe"]
    (model,) = [s for s in _named(spans, "chat main") if _service(trace, s) == "agent-engine-tool"]
    assert _parent(model) == step["spanID"]
    for span in (step, model):
        tags = _tags(span)
        assert tags["gen_ai.operation.name"] == "chat"
        assert tags["gen_ai.request.model"] == "loop-model"
        assert tags["gen_ai.usage.input_tokens"] > 0 and tags["gen_ai.usage.output_tokens"] > 0
    assert _tags(step)["agent.usage.cost"] > 0
    _assert_provider_call(model, llm_peer)
    assert [s for s in spans.values() if _parent(s) == model["spanID"]] == []
    assert "streamed words" not in json.dumps(trace)  # the answer is never an attribute

    # The status polls above (no traceparent) started no trace; a read inside a caller's trace is a span.
    read_trace = secrets.token_hex(16)
    with platform.client() as client:
        read = client.get(
            f"/execution/{execution_id}",
            headers={"traceparent": f"00-{read_trace}-{secrets.token_hex(8)}-01"},
        )
        assert read.status_code == 200
    jaeger.wait_for(
        read_trace, lambda t: [s["operationName"] for s in t["spans"]] == ["oe GET /execution/{id}"]
    )
    untraced = httpx.get(
        f"{jaeger.query_url}/api/traces",
        params={"service": "agent-engine-oe", "operation": "oe GET /execution/{id}", "limit": 100},
        timeout=5,
    ).json()["data"]
    assert [t["traceID"] for t in untraced] == [read_trace]


@pytest.fixture
def arguments_platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str, jaeger: Jaeger
) -> ObservedPlatform:
    observe = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "AGENTIC_TRACING_ARGUMENTS": "true",
    }
    return _platform(tmp_path, spawn, llm_peer, provider_url, observe)


def test_arguments_are_span_attributes_only_when_asked_and_then_redacted_as_the_audit(
    arguments_platform: ObservedPlatform, jaeger: Jaeger
) -> None:
    platform = arguments_platform
    text = f"hello {PLANTED_ARGUMENT} {RUNTIME_TOKEN}"
    trace_id = secrets.token_hex(16)
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={"agent": AGENT, "input": {"mode": "calls", "calls": [["shout", {"text": text}]]}},
            headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"},
        )
        assert response.status_code == 202, response.text
        execution_id = response.json()["execution_id"]
    assert platform.wait(execution_id, "completed", "failed")["status"] == "completed"
    trace = jaeger.wait_for(
        trace_id, lambda t: any(s["operationName"] == "execute_tool shout" for s in t["spans"])
    )
    (step,) = _named(_spans(trace), "execute_tool shout")
    attributes = json.loads(_tags(step)["agent.arguments"])
    (record,) = [r for r in platform.audit(execution_id) if r["kind"] == "tool" and r["tool"] == "shout"]
    assert attributes == record["args"]  # redacted exactly as the audit is
    assert PLANTED_ARGUMENT in attributes["text"]  # an ordinary argument is there, as asked
    assert RUNTIME_TOKEN not in json.dumps(trace)  # a secret in an argument is not


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def _scrape(platform: ObservedPlatform) -> dict[str, list[tuple[dict[str, str], float]]]:
    return _samples(httpx.get(f"{platform.oe_url}/metrics").text)


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for got, v in samples.get(name, []) if all(got.get(k) == w for k, w in labels.items()))


def test_the_oe_metrics_count_each_series_a_platform_team_alerts_on(
    metered_platform: ObservedPlatform, llm_peer: RunningLLMPeer
) -> None:
    platform = metered_platform
    # An approved turn (a replay hit on the resume), a cancelled one (a drain), one with no Tool Pod.
    llm_peer.push(Turn.calls(("transfer", {"amount": 1, "to": "x"})), Turn.answer("sent"))
    approved = platform.invoke({"mode": "llm", "text": "send 1"})
    assert platform.wait(approved)["status"] == "suspended"
    with platform.client() as client:
        resume = f"/api/v1/projects/team-a/executions/{approved}/resume"
        assert client.post(resume, json={"decision": "approved"}).status_code == 202
        assert platform.wait(approved, "completed", "failed")["status"] == "completed"
        llm_peer.push(Turn.calls(("transfer", {"amount": 2, "to": "y"})))
        cancelled = platform.invoke({"mode": "llm", "text": "send 2"})
        assert platform.wait(cancelled)["status"] == "suspended"
        assert client.post(f"/execution/{cancelled}/cancel").status_code in (200, 202)
        for _ in range(200):  # the drain ends in the background
            if _value(_scrape(platform), "agent_engine_drains_total", kind="drain"):
                break
            time.sleep(0.1)
        platform.processes["tool"].stop()
        unreachable = platform.invoke({"mode": "calls", "calls": [["shout", {"text": "a"}]]})
        assert platform.wait(unreachable, "completed", "failed")["status"] == "completed"
    text = httpx.get(f"{platform.oe_url}/metrics").text
    samples = _samples(text)
    where = {"namespace": "team-a", "agent": "loop"}
    assert _value(samples, "agent_engine_executions_total", **where, outcome="completed") == 2
    assert _value(samples, "agent_engine_executions_total", **where, outcome="suspended") == 2
    assert _value(samples, "agent_engine_executions_total", **where, outcome="cancelled") == 1
    assert _value(samples, "agent_engine_steps_total", **where, kind="tool", decision="approval") == 2
    assert _value(samples, "agent_engine_steps_total", **where, kind="tool", decision="approved") == 1
    assert _value(samples, "agent_engine_steps_total", **where, kind="llm", decision="allow") == 3
    assert _value(samples, "agent_engine_step_duration_seconds_count", **where, kind="llm") == 3
    assert _value(samples, "agent_engine_replay_hits_total", **where) == 1
    assert _value(samples, "agent_engine_tool_pod_unreachable_total", **where) == 1
    assert _value(samples, "agent_engine_tokens_total", **where, model="loop-model", type="input") > 0
    assert _value(samples, "agent_engine_tokens_total", **where, model="loop-model", type="output") > 0
    assert _value(samples, "agent_engine_cost_total", **where, model="loop-model") > 0
    assert _value(samples, "agent_engine_approval_wait_seconds_count", **where, decision="approved") == 1
    # Every registered Agent has the gauge; nothing waits now (the cancelled one no longer does).
    waiting = [labels for labels, _ in samples["agent_engine_approvals_waiting"]]
    assert where in waiting and _value(samples, "agent_engine_approvals_waiting", **where) == 0
    assert _value(samples, "agent_engine_drains_total", **where, kind="drain") == 1
