"""The knowledge-base quality corpus: the project's own docs and READMEs cut into one document per section,
the runtime contracts' numbered items, and the CRDs' field descriptions (the Kubernetes API reference of
our resources); the question set in data/knowledge_questions.json; and BM25 over the same chunks as the
baseline the embeddings' recall is measured against.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from agent_runtime.memory.chunking import chunk_document
from tests.conftest import REPO_ROOT

QUESTIONS = Path(__file__).parent / "data" / "knowledge_questions.json"
CONTRACTS = REPO_ROOT.parent / "shared" / "specs" / "runtime-contracts.md"
_WORD = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class Document:
    source: str
    title: str
    text: str
    content_type: str = "markdown"


@dataclass(frozen=True)
class Question:
    q: str
    expect: str


def _sections(path: Path, *, level: str) -> Iterable[Document]:
    """One document per `level` heading (the text before the first one is a document too)."""
    text = path.read_text(encoding="utf-8")
    name = (
        path.relative_to(REPO_ROOT.parent).as_posix() if path.is_relative_to(REPO_ROOT.parent) else path.name
    )
    parts = re.split(rf"(?m)^(?={re.escape(level)} )", text)
    for index, part in enumerate(parts):
        if len(part.strip()) < 80:
            continue
        heading = part.splitlines()[0].lstrip("#").strip() if part.startswith(level) else path.stem
        yield Document(source=f"{name}#{index}", title=f"{path.name}: {heading}"[:256], text=part)


def _crd_descriptions() -> Iterable[Document]:
    def walk(schema: dict, path: str) -> Iterable[tuple[str, str]]:
        description = schema.get("description")
        if isinstance(description, str) and len(description) > 60:
            yield path, description
        for key, value in (schema.get("properties") or {}).items():
            yield from walk(value, f"{path}.{key}")
        if isinstance(schema.get("items"), dict):
            yield from walk(schema["items"], f"{path}[]")

    for crd in sorted((REPO_ROOT / "crds").glob("agentengine.io_*.yaml")):
        for document in yaml.safe_load_all(crd.read_text()):
            kind = document["spec"]["names"]["kind"]
            for version in document["spec"]["versions"]:
                for path, description in walk(version["schema"]["openAPIV3Schema"], kind):
                    yield Document(
                        source=f"crd:{path}", title=path, text=f"{path}\n\n{description}", content_type="text"
                    )


def documents() -> list[Document]:
    files = sorted((REPO_ROOT / "docs").glob("*.md"))
    files += [REPO_ROOT / "README.md", REPO_ROOT / "runtime/agent_runtime/connectors/README.md"]
    docs = [doc for path in files for doc in _sections(path, level="##")]
    if CONTRACTS.exists():
        docs += list(_sections(CONTRACTS, level="###"))
    docs += list(_crd_descriptions())
    return docs


def questions() -> list[Question]:
    return [Question(**item) for item in json.loads(QUESTIONS.read_text())["questions"]]


def normalized(text: str) -> str:
    return " ".join(text.lower().split())


def answered(question: Question, texts: Sequence[str]) -> bool:
    wanted = normalized(question.expect)
    return any(wanted in normalized(text) for text in texts)


def chunks_of(doc: Document) -> list[str]:
    """The chunks the Memory server cuts from `doc` (the same pure function, with its defaults)."""
    return [c.text for c in chunk_document(doc.text, content_type=doc.content_type, title=doc.title)]  # type: ignore[arg-type]


class BM25:
    """Okapi BM25 (k1 1.5, b 0.75) over lower-cased word tokens: the lexical baseline."""

    def __init__(self, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.texts = list(texts)
        self.k1, self.b = k1, b
        self.terms = [Counter(_WORD.findall(text.lower())) for text in self.texts]
        self.lengths = [sum(t.values()) for t in self.terms]
        self.average = sum(self.lengths) / max(len(self.lengths), 1)
        frequency: Counter[str] = Counter()
        for terms in self.terms:
            frequency.update(terms.keys())
        n = len(self.texts)
        self.idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def top(self, query: str, k: int) -> list[str]:
        words = _WORD.findall(query.lower())
        scores = []
        for index, terms in enumerate(self.terms):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[index] / self.average)
            score = sum(
                self.idf.get(w, 0.0) * terms[w] * (self.k1 + 1) / (terms[w] + norm)
                for w in words
                if w in terms
            )
            scores.append((score, index))
        scores.sort(key=lambda pair: -pair[0])
        return [self.texts[index] for _, index in scores[:k]]
