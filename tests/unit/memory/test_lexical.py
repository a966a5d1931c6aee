"""BM25 over postings and reciprocal-rank fusion (pure)."""

from __future__ import annotations

from agent_runtime.memory.lexical import LexicalIndex, fuse, words


def test_words_drop_case_punctuation_and_stopwords() -> None:
    assert words("What is the X-CSRF-Token for?") == ["x", "csrf", "token"]
    assert words("gc.freeze() at start-up") == ["gc", "freeze", "start", "up"]


def test_bm25_prefers_rare_terms_and_applies_the_filter() -> None:
    index = LexicalIndex(
        [
            ("a", "the console checks the X-CSRF-Token header", {"area": "console"}),
            ("b", "the console lists executions and the console shows steps", {"area": "console"}),
            ("c", "tokens rotate; the runtime token file is read again", {"area": "credentials"}),
        ]
    )
    assert [doc for doc, _ in index.top("csrf token", limit=3)] == ["a", "c"]
    assert index.top("console", limit=1)[0][0] == "b"  # two mentions in a document of the same length
    assert index.top("token", limit=3, keep=lambda meta: meta["area"] == "credentials") == [
        ("c", index.top("token", limit=3)[1][1])
    ]
    assert index.top("nothing matches this", limit=3) == []
    assert LexicalIndex([]).top("x", limit=1) == []


def test_fusion_rewards_agreement_and_keeps_first_seen_order_on_ties() -> None:
    fused = fuse([["x", "y", "z"], ["y", "w"]], limit=3)
    assert [item for item, _ in fused] == ["y", "x", "w"]
    assert fused[0][1] == 1 / 62 + 1 / 61
    assert [item for item, _ in fuse([["p"], ["q"]], limit=2)] == ["p", "q"]
