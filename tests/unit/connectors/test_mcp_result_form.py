"""Which form of an MCP result the model is sent: one, never both (`connectors/mcp/result.py`)."""

import pytest

from agent_runtime.connectors.mcp.result import chosen_form, json_size, model_result
from agent_runtime.connectors.policy import MAX_RESPONSE_BYTES

ITEM = {"id": "7", "name": "item 7"}
BOTH = {"content": [{"type": "text", "text": '{"id": "7", "name": "item 7"}'}], "structuredContent": ITEM}


@pytest.mark.parametrize(
    ("result", "declares_output", "form"),
    [
        (BOTH, True, "structured"),
        (BOTH, False, "content"),
        ({"content": [{"type": "text", "text": "hi"}]}, True, "content"),  # declared, not sent: the text
        ({"content": [], "structuredContent": ITEM}, False, "structured"),  # nothing else to send
        ({"structuredContent": ITEM}, False, "structured"),
        ({"content": [{"type": "text", "text": "hi"}], "structuredContent": None}, True, "content"),
        ({}, True, "content"),
    ],
)
def test_the_form_chosen(result: dict, declares_output: bool, form: str) -> None:
    assert chosen_form(result, declares_output=declares_output) == form


def test_structured_form_drops_the_text_copy_and_keeps_other_blocks() -> None:
    image = {"type": "image", "data": "iVBOR", "mimeType": "image/png"}
    out = model_result({**BOTH, "content": [*BOTH["content"], image]}, declares_output=True)
    assert out == {"structuredContent": ITEM, "truncated": False, "content": [image]}


def test_content_form_drops_the_structured_copy() -> None:
    assert model_result(BOTH, declares_output=False) == {"content": BOTH["content"], "truncated": False}


def test_a_result_sent_both_ways_near_the_cap_fits_once() -> None:
    big = {"payload": "p" * 150_000}
    result = {"content": [{"type": "text", "text": str(big)}], "structuredContent": big}
    out = model_result(result, declares_output=True)
    assert out == {"structuredContent": big, "truncated": False}
    assert json_size(out) <= MAX_RESPONSE_BYTES
    text = model_result(result, declares_output=False)
    assert text["truncated"] is False and "structuredContent" not in text


def test_structured_content_over_the_cap_gives_way_to_its_text_cut() -> None:
    big = {"payload": "p" * 300_000}
    result = {"content": [{"type": "text", "text": str(big)}], "structuredContent": big}
    out = model_result(result, declares_output=True)
    assert out["truncated"] is True and "structuredContent" not in out
    assert out["dropped"] == [{"index": None, "type": "structuredContent", "bytes": json_size(big)}]
    assert out["content"][0]["text"].startswith("{'payload': 'ppp")
    assert json_size(out) <= MAX_RESPONSE_BYTES


@pytest.mark.parametrize("character", ['"', "\x01", "\\", "\u00e9", "a"])
def test_a_cut_text_fits_the_cap_however_its_characters_escape(character: str) -> None:
    """A quote takes two bytes in JSON and a control character six: the cut counts the JSON, not the text."""
    out = model_result({"content": [{"type": "text", "text": character * 300_000}]}, declares_output=False)
    assert out["truncated"] is True
    assert MAX_RESPONSE_BYTES - 10_000 < json_size(out) <= MAX_RESPONSE_BYTES
