"""A lexical index (Okapi BM25 over lower-cased word tokens) and reciprocal-rank fusion, both pure.

The knowledge base ranks by meaning and by words together: an embedding finds paraphrases, BM25 finds
the identifiers (`X-CSRF-Token`, `gc.freeze()`) a small model blurs. Postings lists make a query cost
the documents that share a word with it, not the whole corpus.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

_WORD = re.compile(r"[a-z0-9_]+")
K1 = 1.5
B = 0.75
RRF_C = 60
# Words that say nothing about a topic: left out of both sides, so a question's "what are" never outranks
# what it asks about in a small knowledge base.
_STOPWORD_TEXT = (
    "a an and are as at be but by can could do does did for from has have how i if in into is it its me my "
    "no not of on or our should so than that the their them then there these they this to us was we were "
    "what when where which who whom why will with would you your"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if word not in STOPWORDS]


class LexicalIndex:
    """BM25 over a fixed set of documents (id, text, metadata a filter reads)."""

    def __init__(self, documents: Iterable[tuple[str, str, Any]]) -> None:
        self.ids: list[str] = []
        self.meta: list[Any] = []
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for doc_id, text, meta in documents:
            position = len(self.ids)
            counts = Counter(words(text))
            self.ids.append(doc_id)
            self.meta.append(meta)
            self.lengths.append(sum(counts.values()))
            for term, count in counts.items():
                self.postings.setdefault(term, []).append((position, count))
        self.average = sum(self.lengths) / len(self.lengths) if self.lengths else 0.0

    def __len__(self) -> int:
        return len(self.ids)

    def top(
        self, query: str, *, limit: int, keep: Callable[[Any], bool] | None = None
    ) -> list[tuple[str, float]]:
        """The best `limit` (id, score) pairs among the documents `keep` accepts, best first."""
        n = len(self.ids)
        scores: dict[int, float] = {}
        for term in set(words(query)):
            postings = self.postings.get(term)
            if not postings:
                continue
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for position, count in postings:
                norm = K1 * (1 - B + B * self.lengths[position] / self.average)
                scores[position] = scores.get(position, 0.0) + idf * count * (K1 + 1) / (count + norm)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        found = []
        for position, score in ranked:
            if keep is None or keep(self.meta[position]):
                found.append((self.ids[position], score))
                if len(found) == limit:
                    break
        return found


def fuse(rankings: Sequence[Sequence[str]], *, limit: int, c: int = RRF_C) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: each id scores the sum of 1/(c + rank) over the rankings it is in."""
    scores: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (c + rank + 1)
            first_seen.setdefault(item, len(first_seen))
    ordered = sorted(scores, key=lambda item: (-scores[item], first_seen[item]))
    return [(item, scores[item]) for item in ordered[:limit]]
