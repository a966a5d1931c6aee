"""The 200,000-byte cap on an MCP tool result names each block it leaves out."""

from agent_runtime.connectors.mcp.client import MAX_RESPONSE_BYTES, _capped_result


def test_a_dropped_block_is_named_with_its_index_type_and_size() -> None:
    image = {"type": "image", "data": "A" * MAX_RESPONSE_BYTES, "mimeType": "image/png"}
    out = _capped_result({"content": [{"type": "text", "text": "hi"}, image]})
    assert out["truncated"] is True
    assert out["content"] == [{"type": "text", "text": "hi"}]
    assert out["dropped"] == [{"index": 1, "type": "image", "bytes": MAX_RESPONSE_BYTES + 54}]


def test_dropped_structured_content_is_named() -> None:
    out = _capped_result({"content": [], "structuredContent": {"x": "y" * MAX_RESPONSE_BYTES}})
    assert out["dropped"][0]["type"] == "structuredContent"
    assert "structuredContent" not in out


def test_a_result_within_the_cap_has_no_dropped_list() -> None:
    assert "dropped" not in _capped_result({"content": [{"type": "text", "text": "ok"}]})
