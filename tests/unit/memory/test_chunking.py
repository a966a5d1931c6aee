"""The knowledge chunker (pure): markdown by headings, overlap between windows, limits kept."""

from __future__ import annotations

import itertools

import pytest

from agent_runtime.memory.chunking import chunk_document


def test_markdown_is_cut_at_headings_with_their_path() -> None:
    text = "# Guide\n\nIntro.\n\n## Install\n\nRun make.\n\n### On macOS\n\nUse brew.\n\n## Use\n\nCall it."
    chunks = chunk_document(text, title="guide.md")
    assert [c.headings for c in chunks] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "On macOS"),
        ("Guide", "Use"),
    ]
    assert chunks[2].text == "guide.md > Guide > Install > On macOS\n\nUse brew."
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    assert text[chunks[3].start :].startswith("Call it.")


def test_a_heading_inside_a_code_fence_is_not_a_heading() -> None:
    text = "# A\n\n```sh\n# not a heading\necho hi\n```\n\n# B\n\ntext"
    chunks = chunk_document(text)
    assert [c.headings for c in chunks] == [("A",), ("B",)]
    assert "# not a heading" in chunks[0].text


def test_long_sections_are_windows_that_overlap() -> None:
    paragraphs = [f"Paragraph {i} says something about topic {i} in a few words." for i in range(60)]
    chunks = chunk_document("\n\n".join(paragraphs), content_type="text", max_chars=400, overlap_chars=80)
    assert len(chunks) > 5
    assert all(len(c.text) <= 400 for c in chunks)
    for before, after in itertools.pairwise(chunks):
        assert after.text[:40] in before.text  # the next window starts with the previous one's tail
    joined = " ".join(c.text for c in chunks)
    assert all(p in joined for p in paragraphs)  # nothing is lost


def test_a_paragraph_longer_than_a_chunk_is_cut_at_sentences_then_words() -> None:
    text = " ".join(["word"] * 2000) + ". " + "Short sentence."
    chunks = chunk_document(text, content_type="text", max_chars=300, overlap_chars=0)
    assert all(len(c.text) <= 300 for c in chunks)
    assert chunks[-1].text.endswith("Short sentence.")


def test_empty_and_heading_only_documents() -> None:
    assert chunk_document("   \n", content_type="text") == []
    only = chunk_document("# Title\n\n## Sub\n")
    assert len(only) == 1 and "Title" in only[0].text


@pytest.mark.parametrize(("max_chars", "overlap"), [(100, 0), (400, 300)])
def test_bad_sizes_are_refused(max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError, match=r"max_chars|overlap_chars"):
        chunk_document("x", max_chars=max_chars, overlap_chars=overlap)
