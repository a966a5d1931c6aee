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

import numpy as np

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
    """BM25 over a fixed set of documents (id, text, metadata a filter reads); scored with numpy."""

    def __init__(self, documents: Iterable[tuple[str, str, Any]]) -> None:
        self.ids: list[str] = []
        self.meta: list[Any] = []
        lengths: list[int] = []
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for doc_id, text, meta in documents:
            position = len(self.ids)
            counts = Counter(words(text))
            self.ids.append(doc_id)
            self.meta.append(meta)
            lengths.append(sum(counts.values()))
            for term, count in counts.items():
                where, how_many = postings.setdefault(term, ([], []))
                where.append(position)
                how_many.append(count)
        self.lengths = np.asarray(lengths, dtype=np.float32)
        self.average = float(self.lengths.mean()) if lengths else 0.0
        self.postings = {
            term: (np.asarray(where, dtype=np.int64), np.asarray(how_many, dtype=np.float32))
            for term, (where, how_many) in postings.items()
        }

    def __len__(self) -> int:
        return len(self.ids)

    def top(
        self, query: str, *, limit: int, keep: Callable[[Any], bool] | None = None
    ) -> list[tuple[str, float]]:
        """The best `limit` (id, score) pairs among the documents `keep` accepts, best first."""
        n = len(self.ids)
        scores = np.zeros(n, dtype=np.float32)
        for term in set(words(query)):
            found = self.postings.get(term)
            if found is None:
                continue
            where, counts = found
            idf = math.log(1 + (n - len(where) + 0.5) / (len(where) + 0.5))
            norm = K1 * (1 - B + B * self.lengths[where] / self.average)
            scores[where] += idf * counts * (K1 + 1) / (counts + norm)  # one posting per document and term
        hits = np.flatnonzero(scores)
        if keep is None and len(hits) > limit:
            hits = hits[np.argpartition(-scores[hits], limit - 1)[:limit]]
        ordered = hits[np.lexsort((hits, -scores[hits]))]
        results = []
        for position in ordered:
            if keep is None or keep(self.meta[position]):
                results.append((self.ids[position], float(scores[position])))
                if len(results) == limit:
                    break
        return results


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
