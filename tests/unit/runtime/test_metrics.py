from agent_runtime.servers.metrics import ToolMetrics


def test_calls_errors_latency_and_in_flight() -> None:
    metrics = ToolMetrics(component="tool", known_tools=frozenset({"get_pet"}))
    metrics.call_started()
    metrics.call_started()
    metrics.call_finished(tool="get_pet", error_category=None, duration_s=0.002)
    metrics.call_finished(tool="rm -rf", error_category="unknown_tool", duration_s=0.0001)
    text, content_type = metrics.exposition()
    body = text.decode()
    assert content_type.startswith("text/plain")
    assert 'agent_runtime_tool_calls_total{component="tool",status="success",tool="get_pet"} 1.0' in body
    assert (
        'agent_runtime_tool_call_errors_total{category="unknown_tool",component="tool",tool="<unknown>"} 1.0'
        in body
    )
    assert 'agent_runtime_tool_call_duration_seconds_count{component="tool",tool="get_pet"} 1.0' in body
    assert 'agent_runtime_tool_calls_in_flight{component="tool"} 0.0' in body
    assert "rm -rf" not in body  # caller-supplied names never become label values
    assert "process_cpu_seconds_total" in body and "python_info" in body
