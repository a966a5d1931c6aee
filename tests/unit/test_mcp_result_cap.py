"""The 200,000-byte cap on an MCP tool result names each block it leaves out."""

from agent_runtime.connectors.mcp.result import json_size, model_result
from agent_runtime.connectors.policy import MAX_RESPONSE_BYTES


def capped(result: dict, *, declares_output: bool = False) -> dict:
    return model_result(result, declares_output=declares_output)


def test_a_dropped_block_is_named_with_its_index_type_and_size() -> None:
    image = {"type": "image", "data": "A" * MAX_RESPONSE_BYTES, "mimeType": "image/png"}
    out = capped({"content": [{"type": "text", "text": "hi"}, image]})
    assert out["truncated"] is True
    assert out["content"] == [{"type": "text", "text": "hi"}]
    assert out["dropped"] == [{"index": 1, "type": "image", "bytes": json_size(image)}]


def test_dropped_structured_content_is_named() -> None:
    out = capped({"content": [], "structuredContent": {"x": "y" * MAX_RESPONSE_BYTES}})
    assert out["dropped"][0] == {"index": None, "type": "structuredContent", "bytes": MAX_RESPONSE_BYTES + 8}
    assert "structuredContent" not in out


def test_a_result_within_the_cap_has_no_dropped_list() -> None:
    assert "dropped" not in capped({"content": [{"type": "text", "text": "ok"}]})


def test_a_cut_text_block_marks_the_result_truncated_without_naming_it_dropped() -> None:
    out = capped({"content": [{"type": "text", "text": "z" * (2 * MAX_RESPONSE_BYTES)}]})
    assert out["truncated"] is True and "dropped" not in out
    assert MAX_RESPONSE_BYTES - 4096 < json_size(out) <= MAX_RESPONSE_BYTES


def test_many_dropped_blocks_are_named_up_to_a_bound_and_the_result_stays_within_the_cap() -> None:
    blocks = [{"type": "image", "data": "B" * 20_000, "mimeType": "image/png"} for _ in range(400)]
    out = capped({"content": blocks})
    assert out["dropped"][-1] == {"index": None, "type": "more", "count": 400 - 9 - 16}
    assert len(out["dropped"]) == 17 and len(out["content"]) == 9
    assert json_size(out) <= MAX_RESPONSE_BYTES
